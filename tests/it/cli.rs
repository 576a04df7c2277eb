//! The command line, run as a real process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

/// `fettle args` in `cwd`, without the user's config file or `FETTLE_LOG`.
pub fn fettle(args: &[&str], cwd: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fettle"))
        .args(args)
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", cwd.join(".no-user-config"))
        .env_remove("FETTLE_LOG")
        .output()
        .expect("run fettle")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn version_prints_the_crate_version() {
    let dir = tempfile::tempdir().unwrap();
    let out = fettle(&["--version"], dir.path());
    assert!(out.status.success());
    assert_eq!(
        stdout(&out).trim(),
        format!("fettle {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_bad_flag_is_a_usage_error_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["--bogus"][..], &["doctor", "--nope"], &["frobnicate"]] {
        let out = fettle(args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Usage:"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "usage errors go to stderr");
    }
}

#[test]
fn doctor_shows_values_with_their_sources_and_the_grammars() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fettle.toml"),
        "[completion]\nmax_prompt_tokens = 2048\n",
    )
    .unwrap();
    let out = fettle(&["doctor", "--no-probe"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.contains("completion.max_prompt_tokens"))
        .expect("key listed");
    assert!(
        line.contains("2048") && line.contains("fettle.toml"),
        "{line}"
    );
    let line = text
        .lines()
        .find(|l| l.contains("completion.debounce_ms"))
        .expect("key listed");
    assert!(line.contains("default"), "{line}");
    for grammar in [
        "Rust",
        "Python",
        "JavaScript",
        "TypeScript",
        "TSX",
        "Go",
        "C",
        "C++",
        "Java",
        "Lua",
    ] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(grammar) && l.ends_with("ok")),
            "{grammar}: {text}"
        );
    }
    assert!(text.contains("models:"), "{text}");
}

#[test]
fn doctor_reports_an_invalid_configuration_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fettle.toml"),
        "[models.fast]\nprovider = \"opnai\"\n",
    )
    .unwrap();
    let out = fettle(&["doctor"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("models.fast.provider: unknown provider \"opnai\""),
        "{}",
        stdout(&out)
    );
}

#[test]
fn index_prints_what_the_workspace_index_sees() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lib.rs"),
        "pub fn parse_header() {}\npub struct Header;\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not code\n").unwrap();
    let out = fettle(&["index", ".", "--query", "parhead", "--json"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(value["files"], 1);
    assert_eq!(value["definitions"], 2);
    assert_eq!(value["matches"][0]["name"], "parse_header");
    assert_eq!(value["matches"][0]["line"], 1);
}

/// `fettle ARGS` in `cwd` with `home` as `$HOME` (where the models live).
fn fettle_at_home(args: &[&str], cwd: &std::path::Path, home: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fettle"))
        .args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env_remove("FETTLE_LOG")
        .output()
        .expect("run fettle")
}

/// With only the small built-in model, an agent task is refused before
/// any test runs, naming the command that installs a model that can do it;
/// once that model's file is there, edits and the agent use it by default,
/// and a configured model still wins.
#[test]
fn the_agent_refuses_the_small_model_at_once_and_prefers_an_installed_coder() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("test_calc.py"),
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = fettle_at_home(
        &["fix", "--yes", "--json", "--test", "false", "."],
        ws.path(),
        home.path(),
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "failed", "{result}");
    let summary = result["summary"].as_str().unwrap();
    assert!(
        summary.contains("SmolLM2-135M-Instruct, is too small to run the repair loop")
            && summary.contains("`fettle model fetch qwen2.5-coder-1.5b`"),
        "{summary}"
    );
    assert_eq!(result["iterations"], 0, "{result}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));

    let model_of = |feature: &str, text: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{feature}.model ")))
            .unwrap_or_else(|| panic!("{feature}.model in {text}"))
            .to_owned()
    };
    let doctor = |cwd: &std::path::Path| {
        let out = fettle_at_home(&["doctor", "--no-probe"], cwd, home.path());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = doctor(ws.path());
    assert!(model_of("agent", &text).contains("\"local\""), "{text}");
    // The 1.5B model's file appears (its contents do not matter here).
    let models = home.path().join(".cache/fettle/models");
    std::fs::create_dir_all(&models).unwrap();
    std::fs::write(
        models.join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
        b"GGUF",
    )
    .unwrap();
    let text = doctor(ws.path());
    for feature in ["agent", "edit"] {
        assert!(
            model_of(feature, &text).contains("\"qwen2.5-coder-1.5b\""),
            "{text}"
        );
    }
    assert!(
        model_of("completion", &text).contains("\"local\""),
        "{text}"
    );
    // Ghost text takes the 0.5B model once it is installed.
    std::fs::write(models.join("qwen2.5-coder-0.5b-instruct-q4.gguf"), b"GGUF").unwrap();
    let text = doctor(ws.path());
    assert!(
        model_of("completion", &text).contains("\"qwen2.5-coder-0.5b\""),
        "{text}"
    );
    // What a configuration names wins over the installed default.
    std::fs::write(
        ws.path().join("fettle.toml"),
        "[agent]\nmodel = \"local\"\n",
    )
    .unwrap();
    let text = doctor(ws.path());
    assert!(model_of("agent", &text).contains("\"local\""), "{text}");
    assert!(
        model_of("edit", &text).contains("\"qwen2.5-coder-1.5b\""),
        "{text}"
    );
    // A user who points the built-in model at a file of their own keeps
    // every feature on it.
    let user = home.path().join(".config/fettle");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("config.toml"),
        "[models.local]\npath = \"/models/my-coder.gguf\"\n",
    )
    .unwrap();
    let text = doctor(ws.path());
    for feature in ["completion", "edit", "agent"] {
        assert!(
            model_of(feature, &text).contains("\"local\""),
            "{feature}: {text}"
        );
    }
}
