use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::{Lsp, Workspace};

fn hooked() -> (Workspace, Lsp) {
    let ws = Workspace::new(&[("src/lib.rs", "pub fn alive() {}\n")]);
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_TEST_HOOKS", "1")]);
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    (ws, lsp)
}

fn still_alive(lsp: &mut Lsp) {
    assert!(
        lsp.request("workspace/symbol", json!({ "query": "" }))
            .is_ok(),
        "server stopped answering"
    );
}

#[test]
fn malformed_json_gets_a_parse_error_and_the_server_stays_up() {
    let (_ws, mut lsp) = hooked();
    let body = b"{\"jsonrpc\": \"2.0\", \"id\": 99, \"method\": ";
    let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    framed.extend_from_slice(body);
    lsp.send_raw(&framed);
    let response = lsp.response(&Value::Null);
    assert_eq!(response["error"]["code"], -32700, "{response}");
    still_alive(&mut lsp);
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_panicking_handler_answers_internal_error_and_the_server_stays_up() {
    let (_ws, mut lsp) = hooked();
    let error = lsp.request("fettle/debug/panic", json!({})).unwrap_err();
    assert_eq!(error["code"], -32603, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("deliberate panic"),
        "{error}"
    );
    still_alive(&mut lsp);
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_cancelled_request_answers_request_cancelled_promptly() {
    let (_ws, mut lsp) = hooked();
    let started = Instant::now();
    let id = lsp.send_request("fettle/debug/sleep", json!({ "ms": 20_000 }));
    lsp.notify("$/cancelRequest", json!({ "id": id }));
    let response = lsp.response(&id);
    assert_eq!(response["error"]["code"], -32800, "{response}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "cancellation was not prompt"
    );
    still_alive(&mut lsp);
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn concurrent_requests_are_each_answered_once() {
    let (_ws, mut lsp) = hooked();
    let ids: Vec<Value> = (0..20)
        .map(|i| lsp.send_request("fettle/debug/sleep", json!({ "ms": (20 - i) * 5 })))
        .collect();
    for id in &ids {
        let response = lsp.response(id);
        assert!(response.get("result").is_some(), "{response}");
    }
    // The harness fails the test if any id is answered twice; give stragglers a moment.
    std::thread::sleep(Duration::from_millis(200));
    still_alive(&mut lsp);
    assert!(lsp.shutdown_and_exit().success());
}

/// A handler blocked on a thread (as an agent's fsync'd write blocks one)
/// does not hold up the others: the server runs one async worker, which
/// `runtime::blocking` hands on.
#[test]
fn a_handler_blocking_a_thread_does_not_hold_up_other_requests() {
    let (_ws, mut lsp) = hooked();
    let sleeping = lsp.send_request(
        "fettle/debug/sleep",
        json!({ "ms": 5_000, "blocking": true }),
    );
    // Give the sleep its head start.
    std::thread::sleep(Duration::from_millis(300));
    still_alive(&mut lsp);
    assert!(
        lsp.try_response(&sleeping).is_none(),
        "the blocking handler had finished before the other request was answered"
    );
    let response = lsp.response(&sleeping);
    assert_eq!(response["result"]["slept_ms"], 5_000, "{response}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn unknown_methods_get_method_not_found() {
    let (_ws, mut lsp) = hooked();
    let error = lsp.request("fettle/noSuchThing", json!({})).unwrap_err();
    assert_eq!(error["code"], -32601, "{error}");
    // Unknown `$/` notifications are ignored silently, as the spec asks.
    lsp.notify("$/noSuchNotification", json!({}));
    still_alive(&mut lsp);
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn document_symbol_for_an_unknown_uri_is_a_precise_error() {
    let (ws, mut lsp) = hooked();
    let uri = ws.uri("does/not/exist.rs");
    let error = lsp
        .request(
            "textDocument/documentSymbol",
            json!({ "textDocument": { "uri": uri } }),
        )
        .unwrap_err();
    assert_eq!(error["code"], -32602, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("not open") && message.contains("exist.rs"),
        "{message}"
    );
    still_alive(&mut lsp);
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn changes_for_unknown_documents_and_stale_versions_are_ignored() {
    let (ws, mut lsp) = hooked();
    let uri = ws.uri("src/main.rs");
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": ws.uri("nope.rs"), "version": 2 },
                "contentChanges": [ { "text": "fn x() {}" } ] }),
    );
    lsp.open(&uri, "rust", "fn first() {}\n");
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 5 }, "contentChanges": [ { "text": "fn fifth() {}\n" } ] }),
    );
    // Older than 5: must be ignored.
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 3 }, "contentChanges": [ { "text": "fn third() {}\n" } ] }),
    );
    let names = lsp.symbol_names(&uri);
    assert_eq!(names, ["fifth"]);
    assert!(lsp.stderr_says("didChange for a document that is not open"));
    assert!(lsp.stderr_says("stale change"));
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn out_of_range_positions_are_clamped_not_fatal() {
    let (ws, mut lsp) = hooked();
    let uri = ws.uri("src/clamp.rs");
    lsp.open(&uri, "rust", "fn a() {}\n");
    // A range far past the end: clamped to the end of the document, so this appends.
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 },
                "contentChanges": [ { "range": { "start": { "line": 99, "character": 99 }, "end": { "line": 120, "character": 0 } },
                                      "text": "fn b() {}\n" } ] }),
    );
    let names = lsp.symbol_names(&uri);
    assert_eq!(names, ["a", "b"]);
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn bad_headers_and_non_jsonrpc_values_are_errors_not_crashes() {
    let (_ws, mut lsp) = hooked();
    // A header block without Content-Length.
    lsp.send_raw(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n");
    let response = lsp.response(&Value::Null);
    assert_eq!(response["error"]["code"], -32700, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Content-Length"),
        "{response}"
    );
    still_alive(&mut lsp);
    // Valid JSON that is not JSON-RPC: answered with InvalidRequest, echoing its id.
    lsp.send(&json!({ "id": 777, "hello": "world" }));
    let response = lsp.response(&json!(777));
    assert_eq!(response["error"]["code"], -32600, "{response}");
    still_alive(&mut lsp);
    assert!(lsp.shutdown_and_exit().success());
}
