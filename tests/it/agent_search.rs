//! The agent's `search` tool over real temp workspaces: literal and regex
//! patterns, smart case, the result cap, and the files it must skip.
// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use fettle::agent::search::{
    search, search_with_overrides, SearchArgs, SearchError, MAX_LINE_CHARS,
};
use tempfile::TempDir;

fn write(root: &Path, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, contents).unwrap();
    path
}

/// A workspace with a file of every kind the search must read or skip;
/// each skipped one contains `parse_config`.
fn workspace() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "build/\n*.log\n");
    write(
        root,
        "src/config.rs",
        "pub struct Config {\n    pub path: String,\n}\n\npub fn parse_config(text: &str) -> Config {\n    let config = Config { path: text.to_string() };\n    config\n}\n",
    );
    write(
        root,
        "src/main.rs",
        "mod config;\n\nfn main() {\n    let c = config::parse_config(\"x\");\n    let n = a.b();\n    let m = axb();\n    println!(\"{}\", c.path);\n}\n",
    );
    write(
        root,
        "docs/notes.md",
        "# Notes\n\nTODO: document parse_config\nCONFIG lives in src/config.rs\n",
    );
    // Skipped: gitignored, hidden, secret, binary.
    write(root, "build/gen.rs", "fn parse_config() {}\n");
    write(root, "debug.log", "parse_config called\n");
    write(root, ".git/config", "parse_config = true\n");
    write(root, ".hidden/tool.rs", "fn parse_config() {}\n");
    write(root, ".env", "PARSE_CONFIG=parse_config_secret\n");
    write(root, "deploy/prod.env", "parse_config=1\n");
    write(root, "certs/server.pem", "parse_config\n");
    write(root, "certs/server.key", "parse_config\n");
    write(root, "keys/id_rsa", "parse_config\n");
    write(root, "data.bin", b"parse_config\0\x01\x02\x03".as_slice());
    dir
}

fn args(pattern: &str) -> SearchArgs {
    SearchArgs::literal(pattern)
}

fn lines(root: &Path, a: &SearchArgs) -> Vec<String> {
    search(root, a)
        .unwrap()
        .matches
        .iter()
        .map(|m| format!("{}:{}: {}", m.path, m.line, m.text))
        .collect()
}

#[test]
fn literal_pattern_is_not_a_regex() {
    let dir = workspace();
    // `a.b()` as a regex would also match `axb`, and `()` would be a group.
    assert_eq!(
        lines(dir.path(), &args("a.b()")),
        ["src/main.rs:5:     let n = a.b();"]
    );
}

#[test]
fn regex_pattern() {
    let dir = workspace();
    let a = SearchArgs {
        regex: true,
        ..args(r"let \w+ = a.b\(\)")
    };
    assert_eq!(
        lines(dir.path(), &a),
        [
            "src/main.rs:5:     let n = a.b();",
            "src/main.rs:6:     let m = axb();"
        ]
    );
}

#[test]
fn smart_case() {
    let dir = workspace();
    // Lowercase: any case.
    let any_case = lines(dir.path(), &args("config"));
    assert!(any_case.contains(&"docs/notes.md:4: CONFIG lives in src/config.rs".to_string()));
    assert!(any_case.contains(&"src/config.rs:1: pub struct Config {".to_string()));
    // An uppercase letter makes it case-sensitive.
    assert_eq!(
        lines(dir.path(), &args("Config {")),
        [
            "src/config.rs:1: pub struct Config {",
            "src/config.rs:5: pub fn parse_config(text: &str) -> Config {",
            "src/config.rs:6:     let config = Config { path: text.to_string() };",
        ]
    );
    let regex = SearchArgs {
        regex: true,
        ..args("CONFIG")
    };
    assert_eq!(
        lines(dir.path(), &regex),
        ["docs/notes.md:4: CONFIG lives in src/config.rs"]
    );
}

#[test]
fn skips_ignored_hidden_binary_and_secret_files() {
    let dir = workspace();
    let result = search(dir.path(), &args("parse_config")).unwrap();
    insta::assert_snapshot!("skips", result.render());
    let paths: Vec<&str> = result.matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(
        paths,
        ["docs/notes.md", "src/config.rs", "src/main.rs"],
        "only the three readable source files"
    );
    // src/config.rs, src/main.rs, docs/notes.md; not data.bin (binary)
    // nor .gitignore (hidden).
    assert_eq!(result.files_searched, 3);
    assert_eq!(result.files_with_matches, 3);
}

#[test]
fn a_binary_file_is_skipped_even_when_its_nul_comes_late() {
    let dir = workspace();
    let mut big = "parse_config\n".repeat(20_000).into_bytes();
    big.extend_from_slice(b"\0tail\n");
    write(dir.path(), "blob.dat", big);
    let result = search(dir.path(), &args("parse_config")).unwrap();
    assert!(result.matches.iter().all(|m| m.path != "blob.dat"));
    assert_eq!(result.total_matches, 3);
}

#[test]
fn cap_shows_the_first_matches_and_counts_the_rest() {
    let dir = workspace();
    let a = SearchArgs {
        max_results: 3,
        ..args("config")
    };
    let result = search(dir.path(), &a).unwrap();
    assert_eq!(result.matches.len(), 3);
    assert_eq!(result.total_matches, 8);
    assert_eq!(result.files_with_matches, 3);
    assert!(!result.count_capped);
    insta::assert_snapshot!("capped", result.render());
}

#[test]
fn many_files_are_searched_in_parallel_with_a_deterministic_result() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..150 {
        write(
            dir.path(),
            &format!("src/m{i:03}.py"),
            format!("def f{i}():\n    return needle + {i}\n\n# needle again\n# NEEDLE\n"),
        );
    }
    let a = SearchArgs {
        max_results: 10,
        ..args("needle")
    };
    let first = search(dir.path(), &a).unwrap();
    assert_eq!(first.total_matches, 450);
    assert_eq!(first.files_with_matches, 150);
    assert_eq!(first.files_searched, 150);
    // m000..m002 complete (9 lines), then the first line of m003.
    assert_eq!(first.files_not_shown, 147);
    assert_eq!(first.matches[9].path, "src/m003.py");
    assert_eq!(first.matches[9].line, 2);
    for _ in 0..3 {
        assert_eq!(search(dir.path(), &a).unwrap(), first);
    }
    assert!(first
        .render()
        .ends_with("[… 440 more matches in 147 files not shown; narrow the pattern or path]"));
}

#[test]
fn path_restricts_to_a_directory_or_a_file() {
    let dir = workspace();
    let in_docs = SearchArgs {
        path: Some(dir.path().join("docs")),
        ..args("config")
    };
    assert_eq!(
        lines(dir.path(), &in_docs),
        [
            "docs/notes.md:3: TODO: document parse_config",
            "docs/notes.md:4: CONFIG lives in src/config.rs",
        ]
    );
    let one_file = SearchArgs {
        path: Some(dir.path().join("src/main.rs")),
        ..args("parse_config")
    };
    assert_eq!(
        lines(dir.path(), &one_file),
        ["src/main.rs:4:     let c = config::parse_config(\"x\");"]
    );
    // Naming a directory the walk would skip still searches it, minus secrets.
    let hidden = SearchArgs {
        path: Some(dir.path().join(".hidden")),
        ..args("parse_config")
    };
    assert_eq!(
        lines(dir.path(), &hidden),
        [".hidden/tool.rs:1: fn parse_config() {}"]
    );
    let certs = SearchArgs {
        path: Some(dir.path().join("certs")),
        ..args("parse_config")
    };
    let result = search(dir.path(), &certs).unwrap();
    assert_eq!((result.total_matches, result.files_searched), (0, 0));
}

#[test]
fn naming_a_secret_file_or_a_missing_path_is_an_error() {
    let dir = workspace();
    let secret = SearchArgs {
        path: Some(dir.path().join(".env")),
        ..args("parse")
    };
    let err = search(dir.path(), &secret).unwrap_err();
    assert!(matches!(err, SearchError::SecretPath { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        ".env may hold secrets (.env, keys, credentials); it is never searched"
    );
    let missing = SearchArgs {
        path: Some(dir.path().join("nope")),
        ..args("parse")
    };
    assert_eq!(
        search(dir.path(), &missing).unwrap_err().to_string(),
        "nope does not exist"
    );
    assert!(matches!(
        search(dir.path(), &args("")).unwrap_err(),
        SearchError::EmptyPattern
    ));
}

#[test]
fn invalid_regex_reports_the_regex_error() {
    let dir = workspace();
    let a = SearchArgs {
        regex: true,
        ..args("parse_config(")
    };
    let err = search(dir.path(), &a).unwrap_err();
    assert!(matches!(err, SearchError::InvalidRegex { .. }), "{err:?}");
    insta::assert_snapshot!("invalid_regex", err.to_string());
    // The same text, literally, is fine.
    assert_eq!(
        search(dir.path(), &args("parse_config("))
            .unwrap()
            .total_matches,
        2
    );
}

#[test]
fn no_matches_says_what_was_searched() {
    let dir = workspace();
    let none = search(dir.path(), &args("frobnicate")).unwrap();
    insta::assert_snapshot!("no_matches", none.render());
    let literal_regex = SearchArgs {
        path: Some(dir.path().join("src")),
        ..args(r"fn \w+\(")
    };
    insta::assert_snapshot!(
        "no_matches_literal_regex",
        search(dir.path(), &literal_regex).unwrap().render()
    );
}

#[test]
fn long_lines_are_cut_around_the_match() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!("{}needle{}   \n", "a".repeat(500), "b".repeat(500));
    write(dir.path(), "min.js", &line);
    let result = search(dir.path(), &args("needle")).unwrap();
    let text = &result.matches[0].text;
    assert!(text.starts_with('…') && text.ends_with('…'), "{text}");
    assert!(text.contains("needle"));
    assert_eq!(text.chars().count(), MAX_LINE_CHARS + 2);
    // Short lines: only the end is trimmed.
    write(dir.path(), "short.txt", "\tneedle here  \r\n");
    let result = search(dir.path(), &args("needle here")).unwrap();
    assert_eq!(result.matches[0].text, "\tneedle here");
}

#[test]
fn open_buffers_are_searched_instead_of_the_disk() {
    let dir = workspace();
    let main = dir.path().join("src/main.rs");
    let buffers =
        |p: &Path| (p == main).then(|| "fn main() {\n    unsaved_call();\n}\n".to_string());
    let a = args("unsaved_call");
    let result = search_with_overrides(dir.path(), &a, &buffers).unwrap();
    assert_eq!(result.render(), "src/main.rs:2:     unsaved_call();");
    // And the disk version of that file is not searched.
    let result = search_with_overrides(dir.path(), &args("a.b()"), &buffers).unwrap();
    assert_eq!(result.total_matches, 0);
}
