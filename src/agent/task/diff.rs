//! Unified diffs for the task result and edit events.

/// A `git diff`-style unified diff of one file; `None` means absent. Empty
/// when nothing changed; a note for binary content.
pub fn unified(path: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> String {
    if before == after {
        return String::new();
    }
    let (Ok(old), Ok(new)) = (
        std::str::from_utf8(before.unwrap_or_default()),
        std::str::from_utf8(after.unwrap_or_default()),
    ) else {
        return format!("Binary file {path} changed\n");
    };
    let old_name = if before.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_owned()
    };
    let new_name = if after.is_some() {
        format!("b/{path}")
    } else {
        "/dev/null".to_owned()
    };
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = format!("diff --git a/{path} b/{path}\n");
    out.push_str(
        &diff
            .unified_diff()
            .context_radius(3)
            .header(&old_name, &new_name)
            .to_string(),
    );
    out
}
