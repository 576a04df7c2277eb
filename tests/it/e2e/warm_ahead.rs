//! Warm-ups of the embedded model over LSP: after the cursor report
//! (`fettle/cursor`) and a pause, the prompt there is evaluated, so the
//! first completion nearby finds it cached. Uses the real model (skips
//! without it unless `FETTLE_REQUIRE_MODEL=1`).
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::{Lsp, Workspace};

fn stats(lsp: &mut Lsp) -> Value {
    lsp.request("fettle/stats", json!(null)).unwrap()
}

fn complete(lsp: &mut Lsp, uri: &str, line: u32, character: u32) {
    lsp.request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri },
                "position": { "line": line, "character": character },
                "context": { "triggerKind": 2 } }),
    )
    .unwrap();
}

/// A 52-line Python function: hundreds of tokens before its last lines.
fn weigh_py() -> String {
    let body: String = (0..50)
        .map(|i| format!("    total_{i} = values[{i}] * {i} + offset\n"))
        .collect();
    format!("def weigh(values, offset):\n{body}    return total_0\n")
}

/// The embedded model with a generous latency target: the warm-up then
/// takes the whole window even on a slow, busy machine (what is asserted
/// is the reuse), and warm-ups soon after a pause.
fn options(model: &std::path::Path) -> Value {
    json!({
        "models": { "local": { "provider": "local", "path": model, "context_tokens": 4096 } },
        "completion": { "multiline": "never", "latency_target_ms": 2000, "warm_after_ms": 50 },
    })
}

#[test]
fn a_cursor_report_warms_the_prompt_for_the_next_completion_there() {
    let Some(model) = crate::local_model::model_path() else {
        return;
    };
    let text = weigh_py();
    let ws = Workspace::new(&[("weigh.py", text.as_str())]);
    let uri = ws.uri("weigh.py");
    let mut lsp = Lsp::spawn();
    let options = options(&model);
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), Some(options));
    lsp.open(&uri, "python", &text);
    // A report for a document that is not open is ignored.
    lsp.notify(
        "fettle/cursor",
        json!({ "textDocument": { "uri": ws.uri("absent.py") },
                "position": { "line": 0, "character": 0 } }),
    );
    // Loads the model; a completion at the end of the second line.
    let line1 = text.lines().nth(1).unwrap().len() as u32;
    complete(&mut lsp, &uri, 1, line1);
    let before = stats(&mut lsp)["localModel"]["warmedTokens"]
        .as_u64()
        .unwrap();

    // The user moves to line 45 and looks.
    lsp.notify(
        "fettle/cursor",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 45, "character": 0 } }),
    );
    let started = Instant::now();
    let warmed = loop {
        let warmed = stats(&mut lsp)["localModel"]["warmedTokens"]
            .as_u64()
            .unwrap();
        if warmed > before + 300 {
            break warmed;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no warm-up: {}",
            lsp.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("warm-up: {} tokens", warmed - before);

    // A new line below it (Vim's `o`), and a completion there.
    let line45 = text.lines().nth(45).unwrap().len() as u32;
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 },
                "contentChanges": [ { "range": {
                    "start": { "line": 45, "character": line45 },
                    "end": { "line": 45, "character": line45 } }, "text": "\n    " } ] }),
    );
    complete(&mut lsp, &uri, 46, 4);
    let local = stats(&mut lsp)["localModel"].clone();
    let (prompt, reused) = (
        local["promptTokens"].as_u64().unwrap(),
        local["reusedTokens"].as_u64().unwrap(),
    );
    assert!(prompt > 300, "the whole window: {local}");
    assert!(
        prompt - reused <= 10,
        "the completion found the warmed prompt: {local}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

/// The Neovim plugin reports where the cursor rests; the server warms the
/// prompt there.
#[test]
fn neovim_cursor_reports_warm_the_embedded_model() {
    let Some(model) = crate::local_model::model_path() else {
        return;
    };
    let text = weigh_py();
    let ws = Workspace::new(&[("weigh.py", text.as_str())]);
    let init = options(&model).to_string();
    let Some((value, _log)) = super::neovim::run_plugin_fixture(
        "warm_up.lua",
        &ws,
        "weigh.py",
        &[("FETTLE_INIT", &init)],
    ) else {
        return;
    };
    let (before, after_move) = (
        value["before_move"].as_u64().unwrap(),
        value["after_move"].as_u64().unwrap(),
    );
    assert!(after_move > before + 100, "{value:#}");
}
