//! A unified diff in the model's words as edits: shown its earlier
//! attempts as diffs, a small model sometimes answers with a diff too
//! (seen with Qwen2.5-Coder-1.5B on QuixBugs `bucketsort`, in a block
//! labelled `python`). Each hunk becomes a search/replace edit — its
//! context and removed lines the search, its context and added lines the
//! replacement — so the line numbers in `@@` headers, which models get
//! wrong, do not matter, and every check an `edit` call gets applies.

/// One hunk of a diff as an edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffEdit {
    /// The file its header names (`+++ b/path`), if any.
    pub path: Option<String>,
    pub search: String,
    pub replace: String,
}

/// The hunks of `code` when it is a unified diff (it has a `@@` hunk
/// header and `-`/`+` lines); `None` when it is not one. A hunk that
/// cannot be an edit — one that only adds lines with no context to place
/// them, or quotes an elision marker instead of the lines — is left out.
pub fn diff_edits(code: &str) -> Option<Vec<DiffEdit>> {
    let lines: Vec<&str> = code.lines().collect();
    if !lines.iter().any(|l| l.starts_with("@@")) {
        return None;
    }
    let mut out = Vec::new();
    let mut path: Option<String> = None;
    let mut hunk: Option<(Vec<&str>, Vec<&str>, bool)> = None;
    let mut changes = false;
    let finish = |hunk: Option<(Vec<&str>, Vec<&str>, bool)>,
                  path: &Option<String>,
                  out: &mut Vec<DiffEdit>| {
        let Some((search, replace, usable)) = hunk else {
            return;
        };
        if !usable || search.iter().all(|l| l.trim().is_empty()) || search == replace {
            return;
        }
        out.push(DiffEdit {
            path: path.clone(),
            search: search.join("\n"),
            replace: replace.join("\n"),
        });
    };
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("@@") {
            finish(hunk.take(), &path, &mut out);
            hunk = Some((Vec::new(), Vec::new(), true));
            continue;
        }
        if let Some(name) = line.strip_prefix("+++ ") {
            finish(hunk.take(), &path, &mut out);
            path = header_path(name);
            continue;
        }
        // A file header, not a removed line `-- …`: `+++ ` follows it.
        if line.starts_with("--- ") && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ ")) {
            finish(hunk.take(), &path, &mut out);
            continue;
        }
        if line.starts_with("diff ") || line.starts_with("index ") {
            finish(hunk.take(), &path, &mut out);
            continue;
        }
        let Some((search, replace, usable)) = hunk.as_mut() else {
            continue;
        };
        if line.starts_with('\\') {
            // `\ No newline at end of file`
            continue;
        }
        if line.contains("elided") && line.trim_start().starts_with('[') {
            // Our own notes shorten long diffs; a copy of that is not the code.
            *usable = false;
            continue;
        }
        match line.chars().next() {
            Some('+') => {
                replace.push(&line[1..]);
                changes = true;
            }
            Some('-') => {
                search.push(&line[1..]);
                changes = true;
            }
            Some(' ') => {
                search.push(&line[1..]);
                replace.push(&line[1..]);
            }
            // A blank context line whose space the model dropped.
            None => {
                search.push("");
                replace.push("");
            }
            Some(_) => *usable = false,
        }
    }
    finish(hunk.take(), &path, &mut out);
    changes.then_some(out)
}

/// `b/src/x.py` (or `src/x.py`, with a timestamp after a tab) → `src/x.py`;
/// `/dev/null` → none.
fn header_path(name: &str) -> Option<String> {
    let name = name.split('\t').next().unwrap_or_default().trim();
    if name.is_empty() || name == "/dev/null" {
        return None;
    }
    let name = name
        .strip_prefix("b/")
        .or_else(|| name.strip_prefix("a/"))
        .unwrap_or(name);
    Some(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_diff_becomes_one_edit_per_hunk_with_its_context() {
        let diff = "diff --git a/bucketsort.py b/bucketsort.py\n--- a/bucketsort.py\n+++ b/bucketsort.py\n@@ -4,12 +4,12 @@\n         counts[x] += 1\n\n     sorted_arr = []\n-    for i in range(len(arr)):\n+    for i, count in enumerate(counts):\n         sorted_arr.extend([i] * counts[i])\n";
        let edits = diff_edits(diff).unwrap();
        assert_eq!(
            edits,
            vec![DiffEdit {
                path: Some("bucketsort.py".into()),
                search: "        counts[x] += 1\n\n    sorted_arr = []\n    for i in range(len(arr)):\n        sorted_arr.extend([i] * counts[i])".into(),
                replace: "        counts[x] += 1\n\n    sorted_arr = []\n    for i, count in enumerate(counts):\n        sorted_arr.extend([i] * counts[i])".into(),
            }]
        );
    }

    #[test]
    fn hunks_without_headers_or_with_several_files_keep_their_paths() {
        let bare = "@@ -1,2 +1,2 @@\n def f(x):\n-    return x\n+    return x + 1\n";
        let edits = diff_edits(bare).unwrap();
        assert_eq!(edits.len(), 1);
        assert_eq!(edits[0].path, None);
        assert_eq!(edits[0].search, "def f(x):\n    return x");
        let two = "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-b = 1\n+b = 2\n";
        let paths: Vec<_> = diff_edits(two)
            .unwrap()
            .into_iter()
            .map(|e| e.path.unwrap())
            .collect();
        assert_eq!(paths, ["a.py", "b.py"]);
    }

    #[test]
    fn what_is_not_a_usable_diff_gives_no_edit() {
        // Code, not a diff.
        assert_eq!(diff_edits("def f(x):\n    return x - 1\n"), None);
        // A hunk header but no change.
        assert_eq!(diff_edits("@@ -1 +1 @@\n x = 1\n"), None);
        // Our notes' elision marker copied: the lines are not there.
        let elided = "@@ -1,9 +1,9 @@\n def f(x):\n-    a = 1\n[… 5 lines (225 bytes) elided …]\n+    a = 2\n";
        assert_eq!(diff_edits(elided), Some(vec![]));
        // Only added lines, nowhere to put them.
        assert_eq!(diff_edits("@@ -0,0 +1 @@\n+import os\n"), Some(vec![]));
        // Prose inside a hunk.
        assert_eq!(
            diff_edits("@@ -1 +1 @@\n-a = 1\nThis changes a.\n+a = 2\n"),
            Some(vec![])
        );
    }
}
