//! The prefix and suffix windows, and line helpers shared by the sources.
use std::ops::Range;

use crate::model::tokens::{self, TokenCounter};

/// The widest prefix and suffix windows a budget of `total` allows, with
/// each of their lines' token counts: the prompt's windows, cut to their
/// final budgets, are taken from these without counting again.
pub(super) struct Windows<'t> {
    before: &'t str,
    after: &'t str,
    /// (bytes, tokens) of the widest prefix's lines, the cursor's first;
    /// empty when even the cursor's line had to be cut.
    prefix_lines: Vec<(usize, usize)>,
    /// The same for the suffix's lines, the cursor's first.
    suffix_lines: Vec<(usize, usize)>,
    /// Tokens the prefix needs (line by line), at most `total`.
    pub prefix_need: usize,
    pub suffix_need: usize,
    /// Lines of the current document (0-based, end exclusive) that the
    /// widest windows show: snippets from there would repeat them.
    pub shown_lines: Range<usize>,
}

impl<'t> Windows<'t> {
    /// `cursor_line` is the number of newlines in `before`.
    pub fn widest(
        before: &'t str,
        after: &'t str,
        cursor_line: usize,
        total: usize,
        counter: &dyn TokenCounter,
    ) -> Self {
        // Stopping at `total` bounds the counting to what could ever be
        // used, however large the file.
        let prefix_lines = fitting_lines(before.split_inclusive('\n').rev(), total, counter);
        let suffix_lines = fitting_lines(after.split_inclusive('\n'), total, counter);
        let mut windows = Windows {
            before,
            after,
            prefix_lines,
            suffix_lines,
            prefix_need: 0,
            suffix_need: 0,
            shown_lines: 0..0,
        };
        let (prefix, prefix_need) = windows.prefix(total, counter);
        let (suffix, suffix_need) = windows.suffix(total, counter);
        let first = cursor_line - count_newlines(prefix);
        let last = cursor_line + count_newlines(suffix);
        windows.prefix_need = prefix_need;
        windows.suffix_need = suffix_need;
        windows.shown_lines = first..last + 1;
        windows
    }

    /// The prefix that fits in `budget` (at most the widest's `total`) and
    /// its tokens, as [`tokens::take_prefix_tail`] cuts it.
    pub fn prefix(&self, budget: usize, counter: &dyn TokenCounter) -> (&'t str, usize) {
        match take(&self.prefix_lines, budget) {
            Some((bytes, used)) => (&self.before[self.before.len() - bytes..], used),
            None => {
                let prefix = tokens::take_prefix_tail(self.before, budget, counter);
                (prefix, lines_cost(prefix, counter))
            }
        }
    }

    /// The suffix that fits in `budget` (at most the widest's `total`) and
    /// its tokens, as [`tokens::take_suffix_head`] cuts it.
    pub fn suffix(&self, budget: usize, counter: &dyn TokenCounter) -> (&'t str, usize) {
        match take(&self.suffix_lines, budget) {
            Some((bytes, used)) => (&self.after[..bytes], used),
            None => {
                let suffix = tokens::take_suffix_head(self.after, budget, counter);
                (suffix, lines_cost(suffix, counter))
            }
        }
    }
}

/// (bytes, tokens) of the leading `lines` whose tokens add up to at most
/// `total`.
fn fitting_lines<'a>(
    lines: impl Iterator<Item = &'a str>,
    total: usize,
    counter: &dyn TokenCounter,
) -> Vec<(usize, usize)> {
    let mut used = 0;
    let mut out = Vec::new();
    for line in lines {
        let cost = counter.count(line);
        if used + cost > total {
            break;
        }
        used += cost;
        out.push((line.len(), cost));
    }
    out
}

/// Bytes and tokens of the leading `lines` that fit in `budget`; `None`
/// when not even the first does (or there are none): the caller cuts
/// inside the line. Lines past those counted never fit (they did not fit
/// the widest budget, which is at least `budget`).
fn take(lines: &[(usize, usize)], budget: usize) -> Option<(usize, usize)> {
    let (mut bytes, mut used) = (0, 0);
    for &(len, cost) in lines {
        if used + cost > budget {
            break;
        }
        used += cost;
        bytes += len;
    }
    (bytes > 0).then_some((bytes, used))
}

/// Tokens of `text` counted line by line, as the budget helpers count them.
pub(super) fn lines_cost(text: &str, counter: &dyn TokenCounter) -> usize {
    text.split_inclusive('\n').map(|l| counter.count(l)).sum()
}

/// `offset` clamped to `text` and moved back to a char boundary.
pub(super) fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut at = offset.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

pub(super) fn count_newlines(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'\n').count()
}

/// The 0-based line holding byte `offset` (clamped to the text).
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let bytes = &text.as_bytes()[..offset.min(text.len())];
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// Lines `lines` (0-based, end exclusive) of `text`, each with its newline.
pub(super) fn slice_lines(text: &str, lines: Range<usize>) -> &str {
    let mut start = None;
    let mut end = text.len();
    let mut line = 0;
    if lines.start == 0 {
        start = Some(0);
    }
    for (i, b) in text.bytes().enumerate() {
        if b != b'\n' {
            continue;
        }
        line += 1;
        if line == lines.start {
            start = Some(i + 1);
        }
        if line == lines.end {
            end = i + 1;
            break;
        }
    }
    match start {
        Some(start) if start <= end && lines.start < lines.end => &text[start..end],
        _ => "",
    }
}

/// How many lines `text` has (a final line without newline counts).
pub(super) fn line_count(text: &str) -> usize {
    count_newlines(text) + usize::from(!text.is_empty() && !text.ends_with('\n'))
}
