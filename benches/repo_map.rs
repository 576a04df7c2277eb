//! Agent context tools on a real-size tree: `cargo bench --bench repo_map`.
//!
//! Indexes ≥ 100k lines of real code (copied from `~/.cargo/registry/src`,
//! or `FETTLE_BENCH_TREE`), then reports the latency of the repo map
//! (unfocused and focused, at two budgets), of `Focus::from_text` on a
//! test log, of the `search` tool (a rare and a common pattern) and of
//! redacting a large text. `FETTLE_BENCH_LINES` changes the tree's size.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use fettle::agent::redact::Redactor;
use fettle::agent::repo_map::{repo_map, Focus};
use fettle::agent::search::{search, SearchArgs};
use fettle::index::{IndexSettings, WorkspaceIndex};
use fettle::model::tokens::estimate;

mod common;
use common::{gather, ms, Result};

const TARGET_LINES: usize = 100_000;
const RUNS: usize = 7;

/// Median, min and max of `RUNS` runs of `f`.
fn time<T>(mut f: impl FnMut() -> T) -> (Duration, Duration, Duration, T) {
    let mut times = Vec::with_capacity(RUNS);
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        last = Some(f());
        times.push(start.elapsed());
    }
    times.sort();
    let Some(last) = last else {
        unreachable!("RUNS > 0")
    };
    (times[RUNS / 2], times[0], times[RUNS - 1], last)
}

fn report(what: &str, (median, min, max): (Duration, Duration, Duration), extra: &str) {
    println!(
        "{what}: median {:.1} ms (min {:.1}, max {:.1}) over {RUNS} runs{extra}",
        ms(median),
        ms(min),
        ms(max)
    );
}

fn main() -> Result<()> {
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
    let index = WorkspaceIndex::new(IndexSettings {
        max_file_bytes: common::MAX_FILE_BYTES,
        exclude: Vec::new(),
        threads: 2,
    });
    let stats = index.index_roots(
        std::slice::from_ref(&tree),
        &|_| {},
        &CancellationToken::new(),
    );
    println!(
        "indexed {} files, {} lines, {} definitions",
        stats.files, stats.lines, stats.definitions
    );

    let files = index.files();
    let Some(some_file) = files.get(files.len() / 2).map(|f| f.path.to_path_buf()) else {
        return Err("nothing indexed".into());
    };
    let log = test_log(&tree, &some_file, &index);
    let (m, lo, hi, focus) = time(|| Focus::from_text(&log, &tree, &index));
    report(
        "Focus::from_text (4 KiB log)",
        (m, lo, hi),
        &format!(
            "; {} paths, {} identifiers",
            focus.paths.len(),
            focus.identifiers.len()
        ),
    );
    for (label, focus) in [("unfocused", Focus::default()), ("focused", focus)] {
        for budget in [1024, 4096] {
            let (m, lo, hi, map) = time(|| repo_map(&index, &tree, &focus, budget));
            report(
                &format!("repo_map {label}, budget {budget}"),
                (m, lo, hi),
                &format!("; {} tokens, {} lines", estimate(&map), map.lines().count()),
            );
        }
    }

    for pattern in ["unreachable_unchecked", "self"] {
        let args = SearchArgs::literal(pattern);
        let (m, lo, hi, result) = time(|| search(&tree, &args));
        let result = result?;
        report(
            &format!("search {pattern:?}"),
            (m, lo, hi),
            &format!(
                "; {} matches in {} of {} files",
                result.total_matches, result.files_with_matches, result.files_searched
            ),
        );
    }

    let text: String = files
        .iter()
        .take(50)
        .filter_map(|f| std::fs::read_to_string(&f.path).ok())
        .collect();
    let redactor = Redactor::with_values((0..200).map(|i| format!("value-{i:04}-x")).collect());
    let (m, lo, hi, out) = time(|| redactor.redact(&text).len());
    report(
        &format!("redact {} KiB, 200 values", text.len() / 1024),
        (m, lo, hi),
        &format!("; {out} bytes out"),
    );
    Ok(())
}

/// A failing-test log that mentions one file and a few defined names.
fn test_log(root: &Path, file: &Path, index: &WorkspaceIndex) -> String {
    let rel = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let names: Vec<String> = index
        .file_symbols(file)
        .iter()
        .take(3)
        .map(|s| s.name.to_string())
        .collect();
    let mut log = String::new();
    while log.len() < 4096 {
        log.push_str(&format!(
            "thread 'tests::it_works' panicked at {rel}:42:9:\nassertion failed in {}\nnote: run with `RUST_BACKTRACE=1`\n",
            names.join(", ")
        ));
    }
    log
}
