//! Property tests of `fettle::document::Document`:
//! - incremental `didChange` sync equals the same edits applied to a `String`
//!   by a reference written from the LSP spec, in all three encodings;
//! - the incrementally reparsed tree equals a fresh parse of the final text.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the report

use fettle::document::{ChangeError, Document};
use fettle::position::PositionEncoding;
use fettle::syntax::{self, Language};
use proptest::prelude::*;
use tower_lsp::lsp_types::{Position, Range, TextDocumentContentChangeEvent, Url};
use tree_sitter::{Node, Tree};

use crate::reference;
use reference::{ref_apply, ref_lines, ref_position};

// ---------------------------------------------------------------- reference

// ---------------------------------------------------------------- strategies

const POOL: &[&str] = &[
    "a",
    "xyz",
    "fn f() {}",
    "😀",
    "日本",
    "e\u{301}",
    "\u{10FFFF}",
    "é",
    " ",
    "\r\n",
    "\r",
    "\n",
    "\n\r",
    "{",
    "}",
    "\"",
    "//",
];

fn text_strategy(max_parts: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(POOL), 0..max_parts).prop_map(|p| p.concat())
}

/// Mostly small coordinates (so they hit real lines), sometimes huge.
fn coord() -> impl Strategy<Value = u32> {
    prop_oneof![10 => 0u32..16, 1 => Just(u32::MAX), 1 => any::<u32>()]
}

fn pos_strategy() -> impl Strategy<Value = Position> {
    (coord(), coord()).prop_map(|(l, c)| Position::new(l, c))
}

fn change_strategy() -> impl Strategy<Value = TextDocumentContentChangeEvent> {
    let ranged = (pos_strategy(), pos_strategy(), text_strategy(4)).prop_map(|(a, b, text)| {
        // Reversed ranges are left as generated: the document must cope.
        TextDocumentContentChangeEvent {
            range: Some(Range::new(a, b)),
            range_length: None,
            text,
        }
    });
    let full = text_strategy(12).prop_map(|text| TextDocumentContentChangeEvent {
        range: None,
        range_length: None,
        text,
    });
    prop_oneof![20 => ranged, 1 => full]
}

/// `(version step, changes)`: a negative step makes a stale notification.
fn notifications() -> impl Strategy<Value = Vec<(i32, Vec<TextDocumentContentChangeEvent>)>> {
    let step = prop_oneof![10 => 0i32..3, 1 => Just(-1)];
    prop::collection::vec(
        (step, prop::collection::vec(change_strategy(), 0..5)),
        1..10,
    )
}

fn enc_strategy() -> impl Strategy<Value = PositionEncoding> {
    prop::sample::select(PositionEncoding::ALL.to_vec())
}

fn open(name: &str, language_id: &str, text: &str) -> Document {
    let uri = Url::parse(&format!("file:///work/{name}")).unwrap();
    Document::new(uri, language_id.to_owned(), 1, text)
}

// ---------------------------------------------------------------- trees

/// Every node in preorder with what a parse decides: kind, field, byte
/// range, and tree-sitter's own points (exact only if our `InputEdit`s were).
fn nodes(tree: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = tree.walk();
    loop {
        let node: Node = cursor.node();
        out.push(format!(
            "{} {:?} {:?} {:?}..{:?} err={} missing={}",
            node.kind(),
            cursor.field_name(),
            node.byte_range(),
            node.start_position(),
            node.end_position(),
            node.is_error(),
            node.is_missing(),
        ));
        if cursor.goto_first_child() || cursor.goto_next_sibling() {
            continue;
        }
        loop {
            if !cursor.goto_parent() {
                return out;
            }
            if cursor.goto_next_sibling() {
                break;
            }
        }
    }
}

/// The document's tree, checked against a fresh parse of its text.
fn assert_tree_is_fresh(doc: &Document, lang: Language) -> Result<(), TestCaseError> {
    let text = doc.text();
    let tree = doc
        .tree
        .as_ref()
        .expect("a grammar was detected, so there must be a tree");
    let fresh = syntax::parse_str(lang, &text, None).expect("fresh parse");
    if fresh.root_node().has_error() {
        // tree-sitter's error recovery takes reused subtrees into account, so
        // for broken text an incremental parse may group the error
        // differently from a fresh one (tree-sitter's own randomized tests
        // only compare trees of valid text). What must still hold: both see
        // the error, and every node's bytes lie inside its parent's and the text.
        prop_assert!(tree.root_node().has_error(), "text: {:?}", text);
        prop_assert_eq!(tree.root_node().end_byte(), text.len());
        assert_nested(tree.root_node(), &text)?;
        return Ok(());
    }
    prop_assert_eq!(
        tree.root_node().to_sexp(),
        fresh.root_node().to_sexp(),
        "text: {:?}",
        text
    );
    prop_assert_eq!(nodes(tree), nodes(&fresh), "text: {:?}", text);
    Ok(())
}

fn assert_nested(node: Node, text: &str) -> Result<(), TestCaseError> {
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        prop_assert!(
            node.start_byte() <= child.start_byte() && child.end_byte() <= node.end_byte(),
            "{:?} escapes its parent {:?} in {:?}",
            child,
            node,
            text
        );
        assert_nested(child, text)?;
    }
    Ok(())
}

// ---------------------------------------------------------------- sync

fn check_sync(
    doc: &mut Document,
    initial: &str,
    notes: &[(i32, Vec<TextDocumentContentChangeEvent>)],
    enc: PositionEncoding,
) -> Result<(), TestCaseError> {
    let mut want = initial.to_owned();
    let mut version = doc.version;
    for (step, changes) in notes {
        let next = version + step;
        let result = doc.apply_changes(next, changes, enc);
        if next < version {
            prop_assert_eq!(
                result,
                Err(ChangeError::StaleVersion {
                    got: next,
                    stored: version
                })
            );
        } else {
            prop_assert_eq!(result, Ok(()));
            for change in changes {
                ref_apply(&mut want, change, enc);
            }
            version = next;
        }
        prop_assert_eq!(doc.version, version);
        prop_assert_eq!(doc.text(), want.as_str());
        prop_assert_eq!(doc.rope.len_lines(), ref_lines(&want).len());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sync_matches_reference_utf8(initial in text_strategy(16), notes in notifications()) {
        let mut doc = open("notes.txt", "plaintext", &initial);
        check_sync(&mut doc, &initial, &notes, PositionEncoding::Utf8)?;
    }

    #[test]
    fn sync_matches_reference_utf16(initial in text_strategy(16), notes in notifications()) {
        let mut doc = open("notes.txt", "plaintext", &initial);
        check_sync(&mut doc, &initial, &notes, PositionEncoding::Utf16)?;
    }

    #[test]
    fn sync_matches_reference_utf32(initial in text_strategy(16), notes in notifications()) {
        let mut doc = open("notes.txt", "plaintext", &initial);
        check_sync(&mut doc, &initial, &notes, PositionEncoding::Utf32)?;
    }

    /// The same with a grammar: the tree follows the text exactly, even
    /// through garbage, lone CRs (which shift tree-sitter's rows) and full
    /// replacements.
    #[test]
    fn sync_with_tree_matches_reference(
        initial in text_strategy(16),
        notes in notifications(),
        enc in enc_strategy(),
    ) {
        let mut doc = open("lib.rs", "rust", &initial);
        check_sync(&mut doc, &initial, &notes, enc)?;
        assert_tree_is_fresh(&doc, Language::Rust)?;
    }
}

// ---------------------------------------------------------------- reparse

const RUST_SRC: &str = r#"use std::collections::HashMap;
use std::fmt;

/// A tiny inventory.
#[derive(Debug, Default)]
pub struct Inventory {
    items: HashMap<String, u32>,
    label: &'static str,
}

impl Inventory {
    pub fn new(label: &'static str) -> Self {
        Self { items: HashMap::new(), label }
    }

    pub fn add(&mut self, name: &str, count: u32) -> u32 {
        let slot = self.items.entry(name.to_owned()).or_insert(0);
        *slot += count;
        *slot
    }

    pub fn total(&self) -> u32 {
        self.items.values().sum()
    }
}

impl fmt::Display for Inventory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} items): 😀 日本", self.label, self.total())
    }
}

enum Shape {
    Circle { r: f64 },
    Square(f64),
}

fn area(shape: &Shape) -> f64 {
    match shape {
        Shape::Circle { r } => std::f64::consts::PI * r * r,
        Shape::Square(side) => side * side,
    }
}

fn main() {
    let mut inv = Inventory::new("shop");
    for (i, name) in ["apple", "pear"].iter().enumerate() {
        inv.add(name, i as u32 + 1);
    }
    println!("{inv} {}", area(&Shape::Square(2.0)));
}
"#;

const PYTHON_SRC: &str = r#"import os
from dataclasses import dataclass, field


@dataclass
class Inventory:
    """A tiny inventory. 😀"""

    label: str
    items: dict = field(default_factory=dict)

    def add(self, name, count=1):
        self.items[name] = self.items.get(name, 0) + count
        return self.items[name]

    def total(self):
        return sum(self.items.values())

    def __str__(self):
        return f"{self.label} ({len(self.items)} items) 日本"


def area(shape, size):
    if shape == "circle":
        return 3.14159 * size * size
    elif shape == "square":
        return size * size
    else:
        raise ValueError(shape)


def main():
    inv = Inventory("shop")
    for i, name in enumerate(["apple", "pear"]):
        inv.add(name, i + 1)
    print(inv, area("square", 2), os.getcwd())


if __name__ == "__main__":
    main()
"#;

const JS_SRC: &str = r#"import { readFile } from "fs/promises";

/** A tiny inventory. */
export class Inventory {
  constructor(label) {
    this.label = label;
    this.items = new Map();
  }

  add(name, count = 1) {
    const next = (this.items.get(name) ?? 0) + count;
    this.items.set(name, next);
    return next;
  }

  get total() {
    return [...this.items.values()].reduce((a, b) => a + b, 0);
  }

  toString() {
    return `${this.label} (${this.items.size} items) 😀 日本`;
  }
}

export function area(shape, size) {
  switch (shape) {
    case "circle":
      return Math.PI * size * size;
    default:
      return size * size;
  }
}

async function main() {
  const inv = new Inventory("shop");
  ["apple", "pear"].forEach((name, i) => inv.add(name, i + 1));
  const text = await readFile("x.txt", "utf8").catch(() => "");
  console.log(String(inv), area("square", 2), text.length);
}

main();
"#;

const RUST_FRAGMENTS: &[&str] = &[
    "x",
    " ",
    "\n",
    "\r\n",
    "\r",
    "let y = 1;",
    "fn g() {}",
    "{",
    "}",
    "(",
    ")",
    ";",
    "\"",
    "'",
    "// note\n",
    "/*",
    "*/",
    "struct S;",
    "impl S {",
    "&mut ",
    "::",
    "😀",
    "日本",
    "e\u{301}",
    "match x { _ => 0 }",
    "r#\"",
    "#[test]\n",
];

const PYTHON_FRAGMENTS: &[&str] = &[
    "x",
    " ",
    "    ",
    "\n",
    "\r\n",
    "\r",
    "y = 1",
    "def g():\n    pass\n",
    ":",
    "(",
    ")",
    "[",
    "]",
    "\"",
    "'",
    "\"\"\"",
    "# note\n",
    "class C:\n",
    "return ",
    "lambda: 0",
    "😀",
    "日本",
    "\t",
    "if x:\n    ",
    "\\\n",
];

const JS_FRAGMENTS: &[&str] = &[
    "x",
    " ",
    "\n",
    "\r\n",
    "\r",
    "let y = 1;",
    "function g() {}",
    "{",
    "}",
    "(",
    ")",
    ";",
    "\"",
    "`",
    "${",
    "// note\n",
    "/*",
    "*/",
    "=>",
    "class C {}",
    "😀",
    "日本",
    "/re/g",
    "<div>",
];

/// An edit by relative place: `at` and `len` pick bytes (snapped to char
/// boundaries), so edits land all over a file whatever its current length.
#[derive(Clone, Debug)]
struct Edit {
    at: prop::sample::Index,
    delete: usize,
    insert: Option<prop::sample::Index>,
}

fn edit_strategy() -> impl Strategy<Value = Edit> {
    (
        any::<prop::sample::Index>(),
        prop_oneof![0usize..3, 0usize..40],
        any::<Option<prop::sample::Index>>(),
    )
        .prop_map(|(at, delete, insert)| Edit { at, delete, insert })
}

fn floor_boundary(text: &str, mut byte: usize) -> usize {
    byte = byte.min(text.len());
    while !text.is_char_boundary(byte) {
        byte -= 1;
    }
    byte
}

/// Converts edits to LSP changes against the text as each leaves it.
fn to_change(
    doc_text: &mut String,
    edit: &Edit,
    fragments: &[&str],
    enc: PositionEncoding,
) -> TextDocumentContentChangeEvent {
    let start = floor_boundary(doc_text, edit.at.index(doc_text.len() + 1));
    let end = floor_boundary(doc_text, start + edit.delete);
    let text = edit
        .insert
        .as_ref()
        .map_or("", |i| fragments[i.index(fragments.len())]);
    // A range ending inside a `\r\n` cannot be expressed: it means the end of the line.
    let range = Range::new(
        ref_position(doc_text, start, enc),
        ref_position(doc_text, end, enc),
    );
    let change = TextDocumentContentChangeEvent {
        range: Some(range),
        range_length: None,
        text: text.into(),
    };
    ref_apply(doc_text, &change, enc);
    change
}

/// One change turning `from` into `to`: the span between their common
/// prefix and suffix, widened so that no end splits a `\r\n` (LSP cannot
/// name a place between the two).
fn diff_change(from: &str, to: &str, enc: PositionEncoding) -> TextDocumentContentChangeEvent {
    let splits_crlf = |t: &str, i: usize| {
        let b = t.as_bytes();
        i > 0 && i < b.len() && b[i - 1] == b'\r' && b[i] == b'\n'
    };
    let mut p = from
        .bytes()
        .zip(to.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    p = floor_boundary(from, p.min(to.len()));
    while !to.is_char_boundary(p) || splits_crlf(from, p) || splits_crlf(to, p) {
        p -= 1;
    }
    let max_suffix = from.len().min(to.len()) - p;
    let mut q = from
        .bytes()
        .rev()
        .zip(to.bytes().rev())
        .take(max_suffix)
        .take_while(|(a, b)| a == b)
        .count();
    while !from.is_char_boundary(from.len() - q)
        || !to.is_char_boundary(to.len() - q)
        || splits_crlf(from, from.len() - q)
        || splits_crlf(to, to.len() - q)
    {
        q -= 1;
    }
    TextDocumentContentChangeEvent {
        range: Some(Range::new(
            ref_position(from, p, enc),
            ref_position(from, from.len() - q, enc),
        )),
        range_length: None,
        text: to[p..to.len() - q].to_owned(),
    }
}

fn check_reparse(
    name: &str,
    language_id: &str,
    lang: Language,
    source: &str,
    fragments: &[&str],
    notes: &[Vec<Edit>],
    enc: PositionEncoding,
) -> Result<(), TestCaseError> {
    let mut doc = open(name, language_id, source);
    prop_assert_eq!(doc.language, Some(lang));
    prop_assert!(
        doc.tree.is_some(),
        "no tree: is syntax::parse_rope implemented?"
    );
    let mut want = source.to_owned();
    let mut texts = vec![source.to_owned()];
    for (i, edits) in notes.iter().enumerate() {
        let changes: Vec<_> = edits
            .iter()
            .map(|e| to_change(&mut want, e, fragments, enc))
            .collect();
        doc.apply_changes(2 + i as i32, &changes, enc).unwrap();
        prop_assert_eq!(doc.text(), want.as_str());
        assert_tree_is_fresh(&doc, lang)?;
        texts.push(want.clone());
    }
    // Undo every notification, newest first (tree-sitter's own method):
    // the text is valid again, so the incrementally maintained tree must be
    // exactly the fresh parse, however broken the steps in between were.
    let mut version = 100;
    while texts.len() > 1 {
        let current = texts.pop().unwrap();
        let previous = texts.last().unwrap();
        version += 1;
        doc.apply_changes(version, &[diff_change(&current, previous, enc)], enc)
            .unwrap();
        prop_assert_eq!(doc.text(), previous.as_str());
    }
    prop_assert_eq!(doc.text(), source);
    let fresh = syntax::parse_str(lang, source, None).expect("fresh parse");
    prop_assert!(!fresh.root_node().has_error(), "the fixture must be valid");
    let tree = doc.tree.as_ref().expect("a tree");
    prop_assert_eq!(tree.root_node().to_sexp(), fresh.root_node().to_sexp());
    prop_assert_eq!(nodes(tree), nodes(&fresh));
    Ok(())
}

fn reparse_notes() -> impl Strategy<Value = Vec<Vec<Edit>>> {
    prop::collection::vec(prop::collection::vec(edit_strategy(), 1..4), 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn incremental_parse_equals_fresh_rust(notes in reparse_notes(), enc in enc_strategy()) {
        check_reparse("main.rs", "rust", Language::Rust, RUST_SRC, RUST_FRAGMENTS, &notes, enc)?;
    }

    #[test]
    fn incremental_parse_equals_fresh_rust_crlf(notes in reparse_notes(), enc in enc_strategy()) {
        // Windows line endings, and one lone CR (tree-sitter rows then differ from LSP lines).
        let src = RUST_SRC.replace('\n', "\r\n").replacen("\r\n", "\r", 3);
        check_reparse("main.rs", "rust", Language::Rust, &src, RUST_FRAGMENTS, &notes, enc)?;
    }

    #[test]
    fn incremental_parse_equals_fresh_python(notes in reparse_notes(), enc in enc_strategy()) {
        check_reparse("app.py", "python", Language::Python, PYTHON_SRC, PYTHON_FRAGMENTS, &notes, enc)?;
    }

    #[test]
    fn incremental_parse_equals_fresh_javascript(notes in reparse_notes(), enc in enc_strategy()) {
        check_reparse("app.js", "javascript", Language::JavaScript, JS_SRC, JS_FRAGMENTS, &notes, enc)?;
    }
}

/// Without a grammar everything still works, as plain text.
#[test]
fn unknown_language_is_plain_text() {
    let mut doc = open("notes.unknown", "made-up", "one\ntwo 😀");
    assert_eq!(doc.language, None);
    assert!(doc.tree.is_none());
    let change = TextDocumentContentChangeEvent {
        range: Some(Range::new(Position::new(1, 4), Position::new(1, 6))),
        range_length: None,
        text: "🙂".into(),
    };
    doc.apply_changes(2, &[change], PositionEncoding::Utf16)
        .unwrap();
    assert_eq!(doc.text(), "one\ntwo 🙂");
    assert!(doc.tree.is_none());
    assert_eq!(
        doc.path(),
        Some(std::path::PathBuf::from("/work/notes.unknown"))
    );
}

/// A full replacement drops the old tree and reparses from scratch.
#[test]
fn full_replacement_reparses() {
    let mut doc = open("lib.rs", "rust", "fn a() {}");
    let full = TextDocumentContentChangeEvent {
        range: None,
        range_length: None,
        text: "struct B;".into(),
    };
    doc.apply_changes(2, &[full], PositionEncoding::Utf16)
        .unwrap();
    let tree = doc.tree.as_ref().unwrap();
    assert_eq!(
        tree.root_node().to_sexp(),
        "(source_file (struct_item name: (type_identifier)))"
    );
}
