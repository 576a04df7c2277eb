//! Dotenv files: which are secret, reading their values, and which values
//! are worth redacting.
//!
//! A value is redacted wherever it appears unless it is trivially common:
//! shorter than 4 characters, a boolean or null-like word, a number of
//! fewer than 6 digits (ports, counts), or one of a few deployment words
//! (`localhost`, `production`, `debug`, …). From a workspace's files we go
//! one step further: a plain word (letters, `_`, `-` only) under a key that
//! does not look secret (`NODE_ENV=staging`, `APP_NAME=shop`, `DB_USER=app`)
//! is not redacted either — replacing the app's own name everywhere would
//! wreck the model's view of the code, and such words are not credentials.
//! Under a secret-looking key (`DB_PASSWORD=swordfish`) it is.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

/// Dotenv files deeper than this under the root are not read.
const MAX_DEPTH: usize = 4;
/// Larger "dotenv" files are not configuration; skip them.
const MAX_ENV_BYTES: u64 = 256 << 10;
/// Shortest value redacted.
const MIN_VALUE_CHARS: usize = 4;

/// Dotenv templates: documentation, not secrets.
const TEMPLATE_SUFFIXES: &[&str] = &["example", "sample", "template", "dist", "defaults", "tmpl"];

/// Whether a lower-cased file name is a dotenv file holding real values.
pub(in crate::secrets) fn is_secret_env_name(name: &str) -> bool {
    if name == ".env" || name == ".envrc" {
        return true;
    }
    let rest = if let Some(rest) = name.strip_prefix(".env.") {
        rest
    } else if let Some(stem) = name.strip_suffix(".env") {
        // `prod.env`, `docker.env`; `example.env` is a template.
        if stem.is_empty() {
            return false;
        }
        stem
    } else {
        return false;
    };
    !rest
        .split(['.', '-', '_'])
        .any(|part| TEMPLATE_SUFFIXES.contains(&part))
}

/// The values of `root`'s dotenv files that are worth redacting.
pub(super) fn workspace_values(root: &Path) -> Vec<String> {
    let mut values = Vec::new();
    for path in env_files(root) {
        match std::fs::read(&path) {
            Ok(bytes) => values.extend(env_secret_values(&String::from_utf8_lossy(&bytes))),
            Err(err) => tracing::debug!(path = %path.display(), "redactor: unreadable: {err}"),
        }
    }
    values
}

fn env_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let walk = WalkBuilder::new(root)
        // Secrets live precisely in hidden and gitignored files.
        .standard_filters(false)
        .follow_links(false)
        .max_depth(Some(MAX_DEPTH))
        .filter_entry(|entry| {
            let dir = entry.file_type().is_some_and(|t| t.is_dir());
            !(dir
                && entry.depth() > 0
                && matches!(
                    entry.file_name().to_str(),
                    Some("node_modules" | "target" | ".git")
                ))
        })
        .build();
    for entry in walk.flatten() {
        let is_file = entry.file_type().is_some_and(|t| t.is_file());
        let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
        let small = entry.metadata().is_ok_and(|m| m.len() <= MAX_ENV_BYTES);
        if is_file && small && is_secret_env_name(&name) {
            files.push(entry.into_path());
        }
    }
    files.sort();
    files
}

/// The values in dotenv text (`KEY=value`, `export KEY="value"`, quoted
/// multi-line values, `# comments`) that are worth redacting; see the
/// module docs.
pub fn env_secret_values(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in parse(text) {
        let secret_key = key_looks_secret(&key);
        for line in value.lines().map(str::trim) {
            let plain_word = line
                .chars()
                .all(|c| c.is_ascii_alphabetic() || c == '_' || c == '-');
            if worth_redacting(line) && (secret_key || !plain_word) {
                out.push(line.to_owned());
            }
        }
    }
    out
}

/// `(key, value)` pairs, values unquoted.
fn parse(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((key, rest)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            continue;
        }
        let rest = rest.trim_start();
        let value = match rest.chars().next() {
            Some(q @ ('"' | '\'' | '`')) => {
                let body = &rest[1..];
                match body.find(q) {
                    Some(end) => body[..end].to_owned(),
                    None => {
                        // A multi-line value runs to the line with the closing quote.
                        let mut value = body.to_owned();
                        for next in lines.by_ref() {
                            value.push('\n');
                            if let Some(end) = next.find(q) {
                                value.push_str(&next[..end]);
                                break;
                            }
                            value.push_str(next);
                        }
                        value
                    }
                }
            }
            // An unquoted value ends at a comment.
            _ => rest
                .split_once(" #")
                .map_or(rest, |(v, _)| v)
                .trim_end()
                .to_owned(),
        };
        pairs.push((key.to_owned(), value));
    }
    pairs
}

fn key_looks_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "pass",
        "pwd",
        "secret",
        "token",
        "key",
        "auth",
        "credential",
        "private",
        "salt",
        "cookie",
        "session",
        "signature",
    ]
    .iter()
    .any(|w| key.contains(w))
}

/// Whether a literal value is worth replacing wherever it appears: see the
/// module docs.
pub(super) fn worth_redacting(value: &str) -> bool {
    const COMMON: &[&str] = &[
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "null",
        "none",
        "nil",
        "undefined",
        "enabled",
        "disabled",
        "localhost",
        "127.0.0.1",
        "0.0.0.0",
        "::1",
        "development",
        "production",
        "staging",
        "test",
        "testing",
        "debug",
        "info",
        "warn",
        "warning",
        "error",
        "trace",
        "dev",
        "prod",
        "local",
        "utf-8",
        "utf8",
        "http",
        "https",
        "json",
        "text",
    ];
    if value.chars().count() < MIN_VALUE_CHARS {
        return false;
    }
    // A reference to another variable holds no secret itself.
    if value.starts_with('$') {
        return false;
    }
    let lower = value.to_ascii_lowercase();
    if COMMON.contains(&lower.as_str()) {
        return false;
    }
    let digits = value.chars().filter(char::is_ascii_digit).count();
    let numeric = value.chars().all(|c| c.is_ascii_digit() || c == '.');
    !(numeric && digits < 6)
}
