//! Which files belong in the index: the directory walk, the same rules for
//! single paths afterwards (saves, watcher events, open buffers), and the
//! size/binary/encoding checks on a file's contents.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ignore::overrides::{Override, OverrideBuilder};
use ignore::{IncrementalIgnore, WalkBuilder, WalkState};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::{IndexProgress, IndexSettings};
use crate::fsread;

/// Bytes inspected for a NUL to call a file binary (as git does).
const BINARY_SNIFF: usize = 8 << 10;

/// Why a file is not indexed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Skip {
    NoGrammar,
    TooLarge,
    Binary,
    /// Gone, a directory, or unreadable.
    Unreadable,
    /// Has more than one hard link: its other name may be outside the
    /// workspace (a secret), so its content never feeds the index, the
    /// repo map or completion context, as `read_file` and `search` refuse it.
    HardLinked,
}

/// The `exclude` setting as an override matcher: `!glob` ignores, with
/// gitignore semantics relative to `root`. Bad globs are logged and dropped.
fn excludes(root: &Path, patterns: &[String]) -> Override {
    let mut builder = OverrideBuilder::new(root);
    for p in patterns {
        if let Err(err) = builder.add(&format!("!{p}")) {
            tracing::warn!("index.exclude: ignoring bad glob {p:?}: {err}");
        }
    }
    builder.build().unwrap_or_else(|err| {
        tracing::warn!("index.exclude: {err}");
        Override::empty()
    })
}

/// One root's walk configuration; the walk and the single-path matcher are
/// both built from it so they agree.
fn builder(root: &Path, settings: &IndexSettings) -> WalkBuilder {
    let mut b = WalkBuilder::new(root);
    b.standard_filters(true)
        // Editors open non-git folders too; their .gitignore still says
        // what is build output.
        .require_git(false)
        .follow_links(false)
        .threads(settings.threads.max(1))
        .overrides(excludes(root, &settings.exclude));
    b
}

/// Every candidate file under `roots`, sorted and deduplicated (nested
/// roots), or what was found before `cancel` was set.
pub(super) fn collect_files(
    roots: &[PathBuf],
    settings: &IndexSettings,
    cancel: &CancellationToken,
) -> Vec<PathBuf> {
    let found = Mutex::new(Vec::new());
    for root in roots {
        let mut walk = builder(root, settings);
        // The `ignore` crate opens each directory's ignore files as it
        // descends: a FIFO there would block the walk forever.
        if let Err(err) = fsread::ignore_files::guard_walk(&mut walk, root) {
            tracing::warn!("not indexing {}: {err}", root.display());
            continue;
        }
        walk.build_parallel().run(|| {
            let found = &found;
            Box::new(move |entry| {
                if cancel.is_cancelled() {
                    return WalkState::Quit;
                }
                if let Ok(entry) = entry {
                    if entry.file_type().is_some_and(|t| t.is_file()) {
                        found.lock().push(entry.into_path());
                    }
                }
                WalkState::Continue
            })
        });
    }
    let mut files = found.into_inner();
    files.sort_unstable();
    files.dedup();
    files
}

/// The roots' path rules, for checking single paths after the walk.
pub(super) struct RootFilter {
    /// Longest root first, so nested roots use their own rules. No matcher:
    /// the root's own ignore files are not safe to read (nothing accepted).
    roots: Vec<(PathBuf, Option<Mutex<IncrementalIgnore>>)>,
}

impl RootFilter {
    pub(super) fn new(roots: &[PathBuf], settings: &IndexSettings) -> Self {
        let mut roots: Vec<(PathBuf, Option<Mutex<IncrementalIgnore>>)> = roots
            .iter()
            .filter_map(|root| {
                let mut walk = builder(root, settings);
                if fsread::ignore_files::guard_parents(&mut walk, root).is_err() {
                    // `collect_files` logs it, once per walk.
                    return Some((root.clone(), None));
                }
                let matcher = walk.build_matchers().pop()?;
                Some((root.clone(), Some(Mutex::new(matcher))))
            })
            .collect();
        roots.sort_by_key(|(r, _)| std::cmp::Reverse(r.components().count()));
        Self { roots }
    }

    pub(super) fn roots(&self) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = self.roots.iter().map(|(r, _)| r.clone()).collect();
        roots.sort();
        roots
    }

    /// Whether the walk would visit `path`: inside a root and not ignored,
    /// excluded or hidden. With no roots at all (no workspace), anything.
    pub(super) fn accepts(&self, path: &Path, is_dir: bool) -> bool {
        if self.roots.is_empty() {
            return true;
        }
        for (root, matcher) in &self.roots {
            if let Ok(rel) = path.strip_prefix(root) {
                let Some(matcher) = matcher else {
                    return false;
                };
                if rel.as_os_str().is_empty() {
                    return is_dir;
                }
                // The matcher reads the ignore files of every directory on
                // the way: none may be a FIFO, a device or huge.
                let mut dir = path.parent();
                while let Some(d) = dir.filter(|d| d.starts_with(root)) {
                    if fsread::ignore_files::hostile_ignore_file(d).is_some() {
                        return false;
                    }
                    dir = d.parent();
                }
                return !matcher.lock().matched(rel, is_dir).is_ignore();
            }
        }
        false
    }
}

/// Reads a candidate file, applying the size, binary and UTF-8 rules.
pub(super) fn read_source(path: &Path, max_bytes: u64) -> Result<String, Skip> {
    // Regular files only, opened without blocking: a FIFO named `a.py`
    // must not stall the index (a plain open waits for a writer).
    let (mut file, meta) = crate::fsread::open_regular(path).map_err(|_| Skip::Unreadable)?;
    if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return Err(Skip::HardLinked);
    }
    if meta.len() > max_bytes {
        return Err(Skip::TooLarge);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    // Read one byte past the limit to notice a file that grew meanwhile.
    (&mut file)
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| Skip::Unreadable)?;
    if bytes.len() as u64 > max_bytes {
        return Err(Skip::TooLarge);
    }
    if bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) {
        return Err(Skip::Binary);
    }
    String::from_utf8(bytes).map_err(|_| Skip::Binary)
}

/// Rate-limited progress reports from the worker threads.
pub(super) struct Progress<'a> {
    callback: &'a (dyn Fn(IndexProgress) + Sync),
    total: usize,
    done: AtomicUsize,
    last: Mutex<Instant>,
}

const PROGRESS_EVERY: usize = 50;
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

impl<'a> Progress<'a> {
    pub(super) fn new(callback: &'a (dyn Fn(IndexProgress) + Sync), total: usize) -> Self {
        callback(IndexProgress {
            done: 0,
            total: Some(total),
            current: None,
        });
        Self {
            callback,
            total,
            done: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
        }
    }

    pub(super) fn tick(&self, path: &Path) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        // try_lock: a worker never waits on another's report.
        let Some(mut last) = self.last.try_lock() else {
            return;
        };
        if done % PROGRESS_EVERY == 0 || last.elapsed() >= PROGRESS_INTERVAL {
            *last = Instant::now();
            (self.callback)(IndexProgress {
                done,
                total: Some(self.total),
                current: Some(path.to_path_buf()),
            });
        }
    }

    pub(super) fn finish(&self) {
        let _serialize = self.last.lock();
        let done = self.done.load(Ordering::Relaxed);
        (self.callback)(IndexProgress {
            done,
            total: Some(self.total),
            current: None,
        });
    }
}
