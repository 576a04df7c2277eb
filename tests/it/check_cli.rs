//! `fettle check` and `fettle fix --check` on real cargo crates, through
//! the real binary: rustc's real errors reach the terminal, the JSON
//! output and the model (the mock, which records what it was sent), and an
//! attempt that adds a type error is rolled back though no test covers it.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use fettle::mock::Script;
use serde_json::{json, Value};

use crate::agent_common::{fettle_command, Mock};

/// A crate of its own name: cargo shares build results between packages
/// of the same name in one target dir (CI sets `CARGO_TARGET_DIR`), so
/// `fettle` runs without it and each crate has its own `target/`.
fn crate_with(name: &str, lib: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), lib).unwrap();
    dir
}

fn fettle(args: &[&str], cache: &Path) -> std::process::Output {
    fettle_command(args, cache)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn fettle_check_reports_rustcs_error_and_is_clean_once_fixed() {
    let ws = crate_with(
        "check_cli_area",
        "pub fn area(w: u32) -> u32 {\n    let h: u32 = \"2\";\n    w * h\n}\n",
    );
    let cache = tempfile::tempdir().unwrap();
    let root = ws.path().to_str().unwrap();

    let out = fettle(&["check", root], cache.path());
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("src/lib.rs:2:18: error[E0308]: mismatched types"),
        "{stdout}\n{stderr}"
    );
    assert!(stderr.contains("rustc: 1 error(s)"), "{stderr}");

    let out = fettle(&["check", "--json", root], cache.path());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &json[0];
    assert_eq!(first["path"], "src/lib.rs");
    assert_eq!(
        first["range"],
        json!({ "start": { "line": 1, "character": 17 }, "end": { "line": 1, "character": 20 } })
    );
    assert_eq!(first["severity"], "error");
    assert_eq!(first["source"], "rustc");
    assert_eq!(first["code"], "E0308");

    std::fs::write(
        ws.path().join("src/lib.rs"),
        "pub fn area(w: u32) -> u32 {\n    let h: u32 = 2;\n    w * h\n}\n",
    )
    .unwrap();
    let out = fettle(&["check", root], cache.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    // One file: only its diagnostics, its language's checker.
    let out = fettle(
        &["check", "--json", &format!("{root}/src/lib.rs")],
        cache.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!([])
    );
}

#[test]
fn fettle_check_says_why_when_there_is_nothing_to_check() {
    let empty = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = fettle(&["check", empty.path().to_str().unwrap()], cache.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("nothing to check"),
        "{}",
        text(&out.stderr)
    );
    let out = fettle(&["check", "--no-such-flag"], cache.path());
    assert_eq!(out.status.code(), Some(2));
}

fn run_fix(ws: &Path, cache: &Path, extra: &[&str]) -> (Value, String) {
    let mut args = vec!["fix", "--json", "--yes"];
    args.extend_from_slice(extra);
    args.push(ws.to_str().unwrap());
    let out = fettle(&args, cache);
    let stderr = text(&out.stderr);
    let result = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (result, stderr)
}

#[test]
fn fix_check_shows_the_model_rustcs_errors_and_succeeds_when_clean() {
    let ws = crate_with(
        "check_cli_fix",
        "pub fn area(w: u32) -> u32 {\n    let h: u32 = \"2\";\n    w * h\n}\n",
    );
    let cache = tempfile::tempdir().unwrap();
    let script = json!({ "responses": [
        { "tool_calls": [ { "name": "diagnostics", "arguments": {} } ] },
        { "tool_calls": [ { "name": "edit", "arguments": {
            "path": "src/lib.rs", "search": "    let h: u32 = \"2\";", "replace": "    let h: u32 = 2;" } } ] },
        { "text": "Fixed the type of h." }
    ] });
    let mock = Mock::start(Script::from_json(&script.to_string()).unwrap());
    std::fs::write(ws.path().join("fettle.toml"), mock.config("")).unwrap();
    let (result, stderr) = run_fix(ws.path(), cache.path(), &["--check"]);
    assert_eq!(result["status"], "success", "{result:#}\n{stderr}");
    assert!(
        stderr.contains("checking with rust: `cargo check"),
        "{stderr}"
    );
    let bodies = mock.bodies();
    // The first message has the baseline's checker errors; the tool result
    // (second request) the diagnostics with the code line.
    assert!(bodies[0].contains("mismatched types"), "{}", bodies[0]);
    assert!(bodies[1].contains("E0308"), "{}", bodies[1]);
    assert!(
        bodies[1].contains("let h: u32 = \\\"2\\\";"),
        "the code line: {}",
        bodies[1]
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap(),
        "pub fn area(w: u32) -> u32 {\n    let h: u32 = 2;\n    w * h\n}\n"
    );
    // Already clean: nothing to do, the model is not asked.
    let mock = Mock::start(Script::from_json(r#"{"responses": []}"#).unwrap());
    std::fs::write(ws.path().join("fettle.toml"), mock.config("")).unwrap();
    let (result, stderr) = run_fix(ws.path(), cache.path(), &["--check"]);
    assert_eq!(result["status"], "success", "{result:#}\n{stderr}");
    assert_eq!(result["iterations"], 0);
    assert!(mock.bodies().is_empty());
}

#[test]
fn fix_check_refuses_without_a_checker() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "hello\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(Script::from_json(r#"{"responses": []}"#).unwrap());
    std::fs::write(ws.path().join("fettle.toml"), mock.config("")).unwrap();
    let out = fettle(
        &[
            "fix",
            "--check",
            "--test",
            "true",
            ws.path().to_str().unwrap(),
        ],
        cache.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--check: no checker"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_attempt_that_adds_a_type_error_is_rolled_back_though_no_test_covers_it() {
    let original = "pub fn total(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
    let ws = crate_with("check_cli_rollback", original);
    let cache = tempfile::tempdir().unwrap();
    let script = json!({ "responses": [
        { "tool_calls": [ { "name": "edit", "arguments": {
            "path": "src/lib.rs", "search": "    a - b", "replace": "    a + \"b\"" } } ] },
        { "text": "Done." },
        { "tool_calls": [ { "name": "edit", "arguments": {
            "path": "src/lib.rs", "search": "    a - b", "replace": "    a + b" } } ] },
        { "text": "Done, properly this time." }
    ] });
    let mock = Mock::start(Script::from_json(&script.to_string()).unwrap());
    std::fs::write(ws.path().join("fettle.toml"), mock.config("")).unwrap();
    // `true`: no test covers `total`; only the checker can tell.
    let (result, stderr) = run_fix(
        ws.path(),
        cache.path(),
        &["--goal", "make total add", "--test", "true"],
    );
    assert_eq!(result["status"], "success", "{result:#}\n{stderr}");
    assert_eq!(result["iterations"], 2, "{result:#}");
    let bodies = mock.bodies();
    let feedback = &bodies[2];
    assert!(feedback.contains("rolled it back"), "{feedback}");
    assert!(feedback.contains("1 checker error(s)"), "{feedback}");
    assert!(
        feedback.contains("cannot add"),
        "rustc's message: {feedback}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap(),
        "pub fn total(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    );
}

#[test]
fn a_workspaces_checker_command_runs_in_the_sandbox() {
    // A hostile repository's own checker command: it may run (like its
    // tests), but only inside the sandbox, which keeps it from writing
    // outside the workspace.
    if !fettle::agent::sandbox::available() {
        eprintln!("skipped: no Landlock on this kernel");
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("pwned.txt");
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("x.py"), "x = 1\n").unwrap();
    std::fs::write(
        ws.path().join("fettle.toml"),
        format!(
            "[check.commands]\npython = \"echo pwned > {}; echo x.py:1:1: error: ran\"\n",
            target.display()
        ),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = fettle(&["check", ws.path().to_str().unwrap()], cache.path());
    assert_eq!(
        text(&out.stdout),
        "x.py:1:1: error: ran\n",
        "{}",
        text(&out.stderr)
    );
    assert!(!target.exists(), "the checker wrote outside the workspace");
}

#[test]
fn doctor_lists_the_checkers_it_would_run() {
    let ws = crate_with("check_cli_doctor", "pub fn one() -> u32 {\n    1\n}\n");
    std::fs::write(ws.path().join("tool.py"), "print(1)\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = fettle(
        &["doctor", "--no-probe", ws.path().to_str().unwrap()],
        cache.path(),
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("checkers (check.enabled = true, check.on_save = false):"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "rust         cargo check --quiet --all-targets --message-format=json (detected)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("python "),
        "a Python checker or what to install: {stdout}"
    );
}

#[test]
fn a_checker_that_walks_the_tree_is_not_run_over_a_fifo_or_a_device() {
    // `cat *.py` stands for ruff or tsc: a checker that finds the files
    // itself. Over a FIFO it would block until `check.timeout_s`; over a
    // link to /dev/zero it would read until its memory limit.
    for trap in ["fifo", "zero"] {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("x.py"), "x = 1\n").unwrap();
        let bad = ws.path().join("trap.py");
        if trap == "fifo" {
            let made = std::process::Command::new("mkfifo").arg(&bad).status();
            assert!(made.unwrap().success());
        } else {
            std::os::unix::fs::symlink("/dev/zero", &bad).unwrap();
        }
        std::fs::write(
            ws.path().join("fettle.toml"),
            "[check]\ntimeout_s = 20\n\n[check.commands]\npython = \"cat *.py > /dev/null\"\n",
        )
        .unwrap();
        let cache = tempfile::tempdir().unwrap();
        let out = fettle(&["check", ws.path().to_str().unwrap()], cache.path());
        let stderr = text(&out.stderr);
        let both = format!("{}{stderr}", text(&out.stdout));
        let said = if trap == "fifo" {
            "trap.py is a FIFO"
        } else {
            "trap.py is a character device"
        };
        assert!(
            both.contains(said) && both.contains("was not run"),
            "{trap}: {both}"
        );
        assert_eq!(out.status.code(), Some(1), "{trap}: {stderr}");
    }
}
