//! The agent over LSP: `fettle.chat` runs the repair loop against the mock
//! model, reports `fettle/taskEvent` and `$/progress`, edits open buffers
//! through versioned `workspace/applyEdit` without overwriting the user's
//! typing, can be cancelled, and `fettle.undo` restores every file.
use std::time::{Duration, Instant};

use fettle::mock::Script;
use serde_json::{json, Value};

use super::harness::{BackgroundMock, Lsp, Workspace};

/// The mock model, with what these tests ask of it.
pub(super) struct Mock(BackgroundMock);

impl std::ops::Deref for Mock {
    type Target = BackgroundMock;
    fn deref(&self) -> &BackgroundMock {
        &self.0
    }
}

impl Mock {
    pub(super) fn start(script: &str) -> Self {
        Self(BackgroundMock::start(Script::from_json(script).unwrap()))
    }

    pub(super) fn options(&self, agent: Value) -> Value {
        let mut agent_config = json!({ "model": "mock", "test_command": "python3 check.py" });
        for (k, v) in agent.as_object().unwrap() {
            agent_config[k] = v.clone();
        }
        json!({
            "models": { "mock": {
                "provider": "openai", "base_url": format!("{}/v1", self.server.url()),
                "model": "mock-coder", "max_retries": 0,
            } },
            "agent": agent_config,
        })
    }
}

pub(super) const CALC: &str = "def add(a, b):\n    return a - b\n";
pub(super) const FIXED: &str = "def add(a, b):\n    return a + b\n";
pub(super) const CHECK: &str =
    "from calc import add\nassert add(2, 3) == 5, 'add(2, 3) should be 5'\n";
pub(super) const FIX_SCRIPT: &str = r#"{"responses": [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
    {"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "search": "    return a - b\n", "replace": "    return a + b\n"}}]},
    {"text": "Fixed `add`."}
]}"#;

pub(super) fn workspace() -> Workspace {
    Workspace::new(&[("calc.py", CALC), ("check.py", CHECK)])
}

/// A server for `ws` with checkpoints in a temp dir, initialized with UTF-8
/// positions and the given options.
pub(super) fn start(ws: &Workspace, cache: &std::path::Path, options: Value) -> Lsp {
    let cache = cache.to_str().unwrap().to_owned();
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_CACHE_DIR", cache.as_str())]);
    let mut caps = Lsp::capabilities(&["utf-8"]);
    caps["window"] = json!({ "workDoneProgress": true, "showMessage": {} });
    caps["workspace"]["applyEdit"] = json!(true);
    lsp.initialize(&ws.root(), caps, Some(options));
    lsp
}

pub(super) fn chat(lsp: &mut Lsp, message: &str, extra: Value) -> Value {
    let mut arg = json!({ "message": message });
    for (k, v) in extra.as_object().unwrap() {
        arg[k] = v.clone();
    }
    lsp.send_request(
        "workspace/executeCommand",
        json!({ "command": "fettle.chat", "arguments": [arg], "workDoneToken": "agent-1" }),
    )
}

/// Waits (pumping messages) for the response to `id`, up to `secs`.
pub(super) fn response_within(lsp: &mut Lsp, id: &Value, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(r) = lsp.try_response(id) {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "no response to {id} within {secs} s\n{}",
            lsp.stderr()
        );
        lsp.pump_for(Duration::from_millis(100));
    }
}

#[test]
fn chat_repairs_a_closed_file_reports_progress_and_undo_restores_it() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(FIX_SCRIPT);
    let mut lsp = start(&ws, cache.path(), mock.options(json!({})));
    let id = chat(&mut lsp, "make check.py pass", json!({}));
    let response = response_within(&mut lsp, &id, 60);
    let result = &response["result"];
    assert_eq!(
        result["status"],
        "success",
        "{response:#}\n{}",
        lsp.stderr()
    );
    assert_eq!(result["summary"], "Fixed `add`.");
    assert_eq!(result["changedFiles"], json!([ws.uri("calc.py")]));
    assert_eq!(result["iterations"], 1);
    assert_eq!(result["toolCalls"], 2);
    assert!(
        result["diff"]
            .as_str()
            .unwrap()
            .contains("-    return a - b\n+    return a + b\n"),
        "{result:#}"
    );
    assert!(result["tokens"]["input"].as_u64().unwrap() > 0);
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), FIXED);

    let events = lsp.pending_notifications("fettle/taskEvent");
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    for kind in [
        "status",
        "verify",
        "tool_call",
        "tool_result",
        "edit",
        "text",
    ] {
        assert!(kinds.contains(&kind), "no {kind} event in {kinds:?}");
    }
    assert!(events.iter().all(|e| e["taskId"] == result["taskId"]));
    let edit = events.iter().find(|e| e["kind"] == "edit").unwrap();
    assert_eq!(edit["data"]["path"], "calc.py");
    // tower-lsp writes notifications and responses through separate
    // channels, so the progress's `end` may trail the command's response.
    let ended = |lsp: &mut Lsp| {
        lsp.pending_notifications("$/progress")
            .iter()
            .any(|p| p["token"] == "agent-1" && p["value"]["kind"] == "end")
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ended(&mut lsp) && Instant::now() < deadline {
        lsp.pump_for(Duration::from_millis(50));
    }
    let progress = lsp.pending_notifications("$/progress");
    let phases: Vec<&str> = progress
        .iter()
        .filter(|p| p["token"] == "agent-1")
        .filter_map(|p| p["value"]["kind"].as_str())
        .collect();
    assert_eq!(phases.first(), Some(&"begin"), "{phases:?}");
    assert_eq!(phases.last(), Some(&"end"), "{phases:?}");

    let undo = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.undo", "arguments": [{ "taskId": result["taskId"] }] }),
        )
        .unwrap();
    assert_eq!(undo["restored"], json!([ws.uri("calc.py")]));
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), CALC);

    // Undone again: nothing is written, and the message says so rather
    // than "restored calc.py" a second time.
    let again = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.undo", "arguments": [{ "taskId": result["taskId"] }] }),
        )
        .unwrap();
    assert_eq!(again["restored"], json!([]), "{again:#}");
    assert_eq!(again["unchanged"], json!([ws.uri("calc.py")]), "{again:#}");
    let said = lsp.notification("window/showMessage", |m| {
        m["message"]
            .as_str()
            .unwrap_or("")
            .contains("nothing to restore")
    });
    assert!(
        said["message"]
            .as_str()
            .unwrap()
            .ends_with("nothing to restore: calc.py already as before the task"),
        "{said:#}"
    );
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), CALC);
}

#[test]
fn edits_to_an_open_buffer_go_through_apply_edit_and_keep_the_users_typing() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(FIX_SCRIPT);
    let mut lsp = start(&ws, cache.path(), mock.options(json!({})));
    let uri = ws.uri("calc.py");
    lsp.open(&uri, "python", CALC);
    lsp.apply_edits = true;
    // The user types a comment just as the agent's edit arrives: unsaved
    // text in a file the task has not written yet, so the user is asked.
    lsp.type_before_next_apply = Some((uri.clone(), 0, "# typed by the user\n".to_owned()));
    lsp.approvals
        .push_back(Some("Save and continue".to_owned()));
    let id = chat(&mut lsp, "make check.py pass", json!({ "uri": uri }));
    let response = response_within(&mut lsp, &id, 60);
    assert_eq!(
        response["result"]["status"],
        "success",
        "{response:#}\n{}",
        lsp.stderr()
    );

    let want = format!("# typed by the user\n{FIXED}");
    assert_eq!(
        lsp.buffers[&uri].1, want,
        "the buffer lost the user's typing or the fix"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path("calc.py")).unwrap(),
        want,
        "disk follows the buffer"
    );
    let applies: Vec<&Value> = lsp
        .server_requests
        .iter()
        .filter(|r| r["method"] == "workspace/applyEdit")
        .collect();
    assert_eq!(
        applies.len(),
        2,
        "one stale edit, one retried: {applies:#?}"
    );
    // The retry is versioned against the buffer with the user's text, and minimal.
    let change = &applies[1]["params"]["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["version"], 2);
    let edits = change["edits"].as_array().unwrap();
    assert_eq!(edits.len(), 1);
    assert_eq!(edits[0]["range"]["start"]["line"], 2);
    assert_eq!(edits[0]["range"]["end"]["line"], 2);

    // Undo puts back the user's text as it was before the task's first
    // write (their typing, saved with consent, included), buffer and disk.
    let undo = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.undo", "arguments": [] }),
        )
        .unwrap();
    assert_eq!(undo["restored"], json!([uri]), "{undo:#}");
    let typed = format!("# typed by the user\n{CALC}");
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), typed);
    assert_eq!(lsp.buffers[&uri].1, typed);
}

/// A client that saves buffers for Fettle (`experimental.fettle.saveDocuments`).
pub(super) fn start_saving(ws: &Workspace, cache: &std::path::Path, options: Value) -> Lsp {
    let cache = cache.to_str().unwrap().to_owned();
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_CACHE_DIR", cache.as_str())]);
    let mut caps = Lsp::capabilities(&["utf-8"]);
    caps["window"] = json!({ "workDoneProgress": true, "showMessage": {} });
    caps["workspace"]["applyEdit"] = json!(true);
    caps["experimental"] = json!({ "fettle": { "saveDocuments": true } });
    lsp.initialize(&ws.root(), caps, Some(options));
    lsp.apply_edits = true;
    lsp.save_documents = true;
    lsp
}

pub(super) fn requests<'a>(lsp: &'a Lsp, method: &str) -> Vec<&'a Value> {
    lsp.server_requests
        .iter()
        .filter(|r| r["method"] == method)
        .collect()
}

const SLOW_SCRIPT: &str = r#"{"responses": [
    {"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "search": "    return a - b\n", "replace": "    return a + b\n"}}]},
    {"text": "Thinking...", "delay_ms": 30000}
]}"#;

fn wait_for_edit_event(lsp: &mut Lsp) {
    lsp.notification("fettle/taskEvent", |n| n["kind"] == "edit");
}

#[test]
fn cancelling_the_request_stops_the_task_with_a_consistent_tree() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(SLOW_SCRIPT);
    let mut lsp = start(&ws, cache.path(), mock.options(json!({})));
    let id = chat(&mut lsp, "make check.py pass", json!({}));
    wait_for_edit_event(&mut lsp);
    let started = Instant::now();
    lsp.notify("$/cancelRequest", json!({ "id": id }));
    let response = response_within(&mut lsp, &id, 10);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(response["error"]["code"], -32800, "{response:#}");
    // The edit that was applied is whole; a new task may start at once.
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), FIXED);
    let deadline = Instant::now() + Duration::from_secs(10);
    let undo = loop {
        match lsp.request(
            "workspace/executeCommand",
            json!({ "command": "fettle.undo", "arguments": [] }),
        ) {
            Ok(undo) => break undo,
            // The task may take a moment to notice the cancellation.
            Err(err) if Instant::now() < deadline && err.to_string().contains("still running") => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(err) => panic!("undo failed: {err}"),
        }
    };
    assert_eq!(undo["restored"], json!([ws.uri("calc.py")]));
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), CALC);
}

#[test]
fn fettle_cancel_ends_the_task_as_cancelled() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(SLOW_SCRIPT);
    let mut lsp = start(&ws, cache.path(), mock.options(json!({})));
    let id = chat(&mut lsp, "make check.py pass", json!({}));
    wait_for_edit_event(&mut lsp);
    // A second task is refused while one runs.
    let second = lsp.request(
        "workspace/executeCommand",
        json!({ "command": "fettle.chat", "arguments": [{ "message": "again" }] }),
    );
    assert!(second.unwrap_err().to_string().contains("still running"));
    let cancel = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.cancel", "arguments": [] }),
        )
        .unwrap();
    assert_eq!(cancel, Value::Null);
    let response = response_within(&mut lsp, &id, 10);
    assert_eq!(response["result"]["status"], "cancelled", "{response:#}");
    assert_eq!(
        response["result"]["changedFiles"],
        json!([ws.uri("calc.py")])
    );
}

#[test]
fn run_command_asks_the_user_and_respects_the_answer() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(
        r#"{"responses": [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo yes > approved.txt"}}]},
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo no > declined.txt"}}]},
            {"text": "Done."}
        ]}"#,
    );
    let mut lsp = start(
        &ws,
        cache.path(),
        mock.options(json!({ "commands": "ask", "test_command": "true" })),
    );
    lsp.approvals.push_back(Some("Run".to_owned()));
    lsp.approvals.push_back(Some("Don't run".to_owned()));
    let id = chat(&mut lsp, "create the files", json!({}));
    let response = response_within(&mut lsp, &id, 60);
    assert_eq!(
        response["result"]["status"],
        "success",
        "{response:#}\n{}",
        lsp.stderr()
    );
    assert!(ws.path("approved.txt").exists());
    assert!(!ws.path("declined.txt").exists());
    let asks: Vec<&Value> = lsp
        .server_requests
        .iter()
        .filter(|r| r["method"] == "window/showMessageRequest")
        .collect();
    assert_eq!(asks.len(), 2);
    assert!(asks[0]["params"]["message"]
        .as_str()
        .unwrap()
        .contains("echo yes > approved.txt"));
    let third = mock.server.requests()[2].body.to_string();
    assert!(third.contains("declined"), "{third}");
}

#[test]
fn bad_arguments_get_precise_errors_and_the_server_stays_up() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(r#"{"responses": []}"#);
    let mut lsp = start(&ws, cache.path(), mock.options(json!({})));
    let err = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.chat", "arguments": [{ "msg": "x" }] }),
        )
        .unwrap_err();
    assert!(err.to_string().contains("message"), "{err}");
    let err = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.undo", "arguments": [] }),
        )
        .unwrap_err();
    assert!(err.to_string().contains("no task to undo"), "{err}");
    let caps = lsp.request(
        "workspace/executeCommand",
        json!({ "command": "fettle.cancel", "arguments": [] }),
    );
    assert_eq!(caps.unwrap(), Value::Null);
}

#[test]
fn the_progress_cancel_button_cancels_the_task() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(SLOW_SCRIPT);
    let mut lsp = start(&ws, cache.path(), mock.options(json!({})));
    let id = chat(&mut lsp, "make check.py pass", json!({}));
    let begin = lsp.notification("$/progress", |p| {
        p["token"] == "agent-1" && p["value"]["kind"] == "begin"
    });
    assert_eq!(begin["value"]["cancellable"], true, "{begin:#}");
    wait_for_edit_event(&mut lsp);
    lsp.notify(
        "window/workDoneProgress/cancel",
        json!({ "token": "agent-1" }),
    );
    let response = response_within(&mut lsp, &id, 10);
    assert_eq!(response["result"]["status"], "cancelled", "{response:#}");
}

#[test]
fn fix_diagnostics_repairs_a_syntax_error_in_the_open_file() {
    let ws = Workspace::new(&[("geo.py", "def area(w, h:\n    return w * h\n")]);
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(
        r#"{"responses": [
            {"tool_calls": [{"name": "diagnostics", "arguments": {"path": "geo.py"}}]},
            {"tool_calls": [{"name": "edit", "arguments": {"path": "geo.py", "search": "def area(w, h:\n", "replace": "def area(w, h):\n"}}]},
            {"text": "Closed the parameter list."}
        ]}"#,
    );
    let mut lsp = start(
        &ws,
        cache.path(),
        mock.options(json!({ "test_command": "true" })),
    );
    let uri = ws.uri("geo.py");
    lsp.open(&uri, "python", "def area(w, h:\n    return w * h\n");
    lsp.apply_edits = true;
    let id = lsp.send_request(
        "workspace/executeCommand",
        json!({ "command": "fettle.fixDiagnostics", "arguments": [{ "uri": uri }] }),
    );
    let response = response_within(&mut lsp, &id, 60);
    assert_eq!(
        response["result"]["status"],
        "success",
        "{response:#}\n{}",
        lsp.stderr()
    );
    assert_eq!(lsp.buffers[&uri].1, "def area(w, h):\n    return w * h\n");
    let bodies: Vec<String> = mock
        .server
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    // The model was told about the error up front, and what the file looks like.
    assert!(bodies[0].contains("geo.py:1"), "{}", bodies[0]);
    assert!(
        bodies[0].contains("The user is looking at"),
        "{}",
        bodies[0]
    );
    assert!(
        bodies[1].contains("geo.py:1:"),
        "the diagnostics tool reported the error: {}",
        bodies[1]
    );
}

#[test]
fn shutdown_cancels_the_running_task() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(SLOW_SCRIPT);
    let mut lsp = start(&ws, cache.path(), mock.options(json!({})));
    let id = chat(&mut lsp, "make check.py pass", json!({}));
    wait_for_edit_event(&mut lsp);
    let shutdown = lsp.send_request("shutdown", Value::Null);
    let response = response_within(&mut lsp, &id, 10);
    assert_eq!(response["result"]["status"], "cancelled", "{response:#}");
    assert!(response_within(&mut lsp, &shutdown, 10)
        .get("error")
        .is_none());
}

/// Giving up puts an open file back through the editor, which saves it:
/// buffer and disk agree on the original, and nothing is left to tell.
#[test]
fn giving_up_restores_an_open_buffer_and_the_editor_saves_it() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(
        r#"{"responses": [
            {"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "search": "    return a - b\n", "replace": "    return a * b\n"}}]},
            {"text": "Tried."}
        ]}"#,
    );
    let mut lsp = start_saving(
        &ws,
        cache.path(),
        mock.options(json!({ "max_iterations": 1 })),
    );
    let uri = ws.uri("calc.py");
    lsp.open(&uri, "python", CALC);
    let id = chat(&mut lsp, "make check.py pass", json!({ "uri": uri }));
    let response = response_within(&mut lsp, &id, 60);
    let result = &response["result"];
    assert_eq!(
        result["status"],
        "gave_up",
        "{response:#}\n{}",
        lsp.stderr()
    );
    assert_eq!(lsp.buffers[&uri].1, CALC);
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), CALC);
    assert_eq!(result["editorNotes"], json!([]), "{result:#}");
    // Saved by the editor after the edit, and after the rollback.
    assert!(requests(&lsp, "fettle/saveDocuments").len() >= 2);
}

/// The strategies from the editor, through `[agent]` keys: the plan is
/// shown in a message request and followed once approved, two candidates
/// are drafted and tested in copies (the open file is edited only by the
/// chosen one), and the reviewer approves before success; the result says
/// which plan, candidate and verdict.
#[test]
fn strategies_from_the_editor_plan_approved_candidates_chosen_and_reviewed() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let script = r#"{"responses": [
        {"text": "1. In calc.py, fix `add` to add.\n2. check.py should pass."},
        {"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "search": "    return a - b\n", "replace": "    return a * b\n"}}]},
        {"text": "Multiplied."},
        {"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "search": "    return a - b\n", "replace": "    return a + b\n"}}]},
        {"text": "Fixed `add`."},
        {"text": "APPROVE"}
    ]}"#;
    let mock = Mock::start(script);
    let options = mock.options(json!({
        "plan": true, "plan_approval": true, "candidates": 2, "review": true,
        // `a - b` → `a + b` is a mechanical change: found before the model's
        // candidates, which this test is about.
        "mutants": false,
    }));
    let mut lsp = start(&ws, cache.path(), options);
    let uri = ws.uri("calc.py");
    lsp.open(&uri, "python", CALC);
    lsp.apply_edits = true;
    lsp.approvals.push_back(Some("Follow the plan".to_owned()));
    let id = chat(&mut lsp, "make check.py pass", json!({}));
    let response = response_within(&mut lsp, &id, 90);
    let result = &response["result"];
    assert_eq!(
        result["status"],
        "success",
        "{response:#}\n{}",
        lsp.stderr()
    );
    let asks = requests(&lsp, "window/showMessageRequest");
    assert_eq!(asks.len(), 1, "{asks:#?}");
    let question = asks[0]["params"]["message"].as_str().unwrap();
    assert!(
        question.contains("Fettle's agent plans to:\n1. In calc.py, fix `add` to add."),
        "{question}"
    );
    assert_eq!(
        result["plan"]["steps"][0],
        "1. In calc.py, fix `add` to add."
    );
    let candidates = result["candidates"].as_array().unwrap();
    let chosen = candidates.last().unwrap();
    assert_eq!(
        (chosen["candidate"].as_u64(), chosen["chosen"].as_bool()),
        (Some(2), Some(true)),
        "{candidates:#?}"
    );
    assert_eq!(result["review"][0]["approved"], true, "{result:#}");
    assert_eq!(lsp.buffers[&uri].1, FIXED);
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), FIXED);
    // The first candidate's edit never reached the buffer: one applyEdit.
    let edits = requests(&lsp, "workspace/applyEdit");
    assert_eq!(edits.len(), 1, "{edits:#?}");
}
