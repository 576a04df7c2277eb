//! Checker diagnostics on save (`check.on_save`), over the real binary and
//! a real `cargo check`.
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::{Lsp, Workspace};

const CARGO_TOML: &str =
    "[package]\nname = \"e2e_on_save\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";
const LIB: &str =
    "pub mod area;\n\npub fn f() -> u32 {\n    let s = \"é😀\"; let n: u32 = s;\n    n\n}\n";
const AREA: &str = "pub fn area() -> u32 {\n    undefined_name\n}\n";

fn from(d: &Value, source: &str) -> bool {
    d["source"] == source
}

fn has(list: &[Value], source: &str) -> bool {
    list.iter().any(|d| from(d, source))
}

/// A server without the test process's `CARGO_TARGET_DIR` (a shared
/// target dir would mix this crate with others of its name).
fn server(ws: &Workspace, check: Value) -> Lsp {
    let mut lsp = Lsp::spawn_removing(&[], &[], &["CARGO_TARGET_DIR"]);
    lsp.initialize(
        &ws.root(),
        Lsp::capabilities(&["utf-16"]),
        Some(json!({ "check": check })),
    );
    lsp
}

fn save(lsp: &mut Lsp, uri: &str) {
    lsp.notify(
        "textDocument/didSave",
        json!({ "textDocument": { "uri": uri } }),
    );
}

fn replace(lsp: &mut Lsp, uri: &str, version: i32, text: &str) {
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": [ { "text": text } ] }),
    );
}

#[test]
fn checker_diagnostics_are_published_on_save_beside_syntax_ones_and_cleared_when_fixed() {
    let ws = Workspace::new(&[
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB),
        ("src/area.rs", AREA),
    ]);
    let mut lsp = server(&ws, json!({ "on_save": true, "debounce_ms": 50 }));
    let lib = ws.uri("src/lib.rs");
    let area = ws.uri("src/area.rs");
    lsp.open(&lib, "rust", LIB);
    save(&mut lsp, &lib);

    let published = lsp.diagnostics(&lib, |d| has(d, "fettle/rustc"));
    let mismatch = published
        .iter()
        .find(|d| d["code"] == "E0308")
        .unwrap_or_else(|| panic!("{published:#?}"));
    // `s` after "é😀": UTF-16 column 33 (the emoji is two units; 32 characters).
    let line = LIB.lines().nth(3).unwrap();
    let column = line[..line.rfind('s').unwrap()].encode_utf16().count();
    assert_eq!(
        mismatch["range"],
        json!({ "start": { "line": 3, "character": column }, "end": { "line": 3, "character": column + 1 } })
    );
    assert_eq!(mismatch["severity"], 1);
    assert!(mismatch["message"]
        .as_str()
        .unwrap()
        .starts_with("mismatched types"));
    assert_eq!(
        mismatch["relatedInformation"][0]["message"],
        "expected due to this"
    );
    // The lightbulb offers a quick fix for it, as for any diagnostic.
    let actions = lsp
        .request(
            "textDocument/codeAction",
            json!({ "textDocument": { "uri": lib }, "range": mismatch["range"],
                    "context": { "diagnostics": [mismatch], "triggerKind": 1 } }),
        )
        .unwrap();
    let fix = actions
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "quickfix")
        .unwrap_or_else(|| panic!("{actions:#}"));
    assert!(
        fix["title"].as_str().unwrap().contains("mismatched types"),
        "{fix:#}"
    );
    assert_eq!(fix["diagnostics"][0]["source"], "fettle/rustc");
    // A file that is not open gets its diagnostics too.
    let other = lsp.diagnostics(&area, |d| has(d, "fettle/rustc"));
    assert_eq!(other[0]["code"], "E0425");

    // A syntax error typed now is published with the checker's, not instead.
    let broken = format!("{LIB}fn oops( {{\n");
    replace(&mut lsp, &lib, 2, &broken);
    let both = lsp.diagnostics(&lib, |d| has(d, "fettle") && has(d, "fettle/rustc"));
    assert!(both.len() >= 2, "{both:#?}");

    // Fixed and saved: the checker's diagnostics go, in both files.
    let fixed = LIB.replace("let n: u32 = s;", "let n: u32 = s.len() as u32;");
    ws.write("src/lib.rs", &fixed);
    ws.write("src/area.rs", "pub fn area() -> u32 {\n    1\n}\n");
    replace(&mut lsp, &lib, 3, &fixed);
    save(&mut lsp, &lib);
    lsp.diagnostics(&lib, |d| d.is_empty());
    lsp.diagnostics(&area, |d| d.is_empty());
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn no_checker_runs_on_save_unless_the_user_asked_not_a_workspace_file() {
    // `check.on_save` from the repository's own fettle.toml is ignored
    // (it would run the project's build scripts on every save).
    let ws = Workspace::new(&[
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB),
        ("src/area.rs", AREA),
        ("fettle.toml", "[check]\non_save = true\ndebounce_ms = 0\n"),
    ]);
    let mut lsp = server(&ws, json!({}));
    let lib = ws.uri("src/lib.rs");
    lsp.open(&lib, "rust", LIB);
    save(&mut lsp, &lib);
    // A run would take ~1 s here; wait three, answering what comes.
    let end = Instant::now() + Duration::from_secs(3);
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        lsp.pump_for(left);
    }
    let published = lsp.pending_notifications("textDocument/publishDiagnostics");
    assert!(
        !published
            .iter()
            .any(|p| has(p["diagnostics"].as_array().unwrap(), "fettle/rustc")),
        "{published:#?}"
    );
    assert!(!ws.root().join("target").exists(), "cargo ran");
    assert!(lsp.shutdown_and_exit().success());
}
