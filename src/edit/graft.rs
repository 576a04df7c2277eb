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
///
/// Documentation is kept only where it belongs to the selection's code: a
/// comment next to a line of the selection, a docstring right after a
/// `def`/`class` line of it. An answer that documents the code around the
/// selection (a model given two lines of a method answered with the whole
/// file, documented) has those docstrings left out, not strewn among the
/// selected lines.
pub fn documentation(old: &str, new: &str, language: Option<Language>) -> Option<Grafted> {
    let comment = Language::line_comment(language);
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let diff = TextDiff::from_slices(&trimmed(&old_lines), &trimmed(&new_lines));
    let ops = diff.ops();

    // What each line of the answer is: a line of the selection (kept as
    // the selection has it), documentation, blank, or other code.
    let mut role = vec![Role::Other; new_lines.len()];
    // The selection's line each anchor stands for.
    let mut anchor_of: Vec<Option<usize>> = vec![None; new_lines.len()];
    let mut budget = LIKENESS_BUDGET;
    for op in ops {
        let (o, n) = (op.old_range(), op.new_range());
        if let DiffOp::Equal { .. } = op {
            for (i, j) in o.zip(n) {
                if new_lines[j].trim().is_empty() {
                    role[j] = Role::Blank;
                } else {
                    role[j] = Role::Anchor;
                    anchor_of[j] = Some(i);
                }
            }
            continue;
        }
        let kinds = doc_kinds(&new_lines[n.clone()], comment, language);
        for (j, kind) in n.clone().zip(kinds) {
            role[j] = match kind {
                Some(kind) => Role::Doc(kind),
                None if new_lines[j].trim().is_empty() => Role::Blank,
                None => Role::Other,
            };
        }
        // A changed line of the selection stands for it: for each, in
        // order, the answer's line most like it after the last one taken
        // (the same text re-indented, or a close edit; the first of equals,
        // as a file has many `def area(self):`), so that code the
        // selection does not have (a whole file around it) anchors nothing.
        let mut from = n.start;
        for i in o {
            let mut best: Option<(usize, f32)> = None;
            for j in (from..n.end).filter(|&j| role[j] == Role::Other) {
                let score = likeness(old_lines[i], new_lines[j], &mut budget);
                if score >= MIN_LIKENESS && best.is_none_or(|(_, b)| score > b) {
                    best = Some((j, score));
                }
            }
            if let Some((j, _)) = best {
                role[j] = Role::Anchor;
                anchor_of[j] = Some(i);
                from = j + 1;
            }
        }
    }
    // Kept documentation moves with its anchor: by how much the answer
    // indented that line otherwise than the selection does.
    let shift: Vec<Option<isize>> = kept_docs(&new_lines, &role)
        .into_iter()
        .map(|anchor| {
            anchor.map(|j| {
                anchor_of[j].map_or(0, |i| {
                    indent(old_lines[i]) as isize - indent(new_lines[j]) as isize
                })
            })
        })
        .collect();
    let keep: Vec<bool> = shift.iter().map(Option::is_some).collect();
    let doc_line = |j: usize| shifted(new_lines[j], shift[j].unwrap_or(0));

    let mut out = String::with_capacity(new.len());
    let mut added = 0;
    let mut dropped_lines = 0;
    for op in ops {
        let (o, n) = (op.old_range(), op.new_range());
        match op {
            DiffOp::Equal { .. } => o.clone().for_each(|i| out.push_str(old_lines[i])),
            DiffOp::Insert { .. } => {
                for j in n.clone() {
                    if keep[j] {
                        out.push_str(&doc_line(j));
                        added += 1;
                    } else if !new_lines[j].trim().is_empty() {
                        dropped_lines += 1;
                    }
                }
            }
            DiffOp::Delete { .. } | DiffOp::Replace { .. } => {
                // In the answer's order: each anchor brings its line of the
                // selection (and any before it that nothing stands for),
                // as it was or with a comment added at its end; kept
                // documentation goes where the answer has it.
                let mut next_old = o.start;
                for j in n.clone() {
                    if keep[j] {
                        out.push_str(&doc_line(j));
                        added += 1;
                        continue;
                    }
                    match (role[j], anchor_of[j]) {
                        (Role::Anchor, Some(i)) if i >= next_old => {
                            old_lines[next_old..i].iter().for_each(|l| out.push_str(l));
                            let line = old_lines[i];
                            if with_trailing_comment(line, new_lines[j], comment) {
                                let moved = shifted(
                                    new_lines[j],
                                    indent(line) as isize - indent(new_lines[j]) as isize,
                                );
                                out.push_str(&with_line_end(&moved, line));
                                added += 1;
                            } else {
                                out.push_str(line);
                                // The answer's change to it is left out.
                                if line.trim() != new_lines[j].trim() {
                                    dropped_lines += 1;
                                }
                            }
                            next_old = i + 1;
                        }
                        (Role::Blank, _) => {}
                        _ => dropped_lines += 1,
                    }
                }
                old_lines[next_old..o.end]
                    .iter()
                    .for_each(|l| out.push_str(l));
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

/// How alike a changed line must be to the selection's line it replaces.
const MIN_LIKENESS: f32 = 0.6;

/// Characters (the product of two lines' lengths) that comparing lines
/// character by character may cost in one graft; past it only equal lines
/// count as alike. An answer unlike its selection makes every pair a
/// candidate.
const LIKENESS_BUDGET: usize = 4_000_000;

/// 0–1: how alike two lines are, indentation aside. `budget` bounds the
/// character comparisons (see [`LIKENESS_BUDGET`]).
fn likeness(a: &str, b: &str, budget: &mut usize) -> f32 {
    let (a, b) = (a.trim(), b.trim());
    if a == b {
        return 1.0;
    }
    let (la, lb) = (a.chars().count(), b.chars().count());
    // The ratio is at most 2·min/(la+lb): lines of too unequal lengths
    // cannot reach the threshold.
    let most = 2.0 * la.min(lb) as f32 / (la + lb).max(1) as f32;
    let cost = la.saturating_mul(lb);
    if most < MIN_LIKENESS || cost > *budget {
        return 0.0;
    }
    *budget -= cost;
    similar::TextDiff::from_chars(a, b).ratio()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// A line of the selection (as it was, or changed by the answer).
    Anchor,
    Doc(DocKind),
    Blank,
    /// Code the selection does not have.
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DocKind {
    Comment,
    /// A Python docstring block (its lines, blank ones included).
    Docstring,
}

/// Which documentation lines to keep, each with the line of the answer
/// it belongs to: a comment block next to (above or below) a line of the
/// selection, a docstring right after a `def` or `class` line of the
/// selection; blank lines inside a kept block.
fn kept_docs(lines: &[&str], role: &[Role]) -> Vec<Option<usize>> {
    let mut keep = vec![None; lines.len()];
    let mut j = 0;
    while j < lines.len() {
        let Role::Doc(kind) = role[j] else {
            j += 1;
            continue;
        };
        // The block: this kind, and blank lines within it.
        let mut end = j + 1;
        while end < lines.len() {
            match role[end] {
                Role::Doc(k) if k == kind => end += 1,
                Role::Blank
                    if role[end + 1..]
                        .iter()
                        .find(|r| **r != Role::Blank)
                        .is_some_and(|r| *r == Role::Doc(kind)) =>
                {
                    end += 1
                }
                _ => break,
            }
        }
        let anchor = |at: Option<usize>| at.filter(|&p| role[p] == Role::Anchor);
        let before = anchor(role[..j].iter().rposition(|r| *r != Role::Blank));
        let after = anchor(
            role[end..]
                .iter()
                .position(|r| *r != Role::Blank)
                .map(|p| end + p),
        );
        let owner = match kind {
            DocKind::Comment => before.or(after),
            DocKind::Docstring => before.filter(|&p| opens_a_body(lines[p])),
        };
        keep[j..end].iter_mut().for_each(|k| *k = owner);
        j = end;
    }
    keep
}

/// Columns of leading whitespace.
fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// `line` moved right (`by` > 0, with spaces) or left (dropping at most
/// that much leading whitespace).
fn shifted(line: &str, by: isize) -> std::borrow::Cow<'_, str> {
    if by > 0 && !line.trim().is_empty() {
        std::borrow::Cow::Owned(format!("{}{line}", " ".repeat(by.unsigned_abs())))
    } else if by < 0 {
        let drop = indent(line).min(by.unsigned_abs());
        std::borrow::Cow::Borrowed(&line[drop..])
    } else {
        std::borrow::Cow::Borrowed(line)
    }
}

/// A Python `def`/`class` line (its docstring follows it).
fn opens_a_body(line: &str) -> bool {
    let line = line.trim();
    line.ends_with(':')
        && ["def ", "async def ", "class "]
            .iter()
            .any(|k| line.starts_with(k))
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
    let (code, answer) = (code.trim(), answer.trim());
    !code.is_empty()
        && answer.strip_prefix(code).is_some_and(|rest| {
            rest.starts_with(char::is_whitespace) && rest.trim_start().starts_with(comment)
        })
}

/// For each of `lines` (one run the answer inserts or changes), the kind
/// of documentation it is: a comment line, or a line of a Python docstring
/// block that opens and closes within the run.
fn doc_kinds(lines: &[&str], comment: &str, language: Option<Language>) -> Vec<Option<DocKind>> {
    let mut kinds = vec![None; lines.len()];
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if is_comment(line, comment, language) {
            kinds[i] = Some(DocKind::Comment);
        } else if language == Some(Language::Python) && !line.is_empty() {
            if let Some(end) = docstring_end(lines, i) {
                kinds[i..=end]
                    .iter_mut()
                    .for_each(|k| *k = Some(DocKind::Docstring));
                i = end;
            }
        }
        i += 1;
    }
    kinds
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
    fn documentation_of_code_outside_the_selection_is_left_out() {
        // Two lines of a method selected; the answer documents the file.
        let old = "        return math.pi * self.radius ** 2\n\n";
        let answer = "class Circle:\n    \"\"\"A circle.\"\"\"\n\n    def area(self):\n        \"\"\"The area.\"\"\"\n        # pi r squared\n        return math.pi * self.radius ** 2\n\n\nclass Square:\n    \"\"\"A square.\"\"\"\n";
        let grafted = python(old, answer).unwrap();
        assert_eq!(
            grafted.text,
            "        # pi r squared\n        return math.pi * self.radius ** 2\n\n"
        );
        assert_eq!(grafted.dropped_lines, 6);
        // Only docstrings of code outside: nothing to graft.
        let answer = "def area(self):\n    \"\"\"The area.\"\"\"\n        return math.pi * self.radius ** 2\n";
        assert_eq!(python(old, answer), None);
    }

    #[test]
    fn a_whole_file_answer_indented_otherwise_anchors_only_the_selected_line() {
        // Seen in Neovim: the fitted answer is the documented file, shifted
        // by four columns, so no line of it equals the selected one.
        let old = "        return math.pi * self.radius ** 2\n\n";
        let answer = "    import math\n\n\n    class Circle:\n        \"\"\"\n        A circle.\n        \"\"\"\n        def area(self):\n            \"\"\"\n            The area.\n            \"\"\"\n            return math.pi * self.radius ** 2\n\n\n    class Square:\n        \"\"\"A square.\"\"\"\n        def area(self):\n            return self.side ** 2\n";
        assert_eq!(python(old, answer), None);
    }

    #[test]
    fn the_docstring_of_the_selected_method_goes_in_at_its_indentation() {
        // Seen in Neovim: `area` of the first class selected; the answer is
        // the whole file documented, shifted by four columns, with a second
        // `def area(self):` further down.
        let old = "    def area(self):\n        return math.pi * self.radius ** 2\n";
        let answer = "    class Circle:\n        def area(self):\n            \"\"\"\n            The circle's area.\n            \"\"\"\n            return math.pi * self.radius ** 2\n\n\n    class Square:\n        def area(self):\n            \"\"\"The square's area.\"\"\"\n            return self.side ** 2\n";
        let grafted = python(old, answer).unwrap();
        assert_eq!(
            grafted.text,
            "    def area(self):\n        \"\"\"\n        The circle's area.\n        \"\"\"\n        return math.pi * self.radius ** 2\n"
        );
    }

    #[test]
    fn line_likeness_stays_within_its_budget() {
        let (a, b) = ("    x = compute(a, b)", "x = compute(a, c)");
        let mut budget = 1_000;
        assert!(likeness(a, b, &mut budget) > 0.9);
        assert!(budget < 1_000, "the comparison was paid for");
        // Over the budget only equal lines are alike; nothing is spent.
        let mut budget = 10;
        assert_eq!(likeness(a, b, &mut budget), 0.0);
        assert_eq!(likeness(a, "x = compute(a, b)", &mut budget), 1.0);
        assert_eq!(budget, 10);
        // Lengths too unequal to reach the threshold cost nothing.
        let mut budget = 1_000;
        assert_eq!(likeness("x", "x = compute(a, b)", &mut budget), 0.0);
        assert_eq!(budget, 1_000);
        // 2,000 unlike lines against 2,000: graded, nothing anchored.
        let old: String = (0..2000)
            .map(|i| format!("    x{i} = {}\n", "a".repeat(110)))
            .collect();
        let new: String = (0..2000)
            .map(|i| format!("    # y{i}\n    z{i} = {}\n", "b".repeat(110)))
            .collect();
        assert_eq!(python(&old, &new), None);
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
