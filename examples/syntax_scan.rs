//! The syntax errors Fettle's edit guards find in a tree of source files
//! (`syntax::edit_errors`): a false alarm on code that compiles is an edit
//! refused, and a diagnostic the user cannot fix. Prints, for every file with an error, its path,
//! how many and the first, then a summary per language.
//!
//! `cargo run --release --example syntax_scan -- DIR [DIR …]`
//! (benches/syntax_scan.py runs it on Python's standard library and
//! separates the files CPython compiles from those it rejects.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fettle::syntax::{edit_errors, parse_str, Language};

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            files_under(&path, out);
        } else if kind.is_file() && Language::from_path(&path).is_some() {
            out.push(path);
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dirs: Vec<String> = std::env::args().skip(1).collect();
    if dirs.is_empty() {
        return Err("usage: syntax_scan DIR [DIR …]".into());
    }
    let mut files = Vec::new();
    for dir in &dirs {
        files_under(Path::new(dir), &mut files);
    }
    files.sort();
    // Per language: files, files with an error, errors.
    let mut totals: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for path in &files {
        let Some(language) = Language::from_path(path) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let Some(tree) = parse_str(language, &text, None) else {
            continue;
        };
        let errors = edit_errors(&tree, &text, 100);
        let total = totals.entry(language.name()).or_default();
        total.0 += 1;
        if let Some(first) = errors.first() {
            total.1 += 1;
            total.2 += errors.len();
            let line = text[..first.range.start.min(text.len())]
                .matches('\n')
                .count()
                + 1;
            println!(
                "{}\t{}\t{line}: {}",
                path.display(),
                errors.len(),
                first.message
            );
        }
    }
    for (language, (files, with_errors, errors)) in totals {
        eprintln!("{language}: {files} files, {with_errors} with an error ({errors} errors)");
    }
    Ok(())
}
