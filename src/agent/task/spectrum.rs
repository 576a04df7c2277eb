//! Execution-based localization (`agent.coverage`): when Python, Node or
//! Rust tests fail before any change, the test command runs once more with
//! a tracer loaded into every Python process it starts (a `sitecustomize`
//! on `PYTHONPATH` and, under pytest, a plugin) that records which of the
//! workspace's functions — and which of their lines — each test runs and
//! whether it failed; for Node, V8's own coverage per test file's process
//! ([`node`]); for Rust, an instrumented build's, each test in a process of
//! its own ([`rust`]). Each function is scored by Ochiai over the failing
//! and passing tests — run by every failing test and few passing ones
//! scores highest — and by its best line's, so the helper the failure
//! never names ranks above the public function the tests call. The
//! project's files are not touched; the run is sandboxed like any test
//! run, its side effects undone, and bounded in time (three times the
//! first run's, plus a little); what the tracer wrote is read with a size
//! bound, and it can only reorder suspects.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;

use super::approaches::is_function;
use super::check::{self, Verification};
use super::Task;
use crate::agent::exec::{self, shell_quote};
use crate::agent::types::EventKind;
use crate::agent::verify::is_test_file;
use crate::index::IndexedSymbol;

const TRACER: &str = include_str!("spectrum/fettle_spectrum.py");
const PYTEST_PLUGIN: &str = include_str!("spectrum/fettle_spectrum_pytest.py");
const SITECUSTOMIZE: &str = include_str!("spectrum/sitecustomize.py");
const NODE_PRELOAD: &str = include_str!("spectrum/fettle_spectrum.cjs");

mod cache;
mod node;
mod rust;

/// Files the tracer's processes may leave (one per Python process).
const MAX_FILES: usize = 64;
/// Bytes read from one of them.
const MAX_FILE_BYTES: u64 = 32 << 20;
/// The traced run may take this many times the first run, plus
/// [`EXTRA_TIME`] (tracing slows calls and lines — about 2× on the
/// benchmark's suites, 2.8× on a half-second one; a run that would take
/// much longer is not worth its ranking).
const TIME_FACTOR: u32 = 3;
const EXTRA_TIME: Duration = Duration::from_secs(10);
const RUST_EXTRA_TIME: Duration = Duration::from_secs(60);

/// What one tracer process wrote.
#[derive(Deserialize)]
struct Recorded {
    tests: Vec<RecordedTest>,
    /// `[absolute path, first line (1-based), name]`.
    functions: Vec<(String, u32, String)>,
}

#[derive(Deserialize)]
struct RecordedTest {
    failed: bool,
    functions: Vec<usize>,
    /// The lines it ran, by function (Python's tracer).
    #[serde(default)]
    lines: Vec<(usize, Vec<u32>)>,
}

/// A function the traced tests ran.
#[derive(Clone, Debug)]
pub(super) struct Executed {
    pub symbol: IndexedSymbol,
    /// Failing and passing tests that ran it.
    pub failing: u32,
    pub passing: u32,
    /// Ochiai of the function: failing / √(all failing × (failing +
    /// passing)).
    pub function_score: f64,
    /// Its most suspicious line (1-based), when lines were traced: the
    /// line, failing and passing tests that ran it, its Ochiai.
    pub line: Option<(u32, u32, u32, f64)>,
    /// What ranks it: the better of the function's and its best line's.
    pub score: f64,
}

/// The traced run's result: functions run by at least one failing test,
/// most suspicious first.
#[derive(Clone, Debug, Default)]
pub(super) struct Spectrum {
    pub functions: Vec<Executed>,
    pub failing_tests: u32,
    pub passing_tests: u32,
}

impl Spectrum {
    /// Why a function is suspected, in words.
    pub fn why(&self, e: &Executed) -> String {
        let function = format!(
            "run by {} of {} failing tests and {} of {} passing (Ochiai {:.2})",
            e.failing, self.failing_tests, e.passing, self.passing_tests, e.function_score
        );
        match e.line {
            Some((line, failing, passing, score)) if score > e.function_score => format!(
                "{function}; its line {line} by {failing} failing and {passing} passing (Ochiai {score:.2})"
            ),
            _ => function,
        }
    }
}

impl Task {
    /// Runs the tests again under the tracer when they failed before any
    /// change and look like Python's; `None` when it does not apply, is
    /// off, or recorded nothing (the status says why).
    pub(super) async fn run_spectrum(&mut self, baseline: &Verification) -> Option<Spectrum> {
        let command = self.spec.test_command.clone()?;
        let outcome = baseline.outcome.as_ref()?;
        if !self.spec.coverage || baseline.passed || !self.traceable(baseline, &command) {
            return None;
        }
        let root = self.files.root().to_path_buf();
        let real_root = std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone());
        let failing = baseline.report.as_ref().map(|r| r.failing_tests.join("\n"));
        let state = format!("{command}\0{}", failing.unwrap_or_default());
        let cached = cache::key(&self.index, &state, &real_root).map(|key| cache::dir(&key));
        let started = Instant::now();
        let (spectrum, from_cache) = match cached.as_ref().filter(|dir| dir.is_dir()) {
            Some(dir) => (self.read_spectrum(dir, &real_root), true),
            None => (
                self.traced_run(&command, outcome, &real_root, cached.as_deref())
                    .await,
                false,
            ),
        };
        let seconds = started.elapsed().as_secs_f64();
        let test_run_seconds = outcome.elapsed.as_secs_f64();
        match spectrum {
            Ok(s) => {
                let data = json!({
                    "failingTests": s.failing_tests, "passingTests": s.passing_tests,
                    "seconds": seconds, "testRunSeconds": test_run_seconds, "cached": from_cache,
                });
                self.coverage_json = Some(data.clone());
                let top: Vec<String> = s
                    .functions
                    .iter()
                    .take(5)
                    .map(|e| format!("{} {:.2}", e.symbol.name, e.score))
                    .collect();
                let how = match from_cache {
                    true => "as traced before (the same code and test command)".to_owned(),
                    false => format!("traced in {seconds:.1} s"),
                };
                self.event(
                    EventKind::Status,
                    format!(
                        "Coverage: {} failing and {} passing tests {how}; most suspicious: {}",
                        s.failing_tests,
                        s.passing_tests,
                        top.join(", ")
                    ),
                    json!({ "coverage": data }),
                );
                Some(s)
            }
            Err(why) => {
                self.coverage_json = Some(json!({ "none": why, "seconds": seconds }));
                self.status(&format!("No coverage: {why}"));
                None
            }
        }
    }

    /// The test command run under the tracer; what it recorded is kept in
    /// `cache` (a folder to create) when it has a failing test.
    async fn traced_run(
        &mut self,
        command: &str,
        first_run: &crate::agent::exec::CommandOutcome,
        real_root: &Path,
        cache: Option<&Path>,
    ) -> Result<Spectrum, String> {
        let area = tracer_area().map_err(|err| format!("cannot write its tracer: {err}"))?;
        let out = area.path().join("out");
        let lib = area.path().join("lib");
        let cargo_test = self.rust_tests(command);
        let rust_target = cargo_test.as_ref().map(|_| rust::target_dir(real_root));
        let traced = match (&cargo_test, &rust_target) {
            (Some(cargo_test), Some(target)) => rust::script(cargo_test, &out, target),
            _ => self.traced_command(command, &out, &lib, real_root),
        };
        let settings = self.check_settings(Some(command));
        let mut spec = check::test_spec(&settings, traced);
        // Rust's tests are built once more, instrumented: the first time
        // with the crate's dependencies.
        let extra = match cargo_test.is_some() {
            true => RUST_EXTRA_TIME,
            false => EXTRA_TIME,
        };
        spec.timeout = (first_run.elapsed * TIME_FACTOR + extra).min(spec.timeout);
        if let Some(policy) = spec.sandbox.as_mut() {
            // The whole folder: under a private /tmp only what may be
            // written is bound back, and the tracer must be seen too.
            policy.writable.push(area.path().to_path_buf());
            if let Some(target) = &rust_target {
                policy.writable.push(target.clone());
            }
        }
        if let Some(target) = &rust_target {
            if let Err(err) = std::fs::create_dir_all(target) {
                return Err(format!("cannot create {}: {err}", target.display()));
            }
        }
        self.status(&format!(
            "Localizing: running the tests again, recording the functions each test runs (at most {} s)",
            spec.timeout.as_secs()
        ));
        let before = self.files.before_command().await;
        let ran = exec::run(&spec, &self.cancel).await;
        let effects = self.files.after_command(before).await;
        if let Some(note) = self.command_effects(&effects, "The traced test run") {
            self.command_note = Some(note);
        }
        match &ran {
            Err(err) => return Err(format!("could not run the tests: {err}")),
            Ok(o) if o.timed_out => {
                return Err(format!(
                    "the traced run took longer than {} s",
                    spec.timeout.as_secs()
                ))
            }
            Ok(_) => {}
        }
        node::convert(&out, real_root);
        rust::convert(&out, real_root);
        let spectrum = match self.read_spectrum(&out, real_root) {
            Err(why) => Err(match rust::why_none(&out) {
                Some(said) => said,
                None if cargo_test.is_some() => format!("{why} (doc tests are not traced)"),
                None => why,
            }),
            read => read,
        }?;
        if let Some(dir) = cache {
            cache::keep(&out, dir);
        }
        Ok(spectrum)
    }

    /// The test command with the Python and Node tracers loaded.
    fn traced_command(&self, command: &str, out: &Path, lib: &Path, real_root: &Path) -> String {
        format!(
            "export FETTLE_SPECTRUM_OUT={out}; export FETTLE_SPECTRUM_ROOT={root}; \
             export PYTHONPATH={lib}\"${{PYTHONPATH:+:$PYTHONPATH}}\"; \
             export PYTEST_PLUGINS=fettle_spectrum_pytest\"${{PYTEST_PLUGINS:+,$PYTEST_PLUGINS}}\"; \
             export NODE_V8_COVERAGE={v8}; \
             export NODE_OPTIONS={preload}\"${{NODE_OPTIONS:+ $NODE_OPTIONS}}\"\n{command}",
            out = shell_quote(&out.display().to_string()),
            root = shell_quote(&real_root.display().to_string()),
            lib = shell_quote(&lib.display().to_string()),
            v8 = shell_quote(&out.join("v8").display().to_string()),
            preload = shell_quote(&format!(
                "--require=\"{}\"",
                lib.join("fettle_spectrum.cjs").display()
            )),
        )
    }

    /// `cargo test` as the instrumented build runs it, when the tests are
    /// Rust's and the command a plain `cargo test`.
    fn rust_tests(&self, command: &str) -> Option<String> {
        let has_rust = self
            .index
            .files()
            .iter()
            .any(|f| f.language == crate::syntax::Language::Rust);
        has_rust.then(|| rust::cargo_test(command)).flatten()
    }

    /// Tests the tracer can follow: Python's (pytest's or unittest's
    /// output, or a Python command) or Node's test runner.
    fn traceable(&self, baseline: &Verification, command: &str) -> bool {
        let files = self.index.files();
        let has = |language| files.iter().any(|f| f.language == language);
        let output = baseline.outcome.as_ref().map_or("", |o| o.output.as_str());
        let runner = baseline.report.as_ref().and_then(|r| r.runner);
        let node = has(crate::syntax::Language::JavaScript)
            && (runner == Some("node") || command.contains("node --test"));
        node || self.rust_tests(command).is_some()
            || has(crate::syntax::Language::Python)
                && (runner == Some("pytest")
                    || command.contains("python")
                    || command.contains("pytest")
                    || output.contains("Traceback (most recent call last)")
                    || output
                        .lines()
                        .any(|l| l.starts_with("Ran ") && l.contains(" test")))
    }

    /// The tracer's files, read and scored.
    fn read_spectrum(&self, out: &Path, real_root: &Path) -> Result<Spectrum, String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(out)
            .map_err(|err| format!("nothing recorded ({err})"))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        files.truncate(MAX_FILES);
        let mut recorded = Vec::new();
        for path in files {
            match read_bounded(&path).map(|text| serde_json::from_str::<Recorded>(&text)) {
                Some(Ok(r)) => recorded.push(r),
                Some(Err(err)) => tracing::warn!(path = %path.display(), "coverage file: {err}"),
                None => {
                    tracing::warn!(path = %path.display(), "coverage file unreadable or too big")
                }
            }
        }
        let mut lookup = SymbolLookup::default();
        let mut counts: HashMap<usize, (u32, u32)> = HashMap::new();
        // By (function, line): failing and passing tests that ran it.
        let mut line_counts: HashMap<(usize, u32), (u32, u32)> = HashMap::new();
        let mut symbols: Vec<IndexedSymbol> = Vec::new();
        // A symbol's place in `symbols`, by where it is (thousands of
        // functions in a big suite: no linear search per lookup).
        let mut places: HashMap<(std::sync::Arc<Path>, u32), usize> = HashMap::new();
        let (mut failing_tests, mut passing_tests) = (0u32, 0u32);
        for r in &recorded {
            // Each recorded function → an index symbol, once per file.
            let mapped: Vec<Option<usize>> = r
                .functions
                .iter()
                .map(|(path, line, name)| {
                    let rel = Path::new(path).strip_prefix(real_root).ok()?;
                    let path = self.files.root().join(rel);
                    // A line (Rust's coverage) belongs only to a function
                    // around it; a code object may start at a decorator.
                    let symbol = lookup.function_at(self, &path, *line, name.is_empty())?;
                    let key = (symbol.path.clone(), symbol.range.0.line);
                    Some(*places.entry(key).or_insert_with(|| {
                        symbols.push(symbol);
                        symbols.len() - 1
                    }))
                })
                .collect();
            for test in &r.tests {
                match test.failed {
                    true => failing_tests += 1,
                    false => passing_tests += 1,
                }
                let mut ran: Vec<usize> = test
                    .functions
                    .iter()
                    .filter_map(|i| mapped.get(*i).copied().flatten())
                    .collect();
                ran.sort_unstable();
                ran.dedup();
                let count = |entry: &mut (u32, u32)| match test.failed {
                    true => entry.0 += 1,
                    false => entry.1 += 1,
                };
                for i in ran {
                    count(counts.entry(i).or_default());
                }
                let mut lines: Vec<(usize, u32)> = test
                    .lines
                    .iter()
                    .filter_map(|(i, lines)| Some((mapped.get(*i).copied().flatten()?, lines)))
                    .flat_map(|(symbol, lines)| lines.iter().map(move |l| (symbol, *l)))
                    .collect();
                lines.sort_unstable();
                lines.dedup();
                for key in lines {
                    count(line_counts.entry(key).or_default());
                }
            }
        }
        if failing_tests == 0 {
            return Err(match passing_tests {
                0 => "no test was recorded (not pytest, unittest, `node --test` or `cargo test`, or Python started without `site`)".to_owned(),
                n => format!("all {n} traced tests passed this time"),
            });
        }
        // Each function's most suspicious line: a bug in a branch only the
        // failing tests take shows there even when every test runs the
        // function; the earliest line among equals.
        let mut best_lines: HashMap<usize, (u32, u32, u32, f64)> = HashMap::new();
        for ((symbol, line), (failing, passing)) in line_counts {
            let score = ochiai(failing, passing, failing_tests);
            let best = best_lines
                .entry(symbol)
                .or_insert((line, failing, passing, score));
            if score > best.3 || (score == best.3 && line < best.0) {
                *best = (line, failing, passing, score);
            }
        }
        // Tests (their files, and Rust's beside the code) are where the
        // failure shows, not where the fix goes.
        let mut functions: Vec<Executed> = counts
            .into_iter()
            .filter(|(_, (f, _))| *f > 0)
            .filter(|(i, _)| {
                symbols.get(*i).is_some_and(|s| {
                    !is_test_file(&self.files.paths.relative(&s.path)) && !self.is_test_function(s)
                })
            })
            .filter_map(|(i, (failing, passing))| {
                let function_score = ochiai(failing, passing, failing_tests);
                let line = best_lines.get(&i).copied();
                Some(Executed {
                    symbol: symbols.get(i)?.clone(),
                    failing,
                    passing,
                    function_score,
                    line,
                    score: line.map_or(function_score, |l| l.3.max(function_score)),
                })
            })
            .collect();
        functions.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(b.function_score.total_cmp(&a.function_score))
                .then(a.passing.cmp(&b.passing))
                .then_with(|| a.symbol.path.cmp(&b.symbol.path))
                .then(a.symbol.range.0.line.cmp(&b.symbol.range.0.line))
        });
        Ok(Spectrum {
            functions,
            failing_tests,
            passing_tests,
        })
    }
}

/// Ochiai's suspiciousness: 1 for a function every failing test and no
/// passing one runs.
pub(super) fn ochiai(failing: u32, passing: u32, all_failing: u32) -> f64 {
    let denominator = (f64::from(all_failing) * f64::from(failing + passing)).sqrt();
    match denominator > 0.0 {
        true => f64::from(failing) / denominator,
        false => 0.0,
    }
}

/// Index lookups, one per file.
#[derive(Default)]
struct SymbolLookup {
    files: HashMap<PathBuf, Vec<IndexedSymbol>>,
}

impl SymbolLookup {
    /// The innermost function whose text holds `line` (1-based: a code
    /// object's first line — a lambda or comprehension belongs to its
    /// function), else one starting just below it (its decorators).
    fn function_at(
        &mut self,
        task: &Task,
        path: &Path,
        line: u32,
        containing_only: bool,
    ) -> Option<IndexedSymbol> {
        let symbols = self.files.entry(path.to_path_buf()).or_insert_with(|| {
            task.index
                .file_symbols(path)
                .into_iter()
                .filter(|s| is_function(s.kind))
                .collect()
        });
        let line0 = line.saturating_sub(1);
        let containing = symbols
            .iter()
            .filter(|s| s.range.0.line <= line0 && line0 <= s.range.1.line)
            .max_by_key(|s| s.range.0.line);
        if containing_only {
            return containing.cloned();
        }
        containing
            .or_else(|| {
                symbols
                    .iter()
                    .filter(|s| s.range.0.line > line0 && s.range.0.line <= line0 + 3)
                    .min_by_key(|s| s.range.0.line)
            })
            .cloned()
    }
}

/// What a converter ([`node`], [`rust`]) read, written in the Python
/// tracer's format as `out/spectrum-{who}.json`; nothing when no test was
/// read.
fn write_converted(
    out: &Path,
    who: &str,
    tests: Vec<serde_json::Value>,
    functions: Vec<(String, u32, String)>,
) {
    if tests.is_empty() {
        return;
    }
    let data = json!({ "tests": tests, "functions": functions });
    if let Err(err) = std::fs::write(out.join(format!("spectrum-{who}.json")), data.to_string()) {
        tracing::warn!("coverage: cannot write the {who} spectrum: {err}");
    }
}

/// A fresh folder with the tracer in `lib/` and an empty `out/`.
fn tracer_area() -> std::io::Result<tempfile::TempDir> {
    let parent = crate::agent::checkpoint::cache_dir().join("coverage");
    std::fs::create_dir_all(&parent)?;
    let area = tempfile::Builder::new()
        .prefix(&format!("run-{}-", std::process::id()))
        .tempdir_in(&parent)?;
    let lib = area.path().join("lib");
    std::fs::create_dir(&lib)?;
    std::fs::create_dir(area.path().join("out"))?;
    for (name, text) in [
        ("fettle_spectrum.py", TRACER),
        ("fettle_spectrum_pytest.py", PYTEST_PLUGIN),
        ("sitecustomize.py", SITECUSTOMIZE),
        ("fettle_spectrum.cjs", NODE_PRELOAD),
    ] {
        std::fs::write(lib.join(name), text)?;
    }
    Ok(area)
}

/// A file's text, unless it is not a regular file or too big.
fn read_bounded(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ochiai_ranks_what_only_failing_tests_run_first() {
        // Two failing tests: a helper only they run beats a function that
        // three passing tests run too.
        assert!((ochiai(2, 0, 2) - 1.0).abs() < 1e-9);
        assert!(ochiai(2, 3, 2) < ochiai(2, 0, 2));
        assert!(ochiai(1, 0, 2) < ochiai(2, 0, 2));
        assert_eq!(ochiai(0, 5, 2), 0.0);
        assert_eq!(ochiai(0, 0, 0), 0.0);
    }
}
