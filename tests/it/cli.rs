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
