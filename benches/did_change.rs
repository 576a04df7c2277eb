//! `didChange` latency: single-character edits into a ~1 MB Rust file,
//! through `Document::apply_changes` with UTF-16 positions, including the
//! incremental reparse, on a ~1 MB and a ~128 KB file. Run with
//! `cargo bench --bench did_change`.
use std::time::{Duration, Instant};

use fettle::document::Document;
use fettle::position::PositionEncoding;
use fettle::syntax::{self, Language};
use tower_lsp::lsp_types::{Position, Range, TextDocumentContentChangeEvent, Url};

const EDITS: usize = 2000;

/// A realistic chunk of Rust; `{n}` makes every copy's names unique.
const SNIPPET: &str = r#"
/// Accumulates readings for sensor {n} (°C, 日本 😀).
#[derive(Debug, Clone, Default)]
pub struct Sensor{n} {
    name: String,
    readings: Vec<f64>,
    limit: Option<f64>,
}

impl Sensor{n} {
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), readings: Vec::with_capacity(16), limit: None }
    }

    pub fn push(&mut self, value: f64) -> Result<(), String> {
        if let Some(limit) = self.limit {
            if value > limit {
                return Err(format!("{}: {value} exceeds {limit}", self.name));
            }
        }
        self.readings.push(value);
        Ok(())
    }

    pub fn mean(&self) -> Option<f64> {
        if self.readings.is_empty() {
            return None;
        }
        let sum: f64 = self.readings.iter().sum();
        Some(sum / self.readings.len() as f64)
    }
}

pub fn summarize_{n}(sensors: &[Sensor{n}]) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for sensor in sensors {
        match sensor.mean() {
            Some(mean) if mean.is_finite() => out.push((sensor.name.clone(), mean)),
            Some(_) | None => continue,
        }
    }
    out.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal));
    out
}
"#;

fn source(target_bytes: usize) -> String {
    let mut text = String::from("use std::fmt;\n");
    let mut n = 0;
    while text.len() < target_bytes {
        text.push_str(&SNIPPET.replace("{n}", &n.to_string()));
        n += 1;
    }
    text
}

/// xorshift64: deterministic, dependency-free edit positions.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn change(start: Position, end: Position, text: &str) -> TextDocumentContentChangeEvent {
    TextDocumentContentChangeEvent {
        range: Some(Range::new(start, end)),
        range_length: None,
        text: text.to_owned(),
    }
}

/// Times `EDITS` edits: type an `x` somewhere, then delete it again;
/// `reparse` picks `apply_changes` over `apply_changes_deferred`.
fn run_edits(doc: &mut Document, reparse: bool) -> Vec<Duration> {
    let enc = PositionEncoding::Utf16;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut times = Vec::with_capacity(EDITS);
    let mut version = doc.version;
    while times.len() < EDITS {
        let at = doc.position_of(rng.below(doc.len_bytes()), enc);
        let after = Position::new(at.line, at.character + 1);
        for edit in [change(at, at, "x"), change(at, after, "")] {
            version += 1;
            let start = Instant::now();
            let result = if reparse {
                doc.apply_changes(version, &[edit], enc)
            } else {
                doc.apply_changes_deferred(version, &[edit], enc)
            };
            times.push(start.elapsed());
            if let Err(err) = result {
                eprintln!("edit rejected: {err}");
                std::process::exit(1);
            }
        }
    }
    times
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn report(label: &str, mut times: Vec<Duration>) {
    times.sort();
    let pct = |p: f64| micros(times[((times.len() - 1) as f64 * p).round() as usize]);
    println!(
        "{label}: median {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        times.last().map_or(0.0, |d| micros(*d)),
    );
}

fn bench_size(target_bytes: usize) {
    let text = source(target_bytes);
    let Ok(uri) = Url::parse("file:///bench/big.rs") else {
        eprintln!("bad bench URI");
        std::process::exit(1);
    };
    let start = Instant::now();
    let doc = Document::new(uri, "rust".into(), 1, &text);
    let open = start.elapsed();
    let start = Instant::now();
    let full = syntax::parse_rope(Language::Rust, &doc.rope, None);
    let full_parse = start.elapsed();
    let Some(tree) = doc.tree.as_ref().filter(|_| full.is_some()) else {
        eprintln!("no tree: the Rust grammar did not parse, so the reparse is not measured");
        std::process::exit(1);
    };
    println!(
        "{:.2} MB of Rust, {} lines, {} top-level items: open {:.1} ms (full parse alone {:.1} ms)",
        text.len() as f64 / 1e6,
        text.lines().count(),
        tree.root_node().named_child_count(),
        micros(open) / 1e3,
        micros(full_parse) / 1e3,
    );
    let mut parsed = doc.clone();
    report(
        "  apply_changes (sync + incremental reparse)",
        run_edits(&mut parsed, true),
    );
    let mut deferred = doc;
    report(
        "  apply_changes_deferred (sync + tree.edit)",
        run_edits(&mut deferred, false),
    );
    deferred.reparse();
    if deferred.text() != text || parsed.text() != text {
        eprintln!("edits did not cancel out");
        std::process::exit(1);
    }
}

fn main() {
    println!("did_change: {EDITS} single-char edits (type x, delete it), UTF-16 positions");
    bench_size(1 << 20);
    bench_size(128 << 10);
}
