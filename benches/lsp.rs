//! The real server over real stdio: `cargo bench --bench lsp`.
//!
//! Spawns the release `fettle` binary on a ≥ 100k-line tree of real code
//! (see `common::gather`) and measures what a client sees: time from
//! `initialized` to the indexing progress `end`, `workspace/symbol` round
//! trips, and the cost of single-character `didChange`s into a 1 MB file
//! (each followed by a cheap request, so the edit is known to be processed).
//! Uses the end-to-end test harness as its client.

#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "../tests/it/e2e/harness.rs"]
#[allow(dead_code)] // the benches use part of the test harness
mod harness;

mod common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::{gather, ms, Result};
use harness::{file_uri, Lsp};

const TARGET_LINES: usize = 100_000;
const EDITS: usize = 500;

fn main() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let (files, lines) = gather(tmp.path(), TARGET_LINES)?;
    let root = tmp.path().canonicalize()?;
    println!("tree: {files} files, {lines} lines of real code");

    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_LOG", "warn")]);
    let started = Instant::now();
    lsp.initialize(&root, Lsp::capabilities(&["utf-16"]), None);
    let end = lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    println!(
        "indexing as the client sees it (initialized → progress end): {:.0} ms ({})",
        ms(started.elapsed()),
        end["value"]["message"].as_str().unwrap_or("")
    );

    workspace_symbol(&mut lsp)?;
    did_change(&mut lsp, &root)?;
    let status = lsp.shutdown_and_exit();
    if !status.success() {
        return Err(format!("fettle exited with {status}").into());
    }
    Ok(())
}

fn request(lsp: &mut Lsp, method: &str, params: Value) -> Result<(Value, Duration)> {
    let start = Instant::now();
    let result = lsp
        .request(method, params)
        .map_err(|e| format!("{method} failed: {e}"))?;
    Ok((result, start.elapsed()))
}

fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pct = |p: f64| ms(samples[((samples.len() - 1) as f64 * p) as usize]);
    println!(
        "{label}: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms ({} samples)",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0),
        samples.len()
    );
}

/// Round trips of fuzzy queries built from real symbol names.
fn workspace_symbol(lsp: &mut Lsp) -> Result<()> {
    let (all, _) = request(lsp, "workspace/symbol", json!({ "query": "" }))?;
    let mut names: Vec<String> = all
        .as_array()
        .ok_or("workspace/symbol returned no list")?
        .iter()
        .filter_map(|s| s["name"].as_str().map(str::to_owned))
        .collect();
    // Nested names too: ask with each letter.
    for letter in 'a'..='z' {
        let (found, _) = request(
            lsp,
            "workspace/symbol",
            json!({ "query": letter.to_string() }),
        )?;
        names.extend(
            found
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["name"].as_str().map(str::to_owned)),
        );
    }
    names.sort();
    names.dedup();
    let queries: Vec<String> = names
        .iter()
        .flat_map(|n| {
            let chars: Vec<char> = n.chars().collect();
            [2, 4, 6]
                .into_iter()
                .filter(|&k| chars.len() > k)
                .map(|k| chars[..k].iter().collect())
                .collect::<Vec<String>>()
        })
        .take(300)
        .collect();
    let mut samples = Vec::new();
    let mut hits = 0;
    for round in 0..3 {
        for q in &queries {
            let (found, took) = request(lsp, "workspace/symbol", json!({ "query": q }))?;
            if round > 0 {
                samples.push(took);
                hits += found.as_array().map_or(0, Vec::len);
            }
        }
    }
    println!(
        "workspace/symbol over {} distinct names, avg {} hits",
        names.len(),
        hits / samples.len().max(1)
    );
    report(
        "workspace/symbol round trip (stdio, JSON, up to 128 results)",
        samples,
    );
    Ok(())
}

fn did_change(lsp: &mut Lsp, root: &std::path::Path) -> Result<()> {
    let snippet = "pub fn item_{n}(input: &[u8]) -> usize {\n    let mut total = 0usize; // 😀 {n}\n    for b in input {\n        total += *b as usize;\n    }\n    total\n}\n\n";
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 1 << 20 {
        text.push_str(&snippet.replace("{n}", &n.to_string()));
        n += 1;
    }
    let line_count = text.lines().count();
    let uri = file_uri(&root.join("big.rs"));
    lsp.open(&uri, "rust", &text);
    let (_, took) = request(
        lsp,
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": uri } }),
    )?;
    println!("1 MB file ({line_count} lines, {n} functions): first documentSymbol (full parse + tags) {:.0} ms", ms(took));

    // Baseline: the cheap request alone.
    let probe = json!({ "query": "zzzz_no_such_symbol" });
    let mut alone = Vec::new();
    for _ in 0..EDITS {
        alone.push(request(lsp, "workspace/symbol", probe.clone())?.1);
    }
    let mut with_edit = Vec::new();
    let mut version = 1;
    for i in 0..EDITS {
        // Type `x` at the start of a body line, then delete it: the text stays valid.
        let line = 1 + (i * 97) % (line_count - 2);
        version += 1;
        let (range, insert) = if i % 2 == 0 {
            (
                json!({ "start": { "line": line, "character": 4 }, "end": { "line": line, "character": 4 } }),
                "x",
            )
        } else {
            let prev = 1 + ((i - 1) * 97) % (line_count - 2);
            (
                json!({ "start": { "line": prev, "character": 4 }, "end": { "line": prev, "character": 5 } }),
                "",
            )
        };
        let start = Instant::now();
        lsp.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version },
                    "contentChanges": [ { "range": range, "text": insert } ] }),
        );
        let _ = lsp.request("workspace/symbol", probe.clone());
        with_edit.push(start.elapsed());
    }
    report("cheap request alone", alone);
    report(
        "didChange (1 char, 1 MB file) + the same request",
        with_edit,
    );
    let (_, took) = request(
        lsp,
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": uri } }),
    )?;
    println!(
        "documentSymbol after the edits (one incremental reparse + tags): {:.0} ms",
        ms(took)
    );
    Ok(())
}
