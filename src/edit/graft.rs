//! "Add documentation" keeps the code: the selection with only the
//! documentation that the model's answer adds.
//!
//! Small models asked to document a function add a good docstring and then
//! touch the code too: a stray `"""` copied from the text after the
//! selection, a loop condition taken from a commented-out variant (seen on
//! 3 of 20 QuixBugs functions with the 1.5B coder model). Refusing throws
//! the docstring away with the damage. Instead the answer is lined up with
//! the selection line by line, and what it inserts is kept only where it is
//! documentation: comment lines, Python docstring blocks that open and close
//! within the insertion, and a comment added at the end of a line of code.
//! Every line of the selection stays as it was; nothing else of the answer
//! is kept. The result still goes through the usual checks.
use similar::{DiffOp, TextDiff};

use crate::syntax::Language;

/// What grafting kept and left out.
#[derive(Debug, PartialEq, Eq)]
pub struct Grafted {
    /// The selection with the answer's documentation.
    pub text: String,
    /// Lines of the answer that were not documentation and were left out
    /// (inserted code, changed code, an unclosed string).
    pub dropped_lines: usize,
}

/// The selection `old` with the documentation that `new` (the fitted
/// answer) adds; `None` when it adds none.
pub fn documentation(old: &str, new: &str, language: Option<Language>) -> Option<Grafted> {
    let comment = line_comment(language);
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let diff = TextDiff::from_slices(&trimmed(&old_lines), &trimmed(&new_lines));
    let mut out = String::with_capacity(new.len());
    let mut added = 0;
    let mut dropped_lines = 0;
    for op in diff.ops() {
        let (o, n) = (op.old_range(), op.new_range());
        match op {
            DiffOp::Equal { .. } => o.clone().for_each(|i| out.push_str(old_lines[i])),
            DiffOp::Insert { .. } => {
                let (kept, dropped) = doc_lines(&new_lines[n.clone()], comment, language);
                added += kept.len();
                dropped_lines += dropped;
                kept.iter().for_each(|line| out.push_str(line));
            }
            DiffOp::Delete { .. } | DiffOp::Replace { .. } => {
                // Lines of code the answer changed keep their own text, or
                // gain a trailing comment. The documentation among the
                // replacement goes before them when it comes before its
                // first line of code (a doc comment above a changed
                // signature), else after them.
                let replacement = &new_lines[n.clone()];
                let docs = doc_flags(replacement, comment, language);
                let first_code = docs.iter().position(|d| !d).unwrap_or(docs.len());
                let push_docs = |range: std::ops::Range<usize>, out: &mut String| {
                    let mut pushed = 0;
                    for i in range.filter(|&i| docs[i]) {
                        out.push_str(replacement[i]);
                        pushed += 1;
                    }
                    pushed
                };
                added += push_docs(0..first_code, &mut out);
                let mut code: Vec<&str> = (first_code..replacement.len())
                    .filter(|&i| !docs[i] && !replacement[i].trim().is_empty())
                    .map(|i| replacement[i])
                    .collect();
                for &line in &old_lines[o.clone()] {
                    match code
                        .iter()
                        .position(|l| with_trailing_comment(line, l, comment))
                    {
                        Some(at) => {
                            out.push_str(&with_line_end(code.remove(at), line));
                            added += 1;
                        }
                        None => out.push_str(line),
                    }
                }
                dropped_lines += code.len();
                added += push_docs(first_code..replacement.len(), &mut out);
            }
        }
    }
    if added == 0 || out == old {
        return None;
    }
    if !old.ends_with('\n') && out.ends_with('\n') {
        out.pop();
    }
    Some(Grafted {
        text: out,
        dropped_lines,
    })
}

fn trimmed<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    lines.iter().map(|l| l.trim_end()).collect()
}

/// `line` (with its own line end) carrying `answer`'s text.
fn with_line_end(answer: &str, line: &str) -> String {
    let end = &line[line.trim_end_matches(['\n', '\r']).len()..];
    format!("{}{end}", answer.trim_end_matches(['\n', '\r']))
}

/// Whether `answer` is `code` with a comment added at its end.
fn with_trailing_comment(code: &str, answer: &str, comment: &str) -> bool {
    let (code, answer) = (code.trim_end(), answer.trim_end());
    !code.trim().is_empty()
        && answer.strip_prefix(code).is_some_and(|rest| {
            rest.starts_with(char::is_whitespace) && rest.trim_start().starts_with(comment)
        })
}

/// The documentation among inserted `lines`, and how many lines were
/// left out.
fn doc_lines<'a>(
    lines: &[&'a str],
    comment: &str,
    language: Option<Language>,
) -> (Vec<&'a str>, usize) {
    let docs = doc_flags(lines, comment, language);
    let kept = lines
        .iter()
        .zip(&docs)
        .filter(|(_, d)| **d)
        .map(|(l, _)| *l)
        .collect();
    let dropped = lines
        .iter()
        .zip(&docs)
        .filter(|(l, d)| !**d && !l.trim().is_empty())
        .count();
    (kept, dropped)
}

/// For each of `lines`, whether it is documentation: a comment line, a
/// line of a Python docstring block that closes within `lines`, or a blank
/// line between two such.
fn doc_flags(lines: &[&str], comment: &str, language: Option<Language>) -> Vec<bool> {
    let mut docs = vec![false; lines.len()];
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if is_comment(line, comment, language) {
            docs[i] = true;
        } else if language == Some(Language::Python) && !line.is_empty() {
            if let Some(end) = docstring_end(lines, i) {
                docs[i..=end].iter_mut().for_each(|d| *d = true);
                i = end;
            }
        }
        i += 1;
    }
    // Blank lines inside a run of documentation are part of it.
    let last_doc = docs.iter().rposition(|d| *d);
    let first_doc = docs.iter().position(|d| *d);
    if let (Some(first), Some(last)) = (first_doc, last_doc) {
        for j in first..last {
            if lines[j].trim().is_empty() {
                docs[j] = true;
            }
        }
    }
    docs
}

fn is_comment(line: &str, comment: &str, language: Option<Language>) -> bool {
    if line.starts_with(comment) {
        return true;
    }
    // Block comments (`/** … */`, ` * …`) outside Python and Lua.
    !matches!(language, Some(Language::Python | Language::Lua) | None)
        && (line.starts_with("/*")
            || line.starts_with("*/")
            || line.starts_with("* ")
            || line == "*")
}

/// When `lines[start]` opens a Python string statement (`"""`, `'''`, with
/// an optional `r`/`u` prefix) that closes within `lines`: the line where
/// it closes.
fn docstring_end(lines: &[&str], start: usize) -> Option<usize> {
    let first = lines[start].trim_start();
    let first = first.trim_start_matches(['r', 'R', 'u', 'U']);
    let quote = ["\"\"\"", "'''"]
        .into_iter()
        .find(|q| first.starts_with(q))?;
    let after_open = &first[quote.len()..];
    if let Some(at) = after_open.find(quote) {
        // One line: nothing may follow the closing quotes.
        return after_open[at + quote.len()..]
            .trim()
            .is_empty()
            .then_some(start);
    }
    for (i, line) in lines.iter().enumerate().skip(start + 1) {
        if let Some(at) = line.find(quote) {
            return line[at + quote.len()..].trim().is_empty().then_some(i);
        }
    }
    None
}

fn line_comment(language: Option<Language>) -> &'static str {
    match language {
        Some(Language::Python) => "#",
        Some(Language::Lua) => "--",
        _ => "//",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python(old: &str, new: &str) -> Option<Grafted> {
        documentation(old, new, Some(Language::Python))
    }

    const SORT: &str = "def bucketsort(arr, k):\n    counts = [0] * k\n    for x in arr:\n        counts[x] += 1\n    return counts\n";

    #[test]
    fn a_docstring_is_kept_and_a_stray_quote_and_a_code_change_are_not() {
        let answer = "\"\"\"\ndef bucketsort(arr, k):\n    \"\"\"\n    Sorts arr.\n\n    Args: arr, k.\n    \"\"\"\n    counts = [0] * k\n    for x in counts:\n        counts[x] += 1\n    return counts\n";
        let grafted = python(SORT, answer).unwrap();
        assert_eq!(
            grafted.text,
            "def bucketsort(arr, k):\n    \"\"\"\n    Sorts arr.\n\n    Args: arr, k.\n    \"\"\"\n    counts = [0] * k\n    for x in arr:\n        counts[x] += 1\n    return counts\n"
        );
        assert_eq!(
            grafted.dropped_lines, 2,
            "the stray quote and the changed loop"
        );
    }

    #[test]
    fn comments_and_trailing_comments_are_kept() {
        let answer = "def bucketsort(arr, k):\n    \"\"\"Sorts arr.\"\"\"\n    counts = [0] * k  # one per bucket\n    # count each value\n    for x in arr:\n        counts[x] += 1\n    return counts\n";
        let grafted = python(SORT, answer).unwrap();
        assert_eq!(grafted.text, answer);
        assert_eq!(grafted.dropped_lines, 0);
    }

    #[test]
    fn an_answer_with_no_documentation_grafts_nothing() {
        assert_eq!(python(SORT, SORT), None);
        let code_only = SORT.replace("for x in arr", "for x in sorted(arr)");
        assert_eq!(python(SORT, &code_only), None);
        // An unclosed docstring is not documentation.
        let unclosed = SORT.replace(":\n    counts", ":\n    \"\"\"Sorts\n    counts");
        assert_eq!(python(SORT, &unclosed), None);
    }

    #[test]
    fn rust_doc_comments_are_kept_and_code_is_not() {
        let old = "fn area(w: u32, h: u32) -> u32 {\n    w * h\n}";
        let answer = "/// The area of a `w` by `h` rectangle.\nfn area(w: u32, h: u32) -> u64 {\n    // width times height\n    w * h\n}";
        let grafted = documentation(old, answer, Some(Language::Rust)).unwrap();
        assert_eq!(
            grafted.text,
            "/// The area of a `w` by `h` rectangle.\nfn area(w: u32, h: u32) -> u32 {\n    // width times height\n    w * h\n}"
        );
        assert_eq!(grafted.dropped_lines, 1);
    }
}
