//! What tracking command side effects costs: `cargo bench --bench workspace_scan`.
//!
//! Workspaces of 300 and 10,000 source files (~2 KiB each, 50 per
//! directory) with a `.gitignore` and a `target/` of 2,000 build files
//! (skipped). Measured: one stat-only scan (taken twice around every
//! command the task runs), the scan + diff after a command that changed
//! one file, and the snapshot of the files' bytes taken once per task,
//! before its first command.

use std::path::Path;
use std::time::{Duration, Instant};

use fettle::agent::workspace_scan::snapshot::{Budget, Snapshot};
use fettle::agent::workspace_scan::{diff, Scanner};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const RUNS: usize = 21;
const SNAPSHOT_RUNS: usize = 5;

fn write_workspace(root: &Path, files: usize) -> Result<()> {
    let body: String = (0..40)
        .map(|i| format!("def function_{i}(x):\n    return x + {i}  # padding padding\n"))
        .collect();
    for i in 0..files {
        let dir = root.join(format!("src/pkg_{}", i / 50));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("module_{i}.py")), format!("# {i}\n{body}"))?;
    }
    std::fs::write(root.join(".gitignore"), "*.log\n")?;
    for i in 0..2000 {
        let dir = root.join(format!("target/debug/deps/d{}", i / 100));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("lib{i}.rlib")), "build output")?;
    }
    Ok(())
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn bench(files: usize) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("ws");
    write_workspace(&root, files)?;
    let scanner = Scanner::new(&root, Vec::new());

    let mut scans = Vec::new();
    let mut entries = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        let scan = scanner.scan();
        scans.push(started.elapsed());
        entries = scan.len();
    }

    let mut afters = Vec::new();
    for run in 0..RUNS {
        let before = scanner.scan();
        std::fs::write(root.join("src/pkg_0/module_0.py"), format!("# run {run}\n"))?;
        let started = Instant::now();
        let after = scanner.rescan(&before);
        let changed = diff(&before, &after);
        afters.push(started.elapsed());
        assert_eq!(changed.len(), 1, "{changed:?}");
    }

    let scan = scanner.scan();
    let mut snapshots = Vec::new();
    let mut stored = 0;
    for run in 0..SNAPSHOT_RUNS {
        let pack = tmp.path().join(format!("pack-{run}"));
        let started = Instant::now();
        let snapshot = Snapshot::take(&pack, &scan, Budget::default())?;
        snapshots.push(started.elapsed());
        stored = snapshot.stored_bytes;
        snapshot.discard();
    }

    println!(
        "{files:>6} files ({entries} entries scanned): scan {:.2} ms; scan+diff after a command {:.2} ms; snapshot {:.1} ms ({:.1} MiB kept, once per task)",
        median(scans),
        median(afters),
        median(snapshots),
        stored as f64 / f64::from(1 << 20)
    );
    Ok(())
}

fn main() -> Result<()> {
    for files in [300, 10_000] {
        bench(files)?;
    }
    Ok(())
}
