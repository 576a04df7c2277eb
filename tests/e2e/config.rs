use serde_json::json;

use crate::harness::{Lsp, Workspace};

fn messages(lsp: &mut Lsp, kind: u64) -> Vec<String> {
    lsp.pending_notifications("window/showMessage")
        .into_iter()
        .filter(|m| m["type"] == kind)
        .map(|m| m["message"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_invalid_initialization_option_is_reported_with_its_key_path() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(
        &ws.root(),
        json!({}),
        Some(json!({ "models": { "fast": { "provider": "opnai", "base_url": "http://127.0.0.1:1/v1", "model": "m" } } })),
    );
    let shown = lsp.notification("window/showMessage", |m| m["type"] == 1);
    let text = shown["message"].as_str().unwrap();
    assert!(
        text.contains("models.fast.provider: unknown provider \"opnai\""),
        "{text}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn an_invalid_change_keeps_the_previous_configuration() {
    let ws = Workspace::new(&[("src/lib.rs", "pub fn visible() {}\n")]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(
        &ws.root(),
        json!({}),
        Some(json!({ "diagnostics": { "debounce_ms": 10 } })),
    );
    // Push-style change with a wrong type: reported, and the old value (diagnostics on) stays.
    lsp.notify(
        "workspace/didChangeConfiguration",
        json!({ "settings": { "fettle": { "diagnostics": { "enabled": "sometimes" } } } }),
    );
    let shown = lsp.notification("window/showMessage", |m| m["type"] == 1);
    let text = shown["message"].as_str().unwrap();
    assert!(text.contains("diagnostics.enabled"), "{text}");
    assert!(text.contains("previous configuration"), "{text}");
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", "fn broken( {}\n");
    lsp.diagnostics(&uri, |d| !d.is_empty());
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn configuration_is_pulled_from_the_client_and_applied() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.configuration = json!({ "diagnostics": { "enabled": false } });
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    // Wait until the server has pulled the configuration before opening.
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    assert!(lsp
        .server_requests
        .iter()
        .any(|r| r["method"] == "workspace/configuration"
            && r["params"]["items"][0]["section"] == "fettle"));
    let uri = ws.uri("a.rs");
    lsp.open(&uri, "rust", "fn broken( {}\n");
    // Diagnostics are disabled: what gets published is empty.
    let published = lsp.diagnostics(&uri, |_| true);
    assert!(published.is_empty(), "{published:?}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn unknown_keys_are_warned_about_not_fatal() {
    let ws = Workspace::new(&[("fettle.toml", "[completion]\ndebouce_ms = 5\n")]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), json!({}), None);
    let shown = lsp.notification("window/showMessage", |m| m["type"] == 2);
    assert!(
        shown["message"]
            .as_str()
            .unwrap()
            .contains("completion.debouce_ms"),
        "{shown}"
    );
    assert!(messages(&mut lsp, 1).is_empty());
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_broken_workspace_file_is_reported_with_its_location() {
    let ws = Workspace::new(&[("fettle.toml", "[completion\nenabled = true\n")]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), json!({}), None);
    let shown = lsp.notification("window/showMessage", |m| m["type"] == 1);
    let text = shown["message"].as_str().unwrap();
    assert!(text.contains("fettle.toml"), "{text}");
    assert!(lsp.shutdown_and_exit().success());
}
