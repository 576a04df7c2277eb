//! `didChange` latency: single-character edits into a ~1 MB Rust file,
//! through `Document::apply_changes` with UTF-16 positions, including the
//! incremental reparse. Run with `cargo bench --bench did_change`.
use std::time::{Duration, Instant};

use fettle::document::Document;
use fettle::position::PositionEncoding;
use fettle::syntax::{self, Language};
use tower_lsp::lsp_types::{Position, Range, TextDocumentContentChangeEvent, Url};

const TARGET_BYTES: usize = 1 << 20;
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

fn source() -> String {
    let mut text = String::from("use std::fmt;\n");
    let mut n = 0;
    while text.len() < TARGET_BYTES {
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

/// Times `EDITS` edits: type an `x` somewhere, then delete it again.
fn run_edits(doc: &mut Document) -> Vec<Duration> {
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
            let result = doc.apply_changes(version, &[edit], enc);
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

fn main() {
    let text = source();
    let uri = |name: &str| Url::parse(&format!("file:///bench/{name}")).ok();
    let (Some(rs_uri), Some(txt_uri)) = (uri("big.rs"), uri("big.txt")) else {
        eprintln!("bad bench URI");
        std::process::exit(1);
    };
    println!(
        "did_change: {:.2} MB of Rust, {} lines, {EDITS} single-char edits (UTF-16 positions)",
        text.len() as f64 / 1e6,
        text.lines().count(),
    );

    let start = Instant::now();
    let mut doc = Document::new(rs_uri, "rust".into(), 1, &text);
    let open = start.elapsed();
    let start = Instant::now();
    let full = syntax::parse_rope(Language::Rust, &doc.rope, None);
    let full_parse = start.elapsed();
    if doc.tree.is_none() || full.is_none() {
        eprintln!("no tree: the Rust grammar did not parse, so the reparse is not measured");
        std::process::exit(1);
    }
    println!(
        "open (rope + full parse): {:.1} ms; full parse alone: {:.1} ms",
        micros(open) / 1e3,
        micros(full_parse) / 1e3,
    );
    report("apply_changes + incremental reparse", run_edits(&mut doc));

    // The same edits without a grammar: what the sync itself costs.
    let mut plain = Document::new(txt_uri, "plaintext".into(), 1, &text);
    report(
        "apply_changes, no grammar (sync only)",
        run_edits(&mut plain),
    );
    if plain.text() != text {
        eprintln!("edits did not cancel out");
        std::process::exit(1);
    }
}
