//! The repair corpus: small real projects with one real bug each
//! (`tests/fixtures/corpus/<case>/`), repaired end to end by the real
//! `fettle fix` binary against the mock model server, which plays back the
//! case's `script.json`. The project's own test runner (pytest, cargo, node)
//! decides, exactly as it would for a user.
//!
//! Per case: copy `input/` to a temp workspace, serve the script, run
//! `fettle fix --yes --json --test <cmd> <workspace>`, and require the
//! expected status and iteration count, a tree equal to `expected/`, and a
//! fully consumed script; then `fettle fix --undo` must give back `input/`
//! byte for byte. Failures of all cases are collected and reported together.
//!
//! A case whose runner is missing (`python3 -m pytest`, `node`/`npm`,
//! `cargo`) is skipped with a note, unless `FETTLE_REQUIRE_RUNNERS=1`.
//! `FETTLE_CORPUS_CASE=<substring>` runs only the matching cases.
//! See `tests/fixtures/corpus/README.md` for the case format.
// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::agent_common;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_common::{clip, copy_tree, differences, files, Mock};
use fettle::agent::edit::{apply_edit, lint_guard, Strategy};
use fettle::mock::Script;
use serde::Deserialize;
use serde_json::Value;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/corpus");

/// Generous: a Rust case compiles its crate several times on a slow machine.
const FIX_TIMEOUT: Duration = Duration::from_secs(600);
const UNDO_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize)]
struct CaseMeta {
    test_command: String,
    goal: Option<String>,
    expect_status: String,
    expect_iterations: u64,
    description: String,
    /// Set on cases whose edits match only on a looser rung of the edit
    /// matching ladder (whitespace or indentation), saying which.
    #[serde(default)]
    edit_matching: Option<String>,
}

struct Case {
    name: String,
    dir: PathBuf,
    meta: CaseMeta,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(CORPUS).expect("read the corpus directory") {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(dir.join("case.json"))
            .unwrap_or_else(|e| panic!("{name}: case.json: {e}"));
        let meta: CaseMeta =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: case.json: {e}"));
        out.push(Case { name, dir, meta });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

/// Runs `cmd` to its end or `timeout` (then kills it), keeping its output.
fn run(mut cmd: Command, timeout: Duration) -> Ran {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn fettle");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    // Drain both pipes while waiting, so a chatty child never blocks.
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ran {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        timed_out,
    }
}

/// Whether the runner a test command needs is installed; asked once per kind.
fn runner_available(
    test_command: &str,
    cache: &mut HashMap<String, Result<(), String>>,
) -> Result<(), String> {
    let program = test_command.split_whitespace().next().unwrap_or_default();
    let probes: &[&[&str]] = match program {
        "python3" => &[&["python3", "-m", "pytest", "--version"]],
        "npm" => &[&["node", "--version"], &["npm", "--version"]],
        "cargo" => &[&["cargo", "--version"]],
        other => &[&[other, "--version"]],
    };
    cache
        .entry(program.to_owned())
        .or_insert_with(|| {
            for probe in probes {
                let ok = Command::new(probe[0])
                    .args(&probe[1..])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .map(|s| s.success())
                    .unwrap_or(false);
                if !ok {
                    return Err(format!("`{}` is not available", probe.join(" ")));
                }
            }
            Ok(())
        })
        .clone()
}

fn fettle(workspace_parent: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fettle"));
    cmd.current_dir(workspace_parent)
        // Checkpoints (for --undo) and caches stay in the case's temp dir;
        // the user's own configuration stays out.
        .env("FETTLE_CACHE_DIR", workspace_parent.join("cache"))
        .env("XDG_CACHE_HOME", workspace_parent.join("cache"))
        .env("XDG_CONFIG_HOME", workspace_parent.join("no-user-config"))
        // A Rust case builds inside its own workspace, as a user's would.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("FETTLE_LOG");
    cmd
}

/// Runs one case; returns what went wrong (empty: it passed) and the
/// stderr of the `fettle` runs.
fn run_case(case: &Case) -> (Vec<String>, String) {
    let mut problems = Vec::new();
    let tmp = tempfile::tempdir().unwrap();
    let workspace = tmp.path().join("ws");
    let input = case.dir.join("input");
    let expected = case.dir.join("expected");
    copy_tree(&input, &workspace);

    let script = Script::from_file(&case.dir.join("script.json"))
        .unwrap_or_else(|e| panic!("{}: script.json: {e:#}", case.name));
    let mock = Mock::start(script);
    let config = format!(
        "[models.mock]\nprovider = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-coder\"\nmax_retries = 0\ntimeout_ms = 30000\n\n[agent]\nmodel = \"mock\"\n",
        mock.server.url()
    );
    std::fs::write(workspace.join("fettle.toml"), config).unwrap();

    let mut cmd = fettle(tmp.path());
    cmd.args(["fix", "--yes", "--json", "--test", &case.meta.test_command]);
    if let Some(goal) = &case.meta.goal {
        cmd.args(["--goal", goal]);
    }
    cmd.arg(&workspace);
    let fix = run(cmd, FIX_TIMEOUT);
    let mut stderr = format!("--- fettle fix stderr ---\n{}", clip(&fix.stderr, 6000));

    if fix.timed_out {
        problems.push(format!(
            "`fettle fix` did not finish within {FIX_TIMEOUT:?}"
        ));
    }
    if fix.code != Some(0) {
        problems.push(format!("`fettle fix` exited with {:?}, wanted 0", fix.code));
    }
    match serde_json::from_str::<Value>(fix.stdout.trim()) {
        Ok(result) => {
            if result["status"] != case.meta.expect_status.as_str() {
                problems.push(format!(
                    "status {}, wanted {:?} (summary: {})",
                    result["status"], case.meta.expect_status, result["summary"]
                ));
            }
            if result["iterations"] != case.meta.expect_iterations {
                problems.push(format!(
                    "{} iteration(s), wanted {}",
                    result["iterations"], case.meta.expect_iterations
                ));
            }
        }
        Err(e) => problems.push(format!(
            "stdout is not the JSON result ({e}): {:?}",
            clip(&fix.stdout, 2000)
        )),
    }
    for difference in differences(&files(&workspace, &[]), &files(&expected, &[])) {
        problems.push(format!("after the fix, {difference}"));
    }
    let remaining = mock.server.remaining();
    if remaining != 0 {
        problems.push(format!(
            "{remaining} scripted response(s) were never requested ({} request(s) made)",
            mock.server.requests().len()
        ));
    }
    drop(mock);

    let mut undo = fettle(tmp.path());
    undo.args(["fix", "--undo", "--json"]).arg(&workspace);
    let undone = run(undo, UNDO_TIMEOUT);
    stderr.push_str(&format!(
        "\n--- fettle fix --undo stderr ---\n{}",
        clip(&undone.stderr, 2000)
    ));
    if undone.code != Some(0) {
        problems.push(format!(
            "`fettle fix --undo` exited with {:?}, wanted 0; stdout: {}",
            undone.code,
            clip(&undone.stdout, 1000)
        ));
    }
    for difference in differences(&files(&workspace, &[]), &files(&input, &[])) {
        problems.push(format!("after --undo, {difference}"));
    }
    (problems, stderr)
}

#[test]
fn agent_repairs_every_corpus_case() {
    let require_runners = std::env::var("FETTLE_REQUIRE_RUNNERS").is_ok_and(|v| v == "1");
    let only = std::env::var("FETTLE_CORPUS_CASE").ok();
    // One clear message instead of every case failing the same way.
    let mut help = fettle(&std::env::temp_dir());
    help.args(["fix", "--help"]);
    let help = run(help, UNDO_TIMEOUT);
    assert_eq!(
        help.code,
        Some(0),
        "`fettle fix` is not available in this binary:\n{}",
        help.stderr
    );
    let mut runners = HashMap::new();
    let mut failures = Vec::new();
    let (mut passed, mut skipped) = (0, 0);
    for case in cases() {
        if only.as_deref().is_some_and(|o| !case.name.contains(o)) {
            continue;
        }
        if let Err(why) = runner_available(&case.meta.test_command, &mut runners) {
            if require_runners {
                failures.push(format!("{}: {why} (FETTLE_REQUIRE_RUNNERS=1)", case.name));
            } else {
                eprintln!("corpus: skipping {}: {why}", case.name);
                skipped += 1;
            }
            continue;
        }
        let started = Instant::now();
        let (problems, stderr) = run_case(&case);
        eprintln!(
            "corpus: {} {} ({:.1} s)",
            case.name,
            if problems.is_empty() { "ok" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        if problems.is_empty() {
            passed += 1;
        } else {
            failures.push(format!(
                "{} — {}\n  {}\n{stderr}",
                case.name,
                case.meta.description,
                problems.join("\n  ")
            ));
        }
    }
    eprintln!(
        "corpus: {passed} passed, {} failed, {skipped} skipped",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} corpus case(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The corpus itself, checked without running the agent: every case is
/// complete, its script parses as a mock script, and the script ends one
/// attempt (a response without tool calls) per expected iteration.
#[test]
fn corpus_cases_are_well_formed() {
    let cases = cases();
    let count = |prefix: &str| cases.iter().filter(|c| c.name.starts_with(prefix)).count();
    assert!(
        count("py-") >= 5 && count("rs-") >= 4 && count("js-") >= 5,
        "the corpus wants at least 5 Python, 4 Rust and 5 JavaScript cases"
    );
    for case in &cases {
        let name = &case.name;
        let input = files(&case.dir.join("input"), &[]);
        let expected = files(&case.dir.join("expected"), &[]);
        assert!(!input.is_empty(), "{name}: input/ is empty");
        assert_ne!(input, expected, "{name}: expected/ is the same as input/");
        assert_eq!(case.meta.expect_status, "success", "{name}: expect_status");
        assert!(
            !case.meta.description.trim().is_empty(),
            "{name}: no description"
        );
        assert!(
            ["python3 -m pytest", "cargo test", "npm test"]
                .iter()
                .any(|p| case.meta.test_command.starts_with(p)),
            "{name}: unexpected test command {:?}",
            case.meta.test_command
        );
        let path = case.dir.join("script.json");
        Script::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let script: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let responses = script["responses"].as_array().unwrap();
        let ends_turn = |r: &Value| r["tool_calls"].as_array().is_none_or(|c| c.is_empty());
        let attempts = responses.iter().filter(|r| ends_turn(r)).count() as u64;
        assert_eq!(
            attempts, case.meta.expect_iterations,
            "{name}: one text-only response should end each attempt"
        );
        assert!(
            responses.last().is_some_and(ends_turn),
            "{name}: the script must end with the model's summary (no tool calls)"
        );
        for dir in ["input", "expected"] {
            let mut stack = vec![case.dir.join(dir)];
            while let Some(d) = stack.pop() {
                for entry in std::fs::read_dir(&d).unwrap() {
                    let path = entry.unwrap().path();
                    let file = path.file_name().unwrap().to_string_lossy().into_owned();
                    assert!(
                        !agent_common::IGNORED.contains(&file.as_str()),
                        "{name}: build output or cache in the fixture: {}",
                        path.display()
                    );
                    if path.is_dir() {
                        stack.push(path);
                    }
                }
            }
        }
    }
}

/// Replays every script's `edit` and `write_file` calls on `input/` with the
/// agent's own edit matching, in order (a wrong first attempt stays in the
/// files, as it does in the loop), and requires `expected/` exactly. Ladder
/// cases must need a looser rung, and the others must match exactly.
#[test]
fn scripted_edits_turn_input_into_expected() {
    let mut failures = Vec::new();
    for case in cases() {
        let name = &case.name;
        let mut replayed = files(&case.dir.join("input"), &[]);
        let path = case.dir.join("script.json");
        let script: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut strategies = Vec::new();
        for (index, response) in script["responses"].as_array().unwrap().iter().enumerate() {
            let calls = response["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for call in calls {
                let args = &call["arguments"];
                let file = args["path"].as_str().unwrap_or_default().to_owned();
                let old = replayed
                    .get(&file)
                    .map(|b| String::from_utf8(b.clone()).unwrap());
                let new = match call["name"].as_str() {
                    Some("edit") => {
                        let Some(old) = &old else {
                            failures.push(format!("{name}: response {index} edits missing {file}"));
                            continue;
                        };
                        let search = args["search"].as_str().unwrap();
                        let replace = args["replace"].as_str().unwrap();
                        match apply_edit(old, search, replace) {
                            Ok(applied) => {
                                strategies.push(applied.strategy);
                                applied.text
                            }
                            Err(e) => {
                                failures
                                    .push(format!("{name}: response {index}, edit of {file}: {e}"));
                                continue;
                            }
                        }
                    }
                    Some("write_file") => args["content"].as_str().unwrap().to_owned(),
                    _ => continue,
                };
                if let Err(rejection) =
                    lint_guard(Path::new(&file), old.as_deref().unwrap_or(""), &new)
                {
                    failures.push(format!(
                        "{name}: response {index} breaks the syntax of {file}: {rejection}"
                    ));
                }
                replayed.insert(file, new.into_bytes());
            }
        }
        for difference in differences(&replayed, &files(&case.dir.join("expected"), &[])) {
            failures.push(format!("{name}: replaying the script, {difference}"));
        }
        let loose = strategies.iter().any(|s| *s != Strategy::Exact);
        match (&case.meta.edit_matching, loose) {
            (Some(note), false) => failures.push(format!(
                "{name}: meant to exercise the matching ladder ({note}) but every edit matched exactly"
            )),
            (None, true) => failures.push(format!(
                "{name}: an edit needed a looser rung ({strategies:?}); fix the script or set `edit_matching`"
            )),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
