//! The agent over LSP and the user's buffers: unsaved text saved only
//! with the editor's consent or left alone, undo refusing what changed
//! after the task, follow-ups in one conversation, an editor that cannot
//! save told what to reload.
use std::time::Duration;

use serde_json::json;

use super::agent::{
    chat, requests, response_within, start, start_saving, workspace, Mock, CALC, FIXED, FIX_SCRIPT,
};

const NOTE: &str = "# unsaved note\n";

/// Unsaved text in the file the agent must write: the user is asked; "Save
/// and continue" has the editor save it before the checkpoint takes the
/// original, the agent edits the buffer, the editor saves again, and buffer
/// and disk agree. Undo gives back the user's text, on disk and in the buffer.
#[test]
fn unsaved_buffer_is_saved_with_consent_by_the_editor_and_undo_keeps_it() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(FIX_SCRIPT);
    let mut lsp = start_saving(&ws, cache.path(), mock.options(json!({})));
    let uri = ws.uri("calc.py");
    lsp.open(&uri, "python", &format!("{NOTE}{CALC}"));
    lsp.approvals
        .push_back(Some("Save and continue".to_owned()));
    let id = chat(&mut lsp, "make check.py pass", json!({ "uri": uri }));
    let response = response_within(&mut lsp, &id, 60);
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
        question.contains("calc.py has unsaved changes"),
        "{question}"
    );
    let titles: Vec<&str> = asks[0]["params"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["title"].as_str())
        .collect();
    assert_eq!(titles, ["Save and continue", "Leave this file alone"]);
    // Saved by the editor: once for the user's text, once after the edit.
    let saves = requests(&lsp, "fettle/saveDocuments");
    assert!(saves.len() >= 2, "{saves:#?}");
    assert!(saves.iter().all(|s| s["params"]["uris"] == json!([uri])));
    let want = format!("{NOTE}{FIXED}");
    assert_eq!(lsp.buffers[&uri].1, want);
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), want);
    assert_eq!(result["editorNotes"], json!([]), "{result:#}");
    // The diff is the agent's change, not the user's note.
    let diff = result["diff"].as_str().unwrap();
    assert!(!diff.contains("+# unsaved note"), "{diff}");

    let before = requests(&lsp, "fettle/saveDocuments").len();
    let undo = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.undo", "arguments": [] }),
        )
        .unwrap();
    assert_eq!(undo["restored"], json!([uri]), "{undo:#}");
    let back = format!("{NOTE}{CALC}");
    assert_eq!(lsp.buffers[&uri].1, back);
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), back);
    assert!(
        requests(&lsp, "fettle/saveDocuments").len() > before,
        "undo did not ask the editor to save"
    );
    // (Notifications and responses may cross on the wire: wait for it.)
    lsp.notification("window/showMessage", |m| {
        m["message"]
            .as_str()
            .unwrap_or("")
            .contains("restored calc.py")
    });
}

/// "Leave this file alone" (or `agent.unsaved_buffers = "skip"`, without
/// asking): the file is not written, the model is told why, and the result
/// names the file.
#[test]
fn unsaved_buffer_left_alone_is_not_written_and_the_model_is_told() {
    for (policy, answer) in [("ask", Some("Leave this file alone")), ("skip", None)] {
        let ws = workspace();
        let cache = tempfile::tempdir().unwrap();
        let mock = Mock::start(FIX_SCRIPT);
        let mut lsp = start_saving(
            &ws,
            cache.path(),
            mock.options(json!({ "unsaved_buffers": policy, "max_iterations": 1 })),
        );
        let uri = ws.uri("calc.py");
        let buffer = format!("{NOTE}{CALC}");
        lsp.open(&uri, "python", &buffer);
        if let Some(answer) = answer {
            lsp.approvals.push_back(Some(answer.to_owned()));
        }
        let id = chat(&mut lsp, "make check.py pass", json!({ "uri": uri }));
        let response = response_within(&mut lsp, &id, 60);
        let result = &response["result"];
        assert_ne!(result["status"], "success", "{policy}: {response:#}");
        assert_eq!(
            std::fs::read_to_string(ws.path("calc.py")).unwrap(),
            CALC,
            "{policy}"
        );
        assert_eq!(lsp.buffers[&uri].1, buffer, "{policy}");
        assert_eq!(requests(&lsp, "fettle/saveDocuments").len(), 0, "{policy}");
        assert_eq!(
            requests(&lsp, "window/showMessageRequest").len(),
            usize::from(policy == "ask"),
            "{policy}"
        );
        let third = mock.server.requests()[2].body.to_string();
        assert!(
            third.contains("calc.py is open in the editor with unsaved changes")
                && third.contains("Do not edit calc.py"),
            "{policy}: {third}"
        );
        let notes = result["editorNotes"].as_array().unwrap();
        assert!(
            notes
                .iter()
                .any(|n| n["kind"] == "left_alone" && n["uri"] == json!(uri)),
            "{policy}: {result:#}"
        );
        assert_eq!(result["changedFiles"], json!([]), "{policy}");
    }
}

/// `fettle.chat` with `"continue": true`: the follow-up's model is told the
/// earlier request, how it ended and what it changed, and the result counts
/// the conversation's turns; without it a chat starts a new conversation.
#[test]
fn a_chat_follow_up_continues_the_conversation() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let script = r#"{"responses": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "search": "    return a - b\n", "replace": "    return a + b\n"}}]},
        {"text": "Fixed `add`."},
        {"text": "It adds its two arguments.", "repeat": true}
    ]}"#;
    let mock = Mock::start(script);
    let mut lsp = start(&ws, cache.path(), mock.options(json!({})));
    let id = chat(&mut lsp, "make check.py pass", json!({}));
    let first = response_within(&mut lsp, &id, 60);
    assert_eq!(first["result"]["status"], "success", "{first:#}");
    assert_eq!(first["result"]["conversation"]["turns"], 1, "{first:#}");
    let id = chat(
        &mut lsp,
        "now say what add does",
        json!({ "continue": true }),
    );
    let second = response_within(&mut lsp, &id, 60);
    assert_eq!(second["result"]["conversation"]["turns"], 2, "{second:#}");
    let bodies: Vec<String> = mock
        .server
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    let told = bodies
        .iter()
        .find(|b| b.contains("now say what add does"))
        .expect("the follow-up's request");
    assert!(
        told.contains("The user asked: make check.py pass")
            && told.contains("The task ended: success")
            && told.contains("+    return a + b"),
        "{told}"
    );
    let id = chat(&mut lsp, "something new", json!({}));
    let third = response_within(&mut lsp, &id, 60);
    assert_eq!(third["result"]["conversation"]["turns"], 1, "{third:#}");
    let bodies: Vec<String> = mock
        .server
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    let fresh = bodies.iter().find(|b| b.contains("something new")).unwrap();
    assert!(
        !fresh.contains("This request follows earlier ones"),
        "{fresh}"
    );
}

/// A model that keeps editing the one file the user left alone: the task
/// stops after two such attempts (not all eight), and says why and what to
/// do, instead of spending its whole budget on refused edits.
#[test]
fn a_task_whose_every_change_is_to_a_file_left_alone_stops() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let attempt = [
        json!({"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "search": "    return a - b\n", "replace": "    return a + b\n"}}]}),
        json!({"text": "Fixed `add`."}),
    ];
    let script = json!({ "responses": attempt.iter().cycle().take(16).collect::<Vec<_>>() });
    let mock = Mock::start(&script.to_string());
    let mut lsp = start_saving(
        &ws,
        cache.path(),
        mock.options(json!({ "unsaved_buffers": "skip", "max_iterations": 8 })),
    );
    let uri = ws.uri("calc.py");
    lsp.open(&uri, "python", &format!("{NOTE}{CALC}"));
    let id = chat(&mut lsp, "make check.py pass", json!({ "uri": uri }));
    let response = response_within(&mut lsp, &id, 60);
    let result = &response["result"];
    assert_eq!(result["status"], "gave_up", "{response:#}");
    assert_eq!(result["iterations"], 2, "{response:#}");
    let summary = result["summary"].as_str().unwrap();
    let first = summary.lines().next().unwrap();
    assert!(
        first.contains("every change the model tried was to calc.py")
            && summary.contains("Next: save calc.py in the editor"),
        "{summary}"
    );
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), CALC);
}

/// Undo never discards a change made after the task: typing in the buffer
/// (unsaved) makes it refuse that file, named, touching neither buffer nor
/// disk; `force` restores it.
#[test]
fn undo_refuses_a_buffer_changed_after_the_task_unless_forced() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(FIX_SCRIPT);
    let mut lsp = start_saving(&ws, cache.path(), mock.options(json!({})));
    let uri = ws.uri("calc.py");
    lsp.open(&uri, "python", CALC);
    let id = chat(&mut lsp, "make check.py pass", json!({ "uri": uri }));
    let response = response_within(&mut lsp, &id, 60);
    assert_eq!(response["result"]["status"], "success", "{response:#}");
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), FIXED);
    // The user keeps working, and does not save.
    lsp.type_text(&uri, 0, "# later\n");
    lsp.pump_for(Duration::from_millis(200));
    let undo = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.undo", "arguments": [] }),
        )
        .unwrap();
    assert_eq!(undo["restored"], json!([]), "{undo:#}");
    assert_eq!(
        undo["skipped"],
        json!([{ "uri": uri, "reason": "changed in the editor since the task" }])
    );
    assert_eq!(lsp.buffers[&uri].1, format!("# later\n{FIXED}"));
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), FIXED);
    lsp.notification("window/showMessage", |m| {
        let text = m["message"].as_str().unwrap_or("");
        text.contains("calc.py (changed in the editor since the task)") && text.contains("force")
    });

    let undo = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.undo", "arguments": [{ "force": true }] }),
        )
        .unwrap();
    assert_eq!(undo["restored"], json!([uri]), "{undo:#}");
    assert_eq!(lsp.buffers[&uri].1, CALC);
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), CALC);
}

/// The same for a change on disk after the task (the file is not open).
#[test]
fn undo_refuses_a_file_changed_on_disk_after_the_task_unless_forced() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(FIX_SCRIPT);
    let mut lsp = start(&ws, cache.path(), mock.options(json!({})));
    let id = chat(&mut lsp, "make check.py pass", json!({}));
    let response = response_within(&mut lsp, &id, 60);
    assert_eq!(response["result"]["status"], "success", "{response:#}");
    let later = format!("{FIXED}# later\n");
    std::fs::write(ws.path("calc.py"), &later).unwrap();
    let undo = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.undo", "arguments": [] }),
        )
        .unwrap();
    assert_eq!(
        undo["skipped"],
        json!([{ "uri": ws.uri("calc.py"), "reason": "changed on disk since the task" }])
    );
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), later);
    let undo = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.undo", "arguments": [{ "force": true }] }),
        )
        .unwrap();
    assert_eq!(undo["restored"], json!([ws.uri("calc.py")]), "{undo:#}");
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), CALC);
}

/// An editor that cannot save (no capability): Fettle writes the disk
/// itself, and the result and a message say which buffer is still marked
/// modified and what to do.
#[test]
fn an_editor_that_cannot_save_is_told_which_buffers_to_reload() {
    let ws = workspace();
    let cache = tempfile::tempdir().unwrap();
    let mock = Mock::start(FIX_SCRIPT);
    let mut lsp = start(&ws, cache.path(), mock.options(json!({})));
    let uri = ws.uri("calc.py");
    lsp.open(&uri, "python", CALC);
    lsp.apply_edits = true;
    let id = chat(&mut lsp, "make check.py pass", json!({ "uri": uri }));
    let response = response_within(&mut lsp, &id, 60);
    let result = &response["result"];
    assert_eq!(result["status"], "success", "{response:#}");
    assert_eq!(requests(&lsp, "fettle/saveDocuments").len(), 0);
    assert_eq!(std::fs::read_to_string(ws.path("calc.py")).unwrap(), FIXED);
    assert_eq!(lsp.buffers[&uri].1, FIXED);
    let notes = result["editorNotes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{result:#}");
    assert_eq!(notes[0]["uri"], json!(uri));
    assert_eq!(notes[0]["kind"], "not_saved_by_editor");
    lsp.notification("window/showMessage", |m| {
        m["message"]
            .as_str()
            .unwrap_or("")
            .contains("calc.py: the editor did not save")
    });
}
