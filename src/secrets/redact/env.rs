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
//!
//! **Which files** ([`workspace_values`]): the whole workspace is walked —
//! any depth, hidden and gitignored files included (a gitignored `.env` is
//! the usual case), only `.git/` skipped — for
//!
//! * dotenv files by name, read through a symlink to wherever it points
//!   (`.env → ~/secrets/app.env`): the target's values are secrets;
//! * symlinks of any name whose target is a dotenv file by name
//!   (`notes.txt → ../.env`, `config → /home/u/.env`);
//! * files whose content lives outside the workspace as far as the walk can
//!   tell — regular files with more than one hard link (the other name may
//!   be `~/.env`) and symlinks that leave the workspace: their values under
//!   secret-looking keys only (`API_KEY=…`), so an ordinary file that
//!   happens to be linked adds nothing.
//!
//! Every file is opened through [`crate::fsread::open_regular`] (a FIFO or
//! `/dev/zero` named `.env` is refused at once, never read) and read line
//! by line: at most [`MAX_ENV_READ`] bytes a file, lines past
//! [`MAX_LINE`] skipped, at most [`MAX_VALUES`] values in all (a warning
//! says when a cap cut something). Size alone no longer hides a file: a
//! 260 KiB `.env` with its secret at the end is read to the end.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

/// Bytes read from one dotenv file at most.
const MAX_ENV_READ: u64 = 16 << 20;
/// A longer line (or multi-line value) is skipped: no dotenv value is one.
const MAX_LINE: usize = 64 << 10;
/// Values taken from the workspace's files at most.
pub(super) const MAX_VALUES: usize = 20_000;
/// Directory entries walked at most (a warning says when reached).
const MAX_ENTRIES: usize = 1_000_000;
/// Linked files (hard links, symlinks out of the workspace) read at most.
const MAX_LINKED_FILES: usize = 256;
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

/// The values of `root`'s dotenv files (and linked files: see the module
/// docs) that are worth redacting.
pub(super) fn workspace_values(root: &Path) -> Vec<String> {
    let mut values = Vec::new();
    let mut truncated = false;
    for (path, whole) in env_files(root) {
        let room = MAX_VALUES.saturating_sub(values.len());
        if room == 0 {
            truncated = true;
            break;
        }
        match read_values(&path, whole) {
            Ok(found) => {
                truncated |= found.len() > room;
                values.extend(found.into_iter().take(room));
            }
            Err(err) => tracing::debug!(path = %path.display(), "redactor: not read: {err}"),
        }
    }
    if truncated {
        tracing::warn!(
            max = MAX_VALUES,
            "redactor: the workspace's dotenv files hold more values than the cap; the rest are not redacted"
        );
    }
    values
}

/// The values of one file: all of a dotenv file's (`whole`), else only
/// those under secret-looking keys.
fn read_values(path: &Path, whole: bool) -> Result<Vec<String>, String> {
    let (file, _) = crate::fsread::open_regular(path).map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(file.take(MAX_ENV_READ));
    let mut lines = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        // A line is read in MAX_LINE steps: one without its end is skipped.
        let n = (&mut reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') && n == MAX_LINE {
            skip_line(&mut reader).map_err(|e| e.to_string())?;
            continue;
        }
        lines.push(
            String::from_utf8_lossy(&line)
                .trim_end_matches(['\n', '\r'])
                .to_owned(),
        );
    }
    if reader.into_inner().limit() == 0 {
        tracing::warn!(
            path = %path.display(),
            max = MAX_ENV_READ,
            "redactor: a dotenv file is larger than the cap; the values past it are not redacted"
        );
    }
    Ok(values_of(parse(lines.iter().map(String::as_str)), !whole))
}

fn skip_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            reader.consume(i + 1);
            return Ok(());
        }
        let n = buf.len();
        reader.consume(n);
    }
}

/// The files to read, and whether each is a dotenv file (all its values)
/// or a linked file (secret-looking keys only); dotenv files first,
/// shallow before deep.
fn env_files(root: &Path) -> Vec<(PathBuf, bool)> {
    let canonical_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut env = Vec::new();
    let mut linked = Vec::new();
    let mut entries = 0;
    let walk = WalkBuilder::new(root)
        // Secrets live precisely in hidden and gitignored files.
        .standard_filters(false)
        .follow_links(false)
        .filter_entry(|entry| {
            let dir = entry.file_type().is_some_and(|t| t.is_dir());
            !(dir && entry.depth() > 0 && entry.file_name() == ".git")
        })
        .build();
    for entry in walk.flatten() {
        entries += 1;
        if entries > MAX_ENTRIES {
            tracing::warn!(
                max = MAX_ENTRIES,
                "redactor: the workspace has more entries than the walk for dotenv files takes; the rest are not looked at"
            );
            break;
        }
        let Some(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
        let depth = entry.depth();
        if kind.is_file() || kind.is_symlink() {
            if is_secret_env_name(&name) {
                env.push((depth, entry.into_path()));
                continue;
            }
        } else {
            continue;
        }
        if kind.is_symlink() {
            let Ok(target) = std::fs::canonicalize(entry.path()) else {
                continue;
            };
            let target_name = target
                .file_name()
                .map(|n| n.to_string_lossy().to_ascii_lowercase())
                .unwrap_or_default();
            if is_secret_env_name(&target_name) {
                env.push((depth, entry.into_path()));
            } else if !target.starts_with(&canonical_root) {
                linked.push(entry.into_path());
            }
        } else if entry.metadata().is_ok_and(|m| m.nlink() > 1) {
            linked.push(entry.into_path());
        }
    }
    env.sort();
    // One file reached by several names is read once.
    let mut seen = HashSet::new();
    let mut files: Vec<(PathBuf, bool)> = Vec::new();
    for (path, whole) in env.into_iter().map(|(_, p)| (p, true)).chain(
        linked
            .into_iter()
            .take(MAX_LINKED_FILES)
            .map(|p| (p, false)),
    ) {
        let id = std::fs::metadata(&path).map(|m| (m.dev(), m.ino())).ok();
        if id.is_none_or(|id| seen.insert(id)) {
            files.push((path, whole));
        }
    }
    files
}

/// The values in dotenv text (`KEY=value`, `export KEY="value"`, quoted
/// multi-line values, `# comments`) that are worth redacting; see the
/// module docs.
pub fn env_secret_values(text: &str) -> Vec<String> {
    values_of(parse(text.lines()), false)
}

/// The values worth redacting of `pairs`; with `secret_keys_only`, only
/// those under secret-looking keys.
fn values_of(pairs: Vec<(String, String)>, secret_keys_only: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in pairs {
        let secret_key = key_looks_secret(&key);
        if secret_keys_only && !secret_key {
            continue;
        }
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
fn parse<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut lines = lines;
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
                            if value.len() > MAX_LINE {
                                break;
                            }
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
