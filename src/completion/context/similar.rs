//! Identifiers, and code similar to what precedes the cursor.
use std::collections::HashSet;
use std::ops::Range;

/// Lines before the cursor that make the query, and the size of the windows
/// compared with it.
pub(super) const WINDOW_LINES: usize = 20;
/// How far windows slide.
pub(super) const WINDOW_STEP: usize = 10;
/// Least Jaccard similarity a window needs.
pub(super) const MIN_SIMILARITY: f64 = 0.2;

/// The identifiers of `text`, in order: ASCII letters, digits and `_`, not
/// starting with a digit.
pub(super) fn identifiers(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii_alphabetic() || b == b'_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                return Some((start, &text[start..i]));
            }
            if b.is_ascii_digit() {
                // Skip the whole number so `0x1f` yields no `x1f`.
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                continue;
            }
            i += 1;
        }
        None
    })
}

/// Keywords and ubiquitous names of the supported languages: looking them up
/// or counting them as shared vocabulary only adds noise.
pub(super) fn is_common_word(word: &str) -> bool {
    const WORDS: &[&str] = &[
        "Err",
        "None",
        "Ok",
        "Option",
        "Result",
        "Self",
        "Some",
        "String",
        "Vec",
        "and",
        "any",
        "as",
        "async",
        "auto",
        "await",
        "bool",
        "boolean",
        "break",
        "byte",
        "case",
        "catch",
        "char",
        "class",
        "const",
        "continue",
        "crate",
        "def",
        "default",
        "defer",
        "del",
        "delete",
        "do",
        "double",
        "dyn",
        "elif",
        "else",
        "end",
        "enum",
        "except",
        "export",
        "extends",
        "extern",
        "false",
        "final",
        "finally",
        "float",
        "fn",
        "for",
        "from",
        "func",
        "function",
        "go",
        "if",
        "impl",
        "import",
        "in",
        "include",
        "int",
        "interface",
        "is",
        "lambda",
        "let",
        "local",
        "long",
        "loop",
        "match",
        "mod",
        "move",
        "mut",
        "new",
        "nil",
        "not",
        "null",
        "number",
        "or",
        "package",
        "pass",
        "private",
        "protected",
        "pub",
        "public",
        "raise",
        "ref",
        "require",
        "return",
        "self",
        "short",
        "static",
        "str",
        "string",
        "struct",
        "super",
        "switch",
        "then",
        "this",
        "throw",
        "throws",
        "trait",
        "true",
        "try",
        "type",
        "typedef",
        "u8",
        "u16",
        "u32",
        "u64",
        "usize",
        "i8",
        "i16",
        "i32",
        "i64",
        "isize",
        "f32",
        "f64",
        "undefined",
        "unsafe",
        "unsigned",
        "use",
        "var",
        "void",
        "where",
        "while",
        "with",
        "yield",
    ];
    WORDS.contains(&word)
}

/// The identifiers of `text` worth comparing, as a set.
pub(super) fn vocabulary(text: &str) -> HashSet<&str> {
    identifiers(text)
        .map(|(_, w)| w)
        .filter(|w| w.len() >= 2 && !is_common_word(w))
        .collect()
}

/// The best windows of `text` (`WINDOW_LINES` lines, sliding by
/// `WINDOW_STEP`) by Jaccard similarity with `query`, at least
/// [`MIN_SIMILARITY`], best first, not overlapping, at most `keep`.
pub(super) fn best_windows(
    query: &HashSet<&str>,
    text: &str,
    keep: usize,
) -> Vec<(f64, Range<usize>)> {
    if query.is_empty() {
        return Vec::new();
    }
    // Each line's vocabulary once, then windows as unions of lines.
    let lines: Vec<HashSet<&str>> = text.split_inclusive('\n').map(vocabulary).collect();
    let mut scored = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + WINDOW_LINES).min(lines.len());
        if start >= end {
            break;
        }
        let mut window: HashSet<&str> = HashSet::new();
        for line in &lines[start..end] {
            window.extend(line.iter().copied());
        }
        let shared = window.iter().filter(|w| query.contains(*w)).count();
        let union = window.len() + query.len() - shared;
        if union > 0 {
            let score = shared as f64 / union as f64;
            if score >= MIN_SIMILARITY {
                scored.push((score, start..end));
            }
        }
        if end == lines.len() {
            break;
        }
        start += WINDOW_STEP;
    }
    // Best first; on ties the earlier window.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.start.cmp(&b.1.start)));
    let mut out: Vec<(f64, Range<usize>)> = Vec::new();
    for (score, range) in scored {
        if out.len() == keep {
            break;
        }
        if out
            .iter()
            .all(|(_, r)| r.end <= range.start || range.end <= r.start)
        {
            out.push((score, range));
        }
    }
    out
}
