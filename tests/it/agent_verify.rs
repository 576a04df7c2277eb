//! `agent::verify`: test-command detection on real temp dirs, and parsing of
//! real test-runner output.
//!
//! Each `tests/fixtures/agent/test_output/<runner>-<case>.txt` was produced
//! by running that runner on the files under `trees/<tree>/` (see the
//! README there); `{ROOT}` stands for the folder it ran in.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use fettle::agent::verify::{
    detect_test_command, parse_test_output, DetectedTest, Frame, TestReport,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent/test_output")
}

/// Parses a fixture against its tree, as the agent would in that workspace.
fn parse_fixture(case: &str, tree: &str) -> (TestReport, PathBuf) {
    let root = fixtures().join("trees").join(tree);
    assert!(root.is_dir(), "missing tree {}", root.display());
    let text = fs::read_to_string(fixtures().join(format!("{case}.txt"))).unwrap();
    let output = text.replace("{ROOT}", root.to_str().unwrap());
    (parse_test_output(&output, &root), root)
}

fn snapshot_text(report: &TestReport, root: &Path) -> String {
    let text = format!(
        "{report:#?}\n--- summary_for_model ---\n{}",
        report.summary_for_model()
    );
    text.replace(root.to_str().unwrap(), "{ROOT}")
}

/// Every frame of a fixture must name a real file of its tree.
fn assert_frames_exist(report: &TestReport, root: &Path) {
    for frame in &report.frames {
        assert!(
            root.join(&frame.path).is_file(),
            "frame outside the tree: {frame:?}"
        );
        assert!(!frame.path.starts_with('/'), "not relative: {frame:?}");
    }
}

macro_rules! fixture_tests {
    ($($test:ident: $case:literal in $tree:literal;)*) => {$(
        #[test]
        fn $test() {
            let (report, root) = parse_fixture($case, $tree);
            assert_frames_exist(&report, &root);
            insta::assert_snapshot!($case, snapshot_text(&report, &root));
        }
    )*};
}

fixture_tests! {
    cargo_fail: "cargo-fail" in "cargo-calc";
    cargo_backtrace: "cargo-backtrace" in "cargo-calc";
    cargo_nofailfast: "cargo-nofailfast" in "cargo-calc";
    cargo_compile_error: "cargo-compile-error" in "cargo-shapes";
    pytest_fail: "pytest-fail" in "pytest-mathx";
    pytest_collect: "pytest-collect" in "pytest-collect";
    pytest_subtests: "pytest-subtests" in "pytest-subtests";
    pytest_subtests_verbose: "pytest-subtests-verbose" in "pytest-subtests";
    node_tap: "node-tap" in "node-cart";
    node_spec: "node-spec" in "node-cart";
    node_esm: "node-esm" in "node-money";
    jest_fail: "jest-fail" in "jest-strings";
    vitest_fail: "vitest-fail" in "vitest-stack";
    go_fail: "go-fail" in "go-stats";
    go_build: "go-build" in "go-stats-broken";
}

// The snapshots hold the details; these pin what a repair depends on, so a
// careless `cargo insta accept` cannot quietly lose it.

#[test]
fn cargo_counts_and_panic_locations() {
    let (r, _) = parse_fixture("cargo-fail", "cargo-calc");
    assert_eq!(r.runner, Some("cargo"));
    assert_eq!((r.passed, r.failed), (Some(1), Some(3)));
    assert!(!r.build_failed);
    assert_eq!(
        r.failing_tests,
        // In the order libtest reported them (completion order).
        [
            "tests::adds_large",
            "tests::with_message",
            "tests::parses_port"
        ]
    );
    assert_eq!(r.frames[0], frame("src/lib.rs", 20, Some(9)));
    assert!(r.messages[0].contains("left: 22"), "{:?}", r.messages);
}

#[test]
fn cargo_sums_every_test_binary() {
    let (r, _) = parse_fixture("cargo-nofailfast", "cargo-calc");
    // lib: 1 passed 3 failed; tests/api.rs: 1 passed 1 failed; doc-tests: 0.
    assert_eq!((r.passed, r.failed), (Some(2), Some(4)));
    assert!(r.failing_tests.contains(&"public_add_large".to_string()));
    assert!(r.frames.contains(&frame("tests/api.rs", 8, Some(5))));
}

#[test]
fn cargo_backtrace_keeps_workspace_frames_only() {
    let (r, _) = parse_fixture("cargo-backtrace", "cargo-calc");
    // 7 workspace frames in lib.rs and 2 in tests/api.rs; the 4 `/rustc/…`
    // frames of each backtrace are gone.
    assert_eq!(r.frames.len(), 9, "{:?}", r.frames);
    // The unwrap in `parse_port` (line 6) and its caller in the test (25).
    assert!(r.frames.contains(&frame("src/lib.rs", 6, Some(22))));
    assert!(r.frames.contains(&frame("src/lib.rs", 25, Some(20))));
}

#[test]
fn cargo_build_failure_counts_as_failed() {
    let (r, _) = parse_fixture("cargo-compile-error", "cargo-shapes");
    assert!(r.build_failed);
    assert_eq!((r.passed, r.failed), (None, Some(2)));
    assert_eq!(
        r.frames,
        [
            frame("src/lib.rs", 11, Some(5)),
            frame("src/lib.rs", 15, Some(11))
        ]
    );
    assert!(r.messages[0].starts_with("error[E0308]: mismatched types"));
    // The warning's location is not a failure.
    assert!(!r.frames.iter().any(|f| f.line == 6));
}

#[test]
fn pytest_drops_stdlib_frames() {
    let (r, _) = parse_fixture("pytest-fail", "pytest-mathx");
    assert_eq!(r.runner, Some("pytest"));
    assert_eq!((r.passed, r.failed), (Some(1), Some(3)));
    assert!(r.frames.contains(&frame("mathx/core.py", 9, None)));
    assert!(r.frames.iter().all(|f| !f.path.contains("json")));
    assert!(r
        .messages
        .iter()
        .any(|m| m.starts_with("test_mean: assert 2.0 == 3")));
}

#[test]
fn pytest_9_subtests_are_read() {
    // `7 failed, 2 passed, 1 skipped, 3 subtests passed in 0.05s`: the
    // closing line with a two-word count was once not recognised at all.
    for case in ["pytest-subtests", "pytest-subtests-verbose"] {
        let (r, _) = parse_fixture(case, "pytest-subtests");
        assert_eq!(r.runner, Some("pytest"), "{case}");
        assert_eq!((r.passed, r.failed), (Some(2), Some(7)), "{case}");
        // A unittest subTest's parent is never `FAILED`: only its
        // `SUBFAILED(side=1) …` lines name it.
        assert_eq!(
            r.failing_tests,
            [
                "test_shapes.py::test_perimeter",
                "test_shapes.py::PerimeterCase::test_square",
                "test_shapes.py::test_plain"
            ],
            "{case}"
        );
        assert!(
            r.frames.contains(&frame("test_shapes.py", 33, None)),
            "{case}"
        );
    }
}

#[test]
fn pytest_collection_errors() {
    let (r, _) = parse_fixture("pytest-collect", "pytest-collect");
    assert!(r.build_failed);
    assert_eq!(r.failed, Some(2));
    assert_eq!(
        r.failing_tests,
        ["tests/test_imports.py", "tests/test_syntax.py"]
    );
    // The syntax error's `File "/abs/…", line 2`, made relative.
    assert!(r.frames.contains(&frame("tests/test_syntax.py", 2, None)));
    assert!(r.frames.contains(&frame("tests/test_imports.py", 1, None)));
}

#[test]
fn node_tap_and_spec_agree() {
    let (tap, _) = parse_fixture("node-tap", "node-cart");
    let (spec, _) = parse_fixture("node-spec", "node-cart");
    for r in [&tap, &spec] {
        assert_eq!(r.runner, Some("node"));
        assert_eq!((r.passed, r.failed), (Some(3), Some(3)));
        // The parent `discount` only failed through its subtests.
        assert_eq!(r.failing_tests, ["ten percent", "deep equal"]);
        assert!(r.frames.contains(&frame("test/cart.test.js", 15, Some(12))));
        assert!(r.messages[0].contains("0 !== 180"), "{:?}", r.messages);
    }
}

#[test]
fn node_esm_file_urls() {
    let (r, _) = parse_fixture("node-esm", "node-money");
    assert_eq!(r.frames[1], frame("lib/money.mjs", 2, Some(16)));
    assert!(r.messages[0].contains("TypeError: Cannot read properties"));
}

#[test]
fn go_resolves_package_relative_files() {
    let (r, _) = parse_fixture("go-fail", "go-stats");
    assert_eq!(r.runner, Some("go"));
    assert_eq!((r.passed, r.failed), (None, Some(3)));
    assert!(r.frames.contains(&frame("stats/stats_test.go", 13, None)));
    assert!(r.frames.contains(&frame("stats/stats.go", 5, None)));
    assert!(r.frames.iter().all(|f| f.path.starts_with("stats/")));
}

#[test]
fn go_build_failure() {
    let (r, _) = parse_fixture("go-build", "go-stats-broken");
    assert!(r.build_failed);
    assert_eq!(r.failed, Some(2));
    assert_eq!(r.frames[0], frame("stats/stats.go", 16, Some(9)));
}

#[test]
fn jest_and_vitest() {
    let (jest, _) = parse_fixture("jest-fail", "jest-strings");
    assert_eq!(jest.runner, Some("jest"));
    assert_eq!((jest.passed, jest.failed), (Some(2), Some(2)));
    assert_eq!(
        jest.failing_tests,
        ["slugify › uses dashes", "truncate › negative length"]
    );
    assert!(jest.frames.contains(&frame("src/strings.js", 6, Some(20))));

    let (vitest, _) = parse_fixture("vitest-fail", "vitest-stack");
    assert_eq!(vitest.runner, Some("vitest"));
    assert_eq!((vitest.passed, vitest.failed), (Some(1), Some(1)));
    assert_eq!(vitest.frames, [frame("test/stack.test.js", 15, Some(21))]);
}

fn frame(path: &str, line: u32, column: Option<u32>) -> Frame {
    Frame {
        path: path.to_string(),
        line,
        column,
    }
}

// ---- frames: workspace files only ----

#[test]
fn frames_outside_or_in_dependencies_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("src")).unwrap();
    fs::create_dir_all(root.join("node_modules/dep")).unwrap();
    fs::write(root.join("src/app.js"), "x").unwrap();
    fs::write(root.join("node_modules/dep/index.js"), "x").unwrap();
    let abs = root.join("src/app.js");
    let output = format!(
        "Error: boom\n    at f ({})\n    at g (node_modules/dep/index.js:1:1)\n    at h (/usr/lib/node/x.js:2:2)\n    at i (../outside.js:1:1)\n    at j (src/missing.js:3:3)\n    at k (file://{}:7:1)\n",
        format_args!("{}:3:9", abs.display()),
        abs.display(),
    );
    let r = parse_test_output(&output, root);
    assert_eq!(r.runner, None);
    assert_eq!(
        r.frames,
        [
            frame("src/app.js", 3, Some(9)),
            frame("src/app.js", 7, Some(1))
        ]
    );
    assert_eq!(r.messages, ["Error: boom"]);
}

#[test]
fn frames_and_messages_are_capped_and_deduplicated() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.py"), "x").unwrap();
    let mut output = String::new();
    for i in 1..=100 {
        output.push_str(&format!(
            "a.py:{i}: error: thing {i}\na.py:1: error: thing 1\n"
        ));
    }
    let r = parse_test_output(&output, dir.path());
    assert_eq!(r.frames.len(), 20);
    assert_eq!(r.frames[1].line, 2, "a repeat is not a new frame");
    assert_eq!(r.messages.len(), 20);
    assert_eq!(r.messages[1], "a.py:2: error: thing 2");
}

#[test]
fn summary_omits_empty_parts() {
    let empty = TestReport::default();
    assert_eq!(empty.summary_for_model(), "");
    let r = TestReport {
        runner: Some("cargo"),
        passed: Some(2),
        failed: Some(1),
        failing_tests: vec!["t".into()],
        ..TestReport::default()
    };
    assert_eq!(
        r.summary_for_model(),
        "Tests: 1 failed, 2 passed (cargo)\nFailing tests:\n- t\n"
    );
}

// ---- detection ----

fn detect_in(files: &[(&str, &str)]) -> Option<DetectedTest> {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    detect_test_command(dir.path())
}

fn command(files: &[(&str, &str)]) -> Option<String> {
    detect_in(files).map(|d| d.command)
}

#[test]
fn detects_each_runner() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("Cargo.toml", "[package]")], "cargo test"),
        (&[("go.mod", "module x")], "go test ./..."),
        (&[("pom.xml", "<project/>")], "mvn -q test"),
        (&[("build.gradle", "")], "gradle test"),
        (
            &[("build.gradle.kts", ""), ("gradlew", "")],
            "./gradlew test",
        ),
        (
            &[("package.json", r#"{"scripts":{"test":"node --test"}}"#)],
            "npm test --silent",
        ),
        (&[("pytest.ini", "")], "python3 -m pytest -q"),
        (&[("conftest.py", "")], "python3 -m pytest -q"),
        (
            &[("pyproject.toml", "[tool.pytest.ini_options]\n")],
            "python3 -m pytest -q",
        ),
        (&[("setup.cfg", "[tool:pytest]\n")], "python3 -m pytest -q"),
        (
            &[("tox.ini", "[testenv]\ncommands = pytest\n")],
            "python3 -m pytest -q",
        ),
        (&[("test_math.py", "")], "python3 -m pytest -q"),
        (&[("math_test.py", "")], "python3 -m pytest -q"),
        (&[("tests/unit/test_a.py", "")], "python3 -m pytest -q"),
        (
            &[("Makefile", "all:\n\tcc x.c\n\ntest: all\n\t./x\n")],
            "make test",
        ),
    ];
    for (files, expected) in cases {
        assert_eq!(command(files).as_deref(), Some(*expected), "{files:?}");
    }
}

#[test]
fn detection_reasons() {
    let d = detect_in(&[("Cargo.toml", "")]).unwrap();
    assert_eq!(d.reason, "Cargo.toml found");
    let d = detect_in(&[("tests/test_a.py", "")]).unwrap();
    assert_eq!(d.reason, "tests/ has Python files");
    let d = detect_in(&[("Makefile", "test:\n\ttrue\n")]).unwrap();
    assert_eq!(d.reason, "Makefile has a test target");
}

#[test]
fn detection_rejects_non_tests() {
    let cases: &[&[(&str, &str)]] = &[
        &[],
        // `npm init`'s placeholder only fails.
        &[(
            "package.json",
            r#"{"scripts":{"test":"echo \"Error: no test specified\" && exit 1"}}"#,
        )],
        &[("package.json", r#"{"scripts":{"build":"tsc"}}"#)],
        &[("package.json", "not json")],
        &[("Makefile", "build:\n\tcc x.c\ntest-unit:\n\t./t\n")],
        &[("Makefile", "test := 1\nall:\n\ttrue\n")],
        &[("pyproject.toml", "[tool.black]\n")],
        &[("tests/data.txt", "")],
        &[("app.py", "")],
    ];
    for files in cases {
        assert_eq!(command(files), None, "{files:?}");
    }
}

#[test]
fn detection_order() {
    // A Rust project with JS tooling and a Makefile: cargo.
    let files = [
        ("Cargo.toml", ""),
        ("package.json", r#"{"scripts":{"test":"jest"}}"#),
        ("Makefile", "test:\n\ttrue\n"),
    ];
    assert_eq!(command(&files).as_deref(), Some("cargo test"));
    // package.json with a real test script beats pytest markers...
    let files = [
        ("package.json", r#"{"scripts":{"test":"jest"}}"#),
        ("tests/test_a.py", ""),
    ];
    assert_eq!(command(&files).as_deref(), Some("npm test --silent"));
    // ...and pytest beats a Makefile wrapper.
    let files = [("conftest.py", ""), ("Makefile", "test:\n\tpytest\n")];
    assert_eq!(command(&files).as_deref(), Some("python3 -m pytest -q"));
}
