use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{Lsp, Workspace};

#[test]
fn syntax_errors_are_published_at_the_right_column_and_cleared_when_fixed() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    let uri = ws.uri("src/broken.rs");
    // Line 1: the emoji is 2 UTF-16 units; the missing `;` comes after `1`.
    lsp.open(
        &uri,
        "rust",
        "fn main() {\n    let s = \"😀\"; let x = 1\n}\n",
    );
    let diagnostics = lsp.diagnostics(&uri, |d| !d.is_empty());
    insta::assert_json_snapshot!("broken_rust_utf16", diagnostics);
    for d in &diagnostics {
        assert_eq!(d["source"], "fettle");
    }
    // Insert the missing semicolon at the end of line 1 (UTF-16 column 27).
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [
            { "range": { "start": { "line": 1, "character": 27 }, "end": { "line": 1, "character": 27 } }, "text": ";" } ] }),
    );
    let cleared = lsp.diagnostics(&uri, |d| d.is_empty());
    assert!(cleared.is_empty());
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn python_syntax_error_positions_in_utf8() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-8"]), None);
    let uri = ws.uri("bad.py");
    lsp.open(&uri, "python", "x = '🦀'\nprint(x, (1 + 2)\n");
    let diagnostics = lsp.diagnostics(&uri, |d| !d.is_empty());
    insta::assert_json_snapshot!("broken_python_utf8", diagnostics);
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn closing_a_document_clears_its_diagnostics() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    let uri = ws.uri("x.rs");
    lsp.open(&uri, "rust", "fn main( {}\n");
    lsp.diagnostics(&uri, |d| !d.is_empty());
    lsp.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": uri } }),
    );
    lsp.diagnostics(&uri, |d| d.is_empty());
    assert!(lsp.shutdown_and_exit().success());
}

/// Issue 11: deleting the `:` of a method on line 28 of a Python class was
/// published as a bare "syntax error" on line 21 (`class Item:`) and another
/// on line 49. Now: one diagnostic, on line 28, saying what is missing.
#[test]
fn missing_colon_in_a_class_is_published_at_the_fault() {
    let text =
        include_str!("../../fixtures/syntax_errors/python_issue11_missing_colon_in_class.py");
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    let uri = ws.uri("inventory.py");
    lsp.open(&uri, "python", text);
    let diagnostics = lsp.diagnostics(&uri, |d| !d.is_empty());
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0]["message"], "expected \":\"");
    // 0-based line 27, right after `def total(self)`.
    assert_eq!(diagnostics[0]["range"]["start"]["line"], 27);
    assert_eq!(diagnostics[0]["range"]["start"]["character"], 19);
    assert!(lsp.shutdown_and_exit().success());
}

/// After many incremental reparses the server parses the buffer afresh
/// once the user pauses (giving the worn tree's memory back); the fresh
/// tree then takes later edits like the old one: errors land on the right
/// line, the outline has every function.
#[test]
fn a_tree_reparsed_many_times_is_parsed_afresh_and_takes_later_edits() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    let uri = ws.uri("src/grow.rs");
    lsp.open(&uri, "rust", "fn main() {}\n");
    // Each edit, then a request that needs the tree: one incremental
    // reparse each, as an outline view refreshing while the user types.
    for i in 0..70 {
        lsp.type_text(&uri, i + 1, &format!("fn f{i}() {{}}\n"));
        assert_eq!(lsp.symbol_names(&uri).len(), i as usize + 2);
    }
    assert!(
        lsp.stderr_says("tree parsed afresh"),
        "no fresh parse after 70 incremental ones: {}",
        lsp.stderr()
    );
    // An unfinished item on line 40 of the fresh tree's text.
    lsp.type_text(&uri, 40, "fn broken( {}\n");
    let diagnostics = lsp.diagnostics(&uri, |d| !d.is_empty());
    assert!(
        diagnostics
            .iter()
            .all(|d| d["range"]["start"]["line"] == 40),
        "{diagnostics:?}"
    );
    let names = lsp.symbol_names(&uri);
    assert!(
        names.iter().any(|n| n == "f69") && names.iter().any(|n| n == "main"),
        "{names:?}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

/// An opened file is analysed at once; only edits wait for the debounce
/// (a burst of typing). With a debounce of a minute, the errors of the
/// opened text come right away, and an edit's do not.
#[test]
fn an_opened_file_is_analysed_at_once_and_edits_after_the_debounce() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    let options = json!({ "diagnostics": { "debounce_ms": 60_000 } });
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), Some(options));
    let uri = ws.uri("src/broken.rs");
    lsp.open(&uri, "rust", "fn main( {}\n");
    // The harness waits 30 s at most: half the debounce.
    let opened = lsp.diagnostics(&uri, |d| !d.is_empty());
    assert_eq!(opened.len(), 1, "{opened:?}");
    // The fix: `fn main() {}`.
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [
            { "range": { "start": { "line": 0, "character": 8 }, "end": { "line": 0, "character": 8 } }, "text": ")" } ] }),
    );
    let quiet_until = Instant::now() + Duration::from_millis(1500);
    while let Some(left) = quiet_until.checked_duration_since(Instant::now()) {
        lsp.pump_for(left);
    }
    let published = lsp.pending_notifications("textDocument/publishDiagnostics");
    assert!(
        published.is_empty(),
        "published before the debounce: {published:?}"
    );
    assert!(lsp.shutdown_and_exit().success());
}
