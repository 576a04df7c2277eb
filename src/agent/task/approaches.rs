//! How the candidates of a search differ (`agent.candidates`): sampling
//! hotter alone gives a small model the same wrong answer three times, so
//! each candidate after the first is also asked for a different approach —
//! name only the wrong line and its correction, look hardest at another
//! suspect function, name the wrong line before fixing it, or change as
//! few lines as possible — appended to the message it drafts from. The
//! tests choose among them all the same.

use std::path::{Path, PathBuf};

use super::check::Verification;
use super::Task;
use crate::agent::verify::{is_test_file, parse_trace};
use crate::syntax::SymbolKind;

/// The temperatures of the rounds of approaches after the first candidate
/// (which keeps the single line's): candidates 2–4 at the first, 5–7 at
/// the second, and so on, in turn.
const ROUND_TEMPERATURES: [f64; 2] = [0.7, 1.0];

/// The approaches after the first candidate, in turn. The one-line answer
/// comes twice in each six: it costs a dozen tokens where a whole function
/// costs hundreds, and it fixed what the others did not (QuixBugs
/// `knapsack`, `subsequences` with the 1.5B).
const ROTATION: [Rotation; 6] = [
    Rotation::OneLine,
    Rotation::Suspect,
    Rotation::OneLine,
    Rotation::ReasonFirst,
    Rotation::Suspect,
    Rotation::SmallestChange,
];

#[derive(Clone, Copy)]
enum Rotation {
    OneLine,
    Suspect,
    ReasonFirst,
    SmallestChange,
}

/// The most tokens a one-line answer may take (two quoted lines take 20–60;
/// past that the model is writing the whole function after all).
pub(super) const ONE_LINE_MAX_TOKENS: u32 = 128;

/// Suspect functions kept for the hints.
const MAX_SUSPECTS: usize = 8;
/// Functions ranked from each source before the best are kept.
const MAX_RANKED: usize = 24;

/// A candidate's approach.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Approach {
    /// As a single line of attempts would answer.
    AsSingleLine,
    /// Only the wrong line, quoted, and its correction (`WRONG:`/`FIXED:`).
    OneLine,
    /// The wrong line named, and why, before the fix.
    ReasonFirst,
    /// The fix looked for in one suspect function first.
    Suspect(Suspect),
    /// As few lines changed as possible (one or two in a whole function, or
    /// a narrow edit).
    SmallestChange,
}

/// A function the failure may come from.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Suspect {
    pub name: String,
    /// Relative to the workspace.
    pub path: String,
    /// 1-based, inclusive.
    pub lines: (u32, u32),
    /// Why it is suspected (for the log and `--json`).
    pub why: String,
}

impl Suspect {
    /// Its entry in events and the result's `suspects`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name, "path": self.path,
            "lines": [self.lines.0, self.lines.1], "why": self.why,
        })
    }
}

impl Approach {
    /// The short name in events and `--json`.
    pub fn label(&self) -> String {
        match self {
            Approach::AsSingleLine => "as a single line".to_owned(),
            Approach::OneLine => "only the wrong line".to_owned(),
            Approach::ReasonFirst => "name the wrong line first".to_owned(),
            Approach::Suspect(s) => format!("look first at {} in {}", s.name, s.path),
            Approach::SmallestChange => "the smallest change".to_owned(),
        }
    }

    /// The message a candidate drafts from, asked for this approach. The
    /// one-line form takes the place of the compact prompt's request for
    /// the whole function: after it, the 1.5B mostly wrote the whole
    /// function again, or the same line twice.
    pub fn ask(&self, message: &mut String, compact: bool) {
        let instruction = self.instruction(compact);
        if instruction.is_empty() {
            return;
        }
        if *self == Approach::OneLine && compact {
            if let Some(at) = message.rfind(super::prompt::FIX_THE_CODE_SHOWN) {
                message.replace_range(
                    at..at + super::prompt::FIX_THE_CODE_SHOWN.len(),
                    "\nThe code above, as it is, fails the verification.",
                );
            }
        }
        message.push_str(&instruction);
    }

    /// What is appended to the message the candidate drafts from (empty
    /// for the first). `compact`: the model answers with code, not tools.
    pub fn instruction(&self, compact: bool) -> String {
        let text = match (self, compact) {
            (Approach::AsSingleLine, _) => return String::new(),
            (Approach::OneLine, true) => "Exactly one line of the code is wrong. Answer with only that line as it is and the line corrected, in this form:\nWRONG: <the line as it is>\nFIXED: <the corrected line>".to_owned(),
            (Approach::OneLine, false) => "Exactly one line is wrong: find it and change only that line (one edit whose search text is that line), or answer with only that line as it is and the line corrected, in this form:\nWRONG: <the line as it is>\nFIXED: <the corrected line>".to_owned(),
            (Approach::ReasonFirst, true) => "First, in one sentence, name the line that is wrong and why; then answer with the whole corrected function in one fenced code block.".to_owned(),
            (Approach::ReasonFirst, false) => "First, in one sentence, name the line that is wrong and why; then make the edit.".to_owned(),
            (Approach::Suspect(s), _) => format!(
                "The fault may not be where the failure shows it: look hardest at `{}` ({}, lines {}–{}). Read it line by line against what the failing test expects and change it where it is wrong.",
                s.name, s.path, s.lines.0, s.lines.1
            ),
            // Not as a diff: the 1.5B's diffs quoted elisions and could not
            // be applied; a whole function with one or two lines changed can.
            (Approach::SmallestChange, true) => "Change as few lines as possible — one or two — and keep every other line exactly as it is: answer with the whole function in one fenced code block.".to_owned(),
            (Approach::SmallestChange, false) => "Change as few lines as possible: one edit whose search text is only the lines that change.".to_owned(),
        };
        format!("\n\n{text}")
    }
}

/// Candidate `number`'s approach and temperature; `first` is the single
/// line's temperature. Rounds of three after the first candidate: reason
/// first, a suspect (the round's, in turn), the smallest change.
pub(super) fn approach_for(number: u32, first: f64, suspects: &[Suspect]) -> (Approach, f64) {
    let Some(k) = number.checked_sub(2) else {
        return (Approach::AsSingleLine, first);
    };
    let round = (k / 3) as usize;
    let temperature = ROUND_TEMPERATURES[round % ROUND_TEMPERATURES.len()];
    let approach = match ROTATION[k as usize % ROTATION.len()] {
        Rotation::OneLine => Approach::OneLine,
        // A suspect's turn comes once a round: the round's suspect, in turn.
        Rotation::Suspect => match suspects.get(round % suspects.len().max(1)) {
            Some(s) => Approach::Suspect(s.clone()),
            None => Approach::ReasonFirst,
        },
        Rotation::ReasonFirst => Approach::ReasonFirst,
        Rotation::SmallestChange => Approach::SmallestChange,
    };
    (approach, temperature)
}

impl Task {
    /// The functions the failure may come from, most likely first: those
    /// on a trace's workspace frames (code before tests), those the failing
    /// tests call (nearest first), those the goal and the failure name,
    /// then the rest of the best-ranked files the task may change —
    /// functions the task may edit only.
    pub(super) fn suspects(&self, baseline: &Verification) -> Vec<Suspect> {
        let by_names = self.suspects_by_names(baseline, MAX_RANKED);
        let Some(spectrum) = &self.spectrum else {
            return by_names.into_iter().take(MAX_SUSPECTS).collect();
        };
        // One ranking: what the traced tests ran (Ochiai) first; among
        // equal scores, and for functions no failing test ran, the order
        // above (a weight for it overturned a better Ochiai score: the
        // function every test calls first, the helper only failures reach
        // second).
        // By the score, then the function's own (a line ties it).
        let mut ranked: Vec<((f64, f64), Suspect)> = Vec::new();
        for s in &by_names {
            let executed = spectrum.functions.iter().find(|e| {
                self.files.paths.relative(&e.symbol.path) == s.path
                    && e.symbol.range.0.line + 1 == s.lines.0
            });
            let (score, why) = match executed {
                Some(e) => (
                    (e.score, e.function_score),
                    format!("{}; {}", spectrum.why(e), s.why),
                ),
                None => ((0.0, 0.0), s.why.clone()),
            };
            ranked.push((score, Suspect { why, ..s.clone() }));
        }
        for e in spectrum.functions.iter().take(MAX_RANKED) {
            if let Some(s) = self.suspect_of(&e.symbol, &spectrum.why(e)) {
                if !ranked
                    .iter()
                    .any(|(_, o)| o.path == s.path && o.lines == s.lines)
                {
                    ranked.push(((e.score, e.function_score), s));
                }
            }
        }
        // Stable: the order by names among equal scores.
        ranked.sort_by(|a, b| b.0 .0.total_cmp(&a.0 .0).then(b.0 .1.total_cmp(&a.0 .1)));
        ranked
            .into_iter()
            .map(|(_, s)| s)
            .take(MAX_SUSPECTS)
            .collect()
    }

    /// The suspects by the failure's stack, the call path, names and files,
    /// at most `limit`.
    fn suspects_by_names(&self, baseline: &Verification, limit: usize) -> Vec<Suspect> {
        let root = self.files.root();
        let mut output = self.spec.goal.clone();
        if let Some(outcome) = &baseline.outcome {
            output.push('\n');
            output.push_str(&outcome.output);
        }
        let mut out: Vec<Suspect> = Vec::new();
        let mut frames = parse_trace(&output, root);
        if let Some(trace) = &self.spec.trace {
            frames.extend(parse_trace(trace, root));
        }
        frames.sort_by_key(|f| is_test_file(&f.path));
        for frame in frames {
            let path = root.join(&frame.path);
            if let Some(s) = self.function_at(&path, frame.line) {
                self.add_suspect(&mut out, s, limit);
            }
        }
        for called in self.call_path(baseline) {
            let why = match called.depth {
                1 => format!("called by the failing test `{}`", called.caller),
                k => format!(
                    "called by `{}`, {k} calls below a failing test",
                    called.caller
                ),
            };
            if let Some(s) = self.suspect_of(&called.symbol, &why) {
                self.add_suspect(&mut out, s, limit);
            }
        }
        let focus = crate::agent::repo_map::Focus::from_text(&output, root, &self.index);
        for identifier in &focus.identifiers {
            for symbol in self.index.definitions(identifier) {
                if let Some(s) = self.suspect_of(&symbol, "named in the goal or the failure") {
                    self.add_suspect(&mut out, s, limit);
                }
            }
        }
        for (path, _) in crate::agent::repo_map::rank_files(&self.index, &focus)
            .into_iter()
            .take(3)
        {
            for symbol in self.index.file_symbols(&path) {
                if let Some(s) = self.suspect_of(&symbol, "in a file the failure points to") {
                    self.add_suspect(&mut out, s, limit);
                }
            }
        }
        out
    }

    /// The suspects in the log (`Suspects: …`, data `suspects`) and,
    /// through [`Task::suspects`], in the result.
    pub(super) fn suspects_event(&self) {
        if self.suspects.is_empty() {
            return;
        }
        let lines: Vec<String> = self
            .suspects
            .iter()
            .map(|s| format!("{} ({}:{}): {}", s.name, s.path, s.lines.0, s.why))
            .collect();
        self.event(
            crate::agent::types::EventKind::Status,
            format!("Suspects, most likely first:\n{}", lines.join("\n")),
            serde_json::json!({ "suspects": self.suspects.iter().map(Suspect::to_json).collect::<Vec<_>>() }),
        );
    }

    fn add_suspect(&self, out: &mut Vec<Suspect>, s: Suspect, limit: usize) {
        if out.len() < limit && !out.iter().any(|o| o.path == s.path && o.name == s.name) {
            out.push(s);
        }
    }

    /// The function around `line` (1-based) of `path`, by the index.
    fn function_at(&self, path: &Path, line: u32) -> Option<Suspect> {
        self.index
            .file_symbols(path)
            .iter()
            .filter(|s| is_function(s.kind))
            .filter(|s| s.range.0.line < line && line <= s.range.1.line + 1)
            // The innermost: the one starting last.
            .max_by_key(|s| s.range.0.line)
            .and_then(|s| self.suspect_of(s, "on the failure's stack"))
    }

    /// A test in a code file: a function in a `mod tests` (Rust's unit
    /// tests live beside the code) or marked `#[test]`.
    pub(super) fn is_test_function(&self, symbol: &crate::index::IndexedSymbol) -> bool {
        if super::call_path::in_test_module(symbol) {
            return true;
        }
        if crate::syntax::Language::from_path(&symbol.path) != Some(crate::syntax::Language::Rust) {
            return false;
        }
        let Some(text) = self.files.text(&symbol.path) else {
            return false;
        };
        // Its attributes: the lines just above, and its own first line.
        let start = symbol.range.0.line as usize;
        text.lines()
            .skip(start.saturating_sub(3))
            .take(start.min(3) + 1)
            .any(|line| {
                let line = line.trim_start();
                line.starts_with("#[") && (line.contains("test]") || line.contains("test("))
            })
    }

    /// A function the task may change, as a suspect.
    fn suspect_of(&self, symbol: &crate::index::IndexedSymbol, why: &str) -> Option<Suspect> {
        if !is_function(symbol.kind) {
            return None;
        }
        let path: PathBuf = symbol.path.to_path_buf();
        let rel = self.files.paths.relative(&path);
        if is_test_file(&rel)
            || self.is_test_function(symbol)
            || self.files.tests_kept.contains(&path)
            || self.files.paths.check_writable(&rel, &path).is_err()
            || crate::agent::redact::is_secret_path(&path)
        {
            return None;
        }
        Some(Suspect {
            name: symbol.name.to_string(),
            path: rel,
            lines: (symbol.range.0.line + 1, symbol.range.1.line + 1),
            why: why.to_owned(),
        })
    }
}

pub(super) fn is_function(kind: SymbolKind) -> bool {
    matches!(
        kind,
        SymbolKind::Function | SymbolKind::Method | SymbolKind::Constructor
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suspect(name: &str) -> Suspect {
        Suspect {
            name: name.to_owned(),
            path: "lib.py".to_owned(),
            lines: (1, 5),
            why: "named in the goal or the failure".to_owned(),
        }
    }

    #[test]
    fn candidates_after_the_first_take_turns_at_the_approaches() {
        let suspects = [suspect("parse"), suspect("helper")];
        let approaches: Vec<(Approach, f64)> =
            (1..=8).map(|n| approach_for(n, 0.0, &suspects)).collect();
        assert_eq!(approaches[0], (Approach::AsSingleLine, 0.0));
        assert_eq!(approaches[1], (Approach::OneLine, 0.7));
        assert_eq!(approaches[2], (Approach::Suspect(suspect("parse")), 0.7));
        assert_eq!(approaches[3], (Approach::OneLine, 0.7));
        assert_eq!(approaches[4], (Approach::ReasonFirst, 1.0));
        // The second round looks at the second suspect.
        assert_eq!(approaches[5], (Approach::Suspect(suspect("helper")), 1.0));
        assert_eq!(approaches[6], (Approach::SmallestChange, 1.0));
        assert_eq!(approaches[7], (Approach::OneLine, 0.7));
        // Without a suspect, a suspect's turn reasons first.
        assert_eq!(approach_for(3, 0.0, &[]).0, Approach::ReasonFirst);
    }

    #[test]
    fn each_approach_but_the_first_asks_for_something_different() {
        assert_eq!(Approach::AsSingleLine.instruction(true), "");
        let texts: Vec<String> = [
            Approach::ReasonFirst,
            Approach::Suspect(suspect("parse")),
            Approach::SmallestChange,
            Approach::OneLine,
        ]
        .iter()
        .flat_map(|a| [a.instruction(true), a.instruction(false)])
        .collect();
        assert!(texts.iter().all(|t| t.starts_with("\n\n") && t.len() > 40));
        assert!(texts[2].contains("`parse` (lib.py, lines 1–5)"));
        assert!(texts[4].contains("one or two") && texts[4].contains("whole function"));
        assert!(texts[5].contains("one edit"));
        // It replaces the compact prompt's request for the whole function.
        let mut message = format!("code{}", super::super::prompt::FIX_THE_CODE_SHOWN);
        Approach::OneLine.ask(&mut message, true);
        assert!(!message.contains("whole corrected function"), "{message}");
        assert!(message.contains("fails the verification.\n\nExactly one line"));
        let mut message = format!("code{}", super::super::prompt::FIX_THE_CODE_SHOWN);
        Approach::ReasonFirst.ask(&mut message, true);
        assert!(message.contains("whole corrected function in one fenced code block, changed"));
        // The form it asks for is the one `agent::edit::line_fix` reads.
        for text in [&texts[6], &texts[7]] {
            let fixes = crate::agent::edit::line_fixes(text);
            assert_eq!(fixes.len(), 1, "{text}");
            assert_eq!(fixes[0].wrong, "<the line as it is>");
            assert_eq!(fixes[0].fixed, "<the corrected line>");
        }
    }
}
