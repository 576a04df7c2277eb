//! Mechanical candidates (`agent.mutants`, with `agent.candidates` > 1):
//! before the model drafts an attempt's candidates, small mechanical
//! changes to the suspected functions (`agent::mutate`: an operator, a
//! literal, two arguments, a name) are each tested in a copy of the
//! workspace — as many at once as there are cores, each copy reused from
//! one change to the next. The first that makes the tests pass is applied
//! through the normal edit path (buffers, checkpoint, undo) and verified
//! again in the workspace like any candidate. It costs no model time: a
//! QuixBugs test run takes about a second where a small model's answer
//! takes ten to sixty, and the one-token bugs such a model keeps missing
//! are found this way.
//!
//! Bounded: the three first suspects (not test files), at most
//! [`MAX_MUTANTS`] changes, a quarter of the task's time in all, once per
//! state of the code.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::candidates::OwnedCheck;
use super::check;
use super::Task;
use crate::agent::edit::edit_between;
use crate::agent::isolated::{CopyArea, IsolatedCopy};
use crate::agent::mutate::{mutants, Mutant};
use crate::agent::types::EventKind;
use crate::syntax::Language;

/// The most mechanical changes one search tests.
const MAX_MUTANTS: usize = 600;
/// The suspects whose functions are changed.
const MAX_SUSPECTS: usize = 3;
/// The share of the task's time all searches may take together.
const TIME_SHARE: f64 = 0.25;
/// A change's test run may take this many times the first run's time,
/// plus [`EXTRA_TIME`]: longer is a change that made the code loop
/// forever (`n > 0` → `n >= 0`), and would hold a core for the whole test
/// timeout.
const TIME_FACTOR: u32 = 3;
const EXTRA_TIME: Duration = Duration::from_secs(5);
/// Progress is reported every this many changes tested.
const REPORT_EVERY: usize = 25;

/// One change to test: the file it is in and the change.
#[derive(Clone)]
struct Job {
    index: usize,
    path: PathBuf,
    mutant: Mutant,
}

/// A change's verdict.
struct Verdict {
    index: usize,
    passed: bool,
    /// The failing tests left, when the tests ran and the checks were clean.
    failed: Option<u32>,
}

impl Task {
    /// Tests mechanical changes to the suspects; applies the first that
    /// passes. True when one was applied.
    pub(super) async fn try_mutants(&mut self, area: &Arc<CopyArea>) -> bool {
        if !self.spec.mutants || self.spec.test_command.is_none() || self.suspects.is_empty() {
            return false;
        }
        let allowed = self.spec.budget.timeout.mul_f64(TIME_SHARE);
        let left = allowed.saturating_sub(self.mutants_time);
        if left < Duration::from_secs(1) || !self.mutated_states.insert(self.state_key()) {
            return false;
        }
        let (jobs, originals) = self.mutant_jobs();
        if jobs.is_empty() {
            return false;
        }
        let total = jobs.len();
        self.status(&format!(
            "Trying {total} small mechanical changes to {} before asking the model (each tested in a copy of the workspace; at most {} s)",
            self.mutated_names(),
            left.as_secs()
        ));
        let started = Instant::now();
        let (verdicts, tried) = self.test_mutants(area, &jobs, &originals, left).await;
        self.mutants_time += started.elapsed();
        let seconds = started.elapsed().as_secs_f64();
        let passed = verdicts.iter().filter(|v| v.passed).map(|v| v.index).min();
        let Some(index) = passed.and_then(|i| jobs.get(i)) else {
            let best = verdicts.iter().filter_map(|v| v.failed).min();
            let text = format!(
                "Mechanical changes: none of the {tried} tested (of {total}) made the tests pass ({seconds:.1} s){}",
                best.map(|f| format!("; the closest left {f} failing"))
                    .unwrap_or_default()
            );
            self.mutants_event(
                &text,
                json!({ "tried": tried, "of": total, "passed": false }),
            );
            return false;
        };
        self.apply_mutant(index, &originals, tried, total, seconds)
            .await
    }

    /// The suspects' names, for the status line.
    fn mutated_names(&self) -> String {
        let names: Vec<String> = self
            .mutable_suspects()
            .iter()
            .map(|s| format!("`{}`", s.name))
            .collect();
        names.join(", ")
    }

    fn mutable_suspects(&self) -> Vec<super::approaches::Suspect> {
        self.suspects
            .iter()
            .filter(|s| !crate::agent::verify::is_test_file(&s.path))
            .take(MAX_SUSPECTS)
            .cloned()
            .collect()
    }

    /// The changes to test, cheapest kinds first and the first suspect
    /// first within a kind, and each file's text as it is.
    fn mutant_jobs(&self) -> (Vec<Job>, HashMap<PathBuf, Arc<String>>) {
        let mut originals: HashMap<PathBuf, Arc<String>> = HashMap::new();
        let mut ranked: Vec<(usize, PathBuf, Mutant)> = Vec::new();
        for (rank, suspect) in self.mutable_suspects().into_iter().enumerate() {
            let Ok(path) = self.files.paths.resolve(&suspect.path) else {
                continue;
            };
            let Some(lang) = Language::from_path(&path) else {
                continue;
            };
            let Some(text) = self.files.text(&path) else {
                continue;
            };
            let text = originals
                .entry(path.clone())
                .or_insert_with(|| Arc::new(text))
                .clone();
            for mutant in mutants(lang, &text, suspect.lines, MAX_MUTANTS) {
                ranked.push((rank, path.clone(), mutant));
            }
        }
        // Stable: a kind's changes of one suspect stay in the code's order.
        ranked.sort_by_key(|(rank, _, m)| (m.kind, *rank));
        let mut seen = std::collections::HashSet::new();
        let jobs = ranked
            .into_iter()
            .filter(|(_, path, m)| {
                seen.insert((path.clone(), m.start, m.end, m.replacement.clone()))
            })
            .take(MAX_MUTANTS)
            .enumerate()
            .map(|(index, (_, path, mutant))| Job {
                index,
                path,
                mutant,
            })
            .collect();
        (jobs, originals)
    }

    /// Tests the changes, as many at once as there are cores, until one
    /// passes, all are tested or `time` runs out. The verdicts, and how
    /// many were tested.
    async fn test_mutants(
        &mut self,
        area: &Arc<CopyArea>,
        jobs: &[Job],
        originals: &HashMap<PathBuf, Arc<String>>,
        time: Duration,
    ) -> (Vec<Verdict>, usize) {
        // Each worker makes a change's text when it takes the change: the
        // texts of all at once would be the file's size times their count.
        let queue = Arc::new(Mutex::new(jobs.iter().cloned().collect::<VecDeque<Job>>()));
        let originals = Arc::new(originals.clone());
        let total = jobs.len();
        let stop = self.cancel.child_token();
        let mut owned = OwnedCheck::of(&self.check_settings(self.spec.test_command.as_deref()));
        if let Some(first) = self.first_test_run {
            owned.timeout = owned.timeout.min(first * TIME_FACTOR + EXTRA_TIME);
        }
        let owned = Arc::new(owned);
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4));
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Verdict>();
        let mut set: JoinSet<()> = JoinSet::new();
        for _ in 0..workers {
            set.spawn(mutant_worker(
                self.files.root().to_path_buf(),
                area.clone(),
                queue.clone(),
                originals.clone(),
                owned.clone(),
                stop.clone(),
                sender.clone(),
            ));
        }
        drop(sender);
        let deadline = tokio::time::Instant::now() + time;
        let task_deadline = self.deadline();
        let mut verdicts: Vec<Verdict> = Vec::new();
        loop {
            let next = tokio::select! {
                biased;
                () = stop.cancelled() => break,
                () = tokio::time::sleep_until(deadline.min(task_deadline)) => break,
                next = receiver.recv() => next,
            };
            let Some(verdict) = next else { break };
            let passed = verdict.passed;
            verdicts.push(verdict);
            if passed {
                break;
            }
            if verdicts.len() % REPORT_EVERY == 0 {
                self.status(&format!(
                    "Mechanical changes: {} of {total} tested, none passes yet",
                    verdicts.len()
                ));
            }
        }
        stop.cancel();
        // A run already under way ends at once (its process group is
        // killed); one that passed meanwhile still counts.
        while set.join_next().await.is_some() {}
        while let Ok(verdict) = receiver.try_recv() {
            verdicts.push(verdict);
        }
        let tried = verdicts.len();
        (verdicts, tried)
    }

    async fn apply_mutant(
        &mut self,
        job: &Job,
        originals: &HashMap<PathBuf, Arc<String>>,
        tried: usize,
        total: usize,
        seconds: f64,
    ) -> bool {
        let Some(original) = originals.get(&job.path) else {
            return false;
        };
        let Some(changed) = job.mutant.apply(original) else {
            return false;
        };
        let rel = self.files.paths.relative(&job.path);
        let where_ = format!("{rel}:{}", job.mutant.line);
        let op = edit_between(&job.path, Some(original.as_str()), &changed);
        let reports = self.files.apply_step(&[op]).await;
        if let Some(why) = reports.iter().find_map(|r| r.result.as_ref().err()) {
            self.mutants_event(
                &format!(
                    "Mechanical changes: {where_} {} passes the tests in a copy but could not be applied: {why}",
                    job.mutant.what
                ),
                json!({ "tried": tried, "of": total, "passed": true, "applied": false }),
            );
            return false;
        }
        self.dirty = true;
        self.edits_in_attempt = 1;
        self.answer_note = None;
        self.last_text = format!(
            "A small mechanical change to the suspected code makes the tests pass: in {where_}, {}. Found before asking the model, by testing mechanical changes in copies of the workspace ({tried} tested, {seconds:.1} s).",
            job.mutant.what
        );
        self.mutants_event(
            &format!(
                "Mechanical changes: {where_} {} passes ({tried} tested, {seconds:.1} s); applying it",
                job.mutant.what
            ),
            json!({
                "tried": tried, "of": total, "passed": true, "applied": true,
                "path": rel, "line": job.mutant.line, "change": job.mutant.what,
            }),
        );
        true
    }

    fn mutants_event(&mut self, text: &str, mut data: serde_json::Value) {
        data["iteration"] = json!(self.iterations);
        data["approach"] = json!("mechanical");
        self.candidate_log.push(data.clone());
        self.event(EventKind::Verify, text.to_owned(), data);
    }
}

/// Tests changes from `queue` in one copy of the workspace, reused: each
/// change is written over the last, and the file put back when the next
/// change is in another file.
async fn mutant_worker(
    root: PathBuf,
    area: Arc<CopyArea>,
    queue: Arc<Mutex<VecDeque<Job>>>,
    originals: Arc<HashMap<PathBuf, Arc<String>>>,
    owned: Arc<OwnedCheck>,
    stop: CancellationToken,
    verdicts: tokio::sync::mpsc::UnboundedSender<Verdict>,
) {
    let made = tokio::task::spawn_blocking(move || IsolatedCopy::create(&root, &area)).await;
    let Ok(Ok(mut copy)) = made else {
        tracing::warn!("mechanical changes: no copy of the workspace");
        return;
    };
    let sandbox = owned.sandbox.as_ref().map(|p| copy.sandbox(p));
    let mut stamp = Stamp::default();
    // The file changed last (put back when the next change is elsewhere).
    let mut changed: Option<PathBuf> = None;
    loop {
        if stop.is_cancelled() {
            return;
        }
        let next = queue.lock().ok().and_then(|mut q| q.pop_front());
        let Some(Job {
            index,
            path,
            mutant,
        }) = next
        else {
            return;
        };
        let Some(original) = originals.get(&path) else {
            continue;
        };
        let Some(text) = mutant.apply(original) else {
            continue;
        };
        let mut writes = BTreeMap::new();
        if let Some(last) = changed.take().filter(|last| *last != path) {
            if let Some(last_original) = originals.get(&last) {
                writes.insert(last, last_original.as_str().to_owned());
            }
        }
        writes.insert(path.clone(), text);
        let written = stamp.write(&mut copy, &writes);
        changed = Some(path.clone());
        if let Err(err) = written {
            tracing::warn!("mechanical changes: cannot write into the copy: {err}");
            return;
        }
        let settings = owned.in_copy(copy.root(), sandbox.as_ref());
        let files = vec![copy.map(&path)];
        let read = |p: &std::path::Path| std::fs::read_to_string(p).ok();
        match check::verify(&settings, &files, &read, &stop).await {
            Ok(v) if !stop.is_cancelled() => {
                let s = v.score;
                let ran = !s.broken && s.syntax_errors == 0 && s.checker_errors == 0;
                let failed = ran.then_some(s.failed);
                if verdicts
                    .send(Verdict {
                        index,
                        passed: v.passed,
                        failed,
                    })
                    .is_err()
                {
                    return;
                }
            }
            Ok(_) => return,
            Err(err) => {
                tracing::debug!("mechanical change {index}: the tests could not run: {err}");
            }
        }
    }
}

/// Gives each file written a modification time of its own second, later
/// than the last: a change of the same size written within the same
/// second as the one before would otherwise look unchanged to caches that
/// compare seconds and sizes (Python's bytecode cache), and run stale code.
#[derive(Default)]
struct Stamp {
    last: Option<SystemTime>,
}

impl Stamp {
    fn write(
        &mut self,
        copy: &mut IsolatedCopy,
        writes: &BTreeMap<PathBuf, String>,
    ) -> std::io::Result<()> {
        copy.write(writes)?;
        for path in writes.keys() {
            let now = SystemTime::now();
            let at = match self.last {
                Some(last) if last + Duration::from_secs(1) > now => last + Duration::from_secs(1),
                _ => now,
            };
            std::fs::File::options()
                .write(true)
                .open(copy.map(path))?
                .set_modified(at)?;
            self.last = Some(at);
        }
        Ok(())
    }
}
