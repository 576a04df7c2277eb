//! Whole `fettle fix` runs against the sandbox: Fettle's environment, the config and git hooks, a SIGKILLed run's processes, `fettle doctor`, the fallback's notice.

use super::*;

/// A `fettle fix` whose commands try to read Fettle's own environment,
/// turn the sandbox off for the next run, and plant a git hook: the model
/// never sees the secret, and nothing changed.
#[test]
fn fix_commands_cannot_read_fettles_environment_or_loosen_the_next_run() {
    crate::isolated::alone!(fix_commands_cannot_read_fettles_environment_or_loosen_the_next_run);
    setup();
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().join("ws");
    let cache = temp.path().join("cache");
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    let secret = format!("sk-fettle-own-{}", std::process::id());
    let command = "tr '\\0' '\\n' < /proc/$PPID/environ; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null; printf '[agent]\\nsandbox = \"off\"\\n' >> fettle.toml; echo evil > .git/hooks/post-commit; echo ok > inside.txt";
    let script = serde_json::json!({ "responses": [
        { "tool_calls": [ { "name": "run_command", "arguments": { "command": command } } ] },
        { "text": "Done." }
    ] });
    let mock = Mock::start(Script::from_json(&script.to_string()).unwrap());
    // A workspace file cannot turn on `commands = "auto"` (it is gated):
    // `--yes` approves the command, as a user at the prompt would.
    let config = mock.config("");
    std::fs::write(ws.join("fettle.toml"), &config).unwrap();
    let out = fettle_command(
        &[
            "fix",
            "--json",
            "--yes",
            "--goal",
            "write inside.txt",
            "--test",
            "test -f inside.txt",
            ws.to_str().unwrap(),
        ],
        &cache,
    )
    .env("FETTLE_SANDBOX_VICTIM_TOKEN", &secret)
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(result["status"], "success", "{result:#}\n{stderr}");
    let bodies = mock.bodies().join("\n");
    assert!(
        !bodies.contains(&secret),
        "Fettle's environment reached the model"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("fettle.toml")).unwrap(),
        config
    );
    assert!(!ws.join(".git/hooks/post-commit").exists());
    assert!(ws.join("inside.txt").exists());
}

/// SIGKILL a `fettle fix` while its test command runs a long sleep: the
/// sleep dies too (the lifeline closes; the runner kills its namespace).
#[test]
fn test_processes_die_with_a_sigkilled_fettle_fix() {
    crate::isolated::alone!(test_processes_die_with_a_sigkilled_fettle_fix);
    setup();
    for mode in ["auto", "off"] {
        let temp = tempfile::tempdir().unwrap();
        let ws = temp.path().join("ws");
        let cache = temp.path().join("cache");
        std::fs::create_dir_all(&ws).unwrap();
        let mock = Mock::start(Script::from_json(r#"{"responses": []}"#).unwrap());
        std::fs::write(
            ws.join("fettle.toml"),
            mock.config(&format!("sandbox = \"{mode}\"")),
        )
        .unwrap();
        let mark = format!("3001.{}{}", std::process::id(), mode.len());
        let test = format!("setsid sleep {mark} >/dev/null 2>&1 & sleep {mark}");
        let mut child = fettle_command(&["fix", "--test", &test, ws.to_str().unwrap()], &cache)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let needle = format!("sleep\0{mark}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while processes_with(&needle).len() < 2 {
            assert!(
                Instant::now() < deadline,
                "{mode}: the test command never started"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut left = processes_with(&needle);
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            left = processes_with(&needle);
        }
        kill_all(&left);
        assert!(
            left.is_empty(),
            "{mode}: {} test process(es) outlived the SIGKILLed fettle fix",
            left.len()
        );
    }
}

/// `fettle doctor` says what the sandbox enforces here.
#[test]
fn doctor_shows_the_sandbox_section() {
    crate::isolated::alone!(doctor_shows_the_sandbox_section);
    let temp = tempfile::tempdir().unwrap();
    let out = fettle_command(
        &["doctor", "--no-probe", temp.path().to_str().unwrap()],
        &temp.path().join("cache"),
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("sandbox (agent.sandbox = \"auto\"):"),
        "{text}"
    );
    for line in [
        "user namespace",
        "PID namespace",
        "Landlock",
        "enforced:",
        "not enforced:",
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
}

/// Where the system lacks the sandbox (simulated with
/// `FETTLE_SANDBOX_DISABLE`), `auto` says so once and runs the task with
/// what there is; `workspace` refuses to run.
#[test]
fn auto_falls_back_and_says_so_once_workspace_fails_closed() {
    crate::isolated::alone!(auto_falls_back_and_says_so_once_workspace_fails_closed);
    for (disable, mode, expect) in [
        ("namespaces,landlock", "auto", "supports no sandbox"),
        (
            "namespaces",
            "auto",
            "partial on this system (no user namespaces)",
        ),
        (
            "namespaces",
            "workspace",
            "needs user namespaces and Landlock",
        ),
    ] {
        let temp = tempfile::tempdir().unwrap();
        let ws = temp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let mock = Mock::start(Script::from_json(r#"{"responses": []}"#).unwrap());
        std::fs::write(
            ws.join("fettle.toml"),
            mock.config(&format!("sandbox = \"{mode}\"")),
        )
        .unwrap();
        let out = fettle_command(
            &["fix", "--json", "--test", "true", ws.to_str().unwrap()],
            &temp.path().join("cache"),
        )
        .env("FETTLE_SANDBOX_DISABLE", disable)
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines = stderr
            .lines()
            .filter(|l| l.starts_with("fettle: ") && l.contains(expect));
        assert_eq!(lines.count(), 1, "{disable}/{mode}:\n{stderr}");
        if mode == "workspace" {
            assert_eq!(out.status.code(), Some(2), "{stderr}");
        } else {
            let result: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            assert_eq!(result["status"], "success", "{result:#}\n{stderr}");
        }
    }
}
