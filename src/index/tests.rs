//! Store invariants that the public API cannot reach deterministically:
//! ticket ordering, buffer ownership, interning.

use std::path::Path;
use std::sync::Arc;

use super::extract::{FileData, RawDef};
use super::store::{Origin, Store};
use crate::position::TextPoint;
use crate::syntax::{Language, SymbolKind};

fn point(line: u32) -> TextPoint {
    TextPoint {
        line,
        utf8: 0,
        utf16: 0,
        utf32: 0,
    }
}

/// A file defining `defs` (one per line) and referencing `refs` once each.
fn data(defs: &[&str], refs: &[&str]) -> FileData {
    let defs = defs
        .iter()
        .enumerate()
        .map(|(i, name)| RawDef {
            name: (*name).to_owned(),
            kind: SymbolKind::Function,
            container: None,
            detail: None,
            range: (point(i as u32), point(i as u32 + 1)),
            selection: (point(i as u32), point(i as u32)),
        })
        .collect();
    let mut refs: Vec<(String, u32)> = refs.iter().map(|r| ((*r).to_owned(), 1)).collect();
    refs.sort();
    FileData {
        language: Language::Rust,
        lines: 3,
        bytes: 30,
        defs,
        refs,
    }
}

fn defined(store: &Store, name: &str) -> usize {
    store.definitions(name).len()
}

#[test]
fn an_older_update_never_replaces_a_newer_one() {
    let mut store = Store::default();
    let a = Path::new("/w/a.rs");
    assert!(store.commit(a, data(&["newer"], &[]), 5, Origin::Disk));
    assert!(!store.commit(a, data(&["older"], &[]), 3, Origin::Disk));
    assert_eq!((defined(&store, "newer"), defined(&store, "older")), (1, 0));
    assert!(!store.remove(a, 4));
    assert_eq!(defined(&store, "newer"), 1);
}

#[test]
fn a_removal_is_not_undone_by_an_older_update() {
    let mut store = Store::default();
    let a = Path::new("/w/a.rs");
    store.commit(a, data(&["f"], &[]), 1, Origin::Disk);
    store.remove(a, 5);
    assert!(!store.commit(a, data(&["stale"], &[]), 4, Origin::Disk));
    assert_eq!(defined(&store, "stale"), 0);
    assert!(store.commit(a, data(&["fresh"], &[]), 6, Origin::Disk));
    assert_eq!(defined(&store, "fresh"), 1);
}

#[test]
fn the_walk_does_not_replace_an_open_buffer() {
    let mut store = Store::default();
    let a = Path::new("/w/a.rs");
    store.commit(a, data(&["buffer"], &[]), 2, Origin::Buffer);
    assert!(!store.commit(a, data(&["disk"], &[]), 3, Origin::Walk));
    assert_eq!(defined(&store, "buffer"), 1);
    assert!(store.file_info(a).is_some_and(|f| f.open_buffer));
    assert!(store.commit(a, data(&["saved"], &[]), 4, Origin::Disk));
    assert!(store.file_info(a).is_some_and(|f| !f.open_buffer));
    assert!(store.commit(a, data(&["walked"], &[]), 5, Origin::Walk));
}

#[test]
fn names_are_shared_and_dropped_with_their_last_user() {
    let mut store = Store::default();
    let (a, b) = (Path::new("/w/a.rs"), Path::new("/w/b.rs"));
    store.commit(a, data(&["shared"], &["helper", "shared"]), 1, Origin::Disk);
    store.commit(b, data(&["helper"], &["shared"]), 2, Origin::Disk);
    let from_a = store.reference_counts(a);
    let from_b = store.reference_counts(b);
    let shared_a = from_a
        .iter()
        .find(|(n, _)| &**n == "shared")
        .map(|(n, _)| n.clone());
    let shared_b = from_b
        .iter()
        .find(|(n, _)| &**n == "shared")
        .map(|(n, _)| n.clone());
    assert!(matches!((&shared_a, &shared_b), (Some(x), Some(y)) if Arc::ptr_eq(x, y)));
    assert_eq!(store.name_count(), 2);

    // Re-indexing with a changed reference set relinks only the difference.
    store.commit(a, data(&["shared"], &["other"]), 3, Origin::Disk);
    assert_eq!(
        store.files_referencing("helper"),
        Vec::<std::path::PathBuf>::new()
    );
    assert_eq!(store.files_referencing("shared"), [b.to_path_buf()]);
    assert_eq!(store.name_count(), 3);

    store.remove(a, 4);
    store.remove(b, 5);
    assert_eq!(store.name_count(), 0);
    assert_eq!(store.stats(), Default::default());
}

#[test]
fn search_limits_are_safe() {
    let mut store = Store::default();
    store.commit(
        Path::new("/w/a.rs"),
        data(&["alpha", "beta", "alphabet"], &[]),
        1,
        Origin::Disk,
    );
    assert_eq!(store.search("al", usize::MAX).len(), 2);
    assert_eq!(store.search("", usize::MAX).len(), 3);
    assert_eq!(store.search("al", 1).len(), 1);
}

mod model {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::PathBuf;

    use proptest::prelude::*;

    use super::*;

    const NAMES: &[&str] = &["a", "b", "ab", "ba", "abc", "x"];

    #[derive(Clone, Debug)]
    enum Op {
        Commit {
            file: usize,
            defs: Vec<usize>,
            refs: BTreeSet<usize>,
        },
        Remove {
            file: usize,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        let name = 0..NAMES.len();
        prop_oneof![
            3 => (0..4usize, prop::collection::vec(name.clone(), 0..4), prop::collection::btree_set(name, 0..4))
                .prop_map(|(file, defs, refs)| Op::Commit { file, defs, refs }),
            1 => (0..4usize).prop_map(|file| Op::Remove { file }),
        ]
    }

    proptest! {
        /// Any sequence of commits and removals leaves the name maps equal
        /// to what the files say, and no name outliving its last user.
        #[test]
        fn maps_follow_the_files(ops in prop::collection::vec(op(), 1..40)) {
            let mut store = Store::default();
            let mut model: BTreeMap<usize, (Vec<usize>, BTreeSet<usize>)> = BTreeMap::new();
            let path = |f: usize| PathBuf::from(format!("/w/{f}.rs"));
            for (seq, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Commit { file, defs, refs } => {
                        let d: Vec<&str> = defs.iter().map(|&i| NAMES[i]).collect();
                        let r: Vec<&str> = refs.iter().map(|&i| NAMES[i]).collect();
                        prop_assert!(store.commit(&path(file), data(&d, &r), seq as u64, Origin::Disk));
                        model.insert(file, (defs, refs));
                    }
                    Op::Remove { file } => {
                        store.remove(&path(file), seq as u64);
                        model.remove(&file);
                    }
                }
                let mut used = BTreeSet::new();
                for (i, name) in NAMES.iter().enumerate() {
                    let defs = model.values().map(|(d, _)| d.iter().filter(|&&n| n == i).count()).sum::<usize>();
                    let files: Vec<PathBuf> = model.iter().filter(|(_, (_, r))| r.contains(&i)).map(|(f, _)| path(*f)).collect();
                    prop_assert_eq!(store.definitions(name).len(), defs);
                    prop_assert_eq!(store.search(name, 100).iter().filter(|s| &*s.name == *name).count(), defs);
                    if defs > 0 || !files.is_empty() {
                        used.insert(i);
                    }
                    prop_assert_eq!(store.files_referencing(name), files);
                }
                prop_assert_eq!(store.name_count(), used.len());
            }
        }
    }
}

#[test]
fn the_generation_moves_with_every_change_and_only_then() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.rs"), "fn a() {}\n").unwrap();
    let index = super::WorkspaceIndex::new(super::IndexSettings::default());
    let start = index.generation();
    let cancel = tokio_util::sync::CancellationToken::new();
    index.index_roots(&[dir.path().to_path_buf()], &|_| {}, &cancel);
    let walked = index.generation();
    assert!(walked > start, "{start} -> {walked}");
    // Reading changes nothing.
    assert_eq!(index.definitions("a").len(), 1);
    assert_eq!(index.generation(), walked);
    let path = dir.path().join("a.rs");
    index.update_text(&path, None, "fn a() {}\nfn b() {}\n");
    let edited = index.generation();
    assert!(edited > walked, "{walked} -> {edited}");
    index.remove_file(&path);
    assert!(index.generation() > edited);
}
