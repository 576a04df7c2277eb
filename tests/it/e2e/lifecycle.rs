use serde_json::{json, Value};

use super::harness::{redact, Lsp, Workspace};

#[test]
fn initialize_announces_capabilities_and_negotiated_encoding() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    let result = lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16", "utf-8"]), None);
    let mut result = redact(&result, &ws.root());
    result["serverInfo"]["version"] = json!("$VERSION");
    insta::assert_json_snapshot!(result);
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn position_encoding_negotiation_follows_lsp_3_17() {
    let cases: &[(&[&str], &str)] = &[
        (&["utf-16", "utf-8"], "utf-8"),
        (&["utf-32", "utf-16"], "utf-32"),
        (&["utf-16"], "utf-16"),
        (&[], "utf-16"),
    ];
    for (offered, expected) in cases {
        let ws = Workspace::new(&[]);
        let mut lsp = Lsp::spawn();
        let result = lsp.initialize(&ws.root(), Lsp::capabilities(offered), None);
        assert_eq!(
            result["capabilities"]["positionEncoding"], *expected,
            "offered {offered:?}"
        );
        assert!(lsp.shutdown_and_exit().success());
    }
    // A client that says nothing at all about encodings gets UTF-16.
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    let result = lsp.initialize(&ws.root(), json!({}), None);
    assert_eq!(result["capabilities"]["positionEncoding"], "utf-16");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn exit_code_is_zero_after_shutdown() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn_with(&["serve", "--stdio"], &[]);
    lsp.initialize(&ws.root(), json!({}), None);
    let status = lsp.shutdown_and_exit();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn exit_code_is_one_without_shutdown() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn_with(&["--stdio"], &[]);
    lsp.initialize(&ws.root(), json!({}), None);
    lsp.notify("exit", Value::Null);
    assert_eq!(lsp.wait_exit().code(), Some(1));
}

#[test]
fn end_of_input_without_shutdown_exits_with_one() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), json!({}), None);
    lsp.close_stdin();
    assert_eq!(lsp.wait_exit().code(), Some(1));
}

#[test]
fn requests_before_initialize_are_refused() {
    let mut lsp = Lsp::spawn();
    let error = lsp
        .request("workspace/symbol", json!({ "query": "x" }))
        .unwrap_err();
    assert_eq!(error["code"], -32002, "{error}");
}

#[test]
fn requests_after_shutdown_are_invalid() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), json!({}), None);
    assert_eq!(lsp.request("shutdown", Value::Null), Ok(Value::Null));
    let error = lsp
        .request("workspace/symbol", json!({ "query": "x" }))
        .unwrap_err();
    assert_eq!(error["code"], -32600, "{error}");
    lsp.notify("exit", Value::Null);
    assert_eq!(lsp.wait_exit().code(), Some(0));
}
