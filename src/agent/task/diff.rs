//! Unified diffs for the task result and edit events.
//!
//! A file past [`MAX_DIFF_FILE_BYTES`], or one with a NUL byte near its
//! start (git's test for binary), is described by its size and SHA-256
//! instead: a command that writes a gigabyte of zeros must not become a
//! gigabyte of diff (six of JSON, where each NUL is `\u0000`).

/// The largest side of a diff shown line by line.
pub const MAX_DIFF_FILE_BYTES: u64 = 1024 * 1024;
/// Past this, the task's diff names no more files (they are counted).
pub const MAX_DIFF_BYTES: usize = 16 * 1024 * 1024;
/// How far into a file a NUL makes it binary (as git looks).
const BINARY_PROBE: usize = 8000;

/// One side of a diff when it is not shown line by line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub len: u64,
    /// Hex SHA-256 of the content; `None` when it could not be read.
    pub sha256: Option<String>,
}

impl Described {
    pub fn of(bytes: &[u8]) -> Self {
        Self {
            len: bytes.len() as u64,
            sha256: Some(crate::config::trust::sha256_hex(bytes)),
        }
    }

    fn text(&self) -> String {
        match &self.sha256 {
            Some(hash) => format!("{} bytes, sha256 {hash}", self.len),
            None => format!("{} bytes", self.len),
        }
    }
}

/// Lowercase hex of a digest computed elsewhere (a file hashed in chunks).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `bytes` are shown as a size and a hash rather than lines.
pub fn not_shown(bytes: &[u8]) -> bool {
    bytes.len() as u64 > MAX_DIFF_FILE_BYTES || bytes[..bytes.len().min(BINARY_PROBE)].contains(&0)
}

/// A `git diff`-style unified diff of one file; `None` means absent. Empty
/// when nothing changed; for binary or huge content, a note with the sizes
/// and hashes.
pub fn unified(path: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> String {
    if before == after {
        return String::new();
    }
    let big = before.is_some_and(not_shown) || after.is_some_and(not_shown);
    let texts = (
        std::str::from_utf8(before.unwrap_or_default()),
        std::str::from_utf8(after.unwrap_or_default()),
    );
    let (false, Ok(old), Ok(new)) = (big, texts.0, texts.1) else {
        return described(
            path,
            before.map(Described::of).as_ref(),
            after.map(Described::of).as_ref(),
        );
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

/// The note for a file not shown line by line: what it was and is.
pub fn described(path: &str, before: Option<&Described>, after: Option<&Described>) -> String {
    let side = |d: Option<&Described>| d.map_or_else(|| "absent".to_owned(), Described::text);
    format!(
        "diff --git a/{path} b/{path}\nBinary or large file {path} changed ({} → {}); its content is not shown\n",
        side(before),
        side(after)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest as _;

    #[test]
    fn text_files_get_a_unified_diff() {
        let out = unified("a.txt", Some(b"one\n"), Some(b"two\n"));
        assert!(out.contains("-one\n+two\n"), "{out}");
    }

    #[test]
    fn zeros_and_huge_files_get_size_and_hash() {
        let zeros = vec![0u8; 100];
        let out = unified("big.bin", None, Some(&zeros));
        assert!(out.contains("absent → 100 bytes, sha256 "), "{out}");
        assert!(!out.contains('\0'));
        let huge = "x\n".repeat(MAX_DIFF_FILE_BYTES as usize);
        let out = unified("huge.txt", Some(b"x\n"), Some(huge.as_bytes()));
        assert!(out.len() < 400, "{out}");
        assert!(
            out.contains(&format!(
                "2 bytes, sha256 {}",
                hex(&sha2::Sha256::digest(b"x\n"))
            )),
            "{out}"
        );
    }
}
