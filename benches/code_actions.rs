//! Inline edits over the real binary's stdio: `cargo bench --bench code_actions`.
//!
//! 1. `textDocument/codeAction` on a 10,000-line Python file (a 5-line
//!    selection with two diagnostics, at spread-out lines): the client-side
//!    round trip, which bounds the server's own time.
//! 2. `fettle.rewrite` of a 200-line function with a mock model that answers
//!    at once (one changed line): the rewrite's own overhead — everything
//!    but the model — as the server measures it (`fettle/stats` `edit.serverMs`),
//!    and the client's round trip.
//! 3. `-- --local`: the embedded model (SmolLM2-135M) rewriting a 10-line
//!    function, three times (the first loads the model).

#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "../tests/it/e2e/harness.rs"]
#[allow(dead_code)] // the benches use part of the test harness
mod harness;

#[path = "common/latency.rs"]
mod latency;

use std::path::Path;
use std::time::Instant;

use fettle::mock::{MockServer, Script, ScriptedResponse};
use serde_json::json;

use harness::{file_uri, Lsp};
use latency::{percentiles, report};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const LINES: usize = 10_000;
const LISTINGS: usize = 2_000;
const REWRITES: usize = 40;
const LONG_FUNCTION: usize = 200;

const AVERAGE: &str = "def average(values):\n    total = 0\n    count = 0\n    for v in values:\n        total = total + v\n        count = count + 1\n    if count == 0:\n        return 0\n    result = total / count\n    return result\n";

fn main() -> Result<()> {
    let local = std::env::args().any(|a| a == "--local");
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().canonicalize()?;
    let (big, long_start) = big_file(LINES);
    std::fs::write(root.join("big.py"), &big)?;
    listing(&root, &big)?;
    rewrites(&root, &big, long_start)?;
    let (small, long_start) = big_file(1_000);
    std::fs::write(root.join("big.py"), &small)?;
    rewrites(&root, &small, long_start)?;
    if local {
        local_model(&root)?;
    }
    Ok(())
}

/// `lines` lines of small functions, with one 200-line function in the
/// middle; returns the text and the long function's first line.
fn big_file(lines: usize) -> (String, usize) {
    let mut text = String::from("import math\n\n\n");
    let mut n = 0;
    let mut long_start = 0;
    while text.lines().count() < lines {
        if n == lines / 20 {
            long_start = text.lines().count();
            text.push_str(&long_function(0));
            text.push_str("\n\n");
        }
        text.push_str(&format!(
            "def compute_{n}(a, b):\n    total = a + b\n    scaled = total * {n}\n    return scaled - 1\n\n\n"
        ));
        n += 1;
    }
    (text, long_start)
}

fn long_function(marker: usize) -> String {
    let mut f = String::from("def long_one(x):\n");
    for i in 0..LONG_FUNCTION - 2 {
        if i == LONG_FUNCTION / 2 {
            f.push_str(&format!("    marker = {marker}\n"));
        } else {
            f.push_str(&format!("    x = x + {i}\n"));
        }
    }
    f.push_str("    return x\n");
    f
}

fn listing(root: &Path, big: &str) -> Result<()> {
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_LOG", "warn")]);
    lsp.initialize(root, Lsp::capabilities(&["utf-16"]), None);
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let uri = file_uri(&root.join("big.py"));
    lsp.open(&uri, "python", big);
    let mut samples = Vec::with_capacity(LISTINGS);
    for i in 0..LISTINGS {
        let line = 3 + (i * 7919) % (LINES - 10);
        let range = json!({ "start": { "line": line, "character": 0 }, "end": { "line": line + 5, "character": 0 } });
        let diagnostic = |source: &str, message: &str| {
            json!({ "range": { "start": { "line": line + 1, "character": 4 }, "end": { "line": line + 1, "character": 9 } },
                    "severity": 1, "source": source, "message": message })
        };
        let params = json!({ "textDocument": { "uri": uri }, "range": range,
            "context": { "triggerKind": 1, "diagnostics": [
                diagnostic("pyright", "\"total\" is not defined"),
                diagnostic("ruff", "F841 local variable is assigned to but never used"),
            ] } });
        let started = Instant::now();
        let actions = lsp
            .request("textDocument/codeAction", params)
            .map_err(|e| e.to_string())?;
        samples.push(started.elapsed());
        if actions.as_array().map_or(0, Vec::len) != 8 {
            return Err(format!("unexpected actions: {actions}").into());
        }
    }
    println!("== textDocument/codeAction, {LINES}-line file, 5-line selection, 2 diagnostics (8 actions)");
    let stats = lsp
        .request("fettle/stats", json!({}))
        .map_err(|e| e.to_string())?;
    percentiles(
        "server side (fettle/stats edit.listingMs)",
        &stats["edit"]["listingMs"],
    );
    report("round trip, client side", samples);
    lsp.shutdown_and_exit();
    Ok(())
}

fn rewrites(root: &Path, big: &str, long_start: usize) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    // Each answer changes the marker line, so every rewrite applies.
    let responses = (1..=REWRITES)
        .map(|i| ScriptedResponse::text(format!("```python\n{}```", long_function(i))))
        .collect();
    let server = runtime.block_on(MockServer::start(Script::new(responses)))?;
    let options = json!({
        "models": { "mock": { "provider": "openai", "base_url": format!("{}/v1", server.url()),
                              "model": "mock-coder", "max_retries": 0 } },
        "edit": { "model": "mock" },
    });
    // FETTLE_BENCH_LOG=debug prints where each rewrite's time went.
    let log = std::env::var("FETTLE_BENCH_LOG").unwrap_or_else(|_| "warn".to_owned());
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_LOG", log.as_str())]);
    let mut caps = Lsp::capabilities(&["utf-16"]);
    caps["workspace"]["applyEdit"] = json!(true);
    lsp.initialize(root, caps, Some(options));
    lsp.apply_edits = true;
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let uri = file_uri(&root.join("big.py"));
    lsp.open(&uri, "python", big);
    let range = json!({ "start": { "line": long_start, "character": 0 },
                        "end": { "line": long_start + LONG_FUNCTION, "character": 0 } });
    let mut samples = Vec::new();
    for _ in 0..REWRITES {
        let started = Instant::now();
        let result = lsp
            .request(
                "workspace/executeCommand",
                json!({ "command": "fettle.rewrite", "arguments": [ {
                    "uri": uri, "range": range, "instruction": "change the marker" } ] }),
            )
            .map_err(|e| e.to_string())?;
        samples.push(started.elapsed());
        if result["applied"] != true {
            return Err(format!("rewrite not applied: {result}").into());
        }
    }
    let stats = lsp
        .request("fettle/stats", json!({}))
        .map_err(|e| e.to_string())?;
    println!(
        "== fettle.rewrite of a {LONG_FUNCTION}-line function in a {}-line file, mock model answering at once",
        big.lines().count()
    );
    percentiles(
        "server's own time (fettle/stats edit.serverMs)",
        &stats["edit"]["serverMs"],
    );
    percentiles("model time (edit.modelMs)", &stats["edit"]["modelMs"]);
    percentiles(
        "waiting for the editor (edit.editorMs)",
        &stats["edit"]["editorMs"],
    );
    report(
        "round trip, client side (applyEdit and didChange included)",
        samples,
    );
    for line in lsp.stderr().lines().filter(|l| {
        l.contains("where the time went")
            || l.contains("rewrite ready")
            || l.contains("prompt built")
    }) {
        println!("  {line}");
    }
    lsp.shutdown_and_exit();
    Ok(())
}

fn local_model(root: &Path) -> Result<()> {
    std::fs::write(root.join("stats.py"), AVERAGE)?;
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_LOG", "warn")]);
    let mut caps = Lsp::capabilities(&["utf-16"]);
    caps["workspace"]["applyEdit"] = json!(true);
    lsp.initialize(root, caps, None);
    lsp.apply_edits = true;
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let uri = file_uri(&root.join("stats.py"));
    println!("== embedded model (SmolLM2-135M): rewrite a 10-line function (\"Add a docstring\")");
    for run in 0..3 {
        lsp.open(&uri, "python", AVERAGE);
        let started = Instant::now();
        let result = lsp
            .request(
                "workspace/executeCommand",
                json!({ "command": "fettle.rewrite", "arguments": [ {
                    "uri": uri, "range": { "start": { "line": 0, "character": 0 }, "end": { "line": 10, "character": 0 } },
                    "instruction": "Add a docstring to this function." } ] }),
            )
            .map_err(|e| e.to_string())?;
        println!(
            "  run {}: {:.2} s, applied {}, {}",
            run + 1,
            started.elapsed().as_secs_f64(),
            result["applied"],
            result["summary"]
        );
        lsp.notify(
            "textDocument/didClose",
            json!({ "textDocument": { "uri": uri } }),
        );
    }
    let stats = lsp
        .request("fettle/stats", json!({}))
        .map_err(|e| e.to_string())?;
    percentiles("server's own time", &stats["edit"]["serverMs"]);
    percentiles("model time", &stats["edit"]["modelMs"]);
    lsp.shutdown_and_exit();
    Ok(())
}
