//! Fettle's own cost around a checker: `cargo bench --bench checkers`.
//!
//! The checker's cost is the tool's; what Fettle adds is spawning it
//! (process group, limits, scrubbed environment), reading its output and
//! parsing it into located diagnostics. Here the "checker" is `cat` of a
//! recorded output with 1,000 diagnostics over 50 real files (rustc JSON,
//! ruff JSON, tsc text), so the whole run is Fettle plus one `cat`; the
//! same `cat` through `agent::exec` alone is measured for subtraction, and
//! parsing on its own.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use fettle::agent::checkers::{parse_output, run_checkers, Checker, RunSettings};
use fettle::agent::exec::{self, CommandSpec, Limits};
use fettle::agent::CancellationToken;
use fettle::config::CheckFormat;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const FILES: usize = 50;
const DIAGNOSTICS: usize = 1000;
const RUNS: usize = 30;

fn main() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().canonicalize()?;
    write_files(&root)?;
    let outputs = [
        (
            "rustc JSON",
            CheckFormat::Rustc,
            rustc_output(),
            "rustc.json",
        ),
        (
            "ruff JSON",
            CheckFormat::Ruff,
            ruff_output(&root),
            "ruff.json",
        ),
        ("tsc text", CheckFormat::Tsc, tsc_output(), "tsc.txt"),
    ];
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!("{DIAGNOSTICS} diagnostics over {FILES} files, {RUNS} runs each (p50 / p90)");
    for (name, format, output, file) in outputs {
        let out_path = root.join(file);
        std::fs::write(&out_path, &output)?;
        let parse = sample(|| {
            let (found, _) = parse_output(format, &output, &root, "bench");
            assert_eq!(found.len(), DIAGNOSTICS, "{name}");
        });
        let command = format!("cat {file}");
        let spec = CommandSpec {
            max_output_bytes: 32 << 20,
            max_output_lines: 1 << 20,
            ..CommandSpec::new(command.clone(), &root)
        };
        let spawn_only = sample(|| {
            runtime
                .block_on(exec::run(&spec, &CancellationToken::new()))
                .map(|o| assert!(o.success()))
                .unwrap_or_else(|e| panic!("{e}"));
        });
        let checker = Checker {
            language: "rust",
            name: "bench".into(),
            command,
            format,
            configured: true,
        };
        let settings = RunSettings {
            root: &root,
            timeout: Duration::from_secs(60),
            allow_env: &[],
            limits: Limits::default(),
            sandbox: None,
        };
        let whole = sample(|| {
            let report = runtime.block_on(run_checkers(
                std::slice::from_ref(&checker),
                None,
                &settings,
                &CancellationToken::new(),
            ));
            assert_eq!(report.diagnostics().count(), DIAGNOSTICS, "{name}");
        });
        println!(
            "{name:>10} ({:>4} KiB): whole run {} ({:.1} µs per diagnostic) = spawn+read (`cat` via exec) {} + parse+locate {} + the rest",
            output.len() / 1024,
            show(&whole),
            (ms(p(&whole, 50)) * 1000.0) / DIAGNOSTICS as f64,
            show(&spawn_only),
            show(&parse),
        );
    }
    Ok(())
}

fn sample(mut f: impl FnMut()) -> Vec<Duration> {
    f(); // warm-up
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times
}

fn p(times: &[Duration], pct: usize) -> Duration {
    times[(times.len() * pct / 100).min(times.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn show(times: &[Duration]) -> String {
    format!("{:.1} / {:.1} ms", ms(p(times, 50)), ms(p(times, 90)))
}

fn file_name(i: usize) -> String {
    format!("src/m{i}.rs")
}

/// 50 files of 40 lines with non-ASCII text, so columns need converting.
fn write_files(root: &Path) -> Result<()> {
    std::fs::create_dir_all(root.join("src"))?;
    for i in 0..FILES {
        let mut text = String::new();
        for line in 0..40 {
            let _ = writeln!(
                text,
                "    let s{line} = \"héllo {i}\"; let n{line}: u32 = s{line};"
            );
        }
        std::fs::write(root.join(file_name(i)), text)?;
    }
    Ok(())
}

fn place(k: usize) -> (String, usize) {
    (file_name(k % FILES), k / FILES % 40 + 1)
}

fn rustc_output() -> String {
    let mut out = String::new();
    for k in 0..DIAGNOSTICS {
        let (file, line) = place(k);
        let col = 32 + line.to_string().len() * 2;
        let message = serde_json::json!({
            "reason": "compiler-message",
            "package_id": "path+file:///bench#0.1.0",
            "message": {
                "rendered": format!("error[E0308]: mismatched types\n --> {file}:{line}:{col}\n"),
                "$message_type": "diagnostic",
                "children": [],
                "level": "error",
                "message": "mismatched types",
                "code": { "code": "E0308", "explanation": "Expected type did not match the received type.\n".repeat(8) },
                "spans": [
                    { "file_name": file, "line_start": line, "line_end": line, "column_start": col,
                      "column_end": col + 2, "byte_start": 0, "byte_end": 0, "is_primary": true,
                      "label": "expected `u32`, found `&str`", "expansion": null,
                      "suggested_replacement": null, "suggestion_applicability": null, "text": [] },
                    { "file_name": file, "line_start": line, "line_end": line, "column_start": 20,
                      "column_end": 23, "byte_start": 0, "byte_end": 0, "is_primary": false,
                      "label": "expected due to this", "expansion": null,
                      "suggested_replacement": null, "suggestion_applicability": null, "text": [] }
                ]
            }
        });
        let _ = writeln!(out, "{message}");
    }
    out
}

fn ruff_output(root: &Path) -> String {
    let items: Vec<serde_json::Value> = (0..DIAGNOSTICS)
        .map(|k| {
            let (file, line) = place(k);
            serde_json::json!({
                "cell": null, "code": "F821", "filename": root.join(file),
                "location": { "row": line, "column": 30 }, "end_location": { "row": line, "column": 33 },
                "message": "Undefined name `s`", "fix": null, "noqa_row": line,
                "url": "https://docs.astral.sh/ruff/rules/undefined-name", "severity": "error"
            })
        })
        .collect();
    serde_json::to_string_pretty(&items).unwrap_or_default()
}

fn tsc_output() -> String {
    let mut out = String::new();
    for k in 0..DIAGNOSTICS {
        let (file, line) = place(k);
        let _ = writeln!(
            out,
            "{file}({line},30): error TS2322: Type 'string' is not assignable to type 'number'."
        );
    }
    out
}
