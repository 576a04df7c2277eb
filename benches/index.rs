//! Workspace index benchmark: `cargo bench --bench index`.
//!
//! Indexes a tree of ≥ 100k lines of real code (copied from the crates in
//! `~/.cargo/registry/src`, or `FETTLE_BENCH_TREE`) and reports cold index
//! time (2 threads, fresh index per run; the OS file cache is warm), peak
//! RSS of indexing measured in a child process, and `search` latency.
//! `FETTLE_BENCH_LINES` changes the size of the gathered tree.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use fettle::index::{IndexSettings, IndexStats, WorkspaceIndex};

mod common;
use common::{gather, ms, Result};

const TARGET_LINES: usize = 100_000;
const COLD_RUNS: usize = 5;
/// Set in the re-executed child: `baseline` (exit at once) or a tree path.
const CHILD_ENV: &str = "FETTLE_BENCH_INDEX_CHILD";

fn main() -> Result<()> {
    if let Ok(what) = std::env::var(CHILD_ENV) {
        if what != "baseline" {
            let stats = index_once(Path::new(&what));
            let hwm = fs::read_to_string("/proc/self/status").ok().and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_owned();
                Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? / 1024)
            });
            let hwm = hwm.map_or_else(|| "?".to_owned(), |m| m.to_string());
            println!(
                "  child: indexed {} files; its own VmHWM {hwm} MiB",
                stats.files
            );
        }
        return Ok(());
    }
    let _tmp;
    let tree = match std::env::var_os("FETTLE_BENCH_TREE") {
        Some(tree) => PathBuf::from(tree),
        None => {
            let tmp = tempfile::tempdir()?;
            let target = std::env::var("FETTLE_BENCH_LINES")
                .ok()
                .and_then(|n| n.parse().ok());
            let (files, lines) = gather(tmp.path(), target.unwrap_or(TARGET_LINES))?;
            println!("gathered {files} files, {lines} lines from ~/.cargo/registry/src");
            let tree = tmp.path().to_path_buf();
            _tmp = tmp;
            tree
        }
    };
    println!("tree: {}", tree.display());

    // Before the parent indexes anything: a spawned child's max RSS starts
    // from the parent's high-water mark (vfork shares the parent's memory
    // until exec), so the parent must still be small here.
    let (baseline, peak) = child_rss(&tree)?;
    println!("peak RSS of indexing (child, getrusage): {peak} MiB (an idle child: {baseline} MiB)");

    let mut times = Vec::new();
    let mut stats = IndexStats::default();
    for _ in 0..COLD_RUNS {
        let start = Instant::now();
        stats = index_once(&tree);
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "indexed: {} files, {} lines, {} KiB, {} definitions, {} references, {} skipped",
        stats.files,
        stats.lines,
        stats.bytes / 1024,
        stats.definitions,
        stats.references,
        stats.skipped
    );
    println!(
        "cold index (2 threads): median {:.0} ms (min {:.0}, max {:.0}) over {COLD_RUNS} runs; {:.0}k lines/s",
        ms(times[COLD_RUNS / 2]),
        ms(times[0]),
        ms(times[COLD_RUNS - 1]),
        stats.lines as f64 / times[COLD_RUNS / 2].as_secs_f64() / 1000.0
    );

    search_latency(&tree);
    Ok(())
}

fn index_once(tree: &Path) -> IndexStats {
    let settings = IndexSettings {
        max_file_bytes: common::MAX_FILE_BYTES,
        exclude: Vec::new(),
        threads: 2,
    };
    let index = WorkspaceIndex::new(settings);
    index.index_roots(&[tree.to_path_buf()], &|_| {}, &CancellationToken::new())
}

/// Max RSS (MiB) of a child that does nothing, then of one that indexes.
fn child_rss(tree: &Path) -> Result<(i64, i64)> {
    let exe = std::env::current_exe()?;
    let mut peaks = Vec::new();
    for what in [Path::new("baseline"), tree] {
        let status = Command::new(&exe).env(CHILD_ENV, what).status()?;
        if !status.success() {
            return Err(format!("child failed: {status}").into());
        }
        // Max RSS over waited-for children; the baseline child runs first,
        // so the second reading is the indexing child's.
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage only writes into the provided struct.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
        if rc != 0 {
            return Err("getrusage failed".into());
        }
        // SAFETY: initialised (zeroed, then filled in by getrusage).
        let usage = unsafe { usage.assume_init() };
        peaks.push(usage.ru_maxrss / 1024);
    }
    Ok((peaks[0], peaks[1]))
}

/// Latency of `search` over prefixes of real names and short fuzzy
/// abbreviations (initials of words: `gs` for `get_string`).
fn search_latency(tree: &Path) {
    let settings = IndexSettings {
        max_file_bytes: common::MAX_FILE_BYTES,
        exclude: Vec::new(),
        threads: 2,
    };
    let index = WorkspaceIndex::new(settings);
    index.index_roots(&[tree.to_path_buf()], &|_| {}, &CancellationToken::new());
    let mut names: Vec<String> = index
        .files()
        .iter()
        .flat_map(|f| index.file_symbols(&f.path))
        .map(|s| s.name.to_string())
        .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .collect();
    names.sort();
    names.dedup();
    let queries = queries(&names);

    let mut samples = Vec::with_capacity(queries.len() * 3);
    let mut slowest: Vec<(Duration, &str)> = Vec::new();
    let mut hits = 0;
    for round in 0..4 {
        for q in &queries {
            let start = Instant::now();
            let found = index.search(q, 100);
            let took = start.elapsed();
            // Round 0 warms caches and is not counted.
            if round > 0 {
                samples.push(took);
                slowest.push((took, q));
                hits += found.len();
            }
        }
    }
    samples.sort();
    let pct = |p: f64| samples[((samples.len() - 1) as f64 * p) as usize];
    println!(
        "search (limit 100) over {} distinct names, {} queries x 3: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms, avg {:.1} hits",
        names.len(),
        queries.len(),
        ms(pct(0.50)),
        ms(pct(0.99)),
        ms(pct(1.0)),
        hits as f64 / samples.len() as f64
    );
    slowest.sort_by_key(|&(took, _)| std::cmp::Reverse(took));
    let mut seen = std::collections::HashSet::new();
    slowest.retain(|&(_, q)| seen.insert(q));
    let worst: Vec<String> = slowest
        .iter()
        .take(5)
        .map(|(d, q)| format!("{q:?} {:.2} ms", ms(*d)))
        .collect();
    println!("slowest queries: {}", worst.join(", "));
    let start = Instant::now();
    let top = index.search("", 100).len();
    println!(
        "search(\"\") → {top} symbols in {:.3} ms",
        ms(start.elapsed())
    );
}

fn queries(names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if names.is_empty() {
        return out;
    }
    let step = (names.len() / 200).max(1);
    for (i, name) in names.iter().step_by(step).take(200).enumerate() {
        let len = 2 + i % 5;
        out.push(name.chars().take(len).collect());
    }
    let step = (names.len() / 150).max(1);
    for name in names.iter().skip(step / 2).step_by(step).take(150) {
        let initials = initials(name);
        if (2..=4).contains(&initials.chars().count()) {
            out.push(initials);
        } else {
            // Single-word names: first letter plus two scattered ones.
            let chars: Vec<char> = name.chars().collect();
            if chars.len() >= 4 {
                out.push(
                    [chars[0], chars[chars.len() / 2], chars[chars.len() - 1]]
                        .iter()
                        .collect(),
                );
            }
        }
    }
    out
}

/// First letter of each snake_case / camelCase word, lowercased.
fn initials(name: &str) -> String {
    let mut out = String::new();
    let mut prev: Option<char> = None;
    for c in name.chars() {
        let starts_word = match prev {
            None => c != '_',
            Some(p) => (p == '_' && c != '_') || (p.is_lowercase() && c.is_uppercase()),
        };
        if starts_word {
            out.extend(c.to_lowercase());
        }
        prev = Some(c);
    }
    out
}
