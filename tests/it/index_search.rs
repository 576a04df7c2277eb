//! Workspace index queries: definitions, symbols, references, fuzzy
//! search ranking, and readers racing writers.
// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::index_common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_util::sync::CancellationToken;

use fettle::index::WorkspaceIndex;
use fettle::syntax::{Language, SymbolKind};
use index_common::*;

#[test]
fn definitions_symbols_and_references() {
    let dir = workspace();
    let (index, _) = index(dir.path());
    let lib = dir.path().join("src/lib.rs");
    let main = dir.path().join("src/main.rs");

    let config = index.definitions("Config");
    assert_eq!(config.len(), 1, "{config:?}");
    assert_eq!(config[0].kind, SymbolKind::Struct);
    assert_eq!(&*config[0].path, lib.as_path());
    assert_eq!(
        (config[0].selection.0.line, config[0].selection.0.utf16),
        (3, 11)
    );
    assert_eq!((config[0].range.0.line, config[0].range.1.line), (3, 5));

    let load = index.definitions("load");
    assert_eq!(load.len(), 1);
    assert_eq!(load[0].kind, SymbolKind::Method);
    assert_eq!(load[0].container.as_deref(), Some("impl Config"));
    assert!(
        load[0]
            .detail
            .as_deref()
            .is_some_and(|d| d.contains("fn load(path: &str) -> Config")),
        "{:?}",
        load[0].detail
    );

    let symbols = index.file_symbols(&lib);
    assert_eq!(
        names(&symbols),
        [
            "Config",
            "values",
            "impl Config",
            "load",
            "get",
            "parse_pairs"
        ]
    );
    assert_eq!(symbols[2].kind, SymbolKind::Impl);
    assert!(index.file_symbols(&dir.path().join("nope.rs")).is_empty());

    assert_eq!(
        index.files_referencing("parse_pairs"),
        [lib.clone(), main.clone()]
    );
    assert_eq!(index.files_referencing("load"), std::slice::from_ref(&main));
    assert!(index.files_referencing("no_such_name").is_empty());
    let counts = index.reference_counts(&main);
    assert!(counts.windows(2).all(|w| w[0].0 < w[1].0), "sorted by name");
    assert!(
        counts.iter().any(|(n, c)| &**n == "Config" && *c == 2),
        "{counts:?}"
    );

    // Other languages.
    assert_eq!(index.definitions("PathCache")[0].kind, SymbolKind::Class);
    assert_eq!(
        index.definitions("resolve")[0].container.as_deref(),
        Some("PathCache")
    );
    assert_eq!(index.definitions("Router")[0].kind, SymbolKind::Class);
    // C: a prototype is a declaration, not a definition.
    assert_eq!(index.definitions("buffer")[0].kind, SymbolKind::Struct);
    assert!(index.definitions("buffer_append").is_empty());
    assert_eq!(
        index.files_referencing("PathCache"),
        [dir.path().join("scripts/util.py")]
    );
    assert_eq!(
        index.file_info(&lib).map(|f| (f.language, f.lines)),
        Some((Language::Rust, 21))
    );
}

/// A table of query → expected first results, over names in several files.
#[test]
fn fuzzy_search_ranking() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "src/parse.rs",
        "pub fn parse() {}\npub fn parse_str() {}\npub struct Parser;\npub fn reparse() {}\n\
         pub fn get_string() {}\npub struct GetString;\npub fn gas() {}\npub fn bugsy() {}\n\
         pub struct HttpServer;\npub fn hash_set() {}\npub fn workspace_index() {}\n",
    );
    write(
        dir.path(),
        "src/other.rs",
        "pub fn parse() {}\npub struct WorkspaceIndex;\npub fn win() {}\n",
    );
    write(
        dir.path(),
        "lib/tools.py",
        "def parse():\n    pass\n\nclass ParseError(Exception):\n    pass\n",
    );
    let index = WorkspaceIndex::new(settings());
    index.index_roots(
        &[dir.path().to_path_buf()],
        &|_| {},
        &CancellationToken::new(),
    );

    let table: &[(&str, &[&str])] = &[
        (
            "parse",
            &[
                "parse",
                "parse",
                "parse",
                "Parser",
                "parse_str",
                "ParseError",
                "reparse",
            ],
        ),
        // Equal ignoring case still beats prefix; a typed capital then
        // prefers names with that capital.
        (
            "Parse",
            &[
                "parse",
                "parse",
                "parse",
                "Parser",
                "ParseError",
                "parse_str",
                "reparse",
            ],
        ),
        ("gs", &["GetString", "get_string", "gas", "bugsy"]),
        ("hs", &["HttpServer", "hash_set"]),
        ("wi", &["win", "WorkspaceIndex", "workspace_index"]),
        ("WSI", &["WorkspaceIndex", "workspace_index"]),
        ("zzz", &[]),
    ];
    for (query, expected) in table {
        let got = index.search(query, expected.len().max(1));
        assert_eq!(names(&got), *expected, "query {query:?}");
    }
    // Ties within one name: by path, then position.
    let parses = index.search("parse", 3);
    let paths: Vec<_> = parses
        .iter()
        .map(|s| s.path.strip_prefix(dir.path()).unwrap().to_path_buf())
        .collect();
    assert_eq!(
        paths,
        [
            PathBuf::from("lib/tools.py"),
            PathBuf::from("src/other.rs"),
            PathBuf::from("src/parse.rs")
        ]
    );
    // Limits, and the empty query listing top-level symbols by name.
    assert_eq!(index.search("a", 2).len(), 2);
    assert!(index.search("parse", 0).is_empty());
    let top = index.search("", 3);
    assert_eq!(names(&top), ["GetString", "HttpServer", "ParseError"]);
}

#[test]
fn readers_run_while_writers_update() {
    let dir = workspace();
    let (index, _) = index(dir.path());
    let lib = dir.path().join("src/lib.rs");
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..200 {
                index.update_text(
                    &lib,
                    None,
                    &format!("{LIB_RS}\npub fn version_{i}() {{}}\n"),
                );
            }
            done.store(true, Ordering::Relaxed);
        });
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    assert_eq!(index.definitions("Config").len(), 1);
                    assert!(index.search("version", 5).len() <= 1);
                }
            });
        }
    });
    assert_eq!(names(&index.search("version", 5)), ["version_199"]);
}
