//! The review before success (`agent.review`, `fettle fix --review`): when
//! the tests pass, the change is looked at before the task says so. First
//! without a model (`agent::review`: tests deleted, skipped or weakened, a
//! value the tests expect hard-coded, debugging output) — any finding
//! rejects it; then by a reviewer turn (`agent.review_model`, else the
//! agent's model) reading the goal, the test results and the diff. A
//! rejected change counts as worse than any state not rejected: it is
//! rolled back, and the reasons are the next attempt's feedback; a
//! rejection in the last attempt earns one more. Without `agent.review`
//! the findings are only named in the summary.

use serde_json::json;

use super::check::Verification;
use super::{prompt, Task};
use crate::agent::review::{inspect, FileChange, Finding};
use crate::agent::types::EventKind;
use crate::model::Message;

/// The reviewer's answer: a verdict line and a few reasons.
const REVIEW_MAX_TOKENS: u32 = 256;
/// Changed files larger than this are not inspected by the checks.
const MAX_INSPECTED_BYTES: u64 = 1024 * 1024;
/// The most of the diff the reviewer reads.
const REVIEW_DIFF_BYTES: usize = 12 * 1024;

const REVIEWER_SYSTEM: &str = "You check a change a coding agent made for a goal; the tests pass now. Only these count as cheating: a test deleted, skipped or weakened; a value a test expects written into the code instead of fixing the logic; debugging output left in; changes that have nothing to do with the goal. First say in one sentence what the change does. Then, on the last line, write exactly `VERDICT: APPROVE` when it is a genuine attempt at the goal with none of these, or `VERDICT: REJECT: ` and which one, where.";

/// What the review found and said, for the result and the summary.
#[derive(Default)]
pub(super) struct ReviewLog {
    /// Each verdict: `{"iteration", "by", "approved", "reasons"}`.
    pub verdicts: Vec<serde_json::Value>,
    /// Findings in the final change when no review was asked for.
    pub flagged: Vec<String>,
    /// Whether a rejection in the last attempt added one.
    extended: bool,
}

impl Task {
    /// Looks at a change whose verification passed; a rejection marks `v`
    /// as failed (see the module's text).
    pub(super) async fn review_change(&mut self, v: &mut Verification) {
        let findings = self.findings();
        if !self.spec.review {
            self.review.flagged = findings
                .iter()
                .map(|f| format!("{}: {}", f.path, f.text))
                .collect();
            if !self.review.flagged.is_empty() {
                self.status(&format!(
                    "The change passes the tests but {}",
                    self.review.flagged.join("; ")
                ));
            }
            return;
        }
        let (by, approved, reasons) = match findings.is_empty() {
            false => (
                "checks".to_owned(),
                false,
                findings
                    .iter()
                    .map(|f| format!("{}: {}", f.path, f.text))
                    .collect(),
            ),
            true => {
                self.status("Reviewing the change");
                let by = self
                    .reviewer
                    .as_ref()
                    .unwrap_or(&self.model)
                    .name()
                    .to_owned();
                match self.ask_reviewer(v).await {
                    Ok((approved, reasons)) => (by, approved, reasons),
                    // No usable answer (the model failed, the time ran
                    // out, no verdict): the tests' verdict stands, and the
                    // summary says so.
                    Err(why) => (by, true, vec![why]),
                }
            }
        };
        let iteration = self.iterations;
        self.review.verdicts.push(json!({
            "iteration": iteration,
            "by": by,
            "approved": approved,
            "reasons": reasons,
        }));
        let text = match approved {
            true => format!("Review ({by}): approved"),
            false => format!("Review ({by}): rejected — {}", reasons.join("; ")),
        };
        self.event(
            EventKind::Verify,
            text,
            // `passed`: how the terminal and the editors mark a verdict.
            json!({ "iteration": iteration, "passed": approved, "review": { "by": by, "approved": approved, "reasons": reasons } }),
        );
        if approved {
            return;
        }
        v.passed = false;
        v.score.rejected = true;
        v.review = Some(
            reasons
                .iter()
                .map(|r| format!("- {r}"))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        if iteration >= self.spec.budget.max_iterations && !self.review.extended {
            // The rejection's reasons deserve an attempt.
            self.review.extended = true;
            self.spec.budget.max_iterations += 1;
        }
    }

    /// The deterministic findings in the change as it is.
    pub(super) fn findings(&self) -> Vec<Finding> {
        // A file a command wrote may be huge: only source-sized files are
        // read (a cheat lives in code and tests).
        let changed: Vec<std::path::PathBuf> = self
            .files
            .changed_files()
            .into_iter()
            .filter(|p| {
                self.files
                    .disk_len(p)
                    .is_none_or(|len| len <= MAX_INSPECTED_BYTES)
            })
            .collect();
        let texts: Vec<(String, Option<String>, Option<String>)> = changed
            .iter()
            .map(|p| {
                let before = self
                    .files
                    .original(p)
                    .map(|b| String::from_utf8_lossy(b).into_owned());
                (self.files.paths.relative(p), before, self.files.text(p))
            })
            .collect();
        let changes: Vec<FileChange<'_>> = texts
            .iter()
            .map(|(path, before, after)| FileChange {
                path,
                before: before.as_deref(),
                after: after.as_deref(),
            })
            .collect();
        let kept: Vec<(String, String)> = self
            .files
            .tests_kept
            .iter()
            .filter_map(|p| Some((self.files.paths.relative(p), self.files.text(p)?)))
            .collect();
        let tests: Vec<(&str, &str)> = kept.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
        inspect(&changes, &tests)
    }

    /// One turn of the reviewer: `(approved, reasons)`, or why there is no
    /// usable answer.
    async fn ask_reviewer(&mut self, v: &Verification) -> Result<(bool, Vec<String>), String> {
        let diff = crate::agent::output::head_tail(&self.files.diff(), REVIEW_DIFF_BYTES, 400);
        let user = format!(
            "Goal: {}\nTests: {}\n{}\nReview this change. Answer in two lines: one sentence on what the change does, then `VERDICT: APPROVE` or `VERDICT: REJECT: ` and the reason.",
            prompt::defuse(self.spec.goal.trim()),
            v.headline(),
            self.boundary.data("diff", "the change", &diff),
        );
        let messages = vec![Message::system(REVIEWER_SYSTEM), Message::user(user)];
        let model = self.reviewer.clone().unwrap_or_else(|| self.model.clone());
        let text = self
            .words_only_turn(&model, messages, REVIEW_MAX_TOKENS, 0.0)
            .await
            .map_err(|why| {
                tracing::warn!(%why, "no answer from the reviewer");
                format!("the reviewer gave no answer: {why}")
            })?;
        parse_verdict(&text).ok_or_else(|| {
            tracing::info!(answer = %text, "the reviewer's answer has no verdict");
            let quoted: String = text.trim().chars().take(160).collect();
            format!("the reviewer's answer had no verdict: \"{quoted}\"")
        })
    }

    /// The review's lines for the summary.
    pub(super) fn review_note(&self) -> Option<String> {
        if !self.review.flagged.is_empty() {
            return Some(format!(
                "Note: the tests pass, but the change {}. Look at it before keeping it (`agent.review` rejects such changes).",
                self.review.flagged.join("; ")
            ));
        }
        let last = self.review.verdicts.last()?;
        let by = last["by"].as_str().unwrap_or("");
        let reasons: Vec<&str> = last["reasons"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str())
            .collect();
        let rejected = self
            .review
            .verdicts
            .iter()
            .filter(|v| v["approved"] == false)
            .count();
        let earlier = match rejected {
            0 => String::new(),
            n => format!(" ({n} earlier change(s) rejected)"),
        };
        Some(match last["approved"].as_bool() {
            Some(true) if reasons.is_empty() => format!("Review ({by}): approved{earlier}."),
            Some(true) => format!("Review ({by}): {}{earlier}.", reasons.join("; ")),
            _ => format!("Review ({by}): rejected — {}.", reasons.join("; ")),
        })
    }
}

/// `APPROVE`, or `REJECT` and its reasons, from the reviewer's answer:
/// what follows its last `VERDICT:` — on that line or the next (the 1.5B
/// ended four of 21 QuixBugs reviews with `VERDICT:` and its verdict
/// below) — else its first line (markdown and case aside); `None` when it
/// says neither.
fn parse_verdict(text: &str) -> Option<(bool, Vec<String>)> {
    // ASCII upper case keeps every byte offset of `text`.
    match text.to_ascii_uppercase().rfind("VERDICT:") {
        Some(at) => first_line_verdict(text.get(at + "VERDICT:".len()..).unwrap_or("")),
        None => first_line_verdict(text),
    }
}

fn first_line_verdict(text: &str) -> Option<(bool, Vec<String>)> {
    let mut lines = text.lines().map(|l| {
        l.trim()
            .trim_matches(|c: char| matches!(c, '*' | '#' | '`' | '-' | ' '))
            .to_owned()
    });
    let verdict = lines.by_ref().find(|l| !l.is_empty())?;
    let upper = verdict.to_uppercase();
    let approved = if upper.starts_with("APPROVE") {
        true
    } else if upper.starts_with("REJECT") {
        false
    } else {
        return None;
    };
    let mut reasons: Vec<String> = Vec::new();
    let inline = verdict
        .split_once([':', '—'])
        .map(|(_, rest)| rest.trim().to_owned())
        .filter(|r| !r.is_empty());
    reasons.extend(inline);
    reasons.extend(lines.filter(|l| !l.is_empty()).take(5));
    for r in &mut reasons {
        if r.chars().count() > 200 {
            *r = r.chars().take(200).collect::<String>() + "…";
        }
    }
    if approved {
        return Some((true, Vec::new()));
    }
    // A rejection must say what is wrong: without a reason there is
    // nothing to repair (the 1.5B rejected 4 of 39 correct fixes so).
    if reasons.is_empty() {
        return None;
    }
    Some((false, reasons))
}

#[cfg(test)]
mod tests {
    use super::parse_verdict;

    #[test]
    fn verdicts_are_read_through_markdown_and_case() {
        assert_eq!(parse_verdict("APPROVE"), Some((true, vec![])));
        assert_eq!(
            parse_verdict("\n**Approve**\nlooks fine"),
            Some((true, vec![]))
        );
        assert_eq!(
            parse_verdict("REJECT\n- the test was deleted\n- prints left"),
            Some((
                false,
                vec!["the test was deleted".to_owned(), "prints left".to_owned()]
            ))
        );
        assert_eq!(
            parse_verdict("Reject: hard-codes 2.5"),
            Some((false, vec!["hard-codes 2.5".to_owned()]))
        );
        assert_eq!(parse_verdict("The change looks good."), None);
        assert_eq!(
            parse_verdict("It fixes the loop bound.\nVERDICT: APPROVE"),
            Some((true, vec![]))
        );
        assert_eq!(
            parse_verdict(
                "It deletes test_even.\n**Verdict: REJECT: the test test_even is deleted**"
            ),
            Some((false, vec!["the test test_even is deleted".to_owned()]))
        );
        assert_eq!(
            parse_verdict("It adds a print.\nVERDICT:\n\nREJECT: debugging output"),
            Some((false, vec!["debugging output".to_owned()])),
            "the verdict on the line after"
        );
        assert_eq!(
            parse_verdict("Fine. VERDICT: APPROVE"),
            Some((true, vec![]))
        );
        assert_eq!(parse_verdict(""), None);
        assert_eq!(
            parse_verdict("VERDICT: REJECT"),
            None,
            "no reason, no rejection"
        );
    }
}
