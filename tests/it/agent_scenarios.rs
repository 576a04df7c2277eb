//! The repair loop end to end through `fettle fix`: each directory under
//! `tests/fixtures/agent/scenarios/` is a workspace (`input/`), the mock
//! model's script (`script.json`), the tree it must leave (`expected/`, or
//! the input unchanged) and what else must hold (`scenario.json`). After
//! every scenario, `fettle fix --undo` must restore the input byte for byte,
//! modes included.

#![allow(clippy::unwrap_used, clippy::expect_used)] // in tests a panic is the failure report

use crate::agent_common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use agent_common::{
    copy_tree, dirs, fettle, fettle_command, fixtures, have_pytest, snapshot, tree_diff, Mock,
};
use fettle::mock::Script;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    /// For people reading the fixture.
    #[allow(dead_code)]
    description: String,
    args: Vec<String>,
    #[serde(default)]
    config: String,
    #[serde(default)]
    modes: BTreeMap<String, String>,
    #[serde(default)]
    symlinks: BTreeMap<String, String>,
    /// Files created beside the workspace (to prove they stay untouched).
    #[serde(default)]
    outside: BTreeMap<String, String>,
    #[serde(default)]
    ignore: Vec<String>,
    check_dead_pid: Option<String>,
    expect: Expect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    exit: i32,
    status: String,
    iterations: u64,
    /// "expected" or "input".
    tree: String,
    #[serde(default)]
    summary_contains: Vec<String>,
    /// Substrings the summary must not contain.
    #[serde(default)]
    summary_lacks: Vec<String>,
    /// `[request index, substring]`: what the model must have been told.
    #[serde(default)]
    requests_contain: Vec<(usize, String)>,
    /// Substrings no request may contain (secrets, files outside).
    #[serde(default)]
    requests_lack: Vec<String>,
    #[serde(default = "yes")]
    script_consumed: bool,
    /// Paths that must not exist after the task (nor after undo).
    #[serde(default)]
    absent: Vec<String>,
    /// The result's `changedFiles`, relative and sorted.
    changed_files: Option<Vec<String>>,
    /// `[JSON pointer, value]`: fields of the result (`/candidates/0/passed`).
    #[serde(default)]
    result_has: Vec<(String, Value)>,
    /// Substrings of the progress the user reads on stderr.
    #[serde(default)]
    stderr_contains: Vec<String>,
}

/// A JSON pointer where `-1` is an array's last element.
fn pointer_with_last<'a>(value: &'a Value, pointer: &str) -> Option<&'a Value> {
    pointer
        .split('/')
        .skip(1)
        .try_fold(value, |at, seg| match (at, seg) {
            (Value::Array(items), "-1") => items.last(),
            (Value::Array(items), i) => items.get(i.parse::<usize>().ok()?),
            (Value::Object(map), key) => map.get(key),
            _ => None,
        })
}

fn yes() -> bool {
    true
}

fn set_modes(root: &Path, modes: &BTreeMap<String, String>) {
    for (rel, mode) in modes {
        let mode = u32::from_str_radix(mode, 8).unwrap();
        std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// Runs one scenario; `Err` says what went wrong.
fn run_scenario(dir: &Path) -> Result<(), String> {
    let scenario: Scenario =
        serde_json::from_str(&std::fs::read_to_string(dir.join("scenario.json")).unwrap())
            .map_err(|e| format!("bad scenario.json: {e}"))?;
    let script = Script::from_file(&dir.join("script.json")).map_err(|e| e.to_string())?;
    let mock = Mock::start(script);
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().join("ws");
    let cache = temp.path().join("cache");
    copy_tree(&dir.join("input"), &ws);
    set_modes(&ws, &scenario.modes);
    for (link, target) in &scenario.symlinks {
        std::os::unix::fs::symlink(target, ws.join(link)).unwrap();
    }
    for (rel, text) in &scenario.outside {
        std::fs::write(temp.path().join(rel), text).unwrap();
    }
    std::fs::write(ws.join("fettle.toml"), mock.config(&scenario.config)).unwrap();
    let input = snapshot(&ws, &scenario.ignore);
    let input_dirs = dirs(&ws, &scenario.ignore);

    let mut args: Vec<&str> = vec!["fix", "--json"];
    // `{outside}`: the directory beside the workspace (`outside` files).
    let outside = temp.path().to_str().unwrap().to_owned();
    let given: Vec<String> = scenario
        .args
        .iter()
        .map(|a| a.replace("{outside}", &outside))
        .collect();
    args.extend(given.iter().map(String::as_str));
    let ws_arg = ws.to_str().unwrap();
    args.push(ws_arg);
    let out = fettle(&args, &cache);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let context = |what: String| format!("{what}\n--- stderr ---\n{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        context(format!(
            "stdout is not the task result JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        ))
    })?;
    let expect = &scenario.expect;
    if out.status.code() != Some(expect.exit) {
        return Err(context(format!(
            "exit {:?}, want {}; result {result:#}",
            out.status.code(),
            expect.exit
        )));
    }
    if result["status"] != expect.status.as_str() || result["iterations"] != expect.iterations {
        return Err(context(format!(
            "status {} after {} iterations, want {} after {}; result {result:#}",
            result["status"], result["iterations"], expect.status, expect.iterations
        )));
    }
    let summary = result["summary"].as_str().unwrap_or("");
    for want in &expect.stderr_contains {
        if !stderr.contains(want.as_str()) {
            return Err(context(format!("stderr lacks {want:?}")));
        }
    }
    for want in &expect.summary_contains {
        if !summary.contains(want.as_str()) {
            return Err(context(format!("summary lacks {want:?}:\n{summary}")));
        }
    }
    for unwanted in &expect.summary_lacks {
        if summary.contains(unwanted.as_str()) {
            return Err(context(format!(
                "summary contains {unwanted:?}:\n{summary}"
            )));
        }
    }
    let bodies = mock.bodies();
    for (index, want) in &expect.requests_contain {
        let Some(body) = bodies.get(*index) else {
            return Err(context(format!(
                "no request #{index} (only {})",
                bodies.len()
            )));
        };
        if !body.contains(want.as_str()) {
            return Err(context(format!("request #{index} lacks {want:?}:\n{body}")));
        }
    }
    for secret in &expect.requests_lack {
        if let Some(i) = bodies.iter().position(|b| b.contains(secret.as_str())) {
            return Err(context(format!("request #{i} contains {secret:?}")));
        }
    }
    if expect.script_consumed && mock.server.remaining() != 0 {
        return Err(context(format!(
            "{} scripted responses left unused",
            mock.server.remaining()
        )));
    }
    for (rel, text) in &scenario.outside {
        if std::fs::read_to_string(temp.path().join(rel)).unwrap_or_default() != *text {
            return Err(context(format!("{rel} outside the workspace was changed")));
        }
    }
    if let Some(pid_file) = &scenario.check_dead_pid {
        // The file proves the background child started. Its pid is the one
        // it had in the sandbox's PID namespace, meaningless here: look for
        // any live process still working in the workspace instead.
        std::fs::read_to_string(ws.join(pid_file))
            .map_err(|e| context(format!("{pid_file}: {e}")))?;
        let left = processes_in(&ws);
        if !left.is_empty() {
            return Err(context(format!(
                "the test command's background child(ren) {left:?} outlived the timeout"
            )));
        }
    }
    for rel in &expect.absent {
        if std::fs::symlink_metadata(ws.join(rel)).is_ok() {
            return Err(context(format!("{rel} exists after the task")));
        }
    }
    for (pointer, want) in &expect.result_has {
        let got = pointer_with_last(&result, pointer);
        if got != Some(want) {
            return Err(context(format!("result {pointer} is {got:?}, want {want}")));
        }
    }
    if let Some(want) = &expect.changed_files {
        let prefix = format!("{}/", ws.canonicalize().unwrap().display());
        let mut got: Vec<String> = result["changedFiles"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|p| p.strip_prefix(&prefix).unwrap_or(p).to_owned())
            .collect();
        got.sort();
        if got != *want {
            return Err(context(format!("changedFiles {got:?}, want {want:?}")));
        }
    }
    let want = if expect.tree == "expected" {
        let expected = temp.path().join("expected");
        copy_tree(&dir.join("expected"), &expected);
        set_modes(&expected, &scenario.modes);
        snapshot(&expected, &scenario.ignore)
    } else {
        input.clone()
    };
    if expect.tree != "expected" && dirs(&ws, &scenario.ignore) != input_dirs {
        return Err(context(format!(
            "directories after the task {:?}, want those of the input {input_dirs:?}",
            dirs(&ws, &scenario.ignore)
        )));
    }
    if let Some(diff) = tree_diff(&want, &snapshot(&ws, &scenario.ignore)) {
        return Err(context(format!(
            "tree after the task differs from {}:\n{diff}",
            expect.tree
        )));
    }
    // Undo restores the input, byte for byte and mode for mode.
    let undo = fettle(&["fix", "--undo", "--json", ws_arg], &cache);
    if !undo.status.success() && !result["changedFiles"].as_array().is_none_or(Vec::is_empty) {
        return Err(context(format!(
            "undo failed: {}",
            String::from_utf8_lossy(&undo.stderr)
        )));
    }
    if let Some(diff) = tree_diff(&input, &snapshot(&ws, &scenario.ignore)) {
        return Err(context(format!(
            "tree after undo differs from the input:\n{diff}"
        )));
    }
    let after_undo = dirs(&ws, &scenario.ignore);
    if after_undo != input_dirs {
        return Err(context(format!(
            "directories after undo {after_undo:?}, want those of the input {input_dirs:?}"
        )));
    }
    Ok(())
}

#[test]
fn scenarios() {
    let root = fixtures("agent/scenarios");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("scenario.json").exists())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 10,
        "expected the scenario fixtures under {}",
        root.display()
    );
    // `FETTLE_SCENARIOS=candidates,coverage`: only the scenarios whose
    // names contain one of these (while working on them).
    if let Ok(only) = std::env::var("FETTLE_SCENARIOS") {
        let parts: Vec<&str> = only.split(',').filter(|p| !p.is_empty()).collect();
        dirs.retain(|d| {
            let name = d.file_name().unwrap().to_string_lossy().into_owned();
            parts.iter().any(|p| name.contains(p))
        });
    }
    let pytest = have_pytest();
    let mut failures = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let uses_pytest = std::fs::read_to_string(dir.join("scenario.json"))
            .unwrap()
            .contains("pytest");
        if uses_pytest && !pytest {
            if std::env::var_os("FETTLE_REQUIRE_RUNNERS").is_some() {
                failures.push(format!("{name}: python3 -m pytest is not available"));
            } else {
                eprintln!("skipping {name}: python3 -m pytest is not available");
            }
            continue;
        }
        let started = Instant::now();
        match run_scenario(dir) {
            Ok(()) => eprintln!("ok {name} ({:.1} s)", started.elapsed().as_secs_f64()),
            Err(why) => failures.push(format!("{name}: {why}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} scenario(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Ctrl-C in the middle of a task: the step in progress completes or never
/// starts, the result says `cancelled`, and undo restores the input.
#[test]
fn cancellation_mid_task_leaves_a_consistent_tree() {
    if !have_pytest() {
        eprintln!("skipping: python3 -m pytest is not available");
        return;
    }
    let dir = fixtures("agent/scenarios/one-shot-fix");
    let script = Script::from_json(
        r#"{"responses": [
            {"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "search": "    return a - b\n", "replace": "    return a + b\n"}}]},
            {"text": "Let me think about this for a while.", "delay_ms": 30000}
        ]}"#,
    )
    .unwrap();
    let mock = Mock::start(script);
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().join("ws");
    let cache = temp.path().join("cache");
    copy_tree(&dir.join("input"), &ws);
    std::fs::write(ws.join("fettle.toml"), mock.config("")).unwrap();
    let input = snapshot(&ws, &[]);
    let child = fettle_command(
        &[
            "fix",
            "--json",
            "--test",
            "python3 -m pytest -q -p no:cacheprovider",
            ws.to_str().unwrap(),
        ],
        &cache,
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Wait for the second model request: the first edit is then fully applied.
    let deadline = Instant::now() + Duration::from_secs(60);
    while mock.server.requests().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the task never reached its second turn"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "cancellation was not prompt\n{stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "cancelled", "{result:#}\n{stderr}");
    // The applied edit is whole, and reported.
    let calc = std::fs::read_to_string(ws.join("calc.py")).unwrap();
    assert_eq!(
        calc,
        std::fs::read_to_string(dir.join("expected/calc.py")).unwrap()
    );
    assert!(
        result["diff"]
            .as_str()
            .unwrap()
            .contains("+    return a + b"),
        "{result:#}"
    );
    let undo = fettle(&["fix", "--undo", ws.to_str().unwrap()], &cache);
    assert!(
        undo.status.success(),
        "{}",
        String::from_utf8_lossy(&undo.stderr)
    );
    assert_eq!(tree_diff(&input, &snapshot(&ws, &[])), None);
}

#[test]
fn usage_errors_exit_2() {
    let temp = tempfile::tempdir().unwrap();
    let cache = temp.path().join("cache");
    // An unknown model.
    std::fs::write(
        temp.path().join("fettle.toml"),
        "[agent]\nmodel = \"nope\"\n",
    )
    .unwrap();
    let out = fettle(&["fix", temp.path().to_str().unwrap()], &cache);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
    // A bad flag.
    let out = fettle(&["fix", "--max-iterations", "many"], &cache);
    assert_eq!(out.status.code(), Some(2));
    // Nothing to undo.
    let out = fettle(&["fix", "--undo", temp.path().to_str().unwrap()], &cache);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no task to undo"));
}

/// `fettle fix` killed outright (SIGKILL, as in a crash) after an edit: the
/// on-disk checkpoint still lets `fettle fix --undo` restore the input.
#[test]
fn a_task_killed_mid_way_can_be_undone_after_restart() {
    let dir = fixtures("agent/scenarios/crlf-and-modes");
    let script = Script::from_json(
        r#"{"responses": [
            {"tool_calls": [
                {"name": "edit", "arguments": {"path": "greet.py", "search": "    return 'Hello ' + nam\n", "replace": "    return 'Hello ' + name\n"}},
                {"name": "write_file", "arguments": {"path": "NOTES.md", "content": "notes\n"}}
            ]},
            {"text": "Thinking...", "delay_ms": 30000}
        ]}"#,
    )
    .unwrap();
    let mock = Mock::start(script);
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().join("ws");
    let cache = temp.path().join("cache");
    copy_tree(&dir.join("input"), &ws);
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(ws.join("fettle.toml"), mock.config("")).unwrap();
    let input = snapshot(&ws, &[]);
    let mut child = fettle_command(
        &["fix", "--test", "sh run.sh", ws.to_str().unwrap()],
        &cache,
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while mock.server.requests().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the task never reached its second turn"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        ws.join("NOTES.md").exists(),
        "the step was written before the kill"
    );
    let undo = fettle(&["fix", "--undo", ws.to_str().unwrap()], &cache);
    assert!(
        undo.status.success(),
        "{}",
        String::from_utf8_lossy(&undo.stderr)
    );
    assert_eq!(tree_diff(&input, &snapshot(&ws, &[])), None);
}

/// `agent.sandbox = "workspace"`: a command may write in the workspace but
/// not outside it, and cannot open TCP connections.
#[test]
fn sandboxed_commands_write_only_the_workspace_and_have_no_network() {
    if !fettle::agent::sandbox::available() {
        eprintln!("skipping: this kernel has no Landlock");
        return;
    }
    // Not under CARGO_TARGET_TMPDIR: $CARGO_TARGET_DIR is a build cache
    // sandboxed commands may write.
    let temp = tempfile::tempdir().unwrap();
    let outside = temp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let victim = outside.join("victim.txt");
    std::fs::write(&victim, "safe\n").unwrap();
    let ws = temp.path().join("ws");
    let cache = temp.path().join("cache");
    std::fs::create_dir_all(&ws).unwrap();
    // The mock itself is a live TCP listener the command tries to reach.
    let port_holder = Mock::start(Script::from_json(r#"{"responses": []}"#).unwrap());
    let port = port_holder
        .server
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let command = format!(
        "echo pwned > {victim}; echo ok > inside.txt; python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\" 2>&1 | tail -n 1",
        victim = victim.display()
    );
    let script = serde_json::json!({ "responses": [
        { "tool_calls": [ { "name": "run_command", "arguments": { "command": command } } ] },
        { "text": "Done." }
    ] });
    let mock = Mock::start(Script::from_json(&script.to_string()).unwrap());
    // The user's own file: a workspace file may not set `commands = "auto"`.
    let user_config = cache.join("no-user-config/fettle/config.toml");
    std::fs::create_dir_all(user_config.parent().unwrap()).unwrap();
    std::fs::write(
        user_config,
        mock.config("commands = \"auto\"\nsandbox = \"workspace\""),
    )
    .unwrap();
    let out = fettle(
        &[
            "fix",
            "--json",
            "--goal",
            "write inside.txt",
            "--test",
            "test -f inside.txt",
            ws.to_str().unwrap(),
        ],
        &cache,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(result["status"], "success", "{result:#}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "safe\n",
        "the sandbox let a command write outside"
    );
    let told = mock.bodies()[1].clone();
    // Refused, or (with the private /tmp) not even there to write to.
    assert!(
        told.contains("Permission denied") || told.contains("No such file or directory"),
        "{told}"
    );
    assert!(
        told.contains("PermissionError"),
        "the TCP connection was not refused: {told}"
    );
    assert_eq!(port_holder.server.requests().len(), 0);
}

/// Live (not zombie) processes whose working directory is `dir`.
fn processes_in(dir: &Path) -> Vec<u32> {
    let dir = std::fs::canonicalize(dir).unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit(')')
                    .next()
                    .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
            });
            alive && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir)
        })
        .collect()
}
