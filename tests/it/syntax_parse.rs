//! Language detection and parsing (full and incremental, string and rope).
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::Path;

use fettle::syntax::{parse_rope, parse_str, Language};
use ropey::Rope;
use tree_sitter::{InputEdit, Point};

#[test]
fn language_ids() {
    let cases = [
        ("rust", Language::Rust),
        ("python", Language::Python),
        ("javascript", Language::JavaScript),
        ("javascriptreact", Language::JavaScript),
        ("typescript", Language::TypeScript),
        ("typescriptreact", Language::Tsx),
        ("go", Language::Go),
        ("c", Language::C),
        ("cpp", Language::Cpp),
        ("c++", Language::Cpp),
        ("java", Language::Java),
        ("lua", Language::Lua),
        ("Rust", Language::Rust),
    ];
    for (id, lang) in cases {
        assert_eq!(Language::from_language_id(id), Some(lang), "{id}");
    }
    assert_eq!(Language::from_language_id("plaintext"), None);
    assert_eq!(Language::from_language_id(""), None);
}

#[test]
fn extensions() {
    let cases = [
        ("a.rs", Language::Rust),
        ("a.py", Language::Python),
        ("a.pyi", Language::Python),
        ("a.js", Language::JavaScript),
        ("a.mjs", Language::JavaScript),
        ("a.cjs", Language::JavaScript),
        ("a.jsx", Language::JavaScript),
        ("a.ts", Language::TypeScript),
        ("a.mts", Language::TypeScript),
        ("a.cts", Language::TypeScript),
        ("a.tsx", Language::Tsx),
        ("a.go", Language::Go),
        ("a.c", Language::C),
        ("a.h", Language::C),
        ("a.cc", Language::Cpp),
        ("a.cpp", Language::Cpp),
        ("a.cxx", Language::Cpp),
        ("a.hpp", Language::Cpp),
        ("a.hh", Language::Cpp),
        ("a.hxx", Language::Cpp),
        ("a.java", Language::Java),
        ("dir.d/a.lua", Language::Lua),
        ("A.RS", Language::Rust),
    ];
    for (path, lang) in cases {
        assert_eq!(Language::from_path(Path::new(path)), Some(lang), "{path}");
    }
    for path in ["Makefile", "a.txt", "rs", ".rs.bak", "a."] {
        assert_eq!(Language::from_path(Path::new(path)), None, "{path}");
    }
}

#[test]
fn detect_prefers_language_id() {
    let path = Path::new("x.py");
    assert_eq!(
        Language::detect(Some("rust"), Some(path)),
        Some(Language::Rust)
    );
    assert_eq!(
        Language::detect(Some("unknown"), Some(path)),
        Some(Language::Python)
    );
    assert_eq!(Language::detect(None, None), None);
}

#[test]
fn names_are_distinct_and_every_language_parses() {
    let mut names: Vec<_> = Language::ALL.iter().map(|l| l.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 10);
    for &lang in Language::ALL {
        assert!(!lang.name().is_empty());
        assert_eq!(Language::from_language_id(lang.language_id()), Some(lang));
        let tree = parse_str(lang, "", None).expect("parse");
        assert_eq!(tree.root_node().end_byte(), 0);
    }
}

/// A rope with many small chunks, so chunk boundaries fall inside tokens.
fn chunky_rope(text: &str) -> Rope {
    let mut rope = Rope::new();
    for ch in text.chars() {
        rope.insert_char(rope.len_chars(), ch);
    }
    rope
}

#[test]
fn rope_and_str_give_the_same_tree() {
    let mut text = String::new();
    for i in 0..400 {
        text.push_str(&format!(
            "/// 日本語 🎉 doc {i}\nfn f{i}(x: u32) -> u32 {{ x + {i} }}\n"
        ));
    }
    let rope = chunky_rope(&text);
    assert!(rope.chunks().count() > 1);
    let a = parse_str(Language::Rust, &text, None).expect("parse");
    let b = parse_rope(Language::Rust, &rope, None).expect("parse");
    assert_eq!(a.root_node().to_sexp(), b.root_node().to_sexp());
    assert_eq!(b.root_node().end_byte(), text.len());
    assert!(!b.root_node().has_error());
}

fn point_at(text: &str, byte: usize) -> Point {
    let before = &text[..byte];
    let row = before.matches('\n').count();
    let column = byte - before.rfind('\n').map_or(0, |i| i + 1);
    Point { row, column }
}

#[test]
fn incremental_rope_parse_matches_full_parse() {
    let old_text = "fn main() {\n    let x = 1;\n}\n";
    let mut rope = Rope::from_str(old_text);
    let mut tree = parse_rope(Language::Rust, &rope, None).expect("parse");

    // Insert a call after `let x = 1;`.
    let insert = "\n    println!(\"é {x}\");";
    let at = old_text.find(';').expect("semicolon") + 1;
    let char_at = rope.byte_to_char(at);
    rope.insert(char_at, insert);
    let new_text = rope.to_string();
    tree.edit(&InputEdit {
        start_byte: at,
        old_end_byte: at,
        new_end_byte: at + insert.len(),
        start_position: point_at(old_text, at),
        old_end_position: point_at(old_text, at),
        new_end_position: point_at(&new_text, at + insert.len()),
    });
    let incremental = parse_rope(Language::Rust, &rope, Some(&tree)).expect("parse");
    let full = parse_str(Language::Rust, &new_text, None).expect("parse");
    assert_eq!(
        incremental.root_node().to_sexp(),
        full.root_node().to_sexp()
    );
    assert!(!incremental.root_node().has_error());
}

#[test]
fn parsers_work_across_threads() {
    let handles: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let lang = Language::ALL[i % Language::ALL.len()];
                for _ in 0..10 {
                    let tree = parse_str(lang, "x", None).expect("parse");
                    assert_eq!(tree.root_node().end_byte(), 1);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
}

fn rope_point(rope: &Rope, byte: usize) -> Point {
    let row = rope.byte_to_line(byte);
    Point {
        row,
        column: byte - rope.line_to_byte(row),
    }
}

/// Applies `replace chars [start, end) with insert` to the rope and the tree.
fn edit(rope: &mut Rope, tree: &mut tree_sitter::Tree, start: usize, end: usize, insert: &str) {
    let start_byte = rope.char_to_byte(start);
    let old_end_byte = rope.char_to_byte(end);
    let start_position = rope_point(rope, start_byte);
    let old_end_position = rope_point(rope, old_end_byte);
    rope.remove(start..end);
    rope.insert(start, insert);
    let new_end_byte = start_byte + insert.len();
    tree.edit(&InputEdit {
        start_byte,
        old_end_byte,
        new_end_byte,
        start_position,
        old_end_position,
        new_end_position: rope_point(rope, new_end_byte),
    });
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    #[test]
    fn incremental_parses_match_full_parses(
        edits in proptest::collection::vec(
            (0.0f64..1.0, 0usize..20, proptest::sample::select(vec![
                "", "x", ";", "}", "{", "fn f() {}\n", "é🎉", "\n", "let y = (1, 2);", "//",
            ])),
            1..8,
        )
    ) {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/syntax/rust.rs"),
        ).expect("fixture");
        let mut rope = Rope::from_str(&text);
        let mut tree = parse_rope(Language::Rust, &rope, None).expect("parse");
        for (at, len, insert) in edits {
            let chars = rope.len_chars();
            let start = ((chars as f64) * at) as usize;
            let end = (start + len).min(chars);
            edit(&mut rope, &mut tree, start, end, insert);
            tree = parse_rope(Language::Rust, &rope, Some(&tree)).expect("parse");
            let full = parse_str(Language::Rust, &rope.to_string(), None).expect("parse");
            proptest::prop_assert_eq!(tree.root_node().end_byte(), rope.len_bytes());
            // Error recovery may legitimately differ between incremental and
            // fresh parses; valid code must not.
            if !full.root_node().has_error() {
                proptest::prop_assert_eq!(tree.root_node().to_sexp(), full.root_node().to_sexp());
            }
        }
    }
}
