//! `syntax_errors`: ERROR and MISSING nodes turned into actionable messages.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::{Path, PathBuf};

use fettle::syntax::{edit_errors, parse_rope, parse_str, syntax_errors, Language, SyntaxError};
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
    assert_eq!(show(&errs), ["25..25 expected \";\""]);
    // The zero-width range sits right after `1`.
    assert_eq!(&text[..25], "fn main() {\n    let x = 1");
}

#[test]
fn c_missing_semicolon() {
    let text = "int main(void) {\n    int x = 1\n    return x;\n}\n";
    let errs = errors(Language::C, text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].message, "expected \";\"");
    assert_eq!(errs[0].range, 30..30);
}

#[test]
fn python_unclosed_paren() {
    let text = "def f(x):\n    return g(x, 1\n\ny = 2\n";
    let errs = errors(Language::Python, text);
    // The `)` is expected where the call's line ends.
    let at = text.find("1\n").expect("digit") + 1;
    assert_eq!(show(&errs), [format!("{at}..{at} expected \")\"")]);
}

/// Without a repair that helps (the bracket is never closed and nothing
/// follows), the opener is reported.
#[test]
fn unclosed_paren_at_end_of_file() {
    let text = "def f(x):\n    return g(x, [1,\n";
    let errs = errors(Language::Python, text);
    assert!(!errs.is_empty());
    assert!(
        errs.iter().all(|e| !text[e.range.clone()].contains('\n')),
        "{errs:?}"
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

/// A body that lost its indentation parses in tree-sitter-python as an
/// empty block, with no ERROR; Python stops with "expected an indented
/// block" there, and so must the edit guards. The editor's diagnostics do
/// not say it: `def f():` + Enter is an empty block until the body is typed.
#[test]
fn python_block_without_a_statement_is_an_edit_error() {
    let edit = |text: &str| {
        let tree = parse_str(Language::Python, text, None).expect("parse");
        show(&edit_errors(&tree, text, 100))
    };
    let text = "def f(x):\nreturn x\n";
    assert_eq!(
        edit(text),
        ["10..10 expected an indented block after function definition on line 1"]
    );
    assert_eq!(errors(Language::Python, text), []);
    let text = "if ready:\n    # later\n\nelse:\n    go()\n";
    let at = text.find("else").unwrap();
    assert_eq!(
        edit(text),
        [format!(
            "{at}..{at} expected an indented block after 'if' statement on line 1"
        )]
    );
    // Each where CPython puts it: the line that should have been indented.
    for (name, line, expected) in [
        (
            "python_missing_indent.py",
            4,
            "after 'for' statement on line 3",
        ),
        (
            "python_missing_indent_comment_only.py",
            8,
            "after function definition on line 5",
        ),
    ] {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/python_indentation")
                .join(name),
        )
        .unwrap();
        let found = edit(&text);
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        let tree = parse_str(Language::Python, &text, None).unwrap();
        let error = &edit_errors(&tree, &text, 100)[0];
        assert_eq!(
            text[..error.range.start].matches('\n').count() + 1,
            line,
            "{name}"
        );
        assert!(
            error.message.ends_with(expected),
            "{name}: {}",
            error.message
        );
        // A line's first character, after its indentation.
        assert!(text[..error.range.start].ends_with("\n    "), "{name}");
    }
    // Inside an ERROR's header, the ERROR is the error.
    assert_eq!(edit("def f(x):\n    return g(x, 1\n\ny = 2\n").len(), 1);
}

/// Valid Python with blocks that are easy to take for empty: one-liners,
/// `pass` and `...`, comments before and inside, a header over several
/// lines, decorators, `match`, a body after a comment at the end of the
/// header line.
#[test]
fn python_blocks_that_hold_a_statement_are_not_errors() {
    let text = "\
import os
class A: pass
class B:
    ...
@decorator
def f(
    a,
    b,
):  # the header's comment
    # a comment first
    return a + b
def g(x):
    if x: return 1
    for i in x:
        # only a comment, then
        pass
    else:
        pass
    try:
        os.remove(x)
    except OSError:  # ignore
        pass
    finally:
        pass
    while False:
        pass
    with open(x) as fh:
        return fh.read()
    match x:
        case 1:
            return 2
        case _:
            pass
";
    let tree = parse_str(Language::Python, text, None).expect("parse");
    assert_eq!(show(&edit_errors(&tree, text, 100)), Vec::<String>::new());
    // Braces are not blocks that need a statement.
    for (lang, text) in [
        (Language::Rust, "fn f() {}\n"),
        (Language::JavaScript, "if (x) {}\n"),
    ] {
        let tree = parse_str(lang, text, None).expect("parse");
        assert_eq!(edit_errors(&tree, text, 100), [], "{lang:?}");
    }
}

/// Where tree-sitter gives up on a whole file (CPython's `test_compile.py`
/// dedents inside parentheses, which Python allows and the grammar's
/// scanner does not) it wraps all of it in one ERROR. Past the repair
/// limit that was reported at line 1 (`unexpected "import os"`); the fault
/// is in the first statement inside that holds an error.
#[test]
fn a_file_wrapped_in_one_error_is_reported_at_the_fault() {
    let mut text = String::from(
        "import os\nimport sys\n\n\nclass A:\n    def f(self):\n        (bar.\n    baz)\n        return os.sep\n\n",
    );
    let mut n = 0;
    // Past the 64 KiB the repairs are tried on: the tree's own messages.
    while text.len() < 80 * 1024 {
        text.push_str(&format!("def f{n}(x):\n    return x + {n}\n\n\n"));
        n += 1;
    }
    let tree = parse_str(Language::Python, &text, None).expect("parse");
    let root = tree.root_node();
    assert!(
        root.child(0)
            .is_some_and(|c| c.is_error() && c.end_byte() > text.len() / 2),
        "the grammar no longer wraps this file in one ERROR: {}",
        root.child(0).map(|c| c.kind()).unwrap_or_default()
    );
    let errs = syntax_errors(&tree, &text, 100);
    assert_eq!(errs.len(), 1, "{errs:?}");
    let line = text[..errs[0].range.start].matches('\n').count() + 1;
    assert_eq!((line, errs[0].message.as_str()), (7, "unclosed \"(\""));
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

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/syntax_errors")
}

/// Each error as `line:column message`, then its line with the range marked
/// (`^` for a zero-width "expected" point).
fn render(text: &str, errors: &[SyntaxError]) -> String {
    let mut out = String::new();
    for e in errors {
        let line_start = text[..e.range.start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |i| line_start + i);
        let line_no = text[..e.range.start].matches('\n').count() + 1;
        let column = text[line_start..e.range.start].chars().count() + 1;
        let width = text[e.range.clone()].chars().count().max(1);
        out.push_str(&format!(
            "{line_no}:{column} {}\n    {}\n    {}{}\n",
            e.message,
            &text[line_start..line_end],
            " ".repeat(column - 1),
            "^".repeat(width)
        ));
    }
    out
}

/// Golden tests: one fixture per common mistake per language (missing
/// colon, brace, paren, quote, comma, semicolon) in
/// `tests/fixtures/syntax_errors/`, each with its snapshot in `snapshots/`.
/// Update with `INSTA_UPDATE=always cargo test --test it syntax_errors::` and
/// review every changed line: the error must sit at the fault and say what
/// was expected.
#[test]
fn golden_common_mistakes() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let mut languages = std::collections::HashSet::new();
    for path in &files {
        let lang = Language::from_path(path).unwrap_or_else(|| panic!("{path:?}: no language"));
        languages.insert(lang);
        let text = std::fs::read_to_string(path).unwrap();
        let errs = errors(lang, &text);
        let name = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace('.', "_");
        assert!(!errs.is_empty(), "{name}: the mistake is not reported");
        for e in &errs {
            assert!(
                !text[e.range.clone()].contains('\n') && !e.message.is_empty(),
                "{name}: {e:?}"
            );
        }
        insta::with_settings!({
            snapshot_path => golden_dir().join("snapshots"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(name, render(&text, &errs));
        });
    }
    for lang in Language::ALL {
        assert!(languages.contains(lang), "no golden fixture for {lang:?}");
    }
}

/// Issue 11: deleting the `:` of `def total(self)` (line 28) in a class
/// reported a bare "syntax error" on line 21 (`class Item:`) and another on
/// line 49 (the next class). One fault, one error, where it is.
#[test]
fn missing_colon_in_a_class_is_one_error_at_the_fault() {
    let text =
        std::fs::read_to_string(golden_dir().join("python_issue11_missing_colon_in_class.py"))
            .unwrap();
    let errs = errors(Language::Python, &text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    let at = errs[0].range.start;
    assert_eq!(text[..at].matches('\n').count() + 1, 28);
    assert!(text[..at].ends_with("def total(self)"), "{errs:?}");
    assert_eq!(errs[0].message, "expected \":\"");
}
