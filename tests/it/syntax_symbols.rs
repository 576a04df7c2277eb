//! Data-driven tag tests: every file in `tests/fixtures/syntax/` is parsed,
//! tagged and rendered as an outline plus references, and compared with its
//! snapshot in `tests/fixtures/syntax/snapshots/`.
//!
//! Update snapshots with `INSTA_UPDATE=always cargo test --test it syntax_symbols::`
//! and review every changed line. To see a file's syntax tree while writing
//! queries: `FETTLE_SYNTAX_DUMP=path cargo test --test it syntax_symbols::dump -- --ignored --nocapture`.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use fettle::syntax::{
    parse_str, symbol_tree, syntax_errors, tags, Language, SymbolKind, SymbolNode, Tags,
};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/syntax")
}

fn fixtures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixture dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file() && Language::from_path(p).is_some())
        .collect();
    files.sort();
    files
}

/// 1-based line of a byte offset, for readable snapshots.
fn line_of(text: &str, byte: usize) -> usize {
    text[..byte].matches('\n').count() + 1
}

fn render_symbols(out: &mut String, nodes: &[SymbolNode], depth: usize, text: &str) {
    for n in nodes {
        let d = &n.definition;
        let _ = write!(
            out,
            "{:indent$}{:?} {} {}..{} L{}-{} sel {}..{}",
            "",
            d.kind,
            d.name,
            d.range.start,
            d.range.end,
            line_of(text, d.range.start),
            line_of(text, d.range.end),
            d.name_range.start,
            d.name_range.end,
            indent = depth * 2
        );
        if let Some(detail) = &d.detail {
            let _ = write!(out, " | {detail}");
        }
        out.push('\n');
        render_symbols(out, &n.children, depth + 1, text);
    }
}

fn render(tags: &Tags, text: &str) -> String {
    let mut out = String::from("# symbols\n");
    render_symbols(&mut out, &symbol_tree(tags.definitions.clone()), 0, text);
    out.push_str("# references\n");
    // One line per source line keeps the snapshot short and reviewable.
    let mut current_line = 0;
    for r in &tags.references {
        let line = line_of(text, r.range.start);
        if line != current_line {
            if current_line != 0 {
                out.push('\n');
            }
            let _ = write!(out, "L{line}:");
            current_line = line;
        }
        let _ = write!(out, " {}@{}", r.name, r.range.start);
    }
    out.push('\n');
    out
}

fn check_invariants(path: &Path, nodes: &[SymbolNode], parent: Option<&std::ops::Range<usize>>) {
    let mut prev_start = 0;
    for n in nodes {
        let d = &n.definition;
        assert!(
            d.range.start <= d.name_range.start && d.name_range.end <= d.range.end,
            "{}: selection of {} outside its range",
            path.display(),
            d.name
        );
        if let Some(p) = parent {
            assert!(
                p.start <= d.range.start && d.range.end <= p.end,
                "{}: {} outside its parent",
                path.display(),
                d.name
            );
        }
        assert!(
            d.range.start >= prev_start,
            "{}: children out of order",
            path.display()
        );
        prev_start = d.range.start;
        check_invariants(path, &n.children, Some(&d.range));
    }
}

fn run_fixture(file: &str) {
    let path = fixture_dir().join(file);
    let text = std::fs::read_to_string(&path).expect("read fixture");
    let lang = Language::from_path(&path).expect("fixture language");
    let tree = parse_str(lang, &text, None).expect("parse");
    let errors = syntax_errors(&tree, &text, 10);
    assert!(errors.is_empty(), "{file} has syntax errors: {errors:?}");
    let tags = tags(lang, &tree, &text);
    for d in &tags.definitions {
        if d.kind != SymbolKind::Impl {
            assert_eq!(&text[d.name_range.clone()], d.name, "{file}: name range");
        }
    }
    check_invariants(&path, &symbol_tree(tags.definitions.clone()), None);
    insta::with_settings!({
        snapshot_path => fixture_dir().join("snapshots"),
        prepend_module_to_snapshot => false,
        description => format!("{} ({})", file, lang.name()),
        omit_expression => true,
    }, {
        insta::assert_snapshot!(file.replace('.', "_"), render(&tags, &text));
    });
}

macro_rules! fixture_tests {
    ($($name:ident => $file:literal,)*) => {
        $(#[test] fn $name() { run_fixture($file); })*

        #[test]
        fn every_fixture_has_a_test() {
            let known = [$($file),*];
            for path in fixtures() {
                let name = path.file_name().and_then(|n| n.to_str()).expect("name");
                assert!(known.contains(&name), "add {name} to fixture_tests!");
            }
        }
    };
}

fixture_tests! {
    rust => "rust.rs",
    python => "python.py",
    javascript => "javascript.jsx",
    typescript => "typescript.ts",
    tsx => "tsx.tsx",
    go => "go.go",
    c => "c.c",
    cpp => "cpp.cpp",
    java => "Java.java",
    lua => "lua.lua",
}

#[test]
fn every_language_has_a_fixture() {
    for &lang in Language::ALL {
        assert!(
            fixtures()
                .iter()
                .any(|p| Language::from_path(p) == Some(lang)),
            "no fixture for {}",
            lang.name()
        );
    }
}

#[test]
fn queries_compile() {
    if let Err(e) = fettle::syntax::check_queries() {
        panic!("{e}");
    }
}

#[test]
#[ignore = "a tool: prints the tree of $FETTLE_SYNTAX_DUMP"]
fn dump() {
    let Ok(path) = std::env::var("FETTLE_SYNTAX_DUMP") else {
        return;
    };
    let path = PathBuf::from(path);
    let text = std::fs::read_to_string(&path).expect("read");
    let lang = Language::from_path(&path).expect("language");
    let tree = parse_str(lang, &text, None).expect("parse");
    let mut cursor = tree.walk();
    let mut depth = 0;
    loop {
        let node = cursor.node();
        if node.is_named() {
            let field = cursor
                .field_name()
                .map(|f| format!("{f}: "))
                .unwrap_or_default();
            let snippet: String = text[node.byte_range()].chars().take(40).collect();
            println!(
                "{:indent$}{field}{} [{}] {:?}",
                "",
                node.kind(),
                node.start_position().row + 1,
                if node.child_count() == 0 {
                    snippet
                } else {
                    String::new()
                },
                indent = depth * 2
            );
        }
        if cursor.goto_first_child() {
            depth += 1;
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return;
            }
            depth -= 1;
        }
    }
}
