//! Line-level steps: single-line selection, repetition loops, indentation,
//! repeats of the following lines, the indentation scope, first-line whitespace.

use std::borrow::Cow;

use super::brackets::is_closer;
use super::IndentStyle;

/// Keeps the first line. A leading newline is a completion of the next line; it
/// is kept (with that line) only when the cursor sits at the end of a line that
/// has code before it, e.g. after `fn main() {`. On a blank line or mid-line the
/// result is the empty first line, i.e. whitespace-only.
pub(super) fn select_single_line(lines: &mut Vec<Cow<'_, str>>, prefix: &str, suffix: &str) {
    let newline_first = lines.len() > 1
        && lines[0].trim().is_empty()
        && !prefix.trim().is_empty()
        && suffix.trim().is_empty();
    if newline_first {
        lines.truncate(2);
        lines[0] = Cow::Borrowed("");
    } else {
        lines.truncate(1);
    }
}

/// Cuts a line, or a block of 2-3 lines, that repeats three times in a row,
/// keeping its first occurrence. Blocks without letters or digits (`}`) do not
/// count: brackets are handled by the bracket scan.
pub(super) fn cut_line_loops(lines: &mut Vec<Cow<'_, str>>) {
    let n = lines.len();
    for i in 0..n {
        for p in 1..=3 {
            if i + 3 * p > n {
                break;
            }
            let block = &lines[i..i + p];
            if !block.iter().any(|l| l.chars().any(char::is_alphanumeric)) {
                continue;
            }
            let same =
                |start: usize| (0..p).all(|k| lines[start + k].trim() == lines[i + k].trim());
            if same(i + p) && same(i + 2 * p) {
                lines.truncate(i + p);
                return;
            }
        }
    }
}

/// Where to cut a line that ends in a short unit (≤ 32 bytes, with a letter or
/// digit) repeated back to back at least 4 times over at least 12 bytes: after
/// the unit's first occurrence.
pub(super) fn intra_line_loop_cut(line: &str) -> Option<usize> {
    let b = line.as_bytes();
    let n = b.len();
    for l in 1..=32.min(n / 4) {
        let mut s = n - l;
        while s > 0 && b[s - 1] == b[s - 1 + l] {
            s -= 1;
        }
        let run = n - s;
        if run >= 4 * l && run >= 12 {
            let cut = s + l;
            if line.is_char_boundary(s)
                && line.is_char_boundary(cut)
                && line[s..cut].chars().any(char::is_alphanumeric)
            {
                return Some(cut);
            }
        }
    }
    None
}

fn leading_ws(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// Rewrites the leading whitespace of lines after the first in the document's
/// style. The output's own unit is guessed from the gcd of its space indents
/// (4 if divisible by 4, else 2); each tab counts as one level. Spaces left over
/// after whole levels are alignment and kept. Absolute levels are converted, so a
/// model that copies the document's base indentation but nests with another unit
/// is mis-converted; such mixtures are rare.
pub(super) fn normalize_indentation(lines: &mut [Cow<'_, str>], doc: IndentStyle) {
    if lines.len() < 2 {
        return;
    }
    let mut gcd = 0usize;
    let mut any_tab = false;
    for line in &lines[1..] {
        if line.trim().is_empty() {
            continue;
        }
        let lead = leading_ws(line);
        any_tab |= lead.contains('\t');
        let spaces = lead.bytes().filter(|&c| c == b' ').count();
        if spaces > 0 {
            gcd = gcd_of(gcd, spaces);
        }
    }
    let model_unit = match gcd {
        0 | 1 => None,
        g if g % 4 == 0 => Some(4),
        g if g % 2 == 0 => Some(2),
        g => Some(g),
    };
    let doc_unit = doc.width();
    let needs_work = match doc {
        IndentStyle::Tabs => gcd > 0,
        IndentStyle::Spaces(_) => any_tab || model_unit.is_some_and(|u| u != doc_unit),
    };
    if !needs_work {
        return;
    }
    for line in lines[1..].iter_mut() {
        let lead = leading_ws(line);
        if lead.is_empty() || line.trim().is_empty() {
            continue;
        }
        let tabs = lead.bytes().filter(|&c| c == b'\t').count();
        let spaces = lead.len() - tabs;
        let (levels, rem) = match model_unit {
            Some(u) => (tabs + spaces / u, spaces % u),
            None => (tabs, spaces),
        };
        let mut new_lead = match doc {
            IndentStyle::Tabs => "\t".repeat(levels),
            IndentStyle::Spaces(_) => " ".repeat(levels * doc_unit),
        };
        new_lead.push_str(&" ".repeat(rem));
        if new_lead != lead {
            let body = &line[lead.len()..];
            *line = Cow::Owned(format!("{new_lead}{body}"));
        }
    }
}

fn gcd_of(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd_of(b, a % b)
    }
}

fn indent_cols(line: &str, doc: IndentStyle) -> usize {
    leading_ws(line)
        .bytes()
        .map(|c| if c == b'\t' { doc.width() } else { 1 })
        .sum()
}

/// Cuts at the first line (after the first) from which the output's non-blank
/// lines equal the non-blank lines at the start of `following` (trailing
/// whitespace ignored; indentation counts, so a block's own `}` is not taken for
/// the enclosing block's), as far as either goes. Returns whether it cut.
pub(super) fn cut_repeated_following(lines: &mut Vec<Cow<'_, str>>, following: &str) -> bool {
    const WINDOW: usize = 64;
    let follow: Vec<&str> = following
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .take(WINDOW)
        .collect();
    if follow.is_empty() {
        return false;
    }
    for i in 1..lines.len() {
        if lines[i].trim().is_empty() {
            continue;
        }
        let mut rest = lines[i..]
            .iter()
            .map(|l| l.trim_end())
            .filter(|l| !l.is_empty());
        let mut matched = true;
        for f in &follow {
            match rest.next() {
                Some(l) if l == *f => {}
                Some(_) => {
                    matched = false;
                    break;
                }
                None => break,
            }
        }
        if matched {
            lines.truncate(i);
            return true;
        }
    }
    false
}

const CONTINUATIONS: &[&str] = &["else", "elif", "except", "finally", "catch"];

/// Cuts where the output leaves the cursor line's scope. If the cursor line
/// (prefix + first output line) opens a block (ends with `{ ( [ :`), its body is
/// deeper than the cursor line; a line back at that level ends the block: a
/// closer there is kept and ends the output (unless it reopens, `} else {`), a
/// continuation keyword (`else`, `except`, …) goes on, anything else is cut.
/// Otherwise a line shallower than the cursor line is cut.
pub(super) fn cut_at_scope_end(lines: &mut Vec<Cow<'_, str>>, prefix: &str, doc: IndentStyle) {
    let base = if prefix.trim().is_empty() {
        // The cursor line is still blank: the output's first line is at the
        // cursor's column.
        indent_cols(prefix, doc) + indent_cols(lines.first().map_or("", |l| l), doc)
    } else {
        indent_cols(prefix, doc)
    };
    let completed = format!("{prefix}{}", lines.first().map_or("", |l| l.as_ref()));
    let head = completed.trim_end();
    let opens = (head.ends_with(['{', '(', '[']) || head.ends_with(':')) && !head.ends_with("::");
    for i in 1..lines.len() {
        let line = &lines[i];
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let w = indent_cols(line, doc);
        if opens {
            if w > base {
                continue;
            }
            if w == base && t.starts_with(is_closer) {
                if t.ends_with(['{', '(', '[', ':']) {
                    continue;
                }
                lines.truncate(i + 1);
                return;
            }
            if w == base && CONTINUATIONS.iter().any(|k| starts_with_word(t, k)) {
                continue;
            }
            lines.truncate(i);
            return;
        } else if w < base {
            lines.truncate(i);
            return;
        }
    }
}

fn starts_with_word(t: &str, word: &str) -> bool {
    t.strip_prefix(word)
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// `let x = ` + ` 5` would double the space: drop the output's leading
/// whitespace when the prefix already ends with whitespace after code. Chat
/// models (fenced output) often re-type the cursor line: drop a re-typed
/// indentation or prefix. A FIM model's leading whitespace on a blank line is
/// extra indentation and kept — in whole indentation levels: after the
/// editor's auto-indent (`    `) a model's ` return` (its tokens start with
/// a space) gave five-space indentation in Python once accepted, so spaces
/// past the last whole level are dropped.
pub(super) fn strip_first_line_whitespace(
    lines: &mut [Cow<'_, str>],
    prefix: &str,
    wrapped: bool,
    doc: IndentStyle,
) {
    let Some(first) = lines.first_mut() else {
        return;
    };
    let prefix_code = prefix.trim_start();
    if prefix_code.is_empty() && !wrapped {
        let excess = misaligned_spaces(prefix, first, doc);
        if excess > 0 {
            *first = Cow::Owned(first[excess..].to_string());
        }
    }
    if after_member_dot(prefix_code) && first.starts_with([' ', '\t']) {
        let t = first.trim_start_matches([' ', '\t']);
        // `pen.` + ` hideturtle()` (a tokenizer's word with its space) is
        // never meant; ` Returns …` after a sentence's period is.
        if t.starts_with(|c: char| c.is_lowercase() || c == '_') {
            *first = Cow::Owned(t.to_string());
        }
    }
    if !prefix_code.is_empty() && prefix.ends_with([' ', '\t']) {
        let t = first.trim_start_matches([' ', '\t']);
        if t.len() != first.len() {
            *first = Cow::Owned(t.to_string());
        }
    }
    if wrapped {
        let t = first.trim_start_matches([' ', '\t']);
        let rest = if prefix_code.is_empty() {
            first.strip_prefix(prefix).map(str::to_string)
        } else {
            t.strip_prefix(prefix_code.trim_end())
                .map(|r| r.trim_start_matches([' ', '\t']).to_string())
        };
        if let Some(rest) = rest {
            *first = Cow::Owned(rest);
        }
    }
}

/// Whether `prefix_code` ends in a member access's dot: `name.`, `f().`,
/// `a[0].` (not `..`, nor a number's `1.`).
fn after_member_dot(prefix_code: &str) -> bool {
    let Some(before) = prefix_code.strip_suffix('.') else {
        return false;
    };
    let word: String = before
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    match before.chars().last() {
        Some(')' | ']') => true,
        Some(c) if c.is_alphanumeric() || c == '_' => !word.chars().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// How many of `output`'s leading spaces, typed after the whitespace-only
/// `prefix`, go past the last whole indentation level of `doc`; 0 when its
/// leading whitespace is not all spaces (a tab is a level) or nothing is off.
fn misaligned_spaces(prefix: &str, output: &str, doc: IndentStyle) -> usize {
    let lead = leading_ws(output);
    if lead.is_empty() || lead.contains('\t') || output.trim().is_empty() {
        return 0;
    }
    let excess = match doc {
        // Spaces after tabs are alignment a tab-indented file never has here.
        IndentStyle::Tabs => lead.len() % doc.width(),
        IndentStyle::Spaces(_) => {
            let cols = indent_cols(prefix, doc);
            if cols % doc.width() == 0 {
                (cols + lead.len()) % doc.width()
            } else {
                // The editor aligned this line (a continuation under an
                // open bracket): what the output adds counts in levels.
                lead.len() % doc.width()
            }
        }
    };
    // Only spaces the output itself added are dropped.
    if excess <= lead.len() {
        excess
    } else {
        0
    }
}
