//! Which checker runs for each language of a project: the command from
//! `[check.commands]`, else one detected from the project's files and the
//! tools on `PATH`:
//!
//! | language | when | command (first found) |
//! |---|---|---|
//! | rust | `Cargo.toml` | `cargo check` (`cargo clippy` with `check.clippy`) `--message-format=json` |
//! | python | `pyproject.toml`, `setup.py`, `setup.cfg`, `requirements.txt` or `.py` files | `ruff check --output-format=json`, `pyflakes`, `python3 -m py_compile` |
//! | typescript | `tsconfig.json` | `node_modules/.bin/tsc` or `tsc` `--noEmit --pretty false` |
//! | javascript | `package.json` without `tsconfig.json`, or `.js` files | `node --check` per file |
//! | go | `go.mod` | `go vet -json ./...` |
//!
//! A language whose tools are all missing is a [`Missing`], reported once
//! per process by the caller ([`Missing::first_report`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use parking_lot::Mutex;

use crate::config::{CheckConfig, CheckFormat};
use crate::syntax::Language;

/// One checker for one language.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checker {
    /// `rust`, `python`… (the keys of `[check.commands]`).
    pub language: &'static str,
    /// Its name as a diagnostic source: `rustc`, `clippy`, `ruff`, `tsc`…
    pub name: String,
    /// Run by `sh -c` in the root; `{files}` is replaced by the files to
    /// check, quoted.
    pub command: String,
    /// Never `Auto`.
    pub format: CheckFormat,
    /// From `[check.commands]` rather than detected.
    pub configured: bool,
}

impl Checker {
    /// Whether the command checks given files (`{files}`) rather than the
    /// whole project.
    pub fn per_file(&self) -> bool {
        self.command.contains(FILES)
    }

    /// Whether `path` is a file this checker's language covers.
    pub fn covers(&self, path: &Path) -> bool {
        Language::from_path(path).is_some_and(|l| language_key(l) == self.language)
    }
}

/// The placeholder for the files to check.
pub const FILES: &str = "{files}";

/// A language with no checker available.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    pub language: &'static str,
    /// What to install, in a sentence.
    pub hint: String,
}

impl Missing {
    pub fn message(&self) -> String {
        format!(
            "no checker for {} found on PATH; {} (or set check.commands.{}); skipped",
            self.language, self.hint, self.language
        )
    }

    /// True the first time this process reports this language missing.
    pub fn first_report(&self) -> bool {
        static REPORTED: LazyLock<Mutex<HashSet<&'static str>>> =
            LazyLock::new(|| Mutex::new(HashSet::new()));
        REPORTED.lock().insert(self.language)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Detected {
    pub checkers: Vec<Checker>,
    pub missing: Vec<Missing>,
}

/// `[check.commands]`'s key for a language (TSX is TypeScript's).
pub fn language_key(language: Language) -> &'static str {
    match language {
        Language::Tsx => "typescript",
        other => other.language_id(),
    }
}

fn static_key(key: &str) -> Option<&'static str> {
    crate::config::CHECK_LANGUAGES
        .iter()
        .copied()
        .find(|k| *k == key)
}

/// The checkers for the project at `root`: every language it has (from
/// its files, plus the languages of `hint_files`), or only `only` when given.
pub fn detect(
    root: &Path,
    config: &CheckConfig,
    hint_files: &[PathBuf],
    only: Option<&str>,
) -> Detected {
    let mut languages: Vec<&'static str> = project_languages(root);
    for file in hint_files {
        if let Some(key) = Language::from_path(file).map(language_key) {
            // TypeScript's checker also reads the JavaScript it includes.
            if !(key == "javascript" && languages.contains(&"typescript")) {
                languages.push(key);
            }
        }
    }
    for (key, command) in &config.commands {
        if !command.trim().is_empty() {
            if let Some(key) = static_key(key) {
                languages.push(key);
            }
        }
    }
    let mut seen = HashSet::new();
    languages.retain(|l| seen.insert(*l) && only.is_none_or(|o| o == *l));
    let mut detected = Detected::default();
    for language in languages {
        match checker_for(root, config, language) {
            Some(Ok(checker)) => detected.checkers.push(checker),
            Some(Err(missing)) => detected.missing.push(missing),
            None => {}
        }
    }
    detected
}

/// The languages a project's root files announce.
fn project_languages(root: &Path) -> Vec<&'static str> {
    let has = |name: &str| root.join(name).is_file();
    let mut out = Vec::new();
    if has("Cargo.toml") {
        out.push("rust");
    }
    if [
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
    ]
    .iter()
    .any(|n| has(n))
        || has_top_level_files(root, &["py"])
    {
        out.push("python");
    }
    if has("tsconfig.json") {
        out.push("typescript");
    } else if has("package.json") || has_top_level_files(root, &["js", "mjs", "cjs"]) {
        out.push("javascript");
    }
    if has("go.mod") {
        out.push("go");
    }
    out
}

/// Whether the root or a folder directly in it has a file with one of
/// `extensions` (hidden folders skipped).
fn has_top_level_files(root: &Path, extensions: &[&str]) -> bool {
    let matches = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| extensions.contains(&e))
    };
    let Ok(entries) = std::fs::read_dir(root) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|entry| {
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if path.is_dir() {
            !hidden
                && entry.file_name() != "node_modules"
                && std::fs::read_dir(&path)
                    .is_ok_and(|sub| sub.filter_map(Result::ok).any(|f| matches(&f.path())))
        } else {
            matches(&path)
        }
    })
}

/// Whether `program` is an executable file on `PATH`.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(program))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The format a configured command prints, from its program's name.
pub fn infer_format(command: &str) -> CheckFormat {
    let words: Vec<&str> = command.split_whitespace().collect();
    let program = |name: &str| {
        words
            .iter()
            .any(|w| Path::new(w).file_name().is_some_and(|f| f == name))
    };
    if (program("cargo") || program("rustc")) && command.contains("message-format=json") {
        CheckFormat::Rustc
    } else if program("ruff") && command.contains("json") {
        CheckFormat::Ruff
    } else if program("pyflakes") {
        CheckFormat::Pyflakes
    } else if command.contains("py_compile") {
        CheckFormat::PyCompile
    } else if program("tsc") {
        CheckFormat::Tsc
    } else if program("node") && command.contains("--check") {
        CheckFormat::Node
    } else if program("go") {
        CheckFormat::Go
    } else {
        CheckFormat::Gcc
    }
}

/// The checker's name for a configured command: its program.
fn program_name(command: &str) -> String {
    command
        .split_whitespace()
        .find(|w| !w.contains('='))
        .and_then(|w| Path::new(w).file_name())
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "checker".to_owned())
}

fn checker_for(
    root: &Path,
    config: &CheckConfig,
    language: &'static str,
) -> Option<Result<Checker, Missing>> {
    if let Some(command) = config
        .commands
        .get(language)
        .filter(|c| !c.trim().is_empty())
    {
        let format = match config.formats.get(language) {
            Some(CheckFormat::Auto) | None => infer_format(command),
            Some(format) => *format,
        };
        return Some(Ok(Checker {
            language,
            name: program_name(command),
            command: command.clone(),
            format,
            configured: true,
        }));
    }
    let found = |name: &str, command: String, format| {
        Some(Ok(Checker {
            language,
            name: name.to_owned(),
            command,
            format,
            configured: false,
        }))
    };
    let missing = |hint: &str| {
        Some(Err(Missing {
            language,
            hint: hint.to_owned(),
        }))
    };
    match language {
        "rust" if on_path("cargo") => {
            let (name, sub) = if config.clippy {
                ("clippy", "clippy")
            } else {
                ("rustc", "check")
            };
            found(
                name,
                format!("cargo {sub} --quiet --all-targets --message-format=json"),
                CheckFormat::Rustc,
            )
        }
        "rust" => missing("install Rust (https://rustup.rs)"),
        "python" if on_path("ruff") => found(
            "ruff",
            "ruff check --no-cache --output-format=json .".to_owned(),
            CheckFormat::Ruff,
        ),
        "python" if on_path("pyflakes") => {
            found("pyflakes", format!("pyflakes {FILES}"), CheckFormat::Pyflakes)
        }
        // py_compile writes bytecode next to the sources unless told
        // otherwise; the prefix keeps the workspace as it was. `-I`: the
        // workspace is not on `sys.path`, so a `py_compile.py` there is
        // not what runs (nor are PYTHON* variables read).
        "python" if on_path("python3") => found(
            "py_compile",
            format!(
                "python3 -I -X pycache_prefix=\"${{TMPDIR:-/tmp}}/fettle-pycache\" -m py_compile {FILES}"
            ),
            CheckFormat::PyCompile,
        ),
        "python" => missing("install ruff (`pip install ruff`) or pyflakes"),
        "typescript" => {
            let local = root.join("node_modules/.bin/tsc");
            if local.is_file() {
                found(
                    "tsc",
                    "./node_modules/.bin/tsc --noEmit --pretty false".to_owned(),
                    CheckFormat::Tsc,
                )
            } else if on_path("tsc") {
                found("tsc", "tsc --noEmit --pretty false".to_owned(), CheckFormat::Tsc)
            } else {
                missing("install TypeScript (`npm install --save-dev typescript`)")
            }
        }
        "javascript" if on_path("node") => found(
            "node",
            format!("for f in {FILES}; do node --check \"$f\"; done"),
            CheckFormat::Node,
        ),
        "javascript" => missing("install Node.js"),
        "go" if on_path("go") => found("go vet", "go vet -json ./...".to_owned(), CheckFormat::Go),
        "go" => missing("install Go (https://go.dev/dl)"),
        _ => None,
    }
}
