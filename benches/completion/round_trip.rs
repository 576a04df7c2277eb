//! The round trip an editor sees, side by side with another completion
//! server (huggingface/llm-ls, when `--llm-ls PATH` names a build of it):
//! the same workspace, the same open file, the same instant mock model, the
//! same client, servers alternating, every situation run `ROUNDS` times.
//!
//! Situations (each completion at a fresh place, so no cache answers; the
//! edit a new line typed before it, reported as an editor does: one change
//! ending at the cursor):
//! - `at once`: an edit, then the request at once (syntax errors pile up:
//!   each edit leaves an unfinished `let`);
//! - `idle`: the request 250 ms after the last edit (background work after
//!   an edit has settled), the line removed again afterwards (the file
//!   stays clean);
//! - `200 ms after an edit`: the same, 200 ms after the edit (where the
//!   diagnostics reparse, 150 ms after an edit, may still run).
//!
//! Then memory: RSS before and after 1,000 more completions, split into
//! anonymous and file-backed memory, and Fettle's heap pages (in use,
//! freed but still mapped) from `fettle/stats`.
//! The mock's own round trip (a direct request, streamed and not) is
//! measured too, so it can be subtracted.
//!
//! The round trip is timed from the request written to the response read
//! off the server's stdout by the harness's reader thread, where an
//! editor's event loop (Neovim's, VS Code's) reads it; the harness then
//! hands it to the bench's thread, a second wake-up no editor has: that
//! time is printed too ("through the harness's hand-off").

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{file_uri, Lsp};
use super::latency::{percentiles, report};
use super::Result;

const ROUNDS: usize = 2;
const MEMORY_COMPLETIONS: usize = 1_000;
/// In the memory run, every this many completions one comes after a pause
/// long enough for the diagnostics and index refresh after an edit.
const PAUSE_EVERY: usize = 20;
const PAUSE_MS: u64 = 1_300;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Situation {
    AtOnce,
    Idle,
    AfterEdit200,
}

impl Situation {
    /// For `--only`.
    fn key(self) -> &'static str {
        match self {
            Situation::AtOnce => "at-once",
            Situation::Idle => "idle",
            Situation::AfterEdit200 => "after-edit",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Situation::AtOnce => "at once after an edit",
            Situation::Idle => "idle (250 ms after the last edit)",
            Situation::AfterEdit200 => "200 ms after an edit",
        }
    }

    fn wait(self) -> Option<Duration> {
        match self {
            Situation::AtOnce => None,
            Situation::Idle => Some(Duration::from_millis(250)),
            Situation::AfterEdit200 => Some(Duration::from_millis(200)),
        }
    }
}

#[derive(Clone)]
pub enum Server {
    Fettle,
    LlmLs(PathBuf),
}

impl Server {
    fn name(&self) -> &'static str {
        match self {
            Server::Fettle => "fettle",
            Server::LlmLs(_) => "llm-ls",
        }
    }
}

/// One server, started, the big file open.
struct Session {
    server: Server,
    lsp: Lsp,
    uri: String,
    version: i64,
    mock_url: String,
    /// Each line's length in UTF-16 code units, as the edits leave them.
    line_lengths: Vec<usize>,
}

impl Session {
    fn start(server: &Server, root: &Path, big: &str, mock_url: &str) -> Session {
        let mut lsp = match server {
            Server::Fettle => {
                let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_LOG", "warn")]);
                let options = json!({
                    "models": { "mock": { "provider": "openai", "base_url": format!("{mock_url}/v1"),
                                          "model": "starcoder2-3b", "fim_template": "starcoder", "max_retries": 0 } },
                    "completion": { "model": "mock" },
                });
                lsp.initialize(root, Lsp::capabilities(&["utf-16"]), Some(options));
                // The workspace index is built.
                lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
                lsp
            }
            Server::LlmLs(path) => {
                // Its log goes to ~/.cache/llm_ls: keep it out of the user's.
                let home = root.parent().unwrap_or(root).join("llm-ls-home");
                let home = home.to_string_lossy().into_owned();
                let mut lsp = Lsp::spawn_program(path, &[], &[("HOME", &home)], &[]);
                lsp.initialize(root, Lsp::capabilities(&["utf-16"]), None);
                lsp
            }
        };
        let uri = file_uri(&root.join("src/big.rs"));
        lsp.open(&uri, "rust", big);
        Session {
            server: server.clone(),
            lsp,
            uri,
            version: 1,
            mock_url: mock_url.to_string(),
            line_lengths: big.split('\n').map(|l| l.encode_utf16().count()).collect(),
        }
    }

    /// A new line `text` (no newline) at `line` (≥ 1), as an editor reports
    /// it typed there (`o`, then the text): one change at the end of the
    /// line above, a newline and the text, ending where the cursor is.
    fn insert_line(&mut self, line: usize, text: &str) {
        self.version += 1;
        let above = line - 1;
        let end = self.line_lengths[above];
        self.lsp.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": self.uri, "version": self.version },
                    "contentChanges": [ { "range": { "start": { "line": above, "character": end },
                                                     "end": { "line": above, "character": end } },
                                          "text": format!("\n{text}") } ] }),
        );
        self.line_lengths.insert(line, text.encode_utf16().count());
    }

    fn remove_line(&mut self, line: usize) {
        self.line_lengths.remove(line);
        self.version += 1;
        self.lsp.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": self.uri, "version": self.version },
                    "contentChanges": [ { "range": { "start": { "line": line, "character": 0 },
                                                     "end": { "line": line + 1, "character": 0 } }, "text": "" } ] }),
        );
    }

    /// One completion at (line, character); the client-side round trip to
    /// the response read, and to the response handed to this thread.
    fn complete(&mut self, line: usize, character: usize) -> Result<(Duration, Duration)> {
        let (method, params) = match &self.server {
            Server::Fettle => (
                "textDocument/inlineCompletion",
                json!({ "textDocument": { "uri": self.uri }, "position": { "line": line, "character": character },
                        "context": { "triggerKind": 2 } }),
            ),
            // What llm.nvim sends (starcoder FIM tokens; no tokenizer, so the
            // window is in bytes: 4096 bytes ≈ Fettle's 1,024 tokens).
            Server::LlmLs(_) => (
                "llm-ls/getCompletions",
                json!({ "textDocument": { "uri": self.uri }, "position": { "line": line, "character": character },
                        "ide": "neovim", "model": "starcoder2-3b", "backend": "openai",
                        "url": format!("{}/v1/completions", self.mock_url),
                        "fim": { "enabled": true, "prefix": "<fim_prefix>", "middle": "<fim_middle>", "suffix": "<fim_suffix>" },
                        "tokensToClear": ["<|endoftext|>"], "contextWindow": 4096,
                        "tlsSkipVerifyInsecure": false, "requestBody": { "max_tokens": 60, "temperature": 0.2 } }),
            ),
        };
        let (response, read, handed) = self.lsp.request_timed(method, params);
        if let Some(error) = response.get("error") {
            return Err(format!("{} {method} failed: {error}", self.server.name()).into());
        }
        let result = &response["result"];
        let answered = match self.server {
            Server::Fettle => result["items"].as_array().map_or(0, Vec::len),
            Server::LlmLs(_) => result["completions"].as_array().map_or(0, Vec::len),
        };
        if answered == 0 {
            return Err(format!(
                "{}: no completion at {line}:{character}: {result}",
                self.server.name()
            )
            .into());
        }
        Ok((read, handed))
    }

    /// Resident and peak memory, in MB.
    fn memory(&self) -> (f64, f64) {
        (self.status_mb("VmRSS:"), self.status_mb("VmHWM:"))
    }

    /// A field of the server's `/proc/PID/status`, in MB.
    fn status_mb(&self, name: &str) -> f64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.lsp.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    }

    /// The resident memory's parts, in MB: anonymous (heap, stacks) and
    /// file-backed (the binary's pages as they are first run).
    fn resident_parts(&self) -> [f64; 2] {
        [self.status_mb("RssAnon:"), self.status_mb("RssFile:")]
    }

    /// Fettle's heap pages in MB (2^20 bytes, as RSS): in use, dirty,
    /// muzzy; from `fettle/stats`.
    fn heap(&mut self) -> Option<[f64; 3]> {
        let Server::Fettle = self.server else {
            return None;
        };
        let stats = self.lsp.request("fettle/stats", json!({})).ok()?;
        let mb = |key: &str| stats["heapBytes"][key].as_f64().map(|b| b / 1_048_576.0);
        Some([mb("active")?, mb("dirty")?, mb("muzzy")?])
    }

    fn stop(mut self) -> Result<()> {
        let name = self.server.name();
        if let Server::LlmLs(_) = self.server {
            // tower-lsp (which llm-ls uses as is) refuses `"params": null`.
            let id = json!(1_000_000);
            self.lsp
                .send(&json!({ "jsonrpc": "2.0", "id": id, "method": "shutdown" }));
            self.lsp.response(&id);
            self.lsp
                .send(&json!({ "jsonrpc": "2.0", "method": "exit" }));
            // It goes on until its input ends.
            self.lsp.close_stdin();
            self.lsp.wait_exit();
            return Ok(());
        }
        let status = self.lsp.shutdown_and_exit();
        if !status.success() {
            return Err(format!("{name} exited with {status}").into());
        }
        Ok(())
    }
}

/// The places completions happen: the start of a function body, spread
/// over the file (`lines` lines of 6-line functions).
fn place(i: usize, lines: usize) -> usize {
    1 + (i * 97 % (lines / 6 - 1)) * 6
}

/// The round trips: (to the response read, to the response handed over).
type Samples = (Vec<Duration>, Vec<Duration>);

fn run_situation(
    session: &mut Session,
    situation: Situation,
    count: usize,
    lines: usize,
) -> Result<Samples> {
    let mut samples: Samples = (Vec::with_capacity(count), Vec::with_capacity(count));
    for i in 0..count {
        let line = place(i, lines);
        let typed = format!("    let v{i} = ");
        session.insert_line(line, &typed);
        if let Some(wait) = situation.wait() {
            std::thread::sleep(wait);
        }
        let (read, handed) = session.complete(line, typed.len())?;
        samples.0.push(read);
        samples.1.push(handed);
        if situation != Situation::AtOnce {
            session.remove_line(line);
        }
    }
    Ok(samples)
}

/// Everything, for each server; prints the tables.
pub fn run(
    servers: &[Server],
    root: &Path,
    big: &str,
    lines: usize,
    mock_url: &str,
    count: usize,
    only: Option<&str>,
) -> Result<()> {
    direct_mock(mock_url)?;
    let situations = [Situation::AtOnce, Situation::Idle, Situation::AfterEdit200]
        .into_iter()
        .filter(|s| only.is_none_or(|only| s.key() == only));
    for situation in situations {
        println!(
            "== round trip, client side: {} ({count} completions per server per round)",
            situation.label()
        );
        for round in 0..ROUNDS {
            // Alternate who goes first.
            let mut order: Vec<&Server> = servers.iter().collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for server in order {
                let mut session = Session::start(server, root, big, mock_url);
                let (rss_before, _) = session.memory();
                let (read, handed) = run_situation(&mut session, situation, count, lines)?;
                let (rss_after, peak) = session.memory();
                print_slowest(&read);
                report(&format!("{} round {}", server.name(), round + 1), read);
                report("  through the harness's hand-off", handed);
                println!("    RSS {rss_before:.1} → {rss_after:.1} MB (peak {peak:.1} MB)");
                if let Server::Fettle = server {
                    fettle_breakdown(&mut session)?;
                }
                session.stop()?;
            }
        }
    }
    if only.is_some_and(|only| only != "memory") {
        return Ok(());
    }
    println!(
        "== memory: {MEMORY_COMPLETIONS} completions after {PAUSE_EVERY} to warm up (at once after an edit; \
         every {PAUSE_EVERY}th after a {PAUSE_MS} ms pause, so background work after edits runs too)"
    );
    for server in servers {
        let mut session = Session::start(server, root, big, mock_url);
        // One batch like the measured ones, ending with a pause: the
        // background work after an edit (Fettle's first parse of the file
        // among it: the at-once edits cancel each analysis before) has run
        // once, so what follows measures growth, not the first parse.
        memory_batch(&mut session, 0, lines)?;
        let heap_before = session.heap();
        let parts_before = session.resident_parts();
        let (before, _) = session.memory();
        let started = Instant::now();
        for batch in 1..=MEMORY_COMPLETIONS / PAUSE_EVERY {
            memory_batch(&mut session, batch, lines)?;
        }
        let (after, peak) = session.memory();
        let heap_after = session.heap();
        let parts_after = session.resident_parts();
        println!(
            "  {}: RSS {before:.1} → {after:.1} MB (growth {:+.1} MB, peak {peak:.1} MB) in {:.1} s",
            server.name(),
            after - before,
            started.elapsed().as_secs_f64()
        );
        println!(
            "    resident: anonymous {:.1} → {:.1} MB, file-backed {:.1} → {:.1} MB",
            parts_before[0], parts_after[0], parts_before[1], parts_after[1]
        );
        if let (Some(b), Some(a)) = (heap_before, heap_after) {
            println!(
                "    heap: in use {:.1} → {:.1} MB; freed, still mapped: dirty {:.1} → {:.1}, \
                 muzzy {:.1} → {:.1} MB",
                b[0], a[0], b[1], a[1], b[2], a[2]
            );
        }
        session.stop()?;
    }
    Ok(())
}

/// `PAUSE_EVERY` completions: at once after an edit, but the last after
/// a pause long enough for the background work after an edit.
fn memory_batch(session: &mut Session, batch: usize, lines: usize) -> Result<()> {
    run_situation(session, Situation::AtOnce, PAUSE_EVERY - 1, lines)?;
    let line = place(batch, lines);
    session.insert_line(line, "    let pause = ");
    std::thread::sleep(Duration::from_millis(PAUSE_MS));
    session.complete(line, "    let pause = ".len())?;
    Ok(())
}

/// Where Fettle's time went, from `fettle/stats`.
fn fettle_breakdown(session: &mut Session) -> Result<()> {
    let stats = session
        .lsp
        .request("fettle/stats", json!({}))
        .map_err(|e| e.to_string())?;
    percentiles(
        "    server: request in → response out",
        &stats["endToEndMs"],
    );
    percentiles("    server: waiting for the model", &stats["modelMs"]);
    println!(
        "    prompts built ahead and sent: {} of {} requests",
        stats["preparedPrompts"], stats["requests"]
    );
    for stage in stats["stagesMs"].as_array().into_iter().flatten() {
        let name = stage["stage"].as_str().unwrap_or("?");
        percentiles(&format!("      {name}"), stage);
    }
    println!("    the slowest, server side (request number: total; stages in ms):");
    for slow in stats["slowest"].as_array().into_iter().flatten() {
        let stages: Vec<String> = slow["stages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| format!("{} {}", s["stage"].as_str().unwrap_or("?"), s["ms"]))
            .collect();
        println!(
            "      #{}: {} ms; {}; between stages {}",
            slow["request"],
            slow["totalMs"],
            stages.join(", "),
            slow["betweenStagesMs"]
        );
    }
    Ok(())
}

/// The five slowest round trips, client side, with their request numbers
/// (1 = the first), to set beside the server's own slowest.
fn print_slowest(samples: &[Duration]) {
    let mut numbered: Vec<(usize, Duration)> = samples
        .iter()
        .copied()
        .enumerate()
        .map(|(i, d)| (i + 1, d))
        .collect();
    numbered.sort_by_key(|n| std::cmp::Reverse(n.1));
    let slowest: Vec<String> = numbered
        .iter()
        .take(5)
        .map(|(n, d)| format!("#{n} {:.3}", d.as_secs_f64() * 1000.0))
        .collect();
    println!("    the slowest, client side (ms): {}", slowest.join(", "));
}

/// The mock's own round trip from this process: what any server must spend
/// at least to reach it (reqwest, keep-alive, loopback).
fn direct_mock(mock_url: &str) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
    // One request, to the last byte: (the time it took, the answer).
    let ask = |body: &serde_json::Value| -> Result<(Duration, String)> {
        let started = Instant::now();
        let text = runtime.block_on(async {
            client
                .post(format!("{mock_url}/v1/completions"))
                .json(body)
                .send()
                .await?
                .text()
                .await
        })?;
        if !text.contains("saturating_mul") {
            return Err(format!("the mock answered {text}").into());
        }
        Ok((started.elapsed(), text))
    };
    println!("== the mock model, asked directly (reqwest, keep-alive, 300 requests each)");
    // A prompt the size of a completion's (Fettle's 1,024-token window).
    let big_prompt = format!(
        "<fim_prefix>{}<fim_suffix>\n}}<fim_middle>",
        "    let total = a + b;\n".repeat(180)
    );
    for (stream, prompt) in [
        (false, "small"),
        (true, "small"),
        (false, "4 KB"),
        (true, "4 KB"),
    ] {
        let text = if prompt == "small" {
            "<fim_prefix>fn main() {\n    let v = <fim_suffix>\n}<fim_middle>"
        } else {
            big_prompt.as_str()
        };
        let body = json!({ "model": "starcoder2-3b", "prompt": text,
                           "max_tokens": 60, "temperature": 0.2, "stream": stream });
        let mut samples = Vec::new();
        for i in 0..320 {
            let (took, _) = ask(&body)?;
            // The first ones open the connection and warm up.
            if i >= 20 {
                samples.push(took);
            }
        }
        let how = if stream {
            "streamed (SSE), to the last byte"
        } else {
            "not streamed"
        };
        report(&format!("{how}, {prompt} prompt"), samples);
    }
    // As a server asks after the user paused: the machine idle before each.
    let body = json!({ "model": "starcoder2-3b", "prompt": big_prompt,
                       "max_tokens": 60, "temperature": 0.2, "stream": true });
    let mut samples = Vec::new();
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(250));
        samples.push(ask(&body)?.0);
    }
    report("streamed, 4 KB prompt, each after 250 ms idle", samples);
    Ok(())
}
