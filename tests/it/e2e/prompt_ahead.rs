//! Prompts built ahead for remote models: after an edit's analysis, the
//! prompt at the edit's end is built and kept; the request that comes
//! while nothing it depends on changed sends it as is. Over the real
//! binary, against the mock model server on 127.0.0.1.
use std::time::Duration;

use fettle::mock::{Script, ScriptedResponse};
use serde_json::{json, Value};

use super::harness::{BackgroundMock, Lsp, Workspace};
use super::inline_completion::{complete, insert};

const LIB: &str =
    "use crate::geometry::Point;\n\nfn area(p: &Point) -> f64 {\n    let w = \n    w\n}\n";
/// Lines apart from the struct: the edit below it is a snippet of its own.
const GEOMETRY: &str = "pub struct Point {\n    pub x: f64,\n    pub y: f64,\n}\n\n// Points are in metres.\n// x grows to the east.\n// y grows to the north.\n// The origin is the survey's first mark.\n// Nothing here is generic.\n";

fn workspace() -> Workspace {
    Workspace::new(&[("src/lib.rs", LIB), ("src/geometry.rs", GEOMETRY)])
}

fn mock() -> BackgroundMock {
    BackgroundMock::start(Script::new(vec![ScriptedResponse {
        repeat: true,
        ..ScriptedResponse::text("p.x * p.y;\n")
    }]))
}

/// Completion on `mock`; the edit's analysis after `analysis_ms`, without
/// syntax errors (a server whose analysis never ran has none either).
fn options(mock: &BackgroundMock, analysis_ms: u64) -> Value {
    json!({
        "models": { "mock": {
            "provider": "openai", "base_url": format!("{}/v1", mock.server.url()),
            "model": "starcoder2-3b", "fim_template": "starcoder", "max_retries": 0,
        } },
        "completion": { "model": "mock" },
        "diagnostics": { "enabled": false, "debounce_ms": analysis_ms },
    })
}

fn prompts(mock: &BackgroundMock) -> Vec<String> {
    bodies(mock)
        .iter()
        .map(|body| body["prompt"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The completion requests' whole bodies, as the mock received them.
fn bodies(mock: &BackgroundMock) -> Vec<Value> {
    mock.server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/completions")
        .map(|r| r.body)
        .collect()
}

/// Waits until the analysis of `uri` at `version` is done: the prompt is
/// built before the diagnostics are published.
fn analysed(lsp: &mut Lsp, uri: &str, version: i32) {
    lsp.notification("textDocument/publishDiagnostics", |p| {
        p["uri"] == uri && p["version"] == version
    });
}

/// Another file open and edited (its edit feeds the prompt), then `p.` typed
/// in `src/lib.rs` after `let w = `: the cursor at (3, 14). After the
/// workspace's indexing (the index feeds the prompt), and the other file's
/// analysis when `analysing`.
fn edit_both(lsp: &mut Lsp, ws: &Workspace, analysing: bool) -> String {
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let geometry = ws.uri("src/geometry.rs");
    lsp.open(&geometry, "rust", GEOMETRY);
    insert(
        lsp,
        &geometry,
        2,
        (10, 0),
        "\npub fn origin() -> Point {\n    todo!()\n}\n",
    );
    // Its own analysis done first (the first prompts built ahead make the
    // redactor, the same for both: one at a time).
    if analysing {
        analysed(lsp, &geometry, 2);
    }
    let lib = ws.uri("src/lib.rs");
    lsp.open(&lib, "rust", LIB);
    insert(lsp, &lib, 2, (3, 12), "p.");
    lib
}

#[test]
fn the_prompt_built_ahead_is_the_one_the_request_would_build() {
    let ws = workspace();
    // Built ahead: the analysis runs 10 ms after the edit.
    let ahead_mock = mock();
    let (mut ahead, _) = Lsp::initialized(
        &ws.root(),
        Lsp::capabilities(&["utf-16"]),
        Some(options(&ahead_mock, 10)),
    );
    let lib = edit_both(&mut ahead, &ws, true);
    analysed(&mut ahead, &lib, 2);
    // The model request is made ahead with the prompt, but only sent when
    // the editor asks.
    ahead.pump_for(Duration::from_millis(100));
    assert!(bodies(&ahead_mock).is_empty());
    let answer = complete(&mut ahead, &lib, 3, 14);
    let stats = ahead.request("fettle/stats", json!({})).unwrap();
    assert_eq!(stats["preparedPrompts"], 1, "{stats}");

    // Built by the request: no analysis (a symbols request parses, as the
    // analysis would have: the trigger decides from the tree in both).
    let fresh_mock = mock();
    let (mut fresh, _) = Lsp::initialized(
        &ws.root(),
        Lsp::capabilities(&["utf-16"]),
        Some(options(&fresh_mock, 600_000)),
    );
    let lib = edit_both(&mut fresh, &ws, false);
    fresh.document_symbols(&lib);
    let fresh_answer = complete(&mut fresh, &lib, 3, 14);
    let stats = fresh.request("fettle/stats", json!({})).unwrap();
    assert_eq!(stats["preparedPrompts"], 0, "{stats}");

    assert_eq!(answer["items"][0]["insertText"], "p.x * p.y;", "{answer}");
    assert_eq!(answer, fresh_answer);
    let (built_ahead, built_fresh) = (prompts(&ahead_mock), prompts(&fresh_mock));
    assert_eq!(built_ahead.len(), 1);
    assert_eq!(built_ahead, built_fresh);
    // The whole request, not only its prompt (the body made ahead).
    assert_eq!(bodies(&ahead_mock), bodies(&fresh_mock));
    // The other file's edit is in it: the build ahead saw the other buffers.
    assert!(built_ahead[0].contains("fn origin"), "{}", built_ahead[0]);
    assert!(ahead.shutdown_and_exit().success());
    assert!(fresh.shutdown_and_exit().success());
}

#[test]
fn what_changed_after_the_build_ahead_reaches_the_prompt() {
    let ws = workspace();
    let mock = mock();
    let (mut lsp, _) = Lsp::initialized(
        &ws.root(),
        Lsp::capabilities(&["utf-16"]),
        Some(options(&mock, 10)),
    );
    let lib = edit_both(&mut lsp, &ws, true);
    analysed(&mut lsp, &lib, 2);
    // Another open file changes after the prompt was built.
    let geometry = ws.uri("src/geometry.rs");
    insert(
        &mut lsp,
        &geometry,
        3,
        (0, 0),
        "pub fn shoelace_area(points: &[Point]) -> f64 {\n    0.0\n}\n",
    );
    let answer = complete(&mut lsp, &lib, 3, 14);
    assert_eq!(answer["items"][0]["insertText"], "p.x * p.y;", "{answer}");
    let prompt = &prompts(&mock)[0];
    assert!(prompt.contains("shoelace_area"), "{prompt}");
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    assert_eq!(stats["preparedPrompts"], 0, "{stats}");

    // The cursor elsewhere than the edit's end: built by the request too.
    insert(&mut lsp, &lib, 3, (4, 5), " ");
    analysed(&mut lsp, &lib, 3);
    complete(&mut lsp, &lib, 3, 14);
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    assert_eq!(stats["preparedPrompts"], 0, "{stats}");
    assert_eq!(prompts(&mock).len(), 2);
    assert!(lsp.shutdown_and_exit().success());
}

/// A file indented with tabs: the answer's indentation is rewritten in the
/// file's style, found ahead with the prompt (around the cursor, from the
/// text the prompt was built from) exactly as a request would find it.
#[test]
fn an_answer_to_a_prompt_built_ahead_is_indented_like_the_file() {
    const TABBED: &str = "fn area(w: f64, h: f64) -> f64 {\n\tif w > 0.0 {\n\t\tlet a = w;\n\t\ta\n\t} else {\n\t\t0.0\n\t}\n}\n\nfn scale(v: f64) -> f64 {\n\t\n}\n";
    // Four spaces a level, as models often write.
    let answer_text = "let s = match v {\n        x if x > 1.0 => x,\n        _ => 1.0,\n    };";
    let ws = Workspace::new(&[("src/lib.rs", TABBED)]);
    let run = |analysis_ms: u64| {
        let mock = BackgroundMock::start(Script::new(vec![ScriptedResponse {
            repeat: true,
            ..ScriptedResponse::text(answer_text)
        }]));
        let mut options = options(&mock, analysis_ms);
        options["completion"]["multiline"] = json!("always");
        let (mut lsp, _) =
            Lsp::initialized(&ws.root(), Lsp::capabilities(&["utf-16"]), Some(options));
        lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
        let lib = ws.uri("src/lib.rs");
        lsp.open(&lib, "rust", TABBED);
        insert(&mut lsp, &lib, 2, (10, 1), "v");
        if analysis_ms < 1_000 {
            analysed(&mut lsp, &lib, 2);
        } else {
            lsp.document_symbols(&lib);
        }
        let answer = complete(&mut lsp, &lib, 10, 2);
        let stats = lsp.request("fettle/stats", json!({})).unwrap();
        assert!(lsp.shutdown_and_exit().success());
        (answer, stats["preparedPrompts"].clone())
    };
    let (ahead, prepared) = run(10);
    assert_eq!(prepared, 1);
    let (fresh, prepared) = run(600_000);
    assert_eq!(prepared, 0);
    let text = ahead["items"][0]["insertText"].as_str().unwrap_or_default();
    assert!(text.contains("\n\t\tx if x > 1.0 => x,\n"), "{ahead}");
    assert!(!text.contains("    "), "{ahead}");
    assert_eq!(ahead, fresh);
}
