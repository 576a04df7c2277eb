//! The end of the client's input ends the server, whatever is pending: a
//! `workspace/configuration` the client never answers, an approval nobody
//! gives, a task's command still running (which must die with the server).
use std::time::{Duration, Instant};

use fettle::mock::Script;
use serde_json::{json, Value};

use super::harness::{BackgroundMock, Lsp, Workspace};

fn wait_for_server_request(lsp: &mut Lsp, method: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !lsp.server_requests.iter().any(|r| r["method"] == method) {
        assert!(
            Instant::now() < deadline,
            "no {method} request\n{}",
            lsp.stderr()
        );
        lsp.pump_for(Duration::from_millis(100));
    }
}

#[test]
fn eof_while_workspace_configuration_is_unanswered_exits() {
    let ws = Workspace::new(&[("src/lib.rs", "pub fn alive() {}\n")]);
    let mut lsp = Lsp::spawn();
    lsp.unanswered.push("workspace/configuration");
    let mut caps = Lsp::capabilities(&["utf-16"]);
    caps["workspace"]["configuration"] = json!(true);
    lsp.initialize(&ws.root(), caps, None);
    wait_for_server_request(&mut lsp, "workspace/configuration");
    lsp.close_stdin();
    let status = lsp.wait_exit();
    // No shutdown came first: exit code 1, as the spec asks.
    assert_eq!(status.code(), Some(1));
}

/// A server whose model asks to run `command` (approved or not by the test).
fn agent(ws: &Workspace, cache: &std::path::Path, mock: &BackgroundMock) -> Lsp {
    let cache = cache.to_str().unwrap().to_owned();
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_CACHE_DIR", cache.as_str())]);
    let mut caps = Lsp::capabilities(&["utf-8"]);
    caps["window"] = json!({ "workDoneProgress": true, "showMessage": {} });
    caps["workspace"]["applyEdit"] = json!(true);
    let options = json!({
        "models": { "mock": {
            "provider": "openai", "base_url": format!("{}/v1", mock.server.url()),
            "model": "mock-coder", "max_retries": 0,
        } },
        "agent": { "model": "mock", "commands": "ask", "test_command": "true" },
    });
    lsp.initialize(&ws.root(), caps, Some(options));
    lsp
}

fn run_command_script(command: &str) -> BackgroundMock {
    let script = json!({ "responses": [
        { "tool_calls": [ { "name": "run_command", "arguments": { "command": command } } ] },
        { "text": "Done." },
    ] });
    BackgroundMock::start(Script::from_json(&script.to_string()).unwrap())
}

fn chat(lsp: &mut Lsp) -> Value {
    lsp.send_request(
        "workspace/executeCommand",
        json!({ "command": "fettle.chat", "arguments": [ { "message": "run it" } ],
                "workDoneToken": "agent-1" }),
    )
}

#[test]
fn eof_while_an_approval_is_pending_exits() {
    let ws = Workspace::new(&[("a.txt", "a\n")]);
    let cache = tempfile::tempdir().unwrap();
    let mock = run_command_script("echo hi");
    let mut lsp = agent(&ws, cache.path(), &mock);
    lsp.unanswered.push("window/showMessageRequest");
    chat(&mut lsp);
    wait_for_server_request(&mut lsp, "window/showMessageRequest");
    lsp.close_stdin();
    assert_eq!(lsp.wait_exit().code(), Some(1));
}

/// Live (not zombie) processes whose command line contains `marker`.
fn live_processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmdline).contains(marker) {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        if !status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'))
        {
            found.push(dir.display().to_string());
        }
    }
    found
}

#[test]
fn eof_during_a_long_command_exits_and_kills_the_command() {
    let ws = Workspace::new(&[("a.txt", "a\n")]);
    let cache = tempfile::tempdir().unwrap();
    // A unique sleep length marks this test's command in /proc.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let seconds = format!("86{:03}.{}", std::process::id() % 1000, nanos);
    let mock = run_command_script(&format!("sleep {seconds}"));
    let mut lsp = agent(&ws, cache.path(), &mock);
    lsp.approvals.push_back(Some("Run".to_owned()));
    chat(&mut lsp);
    let deadline = Instant::now() + Duration::from_secs(60);
    while live_processes_with(&seconds).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the command never started\n{}",
            lsp.stderr()
        );
        lsp.pump_for(Duration::from_millis(100));
    }
    lsp.close_stdin();
    assert_eq!(lsp.wait_exit().code(), Some(1));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = live_processes_with(&seconds);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the command outlived the server: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
