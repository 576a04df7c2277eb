//! The debugging agent's bisection on the regression corpus
//! (`tests/fixtures/regressions`: 8 small repositories in Python,
//! JavaScript and Rust, each with a commit that breaks a test): through the
//! real `fettle fix`, the bisection must name that commit in every case,
//! and a model that needs the culprit to fix the bug (scripted: it answers
//! the fix only when told the commit) fixes it with `--since` and not
//! without. The same corpus measures the real model in
//! `benches/regressions.py`.

use crate::agent_common;

use std::path::Path;
use std::process::Command;

use agent_common::{fixtures, Mock};
use fettle::mock::Script;
use serde_json::{json, Value};

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Builds `case` into `dest`; the shas, oldest first.
fn build(case: &Path, dest: &Path) -> Vec<String> {
    let out = Command::new("python3")
        .arg(fixtures("regressions").join("build.py"))
        .arg(case)
        .arg(dest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs `fettle fix` on a fresh build of `case` with `extra` arguments.
fn fix(case: &Value, case_path: &Path, extra: &[&str]) -> (Value, Vec<String>, String) {
    fix_with(case, case_path, extra, &|_| {}, &|_| {})
}

/// [`fix`], with `prepare` run on the workspace once it is built.
fn fix_with(
    case: &Value,
    case_path: &Path,
    extra: &[&str],
    prepare: &dyn Fn(&Path),
    after: &dyn Fn(&Path),
) -> (Value, Vec<String>, String) {
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().join("ws");
    let shas = build(case_path, &ws);
    prepare(&ws);
    let first_bad = case["first_bad"].as_u64().unwrap() as usize;
    let subject = case["commits"][first_bad]["message"].as_str().unwrap();
    let language = case["language"].as_str().unwrap();
    let fix = case["fix"]["code"].as_str().unwrap();
    // The scripted model knows the fix only when told the culprit.
    let script = json!({ "responses": [
        { "when": { "contains": subject }, "text": format!("```{language}\n{fix}\n```"), "repeat": true },
        { "text": "I cannot tell what is wrong.", "repeat": true },
    ]});
    let mock = Mock::start(Script::from_json(&script.to_string()).unwrap());
    // Outside the repository: the configuration is not part of its history.
    let config_home = temp.path().join("config");
    std::fs::create_dir_all(config_home.join("fettle")).unwrap();
    std::fs::write(
        config_home.join("fettle/config.toml"),
        mock.config("prompt = \"compact\"\nmax_iterations = 1"),
    )
    .unwrap();
    let test = case["test"].as_str().unwrap();
    let mut args = vec!["fix", "--json", "--test", test];
    let since = shas[0].clone();
    let extra: Vec<String> = extra.iter().map(|a| a.replace("{first}", &since)).collect();
    args.extend(extra.iter().map(String::as_str));
    let ws_arg = ws.to_str().unwrap().to_owned();
    args.push(&ws_arg);
    let cache = temp.path().join("cache");
    let out = {
        let mut command = agent_common::fettle_command(&args, &cache);
        command.env("XDG_CONFIG_HOME", &config_home);
        command.env("CARGO_TARGET_DIR", temp.path().join("target"));
        command.output().unwrap()
    };
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let result: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    after(&ws);
    (result, shas, stderr)
}

#[test]
fn bisection_names_the_commit_that_broke_the_tests_in_every_case() {
    if !have("git", "--version")
        || !agent_common::have_pytest()
        || !have("node", "--version")
        || !have("cargo", "--version")
    {
        eprintln!("skipping: git, pytest, node and cargo are needed");
        return;
    }
    let dir = fixtures("regressions").join("cases");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    cases.sort();
    assert!(cases.len() >= 8, "the corpus has {} cases", cases.len());
    let (mut found, mut fixed_with, mut fixed_without) = (0, 0, 0);
    let mut failures = Vec::new();
    for (i, path) in cases.iter().enumerate() {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let first_bad = case["first_bad"].as_u64().unwrap() as usize;
        // Every other case walks back instead of being told where to start.
        let how: &[&str] = if i % 2 == 0 {
            &["--since", "{first}"]
        } else {
            &["--bisect"]
        };
        let (result, shas, stderr) = fix(&case, path, how);
        if result["bisect"]["firstBad"] == shas[first_bad].as_str() {
            found += 1;
        } else {
            failures.push(format!(
                "{name}: bisect {} — want {}\n{stderr}",
                result["bisect"], shas[first_bad]
            ));
        }
        if result["status"] == "success" {
            fixed_with += 1;
        } else {
            failures.push(format!(
                "{name}: not fixed with the bisection: {}\n{stderr}",
                result["summary"]
            ));
        }
        let (without, _, _) = fix(&case, path, &[]);
        if without["status"] == "success" {
            fixed_without += 1;
        }
        assert!(
            without.get("bisect").is_none(),
            "{name}: no bisection was asked for"
        );
    }
    eprintln!(
        "bisect named the first bad commit in {found}/{} cases; fixed with it {fixed_with}, without {fixed_without}",
        cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(fixed_without, 0);
}

#[test]
fn bisection_runs_no_hook_of_the_repository_and_leaves_it_as_it_was() {
    if !have("git", "--version") || !agent_common::have_pytest() {
        eprintln!("skipping: git and pytest are needed");
        return;
    }
    let path = fixtures("regressions").join("cases/py-inventory.json");
    let case: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ran");
    let prepare = |ws: &Path| {
        // A hostile repository: hooks and an fsmonitor that would leave a
        // mark, wherever git runs them.
        let script = format!("#!/bin/sh\necho hook >> {}\n", marker.display());
        for hook in ["post-checkout", "post-merge", "reference-transaction"] {
            let p = ws.join(".git/hooks").join(hook);
            std::fs::write(&p, &script).unwrap();
            std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
        let config = ws.join(".git/config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "[core]\n\tfsmonitor = \"echo fsmonitor >> {}\"\n",
            marker.display()
        ));
        std::fs::write(&config, text).unwrap();
    };
    let git = |ws: &Path, args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(ws)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let after_head = std::sync::Mutex::new(String::new());
    let after_refs = std::sync::Mutex::new(String::new());
    let after = |ws: &Path| {
        *after_head.lock().unwrap() = git(ws, &["-c", "core.fsmonitor=false", "rev-parse", "HEAD"]);
        *after_refs.lock().unwrap() = git(
            ws,
            &[
                "-c",
                "core.fsmonitor=false",
                "for-each-ref",
                "--format=%(refname)",
            ],
        );
    };
    let (result, shas, stderr) = fix_with(&case, &path, &["--since", "{first}"], &prepare, &after);
    let first_bad = case["first_bad"].as_u64().unwrap() as usize;
    assert_eq!(
        result["bisect"]["firstBad"],
        shas[first_bad].as_str(),
        "{stderr}"
    );
    assert!(
        !marker.exists(),
        "a hook or fsmonitor of the repository ran: {:?}",
        std::fs::read_to_string(&marker)
    );
    // The repository is where it was: HEAD, and no bisect refs.
    assert_eq!(*after_head.lock().unwrap(), *shas.last().unwrap());
    assert_eq!(*after_refs.lock().unwrap(), "refs/heads/main");
}
