//! Argument shapes real clients send: Lua's `{}` arrives as `[]`, "no
//! params" as `null` or nothing. Where every field is optional they all
//! mean "the defaults"; a wrong shape gets an error that says what was
//! expected.
use serde_json::{json, Value};

use super::harness::{Lsp, Workspace};

fn started(ws: &Workspace) -> Lsp {
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    lsp
}

/// Sends a request with exactly this `params` member (`None`: no member).
fn raw_request(lsp: &mut Lsp, id: &str, method: &str, params: Option<Value>) -> Value {
    let mut message = json!({ "jsonrpc": "2.0", "id": id, "method": method });
    if let Some(params) = params {
        message["params"] = params;
    }
    lsp.send(&message);
    lsp.response(&json!(id))
}

fn error_message(response: &Value) -> String {
    response["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn undo_accepts_every_way_of_saying_no_argument() {
    let ws = Workspace::new(&[("src/lib.rs", "pub fn f() {}\n")]);
    let mut lsp = started(&ws);
    let shapes = [
        ("objects", Some(json!([{}]))),
        ("lua-empty-table", Some(json!([[]]))),
        ("none", Some(json!([]))),
        ("null-argument", Some(json!([null]))),
        ("null", Some(Value::Null)),
        ("absent", None),
    ];
    for (id, arguments) in shapes {
        let mut params = json!({ "command": "fettle.undo" });
        if let Some(arguments) = arguments {
            params["arguments"] = arguments;
        }
        let response = raw_request(&mut lsp, id, "workspace/executeCommand", Some(params));
        // Accepted: the command ran and found nothing to undo.
        let message = error_message(&response);
        assert!(
            message.contains("no task to undo"),
            "{id}: {response}\n{}",
            lsp.stderr()
        );
    }
    // Cancel with Lua's `{}` too: nothing is running, nothing to say.
    let response = raw_request(
        &mut lsp,
        "cancel",
        "workspace/executeCommand",
        Some(json!({ "command": "fettle.cancel", "arguments": [[]] })),
    );
    assert_eq!(response["result"], Value::Null, "{response}");
    assert!(response.get("error").is_none(), "{response}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_wrong_argument_shape_says_what_was_expected() {
    let ws = Workspace::new(&[]);
    let mut lsp = started(&ws);
    for (id, arguments) in [
        ("string", json!(["t1"])),
        ("list", json!([["t1"]])),
        ("type", json!([{ "taskId": 7 }])),
    ] {
        let response = raw_request(
            &mut lsp,
            id,
            "workspace/executeCommand",
            Some(json!({ "command": "fettle.undo", "arguments": arguments })),
        );
        assert_eq!(response["error"]["code"], -32602, "{response}");
        let message = error_message(&response);
        assert!(
            message
                .contains(r#"fettle.undo expects [{"taskId": "…", "force": true}] or no argument"#),
            "{id}: {message}"
        );
    }
    // A required argument missing: chat names its shape, and `message`.
    let response = raw_request(
        &mut lsp,
        "chat",
        "workspace/executeCommand",
        Some(json!({ "command": "fettle.chat", "arguments": [{}] })),
    );
    let message = error_message(&response);
    assert!(
        message.contains(r#"fettle.chat expects [{"message": "…""#),
        "{message}"
    );
    let response = raw_request(
        &mut lsp,
        "chat-field",
        "workspace/executeCommand",
        Some(json!({ "command": "fettle.chat", "arguments": [{ "uri": "file:///x" }] })),
    );
    assert!(error_message(&response).contains("message"), "{response}");
    // A field that is not one of the command's: refused, not taken as
    // "no file" (which would start a whole-workspace task).
    for (id, command, arguments) in [
        (
            "fix-type",
            "fettle.fixDiagnostics",
            json!([{ "textDocument": 7 }]),
        ),
        (
            "fix-extra",
            "fettle.fixDiagnostics",
            json!([{ "uri": "file:///x.py", "range": 3 }]),
        ),
        (
            "chat-extra",
            "fettle.chat",
            json!([{ "message": "hi", "file": "x.py" }]),
        ),
        ("cancel-extra", "fettle.cancel", json!([{ "task": "t1" }])),
        (
            "undo-extra",
            "fettle.undo",
            json!([{ "taskId": "t1", "forced": true }]),
        ),
    ] {
        let response = raw_request(
            &mut lsp,
            id,
            "workspace/executeCommand",
            Some(json!({ "command": command, "arguments": arguments })),
        );
        assert_eq!(response["error"]["code"], -32602, "{id}: {response}");
        assert!(
            error_message(&response).contains(&format!("{command} expects")),
            "{id}: {response}"
        );
    }
    // The session goes on.
    assert!(lsp.request("fettle/stats", json!({})).is_ok());
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn stats_takes_null_empty_or_absent_params() {
    let ws = Workspace::new(&[]);
    let mut lsp = started(&ws);
    for (id, params) in [
        ("absent", None),
        ("null", Some(Value::Null)),
        ("array", Some(json!([]))),
        ("object", Some(json!({}))),
    ] {
        let response = raw_request(&mut lsp, id, "fettle/stats", params);
        assert!(response.get("error").is_none(), "{id}: {response}");
        assert!(response["result"].is_object(), "{id}: {response}");
    }
    let response = raw_request(&mut lsp, "string", "fettle/stats", Some(json!("all")));
    let message = error_message(&response);
    assert!(
        message.contains("fettle/stats takes no parameters"),
        "{message}"
    );
    assert!(lsp.shutdown_and_exit().success());
}
