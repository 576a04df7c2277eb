//! `agent::checkers`: golden tests of each checker's parser on real output
//! (`tests/fixtures/checkers/<case>/`: `output.txt` as the tool printed it
//! on `root/`, `{ROOT}` standing for the folder it ran in; see the README
//! there), detection on temp projects, and real runs of each tool that is
//! installed (required with `FETTLE_REQUIRE_CHECKERS=1`, as in CI).
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fettle::agent::checkers::{
    detect, run_checkers, CheckDiagnostic, CheckReport, CheckRun, Checker, RunSettings,
};
use fettle::agent::exec::Limits;
use fettle::config::{CheckConfig, CheckFormat};
use tokio_util::sync::CancellationToken;

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/checkers")
        .join(case)
}

/// Every diagnostic on one line: place (0-based line:byte/utf16/char
/// columns), severity, code, message; related places indented.
fn render(diagnostics: &[CheckDiagnostic], general: &[String], root: &Path) -> String {
    let mut out = String::new();
    let place = |path: &Path, span: &fettle::agent::checkers::Span| {
        format!(
            "{}:{}:{}/{}/{}-{}:{}",
            path.strip_prefix(root).unwrap().display(),
            span.start.line,
            span.start.utf8,
            span.start.utf16,
            span.start.utf32,
            span.end.line,
            span.end.utf8
        )
    };
    for d in diagnostics {
        writeln!(
            out,
            "{} {} [{}] {} {:?}",
            place(&d.path, &d.span),
            d.severity.as_str(),
            d.source,
            d.code.as_deref().unwrap_or("-"),
            d.message
        )
        .unwrap();
        for r in &d.related {
            writeln!(out, "    {} {:?}", place(&r.path, &r.span), r.message).unwrap();
        }
    }
    for g in general {
        writeln!(out, "general: {g:?}").unwrap();
    }
    out
}

fn golden(case: &str) -> String {
    let dir = fixture(case);
    let root = dir.join("root").canonicalize().unwrap();
    let format: CheckFormat = std::fs::read_to_string(dir.join("format"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let output = std::fs::read_to_string(dir.join("output.txt"))
        .unwrap()
        .replace("{ROOT}", root.to_str().unwrap());
    let (diagnostics, general) =
        fettle::agent::checkers::parse_output(format, &output, &root, format.as_str());
    assert!(
        !diagnostics.is_empty(),
        "{case}: nothing parsed from real output"
    );
    render(&diagnostics, &general, &root)
}

macro_rules! golden_tests {
    ($($test:ident: $case:literal;)*) => {$(
        #[test]
        fn $test() {
            insta::assert_snapshot!($case, golden($case));
        }
    )*};
}

golden_tests! {
    rustc_type_errors_with_related_spans: "rustc-type-errors";
    clippy_warnings_once_per_file_not_per_target: "clippy-warnings";
    ruff_json: "ruff";
    pyflakes_lines_and_a_syntax_error: "pyflakes";
    py_compile_traceback: "py-compile";
    tsc_utf16_columns_and_chained_messages: "tsc";
    node_check_caret: "node-check";
    go_vet_json_and_type_error: "go-vet";
    go_build_lines: "go-build";
    gcc_errors_with_notes: "gcc";
}

#[test]
fn columns_are_converted_from_each_tools_unit() {
    // The same character found through three units: rustc counts chars,
    // tsc UTF-16 units, Go bytes; all lines hold non-ASCII text before it.
    let check = |case: &str, format: CheckFormat, needle: &str| {
        let dir = fixture(case);
        let root = dir.join("root").canonicalize().unwrap();
        let output = std::fs::read_to_string(dir.join("output.txt"))
            .unwrap()
            .replace("{ROOT}", root.to_str().unwrap());
        let (diagnostics, _) = fettle::agent::checkers::parse_output(format, &output, &root, "t");
        let d = diagnostics
            .iter()
            .find(|d| d.message.contains(needle))
            .unwrap_or_else(|| panic!("{case}: no {needle:?}"));
        let text = std::fs::read_to_string(&d.path).unwrap();
        let line = text.lines().nth(d.span.start.line as usize).unwrap();
        line[d.span.start.utf8 as usize..].to_owned()
    };
    assert!(check("rustc-type-errors", CheckFormat::Rustc, "mismatched").starts_with("s;"));
    assert!(check(
        "tsc",
        CheckFormat::Tsc,
        "Type 'string' is not assignable to type 'number'."
    )
    .starts_with("n: number"));
    assert!(check("go-build", CheckFormat::Go, "cannot use s").starts_with('s'));
    assert!(check("ruff", CheckFormat::Ruff, "itemz").starts_with("itemz"));
    assert!(check("pyflakes", CheckFormat::Pyflakes, "itemz").starts_with("itemz"));
    assert!(check("node-check", CheckFormat::Node, "Unexpected token").starts_with(';'));
}

// --- detection ---

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn names(checkers: &[Checker]) -> Vec<(&str, &str)> {
    checkers
        .iter()
        .map(|c| (c.language, c.name.as_str()))
        .collect()
}

#[test]
fn each_projects_checker_is_detected_from_its_files() {
    let config = CheckConfig::default();
    let rust = project(&[("Cargo.toml", "[package]\nname = \"x\"\n")]);
    let found = detect(rust.path(), &config, &[], None);
    assert_eq!(names(&found.checkers), [("rust", "rustc")]);
    assert!(found.checkers[0].command.starts_with("cargo check"));
    let clippy = CheckConfig {
        clippy: true,
        ..CheckConfig::default()
    };
    let found = detect(rust.path(), &clippy, &[], None);
    assert!(found.checkers[0].command.starts_with("cargo clippy"));

    let ts = project(&[("tsconfig.json", "{}"), ("package.json", "{}")]);
    let found = detect(ts.path(), &config, &[ts.path().join("a.js")], None);
    let langs: Vec<&str> = found
        .checkers
        .iter()
        .map(|c| c.language)
        .chain(found.missing.iter().map(|m| m.language))
        .collect();
    assert_eq!(langs, ["typescript"], "tsc covers the JavaScript too");

    let js = project(&[("package.json", "{}")]);
    let found = detect(js.path(), &config, &[], None);
    assert_eq!(names(&found.checkers), [("javascript", "node")]);
    assert!(found.checkers[0].per_file());

    let mixed = project(&[("go.mod", "module m\n"), ("tools/gen.py", "")]);
    let found = detect(mixed.path(), &config, &[], Some("go"));
    assert_eq!(found.checkers.len() + found.missing.len(), 1, "only Go");

    let nothing = project(&[("README.md", "hi")]);
    assert_eq!(
        detect(nothing.path(), &config, &[], None),
        Default::default()
    );
}

#[test]
fn a_configured_command_replaces_detection_and_its_format_is_inferred() {
    let dir = project(&[("Cargo.toml", "[package]\nname = \"x\"\n")]);
    let mut config = CheckConfig::default();
    config.commands.insert(
        "rust".into(),
        "cargo clippy --message-format=json -- -W clippy::pedantic".into(),
    );
    config
        .commands
        .insert("c".into(), "gcc -fsyntax-only -Wall src/*.c".into());
    let found = detect(dir.path(), &config, &[], None);
    let got: Vec<(&str, &str, CheckFormat)> = found
        .checkers
        .iter()
        .map(|c| (c.language, c.name.as_str(), c.format))
        .collect();
    assert_eq!(
        got,
        [
            ("rust", "cargo", CheckFormat::Rustc),
            ("c", "gcc", CheckFormat::Gcc)
        ]
    );
    config.formats.insert("c".into(), CheckFormat::Go);
    let found = detect(dir.path(), &config, &[], Some("c"));
    assert_eq!(
        found.checkers[0].format,
        CheckFormat::Go,
        "explicit format wins"
    );
}

#[test]
fn a_missing_checker_is_reported_once_with_what_to_install() {
    // `fettle check` with a PATH that has no tsc (CI installs one in its cache).
    let dir = project(&[
        ("tsconfig.json", "{}"),
        ("src/a.ts", "export const a = 1;\n"),
    ]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fettle"))
        .arg("check")
        .arg(dir.path())
        .env("PATH", "/usr/bin:/bin")
        .env("XDG_CONFIG_HOME", dir.path().join("no-user-config"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "nothing ran: {stderr}");
    assert!(
        stderr.contains("no checker for typescript found on PATH")
            && stderr.contains("npm install --save-dev typescript"),
        "{stderr}"
    );
    // The editor and the agent are told once per process and language.
    let missing = fettle::agent::checkers::Missing {
        language: "lua",
        hint: "install it".into(),
    };
    assert!(missing.first_report());
    assert!(!missing.first_report(), "once per process");
}

// --- real runs ---

fn require() -> bool {
    std::env::var("FETTLE_REQUIRE_CHECKERS").is_ok_and(|v| v == "1")
}

/// Copies a fixture's `root/` into a temp dir (checkers write caches).
fn copy_root(case: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(case).join("root"), dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

async fn run_detected(root: &Path, config: &CheckConfig, language: &str) -> Option<CheckReport> {
    let root = root.canonicalize().unwrap();
    let found = detect(&root, config, &[], Some(language));
    if found.checkers.is_empty() {
        let why = found
            .missing
            .first()
            .map(|m| m.message())
            .unwrap_or_else(|| format!("no {language} checker detected"));
        assert!(!require(), "{why} (FETTLE_REQUIRE_CHECKERS=1)");
        eprintln!("skipped: {why}");
        return None;
    }
    let settings = RunSettings {
        root: &root,
        timeout: Duration::from_secs(300),
        allow_env: &[],
        limits: Limits::default(),
        sandbox: None,
    };
    Some(run_checkers(&found.checkers, None, &settings, &CancellationToken::new()).await)
}

fn messages(run: &CheckRun) -> Vec<String> {
    run.diagnostics
        .iter()
        .map(|d| {
            format!(
                "{}:{} {} {}",
                d.path.file_name().unwrap().to_string_lossy(),
                d.span.start.line + 1,
                d.severity.as_str(),
                d.message.lines().next().unwrap()
            )
        })
        .collect()
}

fn assert_found(report: &CheckReport, wanted: &[&str]) {
    assert_eq!(report.runs.len(), 1, "{report:#?}");
    let run = &report.runs[0];
    assert!(run.failure.is_none(), "{:?}", run.failure);
    let got = messages(run);
    for want in wanted {
        assert!(
            got.iter().any(|g| g.contains(want)),
            "{want:?} not in {got:#?}"
        );
    }
}

#[tokio::test]
async fn cargo_check_for_real() {
    let dir = copy_root("rustc-type-errors");
    let report = run_detected(dir.path(), &CheckConfig::default(), "rust")
        .await
        .unwrap();
    assert_found(
        &report,
        &[
            "lib.rs:5 error mismatched types",
            "area.rs:2 error cannot find value `undefined_name`",
            "lib.rs:11 error cannot borrow",
        ],
    );
}

#[tokio::test]
async fn python_checkers_for_real() {
    // Whichever is first on PATH (ruff in CI), then pyflakes and
    // py_compile forced through configuration.
    let dir = copy_root("ruff");
    let Some(report) = run_detected(dir.path(), &CheckConfig::default(), "python").await else {
        return;
    };
    match report.runs[0].checker.name.as_str() {
        "py_compile" => {
            // Only syntax: what is left when neither ruff nor pyflakes is installed.
            assert!(!require(), "ruff not on PATH (FETTLE_REQUIRE_CHECKERS=1)");
            assert_found(&report, &["broken.py:2 error"]);
        }
        _ => assert_found(&report, &["shop.py:6 error", "broken.py"]),
    }
    let mut config = CheckConfig::default();
    for (command, wanted) in [
        ("pyflakes {files}", "shop.py:11 error undefined name 'rat'"),
        (
            "PYTHONPYCACHEPREFIX=\"${TMPDIR:-/tmp}/fettle-pycache\" python3 -m py_compile {files}",
            "broken.py:2 error '(' was never closed",
        ),
    ] {
        let program = command
            .split_whitespace()
            .find(|w| !w.contains('='))
            .unwrap();
        if !fettle::agent::checkers::on_path(program) {
            assert!(!require(), "{program} not on PATH");
            continue;
        }
        config.commands.insert("python".into(), command.into());
        let report = run_detected(dir.path(), &config, "python").await.unwrap();
        assert_found(&report, &[wanted]);
    }
    assert!(
        !dir.path().join("pkg/__pycache__").exists(),
        "py_compile left bytecode in the workspace"
    );
}

#[tokio::test]
async fn tsc_for_real() {
    let dir = copy_root("tsc");
    // CI installs TypeScript into a cache folder and puts it on PATH.
    let Some(report) = run_detected(dir.path(), &CheckConfig::default(), "typescript").await else {
        return;
    };
    assert_found(
        &report,
        &[
            "shop.ts:4 error Type 'string' is not assignable to type 'number'.",
            "shop.ts:5 error Property 'prize' does not exist",
        ],
    );
}

#[tokio::test]
async fn node_check_for_real() {
    let dir = copy_root("node-check");
    let Some(report) = run_detected(dir.path(), &CheckConfig::default(), "javascript").await else {
        return;
    };
    assert_found(&report, &["bad.js:2 error Unexpected token ';'"]);
    assert_eq!(report.runs[0].diagnostics.len(), 1, "ok.mjs is fine");
}

#[tokio::test]
async fn go_vet_for_real() {
    let dir = copy_root("go-vet");
    let Some(report) = run_detected(dir.path(), &CheckConfig::default(), "go").await else {
        return;
    };
    assert_found(
        &report,
        &[
            "main.go:7 warning fmt.Printf format %d has arg s of wrong type string",
            "calc.go:4 error cannot use s",
        ],
    );
}

#[tokio::test]
async fn a_clean_project_has_no_errors_and_a_broken_checker_says_so() {
    let dir = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"clean\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n"),
    ]);
    let report = run_detected(dir.path(), &CheckConfig::default(), "rust")
        .await
        .unwrap();
    assert_eq!(report.errors(), 0, "{report:#?}");
    assert!(report.runs[0].diagnostics.is_empty());

    let mut config = CheckConfig::default();
    config
        .commands
        .insert("rust".into(), "echo 'something broke' >&2; exit 3".into());
    let report = run_detected(dir.path(), &config, "rust").await.unwrap();
    let failure = report.runs[0].failure.as_deref().unwrap();
    assert!(failure.contains("exited with 3"), "{failure}");
    assert!(failure.contains("something broke"), "{failure}");
    assert_eq!(report.errors(), 1);
}
