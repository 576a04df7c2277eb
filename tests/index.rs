//! Workspace index: walking rules, storage, updates and queries over small
//! real-looking workspaces in temp dirs.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use fettle::index::{IndexProgress, IndexSettings, IndexStats, WorkspaceIndex};
use fettle::syntax::{Language, SymbolKind};
use tempfile::TempDir;

const LIB_RS: &str = r#"//! Configuration loading.
use std::collections::HashMap;

pub struct Config {
    pub values: HashMap<String, String>,
}

impl Config {
    pub fn load(path: &str) -> Config {
        let values = parse_pairs(path);
        Config { values }
    }

    pub fn get(&self, key: &str) -> Option<&String> {
        self.values.get(key)
    }
}

pub fn parse_pairs(text: &str) -> HashMap<String, String> {
    HashMap::new()
}
"#;

const MAIN_RS: &str = r#"mod lib;
use lib::Config;

fn main() {
    let config = Config::load("app.toml");
    let pairs = lib::parse_pairs("a=b");
    println!("{:?} {}", config.get("x"), pairs.len());
}
"#;

const UTIL_PY: &str = r#"import os


class PathCache:
    def __init__(self, root):
        self.root = root

    def resolve(self, name):
        return os.path.join(self.root, name)


def load_config(path):
    cache = PathCache(path)
    return cache.resolve("config.toml")
"#;

const APP_JS: &str = r#"import { render } from './view.js';

export class Router {
  constructor(routes) {
    this.routes = routes;
  }

  navigate(path) {
    return render(this.routes[path]);
  }
}

export function startApp(routes) {
  const router = new Router(routes);
  router.navigate('/');
}
"#;

const UTIL_H: &str = r#"#ifndef UTIL_H
#define UTIL_H

struct buffer {
    char *data;
    unsigned long len;
};

int buffer_append(struct buffer *buf, const char *text);

#endif
"#;

fn write(root: &Path, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = root.join(rel);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap();
    }
    fs::write(&path, contents).unwrap();
    path
}

fn settings() -> IndexSettings {
    IndexSettings {
        max_file_bytes: 4096,
        exclude: vec!["vendor/".into(), "*.min.js".into()],
        threads: 2,
    }
}

/// A workspace with every kind of file the walk must keep or skip.
fn workspace() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "target/\n*.gen.rs\n");
    write(root, "src/lib.rs", LIB_RS);
    write(root, "src/main.rs", MAIN_RS);
    write(root, "scripts/util.py", UTIL_PY);
    write(root, "web/app.js", APP_JS);
    write(root, "include/util.h", UTIL_H);
    // Skipped: ignored, hidden, excluded.
    write(
        root,
        "target/debug/build.rs",
        "fn ignored_by_gitignore() {}\n",
    );
    write(root, "src/schema.gen.rs", "fn ignored_generated() {}\n");
    write(root, ".hidden/secret.rs", "fn hidden_fn() {}\n");
    write(root, "vendor/dep/lib.rs", "fn excluded_vendor() {}\n");
    write(
        root,
        "web/bundle.min.js",
        "function excludedMinified() {}\n",
    );
    // Skipped by content: too large, binary, not UTF-8, no grammar.
    write(
        root,
        "src/huge.rs",
        format!("fn too_big() {{}}\n{}", "// padding\n".repeat(500)),
    );
    write(
        root,
        "src/blob.rs",
        b"fn binary_fn() {}\n\0\0\x01\x02".as_slice(),
    );
    write(
        root,
        "src/latin1.rs",
        b"// caf\xe9\nfn not_utf8() {}\n".as_slice(),
    );
    write(root, "README.md", "# Demo\n");
    dir
}

fn index(root: &Path) -> (WorkspaceIndex, IndexStats) {
    let index = WorkspaceIndex::new(settings());
    let stats = index.index_roots(&[root.to_path_buf()], &|_| {}, &AtomicBool::new(false));
    (index, stats)
}

fn rel_files(index: &WorkspaceIndex, root: &Path) -> BTreeSet<String> {
    index
        .files()
        .iter()
        .map(|f| {
            f.path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

fn names(symbols: &[fettle::index::IndexedSymbol]) -> Vec<&str> {
    symbols.iter().map(|s| &*s.name).collect()
}

#[test]
fn walk_indexes_sources_and_skips_the_rest() {
    let dir = workspace();
    let (index, stats) = index(dir.path());
    let expected: BTreeSet<String> = [
        "include/util.h",
        "scripts/util.py",
        "src/lib.rs",
        "src/main.rs",
        "web/app.js",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(rel_files(&index, dir.path()), expected);
    assert_eq!(stats.files, 5);
    // huge.rs, blob.rs, latin1.rs, README.md (ignored/hidden/excluded files
    // are never visited, so they are not "skipped").
    assert_eq!(stats.skipped, 4);
    let lines = LIB_RS.lines().count() + MAIN_RS.lines().count() + UTIL_PY.lines().count();
    assert_eq!(
        stats.lines,
        lines + APP_JS.lines().count() + UTIL_H.lines().count()
    );
    assert_eq!(index.stats().files, 5);
    assert_eq!(index.stats().definitions, stats.definitions);
    for name in [
        "ignored_by_gitignore",
        "ignored_generated",
        "hidden_fn",
        "excluded_vendor",
        "excludedMinified",
        "too_big",
        "binary_fn",
        "not_utf8",
    ] {
        assert!(
            index.definitions(name).is_empty(),
            "{name} should not be indexed"
        );
    }
}

#[test]
fn single_path_rules_agree_with_the_walk() {
    let dir = workspace();
    let (index, _) = index(dir.path());
    let root = dir.path();
    for rel in [
        "src/lib.rs",
        "web/app.js",
        "src/huge.rs",
        "README.md",
        "src/new.rs",
    ] {
        assert!(index.accepts(&root.join(rel)), "{rel}");
    }
    for rel in [
        "target/debug/build.rs",
        "src/schema.gen.rs",
        ".hidden/secret.rs",
        "vendor/dep/lib.rs",
        "web/bundle.min.js",
    ] {
        assert!(!index.accepts(&root.join(rel)), "{rel}");
    }
    assert!(!index.accepts(Path::new("/somewhere/else/file.rs")));
    // The same rules apply to updates of single files.
    index.update_file(&root.join("target/debug/build.rs"));
    index.update_file(&root.join("vendor/dep/lib.rs"));
    index.update_file(&root.join("src/blob.rs"));
    index.update_file(&root.join("src/huge.rs"));
    assert_eq!(index.stats().files, 5);
}

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
        ["Config", "values", "impl Config", "load", "get", "parse_pairs"]
    );
    assert_eq!(symbols[2].kind, SymbolKind::Impl);
    assert!(index.file_symbols(&dir.path().join("nope.rs")).is_empty());

    assert_eq!(
        index.files_referencing("parse_pairs"),
        [lib.clone(), main.clone()]
    );
    assert_eq!(index.files_referencing("load"), [main.clone()]);
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

#[test]
fn update_file_after_modification_and_deletion() {
    let dir = workspace();
    let (index, _) = index(dir.path());
    let lib = dir.path().join("src/lib.rs");
    let before = index.stats();

    fs::write(&lib, LIB_RS.replace("parse_pairs", "split_pairs")).unwrap();
    index.update_file(&lib);
    assert!(index.definitions("parse_pairs").is_empty());
    assert_eq!(index.definitions("split_pairs").len(), 1);
    // main.rs still calls the old name; lib.rs now calls the new one.
    assert_eq!(
        index.files_referencing("parse_pairs"),
        [dir.path().join("src/main.rs")]
    );
    assert_eq!(index.files_referencing("split_pairs"), [lib.clone()]);
    assert_eq!(index.stats().definitions, before.definitions);

    fs::remove_file(&lib).unwrap();
    index.update_file(&lib);
    assert!(index.file_symbols(&lib).is_empty());
    assert!(index.definitions("Config").is_empty());
    assert!(index.definitions("split_pairs").is_empty());
    assert_eq!(index.stats().files, before.files - 1);
    assert!(index.search("split", 10).is_empty());

    // A new file, then a deleted directory.
    let extra = write(dir.path(), "src/extra/mod.rs", "pub fn brand_new() {}\n");
    index.update_file(&extra);
    assert_eq!(index.definitions("brand_new").len(), 1);
    fs::remove_dir_all(dir.path().join("src/extra")).unwrap();
    index.update_file(&dir.path().join("src/extra"));
    assert!(index.definitions("brand_new").is_empty());

    // A new directory (e.g. a checkout) is scanned with the usual rules.
    write(dir.path(), "pkg/a.rs", "fn in_new_dir() {}\n");
    write(dir.path(), "pkg/target/b.rs", "fn in_new_target() {}\n");
    index.update_file(&dir.path().join("pkg"));
    assert_eq!(index.definitions("in_new_dir").len(), 1);
    assert!(index.definitions("in_new_target").is_empty());
}

#[test]
fn stats_stay_consistent_across_updates() {
    let dir = workspace();
    let (index, _) = index(dir.path());
    let lib = dir.path().join("src/lib.rs");
    for i in 0..5 {
        index.update_text(
            &lib,
            None,
            &format!("{LIB_RS}\nfn extra_{i}() {{ parse_pairs(\"\"); }}\n"),
        );
    }
    index.remove_file(&dir.path().join("web/app.js"));
    let stats = index.stats();
    let files = index.files();
    assert_eq!(stats.files, files.len());
    assert_eq!(
        stats.definitions,
        files
            .iter()
            .map(|f| index.file_symbols(&f.path).len())
            .sum::<usize>()
    );
    assert_eq!(
        stats.lines,
        files.iter().map(|f| f.lines as usize).sum::<usize>()
    );
    let refs: usize = files
        .iter()
        .flat_map(|f| index.reference_counts(&f.path))
        .map(|(_, c)| c as usize)
        .sum();
    assert_eq!(stats.references, refs);
}

#[test]
fn update_text_indexes_buffers_and_survives_the_walk() {
    let dir = workspace();
    let (index, _) = index(dir.path());
    let lib = dir.path().join("src/lib.rs");

    index.update_text(&lib, Some(Language::Rust), "pub fn unsaved_edit() {}\n");
    assert_eq!(index.definitions("unsaved_edit").len(), 1);
    assert!(index.definitions("Config").is_empty());
    assert!(index.file_info(&lib).is_some_and(|f| f.open_buffer));

    // A re-walk must not replace the open buffer with the disk text...
    index.index_roots(
        &[dir.path().to_path_buf()],
        &|_| {},
        &AtomicBool::new(false),
    );
    assert_eq!(index.definitions("unsaved_edit").len(), 1);
    // ...but an explicit re-read (save/close) does.
    index.update_file(&lib);
    assert!(index.definitions("unsaved_edit").is_empty());
    assert_eq!(index.definitions("Config").len(), 1);

    // Language from the editor wins over the extension; none → the path's.
    let odd = dir.path().join("scripts/tool");
    index.update_text(
        &odd,
        Some(Language::Python),
        "def from_buffer():\n    pass\n",
    );
    assert_eq!(index.definitions("from_buffer").len(), 1);
    index.update_text(&odd, None, "def from_buffer():\n    pass\n");
    assert!(index.definitions("from_buffer").is_empty());
    // Ignored paths stay out even when open.
    index.update_text(
        &dir.path().join("target/x.rs"),
        None,
        "fn open_but_ignored() {}\n",
    );
    assert!(index.definitions("open_but_ignored").is_empty());
}

#[test]
fn rewalk_drops_vanished_files_and_follows_gitignore_changes() {
    let dir = workspace();
    let (index, _) = index(dir.path());
    fs::remove_file(dir.path().join("web/app.js")).unwrap();
    let stats = index.index_roots(
        &[dir.path().to_path_buf()],
        &|_| {},
        &AtomicBool::new(false),
    );
    assert_eq!(stats.files, 4);
    assert!(index.definitions("Router").is_empty());

    let gitignore = write(dir.path(), ".gitignore", "target/\n*.gen.rs\nscripts/\n");
    index.update_file(&gitignore);
    assert!(index.definitions("PathCache").is_empty());
    assert!(!index.accepts(&dir.path().join("scripts/util.py")));
    assert_eq!(index.stats().files, 3);
}

#[test]
fn exclude_globs_and_nested_roots() {
    let dir = workspace();
    let index = WorkspaceIndex::new(IndexSettings {
        exclude: vec!["scripts".into(), "/web/".into()],
        ..settings()
    });
    let roots = [dir.path().to_path_buf(), dir.path().join("src")];
    index.index_roots(&roots, &|_| {}, &AtomicBool::new(false));
    let files = rel_files(&index, dir.path());
    // vendor/ is no longer excluded; the nested root does not index twice.
    let expected: BTreeSet<String> = [
        "include/util.h",
        "src/lib.rs",
        "src/main.rs",
        "vendor/dep/lib.rs",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(files, expected);
    assert!(!index.accepts(&dir.path().join("web/app.js")));
    assert!(!index.accepts(&dir.path().join("src/scripts/x.rs")));
    assert_eq!(index.roots(), roots);
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
        &AtomicBool::new(false),
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
fn cancel_stops_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..400 {
        write(
            dir.path(),
            &format!("src/m{i:03}.rs"),
            format!("pub fn func_{i}() {{}}\n"),
        );
    }
    let index = WorkspaceIndex::new(settings());
    let cancel = AtomicBool::new(false);
    let reports = AtomicUsize::new(0);
    let progress = |p: IndexProgress| {
        reports.fetch_add(1, Ordering::Relaxed);
        assert_eq!(p.total, Some(400));
        if p.done >= 50 {
            cancel.store(true, Ordering::Relaxed);
        }
    };
    let stats = index.index_roots(&[dir.path().to_path_buf()], &progress, &cancel);
    assert!(stats.files >= 50 && stats.files < 400, "{stats:?}");
    assert_eq!(index.stats().files, stats.files);
    assert!(reports.load(Ordering::Relaxed) >= 2);

    // Already cancelled: nothing is walked, and nothing indexed is pruned.
    let stats = index.index_roots(&[dir.path().to_path_buf()], &|_| {}, &cancel);
    assert_eq!(stats.files, 0);
    assert!(index.stats().files >= 50);
}

#[test]
fn progress_reports_reach_the_total() {
    let dir = workspace();
    let index = WorkspaceIndex::new(settings());
    let last = parking_lot::Mutex::new(None);
    index.index_roots(
        &[dir.path().to_path_buf()],
        &|p| *last.lock() = Some((p.done, p.total)),
        &AtomicBool::new(false),
    );
    assert_eq!(*last.lock(), Some((9, Some(9))));
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
