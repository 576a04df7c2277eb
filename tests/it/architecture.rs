//! ARCHITECTURE.md's invariants that a grep can check, checked here so they
//! cannot slip again: the engines know nothing about LSP, and only `cli`
//! and the server's transport write to stdout.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Code lines (not comments, not lines inside string literals that start
/// with a quote) containing any of `needles`, as `file:line: text`.
fn offending(files: &[PathBuf], needles: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") || code.starts_with('"') {
                continue;
            }
            if needles.iter().any(|needle| contains_word(code, needle)) {
                let shown = file.strip_prefix(src()).unwrap_or(file).display();
                found.push(format!("src/{shown}:{}: {code}", n + 1));
            }
        }
    }
    found
}

/// `needle` in `code` not preceded by an identifier character
/// (`eprintln!(` is not `println!(`).
fn contains_word(code: &str, needle: &str) -> bool {
    code.match_indices(needle).any(|(at, _)| {
        !code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn engines_know_nothing_about_lsp() {
    let mut files = Vec::new();
    for dir in [
        "syntax",
        "index",
        "config",
        "model",
        "completion",
        "edit",
        "agent",
        "secrets",
        "mock",
    ] {
        rust_files(&src().join(dir), &mut files);
    }
    assert!(files.len() > 50, "found only {} files", files.len());
    let found = offending(&files, &["tower_lsp", "lsp_types"]);
    assert!(
        found.is_empty(),
        "LSP types outside lsp/ (convert in lsp/ instead):\n{}",
        found.join("\n")
    );
}

#[test]
fn only_cli_and_the_transport_write_to_stdout() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let allowed = |path: &Path| {
        let rel = path.strip_prefix(src()).unwrap();
        rel.starts_with("cli")
            || rel.starts_with("lsp/transport")
            // Hands the process's stdout to the transport (`transport::out`).
            || rel == Path::new("lsp/mod.rs")
            // The hidden `fettle sandbox-exec --probe` process: its stdout
            // is a pipe Fettle reads, never the LSP stream.
            || rel == Path::new("agent/sandbox/runner.rs")
    };
    files.retain(|path| !allowed(path));
    let found = offending(&files, &["println!(", "print!(", "io::stdout()"]);
    assert!(
        found.is_empty(),
        "stdout is the protocol: log with tracing instead:\n{}",
        found.join("\n")
    );
}

/// Tree-sitter counts rows by `\n` only; LSP also by `\r\n` and a lone `\r`.
/// Lines come from byte offsets through `position.rs`, so no code reads a
/// node's row or column (`start_position()`, `end_position()`, `.row`,
/// `.column`). Building `Point`s for tree-sitter's own edits is writing,
/// not reading, and stays allowed (`position.rs`, `document.rs`, `syntax/`).
#[test]
fn nothing_reads_tree_sitter_rows() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.retain(|path| path.strip_prefix(src()).unwrap() != Path::new("position.rs"));
    let mut found = offending(&files, &["start_position()", "end_position()"]);
    // A field read `x.row` / `x.column` in a file that uses tree-sitter
    // (elsewhere `.column` is some other struct's): the needle follows an
    // identifier, so `offending`'s word check does not fit.
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        if !text.contains("tree_sitter") {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for field in [".row", ".column"] {
                let reads = code.match_indices(field).any(|(at, _)| {
                    !code[at + field.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
                });
                if reads {
                    let shown = file.strip_prefix(src()).unwrap().display();
                    found.push(format!("src/{shown}:{}: {code}", n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "tree-sitter rows/columns read (use byte offsets and position.rs):\n{}",
        found.join("\n")
    );
}

/// Dependencies point down (ARCHITECTURE.md's bird's-eye view): the engines
/// never reach up into the front ends, `completion` and `agent` do not
/// know each other, and only `cli` (for `fettle mock-model`) uses `mock`.
#[test]
fn dependencies_point_down() {
    let files_of = |dirs: &[&str]| {
        let mut files = Vec::new();
        for dir in dirs {
            let path = src().join(dir);
            if path.is_dir() {
                rust_files(&path, &mut files);
            } else {
                files.push(path);
            }
        }
        files
    };
    let engines = files_of(&[
        "syntax",
        "index",
        "config",
        "model",
        "completion",
        "edit",
        "agent",
        "secrets",
        "mock",
        "document.rs",
        "position.rs",
        "logging.rs",
    ]);
    let mut found = offending(&engines, &["crate::lsp", "crate::cli"]);
    found.extend(offending(&files_of(&["completion"]), &["crate::agent"]));
    found.extend(offending(&files_of(&["agent"]), &["crate::completion"]));
    // The edit engine stands beside completion and the agent, on neither.
    found.extend(offending(
        &files_of(&["edit"]),
        &["crate::completion", "crate::agent"],
    ));
    let mut not_cli = Vec::new();
    rust_files(&src(), &mut not_cli);
    not_cli.retain(|p| {
        let rel = p.strip_prefix(src()).unwrap();
        !rel.starts_with("cli") && !rel.starts_with("mock")
    });
    found.extend(offending(&not_cli, &["crate::mock"]));
    assert!(
        found.is_empty(),
        "a dependency that points the wrong way:\n{}",
        found.join("\n")
    );
}

/// One record per open document (`lsp::open_document::OpenDocument`): no
/// parallel maps keyed by the document's URL that opening and closing
/// would each have to remember.
#[test]
fn one_map_of_open_documents() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let found = offending(&files, &["DashMap<Url", "HashMap<Url", "BTreeMap<Url"]);
    let others: Vec<&String> = found
        .iter()
        .filter(|f| {
            !(f.starts_with("src/lsp/state.rs:")
                && f.ends_with("pub documents: DashMap<Url, OpenDocument>,"))
        })
        .collect();
    assert!(
        others.is_empty() && found.len() == 1,
        "keep per-document state in OpenDocument, not in a map of its own:\n{found:#?}"
    );
}

/// One cancellation idiom: `tokio_util`'s `CancellationToken`. No
/// hand-rolled flags (`AtomicBool`s passed around as "cancel"), no
/// `Notify`-based tickets, no sleep loops polling for a change.
#[test]
fn one_cancellation_idiom() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let found = offending(&files, &["Arc<AtomicBool>", "&AtomicBool", "Notify"]);
    assert!(
        found.is_empty(),
        "cancel with tokio_util::sync::CancellationToken:\n{}",
        found.join("\n")
    );
    // The agent's host waits for its buffer edits to land on the
    // document's revision channel; its one sleep is the typing pause.
    let host = std::fs::read_to_string(src().join("lsp/agent/host.rs")).unwrap();
    assert_eq!(
        host.matches("sleep(").count(),
        1,
        "wait for a document change with its revision's watch channel, not a sleep loop"
    );
}
