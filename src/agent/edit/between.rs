//! The edit between two versions of a file: what a candidate fix changed,
//! applied as an edit of those lines only (text the user typed elsewhere
//! meanwhile stays).

use std::path::Path;

use super::FileOp;

/// `+`/`-` lines of a unified diff.
pub fn count_changed_lines(diff: &str) -> usize {
    diff.lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .count()
}

/// The edit that turns `old` into `new`: the changed lines (widened until
/// they occur once), so text the user typed elsewhere meanwhile stays.
pub fn edit_between(path: &Path, old: Option<&str>, new: &str) -> FileOp {
    let Some(old) = old else {
        return FileOp::Write {
            path: path.to_path_buf(),
            content: new.to_owned(),
        };
    };
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    let (mut start, mut end_a, mut end_b) = (prefix, a.len() - suffix, b.len() - suffix);
    loop {
        let search: String = a[start..end_a].concat();
        if !search.is_empty() && old.matches(search.as_str()).count() == 1 {
            return FileOp::Edit {
                path: path.to_path_buf(),
                search,
                replace: b[start..end_b].concat(),
            };
        }
        if start == 0 && end_a == a.len() {
            return FileOp::Write {
                path: path.to_path_buf(),
                content: new.to_owned(),
            };
        }
        start = start.saturating_sub(1);
        if end_a < a.len() {
            end_a += 1;
            end_b += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(old: &str, op: &FileOp) -> String {
        match op {
            FileOp::Edit {
                search, replace, ..
            } => old.replacen(search.as_str(), replace, 1),
            FileOp::Write { content, .. } => content.clone(),
        }
    }

    #[test]
    fn the_edit_between_two_texts_is_the_changed_lines_made_unique() {
        let p = Path::new("/w/a.py");
        let old = "def f(x):\n    return x\n\ndef g(x):\n    return x\n";
        let new = "def f(x):\n    return x\n\ndef g(x):\n    return x + 1\n";
        let op = edit_between(p, Some(old), new);
        assert_eq!(apply(old, &op), new);
        let FileOp::Edit { search, .. } = &op else {
            panic!("an edit, not a rewrite: {op:?}");
        };
        assert_eq!(search, "def g(x):\n    return x\n");
        // A pure insertion and a pure deletion.
        for (old, new) in [
            ("a\nb\nc\n", "a\nb\nx\nc\n"),
            ("a\nb\nx\nc\n", "a\nb\nc\n"),
            ("a\n", "a\nb"),
            ("same\nsame\n", "same\nsame\nsame\n"),
        ] {
            assert_eq!(
                apply(old, &edit_between(p, Some(old), new)),
                new,
                "{old:?} → {new:?}"
            );
        }
        assert!(matches!(edit_between(p, None, "new"), FileOp::Write { .. }));
    }

    #[test]
    fn changed_lines_are_counted_without_the_headers() {
        let diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n c\n";
        assert_eq!(count_changed_lines(diff), 2);
    }
}
