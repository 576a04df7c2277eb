//! What the server says about its models.
use serde_json::json;

use crate::harness::{Lsp, Workspace};

#[test]
fn a_missing_embedded_model_is_reported_once_naming_the_fetch_command() {
    let ws = Workspace::new(&[]);
    let missing = ws.root().join("no-such-model.gguf");
    let mut lsp = Lsp::spawn();
    lsp.initialize(
        &ws.root(),
        json!({}),
        Some(json!({ "models": { "local": { "path": missing.display().to_string() } } })),
    );
    let shown = lsp.notification("window/showMessage", |m| m["type"] == 2);
    let text = shown["message"].as_str().unwrap();
    assert!(text.contains("fettle model fetch"), "{text}");
    assert!(text.contains("no-such-model.gguf"), "{text}");
    assert!(text.contains("used by completion, edit, agent"), "{text}");

    // A configuration change that leaves the problem as it was does not
    // repeat the message. (The unknown key makes the change observable: its
    // warning is sent just before the models are checked, in the same step.)
    lsp.notify(
        "workspace/didChangeConfiguration",
        json!({ "settings": { "fettle": { "models": { "local": { "path": missing.display().to_string() } }, "completion": { "debouce_ms": 5 } } } }),
    );
    lsp.notification("window/showMessage", |m| {
        m["message"].as_str().unwrap_or("").contains("debouce_ms")
    });
    lsp.request("workspace/symbol", json!({ "query": "" }))
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let repeated: Vec<_> = lsp
        .pending_notifications("window/showMessage")
        .into_iter()
        .filter(|m| {
            m["message"]
                .as_str()
                .unwrap_or("")
                .contains("fettle model fetch")
        })
        .collect();
    assert!(repeated.is_empty(), "{repeated:?}");
    assert!(lsp.shutdown_and_exit().success());
}
