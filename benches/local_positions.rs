//! What a new user of the embedded model feels: `cargo bench --bench
//! local_positions` (needs the default model: `fettle model fetch`).
//!
//! Real files (several of this repository's Rust sources and Python's
//! `fractions.py`/`statistics.py` from the standard library) are open in
//! the real binary with the default configuration. At seeded random
//! positions the user opens a new line below a line of code (`o` in Vim)
//! and a completion is asked for there: the **first completion at a new
//! position**. Then three characters are typed, a completion after each
//! (**typing at one spot**); at some positions an invoked request (several
//! items) is made; finally, four times, the user completes in one file,
//! then in two others, then goes back to the first, just below where they
//! were (**switching back**). Then the user moves to a new place, looks
//! for two seconds (the editor reports the cursor: `fettle/cursor`), and
//! opens a line there (**new position after a pause**: the warm-up has
//! run), and after 0.4 s types a character (**typing after a short
//! pause**: a warm-up may be running and must yield). The prompt tokens of
//! each first completion (`fettle/stats` `localModel`) show how much
//! context it had. Single-line completions
//! (`completion.multiline = "never"`) so that every sample is one line of
//! generation.
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "../tests/it/e2e/harness.rs"]
#[allow(dead_code)] // the benches use part of the test harness
mod harness;

#[path = "common/latency.rs"]
mod latency;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use harness::{file_uri, Lsp};
use latency::{percentiles, report};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// New positions visited (spread over the files).
const POSITIONS: usize = 24;
/// Of which this many also get an invoked request.
const INVOKED: usize = 6;
/// New positions visited after a pause.
const PAUSED: usize = 16;
/// How long the user looks before typing at a new position.
const LOOK: Duration = Duration::from_millis(2000);
/// A short pause in typing: a warm-up (after 250 ms) has started.
const SHORT_PAUSE: Duration = Duration::from_millis(400);

struct Buffer {
    uri: String,
    lines: Vec<String>,
    version: i64,
}

impl Buffer {
    /// Inserts `text` at (`line`, `col`) and tells the server.
    fn insert(&mut self, lsp: &mut Lsp, line: usize, col: usize, text: &str) {
        self.version += 1;
        lsp.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": self.uri, "version": self.version },
                    "contentChanges": [ { "range": {
                        "start": { "line": line, "character": col },
                        "end": { "line": line, "character": col } }, "text": text } ] }),
        );
        let current = self.lines[line].clone();
        let (before, after) = current.split_at(col);
        let joined = format!("{before}{text}{after}");
        let parts: Vec<String> = joined.split('\n').map(str::to_owned).collect();
        self.lines.splice(line..=line, parts);
    }

    /// A line with code (not blank, not a comment or decorator) that is
    /// not inside a docstring's first lines, chosen by `rng`.
    fn code_line(&self, rng: &mut fastrand::Rng) -> usize {
        loop {
            let line = rng.usize(5..self.lines.len().saturating_sub(5).max(6));
            let text = self.lines[line].trim();
            if text.len() > 8
                && !text.starts_with('#')
                && !text.starts_with("//")
                && !text.starts_with('@')
                && !text.starts_with("\"\"\"")
                && !text.ends_with(',')
            {
                return line;
            }
        }
    }
}

fn main() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().canonicalize()?;
    let files = write_workspace(&root)?;
    // FETTLE_BENCH_LOG=fettle=debug prints each local generation's counters
    // (prompt tokens, reused, prefill, first token) at the end.
    let log = std::env::var("FETTLE_BENCH_LOG").unwrap_or_else(|_| "warn".to_owned());
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_LOG", log.as_str())]);
    lsp.initialize(
        &root,
        Lsp::capabilities(&["utf-8"]),
        Some(json!({ "completion": { "multiline": "never" } })),
    );
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let mut buffers = Vec::new();
    for (path, language) in &files {
        let text = std::fs::read_to_string(root.join(path))?;
        let uri = file_uri(&root.join(path));
        lsp.open(&uri, language, &text);
        buffers.push(Buffer {
            uri,
            lines: text.split('\n').map(str::to_owned).collect(),
            version: 1,
        });
    }

    // The model loads on the first request; not a sample.
    let started = Instant::now();
    let line = buffers[0].code_line(&mut fastrand::Rng::with_seed(1));
    new_line_below(&mut lsp, &mut buffers[0], line, 2)?;
    println!("model load + first completion: {:?}", started.elapsed());

    let mut rng = fastrand::Rng::with_seed(2026);
    let (mut first, mut typing, mut invoked, mut single_at_invoked) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut first_tokens = Vec::new();
    for i in 0..POSITIONS {
        let b = i % buffers.len();
        let line = buffers[b].code_line(&mut rng);
        let (elapsed, at) = new_line_below(&mut lsp, &mut buffers[b], line, 2)?;
        first.push(elapsed);
        first_tokens.push(prompt_tokens(&mut lsp)?);
        // Typing three characters there.
        let (row, mut col) = at;
        for ch in ["x", " ", "="] {
            buffers[b].insert(&mut lsp, row, col, ch);
            col += 1;
            let started = Instant::now();
            complete(&mut lsp, &buffers[b].uri, row, col, 2)?;
            typing.push(started.elapsed());
        }
        if i < INVOKED {
            // Another new position, asked for explicitly (several items),
            // against the automatic request at the same kind of spot.
            let line = buffers[b].code_line(&mut rng);
            let (auto, at) = new_line_below(&mut lsp, &mut buffers[b], line, 2)?;
            single_at_invoked.push(auto);
            buffers[b].insert(&mut lsp, at.0, at.1, "y");
            let started = Instant::now();
            complete(&mut lsp, &buffers[b].uri, at.0, at.1 + 1, 1)?;
            invoked.push(started.elapsed());
        }
    }
    // Switching back: a completion in the first file, then one in each of
    // two other files, then back to the first, just below where the user
    // was (a file edited a moment ago).
    let mut back = Vec::new();
    for _ in 0..4 {
        let line = buffers[0].code_line(&mut rng);
        let (_, at) = new_line_below(&mut lsp, &mut buffers[0], line, 2)?;
        for other in [1, 3] {
            let line = buffers[other].code_line(&mut rng);
            new_line_below(&mut lsp, &mut buffers[other], line, 2)?;
        }
        let (elapsed, _) = new_line_below(&mut lsp, &mut buffers[0], at.0, 2)?;
        back.push(elapsed);
    }
    // A new place after a look around (the warm-up runs meanwhile), then
    // a keystroke after a short pause.
    let (mut paused, mut paused_tokens) = (Vec::new(), Vec::new());
    let (mut without_pause, mut after_short_pause) = (Vec::new(), Vec::new());
    for i in 0..PAUSED {
        let b = i % buffers.len();
        let line = buffers[b].code_line(&mut rng);
        lsp.notify(
            "fettle/cursor",
            json!({ "textDocument": { "uri": buffers[b].uri },
                    "position": { "line": line, "character": 0 } }),
        );
        std::thread::sleep(LOOK);
        let (elapsed, (row, col)) = new_line_below(&mut lsp, &mut buffers[b], line, 2)?;
        paused.push(elapsed);
        paused_tokens.push(prompt_tokens(&mut lsp)?);
        // A keystroke at once, then one after a short pause (a warm-up
        // has started and must yield): the same kind of spot, with and
        // without a warm-up in the way.
        buffers[b].insert(&mut lsp, row, col, "z");
        let started = Instant::now();
        complete(&mut lsp, &buffers[b].uri, row, col + 1, 2)?;
        without_pause.push(started.elapsed());
        std::thread::sleep(SHORT_PAUSE);
        buffers[b].insert(&mut lsp, row, col + 1, "z");
        let started = Instant::now();
        complete(&mut lsp, &buffers[b].uri, row, col + 2, 2)?;
        after_short_pause.push(started.elapsed());
    }
    let stats = lsp
        .request("fettle/stats", json!({}))
        .map_err(|e| e.to_string())?;
    println!(
        "== embedded model (SmolLM2-135M), {} files, single-line completions",
        buffers.len()
    );
    report("first completion at a new position", first);
    report("typing at one spot (a completion per keystroke)", typing);
    report(
        "automatic request at a new position (paired with the invoked ones)",
        single_at_invoked,
    );
    report("invoked request (several items) at a new position", invoked);
    report(
        "back in a file after completing in two others, below where the user was",
        back,
    );
    report("new position after a 2 s look (warmed)", paused);
    report("typing there, the next keystroke at once", without_pause);
    report("typing there after a 0.4 s pause", after_short_pause);
    tokens(
        "prompt tokens, first completion at a new position",
        first_tokens,
    );
    tokens(
        "prompt tokens, new position after a 2 s look",
        paused_tokens,
    );
    println!(
        "  tokens evaluated by warm-ups: {}",
        stats["localModel"]["warmedTokens"]
    );
    percentiles("server overhead (fettle/stats)", &stats["serverOverheadMs"]);
    for line in lsp
        .stderr()
        .lines()
        .filter(|l| l.contains("local generation") || l.contains("local warm-up"))
    {
        println!("  {line}");
    }
    let status = lsp.shutdown_and_exit();
    if !status.success() {
        return Err(format!("fettle exited with {status}").into());
    }
    Ok(())
}

/// The user opens a new line below `line` with its indentation (Vim's `o`)
/// and a completion is asked for at its end. Returns the completion's
/// latency and the new line's (row, column).
fn new_line_below(
    lsp: &mut Lsp,
    buffer: &mut Buffer,
    line: usize,
    trigger: u32,
) -> Result<(Duration, (usize, usize))> {
    let text = buffer.lines[line].clone();
    let indent: String = text.chars().take_while(|c| c.is_whitespace()).collect();
    let col = text.len();
    buffer.insert(lsp, line, col, &format!("\n{indent}"));
    let at = (line + 1, indent.len());
    let started = Instant::now();
    complete(lsp, &buffer.uri, at.0, at.1, trigger)?;
    Ok((started.elapsed(), at))
}

/// The prompt tokens of the embedded model's last request.
fn prompt_tokens(lsp: &mut Lsp) -> Result<u64> {
    let stats = lsp
        .request("fettle/stats", json!({}))
        .map_err(|e| e.to_string())?;
    stats["localModel"]["promptTokens"]
        .as_u64()
        .ok_or_else(|| format!("no localModel.promptTokens in {stats}").into())
}

/// p50 and p90 of token counts.
fn tokens(label: &str, mut counts: Vec<u64>) {
    counts.sort_unstable();
    let at = |q: f64| counts[((counts.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "  {label}: p10 {}, p50 {}, p90 {} (n = {})",
        at(0.1),
        at(0.5),
        at(0.9),
        counts.len()
    );
}

fn complete(lsp: &mut Lsp, uri: &str, line: usize, character: usize, kind: u32) -> Result<Value> {
    lsp.request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character },
                "context": { "triggerKind": kind } }),
    )
    .map_err(|e| format!("inlineCompletion failed: {e}").into())
}

/// Copies the real files into `root`; returns their paths and languages.
fn write_workspace(root: &Path) -> Result<Vec<(PathBuf, &'static str)>> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for rel in [
        "src/edit/mod.rs",
        "src/completion/engine/mod.rs",
        "src/lsp/server.rs",
    ] {
        let to = root.join(rel);
        std::fs::create_dir_all(to.parent().ok_or("a path without a parent")?)?;
        std::fs::copy(repo.join(rel), &to)?;
        files.push((PathBuf::from(rel), "rust"));
    }
    let stdlib = std::process::Command::new("python3")
        .args([
            "-c",
            "import fractions, os; print(os.path.dirname(fractions.__file__))",
        ])
        .output()?;
    let stdlib = PathBuf::from(String::from_utf8(stdlib.stdout)?.trim());
    for name in ["fractions.py", "statistics.py"] {
        let to = root.join("py").join(name);
        std::fs::create_dir_all(to.parent().ok_or("a path without a parent")?)?;
        std::fs::copy(stdlib.join(name), &to)?;
        files.push((PathBuf::from("py").join(name), "python"));
    }
    Ok(files)
}
