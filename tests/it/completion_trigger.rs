//! Golden tests for `completion::trigger::decide`: one fixture per case under
//! `tests/fixtures/completion/trigger/`, each run with its tree-sitter tree
//! and again without one (the `--- heuristic` section, when present, gives
//! the tree-less answer; otherwise it must match `--- expected`).
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::{Path, PathBuf};

use fettle::completion::trigger::{decide, suffix_allows_completion, Decision};
use fettle::config::Multiline;
use fettle::syntax::{parse_str, Language};

const CURSOR: char = '█';

struct Case {
    language: Option<Language>,
    mode: Multiline,
    text: String,
    cursor: usize,
    expected: String,
    heuristic: Option<String>,
}

fn sections(src: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in src.split_inclusive('\n') {
        if let Some(header) = line.strip_prefix("--- ") {
            out.push((header.trim().to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
        } else {
            assert!(line.trim().is_empty(), "text before the first section");
        }
    }
    out
}

fn load(path: &Path) -> Case {
    let src = std::fs::read_to_string(path).unwrap();
    let mut language = None;
    let mut mode = None;
    let mut document = None;
    let mut expected = None;
    let mut heuristic = None;
    let mut options = String::new();
    for (header, body) in sections(&src) {
        match header.as_str() {
            "language" => {
                let id = body.trim();
                language = Some(if id == "none" {
                    None
                } else {
                    Some(Language::from_language_id(id).expect("language id"))
                });
            }
            "mode" => {
                mode = Some(match body.trim() {
                    "auto" => Multiline::Auto,
                    "always" => Multiline::Always,
                    "never" => Multiline::Never,
                    other => panic!("mode {other:?}"),
                })
            }
            h if h.starts_with("document") => document = Some(body),
            "expected" => expected = Some(body.trim().to_string()),
            "heuristic" => heuristic = Some(body.trim().to_string()),
            "options" => options = body,
            other => panic!("unknown section {other:?}"),
        }
    }
    let mut doc = document.expect("--- document");
    for opt in options.split_whitespace() {
        match opt {
            "no-final-newline" => {
                doc.pop();
            }
            // Fixture files stay LF-only in git; CRLF is applied here.
            "crlf" => doc = doc.replace('\n', "\r\n"),
            other => panic!("unknown option {other:?}"),
        }
    }
    assert_eq!(doc.matches(CURSOR).count(), 1, "exactly one cursor marker");
    let cursor = doc.find(CURSOR).unwrap();
    Case {
        language: language.expect("--- language"),
        mode: mode.expect("--- mode"),
        text: doc.replacen(CURSOR, "", 1),
        cursor,
        expected: expected.expect("--- expected"),
        heuristic,
    }
}

fn show(d: &Decision) -> String {
    match d {
        Decision::Skip(reason) => format!("skip: {reason}"),
        Decision::Complete {
            multiline: false,
            max_lines: 1,
            stop,
        } if stop.is_empty() => "complete single".to_string(),
        Decision::Complete {
            multiline,
            max_lines,
            stop,
        } => {
            let kind = if *multiline { "multiline" } else { "single" };
            let mut s = format!("complete {kind} max_lines={max_lines}");
            for st in stop {
                s.push_str(&format!("\nstop: {st:?}"));
            }
            s
        }
    }
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/completion/trigger");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn golden_fixtures() {
    let paths = fixtures();
    assert!(paths.len() >= 35, "only {} fixtures", paths.len());
    let mut failures = Vec::new();
    for path in &paths {
        let case = load(path);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let tree = case
            .language
            .map(|l| parse_str(l, &case.text, None).expect("parse"));
        let with_tree = show(&decide(
            &case.text,
            case.cursor,
            case.language,
            tree.as_ref(),
            case.mode,
        ));
        if with_tree != case.expected {
            failures.push(format!(
                "{name} (with tree)\n  expected: {:?}\n  actual:   {with_tree:?}",
                case.expected
            ));
        }
        let without = show(&decide(
            &case.text,
            case.cursor,
            case.language,
            None,
            case.mode,
        ));
        let want = case.heuristic.as_ref().unwrap_or(&case.expected);
        if &without != want {
            failures.push(format!(
                "{name} (no tree)\n  expected: {want:?}\n  actual:   {without:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn suffix_pattern() {
    let allowed = [
        "", "   ", "\t", ")", ")]}", ");", ") {", "):", "),", "\"", "\");", "'", "`", ">", "})",
        " ) ;  ", "\";", "]  ", ";", "{", ":", ",", "  ,", "　",
    ];
    let refused = [
        "x",
        " x",
        ")x",
        ");x",
        ";;",
        ",,",
        "( ",
        "(",
        "=",
        " + 1",
        ") {}",
        ": int",
        ", y",
        "{ }",
        "; // done",
        "é",
        "日本",
    ];
    for s in allowed {
        assert!(suffix_allows_completion(s), "should allow {s:?}");
    }
    for s in refused {
        assert!(!suffix_allows_completion(s), "should refuse {s:?}");
    }
}

#[test]
fn cursor_outside_the_document_or_inside_a_char() {
    let text = "let é = 1;";
    let inside_e = text.find('é').unwrap() + 1;
    for cursor in [inside_e, text.len() + 1] {
        assert_eq!(
            decide(text, cursor, Some(Language::Rust), None, Multiline::Auto),
            Decision::Skip("cursor outside the document")
        );
    }
}

#[test]
fn end_of_document_and_start() {
    let text = "x = 1";
    let d = decide(
        text,
        text.len(),
        Some(Language::Python),
        None,
        Multiline::Auto,
    );
    assert_eq!(show(&d), "complete single");
    let d = decide(text, 0, Some(Language::Python), None, Multiline::Auto);
    assert_eq!(d, Decision::Skip("text after the cursor"));
}
