//! The workspace index: definitions and references of every source file
//! under the workspace roots, for workspace symbols, cross-file context and
//! the agent's repo map. Knows nothing about LSP: paths and `TextPoint`s.
//!
//! Concurrency: queries take a read lock; updates read and parse with no
//! lock held and then swap their result in under a short write lock. Every
//! update takes a ticket first, and a result older than what is stored is
//! dropped, so racing updates of one file settle on the newest. An open
//! buffer's text (`update_text`) is not replaced by the bulk walk, only by
//! `update_file`/`remove_file` (what a client does on save or close).
mod extract;
mod fuzzy;
mod store;
#[cfg(test)]
mod tests;
mod walk;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use crate::position::TextPoint;
use crate::syntax::{Language, SymbolKind};
use store::{Origin, Store};
use walk::{RootFilter, Skip};

#[derive(Clone, Debug)]
pub struct IndexSettings {
    pub max_file_bytes: u64,
    /// Gitignore-style globs, relative to each root (`vendor/`, `*.min.js`).
    pub exclude: Vec<String>,
    pub threads: usize,
}

impl IndexSettings {
    /// The `[index]` configuration, with one worker thread per core.
    pub fn from_config(config: &crate::config::IndexConfig) -> Self {
        Self {
            max_file_bytes: config.max_file_bytes,
            exclude: config.exclude.clone(),
            ..Self::default()
        }
    }
}

impl Default for IndexSettings {
    fn default() -> Self {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            max_file_bytes: 1 << 20,
            exclude: Vec::new(),
            threads,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedSymbol {
    pub name: Arc<str>,
    pub kind: SymbolKind,
    pub path: Arc<Path>,
    pub container: Option<Arc<str>>,
    pub detail: Option<Arc<str>>,
    /// The whole item.
    pub range: (TextPoint, TextPoint),
    /// The name.
    pub selection: (TextPoint, TextPoint),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexStats {
    pub files: usize,
    pub lines: usize,
    pub bytes: u64,
    pub definitions: usize,
    /// Reference occurrences (not distinct names).
    pub references: usize,
    /// Files the walk found but did not index: no grammar, too large,
    /// binary/not UTF-8, or unreadable.
    pub skipped: usize,
}

#[derive(Clone, Debug)]
pub struct IndexProgress {
    pub done: usize,
    pub total: Option<usize>,
    pub current: Option<PathBuf>,
}

/// One indexed file, for listings such as the repo map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    pub path: Arc<Path>,
    pub language: Language,
    pub lines: u32,
    pub bytes: u64,
    pub definitions: usize,
    /// Indexed from an open buffer (`update_text`) rather than the disk.
    pub open_buffer: bool,
}

pub struct WorkspaceIndex {
    settings: RwLock<IndexSettings>,
    store: RwLock<Store>,
    filter: RwLock<Arc<RootFilter>>,
    /// Update tickets; see the module docs.
    seq: AtomicU64,
    /// One walk at a time (a second call waits for the first).
    walking: Mutex<()>,
    skipped: AtomicUsize,
    /// Counts the store's changes (see [`WorkspaceIndex::generation`]).
    generation: AtomicU64,
}

/// The store locked for a change; counts it when dropped.
struct StoreWrite<'a> {
    store: parking_lot::RwLockWriteGuard<'a, Store>,
    generation: &'a AtomicU64,
}

impl Drop for StoreWrite<'_> {
    fn drop(&mut self) {
        // Before the lock is released (fields drop after this).
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

impl std::ops::Deref for StoreWrite<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

impl std::ops::DerefMut for StoreWrite<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.store
    }
}

/// Walk results are committed in batches of this many files, so the write
/// lock is taken less often yet never held long.
const COMMIT_BATCH: usize = 16;

impl WorkspaceIndex {
    pub fn new(settings: IndexSettings) -> Self {
        let filter = Arc::new(RootFilter::new(&[], &settings));
        Self {
            settings: RwLock::new(settings),
            store: RwLock::new(Store::default()),
            filter: RwLock::new(filter),
            seq: AtomicU64::new(1),
            walking: Mutex::new(()),
            skipped: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
        }
    }

    /// A number that differs after any change to what the index holds
    /// (what completion read from it may be out of date).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The store, for a change: counted once the change is made (while
    /// the lock is still held), so a reader that read the generation and
    /// then the old contents sees the count move.
    fn write_store(&self) -> StoreWrite<'_> {
        StoreWrite {
            store: self.store.write(),
            generation: &self.generation,
        }
    }

    pub fn settings(&self) -> IndexSettings {
        self.settings.read().clone()
    }

    /// Takes effect for later updates; call `index_roots` again to apply
    /// new exclude rules or limits to what is already indexed.
    pub fn set_settings(&self, settings: IndexSettings) {
        *self.settings.write() = settings;
    }

    /// The roots of the last `index_roots`, sorted.
    pub fn roots(&self) -> Vec<PathBuf> {
        self.filter.read().roots()
    }

    fn ticket(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Walks and indexes `roots` (blocking; run it off the async runtime).
    ///
    /// `roots` is the complete set: after a walk that was not cancelled,
    /// files the walk no longer finds (deleted, now ignored, or outside the
    /// roots) are dropped. Returns the numbers of this walk.
    pub fn index_roots(
        &self,
        roots: &[PathBuf],
        progress: &(dyn Fn(IndexProgress) + Sync),
        cancel: &CancellationToken,
    ) -> IndexStats {
        let _walking = self.walking.lock();
        let settings = self.settings();
        let filter = Arc::new(RootFilter::new(roots, &settings));
        *self.filter.write() = filter.clone();
        let ticket = self.ticket();
        let paths = walk::collect_files(roots, &settings, cancel);
        let progress = walk::Progress::new(progress, paths.len());
        let next = AtomicUsize::new(0);
        let threads = settings.threads.max(1).min(paths.len().max(1));
        let stats = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        self.walk_worker(&paths, &next, &settings, ticket, &progress, cancel)
                    })
                })
                .collect();
            let mut total = IndexStats::default();
            for w in workers {
                // A panicking extractor loses its thread's numbers, not the walk.
                if let Ok(part) = w.join() {
                    add_stats(&mut total, &part);
                }
            }
            total
        });
        progress.finish();
        if !cancel.is_cancelled() {
            self.prune(ticket, &filter);
        }
        self.skipped.store(stats.skipped, Ordering::Relaxed);
        stats
    }

    fn walk_worker(
        &self,
        paths: &[PathBuf],
        next: &AtomicUsize,
        settings: &IndexSettings,
        ticket: u64,
        progress: &walk::Progress<'_>,
        cancel: &CancellationToken,
    ) -> IndexStats {
        let mut stats = IndexStats::default();
        let mut batch = Vec::with_capacity(COMMIT_BATCH);
        while !cancel.is_cancelled() {
            let Some(path) = paths.get(next.fetch_add(1, Ordering::Relaxed)) else {
                break;
            };
            let loaded = Language::from_path(path)
                .ok_or(Skip::NoGrammar)
                .and_then(|lang| {
                    let text = walk::read_source(path, settings.max_file_bytes)?;
                    Ok(extract::extract(lang, &text))
                });
            match loaded {
                Ok(data) => {
                    stats.files += 1;
                    stats.lines += data.lines as usize;
                    stats.bytes += data.bytes;
                    stats.definitions += data.defs.len();
                    stats.references += data.reference_count();
                    batch.push((path, Some(data)));
                }
                Err(why) => {
                    tracing::trace!(path = %path.display(), ?why, "not indexed");
                    stats.skipped += 1;
                    // Drops an earlier version that is now too big, binary, ...
                    batch.push((path, None));
                }
            }
            if batch.len() >= COMMIT_BATCH {
                self.commit_batch(&mut batch, ticket);
            }
            progress.tick(path);
        }
        self.commit_batch(&mut batch, ticket);
        stats
    }

    fn commit_batch(&self, batch: &mut Vec<(&PathBuf, Option<extract::FileData>)>, ticket: u64) {
        if batch.is_empty() {
            return;
        }
        let mut store = self.write_store();
        for (path, data) in batch.drain(..) {
            match data {
                Some(data) => store.commit(path, data, ticket, Origin::Walk),
                None => store.remove(path, ticket),
            };
        }
    }

    /// Drops what the walk with `ticket` did not visit; open buffers stay
    /// while their paths are still accepted.
    fn prune(&self, ticket: u64, filter: &RootFilter) {
        let (disk, overlay) = self.store.read().older_than(ticket);
        let gone = disk
            .into_iter()
            .chain(overlay.into_iter().filter(|p| !filter.accepts(p, false)));
        let gone: Vec<PathBuf> = gone.collect();
        for chunk in gone.chunks(256) {
            let mut store = self.write_store();
            for p in chunk {
                store.remove(p, ticket);
            }
        }
    }

    /// Re-reads a file from disk (save, watched-file change); removes it when gone, ignored, too big or binary.
    ///
    /// A directory is re-scanned (files under it added, updated or
    /// dropped). A changed `.gitignore`/`.ignore` reloads the ignore rules
    /// and drops files they now exclude; newly un-ignored files appear on
    /// the next `index_roots`.
    pub fn update_file(&self, path: &Path) {
        let seq = self.ticket();
        let name = path.file_name().and_then(|n| n.to_str());
        if matches!(name, Some(".gitignore" | ".ignore")) {
            self.reload_rules();
        }
        let filter = self.filter.read().clone();
        let is_dir = path.is_dir();
        if is_dir {
            self.update_dir(path, &filter);
            return;
        }
        let data = if filter.accepts(path, false) {
            let max = self.settings.read().max_file_bytes;
            Language::from_path(path).and_then(|lang| {
                let text = walk::read_source(path, max).ok()?;
                Some(extract::extract(lang, &text))
            })
        } else {
            None
        };
        let Some(data) = data else {
            // Gone may mean a deleted directory: drop what was under it.
            let under = if path.exists() {
                Vec::new()
            } else {
                self.store.read().paths_under(path)
            };
            let mut store = self.write_store();
            store.remove(path, seq);
            for p in &under {
                store.remove(p, seq);
            }
            return;
        };
        self.write_store().commit(path, data, seq, Origin::Disk);
    }

    fn update_dir(&self, dir: &Path, filter: &RootFilter) {
        let known = self.store.read().paths_under(dir);
        // Excludes are relative to the workspace root, not `dir`: leave them
        // to `filter`, which knows the root.
        let settings = IndexSettings {
            exclude: Vec::new(),
            ..self.settings()
        };
        let found: Vec<PathBuf> = if filter.accepts(dir, true) {
            let never = CancellationToken::new();
            walk::collect_files(&[dir.to_path_buf()], &settings, &never)
                .into_iter()
                .filter(|p| filter.accepts(p, false))
                .collect()
        } else {
            Vec::new()
        };
        for p in known.iter().filter(|p| found.binary_search(p).is_err()) {
            self.remove_file(p);
        }
        for p in &found {
            self.update_file(p);
        }
    }

    fn reload_rules(&self) {
        let roots = self.roots();
        let filter = Arc::new(RootFilter::new(&roots, &self.settings()));
        *self.filter.write() = filter.clone();
        let paths: Vec<PathBuf> = self
            .files()
            .into_iter()
            .map(|f| f.path.to_path_buf())
            .collect();
        for p in paths.iter().filter(|p| !filter.accepts(p, false)) {
            self.remove_file(p);
        }
    }

    /// Indexes an open buffer's text in place of the file on disk.
    ///
    /// The path rules still apply (an ignored or excluded file is not
    /// indexed even when open); `language` falls back to the path's.
    pub fn update_text(&self, path: &Path, language: Option<Language>, text: &str) {
        self.update_parsed(path, language, text, None);
    }

    /// [`update_text`](Self::update_text) reusing the buffer's syntax tree,
    /// which must be current for `text` and of `language`.
    pub fn update_parsed(
        &self,
        path: &Path,
        language: Option<Language>,
        text: &str,
        tree: Option<&tree_sitter::Tree>,
    ) {
        let seq = self.ticket();
        let max = self.settings.read().max_file_bytes;
        let language = language.or_else(|| Language::from_path(path));
        let accepted = text.len() as u64 <= max && self.filter.read().accepts(path, false);
        let data = language.filter(|_| accepted).map(|lang| match tree {
            Some(tree) => extract::extract_parsed(lang, Some(tree), text),
            None => extract::extract(lang, text),
        });
        let mut store = self.write_store();
        match data {
            Some(data) => store.commit(path, data, seq, Origin::Buffer),
            None => store.remove(path, seq),
        };
    }

    /// Drops `path`, and everything indexed under it when it names a
    /// directory (a deleted folder arrives as one event).
    pub fn remove_file(&self, path: &Path) {
        let seq = self.ticket();
        let under = self.store.read().paths_under(path);
        let mut store = self.write_store();
        store.remove(path, seq);
        for p in &under {
            store.remove(p, seq);
        }
    }

    /// Whether the walk would index `path` if it has a grammar and passes
    /// the content checks (inside a root, not ignored/excluded/hidden).
    pub fn accepts(&self, path: &Path) -> bool {
        self.filter.read().accepts(path, false)
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.store.read().contains(path)
    }

    /// Definitions named exactly `name`, in (path, position) order.
    pub fn definitions(&self, name: &str) -> Vec<IndexedSymbol> {
        self.store.read().definitions(name)
    }

    /// All definitions of a file in document order (enclosing before
    /// enclosed), including `impl` blocks.
    pub fn file_symbols(&self, path: &Path) -> Vec<IndexedSymbol> {
        self.store.read().file_symbols(path)
    }

    /// The innermost of `path`'s definitions whose range holds `line`
    /// (0-based) and whose kind `wanted` accepts. For the completion path:
    /// a file of thousands of definitions is not copied to find one.
    pub fn enclosing_symbol(
        &self,
        path: &Path,
        line: u32,
        wanted: impl Fn(SymbolKind) -> bool,
    ) -> Option<IndexedSymbol> {
        self.store.read().enclosing_symbol(path, line, wanted)
    }

    /// Files referencing `name`, sorted.
    pub fn files_referencing(&self, name: &str) -> Vec<PathBuf> {
        self.store.read().files_referencing(name)
    }

    /// The names a file references, with occurrence counts, sorted by name.
    pub fn reference_counts(&self, path: &Path) -> Vec<(Arc<str>, u32)> {
        self.store.read().reference_counts(path)
    }

    /// Every indexed file, sorted by path.
    pub fn files(&self) -> Vec<FileInfo> {
        self.store.read().files()
    }

    pub fn file_info(&self, path: &Path) -> Option<FileInfo> {
        self.store.read().file_info(path)
    }

    /// Fuzzy search over all definitions, best first.
    ///
    /// Case-insensitive subsequence match ranked exact > prefix > word
    /// boundary hits > contiguous runs > shorter names, ties by (name,
    /// path, position). An empty query lists top-level definitions by name.
    pub fn search(&self, query: &str, limit: usize) -> Vec<IndexedSymbol> {
        self.store.read().search(query, limit)
    }

    /// Totals over the whole index; `skipped` is from the last walk.
    pub fn stats(&self) -> IndexStats {
        let mut stats = self.store.read().stats();
        stats.skipped = self.skipped.load(Ordering::Relaxed);
        stats
    }
}

fn add_stats(total: &mut IndexStats, part: &IndexStats) {
    total.files += part.files;
    total.lines += part.lines;
    total.bytes += part.bytes;
    total.definitions += part.definitions;
    total.references += part.references;
    total.skipped += part.skipped;
}
