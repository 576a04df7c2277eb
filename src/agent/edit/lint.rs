//! Refuses a change that makes a file parse worse than it did.
use std::fmt;
use std::path::Path;

use super::{lines_phrase, numbered};
use crate::syntax::{edit_errors, parse_str, Language};

/// Errors counted per version: past this, "more" is all that matters.
const MAX_ERRORS: usize = 200;
/// Errors listed in the message.
const MAX_LISTED: usize = 5;
/// Unchanged lines shown around the changed region.
const CONTEXT: usize = 2;
/// Longest excerpt shown per side; longer ones keep their head and tail.
const MAX_EXCERPT: usize = 40;

/// Why [`lint_guard`] refused a change. `Display` is the message for the
/// model: the new errors and the changed region, before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LintRejection {
    /// Syntax errors before and after the change.
    pub old_count: usize,
    pub new_count: usize,
    /// Errors of the new text (1-based line, message), those in the changed
    /// region first, at most a few.
    pub errors: Vec<(usize, String)>,
    /// The changed region with context, numbered: before (`None` for a new
    /// file) and after.
    pub before: Option<Excerpt>,
    pub after: Excerpt,
}

/// Numbered lines of a file, first to last (1-based, inclusive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Excerpt {
    pub first: usize,
    pub last: usize,
    pub text: String,
}

impl fmt::Display for LintRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "the change would add syntax errors (the file had {}, it would have {}):",
            self.old_count, self.new_count
        )?;
        for (line, message) in &self.errors {
            writeln!(f, "  line {line}: {message}")?;
        }
        match &self.before {
            Some(before) => writeln!(
                f,
                "Before the change ({}):\n{}",
                lines_phrase(before.first, before.last),
                before.text
            )?,
            None => writeln!(f, "(The file is new.)")?,
        }
        writeln!(
            f,
            "After the change ({}):\n{}",
            lines_phrase(self.after.first, self.after.last),
            self.after.text
        )?;
        write!(
            f,
            "Nothing was written. Fix the edit so the code still parses, and resend it."
        )
    }
}

impl std::error::Error for LintRejection {}

/// Parses `old` and `new` as the language of `path` and refuses the change
/// if `new` has more syntax errors. Unknown languages (and a parser that
/// gives up) pass: the guard only ever refuses on evidence. `old` is `""`
/// for a new file.
pub fn lint_guard(path: &Path, old: &str, new: &str) -> Result<(), LintRejection> {
    let Some(lang) = Language::from_path(path) else {
        return Ok(());
    };
    let count =
        |text: &str| parse_str(lang, text, None).map(|tree| edit_errors(&tree, text, MAX_ERRORS));
    let (Some(old_errors), Some(new_errors)) = (count(old), count(new)) else {
        return Ok(());
    };
    if new_errors.len() <= old_errors.len() {
        return Ok(());
    }

    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let prefix = old_lines
        .iter()
        .zip(&new_lines)
        .take_while(|(a, b)| a == b)
        .count();
    let suffix = old_lines[prefix..]
        .iter()
        .rev()
        .zip(new_lines[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    // 0-based, half-open changed regions.
    let old_region = prefix..old_lines.len() - suffix;
    let new_region = prefix..new_lines.len() - suffix;

    let mut errors: Vec<(usize, String)> = new_errors
        .iter()
        .map(|e| (line_of(new, e.range.start), e.message.clone()))
        .collect();
    let near =
        |line: usize| line + CONTEXT > new_region.start && line <= new_region.end + CONTEXT + 1;
    // Stable: errors near the change first, each group in file order.
    errors.sort_by_key(|&(line, _)| !near(line));
    errors.truncate(MAX_LISTED);

    Err(LintRejection {
        old_count: old_errors.len(),
        new_count: new_errors.len(),
        errors,
        before: (!old.is_empty()).then(|| excerpt(&old_lines, old_region)),
        after: excerpt(&new_lines, new_region),
    })
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    1 + text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// The `region` of `lines` with [`CONTEXT`] lines around it, numbered.
fn excerpt(lines: &[&str], region: std::ops::Range<usize>) -> Excerpt {
    let from = region.start.saturating_sub(CONTEXT);
    let to = (region.end + CONTEXT).min(lines.len());
    if from >= to {
        return Excerpt {
            first: from + 1,
            last: from + 1,
            text: String::from("(empty)"),
        };
    }
    let shown = &lines[from..to];
    let text = if shown.len() > MAX_EXCERPT {
        let half = MAX_EXCERPT / 2;
        let tail_start = shown.len() - half;
        format!(
            "{}\n  … ({} lines)\n{}",
            numbered(&shown[..half], from + 1),
            tail_start - half,
            numbered(&shown[tail_start..], from + 1 + tail_start)
        )
    } else {
        numbered(shown, from + 1)
    };
    Excerpt {
        first: from + 1,
        last: to,
        text,
    }
}
