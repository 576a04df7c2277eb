#![allow(clippy::unwrap_used, clippy::expect_used)] // in tests a panic is the failure report

use std::fs;
use std::path::Path;

use super::snapshot::{Budget, Original, Snapshot};
use super::*;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn changes(root: &Path, before: &Scan, after: &Scan) -> Vec<(String, Change)> {
    diff(before, after)
        .into_iter()
        .map(|c| {
            let rel = c.path.strip_prefix(root).unwrap().display().to_string();
            (rel, c.change)
        })
        .collect()
}

#[test]
fn diff_sees_created_modified_and_deleted_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "keep.txt", "same");
    write(root, "edit.txt", "old");
    write(root, "gone.txt", "bye");
    let scanner = Scanner::new(root, Vec::new());
    let before = scanner.scan();
    write(root, "edit.txt", "new!");
    fs::remove_file(root.join("gone.txt")).unwrap();
    write(root, "sub/new.txt", "hi");
    let after = scanner.rescan(&before);
    assert_eq!(
        changes(root, &before, &after),
        vec![
            ("edit.txt".to_owned(), Change::Modified),
            ("gone.txt".to_owned(), Change::Deleted),
            ("sub".to_owned(), Change::Created),
            ("sub/new.txt".to_owned(), Change::Created),
        ]
    );
}

#[test]
fn a_same_size_rewrite_with_the_old_mtime_put_back_is_still_seen() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "aaaa");
    let scanner = Scanner::new(root, Vec::new());
    let before = scanner.scan();
    let old = fs::metadata(root.join("a.txt")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // In place (same inode), same size, mtime reset: only ctime tells.
    fs::OpenOptions::new()
        .write(true)
        .open(root.join("a.txt"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"bbbb"))
        .unwrap();
    fs::File::options()
        .write(true)
        .open(root.join("a.txt"))
        .unwrap()
        .set_modified(old.modified().unwrap())
        .unwrap();
    let after = scanner.rescan(&before);
    assert_eq!(
        changes(root, &before, &after),
        vec![("a.txt".to_owned(), Change::Modified)]
    );
}

#[test]
fn a_chmod_is_a_modification_and_a_directory_mtime_is_not() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "run.sh", "echo");
    write(root, "d/x", "x");
    let scanner = Scanner::new(root, Vec::new());
    let before = scanner.scan();
    fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    // Touching a directory's entries changes its mtime: not a change.
    write(root, "d/tmp", "t");
    fs::remove_file(root.join("d/tmp")).unwrap();
    let after = scanner.rescan(&before);
    assert_eq!(
        changes(root, &before, &after),
        vec![("run.sh".to_owned(), Change::Modified)]
    );
}

#[test]
fn gitignored_files_build_dirs_and_fettle_files_are_not_scanned() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "*.log\nout/\n");
    write(root, "app.py", "x");
    write(root, ".hidden.cfg", "dotfiles count");
    write(root, "run.log", "ignored");
    write(root, "out/result", "ignored");
    for skipped in SKIPPED_DIRS {
        write(root, &format!("{skipped}/f"), "skipped");
        write(root, &format!("nested/{skipped}/f"), "skipped");
    }
    write(root, ".app.py.fettle-tmp-1-00000000", "our own temp file");
    write(root, "store/tasks/x", "the checkpoint store");
    let scanner = Scanner::new(root, vec![root.join("store")]);
    let scan = scanner.scan();
    let mut seen: Vec<String> = scan
        .entries
        .keys()
        .map(|p| p.strip_prefix(root).unwrap().display().to_string())
        .collect();
    seen.sort();
    assert_eq!(seen, vec![".gitignore", ".hidden.cfg", "app.py", "nested"]);
    assert!(scanner.is_skipped(&root.join("node_modules/x/y.js")));
    assert!(scanner.is_skipped(&root.join("nested/__pycache__")));
    assert!(scanner.is_skipped(&root.join("store/tasks/x")));
    assert!(!scanner.is_skipped(&root.join("app.py")));
    // A *file* named like a skipped directory is the user's.
    write(root, "lib/target", "a file");
    assert!(!scanner.is_skipped(&root.join("lib/target")));
    assert!(scanner
        .scan()
        .entries
        .contains_key(&root.join("lib/target")));
}

#[test]
fn a_command_cannot_hide_a_change_by_ignoring_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "data.json", "{}");
    write(root, "gone.json", "{}");
    let scanner = Scanner::new(root, Vec::new());
    let before = scanner.scan();
    write(root, "data.json", "{\"changed\": true}");
    fs::remove_file(root.join("gone.json")).unwrap();
    write(root, ".gitignore", "*.json\n");
    let after = scanner.rescan(&before);
    assert_eq!(
        changes(root, &before, &after),
        vec![
            (".gitignore".to_owned(), Change::Created),
            ("data.json".to_owned(), Change::Modified),
            ("gone.json".to_owned(), Change::Deleted),
        ]
    );
}

#[test]
fn symlinks_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(outside.path(), "big/f", "outside");
    std::os::unix::fs::symlink(outside.path().join("big"), root.join("link")).unwrap();
    let scan = Scanner::new(root, Vec::new()).scan();
    assert_eq!(scan.len(), 1);
    assert_eq!(scan.get(&root.join("link")).unwrap().kind, Kind::Symlink);
}

#[test]
fn the_snapshot_keeps_bytes_within_its_budget_and_deduplicates() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "same bytes");
    write(root, "b.txt", "same bytes");
    write(root, "c.txt", "other");
    write(root, "big.bin", &"x".repeat(2000));
    let scan = Scanner::new(root, Vec::new()).scan();
    let budget = Budget {
        max_file: 1000,
        max_total: 15,
    };
    let pack = store.path().join("pack");
    let snapshot = Snapshot::take(&pack, &scan, budget).unwrap();
    // "same bytes" once, then "other" (5 more) fits 15 exactly.
    assert_eq!(snapshot.stored_bytes, 15);
    assert_eq!(fs::read(&pack).unwrap(), b"same bytesother");
    let stat = |rel: &str| *scan.get(&root.join(rel)).unwrap();
    assert!(matches!(
        snapshot.original(&root.join("b.txt"), &stat("b.txt")),
        Some(Original::Bytes { bytes, .. }) if bytes == b"same bytes"
    ));
    match snapshot.original(&root.join("big.bin"), &stat("big.bin")) {
        Some(Original::NotKept(why)) => assert!(why.contains("larger than"), "{why}"),
        other => panic!("{other:?}"),
    }
    // A stat that is not the snapshot's: the bytes are not that file's.
    let mut later = stat("a.txt");
    later.size += 1;
    assert!(matches!(
        snapshot.original(&root.join("a.txt"), &later),
        Some(Original::NotKept(_))
    ));
    assert_eq!(
        snapshot.original(&root.join("new.txt"), &stat("a.txt")),
        None
    );
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&pack).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    snapshot.discard();
    assert!(!pack.exists());
}

#[test]
fn the_total_budget_is_reported_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "0123456789");
    write(root, "b.txt", "abcdefghij");
    let scan = Scanner::new(root, Vec::new()).scan();
    let snapshot = Snapshot::take(
        &store.path().join("pack"),
        &scan,
        Budget {
            max_file: 100,
            max_total: 15,
        },
    )
    .unwrap();
    assert_eq!((snapshot.kept_files, snapshot.not_kept), (1, 1));
    let b = root.join("b.txt");
    match snapshot.original(&b, scan.get(&b).unwrap()) {
        Some(Original::NotKept(why)) => assert!(why.contains("snapshot budget"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn editor_swap_lock_and_backup_files_are_not_tracked() {
    for name in [
        ".models.py.swp",
        ".x.swo",
        "4913",
        ".#models.py",
        "#models.py#",
        "models.py~",
    ] {
        assert!(super::is_transient(name), "{name}");
    }
    for name in ["models.py", "#", "swp", "notes.md"] {
        assert!(!super::is_transient(name), "{name}");
    }
}
