//! The matching ladder behind [`apply_edit`](super::apply_edit).
use std::borrow::Cow;
use std::ops::Range;

use similar::{capture_diff_slices, Algorithm, DiffOp};

use super::{closest, Applied, EditError, Strategy};
use crate::agent::fsutil::{from_lf, line_ending, to_lf};

/// Most matches collected on one rung: enough to list, bounded on files
/// where the search text is a single common line.
const MAX_MATCHES: usize = 100;

/// A text with `\r\n` turned into `\n`, and the way back to original offsets.
struct LfText {
    lf: String,
    /// Offsets in `lf` of each `\n` that was a `\r\n`, ascending.
    crs: Vec<usize>,
}

impl LfText {
    fn new(text: &str) -> Self {
        let mut lf = String::with_capacity(text.len());
        let mut crs = Vec::new();
        let mut rest = text;
        while let Some(idx) = rest.find("\r\n") {
            lf.push_str(&rest[..idx]);
            crs.push(lf.len());
            lf.push('\n');
            rest = &rest[idx + 2..];
        }
        lf.push_str(rest);
        Self { lf, crs }
    }

    /// The original offset of `lf` offset `n`: a `\n` that was `\r\n` maps
    /// to its `\r`, so a range never splits a line ending.
    fn original(&self, n: usize) -> usize {
        n + self.crs.partition_point(|&p| p < n)
    }
}

/// One line of the LF text: its content (no `\n`) and where it starts.
#[derive(Clone, Copy)]
pub(super) struct Line<'a> {
    pub(super) start: usize,
    pub(super) text: &'a str,
}

/// The lines of `lf`; a final `\n` does not start another line.
pub(super) fn lines(lf: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for piece in lf.split_inclusive('\n') {
        out.push(Line {
            start,
            text: piece.strip_suffix('\n').unwrap_or(piece),
        });
        start += piece.len();
    }
    out
}

/// The lines of a search or replace text, a final `\n` ignored.
pub(super) fn text_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect()
}

/// A successful match: the LF range to replace and its LF replacement.
struct Found {
    range: Range<usize>,
    replacement: String,
    strategy: Strategy,
}

pub(super) fn apply(text: &str, search: &str, replace: &str) -> Result<Applied, EditError> {
    let search = to_lf(search);
    let replace = to_lf(replace);
    if search.trim().is_empty() {
        return Err(EditError::EmptySearch);
    }
    let file = LfText::new(text);
    let found = find(&file.lf, &search, &replace)?;
    let ending = line_ending(text);
    let start = file.original(found.range.start);
    let end = file.original(found.range.end);
    let mut out = String::with_capacity(text.len() + found.replacement.len());
    out.push_str(&text[..start]);
    out.push_str(&from_lf(&found.replacement, ending));
    out.push_str(&text[end..]);
    let start_line = 1 + file.lf[..found.range.start].matches('\n').count();
    let body = found
        .replacement
        .strip_suffix('\n')
        .unwrap_or(&found.replacement);
    let end_line = start_line + body.matches('\n').count();
    Ok(Applied {
        text: out,
        strategy: found.strategy,
        start_line,
        end_line,
    })
}

fn find(lf: &str, search: &str, replace: &str) -> Result<Found, EditError> {
    let file_lines = lines(lf);
    let exact = exact_matches(lf, search);
    if let Some(found) = pick(&exact, lf, |&start| {
        let range = start..start + search.len();
        Found {
            range,
            replacement: same_final_newline(search, replace),
            strategy: Strategy::Exact,
        }
    })? {
        return Ok(found);
    }

    let quoted = Quoted::new(search, replace);
    for strategy in [
        Strategy::TrailingWhitespace,
        Strategy::Indentation,
        Strategy::Punctuation,
    ] {
        let starts = line_matches(&file_lines, &quoted.search, strategy);
        if let Some(found) = pick(&starts, lf, |m: &LineIndex| {
            line_replacement(lf, &file_lines, m.0, &quoted, strategy)
        })? {
            return Ok(found);
        }
    }

    if let Some(line) = already_applied(lf, &file_lines, replace) {
        return Err(EditError::AlreadyApplied { line });
    }
    Err(EditError::NoMatch {
        closest: closest::closest(&file_lines, &quoted.search),
    })
}

/// One match → `Some(build(match))`; none → `None` (next rung); more →
/// `Ambiguous`. `M` is a byte offset (exact) or a line index (line-wise).
fn pick<M: Copy + MatchLine>(
    matches: &[M],
    lf: &str,
    build: impl FnOnce(&M) -> Found,
) -> Result<Option<Found>, EditError> {
    match matches {
        [] => Ok(None),
        [one] => Ok(Some(build(one))),
        many => {
            let mut lines: Vec<usize> = many.iter().map(|m| m.line(lf)).collect();
            // Two matches within one line are one place to the reader.
            lines.dedup();
            Err(EditError::Ambiguous { lines })
        }
    }
}

/// The 1-based line of a match, for messages.
trait MatchLine {
    fn line(&self, lf: &str) -> usize;
}

/// A byte offset (exact rung).
impl MatchLine for usize {
    fn line(&self, lf: &str) -> usize {
        1 + lf[..*self].matches('\n').count()
    }
}

/// A line index (line-wise rungs).
#[derive(Clone, Copy)]
struct LineIndex(usize);

impl MatchLine for LineIndex {
    fn line(&self, _lf: &str) -> usize {
        self.0 + 1
    }
}

/// Every start of `needle` in `hay`, overlapping ones included (they make
/// the edit just as ambiguous).
fn exact_matches(hay: &str, needle: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(idx) = hay[from..].find(needle) {
        let at = from + idx;
        out.push(at);
        if out.len() >= MAX_MATCHES {
            break;
        }
        let step = hay[at..].chars().next().map_or(1, char::len_utf8);
        from = at + step;
    }
    out
}

/// `replace` with its final newline matching `search`'s: tool arguments
/// lose or gain a trailing `\n` arbitrarily, and the model never means to
/// join or split the line after the edit.
fn same_final_newline(search: &str, replace: &str) -> String {
    match (search.ends_with('\n'), replace.ends_with('\n')) {
        (true, false) if !replace.is_empty() => format!("{replace}\n"),
        (false, true) => replace[..replace.len() - 1].to_owned(),
        _ => replace.to_owned(),
    }
}

/// The search and replace texts as lines, with the blank lines that models
/// add around a quote dropped (from the replacement too, as many as it has
/// of the same, so they stay paired).
struct Quoted<'a> {
    search: Vec<&'a str>,
    replace: Vec<&'a str>,
}

impl<'a> Quoted<'a> {
    fn new(search: &'a str, replace: &'a str) -> Self {
        let mut search = text_lines(search);
        let mut replace = text_lines(replace);
        let blank = |l: &&&str| l.trim().is_empty();
        let lead = search.iter().take_while(blank).count();
        let trail = search.iter().rev().take_while(blank).count();
        // `search` is not all blank (checked by the caller), so the two
        // runs do not overlap.
        search.truncate(search.len() - trail);
        search.drain(..lead);
        let r_lead = replace.iter().take_while(blank).count().min(lead);
        replace.drain(..r_lead);
        let r_trail = replace.iter().rev().take_while(blank).count().min(trail);
        replace.truncate(replace.len() - r_trail);
        Self { search, replace }
    }
}

/// Line indexes where `search` matches whole lines under `strategy`.
fn line_matches(file: &[Line<'_>], search: &[&str], strategy: Strategy) -> Vec<LineIndex> {
    let keyed_search: Vec<Cow<str>> = search.iter().map(|l| key(l, strategy)).collect();
    let keyed_file: Vec<Cow<str>> = file.iter().map(|l| key(l.text, strategy)).collect();
    let k = keyed_search.len();
    let mut out = Vec::new();
    if k == 0 || k > keyed_file.len() {
        return out;
    }
    for i in 0..=keyed_file.len() - k {
        if keyed_file[i..i + k] == keyed_search[..] {
            out.push(LineIndex(i));
            if out.len() >= MAX_MATCHES {
                break;
            }
        }
    }
    out
}

/// What a line is compared by on each rung.
fn key(line: &str, strategy: Strategy) -> Cow<'_, str> {
    match strategy {
        Strategy::Exact => Cow::Borrowed(line),
        Strategy::TrailingWhitespace => Cow::Borrowed(line.trim_end()),
        Strategy::Indentation => Cow::Borrowed(line.trim()),
        Strategy::Punctuation => Cow::Owned(normalize_punctuation(line).trim().to_owned()),
    }
}

/// Typographic characters that models (and word processors) substitute for
/// ASCII, mapped back.
pub(super) fn normalize_punctuation(line: &str) -> Cow<'_, str> {
    if line.is_ascii() {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => out.push('\''),
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => out.push('"'),
            '\u{2010}'..='\u{2015}' | '\u{2212}' => out.push('-'),
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => {
                out.push(' ')
            }
            '\u{2026}' => out.push_str("..."),
            '\u{200B}' | '\u{FEFF}' => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Builds the replacement of file lines `i..i + search.len()`.
///
/// Replacement lines the model left unchanged (equal to a search line) are
/// copied from the file, so a loose match never rewrites the whitespace or
/// quotes of lines the edit does not change; the others are re-indented by
/// the difference between the search text's indentation and the file's at
/// the lines they replace (or follow): a quote indented unevenly (the
/// 1.5B's hunk: one line 8 spaces too deep, the next 4) moves each change
/// by its own place's offset, not the first line's.
fn line_replacement(
    lf: &str,
    file: &[Line<'_>],
    i: usize,
    quoted: &Quoted<'_>,
    strategy: Strategy,
) -> Found {
    let k = quoted.search.len();
    let matched = &file[i..i + k];
    let whole = indents(&quoted.search, matched);
    let mut new_lines: Vec<Cow<str>> = quoted.replace.iter().map(|l| Cow::Borrowed(*l)).collect();
    for op in capture_diff_slices(Algorithm::Myers, &quoted.search, &quoted.replace) {
        let (old_at, new_range) = match op {
            DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                for j in 0..len {
                    new_lines[new_index + j] = Cow::Borrowed(matched[old_index + j].text);
                }
                continue;
            }
            DiffOp::Delete { .. } => continue,
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => (old_index, new_index..new_index + new_len),
            DiffOp::Replace {
                old_index,
                new_index,
                new_len,
                ..
            } => (old_index, new_index..new_index + new_len),
        };
        let (from, to) = indents_near(&quoted.search, matched, old_at).unwrap_or(whole);
        for j in new_range {
            new_lines[j] = reindent(quoted.replace[j], from, to);
        }
    }

    let mut start = matched[0].start;
    let last = matched[k - 1];
    let mut end = last.start + last.text.len();
    let has_newline = lf[end..].starts_with('\n');
    if has_newline {
        end += 1;
    }
    let mut replacement = new_lines.join("\n");
    if new_lines.is_empty() {
        // Deleting the last lines of a file without a final newline: take
        // the newline before them too, or the file would gain one.
        if !has_newline && start > 0 {
            start -= 1;
        }
    } else if has_newline {
        replacement.push('\n');
    }
    Found {
        range: start..end,
        replacement,
        strategy,
    }
}

/// The indentation of the first non-blank search line and of the file line
/// it matched.
fn indents<'s, 'f>(search: &[&'s str], matched: &[Line<'f>]) -> (&'s str, &'f str) {
    for (s, m) in search.iter().zip(matched) {
        if !s.trim().is_empty() {
            return (leading_ws(s), leading_ws(m.text));
        }
    }
    ("", "")
}

/// The indentation of the search line nearest `at` that is not blank (at
/// it or after, else before), and of the file line it matched: the offset
/// of a change there.
fn indents_near<'s, 'f>(
    search: &[&'s str],
    matched: &[Line<'f>],
    at: usize,
) -> Option<(&'s str, &'f str)> {
    let solid = |j: &usize| !search[*j].trim().is_empty();
    let j = (at..search.len())
        .find(solid)
        .or_else(|| (0..at.min(search.len())).rev().find(solid))?;
    Some((leading_ws(search[j]), leading_ws(matched[j].text)))
}

fn leading_ws(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// Shifts `line` from indentation `from` to `to`: the `from` prefix becomes
/// `to`; a line indented less than `from` is shifted by the width
/// difference.
fn reindent<'a>(line: &'a str, from: &str, to: &str) -> Cow<'a, str> {
    if from == to || line.trim().is_empty() {
        return Cow::Borrowed(line);
    }
    if let Some(converted) = convert_style(line, from, to) {
        return Cow::Owned(converted);
    }
    if let Some(rest) = line.strip_prefix(from) {
        return Cow::Owned(format!("{to}{rest}"));
    }
    let lead = leading_ws(line);
    let body = &line[lead.len()..];
    let (from_w, to_w) = (from.chars().count(), to.chars().count());
    if to_w >= from_w {
        let unit = to.chars().next().unwrap_or(' ');
        let extra: String = std::iter::repeat_n(unit, to_w - from_w).collect();
        Cow::Owned(format!("{extra}{lead}{body}"))
    } else {
        let drop = (from_w - to_w).min(lead.chars().count());
        let kept: String = lead.chars().skip(drop).collect();
        Cow::Owned(format!("{kept}{body}"))
    }
}

/// Spaces in the search text where the file has tabs (or the reverse):
/// converts the whole leading run at the ratio `from` : `to` (4 spaces : 1
/// tab), so nested lines keep their depth. `None` unless both indents and
/// the line's are each made of one character.
fn convert_style(line: &str, from: &str, to: &str) -> Option<String> {
    let uniform = |s: &str, c: char| !s.is_empty() && s.chars().all(|x| x == c);
    let lead = leading_ws(line);
    let body = &line[lead.len()..];
    if uniform(from, ' ') && uniform(to, '\t') && from.len() % to.len() == 0 {
        let per_tab = from.len() / to.len();
        if !lead.chars().all(|c| c == ' ') {
            return None;
        }
        let tabs = "\t".repeat(lead.len() / per_tab);
        let spaces = " ".repeat(lead.len() % per_tab);
        return Some(format!("{tabs}{spaces}{body}"));
    }
    if uniform(from, '\t') && uniform(to, ' ') && to.len() % from.len() == 0 {
        let per_tab = to.len() / from.len();
        if !lead.chars().all(|c| c == '\t') {
            return None;
        }
        return Some(format!("{}{body}", " ".repeat(lead.len() * per_tab)));
    }
    None
}

/// When the search text is absent: the 1-based line where the replacement
/// text already is, on any rung.
fn already_applied(lf: &str, file: &[Line<'_>], replace: &str) -> Option<usize> {
    if replace.trim().is_empty() {
        return None;
    }
    if let Some(&at) = exact_matches(lf, replace).first() {
        return Some(at.line(lf));
    }
    let quoted = Quoted::new(replace, "");
    [
        Strategy::TrailingWhitespace,
        Strategy::Indentation,
        Strategy::Punctuation,
    ]
    .into_iter()
    .find_map(|s| {
        line_matches(file, &quoted.search, s)
            .first()
            .map(|m| m.0 + 1)
    })
}
