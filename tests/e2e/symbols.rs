use serde_json::{json, Value};

use crate::harness::{Lsp, Workspace};

const SHAPES: &str = include_str!("../fixtures/e2e/shapes.rs");

fn symbols_for(encoding: &str) -> Value {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&[encoding]), None);
    let uri = ws.uri("src/shapes.rs");
    lsp.open(&uri, "rust", SHAPES);
    let symbols = lsp.document_symbols(&uri);
    assert!(lsp.shutdown_and_exit().success());
    symbols
}

#[test]
fn document_symbols_utf16() {
    insta::assert_json_snapshot!(symbols_for("utf-16"));
}

#[test]
fn document_symbols_utf8() {
    insta::assert_json_snapshot!(symbols_for("utf-8"));
}

#[test]
fn document_symbols_utf32() {
    insta::assert_json_snapshot!(symbols_for("utf-32"));
}

#[test]
fn document_symbols_follow_incremental_edits() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    let uri = ws.uri("app.py");
    lsp.open(
        &uri,
        "python",
        "# 😀 emoji first\nclass Greeter:\n    def hello(self):\n        return '👋'\n",
    );
    // Rename `hello` → `wave`: line 2, UTF-16 columns 8..13.
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [
            { "range": { "start": { "line": 2, "character": 8 }, "end": { "line": 2, "character": 13 } }, "text": "wave" },
            { "range": { "start": { "line": 4, "character": 0 }, "end": { "line": 4, "character": 0 } }, "text": "def 🎉party(): pass\n" }
        ] }),
    );
    let symbols = lsp.document_symbols(&uri);
    insta::assert_json_snapshot!(symbols);
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn flat_symbols_for_clients_without_hierarchy() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), json!({}), None);
    let uri = ws.uri("src/shapes.rs");
    lsp.open(&uri, "rust", SHAPES);
    let symbols = lsp.document_symbols(&uri);
    let area = symbols
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "area")
        .expect("area")
        .clone();
    assert_eq!(area["containerName"], "impl Shape", "{area}");
    assert!(area.get("location").is_some());
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn plain_text_documents_have_no_symbols_but_work() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    let uri = ws.uri("notes.txt");
    lsp.open(&uri, "plaintext", "just 😀 text\n");
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [
            { "range": { "start": { "line": 0, "character": 7 }, "end": { "line": 0, "character": 7 } }, "text": "more " } ] }),
    );
    let symbols = lsp.document_symbols(&uri);
    assert_eq!(symbols, json!([]));
    assert!(lsp.shutdown_and_exit().success());
}
