//! The index's data: per-file entries plus global name maps, kept
//! consistent on every commit/removal. All methods run under the index's
//! lock, so each is kept short; extraction happens before, outside it.

use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::extract::FileData;
use super::fuzzy::{self, Matcher, Score};
// FxHash: names and paths are not attacker-controlled, and SipHash is a
// measurable share of commit time during a cold index.
use super::{FileInfo, IndexStats, IndexedSymbol};
use crate::position::TextPoint;
use crate::syntax::{Language, SymbolKind};
use rustc_hash::FxHashMap as FxMap;

/// Where a commit's text came from; decides who wins over an open buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// The bulk walk: never replaces an open buffer's text.
    Walk,
    /// An explicit re-read (save, watcher, buffer closed): replaces anything.
    Disk,
    /// An open buffer.
    Buffer,
}

struct StoredDef {
    name: Arc<str>,
    kind: SymbolKind,
    container: Option<Arc<str>>,
    detail: Option<Arc<str>>,
    range: (TextPoint, TextPoint),
    selection: (TextPoint, TextPoint),
}

struct FileEntry {
    path: Arc<Path>,
    language: Language,
    lines: u32,
    bytes: u64,
    defs: Vec<StoredDef>,
    /// Referenced names with their counts, sorted by name.
    refs: Vec<(Arc<str>, u32)>,
    /// The ticket of the operation that produced this entry.
    seq: u64,
    overlay: bool,
}

impl FileEntry {
    fn info(&self) -> FileInfo {
        FileInfo {
            path: self.path.clone(),
            language: self.language,
            lines: self.lines,
            bytes: self.bytes,
            definitions: self.defs.len(),
            open_buffer: self.overlay,
        }
    }
}

/// One interned name. It exists while some file defines or references it,
/// so the map's keys double as the interner.
struct NameEntry {
    /// Index in `Store::defined` while the name has definitions.
    listed: Option<u32>,
    /// (file slot, index into its `defs`).
    defs: Vec<(u32, u32)>,
    /// File slots referencing the name (each once).
    files: Vec<u32>,
}

/// A matched name during search, ordered best first.
struct Hit<'a> {
    score: Score,
    name: &'a Arc<str>,
}

impl Ord for Hit<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        fuzzy::rank((self.score, self.name), (other.score, other.name))
    }
}

impl PartialOrd for Hit<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Hit<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Hit<'_> {}

/// Impl blocks are outline containers, not definitions of their name: a
/// `definitions("Foo")` must not return `impl Foo`.
fn is_global(kind: SymbolKind) -> bool {
    kind != SymbolKind::Impl
}

/// Removed paths remember their ticket so a slower, older update cannot
/// resurrect them; beyond this many, the oldest half is forgotten.
const MAX_TOMBSTONES: usize = 4096;

#[derive(Default)]
pub(super) struct Store {
    slots: Vec<Option<FileEntry>>,
    free: Vec<u32>,
    by_path: FxMap<Arc<Path>, u32>,
    names: FxMap<Arc<str>, NameEntry>,
    /// Names with definitions and their char masks: what search scans,
    /// dense so the scan does not walk reference-only names.
    defined: Vec<(u64, Arc<str>)>,
    tombstones: FxMap<Arc<Path>, u64>,
    lines: usize,
    bytes: u64,
    definitions: usize,
    references: usize,
}

impl Store {
    fn entry(&self, slot: u32) -> Option<&FileEntry> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    fn file(&self, path: &Path) -> Option<&FileEntry> {
        self.by_path.get(path).and_then(|&s| self.entry(s))
    }

    /// Whether an operation with ticket `seq` from `origin` may replace
    /// what is stored for `path`.
    fn may_replace(&self, path: &Path, seq: u64, origin: Origin) -> bool {
        if let Some(e) = self.file(path) {
            return e.seq <= seq && !(origin == Origin::Walk && e.overlay);
        }
        self.tombstones.get(path).is_none_or(|&t| t <= seq)
    }

    /// Replaces `path`'s entry with `data`; false when a newer operation
    /// (or an open buffer, for the walk) already owns the path.
    pub(super) fn commit(&mut self, path: &Path, data: FileData, seq: u64, origin: Origin) -> bool {
        if !self.may_replace(path, seq, origin) {
            return false;
        }
        self.tombstones.remove(path);
        let (slot, path, old) = match self.by_path.get_key_value(path) {
            Some((p, &s)) => (s, p.clone(), self.slots[s as usize].take()),
            None => {
                let p: Arc<Path> = Arc::from(path);
                let s = match self.free.pop() {
                    Some(s) => s,
                    None => {
                        self.slots.push(None);
                        (self.slots.len() - 1) as u32
                    }
                };
                self.by_path.insert(p.clone(), s);
                (s, p, None)
            }
        };
        if let Some(old) = &old {
            self.unlink_defs(slot, old);
        }
        let defs: Vec<StoredDef> = data
            .defs
            .into_iter()
            .map(|d| StoredDef {
                name: if is_global(d.kind) {
                    self.intern(&d.name)
                } else {
                    self.shared(&d.name)
                },
                kind: d.kind,
                container: d.container.map(|c| self.shared(&c)),
                detail: d.detail.map(Arc::from),
                range: d.range,
                selection: d.selection,
            })
            .collect();
        for (i, d) in defs.iter().enumerate() {
            if !is_global(d.kind) {
                continue;
            }
            if let Some(e) = self.names.get_mut(&*d.name) {
                e.defs.push((slot, i as u32));
                if e.listed.is_none() {
                    e.listed = Some(self.defined.len() as u32);
                    self.defined
                        .push((fuzzy::char_mask(&d.name), d.name.clone()));
                }
            }
        }
        let refs = self.relink_refs(
            slot,
            old.as_ref().map(|o| &o.refs[..]).unwrap_or(&[]),
            data.refs,
        );
        let entry = FileEntry {
            path,
            language: data.language,
            lines: data.lines,
            bytes: data.bytes,
            defs,
            refs,
            seq,
            overlay: origin == Origin::Buffer,
        };
        self.account(&entry, true);
        if let Some(old) = &old {
            self.account(old, false);
            self.drop_unused(old);
        }
        self.slots[slot as usize] = Some(entry);
        true
    }

    /// Removes `path` (if the operation is not older than what is stored).
    pub(super) fn remove(&mut self, path: &Path, seq: u64) -> bool {
        if !self.may_replace(path, seq, Origin::Disk) {
            return false;
        }
        self.remember_removal(path, seq);
        let Some(slot) = self.by_path.remove(path) else {
            return false;
        };
        let Some(old) = self.slots[slot as usize].take() else {
            return false;
        };
        self.free.push(slot);
        self.unlink_defs(slot, &old);
        self.relink_refs(slot, &old.refs, Vec::new());
        self.account(&old, false);
        self.drop_unused(&old);
        true
    }

    fn remember_removal(&mut self, path: &Path, seq: u64) {
        if self.tombstones.len() >= MAX_TOMBSTONES {
            let mut seqs: Vec<u64> = self.tombstones.values().copied().collect();
            let (_, &mut median, _) = seqs.select_nth_unstable(MAX_TOMBSTONES / 2);
            self.tombstones.retain(|_, s| *s > median);
        }
        let key = self
            .by_path
            .get_key_value(path)
            .map_or_else(|| Arc::from(path), |(p, _)| p.clone());
        self.tombstones.insert(key, seq);
    }

    /// Interns `name`, creating its entry.
    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some((k, _)) = self.names.get_key_value(name) {
            return k.clone();
        }
        let k: Arc<str> = Arc::from(name);
        let entry = NameEntry {
            listed: None,
            defs: Vec::new(),
            files: Vec::new(),
        };
        self.names.insert(k.clone(), entry);
        k
    }

    /// The interned copy if there is one (containers, impl names), else a
    /// fresh one: such names must not keep a map entry alive.
    fn shared(&self, name: &str) -> Arc<str> {
        self.names
            .get_key_value(name)
            .map_or_else(|| Arc::from(name), |(k, _)| k.clone())
    }

    fn unlink_defs(&mut self, slot: u32, old: &FileEntry) {
        for d in &old.defs {
            if let Some(e) = self.names.get_mut(&*d.name) {
                e.defs.retain(|&(s, _)| s != slot);
            }
        }
    }

    /// Updates the name → files map from `old` to `new` references (both
    /// sorted by name), touching only names that appear in one of them;
    /// returns the interned `new`.
    fn relink_refs(
        &mut self,
        slot: u32,
        old: &[(Arc<str>, u32)],
        new: Vec<(String, u32)>,
    ) -> Vec<(Arc<str>, u32)> {
        let mut out = Vec::with_capacity(new.len());
        let mut old_it = old.iter().peekable();
        for (name, count) in new {
            while let Some((o, _)) = old_it.next_if(|(o, _)| **o < *name) {
                self.unlink_ref(slot, o);
            }
            let known = old_it.next_if(|(o, _)| **o == *name).is_some();
            let key = self.intern(&name);
            if !known {
                if let Some(e) = self.names.get_mut(&*key) {
                    e.files.push(slot);
                }
            }
            out.push((key, count));
        }
        for (o, _) in old_it {
            self.unlink_ref(slot, o);
        }
        out
    }

    fn unlink_ref(&mut self, slot: u32, name: &str) {
        if let Some(e) = self.names.get_mut(name) {
            if let Some(i) = e.files.iter().position(|&s| s == slot) {
                e.files.swap_remove(i);
            }
        }
    }

    /// After `old` was replaced or removed: unlists its names that lost
    /// their last definition, and drops the entries nothing uses any more.
    fn drop_unused(&mut self, old: &FileEntry) {
        for d in &old.defs {
            let Some(e) = self.names.get_mut(&*d.name).filter(|e| e.defs.is_empty()) else {
                continue;
            };
            if let Some(i) = e.listed.take() {
                self.defined.swap_remove(i as usize);
                if let Some((_, moved)) = self.defined.get(i as usize) {
                    if let Some(m) = self.names.get_mut(&**moved) {
                        m.listed = Some(i);
                    }
                }
            }
        }
        let names = old
            .defs
            .iter()
            .map(|d| &d.name)
            .chain(old.refs.iter().map(|(n, _)| n));
        for name in names {
            if self
                .names
                .get(&**name)
                .is_some_and(|e| e.defs.is_empty() && e.files.is_empty())
            {
                self.names.remove(&**name);
            }
        }
    }

    fn account(&mut self, e: &FileEntry, add: bool) {
        let refs: usize = e.refs.iter().map(|(_, c)| *c as usize).sum();
        if add {
            self.lines += e.lines as usize;
            self.bytes += e.bytes;
            self.definitions += e.defs.len();
            self.references += refs;
        } else {
            self.lines -= e.lines as usize;
            self.bytes -= e.bytes;
            self.definitions -= e.defs.len();
            self.references -= refs;
        }
    }

    pub(super) fn stats(&self) -> IndexStats {
        IndexStats {
            files: self.by_path.len(),
            lines: self.lines,
            bytes: self.bytes,
            definitions: self.definitions,
            references: self.references,
            skipped: 0,
        }
    }

    /// Paths whose entries predate ticket `seq`, split by whether they hold
    /// an open buffer's text.
    pub(super) fn older_than(&self, seq: u64) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let (mut disk, mut overlay) = (Vec::new(), Vec::new());
        for e in self.slots.iter().flatten().filter(|e| e.seq < seq) {
            let list = if e.overlay { &mut overlay } else { &mut disk };
            list.push(e.path.to_path_buf());
        }
        (disk, overlay)
    }

    /// Indexed paths equal to or under `dir`.
    pub(super) fn paths_under(&self, dir: &Path) -> Vec<PathBuf> {
        self.by_path
            .keys()
            .filter(|p| p.starts_with(dir))
            .map(|p| p.to_path_buf())
            .collect()
    }

    #[cfg(test)]
    pub(super) fn name_count(&self) -> usize {
        // Every listed name is a defined one, and each is listed once.
        for (i, (_, n)) in self.defined.iter().enumerate() {
            let entry = self.names.get(&**n);
            assert!(entry.is_some_and(|e| e.listed == Some(i as u32) && !e.defs.is_empty()));
        }
        let defined = self.names.values().filter(|e| !e.defs.is_empty()).count();
        assert_eq!(defined, self.defined.len());
        self.names.len()
    }

    pub(super) fn contains(&self, path: &Path) -> bool {
        self.by_path.contains_key(path)
    }

    fn symbol(&self, e: &FileEntry, d: &StoredDef) -> IndexedSymbol {
        IndexedSymbol {
            name: d.name.clone(),
            kind: d.kind,
            path: e.path.clone(),
            container: d.container.clone(),
            detail: d.detail.clone(),
            range: d.range,
            selection: d.selection,
        }
    }

    /// The definitions of one name, in (path, position) order.
    fn named(&self, entry: &NameEntry) -> Vec<(&FileEntry, &StoredDef)> {
        let mut out: Vec<_> = entry
            .defs
            .iter()
            .filter_map(|&(s, i)| {
                let e = self.entry(s)?;
                Some((e, e.defs.get(i as usize)?))
            })
            .collect();
        out.sort_by(|a, b| {
            a.0.path
                .cmp(&b.0.path)
                .then(a.1.selection.0.cmp(&b.1.selection.0))
        });
        out
    }

    pub(super) fn definitions(&self, name: &str) -> Vec<IndexedSymbol> {
        let Some(entry) = self.names.get(name) else {
            return Vec::new();
        };
        self.named(entry)
            .into_iter()
            .map(|(e, d)| self.symbol(e, d))
            .collect()
    }

    pub(super) fn file_symbols(&self, path: &Path) -> Vec<IndexedSymbol> {
        let Some(e) = self.file(path) else {
            return Vec::new();
        };
        e.defs.iter().map(|d| self.symbol(e, d)).collect()
    }

    /// The innermost definition of `path` whose range holds `line` and
    /// whose kind `wanted` accepts, without copying the others.
    pub(super) fn enclosing_symbol(
        &self,
        path: &Path,
        line: u32,
        wanted: impl Fn(SymbolKind) -> bool,
    ) -> Option<IndexedSymbol> {
        let e = self.file(path)?;
        // Definitions are in document order (enclosing before enclosed), so
        // sorted by where they start: of those starting by `line`, the last
        // that still holds it is the innermost.
        let started = e.defs.partition_point(|d| d.range.0.line <= line);
        let d = e.defs[..started]
            .iter()
            .rfind(|d| line <= d.range.1.line && wanted(d.kind))?;
        Some(self.symbol(e, d))
    }

    pub(super) fn files_referencing(&self, name: &str) -> Vec<PathBuf> {
        let Some(entry) = self.names.get(name) else {
            return Vec::new();
        };
        let mut out: Vec<PathBuf> = entry
            .files
            .iter()
            .filter_map(|&s| Some(self.entry(s)?.path.to_path_buf()))
            .collect();
        out.sort();
        out
    }

    pub(super) fn reference_counts(&self, path: &Path) -> Vec<(Arc<str>, u32)> {
        self.file(path).map(|e| e.refs.clone()).unwrap_or_default()
    }

    pub(super) fn files(&self) -> Vec<FileInfo> {
        let mut out: Vec<FileInfo> = self.slots.iter().flatten().map(FileEntry::info).collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    pub(super) fn file_info(&self, path: &Path) -> Option<FileInfo> {
        self.file(path).map(FileEntry::info)
    }

    /// Fuzzy search: names are scored once each (not per definition), the
    /// best `limit` names are kept in a heap, then expanded to their
    /// definitions.
    pub(super) fn search(&self, query: &str, limit: usize) -> Vec<IndexedSymbol> {
        if limit == 0 {
            return Vec::new();
        }
        let Some(mut matcher) = Matcher::new(query) else {
            return self.top_level(limit);
        };
        let mask = matcher.mask();
        // Max-heap on rank order: the top is the worst hit kept so far.
        let mut heap: BinaryHeap<Hit<'_>> = BinaryHeap::with_capacity(limit.min(1024));
        for (name_mask, name) in &self.defined {
            if name_mask & mask != mask {
                continue;
            }
            let full = heap.len() >= limit;
            let floor = if full {
                heap.peek().map_or(0, |w| w.score.tier)
            } else {
                0
            };
            let Some(score) = matcher.score(name, floor) else {
                continue;
            };
            let hit = Hit { score, name };
            if !full {
                heap.push(hit);
            } else if heap.peek().is_some_and(|worst| hit < *worst) {
                heap.pop();
                heap.push(hit);
            }
        }
        let mut out = Vec::with_capacity(limit.min(heap.len() * 2));
        for hit in heap.into_sorted_vec() {
            let Some(entry) = self.names.get(&**hit.name) else {
                continue;
            };
            for (e, d) in self.named(entry) {
                if out.len() == limit {
                    return out;
                }
                out.push(self.symbol(e, d));
            }
        }
        out
    }

    /// For an empty query: top-level definitions, alphabetically.
    fn top_level(&self, limit: usize) -> Vec<IndexedSymbol> {
        let mut all: Vec<(&FileEntry, &StoredDef)> = self
            .slots
            .iter()
            .flatten()
            .flat_map(|e| e.defs.iter().map(move |d| (e, d)))
            .filter(|(_, d)| d.container.is_none() && is_global(d.kind))
            .collect();
        let cmp = |a: &(&FileEntry, &StoredDef), b: &(&FileEntry, &StoredDef)| {
            a.1.name
                .cmp(&b.1.name)
                .then_with(|| a.0.path.cmp(&b.0.path))
                .then(a.1.selection.0.cmp(&b.1.selection.0))
        };
        if all.len() > limit {
            all.select_nth_unstable_by(limit - 1, cmp);
            all.truncate(limit);
        }
        all.sort_unstable_by(cmp);
        all.into_iter().map(|(e, d)| self.symbol(e, d)).collect()
    }
}
