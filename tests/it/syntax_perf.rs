//! Throughput of `parse_str` + `tags` on large inputs built from the
//! fixtures. Timing is printed, not asserted (machines vary); run with
//! `cargo test --release --test it syntax_perf:: -- --ignored --nocapture`.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::Path;
use std::time::Instant;

use fettle::syntax::{parse_str, tags, Language};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/syntax")
        .join(name);
    std::fs::read_to_string(path).expect("fixture")
}

/// Repeats a fixture until it reaches `bytes`; returns the text and the copies.
fn repeat(text: &str, bytes: usize) -> (String, usize) {
    let copies = bytes.div_ceil(text.len());
    (text.repeat(copies), copies)
}

/// Makes a fixture repeatable without syntax errors (error recovery is slow
/// and not what we measure): drops what may appear only once per file.
fn wrap(lang: Language, text: &str) -> String {
    match lang {
        // `return` must end a Lua block.
        Language::Lua => format!("do\n{text}\nend\n"),
        // One `package` clause and import block per file: keep the body.
        Language::Go => body_from(text, "const MaxKeys"),
        Language::Java => body_from(text, "public class"),
        _ => text.to_owned(),
    }
}

fn body_from(text: &str, marker: &str) -> String {
    text.find(marker).map_or(text, |i| &text[i..]).to_owned()
}

#[test]
fn definitions_scale_with_copies() {
    let one = fixture("rust.rs");
    let tree = parse_str(Language::Rust, &one, None).expect("parse");
    let single = tags(Language::Rust, &tree, &one);
    let (many, copies) = repeat(&one, 64 * 1024);
    let tree = parse_str(Language::Rust, &many, None).expect("parse");
    let all = tags(Language::Rust, &tree, &many);
    assert_eq!(all.definitions.len(), single.definitions.len() * copies);
    assert_eq!(all.references.len(), single.references.len() * copies);
}

#[test]
#[ignore = "timing; run in release with --nocapture"]
fn throughput() {
    let files = [
        ("rust.rs", Language::Rust),
        ("python.py", Language::Python),
        ("javascript.jsx", Language::JavaScript),
        ("typescript.ts", Language::TypeScript),
        ("tsx.tsx", Language::Tsx),
        ("go.go", Language::Go),
        ("c.c", Language::C),
        ("cpp.cpp", Language::Cpp),
        ("Java.java", Language::Java),
        ("lua.lua", Language::Lua),
    ];
    let mut total_lines = 0;
    let mut total_secs = 0.0;
    for (name, lang) in files {
        let (text, _) = repeat(&wrap(lang, &fixture(name)), 1024 * 1024);
        let lines = text.lines().count();
        // Warm up: the first call compiles the language's query.
        let small = fixture(name);
        let tree = parse_str(lang, &small, None).expect("parse");
        let _ = tags(lang, &tree, &small);
        let start = Instant::now();
        let tree = parse_str(lang, &text, None).expect("parse");
        let parsed = start.elapsed();
        let tags = tags(lang, &tree, &text);
        let total = start.elapsed();
        let errors = fettle::syntax::syntax_errors(&tree, &text, 1);
        assert!(errors.is_empty(), "{name}: {errors:?}");
        total_lines += lines;
        total_secs += total.as_secs_f64();
        println!(
            "{:<10} {:>5} KiB {:>6} lines: parse {:>6.1} ms, tags {:>6.1} ms, {:>5.0} klines/s ({} defs, {} refs)",
            lang.name(),
            text.len() / 1024,
            lines,
            parsed.as_secs_f64() * 1e3,
            (total - parsed).as_secs_f64() * 1e3,
            lines as f64 / total.as_secs_f64() / 1e3,
            tags.definitions.len(),
            tags.references.len(),
        );
    }
    println!(
        "all: {total_lines} lines in {:.2} s ({:.0} klines/s on one core)",
        total_secs,
        total_lines as f64 / total_secs / 1e3
    );
}

/// What a broken file costs the diagnostics: `syntax_errors` tries one-token
/// repairs near each error (up to a trial budget, on files up to 256 KiB), so
/// a file being typed pays reparses. One missing `:` (Python) or `;` (Rust)
/// near the middle, and ten scattered ones, at growing sizes.
#[test]
#[ignore = "timing; run in release with --nocapture"]
fn diagnostics_on_broken_files() {
    let cases = [
        ("python.py", Language::Python, "):\n", ")\n"),
        ("rust.rs", Language::Rust, ");\n", ")\n"),
    ];
    for (name, lang, good, bad) in cases {
        for kib in [16, 64, 250, 1024] {
            let (text, _) = repeat(&wrap(lang, &fixture(name)), kib * 1024);
            for faults in [1usize, 10] {
                let sites: Vec<usize> = text.match_indices(good).map(|(i, _)| i).collect();
                let step = (sites.len() / (faults + 1)).max(1);
                let mut broken = text.clone();
                // From the end, so earlier offsets stay valid.
                for &at in sites.iter().skip(step).step_by(step).take(faults).rev() {
                    broken.replace_range(at..at + good.len(), bad);
                }
                let tree = parse_str(lang, &broken, None).expect("parse");
                let start = Instant::now();
                let errors = fettle::syntax::syntax_errors(&tree, &broken, 100);
                let took = start.elapsed();
                assert!(!errors.is_empty(), "{name} {kib} KiB: no error found");
                println!(
                    "{:<7} {:>5} KiB, {:>2} fault(s): syntax_errors {:>7.1} ms, {} error(s)",
                    lang.name(),
                    broken.len() / 1024,
                    faults,
                    took.as_secs_f64() * 1e3,
                    errors.len(),
                );
            }
        }
    }
}
