//! Workspace index: walking rules, storage and updates over small
//! real-looking workspaces in temp dirs. Queries: `index_search.rs`.
// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::index_common;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio_util::sync::CancellationToken;

use fettle::index::{IndexProgress, IndexSettings, WorkspaceIndex};
use fettle::syntax::{Language, SymbolKind};
use index_common::*;

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
    assert_eq!(
        index.files_referencing("split_pairs"),
        std::slice::from_ref(&lib)
    );
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
    // A watcher's delete event for a folder names only the folder.
    index.remove_file(&dir.path().join("pkg"));
    assert!(index.definitions("in_new_dir").is_empty());
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
        &CancellationToken::new(),
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
        &CancellationToken::new(),
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
    index.index_roots(&roots, &|_| {}, &CancellationToken::new());
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
    let cancel = CancellationToken::new();
    let reports = AtomicUsize::new(0);
    let progress = |p: IndexProgress| {
        reports.fetch_add(1, Ordering::Relaxed);
        assert_eq!(p.total, Some(400));
        if p.done >= 50 {
            cancel.cancel();
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
        &CancellationToken::new(),
    );
    assert_eq!(*last.lock(), Some((9, Some(9))));
}

/// The innermost definition around a line, as the completion prompt asks
/// for it, agrees with scanning all of the file's symbols.
#[test]
fn enclosing_symbol_is_the_innermost_around_the_line() {
    let dir = workspace();
    let (index, _) = index(dir.path());
    let path = dir.path().join("src/nested.rs");
    let text = "fn before() {}\n\nimpl Shape {\n    fn area(&self) -> u32 {\n        fn helper() -> u32 {\n            1\n        }\n        helper()\n    }\n}\n\nfn after() {\n    let x = 1;\n}\n";
    index.update_text(&path, Some(Language::Rust), text);
    let functions = |kind: SymbolKind| matches!(kind, SymbolKind::Function | SymbolKind::Method);
    let name_at = |line: u32| {
        index
            .enclosing_symbol(&path, line, functions)
            .map(|s| s.name.to_string())
    };
    let by_scan = |line: u32| {
        index
            .file_symbols(&path)
            .into_iter()
            .rfind(|s| functions(s.kind) && s.range.0.line <= line && line <= s.range.1.line)
            .map(|s| s.name.to_string())
    };
    let expected = [
        (0, Some("before")),
        (1, None),
        (2, None),
        (3, Some("area")),
        (5, Some("helper")),
        (7, Some("area")),
        (9, None),
        (12, Some("after")),
        (40, None),
    ];
    for (line, name) in expected {
        assert_eq!(name_at(line).as_deref(), name, "line {line}");
        assert_eq!(name_at(line), by_scan(line), "line {line}");
    }
    // Any kind: the impl block holds line 2 and encloses the methods.
    let any = |line: u32| {
        index
            .enclosing_symbol(&path, line, |_| true)
            .map(|s| (s.name.to_string(), s.range))
    };
    let any_by_scan = |line: u32| {
        index
            .file_symbols(&path)
            .into_iter()
            .rfind(|s| s.range.0.line <= line && line <= s.range.1.line)
            .map(|s| (s.name.to_string(), s.range))
    };
    assert!(
        any(2).is_some_and(|(name, _)| name.contains("Shape")),
        "{:?}",
        any(2)
    );
    for line in 0..16 {
        assert_eq!(any(line), any_by_scan(line), "line {line}");
    }
    assert!(index
        .enclosing_symbol(&dir.path().join("src/missing.rs"), 0, |_| true)
        .is_none());
}

#[test]
fn a_hard_linked_file_is_not_indexed() {
    // Its other name may be outside the workspace (a copy of someone's
    // secrets under `notes.py`): read_file and search refuse it, and
    // nothing of it may reach the model through the index either.
    let outside = tempfile::tempdir().unwrap();
    let dir = workspace();
    let theirs = outside.path().join("private.py");
    fs::write(&theirs, "def private_deploy_token():\n    return 1\n").unwrap();
    fs::hard_link(&theirs, dir.path().join("scripts/notes.py")).unwrap();
    let (index, _) = index(dir.path());
    assert!(index.definitions("private_deploy_token").is_empty());
    assert!(!rel_files(&index, dir.path()).contains("scripts/notes.py"));
    // Nor when it arrives as an update.
    index.update_file(&dir.path().join("scripts/notes.py"));
    assert!(index.definitions("private_deploy_token").is_empty());
}
