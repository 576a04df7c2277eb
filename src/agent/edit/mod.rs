//! Search/replace edits, as a model writes them.
//!
//! The lessons of Aider and Codex: models quote the file slightly wrong
//! (trailing spaces, indentation, curly quotes), so matching climbs a ladder
//! of ever looser rungs and stops at the first that matches; an ambiguous or
//! missing match is refused with a message that tells the model exactly what
//! to resend; a file's line endings and everything outside the edit are kept
//! byte for byte. [`plan_step`] validates all edits of a turn before any is
//! written, and [`lint_guard`] refuses edits that break the syntax.
use std::fmt;

mod between;
mod blocks;
mod closest;
mod imports;
mod line_fix;
mod lint;
mod matching;
mod step;
mod udiff;

pub use between::{count_changed_lines, edit_between};
pub use blocks::{
    complete_beginning, defined_names, fenced_blocks, plan as plan_block, unclosed_block,
    BlockEdit, Candidate, FencedBlock, NoEdit,
};
pub(crate) use imports::{past_newline, python_preamble_end, python_top_level};
pub use line_fix::{line_edit, line_fixes, LineEdit, LineFix, NoLineFix};
pub use lint::{lint_guard, LintRejection};
pub use step::{plan_step, FileOp, OpReport, PlannedChange};
pub use udiff::{diff_edits, DiffEdit};

/// The result of a successful [`apply_edit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The whole new text.
    pub text: String,
    /// The rung that matched.
    pub strategy: Strategy,
    /// The lines the replacement occupies in the new text, 1-based and
    /// inclusive (`start_line == end_line` for a deletion: where it was).
    pub start_line: usize,
    pub end_line: usize,
}

/// The rungs of the matching ladder, strictest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    Exact,
    /// Whole lines, ignoring trailing whitespace.
    TrailingWhitespace,
    /// Whole lines, ignoring leading and trailing whitespace; the
    /// replacement is re-indented to the file's indentation.
    Indentation,
    /// As `Indentation`, also treating curly quotes, dashes, non-breaking
    /// spaces and `…` as their ASCII forms.
    Punctuation,
}

impl Strategy {
    /// How the match was made, for the model (`"applied at lines 3-5 (…)"`).
    pub fn describe(self) -> &'static str {
        match self {
            Strategy::Exact => "exact match",
            Strategy::TrailingWhitespace => "matched ignoring trailing whitespace",
            Strategy::Indentation => {
                "matched ignoring indentation; the replacement was re-indented to fit"
            }
            Strategy::Punctuation => {
                "matched ignoring indentation and quote/dash/space styles; \
                 the replacement was re-indented to fit"
            }
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Why an edit was not applied. `Display` is the message for the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EditError {
    EmptySearch,
    /// Not found on any rung. `closest`: the 1-based first line of the most
    /// similar window and that window, numbered.
    NoMatch {
        closest: Option<(usize, String)>,
    },
    /// More than one match on the winning rung, at these 1-based lines
    /// (one line listed once even if it holds several matches).
    Ambiguous {
        lines: Vec<usize>,
    },
    /// The search text is absent but the replacement is already there, at
    /// this 1-based line.
    AlreadyApplied {
        line: usize,
    },
}

/// Most candidate lines listed in an `Ambiguous` message.
const MAX_LISTED: usize = 10;

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EditError::EmptySearch => write!(
                f,
                "the search text is empty; copy the exact lines to replace from the file, \
                 or write the whole file instead"
            ),
            EditError::NoMatch { closest } => {
                write!(
                    f,
                    "the search text was not found in the file, not even ignoring whitespace, \
                     indentation and quote/dash styles"
                )?;
                match closest {
                    Some((line, numbered)) => {
                        let count = numbered.lines().count();
                        let last = line + count.saturating_sub(1);
                        write!(
                            f,
                            ". The most similar text is at {}:\n{numbered}\n\
                             Copy the lines to replace exactly as they are in the file \
                             (re-read it if it may have changed).",
                            lines_phrase(*line, last)
                        )
                    }
                    None => write!(
                        f,
                        "; re-read the file and copy the lines to replace exactly"
                    ),
                }
            }
            EditError::Ambiguous { lines } if lines.len() == 1 => write!(
                f,
                "the search text matches more than once in line {}; include more of the \
                 line or the lines around it to pick one",
                lines[0]
            ),
            EditError::Ambiguous { lines } => {
                let shown: Vec<String> = lines
                    .iter()
                    .take(MAX_LISTED)
                    .map(|l| l.to_string())
                    .collect();
                let more = lines.len().saturating_sub(MAX_LISTED);
                write!(f, "the search text matches at lines {}", shown.join(", "))?;
                if more > 0 {
                    write!(f, " and {more} more places")?;
                }
                write!(f, "; include more surrounding lines to pick one")
            }
            EditError::AlreadyApplied { line } => write!(
                f,
                "the search text was not found, but the replacement text is already in the \
                 file at line {line}: this edit seems to be applied already; don't resend it"
            ),
        }
    }
}

impl std::error::Error for EditError {}

/// Replaces the one place where `search` matches in `text` with `replace`.
///
/// Matching runs on LF-normalized text; the result keeps the file's own line
/// endings (a CRLF file stays CRLF) and every byte outside the replaced
/// region. See [`Strategy`] for the rungs.
pub fn apply_edit(text: &str, search: &str, replace: &str) -> Result<Applied, EditError> {
    matching::apply(text, search, replace)
}

/// `lines` numbered from `first` (1-based), one per line: `  12 | text`.
pub(crate) fn numbered<S: AsRef<str>>(lines: &[S], first: usize) -> String {
    let last = first + lines.len().saturating_sub(1);
    let width = last.to_string().len();
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| format!("{:>width$} | {}", first + i, line.as_ref()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `"line 3"` or `"lines 3-5"`.
pub(crate) fn lines_phrase(start: usize, end: usize) -> String {
    if end > start {
        format!("lines {start}-{end}")
    } else {
        format!("line {start}")
    }
}
