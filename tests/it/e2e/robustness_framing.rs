//! Framing attacks on the real binary: wrong `Content-Length`s, junk between
//! frames, ids that do not fit in 64 bits, `$/` requests, a `shutdown`
//! notification and a response over the output limit. Each is answered and
//! loses nothing after it.
use serde_json::{json, Value};

use super::harness::{Lsp, Workspace};

fn hooked() -> (Workspace, Lsp) {
    let ws = Workspace::new(&[("src/lib.rs", "pub fn alive() {}\n")]);
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_TEST_HOOKS", "1")]);
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    (ws, lsp)
}

fn framed(body: &[u8], delta: i64) -> Vec<u8> {
    let length = body.len() as i64 + delta;
    let mut out = format!("Content-Length: {length}\r\n\r\n").into_bytes();
    out.extend_from_slice(body);
    out
}

fn request_body(id: i64) -> Vec<u8> {
    serde_json::to_vec(
        &json!({ "jsonrpc": "2.0", "id": id, "method": "fettle/debug/sleep",
                                "params": { "ms": 0 } }),
    )
    .unwrap()
}

/// Sends `valid` well-framed requests after `bad` in one write (so a body
/// that is too long swallows the next header) and returns how many were
/// answered with a result.
fn answered_after(lsp: &mut Lsp, bad: &[u8], first_id: i64, valid: i64) -> usize {
    let mut bytes = bad.to_vec();
    for id in first_id..first_id + valid {
        bytes.extend(framed(&request_body(id), 0));
    }
    lsp.send_raw(&bytes);
    (first_id..first_id + valid)
        .filter(|id| lsp.response(&json!(id)).get("result").is_some())
        .count()
}

#[test]
fn a_wrong_content_length_costs_only_its_own_frame() {
    let (_ws, mut lsp) = hooked();
    let mut first_id = 1000;
    for delta in [-10, -1, 1, 10] {
        let bad = framed(&request_body(first_id - 1), delta);
        let answered = answered_after(&mut lsp, &bad, first_id, 100);
        assert_eq!(answered, 100, "Content-Length off by {delta}");
        // The bad frame itself: one parse error, with a null id.
        let error = lsp.response(&Value::Null);
        assert_eq!(error["error"]["code"], -32700, "{delta}: {error}");
        assert!(lsp.try_response(&json!(first_id - 1)).is_none());
        first_id += 1000;
    }
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn junk_between_frames_is_one_parse_error_and_loses_nothing() {
    let (_ws, mut lsp) = hooked();
    let junks = [
        &b"garbage\r\n"[..],
        b"}}}",
        b"Content-Type: x\r\nnot a header\r\n",
    ];
    for (i, junk) in (0..).zip(junks) {
        assert_eq!(
            answered_after(&mut lsp, junk, 1000 * (i + 1), 20),
            20,
            "{junk:?}"
        );
        let error = lsp.response(&Value::Null);
        assert_eq!(error["error"]["code"], -32700, "{error}");
    }
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn an_id_past_64_bits_is_echoed_exactly() {
    let (_ws, mut lsp) = hooked();
    let huge = "18446744073709551617";
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{huge},"method":"workspace/symbol","params":{{"query":""}}}}"#
    );
    lsp.send_raw(&framed(body.as_bytes(), 0));
    let parsed: Value = serde_json::from_str(huge).unwrap();
    let response = lsp.response(&parsed);
    assert_eq!(response["error"]["code"], -32600, "{response}");
    let raw = lsp.raw_messages();
    assert!(
        raw.iter().any(|m| m.contains(&format!(r#""id":{huge},"#))),
        "the id was not echoed verbatim: {raw:?}"
    );
    // An id that fits round-trips through tower-lsp.
    let body = br#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"workspace/symbol","params":{"query":""}}"#;
    lsp.send_raw(&framed(body, 0));
    let response = lsp.response(&json!(i64::MIN));
    assert!(response.get("result").is_some(), "{response}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn dollar_requests_get_method_not_found() {
    let (_ws, mut lsp) = hooked();
    for method in ["$/noSuchThing", "$/setTrace", "$/cancelRequest"] {
        let error = lsp.request(method, json!({ "id": 1 })).unwrap_err();
        assert_eq!(error["code"], -32601, "{method}: {error}");
    }
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn shutdown_as_a_notification_is_ignored() {
    let (_ws, mut lsp) = hooked();
    lsp.send(&json!({ "jsonrpc": "2.0", "method": "shutdown" }));
    let result = lsp.request("workspace/symbol", json!({ "query": "" }));
    assert!(result.is_ok(), "the server shut down: {result:?}");
    assert!(lsp.stderr_says("ignored `shutdown` sent as a notification"));
    // The real request still works, and the exit code says so.
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_response_over_the_output_limit_becomes_an_error_and_framing_survives() {
    let (_ws, mut lsp) = hooked();
    let error = lsp
        .request("fettle/debug/bulk", json!({ "bytes": 65 << 20 }))
        .unwrap_err();
    assert_eq!(error["code"], -32603, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("response too large") && message.contains("limit 64 MB"),
        "{message}"
    );
    assert!(lsp.stderr_says("not writing an oversized response"));
    // Just under the limit still goes through, and later answers arrive.
    let result = lsp
        .request("fettle/debug/bulk", json!({ "bytes": 1 << 20 }))
        .unwrap();
    assert_eq!(result.as_str().map(str::len), Some(1 << 20));
    assert_eq!(answered_after(&mut lsp, b"", 100, 20), 20);
    assert!(lsp.shutdown_and_exit().success());
}
