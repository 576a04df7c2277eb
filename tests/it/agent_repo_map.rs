//! The repo map over a small Python + Rust project (copied to a temp dir
//! and indexed for real): the map itself, personalization, the budget.
// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

use fettle::agent::repo_map::{rank_files, repo_map, Focus};
use fettle::index::{IndexSettings, WorkspaceIndex};
use fettle::model::tokens::estimate;
use tempfile::TempDir;

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn project() -> (TempDir, WorkspaceIndex) {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent/repo_map/project");
    copy_dir(&fixture, dir.path());
    let index = WorkspaceIndex::new(IndexSettings {
        threads: 2,
        ..IndexSettings::default()
    });
    let stats = index.index_roots(
        &[dir.path().to_path_buf()],
        &|_| {},
        &CancellationToken::new(),
    );
    assert_eq!(stats.files, 9);
    (dir, index)
}

fn ranked(index: &WorkspaceIndex, root: &Path, focus: &Focus) -> Vec<String> {
    rank_files(index, focus)
        .into_iter()
        .map(|(p, _)| p.strip_prefix(root).unwrap().to_string_lossy().into_owned())
        .collect()
}

fn position(order: &[String], rel: &str) -> usize {
    order.iter().position(|p| p == rel).unwrap()
}

#[test]
fn map_of_the_project() {
    let (dir, index) = project();
    let map = repo_map(&index, dir.path(), &Focus::default(), 4000);
    insta::assert_snapshot!("unfocused", map);
    // With room for everything, every file is there and nothing is "not shown".
    assert!(!map.contains("more files not shown"));
    assert_eq!(map.lines().filter(|l| l.ends_with(':')).count(), 9);
}

#[test]
fn ranks_sum_to_one_and_follow_references() {
    let (dir, index) = project();
    let ranks = rank_files(&index, &Focus::default());
    let sum: f64 = ranks.iter().map(|(_, r)| r).sum();
    assert!((sum - 1.0).abs() < 1e-6, "{sum}");
    let order = ranked(&index, dir.path(), &Focus::default());
    // Referenced by every other Python file vs referenced by none.
    assert!(position(&order, "app/models.py") < position(&order, "tests/test_billing.py"));
    // Config is used by router, server; main.rs is used by nobody.
    assert!(position(&order, "src/config.rs") < position(&order, "src/main.rs"));
}

#[test]
fn focus_personalizes_the_ranking() {
    let (dir, index) = project();
    let plain = ranked(&index, dir.path(), &Focus::default());
    assert_ne!(plain[0], "app/shipping.py");
    let on_shipping = Focus {
        paths: vec![dir.path().join("app/shipping.py")],
        identifiers: Vec::new(),
    };
    let focused = ranked(&index, dir.path(), &on_shipping);
    assert_eq!(focused[0], "app/shipping.py", "{focused:?}");
    // Mass flows from the focus to what it uses, Customer's module.
    assert!(position(&focused, "app/models.py") <= 1, "{focused:?}");

    let on_format = Focus {
        paths: Vec::new(),
        identifiers: vec!["format_bytes".into()],
    };
    let focused = ranked(&index, dir.path(), &on_format);
    assert!(
        position(&focused, "src/util.rs") < position(&plain, "src/util.rs"),
        "{plain:?} vs {focused:?}"
    );
    assert_eq!(focused[0], "src/util.rs");
}

#[test]
fn focus_from_a_failing_test() {
    let (dir, index) = project();
    let root = dir.path();
    let output = format!(
        "FAILED tests/test_billing.py::test_compute_total - assert 3.59 == 3.6\n\
         Traceback (most recent call last):\n  \
         File \"{}\", line 12, in compute_total\n    \
         discounted = apply_discount(subtotal, discount_percent)\n\
         error: cannot find `parse_pairs` in src/config.rs:21:8\n\
         see also ./app/models.py:24, checkout/app/shipping.py, billing.py and missing/file.py:3; self.items\n",
        root.join("app/billing.py").display()
    );
    let focus = Focus::from_text(&output, root, &index);
    let rel: Vec<String> = focus
        .paths
        .iter()
        .map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        rel,
        [
            "tests/test_billing.py",
            "app/billing.py",
            "src/config.rs",
            "app/models.py",
            "app/shipping.py"
        ]
    );
    // Not `test_compute_total`: a test's name points at tests, and its
    // file is a focus path already.
    assert_eq!(
        focus.identifiers,
        ["compute_total", "apply_discount", "subtotal", "parse_pairs"]
    );
    let map = repo_map(&index, root, &focus, 200);
    insta::assert_snapshot!("focused_on_failure", map);
    assert!(estimate(&map) <= 200);
    // The definitions of the identifiers it names are in, however little
    // the rest of the workspace uses them.
    for name in [
        "def compute_total",
        "def apply_discount",
        "def subtotal",
        "fn parse_pairs",
    ] {
        assert!(map.contains(name), "{name} missing:\n{map}");
    }
    assert_ne!(map, repo_map(&index, root, &Focus::default(), 200));
}

#[test]
fn the_budget_is_respected_and_more_budget_shows_more() {
    let (dir, index) = project();
    let focus = Focus::default();
    let mut last = 0;
    for budget in [0, 5, 20, 40, 80, 120, 200, 400, 800, 4000] {
        let map = repo_map(&index, dir.path(), &focus, budget);
        assert!(
            estimate(&map) <= budget,
            "budget {budget}: {} tokens\n{map}",
            estimate(&map)
        );
        let lines = map.lines().count();
        assert!(
            lines >= last,
            "budget {budget} shows less than a smaller one"
        );
        last = lines;
    }
    assert_eq!(repo_map(&index, dir.path(), &focus, 0), "");
    let small = repo_map(&index, dir.path(), &focus, 60);
    assert!(small.contains("more files not shown"), "{small}");
}

#[test]
fn the_map_is_deterministic() {
    let (dir, index) = project();
    let focus = Focus {
        paths: vec![dir.path().join("src/server.rs")],
        identifiers: vec!["Order".into()],
    };
    let first = repo_map(&index, dir.path(), &focus, 300);
    for _ in 0..5 {
        assert_eq!(repo_map(&index, dir.path(), &focus, 300), first);
    }
    // A second index of the same files gives the same map.
    let (dir2, index2) = project();
    let focus2 = Focus {
        paths: vec![dir2.path().join("src/server.rs")],
        identifiers: vec!["Order".into()],
    };
    assert_eq!(repo_map(&index2, dir2.path(), &focus2, 300), first);
}

#[test]
fn an_empty_index_gives_a_short_note() {
    let index = WorkspaceIndex::new(IndexSettings::default());
    let root = PathBuf::from("/nowhere");
    let map = repo_map(&index, &root, &Focus::default(), 100);
    assert_eq!(map, "(repo map: no source files are indexed)");
    assert!(rank_files(&index, &Focus::default()).is_empty());
    assert_eq!(repo_map(&index, &root, &Focus::default(), 2), "");
}

/// A package whose tests are one big file (as more-itertools' are), every
/// test calling into the code; a failing test with a common name.
fn big_test_file_project() -> (TempDir, WorkspaceIndex) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("pkg")).unwrap();
    fs::create_dir_all(root.join("tests")).unwrap();
    let mut tests = String::from("from pkg.core import *\nfrom pkg.text import *\n\n");
    for i in 0..60 {
        tests.push_str(&format!(
            "class Case{i}:\n    def setUp(self):\n        self.x = {i}\n\n    def test_basic(self):\n        assert chunked([{i}]) == split_words('{i}')\n\n"
        ));
    }
    fs::write(root.join("tests/test_more.py"), tests).unwrap();
    fs::write(
        root.join("tests/test_other.py"),
        "class Other:\n    def test_basic(self):\n        assert True\n",
    )
    .unwrap();
    let mut core = String::from("def chunked(xs, n=2):\n    return _step(xs, n)\n\n");
    for i in 0..40 {
        core.push_str(&format!(
            "def helper_{i}(xs, n=2):\n    return _step(xs, n)\n\n"
        ));
    }
    core.push_str("def _step(xs, n):\n    return list(xs)[::n]\n");
    fs::write(root.join("pkg/core.py"), core).unwrap();
    fs::write(
        root.join("pkg/text.py"),
        "from pkg.core import chunked\n\ndef split_words(s):\n    return chunked(s.split())\n\ndef join_words(ws):\n    return ' '.join(ws)\n",
    )
    .unwrap();
    let index = WorkspaceIndex::new(IndexSettings {
        threads: 2,
        ..IndexSettings::default()
    });
    index.index_roots(&[root.to_path_buf()], &|_| {}, &CancellationToken::new());
    (dir, index)
}

#[test]
fn a_big_test_file_does_not_fill_the_map_and_test_names_are_not_focus() {
    let (dir, index) = big_test_file_project();
    let root = dir.path();
    let output = "FAILED tests/test_more.py::Case3::test_basic - assert [3] == ['4']\n\
                  E   AssertionError in setUp\n";
    let focus = Focus::from_text(output, root, &index);
    // `test_basic` and `setUp` are defined all over the tests: neither is a
    // name to look for the bug by.
    assert!(
        !focus
            .identifiers
            .iter()
            .any(|i| i == "test_basic" || i == "setUp"),
        "{:?}",
        focus.identifiers
    );
    let budget = 300;
    let map = repo_map(&index, root, &focus, budget);
    assert!(estimate(&map) <= budget);
    // The code the tests call is in the map beside the test file…
    for name in ["def chunked", "def split_words"] {
        assert!(map.contains(name), "{name} missing:\n{map}");
    }
    // …and, the code having more to show than the budget holds, the test
    // file's lines take no more than its share.
    assert!(map.contains("more files not shown") || map.contains("helper_"));
    let test_lines: String = map
        .lines()
        .skip_while(|l| *l != "tests/test_more.py:")
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        estimate(&test_lines) <= budget / 6 + 20,
        "the test file took {} of {budget} tokens:\n{map}",
        estimate(&test_lines)
    );
}
