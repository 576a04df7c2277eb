//! Node's side of the traced run: under `node --test` each test file runs
//! in a process of its own; V8 records the functions each ran
//! (`NODE_V8_COVERAGE`) and a preloaded script (`fettle_spectrum.cjs`)
//! whether it failed. Each test file's process is one "test" of the
//! spectrum, written in the Python tracer's format for the rest to read.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use super::{read_bounded, MAX_FILES};

/// V8's coverage of one process.
#[derive(Deserialize)]
struct V8Coverage {
    result: Vec<Script>,
}

#[derive(Deserialize)]
struct Script {
    url: String,
    functions: Vec<Function>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Function {
    function_name: String,
    ranges: Vec<Range>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Range {
    start_offset: usize,
    count: u64,
}

/// Reads `out/v8` and `out/node-status-PID.txt`; writes
/// `out/spectrum-node.json` when a test file's process was recorded.
pub(super) fn convert(out: &Path, real_root: &Path) {
    let Ok(entries) = std::fs::read_dir(out.join("v8")) else {
        return;
    };
    let mut files: Vec<std::path::PathBuf> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    files.truncate(MAX_FILES);
    let mut sources: HashMap<String, Option<Vec<usize>>> = HashMap::new();
    let mut functions: Vec<(String, u32, String)> = Vec::new();
    let mut index: HashMap<(String, u32, String), usize> = HashMap::new();
    let mut tests: Vec<serde_json::Value> = Vec::new();
    for file in files {
        // `coverage-PID-TIME-N.json`.
        let Some(pid) = file
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("coverage-"))
            .and_then(|n| n.split('-').next())
            .map(str::to_owned)
        else {
            continue;
        };
        let status = std::fs::read_to_string(out.join(format!("node-status-{pid}.txt")));
        // No status: the runner's own process, or one that died unseen.
        let Ok(status) = status else { continue };
        let Some(coverage) =
            read_bounded(&file).and_then(|text| serde_json::from_str::<V8Coverage>(&text).ok())
        else {
            continue;
        };
        let mut ran: Vec<usize> = Vec::new();
        for script in coverage.result {
            let Some(path) = script.url.strip_prefix("file://") else {
                continue;
            };
            if !Path::new(path).starts_with(real_root) || path.contains("/node_modules/") {
                continue;
            }
            let lines = sources
                .entry(path.to_owned())
                .or_insert_with(|| line_starts(Path::new(path)));
            let Some(lines) = lines.as_ref() else {
                continue;
            };
            for f in &script.functions {
                let Some(range) = f.ranges.first() else {
                    continue;
                };
                // The module's own code, and functions never called.
                if range.count == 0 || (range.start_offset == 0 && f.function_name.is_empty()) {
                    continue;
                }
                let line = lines.partition_point(|start| *start <= range.start_offset) as u32;
                let key = (path.to_owned(), line, f.function_name.clone());
                let at = *index.entry(key.clone()).or_insert_with(|| {
                    functions.push(key);
                    functions.len() - 1
                });
                ran.push(at);
            }
        }
        ran.sort_unstable();
        ran.dedup();
        tests.push(serde_json::json!({
            "id": format!("node process {pid}"),
            "failed": status.trim() == "failed",
            "functions": ran,
        }));
    }
    super::write_converted(out, "node", tests, functions);
}

/// Where each line starts (character offsets, as V8 counts them for the
/// ASCII most code is), or `None` when the file cannot be read.
fn line_starts(path: &Path) -> Option<Vec<usize>> {
    let text = read_bounded(path)?;
    let mut starts = vec![0];
    for (i, c) in text.chars().enumerate() {
        if c == '\n' {
            starts.push(i + 1);
        }
    }
    Some(starts)
}
