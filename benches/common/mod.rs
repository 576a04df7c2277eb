//! Shared by the bench harnesses: a tree of real code gathered from the
//! crates in `~/.cargo/registry/src`.
#![allow(dead_code)] // Each bench uses a part.

use std::error::Error;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fettle::syntax::Language;

pub const MAX_FILE_BYTES: u64 = 1 << 20;

pub type Result<T> = std::result::Result<T, Box<dyn Error>>;

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Copies indexable files of registry crates, in sorted order, until the
/// copy holds `target` lines.
pub fn gather(dest: &Path, target: usize) -> Result<(usize, usize)> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .ok_or("no CARGO_HOME or HOME")?;
    let mut crates = Vec::new();
    for registry in sorted_dir(&home.join("registry/src"))? {
        crates.extend(sorted_dir(&registry)?);
    }
    let (mut files, mut lines) = (0, 0);
    for krate in crates {
        let mut stack = vec![krate.clone()];
        while let Some(dir) = stack.pop() {
            let entries = sorted_dir(&dir)?;
            // Reverse so the stack pops in sorted order.
            for path in entries.into_iter().rev() {
                let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                if name.starts_with('.') || name == "target" {
                    continue;
                }
                let meta = fs::symlink_metadata(&path)?;
                if meta.is_dir() {
                    stack.push(path);
                    continue;
                }
                if !meta.is_file()
                    || meta.len() > MAX_FILE_BYTES
                    || Language::from_path(&path).is_none()
                {
                    continue;
                }
                let Ok(text) = fs::read_to_string(&path) else {
                    continue;
                };
                if text.as_bytes()[..text.len().min(8192)].contains(&0) {
                    continue;
                }
                let rel = path.strip_prefix(krate.parent().ok_or("crate has no parent")?)?;
                let copy = dest.join(rel);
                if let Some(parent) = copy.parent() {
                    fs::create_dir_all(parent)?;
                }
                fs::write(&copy, &text)?;
                files += 1;
                lines += text.lines().count();
                if lines >= target {
                    return Ok((files, lines));
                }
            }
        }
    }
    Err(format!("only {lines} lines of indexable code in the registry").into())
}

pub fn sorted_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    out.sort();
    Ok(out)
}
