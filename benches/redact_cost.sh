#!/usr/bin/env bash
# The redactor's cost per MB of real text (docs/performance.md, "Redaction
# cost per MB"), without a release build of all of Fettle (fat LTO, llama.cpp):
# the redactor's sources (src/secrets/redact/) are compiled into a small
# standalone binary (opt-level 3) with a stub key store and file opener.
#
#   benches/redact_cost.sh [TREE] [TEXT...]
#
# TREE: a Fettle source tree (default: this one; `git archive <rev>` of an
# older one to compare). TEXT: files to redact (default: the largest Python
# stdlib modules found, ~1 MB in all). Prints, per text, MB/s and ms per MB
# for a redactor with 12 workspace values (a typical `.env`) and with 500.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
tree="$(cd "${1:-$here}" && pwd)"
shift || true
texts=("$@")
if [ ${#texts[@]} -eq 0 ]; then
    lib="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')"
    mapfile -t texts < <(ls -S "$lib"/*.py | head -4)
fi
work="${REDACT_BENCH_DIR:-${TMPDIR:-/tmp}/fettle-redact-bench}"
mkdir -p "$work/src"
cat > "$work/Cargo.toml" <<EOF
[package]
name = "redact-bench"
version = "0.0.0"
edition = "2021"
[dependencies]
regex = "1"
aho-corasick = "1"
miniz_oxide = "0.8"
ignore = "0.4"
tracing = "0.1"
parking_lot = "0.12"
libc = "0.2"
[profile.release]
opt-level = 3
EOF
cat > "$work/src/main.rs" <<EOF
#![allow(dead_code, unused_imports)]
// The workspace walk is not measured here: a stand-in for src/fsread.rs.
mod fsread {
    pub fn open_regular(
        p: &std::path::Path,
    ) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
        let f = std::fs::File::open(p)?;
        let m = f.metadata()?;
        Ok((f, m))
    }
}
mod secrets {
    pub mod store {
        pub fn values() -> Vec<String> { Vec::new() }
        pub fn generation() -> u64 { 0 }
    }
    #[path = "$tree/src/secrets/redact/mod.rs"]
    pub mod redact;
}
use std::time::Instant;
fn value(i: usize) -> String {
    let a = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let body: String = (0..32).map(|j| a[(i * 31 + j * 7 + j * j) % a.len()] as char).collect();
    format!("v{i}-{body}")
}
fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    for n in [12usize, 500] {
        let values: Vec<String> = (0..n).map(value).collect();
        let t = Instant::now();
        let r = secrets::redact::Redactor::build(values);
        let build_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut total = 0usize;
        let mut best = f64::MAX;
        let texts: Vec<String> = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
        for t in &texts { total += t.len(); }
        for _ in 0..5 {
            let t = Instant::now();
            for text in &texts { std::hint::black_box(r.redact(text)); }
            best = best.min(t.elapsed().as_secs_f64());
        }
        let mb = total as f64 / 1e6;
        println!("values={n:4} build={build_ms:7.1} ms  text={mb:.2} MB  {:.1} ms/MB  {:.0} MB/s  (best of 5)", best * 1e3 / mb, mb / best);
    }
}
EOF
cd "$work"
CARGO_TARGET_DIR="$work/target" cargo build --release --quiet
"$work/target/release/redact-bench" "${texts[@]}"
