//! Inline completion over the real binary's stdio: `cargo bench --bench completion`.
//!
//! A 500-file workspace with one 10k-line file; the mock model server
//! answers instantly, so what is measured is Fettle: the server's own
//! overhead per completion (request received → response sent, minus the
//! time waiting for the model, as the server measures it in `fettle/stats`),
//! the client-side round trip, and typing-through cache hits.
//! Then the round trip the editor sees in three situations (at once after
//! an edit, idle, 200 ms after an edit), memory over 1,000 completions, and
//! the mock's own round trip ([`round_trip`]); `-- --llm-ls PATH` runs the
//! same against huggingface/llm-ls (`benches/llm_ls.sh` builds it), servers
//! alternating. `-- --count N` sets the completions per situation (300);
//! `-- --only at-once|idle|after-edit|memory` runs one of them;
//! `-- --round-trip-only` skips the server-overhead and typing phases.
//! `-- --local` also measures the embedded model end to end: a cold
//! completion, then one per keystroke while typing a line character by
//! character.

#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "../tests/it/e2e/harness.rs"]
#[allow(dead_code)] // the benches use part of the test harness
mod harness;

#[path = "common/latency.rs"]
mod latency;

#[path = "completion/round_trip.rs"]
mod round_trip;

use std::path::Path;
use std::time::Instant;

use fettle::mock::{MockServer, Script, ScriptedResponse};
use serde_json::{json, Value};

use harness::{file_uri, Lsp};
use latency::{percentiles, report};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const FILES: usize = 500;
const BIG_LINES: usize = 10_000;
const COMPLETIONS: usize = 300;
const TYPING_HITS: usize = 200;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let local = args.iter().any(|a| a == "--local");
    let count = match value("--count") {
        Some(n) => n.parse()?,
        None => COMPLETIONS,
    };
    let mut servers = vec![round_trip::Server::Fettle];
    if let Some(path) = value("--llm-ls") {
        servers.push(round_trip::Server::LlmLs(path.into()));
    }
    let tmp = tempfile::tempdir()?;
    // The workspace one level down: llm-ls gets a home beside it.
    let root = tmp.path().canonicalize()?.join("ws");
    let big = write_workspace(&root)?;
    if !args.iter().any(|a| a == "--round-trip-only") {
        mock_phase(&root, &big)?;
    }
    let mock = mock()?;
    let only = value("--only").map(String::as_str);
    round_trip::run(
        &servers,
        &root,
        &big,
        BIG_LINES,
        &mock.server.url(),
        count,
        only,
    )?;
    if local {
        local_phase(&root, &big)?;
    }
    Ok(())
}

/// 499 small modules and one big file of functions.
fn write_workspace(root: &Path) -> Result<String> {
    std::fs::create_dir_all(root.join("src"))?;
    for i in 0..FILES - 1 {
        std::fs::write(
            root.join(format!("src/module_{i}.rs")),
            format!(
                "pub struct Record{i} {{\n    pub id: u64,\n    pub name: String,\n}}\n\nimpl Record{i} {{\n    pub fn score(&self) -> u64 {{\n        self.id * {i}\n    }}\n}}\n"
            ),
        )?;
    }
    let mut big = String::new();
    let mut n = 0;
    while big.lines().count() < BIG_LINES {
        big.push_str(&format!(
            "pub fn compute_{n}(a: u64, b: u64) -> u64 {{\n    let total = a + b;\n    let scaled = total * {n};\n    scaled - 1\n}}\n\n"
        ));
        n += 1;
    }
    std::fs::write(root.join("src/big.rs"), &big)?;
    Ok(big)
}

struct Mock {
    server: MockServer,
    _runtime: tokio::runtime::Runtime,
}

fn mock() -> Result<Mock> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let server = runtime.block_on(MockServer::start(Script::new(vec![ScriptedResponse {
        repeat: true,
        ..ScriptedResponse::text("total.saturating_mul(b);\n")
    }])))?;
    Ok(Mock {
        server,
        _runtime: runtime,
    })
}

fn mock_phase(root: &Path, big: &str) -> Result<()> {
    let mock = mock()?;
    let options = json!({
        "models": { "mock": { "provider": "openai", "base_url": format!("{}/v1", mock.server.url()),
                              "model": "starcoder2-3b", "fim_template": "starcoder", "max_retries": 0 } },
        "completion": { "model": "mock" },
    });
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_LOG", "warn")]);
    lsp.initialize(root, Lsp::capabilities(&["utf-16"]), Some(options));
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let uri = file_uri(&root.join("src/big.rs"));
    lsp.open(&uri, "rust", big);

    // Each completion on a fresh line (so nothing comes from the cache):
    // insert "    let vN = " at the start of a function body and complete there.
    let mut version = 1;
    let mut round_trips = Vec::new();
    for i in 0..COMPLETIONS {
        let line = 1 + (i * 97 % (BIG_LINES / 6 - 1)) * 6;
        let typed = format!("    let v{i} = \n");
        version += 1;
        lsp.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version },
                    "contentChanges": [ { "range": { "start": { "line": line, "character": 0 }, "end": { "line": line, "character": 0 } }, "text": typed } ] }),
        );
        let started = Instant::now();
        let result = complete(&mut lsp, &uri, line, typed.len() as u32 - 1)?;
        round_trips.push(started.elapsed());
        if result["items"].as_array().map_or(0, Vec::len) != 1 {
            return Err(format!("no completion at line {line}: {result}").into());
        }
    }
    let stats = lsp
        .request("fettle/stats", json!({}))
        .map_err(|e| e.to_string())?;
    println!("== mock model answering instantly; {COMPLETIONS} completions in a {BIG_LINES}-line file, {FILES}-file workspace");
    percentiles("server overhead (fettle/stats)", &stats["serverOverheadMs"]);
    percentiles("model time (mock, over HTTP)", &stats["modelMs"]);
    percentiles("end to end, server side", &stats["endToEndMs"]);
    report("round trip, client side", round_trips);

    // Typing through: type the suggestion's first characters one by one.
    let mut hits = Vec::new();
    for i in 0..TYPING_HITS {
        let line = 3 + (i * 89 % (BIG_LINES / 6 - 1)) * 6;
        let typed = format!("    let w{i} = \n");
        version += 1;
        lsp.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version },
                    "contentChanges": [ { "range": { "start": { "line": line, "character": 0 }, "end": { "line": line, "character": 0 } }, "text": typed } ] }),
        );
        let col = typed.len() as u32 - 1;
        complete(&mut lsp, &uri, line, col)?;
        version += 1;
        lsp.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version },
                    "contentChanges": [ { "range": { "start": { "line": line, "character": col }, "end": { "line": line, "character": col } }, "text": "t" } ] }),
        );
        let started = Instant::now();
        let result = complete(&mut lsp, &uri, line, col + 1)?;
        hits.push(started.elapsed());
        if result["items"][0]["insertText"] != "otal.saturating_mul(b);" {
            return Err(format!("typing through missed: {result}").into());
        }
    }
    let stats = lsp
        .request("fettle/stats", json!({}))
        .map_err(|e| e.to_string())?;
    println!("== typing through a shown suggestion ({TYPING_HITS} hits; the mock saw {} requests in all)", mock.server.requests().len());
    percentiles(
        "cache hit, server side (fettle/stats)",
        &stats["cacheHitMs"],
    );
    report("cache hit, round trip, client side", hits);
    let status = lsp.shutdown_and_exit();
    if !status.success() {
        return Err(format!("fettle exited with {status}").into());
    }
    Ok(())
}

fn local_phase(root: &Path, big: &str) -> Result<()> {
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_LOG", "warn")]);
    lsp.initialize(
        root,
        Lsp::capabilities(&["utf-16"]),
        Some(json!({ "completion": { "multiline": "never" } })),
    );
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let uri = file_uri(&root.join("src/big.rs"));
    lsp.open(&uri, "rust", big);
    // Cold: the first completions load the model and fill the KV cache.
    let mut cold = Vec::new();
    let mut version = 1;
    for i in 0..3 {
        let line = 1 + i * 600;
        let typed = "    let extra = \n";
        version += 1;
        lsp.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version },
                    "contentChanges": [ { "range": { "start": { "line": line, "character": 0 }, "end": { "line": line, "character": 0 } }, "text": typed } ] }),
        );
        let started = Instant::now();
        complete(&mut lsp, &uri, line, typed.len() as u32 - 1)?;
        cold.push(started.elapsed());
    }
    // Typing a line character by character, completing after each key.
    let line = 1 + 3 * 600;
    let text = "    let product = a.saturating_mul(b).max(total);";
    version += 1;
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": version },
                "contentChanges": [ { "range": { "start": { "line": line, "character": 0 }, "end": { "line": line, "character": 0 } }, "text": "\n" } ] }),
    );
    let mut typing = Vec::new();
    for (col, ch) in text.chars().enumerate() {
        version += 1;
        lsp.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version },
                    "contentChanges": [ { "range": { "start": { "line": line, "character": col }, "end": { "line": line, "character": col } }, "text": ch.to_string() } ] }),
        );
        let started = Instant::now();
        complete(&mut lsp, &uri, line, col as u32 + 1)?;
        typing.push(started.elapsed());
    }
    let stats = lsp
        .request("fettle/stats", json!({}))
        .map_err(|e| e.to_string())?;
    println!("== embedded model (SmolLM2-135M, single-line), real completions");
    report(
        "cold (first 3 completions, model load included in the first)",
        cold,
    );
    report(
        &format!(
            "typing a {}-character line, a completion per keystroke",
            text.len()
        ),
        typing,
    );
    percentiles("server overhead (fettle/stats)", &stats["serverOverheadMs"]);
    println!(
        "  shown {} / requests {}, cache hits {}",
        stats["shown"], stats["requests"], stats["cacheHits"]
    );
    let status = lsp.shutdown_and_exit();
    if !status.success() {
        return Err(format!("fettle exited with {status}").into());
    }
    Ok(())
}

fn complete(lsp: &mut Lsp, uri: &str, line: usize, character: u32) -> Result<Value> {
    lsp.request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character },
                "context": { "triggerKind": 2 } }),
    )
    .map_err(|e| format!("inlineCompletion failed: {e}").into())
}
