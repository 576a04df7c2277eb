//! Turns a model's raw output into the text of an inline completion.
//!
//! Pure string work, no LSP types. The steps, in order:
//! 1. strip chat noise: `<think>` blocks, a chat preamble line, markdown fences;
//! 2. single-line mode keeps one line (a leading newline is kept with the next
//!    line only when the cursor line has code before the cursor and nothing after);
//! 3. repetition loops are cut (the same line or block of up to 3 lines three times
//!    in a row; a short pattern repeated to the end of the output);
//! 4. indentation of lines after the first is rewritten in the document's style;
//! 5. the output is cut where it starts reproducing the lines after the cursor;
//! 6. the output is cut where it leaves the cursor line's indentation scope, and
//!    capped at `max_lines`;
//! 7. a bracket scan stops at a closer that closes nothing, unless it re-types a
//!    closer at the start of `line_suffix` (then those bytes are replaced);
//! 8. the end of the output that equals the start of `line_suffix` is replaced
//!    rather than duplicated;
//! 9. empty, whitespace-only, tiny results and those that repeat the suffix or the
//!    next line are rejected.

use std::borrow::Cow;

mod brackets;
mod clean;
mod lines;
mod similar;

use brackets::{is_closer, scan_brackets, suffix_overlap};
use clean::clean;
use lines::{
    cut_at_scope_end, cut_line_loops, cut_repeated_following, intra_line_loop_cut,
    normalize_indentation, select_single_line, strip_first_line_whitespace,
};
use similar::repeats_next_line;

/// How the document indents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndentStyle {
    Tabs,
    Spaces(u8),
}

impl IndentStyle {
    /// The document's indentation: tabs if more lines start with a tab than with
    /// spaces, else the most common increase in leading spaces between consecutive
    /// lines (2..=8). Defaults to four spaces.
    pub fn detect(text: &str) -> IndentStyle {
        let mut tab_lines = 0usize;
        let mut space_lines = 0usize;
        let mut deltas = [0usize; 9];
        let mut prev = 0usize;
        for line in text.lines() {
            let body = line.trim_start_matches([' ', '\t']);
            // Block-comment continuation lines (` * foo`) are aligned, not indented.
            if body.is_empty() || body.starts_with('*') {
                continue;
            }
            let lead = &line[..line.len() - body.len()];
            if lead.starts_with('\t') {
                tab_lines += 1;
                continue;
            }
            if lead.contains('\t') {
                continue;
            }
            let width = lead.len();
            if width > 0 {
                space_lines += 1;
            }
            if width > prev {
                let d = width - prev;
                if d < deltas.len() && d >= 2 {
                    deltas[d] += 1;
                }
            }
            prev = width;
        }
        if tab_lines > space_lines {
            return IndentStyle::Tabs;
        }
        let mut best = 4usize;
        let mut best_count = 0usize;
        for (d, &count) in deltas.iter().enumerate() {
            if count > best_count {
                best = d;
                best_count = count;
            }
        }
        IndentStyle::Spaces(best as u8)
    }

    /// Columns one level takes (a tab counts as 4 for comparisons).
    fn width(self) -> usize {
        match self {
            IndentStyle::Tabs => 4,
            IndentStyle::Spaces(n) => usize::from(n.max(1)),
        }
    }
}

pub struct Input<'a> {
    /// The model's output, exactly.
    pub raw: &'a str,
    /// The cursor line's text before the cursor.
    pub line_prefix: &'a str,
    /// The cursor line's text after the cursor (no newline; a trailing `\r` is ignored).
    pub line_suffix: &'a str,
    /// The document after the cursor line (starts after its newline).
    pub following: &'a str,
    /// The document before the cursor line (a window).
    pub preceding: &'a str,
    pub indent: IndentStyle,
    /// false: keep only the first line.
    pub multiline: bool,
    /// Cap for multi-line (0 counts as 1); ignored when `!multiline`.
    pub max_lines: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Text to insert at the cursor (may contain newlines when multi-line).
    pub text: String,
    /// Bytes of `line_suffix` (from its start) that the completion re-types and
    /// therefore replaces; the editor's range extends over them. Always on the
    /// cursor line.
    pub replace_suffix_bytes: usize,
}

/// Why nothing is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    Empty,
    WhitespaceOnly,
    Tiny,
    RepeatsNextLine,
    RepeatsSuffix,
    /// The output was only a markdown fence.
    Fenced,
    Other,
}

impl Rejected {
    /// A short phrase for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Rejected::Empty => "empty output",
            Rejected::WhitespaceOnly => "whitespace only",
            Rejected::Tiny => "too short to be worth showing",
            Rejected::RepeatsNextLine => "repeats the next line",
            Rejected::RepeatsSuffix => "repeats the text after the cursor",
            Rejected::Fenced => "only a markdown fence",
            Rejected::Other => "nothing left after postprocessing",
        }
    }
}

/// Turns `input.raw` into a completion, or says why there is none.
pub fn postprocess(input: &Input<'_>) -> Result<Completion, Rejected> {
    if input.raw.is_empty() {
        return Err(Rejected::Empty);
    }
    let suffix = input
        .line_suffix
        .strip_suffix('\r')
        .unwrap_or(input.line_suffix);
    let prefix = input.line_prefix;

    let cleaned = clean(input.raw, prefix);
    if cleaned.text.trim().is_empty() {
        return Err(if cleaned.fence_seen {
            Rejected::Fenced
        } else if cleaned.text.is_empty() {
            Rejected::Empty
        } else {
            Rejected::WhitespaceOnly
        });
    }

    let mut lines: Vec<Cow<'_, str>> = cleaned
        .text
        .split('\n')
        .map(|l| Cow::Borrowed(l.strip_suffix('\r').unwrap_or(l)))
        .collect();

    // A pattern repeated up to the end of the output means the model was looping
    // when it hit its token limit.
    if let Some(last) = lines.last_mut() {
        if let Some(cut) = intra_line_loop_cut(last) {
            let kept = last[..cut].to_string();
            *last = Cow::Owned(kept);
        }
    }

    if input.multiline {
        cut_line_loops(&mut lines);
    } else {
        select_single_line(&mut lines, prefix, suffix);
    }

    normalize_indentation(&mut lines, input.indent);

    let cut_by_following = cut_repeated_following(&mut lines, input.following);

    if input.multiline {
        cut_at_scope_end(&mut lines, prefix, input.indent);
        lines.truncate(input.max_lines.max(1));
    }

    strip_first_line_whitespace(&mut lines, prefix, cleaned.wrapped, input.indent);

    let mut text = lines.join("\n");
    let scan = scan_brackets(&text, prefix, suffix);
    let scan_cut = scan.stop < text.len();
    text.truncate(scan.stop);
    let trimmed_len = text.trim_end().len();
    text.truncate(trimmed_len);

    if text.trim().is_empty() {
        // The model did write something (checked above): what removed it says why.
        return Err(if cut_by_following {
            Rejected::RepeatsSuffix
        } else if scan_cut {
            Rejected::Other
        } else {
            Rejected::WhitespaceOnly
        });
    }

    let mut replace = scan.suffix_consumed;
    if let Some(k) = suffix_overlap(&text, suffix, replace) {
        replace = k;
    }
    if replace > 0 && text == suffix[..replace] {
        return Err(Rejected::RepeatsSuffix);
    }

    let mut non_ws = text.chars().filter(|c| !c.is_whitespace());
    let first = non_ws.next();
    if non_ws.next().is_none() {
        let closes_prefix = scan.closed_prefix && first.is_some_and(is_closer);
        if !closes_prefix {
            return Err(Rejected::Tiny);
        }
    }

    if repeats_next_line(
        &text,
        prefix,
        &suffix[replace..],
        input.following,
        input.preceding,
    ) {
        return Err(Rejected::RepeatsNextLine);
    }

    Ok(Completion {
        text,
        replace_suffix_bytes: replace,
    })
}
