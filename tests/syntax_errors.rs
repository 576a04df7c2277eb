//! `syntax_errors`: ERROR and MISSING nodes turned into actionable messages.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use fettle::syntax::{parse_rope, parse_str, syntax_errors, Language, SyntaxError};
use ropey::Rope;
use tree_sitter::{InputEdit, Point};

fn errors(lang: Language, text: &str) -> Vec<SyntaxError> {
    let tree = parse_str(lang, text, None).expect("parse");
    syntax_errors(&tree, text, 100)
}

fn show(errors: &[SyntaxError]) -> Vec<String> {
    errors
        .iter()
        .map(|e| format!("{}..{} {}", e.range.start, e.range.end, e.message))
        .collect()
}

#[test]
fn rust_missing_semicolon() {
    let text = "fn main() {\n    let x = 1\n    let y = 2;\n}\n";
    let errs = errors(Language::Rust, text);
    assert_eq!(show(&errs), ["25..25 missing \";\""]);
    // The zero-width range sits right after `1`.
    assert_eq!(&text[..25], "fn main() {\n    let x = 1");
}

#[test]
fn c_missing_semicolon() {
    let text = "int main(void) {\n    int x = 1\n    return x;\n}\n";
    let errs = errors(Language::C, text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].message, "missing \";\"");
    assert_eq!(errs[0].range, 30..30);
}

#[test]
fn python_unclosed_paren() {
    let text = "def f(x):\n    return g(x, 1\n\ny = 2\n";
    let errs = errors(Language::Python, text);
    let paren = text.find('(').expect("paren");
    let call_paren = text[paren + 1..].find('(').expect("paren") + paren + 1;
    assert_eq!(
        show(&errs),
        [format!("{call_paren}..{} unclosed \"(\"", call_paren + 1)]
    );
}

#[test]
fn error_ranges_stay_on_one_line() {
    let text = "fn main() {}\nfn ) ( {\n  let x = 1;\n}\n";
    let errs = errors(Language::Rust, text);
    assert!(!errs.is_empty());
    for e in &errs {
        assert!(e.range.start <= e.range.end && e.range.end <= text.len());
        assert!(!text[e.range.clone()].contains('\n'), "{e:?}");
        assert!(!e.message.contains('\n'), "{e:?}");
    }
}

#[test]
fn clean_code_has_no_errors() {
    for (lang, text) in [
        (Language::Rust, "fn main() { let x = 1; }"),
        (Language::Python, "def f(x):\n    return g(x, 1)\n"),
        (Language::C, "int main(void) { return 0; }"),
        (Language::Go, "package main\nfunc main() {}\n"),
    ] {
        assert_eq!(errors(lang, text), [], "{lang:?}");
    }
}

#[test]
fn unexpected_snippet_is_one_line_and_truncated() {
    let text =
        "fn main() {}\n@@@ é日本語🎉 this is a very long stretch of garbage @@@\nfn g() {}\n";
    let errs = errors(Language::Rust, text);
    assert!(!errs.is_empty());
    let e = &errs[0];
    assert!(e.message.starts_with("unexpected \"@"), "{e:?}");
    assert!(
        e.message.chars().count() <= "unexpected \"\"".len() + 25,
        "{e:?}"
    );
    assert!(!e.message.contains('\n'));
}

#[test]
fn nested_errors_are_reported_once_and_capped() {
    let text = "fn main() { let = ; let = ; }\nfn ) ( {\n";
    let tree = parse_str(Language::Rust, text, None).expect("parse");
    let all = syntax_errors(&tree, text, 100);
    assert!(!all.is_empty());
    // No error lies inside another (ERROR subtrees are not descended).
    for (i, a) in all.iter().enumerate() {
        for (j, b) in all.iter().enumerate() {
            if i != j && !a.range.is_empty() && !b.range.is_empty() {
                assert!(
                    !(a.range.start <= b.range.start && b.range.end <= a.range.end),
                    "{a:?} contains {b:?}"
                );
            }
        }
    }
    // Document order.
    assert!(all.windows(2).all(|w| w[0].range.start <= w[1].range.start));
    assert_eq!(syntax_errors(&tree, text, 1).len(), 1);
    assert_eq!(syntax_errors(&tree, text, 0).len(), 0);
}

#[test]
fn error_clears_once_fixed_incrementally() {
    let broken = "fn main() {\n    let x = 1\n}\n";
    let mut rope = Rope::from_str(broken);
    let mut tree = parse_rope(Language::Rust, &rope, None).expect("parse");
    assert_eq!(syntax_errors(&tree, broken, 10).len(), 1);

    let at = broken.find('1').expect("digit") + 1;
    rope.insert(rope.byte_to_char(at), ";");
    let fixed = rope.to_string();
    let position = Point { row: 1, column: 13 };
    tree.edit(&InputEdit {
        start_byte: at,
        old_end_byte: at,
        new_end_byte: at + 1,
        start_position: position,
        old_end_position: position,
        new_end_position: Point { row: 1, column: 14 },
    });
    let tree = parse_rope(Language::Rust, &rope, Some(&tree)).expect("parse");
    assert_eq!(syntax_errors(&tree, &fixed, 10), []);
}
