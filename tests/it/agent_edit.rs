//! The edit engine: search/replace fixtures (every rung, line endings,
//! refusals, the lint guard), all-or-nothing steps, and a round-trip
//! property.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use fettle::agent::edit::{apply_edit, lint_guard, plan_step, EditError, FileOp, Strategy};
use fettle::agent::fsutil::line_ending;
use proptest::prelude::*;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent/edit")
}

#[derive(serde::Deserialize)]
struct EditSpec {
    #[serde(default)]
    note: String,
    search: String,
    replace: String,
}

/// Line endings and the end of the file made visible: a snapshot must show
/// that a CRLF file stayed CRLF.
fn visible(text: &str) -> String {
    let mut out = text.replace('\r', "␍");
    if !out.ends_with('\n') {
        out.push_str("⌀ (no final newline)\n");
    }
    out
}

fn run_fixture(case: &str) {
    let dir = fixture_dir().join(case);
    let before_path = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_stem().is_some_and(|s| s == "before"))
        .unwrap_or_else(|| panic!("{case}: no before.<ext>"));
    let before = std::fs::read_to_string(&before_path).unwrap();
    let spec: EditSpec =
        serde_json::from_str(&std::fs::read_to_string(dir.join("edit.json")).unwrap()).unwrap();

    let mut out = format!(
        "--- search ---\n{}--- replace ---\n{}=== ",
        visible(&spec.search),
        visible(&spec.replace)
    );
    match apply_edit(&before, &spec.search, &spec.replace) {
        Ok(applied) => {
            check_outside_unchanged(
                case,
                &before,
                &applied.text,
                applied.start_line,
                applied.end_line,
            );
            match lint_guard(&before_path, &before, &applied.text) {
                Ok(()) => out.push_str(&format!(
                    "applied at lines {}-{} ({:?})\n{}",
                    applied.start_line,
                    applied.end_line,
                    applied.strategy,
                    visible(&applied.text)
                )),
                Err(rejection) => out.push_str(&format!(
                    "lint guard refused ({:?})\n{rejection}\n",
                    applied.strategy
                )),
            }
        }
        Err(err) => out.push_str(&format!("{err:?}\n{err}\n")),
    }
    insta::with_settings!({
        description => format!("{case}: {}", spec.note),
        omit_expression => true,
    }, {
        insta::assert_snapshot!(case, out);
    });
}

/// Every byte outside the reported lines is kept, and so is the final
/// newline (or its absence).
fn check_outside_unchanged(case: &str, before: &str, after: &str, start: usize, end: usize) {
    let b: Vec<&str> = before.split_inclusive('\n').collect();
    let a: Vec<&str> = after.split_inclusive('\n').collect();
    assert!(start >= 1 && end >= start, "{case}: lines {start}-{end}");
    assert_eq!(
        b[..start - 1],
        a[..start - 1],
        "{case}: lines before the edit changed"
    );
    let tail = a.len().saturating_sub(end);
    assert_eq!(
        b[b.len() - tail..],
        a[a.len() - tail..],
        "{case}: lines after the edit changed"
    );
    assert_eq!(
        before.ends_with('\n'),
        after.ends_with('\n'),
        "{case}: final newline"
    );
    if before.matches("\r\n").count() == before.matches('\n').count() && before.contains('\n') {
        assert_eq!(
            after.matches("\r\n").count(),
            after.matches('\n').count(),
            "{case}: a CRLF file got LF lines"
        );
    }
}

macro_rules! fixture_tests {
    ($($name:ident,)*) => {
        $(#[test] fn $name() { run_fixture(stringify!($name)); })*

        #[test]
        fn every_fixture_has_a_test() {
            let known = [$(stringify!($name)),*];
            for entry in std::fs::read_dir(fixture_dir()).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                assert!(known.contains(&name.as_str()), "fixture {name} has no test");
            }
        }
    };
}

fixture_tests! {
    exact,
    exact_insert_after,
    trailing_whitespace,
    indentation_reindent,
    indentation_deeper_search,
    indentation_tabs,
    indentation_uneven_search,
    punctuation,
    punctuation_nbsp,
    crlf,
    crlf_mixed,
    crlf_indentation,
    no_trailing_newline,
    delete_lines,
    delete_last_line_no_newline,
    blank_lines_around_search,
    ambiguous,
    ambiguous_indentation,
    ambiguous_loose,
    no_match_closest,
    no_match_nothing_close,
    already_applied_really,
    empty_search,
    lint_python,
    lint_rust,
    lint_js,
    lint_preexisting_errors,
    lint_unknown_language,
}

#[test]
fn ladder_rungs_in_order() {
    let text = "a = 1  \nb = 2\n";
    assert_eq!(
        apply_edit(text, "b = 2", "b = 3").unwrap().strategy,
        Strategy::Exact
    );
    assert_eq!(
        apply_edit(text, "a = 1\n", "a = 0\n").unwrap().strategy,
        Strategy::TrailingWhitespace
    );
    assert_eq!(
        apply_edit(text, "  a = 1\n  b = 2", "a = 0\nb = 2")
            .unwrap()
            .strategy,
        Strategy::Indentation
    );
    assert_eq!(
        apply_edit("s = ‘x’\n", "s = 'x'", "s = 'y'").unwrap(),
        fettle::agent::edit::Applied {
            text: "s = 'y'\n".to_owned(),
            strategy: Strategy::Punctuation,
            start_line: 1,
            end_line: 1,
        }
    );
}

#[test]
fn ambiguous_lists_every_line_and_says_what_to_do() {
    let text = "x\ny\nx\nz\nx\n";
    let err = apply_edit(text, "x\n", "w\n").unwrap_err();
    assert_eq!(
        err,
        EditError::Ambiguous {
            lines: vec![1, 3, 5]
        }
    );
    assert_eq!(
        err.to_string(),
        "the search text matches at lines 1, 3, 5; include more surrounding lines to pick one"
    );
}

#[test]
fn several_matches_in_one_line() {
    let err = apply_edit("f(a, a)\n", "a", "b").unwrap_err();
    assert_eq!(err, EditError::Ambiguous { lines: vec![1] });
    assert!(err
        .to_string()
        .starts_with("the search text matches more than once in line 1"));
}

#[test]
fn closest_lines_found_in_a_big_file() {
    let text: String = (0..20_000)
        .map(|i| format!("    let v{i} = compute({i}, \"item {}\");\n", i * 7))
        .collect();
    let search =
        "let v12000 = compute(12000, 'item 84000');\nlet v12001 = compte(12001, \"item 84007\");";
    let err = apply_edit(&text, search, "x").unwrap_err();
    let EditError::NoMatch {
        closest: Some((line, shown)),
    } = err
    else {
        panic!("{err:?}");
    };
    assert_eq!(line, 12001);
    assert!(shown.starts_with("12001 |     let v12000"), "{shown}");
}

#[test]
fn search_with_crlf_matches_lf_file_and_back() {
    let applied = apply_edit("a\nb\nc\n", "a\r\nb\r\n", "A\r\nB\r\n").unwrap();
    assert_eq!(applied.text, "A\nB\nc\n");
}

// --- steps -------------------------------------------------------------

type Disk = BTreeMap<PathBuf, String>;

fn plan(disk: &Disk, ops: &[FileOp]) -> (Option<Vec<fettle::agent::edit::PlannedChange>>, String) {
    let mut read = |p: &Path| -> io::Result<Option<String>> { Ok(disk.get(p).cloned()) };
    let (planned, reports) = plan_step(ops, &mut read);
    let mut shown = String::new();
    for r in &reports {
        let (tag, text) = match &r.result {
            Ok(text) => ("ok", text),
            Err(text) if r.held_back => ("held back", text),
            Err(text) => ("FAILED", text),
        };
        shown.push_str(&format!("#{} {tag}: {text}\n", r.index + 1));
    }
    (planned, shown)
}

fn edit(path: &str, search: &str, replace: &str) -> FileOp {
    FileOp::Edit {
        path: PathBuf::from(path),
        search: search.to_owned(),
        replace: replace.to_owned(),
    }
}

fn two_files() -> Disk {
    BTreeMap::from([
        (
            PathBuf::from("/w/a.py"),
            "def a():\n    return 1\n".to_owned(),
        ),
        (
            PathBuf::from("/w/b.py"),
            "def b():\n    return 2\n".to_owned(),
        ),
    ])
}

#[test]
fn step_applies_everything_in_order() {
    let disk = two_files();
    let ops = [
        edit("/w/a.py", "return 1", "return 10"),
        edit("/w/b.py", "return 2", "return 20"),
        // Sees the first edit's result.
        edit("/w/a.py", "return 10", "return 100"),
    ];
    let (planned, shown) = plan(&disk, &ops);
    let planned = planned.expect("all valid");
    assert_eq!(planned.len(), 2);
    assert_eq!(planned[0].path, Path::new("/w/a.py"));
    assert_eq!(planned[0].new, "def a():\n    return 100\n");
    assert_eq!(planned[0].old.as_deref(), Some("def a():\n    return 1\n"));
    assert_eq!(planned[0].ops, [0, 2]);
    assert_eq!(planned[1].new, "def b():\n    return 20\n");
    insta::assert_snapshot!("step_applies_everything_in_order", shown);
}

#[test]
fn step_is_all_or_nothing() {
    let disk = two_files();
    let ops = [
        edit("/w/a.py", "return 1", "return 10"),
        edit("/w/b.py", "return 3", "return 30"),
    ];
    let (planned, shown) = plan(&disk, &ops);
    assert!(planned.is_none(), "a failed op plans nothing");
    assert!(
        shown.starts_with("#1 held back: not applied, though valid: edit #2 failed"),
        "{shown}"
    );
    insta::assert_snapshot!("step_is_all_or_nothing", shown);
}

#[test]
fn step_lint_rejection_blocks_the_whole_step() {
    let disk = two_files();
    let ops = [
        edit("/w/a.py", "return 1", "return 10"),
        edit("/w/b.py", "def b():", "def b(:"),
    ];
    let (planned, shown) = plan(&disk, &ops);
    assert!(planned.is_none());
    insta::assert_snapshot!("step_lint_rejection", shown);
}

#[test]
fn step_judges_the_final_text_of_each_file() {
    let disk = two_files();
    // Broken after the first op, mended by the second: accepted.
    let ops = [
        edit("/w/a.py", "def a():", "def a(:"),
        edit("/w/a.py", "def a(:", "def a(x):"),
    ];
    let (planned, _) = plan(&disk, &ops);
    assert_eq!(planned.unwrap()[0].new, "def a(x):\n    return 1\n");
}

#[test]
fn step_write_creates_and_keeps_crlf() {
    let mut disk = two_files();
    disk.insert(PathBuf::from("/w/c.rs"), "fn c() {}\r\n".to_owned());
    let ops = [
        FileOp::Write {
            path: PathBuf::from("/w/c.rs"),
            content: "fn c() {\n    1;\n}\n".to_owned(),
        },
        FileOp::Write {
            path: PathBuf::from("/w/new/d.py"),
            content: "x = 1\n".to_owned(),
        },
        edit("/w/new/d.py", "x = 1", "x = 2"),
        edit("/w/missing.py", "a", "b"),
    ];
    let (planned, shown) = plan(&disk, &ops);
    assert!(planned.is_none());
    assert!(
        shown.contains("#4 FAILED: the file does not exist; to create it, write its whole content"),
        "{shown}"
    );
    let (planned, _) = plan(&disk, &ops[..3]);
    let planned = planned.unwrap();
    assert_eq!(planned[0].new, "fn c() {\r\n    1;\r\n}\r\n");
    assert_eq!(planned[1].old, None);
    assert_eq!(planned[1].new, "x = 2\n");
    assert_eq!(planned[1].ops, [1, 2]);
}

#[test]
fn step_without_change_plans_nothing_for_the_file() {
    let disk = two_files();
    let (planned, shown) = plan(&disk, &[edit("/w/a.py", "return 1", "return 1")]);
    assert_eq!(planned.unwrap(), vec![]);
    assert!(shown.starts_with("#1 ok"), "{shown}");
}

#[test]
fn step_read_error_fails_the_op() {
    let mut read = |_: &Path| -> io::Result<Option<String>> {
        Err(io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
    };
    let (planned, reports) = plan_step(&[edit("/w/bin", "a", "b")], &mut read);
    assert!(planned.is_none());
    assert_eq!(
        reports[0].result,
        Err("could not read the file: not UTF-8 text".to_owned())
    );
}

// --- lint guard ----------------------------------------------------------

#[test]
fn lint_guard_per_language() {
    let cases = [
        (
            "x.py",
            "def f():\n    return 1\n",
            "def f(:\n    return 1\n",
        ),
        (
            "x.rs",
            "fn f() -> i32 {\n    1\n}\n",
            "fn f() -> i32 {\n    1\n",
        ),
        ("x.js", "const a = [1, 2];\n", "const a = [1, 2;\n"),
        // A body that lost its indentation: tree-sitter-python has no
        // ERROR for it (an empty block), Python an IndentationError.
        (
            "y.py",
            "def f(xs):\n    for x in xs:\n        yield x\n",
            "def f(xs):\n    for x in xs:\n    yield x\n",
        ),
    ];
    for (path, old, new) in cases {
        assert_eq!(lint_guard(Path::new(path), old, old), Ok(()), "{path}");
        let rejection = lint_guard(Path::new(path), old, new).expect_err(path);
        assert!(rejection.new_count > rejection.old_count);
        assert!(!rejection.errors.is_empty(), "{path}");
        assert_eq!(
            lint_guard(Path::new(path), new, old),
            Ok(()),
            "a fix is never refused"
        );
    }
    assert_eq!(lint_guard(Path::new("x.unknown"), "", "((("), Ok(()));
}

// --- property ------------------------------------------------------------

fn unique(hay: &str, needle: &str) -> bool {
    let mut count = 0;
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        count += 1;
        from += i + 1;
    }
    count == 1
}

proptest! {
    /// An exact edit, then the reverse edit, gives back the original bytes
    /// (LF or CRLF files alike).
    #[test]
    fn exact_edit_round_trips(
        lines in proptest::collection::vec("[ab \t]{0,6}", 1..12),
        crlf in any::<bool>(),
        final_newline in any::<bool>(),
        cut in (0usize..1000, 1usize..40),
        marker in "[xyz\n]{0,8}",
    ) {
        let lf = {
            let mut t = lines.join("\n");
            if final_newline { t.push('\n'); }
            t
        };
        let ending = if crlf { "\r\n" } else { "\n" };
        let text = lf.replace('\n', ending);
        let start = cut.0 % lf.len().max(1);
        let end = (start + cut.1).min(lf.len());
        let search = &lf[start..end];
        prop_assume!(!search.trim().is_empty() && unique(&lf, search));
        // The marker makes the replacement unique, so the reverse edit has
        // exactly one place to go; its final newline follows the search's.
        let mut replace = format!("#{}#", marker.trim_end_matches('\n'));
        if search.ends_with('\n') { replace.push('\n'); }

        let forward = apply_edit(&text, search, &replace).unwrap();
        prop_assert_eq!(forward.strategy, Strategy::Exact);
        // An edit that removes every line ending leaves nothing to tell a
        // CRLF file by; the reverse edit then rightly writes LF.
        prop_assume!(line_ending(&forward.text) == line_ending(&text));
        let back = apply_edit(&forward.text, &replace, search).unwrap();
        prop_assert_eq!(back.text, text);
    }
}
