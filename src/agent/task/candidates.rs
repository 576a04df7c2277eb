//! Search over candidate fixes (`agent.candidates`, `fettle fix
//! --candidates N`): an attempt drafts up to N answers from the same start
//! — the first as a single line would, the others sampled hotter and each
//! asked for a different approach (`approaches`) — with their edits held
//! in memory. Each new one is tested at once in its own
//! copy of the workspace, in the sandbox, while the next is drafted; the
//! tests rank them (passing, then the score, then the smaller change) and
//! the best is applied once through the normal edit path (buffers,
//! checkpoint, undo). Drafting stops when one passes. A weak model that
//! gets a fix right one time in four then fixes it in one attempt.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::approaches::approach_for;
use super::check::{self, CheckSettings, Score};
use super::explain::StopCause;
use super::Task;
use crate::agent::checkers::Checker;
use crate::agent::edit::{count_changed_lines, edit_between, FileOp};
use crate::agent::exec::Limits;
use crate::agent::isolated::{CopyArea, IsolatedCopy};
use crate::agent::sandbox::SandboxPolicy;
use crate::agent::types::EventKind;
use crate::agent::CheckGoal;

/// The most of a candidate's diff an attempt's note quotes.
const NOTE_DIFF_BYTES: usize = 800;

/// A test run stopped because it was no longer needed.
pub(super) const STOPPED: &str = "stopped";

/// One candidate drafted.
struct Drafted {
    number: u32,
    changes: BTreeMap<PathBuf, String>,
    /// What the files held when it was drafted (for the edit applied).
    base: BTreeMap<PathBuf, Option<String>>,
    last_text: String,
    answer_note: Option<String>,
    /// Its turns (a model with tools goes on from the chosen one's).
    turns: Vec<crate::model::Message>,
    edits: u32,
    lines_changed: usize,
    /// Its diff, for the attempt's note when it is not applied.
    diff: String,
    temperature: f64,
    approach: String,
}

/// A candidate's verdict from its copy.
struct Tested {
    number: u32,
    approach: String,
    score: Option<Score>,
    passed: bool,
    /// Why it could not be tested.
    error: Option<String>,
}

/// What verifying in a copy needs, owned (the test runs on its own task).
pub(super) struct OwnedCheck {
    test_command: Option<String>,
    pub(super) timeout: std::time::Duration,
    allow_env: Vec<String>,
    limits: Limits,
    pub(super) sandbox: Option<SandboxPolicy>,
    checkers: Vec<Checker>,
    check_timeout: std::time::Duration,
    check_goal: CheckGoal,
    baseline_checker_errors: Option<u32>,
}

impl OwnedCheck {
    pub(super) fn of(settings: &CheckSettings<'_>) -> Self {
        Self {
            test_command: settings.test_command.map(str::to_owned),
            timeout: settings.timeout,
            allow_env: settings.allow_env.to_vec(),
            limits: settings.limits,
            sandbox: settings.sandbox.cloned(),
            checkers: settings.checkers.to_vec(),
            check_timeout: settings.check_timeout,
            check_goal: settings.check_goal.clone(),
            baseline_checker_errors: settings.baseline_checker_errors,
        }
    }

    /// The settings for a run in a copy rooted at `root`.
    pub(super) fn in_copy<'a>(
        &'a self,
        root: &'a Path,
        sandbox: Option<&'a SandboxPolicy>,
    ) -> CheckSettings<'a> {
        CheckSettings {
            root,
            test_command: self.test_command.as_deref(),
            timeout: self.timeout,
            allow_env: &self.allow_env,
            limits: self.limits,
            sandbox,
            checkers: &self.checkers,
            check_timeout: self.check_timeout,
            check_goal: &self.check_goal,
            baseline_checker_errors: self.baseline_checker_errors,
        }
    }
}

/// Whether candidates can be drafted for this task: a place for the copies.
pub(super) fn copy_area(candidates: u32) -> Result<Option<Arc<CopyArea>>, String> {
    if candidates <= 1 {
        return Ok(None);
    }
    let parent = crate::agent::checkpoint::cache_dir().join("candidates");
    CopyArea::new(&parent)
        .map(|area| Some(Arc::new(area)))
        .map_err(|err| {
            format!(
                "cannot create a place for the candidates' copies under {}: {err}",
                parent.display()
            )
        })
}

impl Task {
    /// One attempt as a search over candidates (see the module's text).
    /// `base` is the score of the files as they are.
    pub(super) async fn act_with_candidates(
        &mut self,
        area: Arc<CopyArea>,
        base: Score,
    ) -> Result<(), StopCause> {
        if self.try_mutants(&area).await {
            return Ok(());
        }
        let n = self.spec.candidates;
        let start_len = self.messages.len();
        let dirty_before = self.dirty;
        let stop = self.cancel.child_token();
        let parallel = std::thread::available_parallelism().map_or(1, |n| n.get());
        let permits = Arc::new(tokio::sync::Semaphore::new(parallel));
        let mut jobs: JoinSet<Tested> = JoinSet::new();
        let mut drafted: Vec<Drafted> = Vec::new();
        let mut tested: Vec<Tested> = Vec::new();
        let mut seen: HashSet<super::tried::StateKey> = HashSet::new();
        let mut outcome = Ok(());
        for number in 1..=n {
            while let Some(done) = jobs.try_join_next() {
                self.candidate_tested(done, &mut tested, n);
            }
            if tested.iter().any(|t| t.passed) {
                break;
            }
            self.messages.truncate(start_len.max(1));
            let (approach, temperature) =
                approach_for(number, self.single_line_temperature(), &self.suspects);
            // Its approach is asked for in the message it drafts from, and
            // taken out again for the next candidate.
            let asked = self.messages.last().map(|m| m.content.clone());
            let compact = self.compact_prompt();
            if let Some(last) = self.messages.last_mut() {
                approach.ask(&mut last.content, compact);
            }
            self.candidate = Some((number, temperature));
            self.approach_cap = (approach == super::approaches::Approach::OneLine)
                .then_some(super::approaches::ONE_LINE_MAX_TOKENS);
            let base_texts = self.files.capture();
            self.files.begin_staging();
            // Drafting stops the moment an earlier candidate passes: its
            // verdict arrives while this one is being written.
            let mut finished: Vec<Result<Tested, tokio::task::JoinError>> = Vec::new();
            let acted = {
                let draft = self.act();
                tokio::pin!(draft);
                loop {
                    tokio::select! {
                        acted = &mut draft => break Some(acted),
                        Some(done) = jobs.join_next(), if !jobs.is_empty() => {
                            let passed = done.as_ref().is_ok_and(|t| t.passed);
                            finished.push(done);
                            if passed {
                                break None;
                            }
                        }
                    }
                }
            };
            for done in finished {
                self.candidate_tested(done, &mut tested, n);
            }
            let asked_at = start_len.max(1) - 1;
            if let (Some(last), Some(asked)) = (self.messages.get_mut(asked_at), asked) {
                last.content = asked;
            }
            let label = approach.label();
            let Some(acted) = acted else {
                // Its staged edits are dropped with it.
                self.files.end_staging();
                self.dirty = dirty_before;
                self.candidate = None;
                self.approach_cap = None;
                self.candidate_event(
                    number,
                    n,
                    "not finished: an earlier candidate passed",
                    json!({ "passed": false, "approach": label }),
                );
                break;
            };
            let key = self.state_key();
            let diff = self.files.diff();
            let lines_changed = count_changed_lines(&diff);
            // With a review, a candidate that cheats is not worth a test run.
            let cheats: Vec<String> = match self.spec.review {
                true => self
                    .findings()
                    .iter()
                    .map(|f| format!("{}: {}", f.path, f.text))
                    .collect(),
                false => Vec::new(),
            };
            let changes = self.files.end_staging();
            self.dirty = dirty_before;
            self.candidate = None;
            self.approach_cap = None;
            if let Err(cause) = acted {
                outcome = Err(cause);
                break;
            }
            if changes.is_empty() {
                self.candidate_event(
                    number,
                    n,
                    "no change",
                    json!({ "temperature": temperature, "approach": label }),
                );
                continue;
            }
            if !cheats.is_empty() {
                self.candidate_event(
                    number,
                    n,
                    &format!("rejected by the review's checks: {}", cheats.join("; ")),
                    json!({ "temperature": temperature, "approach": label, "rejected": true }),
                );
                continue;
            }
            if !seen.insert(key.clone()) {
                self.candidate_event(
                    number,
                    n,
                    "the same code as an earlier candidate; not tested again",
                    json!({ "temperature": temperature, "approach": label }),
                );
                continue;
            }
            // Tested once: a later attempt that writes it again is asked again.
            self.tested_states.insert(key);
            self.status(&format!(
                "Candidate {number} of {n}: testing it in a copy of the workspace"
            ));
            let base: BTreeMap<PathBuf, Option<String>> = changes
                .keys()
                .map(|p| {
                    let text = base_texts
                        .get(p)
                        .cloned()
                        .flatten()
                        .or_else(|| self.files.bytes(p))
                        .and_then(|b| String::from_utf8(b).ok());
                    (p.clone(), text)
                })
                .collect();
            let mut checked = self.checked_files();
            for path in changes.keys() {
                if !checked.contains(path) {
                    checked.push(path.clone());
                }
            }
            let owned = OwnedCheck::of(&self.check_settings(self.spec.test_command.as_deref()));
            let job = test_in_copy(
                self.files.root().to_path_buf(),
                area.clone(),
                changes.clone(),
                checked,
                owned,
                stop.clone(),
                permits.clone(),
                number,
                label.clone(),
            );
            jobs.spawn(job);
            drafted.push(Drafted {
                number,
                changes,
                base,
                last_text: self.last_text.clone(),
                answer_note: self.answer_note.take(),
                turns: self.messages.get(start_len..).unwrap_or_default().to_vec(),
                edits: self.edits_in_attempt,
                lines_changed,
                diff,
                temperature,
                approach: label,
            });
        }
        // The rest are waited for, unless one passed already.
        let deadline = self.deadline();
        while !tested.iter().any(|t| t.passed) {
            let next = tokio::select! {
                biased;
                () = self.cancel.cancelled() => break,
                () = tokio::time::sleep_until(deadline) => break,
                next = jobs.join_next() => next,
            };
            match next {
                Some(done) => self.candidate_tested(done, &mut tested, n),
                None => break,
            }
        }
        stop.cancel();
        // Cancelled runs end at once (their process groups are killed).
        while let Some(done) = jobs.join_next().await {
            if let Ok(done) = done {
                if done.error.as_deref() != Some(STOPPED) {
                    self.candidate_tested(Ok(done), &mut tested, n);
                    continue;
                }
                let why = match tested.iter().find(|t| t.passed) {
                    Some(t) => format!("not finished: candidate {} passed first", t.number),
                    None => "not finished: the task's time ran out".to_owned(),
                };
                self.candidate_event(
                    done.number,
                    n,
                    &why,
                    json!({ "passed": false, "approach": done.approach }),
                );
            }
        }
        self.messages.truncate(start_len.max(1));
        self.choose_candidate(drafted, &tested, base, n).await;
        if self.cancel.is_cancelled() {
            return Err(StopCause::Cancelled);
        }
        outcome
    }

    /// The temperature of the turn being drafted, when it is a candidate.
    pub(super) fn drafting_temperature(&self) -> Option<f64> {
        self.candidate.map(|(_, temperature)| temperature)
    }

    fn candidate_tested(
        &mut self,
        done: Result<Tested, tokio::task::JoinError>,
        tested: &mut Vec<Tested>,
        n: u32,
    ) {
        let Ok(done) = done else {
            return;
        };
        let text = match (&done.error, &done.score) {
            (Some(err), _) => format!("could not be tested: {err}"),
            (None, Some(score)) if done.passed => format!("passes ({})", score.describe()),
            (None, Some(score)) => score.describe(),
            (None, None) => "not tested".to_owned(),
        };
        self.candidate_event(
            done.number,
            n,
            &text,
            json!({
                "passed": done.passed,
                "score": done.score.as_ref().map(super::score_json),
                "approach": done.approach,
            }),
        );
        tested.push(done);
    }

    fn candidate_event(&mut self, number: u32, n: u32, text: &str, mut data: serde_json::Value) {
        data["iteration"] = json!(self.iterations);
        data["candidate"] = json!(number);
        data["of"] = json!(n);
        data["outcome"] = json!(text);
        self.candidate_log.push(data.clone());
        self.event(
            EventKind::Verify,
            format!("Candidate {number} of {n}: {text}"),
            data,
        );
    }

    /// Applies the best candidate — passing first, then by score, then the
    /// smaller change — unless it is worse than the files as they are.
    async fn choose_candidate(
        &mut self,
        drafted: Vec<Drafted>,
        tested: &[Tested],
        base: Score,
        n: u32,
    ) {
        self.edits_in_attempt = 0;
        let best = drafted
            .into_iter()
            .filter_map(|d| {
                let t = tested.iter().find(|t| t.number == d.number)?;
                Some((t.score?, t.passed, d))
            })
            .min_by(|a, b| {
                b.1.cmp(&a.1)
                    .then(a.0.cmp_quality(&b.0))
                    .then(a.2.lines_changed.cmp(&b.2.lines_changed))
                    .then(a.2.number.cmp(&b.2.number))
            });
        let Some((score, passed, chosen)) = best else {
            self.answer_note = Some(format!(
                "None of the {n} candidates changed the code in a way that could be tested."
            ));
            return;
        };
        // Only a step forward is applied: one no better would be tested
        // again in the workspace and undone.
        if !passed && score.cmp_quality(&base) != std::cmp::Ordering::Less {
            self.answer_note = Some(format!(
                "{n} candidates were tested; none did better than the code as it is. The closest ({}) changed the code:\n{}",
                score.describe(),
                crate::agent::output::head_tail(chosen.diff.trim_end(), NOTE_DIFF_BYTES, 30)
            ));
            self.status(&format!(
                "No candidate did better than the code as it is (the best: {}); nothing applied",
                score.describe()
            ));
            self.last_text = chosen.last_text;
            self.messages.extend(chosen.turns);
            return;
        }
        let ops: Vec<FileOp> = chosen
            .changes
            .iter()
            .map(|(path, new)| {
                let old = chosen.base.get(path).cloned().flatten();
                edit_between(path, old.as_deref(), new)
            })
            .collect();
        let reports = self.files.apply_step(&ops).await;
        if let Some(why) = reports.iter().find_map(|r| r.result.as_ref().err()) {
            self.status(&format!(
                "Candidate {} of {n} could not be applied: {why}",
                chosen.number
            ));
            self.answer_note = Some(format!("The best candidate could not be applied: {why}"));
            return;
        }
        self.messages.extend(chosen.turns);
        self.dirty = true;
        self.edits_in_attempt = chosen.edits.max(1);
        self.last_text = chosen.last_text;
        self.answer_note = chosen.answer_note;
        let number = chosen.number;
        self.candidate_log.push(json!({
            "iteration": self.iterations,
            "candidate": number,
            "of": n,
            "chosen": true,
            "temperature": chosen.temperature,
            "approach": chosen.approach,
        }));
        self.event(
            EventKind::Status,
            format!(
                "Candidate {number} of {n} chosen ({}); applying it",
                match passed {
                    true => "it passes".to_owned(),
                    false => score.describe(),
                }
            ),
            json!({ "iteration": self.iterations, "chosenCandidate": number }),
        );
    }
}

/// Tests one candidate in a new copy of the workspace.
#[allow(clippy::too_many_arguments)] // one job's whole input, moved in
async fn test_in_copy(
    root: PathBuf,
    area: Arc<CopyArea>,
    changes: BTreeMap<PathBuf, String>,
    checked: Vec<PathBuf>,
    owned: OwnedCheck,
    stop: CancellationToken,
    permits: Arc<tokio::sync::Semaphore>,
    number: u32,
    approach: String,
) -> Tested {
    let failed = |error: String| Tested {
        number,
        approach: approach.clone(),
        score: None,
        passed: false,
        error: Some(error),
    };
    let Ok(_permit) = permits.acquire_owned().await else {
        return failed(STOPPED.to_owned());
    };
    if stop.is_cancelled() {
        return failed(STOPPED.to_owned());
    }
    let made = tokio::task::spawn_blocking(move || {
        let mut copy = IsolatedCopy::create(&root, &area)?;
        copy.write(&changes)?;
        Ok::<_, std::io::Error>(copy)
    })
    .await;
    let copy = match made {
        Ok(Ok(copy)) => copy,
        Ok(Err(err)) => return failed(format!("no copy of the workspace: {err}")),
        Err(err) => return failed(format!("no copy of the workspace: {err}")),
    };
    let sandbox = owned.sandbox.as_ref().map(|p| copy.sandbox(p));
    let settings = owned.in_copy(copy.root(), sandbox.as_ref());
    let files: Vec<PathBuf> = checked.iter().map(|p| copy.map(p)).collect();
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    match check::verify(&settings, &files, &read, &stop).await {
        Ok(v) if !stop.is_cancelled() => Tested {
            number,
            approach,
            score: Some(v.score),
            passed: v.passed,
            error: None,
        },
        Ok(_) => failed(STOPPED.to_owned()),
        Err(err) => failed(format!("the tests could not run: {err}")),
    }
}
