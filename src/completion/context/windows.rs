//! The prefix and suffix windows, and line helpers shared by the sources.
use std::ops::Range;

use crate::model::tokens::{self, TokenCounter};

/// The widest prefix and suffix windows a budget of `total` allows.
pub(super) struct Windows {
    /// Tokens the prefix needs (line by line), at most `total`.
    pub prefix_need: usize,
    pub suffix_need: usize,
    /// Lines of the current document (0-based, end exclusive) that the
    /// widest windows show: snippets from there would repeat them.
    pub shown_lines: Range<usize>,
}

impl Windows {
    pub fn widest(before: &str, after: &str, total: usize, counter: &dyn TokenCounter) -> Self {
        // Cutting at `total` first bounds the counting to what could ever be
        // used, however large the file.
        let prefix = tokens::take_prefix_tail(before, total, counter);
        let suffix = tokens::take_suffix_head(after, total, counter);
        let cursor_line = count_newlines(before);
        let first = cursor_line - count_newlines(prefix);
        let last = cursor_line + count_newlines(suffix);
        Windows {
            prefix_need: lines_cost(prefix, counter),
            suffix_need: lines_cost(suffix, counter),
            shown_lines: first..last + 1,
        }
    }
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
