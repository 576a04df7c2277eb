//! Which command runs a project's tests, from the files at its root.
//!
//! When several match, the first in this order wins:
//! 1. `Cargo.toml` → `cargo test`
//! 2. `go.mod` → `go test ./...`
//! 3. `pom.xml` → `mvn -q test`
//! 4. `build.gradle(.kts)` → `./gradlew test` (if the wrapper is there) or
//!    `gradle test`
//! 5. `package.json` with a real `scripts.test` → `npm test --silent`
//! 6. pytest markers → `python3 -m pytest -q`
//! 7. a `Makefile` with a `test:` target → `make test`
//!
//! Manifests that name exactly one build tool come first; a `package.json`
//! is often only tooling beside another language (hence after them), pytest
//! is inferred from weaker signals (a `tests/` folder of `.py` files), and a
//! `make test` target is the fallback: it usually wraps one of the above.

use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetectedTest {
    /// A shell command, run from the root.
    pub command: String,
    /// Why, for the user and the model: "Cargo.toml found".
    pub reason: String,
}

fn found(command: &str, reason: impl Into<String>) -> Option<DetectedTest> {
    Some(DetectedTest {
        command: command.to_string(),
        reason: reason.into(),
    })
}

/// The test command for the project at `root`, or `None` if nothing says
/// how its tests run.
pub fn detect_test_command(root: &Path) -> Option<DetectedTest> {
    let has = |name: &str| root.join(name).is_file();
    if has("Cargo.toml") {
        return found("cargo test", "Cargo.toml found");
    }
    if has("go.mod") {
        return found("go test ./...", "go.mod found");
    }
    if has("pom.xml") {
        return found("mvn -q test", "pom.xml found");
    }
    for gradle in ["build.gradle", "build.gradle.kts"] {
        if has(gradle) {
            return if has("gradlew") {
                found("./gradlew test", format!("{gradle} and gradlew found"))
            } else {
                found("gradle test", format!("{gradle} found"))
            };
        }
    }
    if npm_test_script(root) {
        return found("npm test --silent", "package.json has a test script");
    }
    if let Some(reason) = pytest_marker(root) {
        return found("python3 -m pytest -q", reason);
    }
    for makefile in ["GNUmakefile", "makefile", "Makefile"] {
        if has(makefile) && has_make_test_target(&root.join(makefile)) {
            return found("make test", format!("{makefile} has a test target"));
        }
    }
    None
}

/// A project file that says how to run the tests (`package.json`,
/// `Makefile`, ...): the workspace's, so regular files only and capped.
fn read_config(path: &Path) -> Result<String, crate::fsread::ReadError> {
    crate::fsread::read_regular_to_string(path, crate::fsread::CONFIG_MAX_BYTES)
}

/// npm writes this placeholder into `scripts.test` on `npm init`; running
/// it only fails.
const NPM_PLACEHOLDER: &str = "no test specified";

fn npm_test_script(root: &Path) -> bool {
    let Ok(text) = read_config(&root.join("package.json")) else {
        return false;
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    match json.pointer("/scripts/test").and_then(|v| v.as_str()) {
        Some(script) => !script.trim().is_empty() && !script.contains(NPM_PLACEHOLDER),
        None => false,
    }
}

fn file_contains(path: &Path, needle: &str) -> bool {
    read_config(path).is_ok_and(|text| text.contains(needle))
}

fn pytest_marker(root: &Path) -> Option<String> {
    for name in ["pytest.ini", "conftest.py"] {
        if root.join(name).is_file() {
            return Some(format!("{name} found"));
        }
    }
    let configs = [
        ("pyproject.toml", "[tool.pytest"),
        ("setup.cfg", "[tool:pytest]"),
        ("tox.ini", "pytest"),
    ];
    for (name, needle) in configs {
        if file_contains(&root.join(name), needle) {
            return Some(format!("{name} configures pytest"));
        }
    }
    if let Some(name) = python_test_file(root) {
        return Some(format!("{name} found"));
    }
    for dir in ["tests", "test"] {
        if dir_has_python(&root.join(dir)) {
            return Some(format!("{dir}/ has Python files"));
        }
    }
    None
}

fn python_test_file(root: &Path) -> Option<String> {
    let entries = std::fs::read_dir(root).ok()?;
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".py") && (n.starts_with("test_") || n.ends_with("_test.py")))
        .collect();
    names.sort();
    names.into_iter().next()
}

/// Whether `dir` has a `.py` file, itself or one level down (`tests/unit/`).
fn dir_has_python(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|e| {
        let path = e.path();
        if path.is_dir() {
            std::fs::read_dir(&path).is_ok_and(|sub| {
                sub.filter_map(Result::ok)
                    .any(|f| f.path().extension().is_some_and(|x| x == "py"))
            })
        } else {
            path.extension().is_some_and(|x| x == "py")
        }
    })
}

/// A `test:` rule (also `test::` or `test: deps`), not a `test := value`
/// variable.
fn has_make_test_target(path: &Path) -> bool {
    let Ok(text) = read_config(path) else {
        return false;
    };
    text.lines().any(|line| {
        let Some(rest) = line.strip_prefix("test") else {
            return false;
        };
        let rest = rest.trim_start();
        rest.starts_with(':') && !rest.starts_with(":=")
    })
}
