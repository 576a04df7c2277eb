//! Checkpoints: record, modify, restore byte for byte (CRLF, modes, new
//! files), changes after the task, re-opening after a crash, and the
//! in-memory `TreeState`.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::fs;
use std::path::{Path, PathBuf};

use fettle::agent::checkpoint::{CheckpointStore, Original, TreeState};
use fettle::agent::fsutil::{file_mode, write_atomic};

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    store: CheckpointStore,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap().join("ws");
    fs::create_dir_all(root.join("src")).unwrap();
    let store = CheckpointStore::with_dir(tmp.path().join("cache/tasks/x"), &root);
    Fixture {
        _tmp: tmp,
        root,
        store,
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Writes like the agent does: record first, write, record the result.
fn agent_write(cp: &mut fettle::agent::checkpoint::Checkpoint, path: &Path, bytes: &[u8]) {
    cp.record(path, None).unwrap();
    write_atomic(path, bytes, None).unwrap();
    cp.record_result(path, bytes).unwrap();
}

#[cfg(unix)]
#[test]
fn restore_is_byte_identical_with_modes_and_crlf() {
    let f = fixture();
    let crlf = f.root.join("src/win.rs");
    let script = f.root.join("run.sh");
    let private = f.root.join("secret.env");
    let crlf_bytes = b"fn a() {\r\n    1\r\n}\r\n\xef\xbb\xbf trailing no newline".to_vec();
    fs::write(&crlf, &crlf_bytes).unwrap();
    fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    set_mode(&script, 0o755);
    fs::write(&private, "KEY=1\n").unwrap();
    set_mode(&private, 0o600);

    let mut cp = f.store.begin("t1", "fix the build").unwrap();
    agent_write(&mut cp, &crlf, b"fn a() {\n    2\n}\n");
    agent_write(&mut cp, &script, b"#!/bin/sh\necho bye\n");
    agent_write(&mut cp, &private, b"KEY=2\n");
    // A second record of the same path keeps the first original.
    agent_write(&mut cp, &script, b"#!/bin/sh\necho again\n");
    set_mode(&private, 0o644);
    assert_eq!(
        cp.touched(),
        vec![crlf.clone(), script.clone(), private.clone()]
    );
    assert_eq!(
        cp.original(&script).unwrap(),
        Some(Original {
            bytes: Some(b"#!/bin/sh\necho hi\n".to_vec()),
            mode: Some(0o755),
            buffer: None,
        })
    );

    let report = cp.restore(false).unwrap();
    assert_eq!(
        report.restored,
        vec![crlf.clone(), script.clone(), private.clone()]
    );
    assert!(
        report.removed.is_empty() && report.skipped.is_empty(),
        "{report:?}"
    );
    assert_eq!(fs::read(&crlf).unwrap(), crlf_bytes);
    assert_eq!(fs::read(&script).unwrap(), b"#!/bin/sh\necho hi\n");
    assert_eq!(file_mode(&script).unwrap(), Some(0o755));
    assert_eq!(file_mode(&private).unwrap(), Some(0o600));
}

#[test]
fn new_files_and_their_directories_are_removed() {
    let f = fixture();
    let new_file = f.root.join("src/new.rs");
    let nested = f.root.join("gen/deep/er/mod.rs");
    let mut cp = f.store.begin("t1", "goal").unwrap();
    agent_write(&mut cp, &new_file, b"fn new() {}\n");
    agent_write(&mut cp, &nested, b"x\n");
    assert_eq!(cp.original(&nested).unwrap().unwrap().bytes, None);

    let report = cp.restore(false).unwrap();
    assert_eq!(report.removed, vec![new_file.clone(), nested.clone()]);
    assert!(!new_file.exists() && !f.root.join("gen").exists());
    assert!(f.root.join("src").is_dir(), "pre-existing directories stay");
}

#[test]
fn created_directory_with_user_files_is_kept() {
    let f = fixture();
    let nested = f.root.join("gen/out.txt");
    let mut cp = f.store.begin("t1", "goal").unwrap();
    agent_write(&mut cp, &nested, b"x\n");
    fs::write(f.root.join("gen/user.txt"), "mine").unwrap();
    cp.restore(false).unwrap();
    assert!(!nested.exists());
    assert_eq!(
        fs::read_to_string(f.root.join("gen/user.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn files_changed_after_the_task_are_skipped_unless_forced() {
    let f = fixture();
    let edited = f.root.join("src/a.rs");
    let created = f.root.join("src/b.rs");
    let untouched_since = f.root.join("src/c.rs");
    fs::write(&edited, "original a\n").unwrap();
    fs::write(&untouched_since, "original c\n").unwrap();
    let mut cp = f.store.begin("t1", "goal").unwrap();
    agent_write(&mut cp, &edited, b"task a\n");
    agent_write(&mut cp, &created, b"task b\n");
    agent_write(&mut cp, &untouched_since, b"task c\n");
    cp.finish("fixed").unwrap();
    // The user keeps working.
    fs::write(&edited, "user a\n").unwrap();
    fs::write(&created, "user b\n").unwrap();

    let report = cp.restore(false).unwrap();
    assert_eq!(report.restored, vec![untouched_since.clone()]);
    assert_eq!(
        report.skipped,
        vec![
            (edited.clone(), "changed on disk since the task".to_owned()),
            (created.clone(), "changed on disk since the task".to_owned()),
        ]
    );
    assert_eq!(fs::read_to_string(&edited).unwrap(), "user a\n");
    assert_eq!(
        fs::read_to_string(&untouched_since).unwrap(),
        "original c\n"
    );

    let report = cp.restore(true).unwrap();
    assert!(report.skipped.is_empty());
    assert_eq!(report.removed, vec![created.clone()]);
    assert_eq!(fs::read_to_string(&edited).unwrap(), "original a\n");
    assert!(!created.exists());
}

/// The buffer the task left is recorded: typing in the editor after the
/// task (unsaved, the disk untouched) makes undo skip the file, named,
/// unless forced; a buffer still as the task left it is restored. The
/// judgement survives re-opening the checkpoint (a restarted server).
#[test]
fn a_buffer_changed_after_the_task_is_skipped_unless_forced() {
    let f = fixture();
    let typed_in = f.root.join("src/models.py");
    let untouched = f.root.join("src/other.py");
    fs::write(&typed_in, "original\n").unwrap();
    fs::write(&untouched, "original other\n").unwrap();
    let mut cp = f.store.begin("t1", "goal").unwrap();
    agent_write(&mut cp, &typed_in, b"task\n");
    agent_write(&mut cp, &untouched, b"task other\n");
    cp.record_result_buffer(&typed_in, "task\n").unwrap();
    cp.record_result_buffer(&untouched, "task other\n").unwrap();
    cp.finish("fixed").unwrap();
    let cp = f.store.open("t1").unwrap();

    let typed = |p: &Path| -> Option<String> {
        if p.ends_with("models.py") {
            Some("task\n# typed after the task\n".to_owned())
        } else {
            Some("task other\n".to_owned())
        }
    };
    assert_eq!(
        cp.judge(&typed_in, typed(&typed_in).as_deref(), false)
            .unwrap()
            .as_deref(),
        Some("changed in the editor since the task")
    );
    assert_eq!(
        cp.judge(&untouched, typed(&untouched).as_deref(), false)
            .unwrap(),
        None
    );
    let report = cp.restore_with(false, &typed).unwrap();
    assert_eq!(report.restored, vec![untouched.clone()]);
    assert_eq!(
        report.skipped,
        vec![(
            typed_in.clone(),
            "changed in the editor since the task".to_owned()
        )]
    );
    assert_eq!(fs::read_to_string(&typed_in).unwrap(), "task\n");
    // Without the buffers (the terminal), only the disk counts.
    assert_eq!(cp.judge(&typed_in, None, false).unwrap(), None);
    let report = cp.restore_with(true, &typed).unwrap();
    assert!(report.skipped.is_empty());
    assert_eq!(fs::read_to_string(&typed_in).unwrap(), "original\n");
}

/// The user's text saved (with consent) after the checkpoint recorded the
/// file but before the task wrote it becomes the original: undo gives it back.
#[test]
fn rerecorded_original_is_what_undo_restores() {
    let f = fixture();
    let path = f.root.join("models.py");
    fs::write(&path, "old\n").unwrap();
    let mut cp = f.store.begin("t1", "goal").unwrap();
    cp.record(&path, Some("old\n")).unwrap();
    fs::write(&path, "old\nuser method\n").unwrap();
    cp.rerecord_original(&path, Some("old\nuser method\n"))
        .unwrap();
    write_atomic(&path, b"task\nuser method\n", None).unwrap();
    cp.record_result(&path, b"task\nuser method\n").unwrap();
    let original = cp.original(&path).unwrap().unwrap();
    assert_eq!(original.bytes.as_deref(), Some(&b"old\nuser method\n"[..]));
    assert_eq!(original.buffer.as_deref(), Some("old\nuser method\n"));
    let report = cp.restore(false).unwrap();
    assert_eq!(report.restored, vec![path.clone()]);
    assert_eq!(fs::read_to_string(&path).unwrap(), "old\nuser method\n");
}

#[test]
fn deleted_after_the_task_is_skipped_unless_forced() {
    let f = fixture();
    let path = f.root.join("a.txt");
    fs::write(&path, "orig").unwrap();
    let mut cp = f.store.begin("t1", "goal").unwrap();
    agent_write(&mut cp, &path, b"task");
    fs::remove_file(&path).unwrap();
    let report = cp.restore(false).unwrap();
    assert_eq!(
        report.skipped,
        vec![(path.clone(), "deleted since the task".to_owned())]
    );
    assert!(!path.exists());
    cp.restore(true).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "orig");
}

#[test]
fn reopen_after_a_crash_restores() {
    let f = fixture();
    let path = f.root.join("src/lib.rs");
    fs::write(&path, "before\r\n").unwrap();
    let buffer_path = f.root.join("src/open.rs");
    fs::write(&buffer_path, "disk\n").unwrap();
    {
        let mut cp = f.store.begin("task-1", "goal").unwrap();
        cp.record(&path, None).unwrap();
        cp.record(&buffer_path, Some("unsaved buffer\n")).unwrap();
        // Crash right after the write, before `record_result`.
        fs::write(&path, "half done\n").unwrap();
        drop(cp);
    }
    // A new process: only the store on disk is left.
    let store = CheckpointStore::with_dir(f.store.dir(), &f.root);
    let cp = store.open("task-1").unwrap();
    assert_eq!(cp.task_id(), "task-1");
    assert_eq!(cp.status(), None, "never finished");
    assert_eq!(
        cp.original(&buffer_path)
            .unwrap()
            .unwrap()
            .buffer
            .as_deref(),
        Some("unsaved buffer\n")
    );
    let report = cp.restore(false).unwrap();
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(fs::read(&path).unwrap(), b"before\r\n");
}

#[test]
fn latest_list_and_errors() {
    let f = fixture();
    assert!(f.store.latest().unwrap().is_none());
    assert!(f.store.list().unwrap().is_empty());
    let mut first = f.store.begin("first", "goal one").unwrap();
    first.finish("gave up").unwrap();
    f.store.begin("second", "goal two").unwrap();
    assert_eq!(f.store.latest().unwrap().unwrap().task_id(), "second");
    // Undo's default: the latest task that touched a file, not one that
    // only answered.
    assert!(f.store.latest_that_touched().unwrap().is_none());
    let mut second = f.store.open("second").unwrap();
    second.record(&f.root.join("src/lib.rs"), None).unwrap();
    f.store.begin("third", "a question").unwrap();
    assert_eq!(f.store.latest().unwrap().unwrap().task_id(), "third");
    assert_eq!(
        f.store.latest_that_touched().unwrap().unwrap().task_id(),
        "second"
    );
    let list = f.store.list().unwrap();
    let ids: Vec<_> = list.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(ids, ["third", "second", "first"]);
    assert_eq!(list[2].status.as_deref(), Some("gave up"));
    assert_eq!(list[2].goal, "goal one");
    assert!(list[2].ended.is_some() && list[1].ended.is_none());

    assert!(f.store.begin("second", "again").is_err(), "ids are unique");
    assert!(f.store.open("missing").is_err());
    for bad in ["../escape", "a/b", "", ".hidden"] {
        assert!(f.store.begin(bad, "g").is_err(), "{bad}");
    }
    let mut cp = f.store.open("second").unwrap();
    assert!(cp.record(Path::new("relative.txt"), None).is_err());
    assert!(cp.record_result(&f.root.join("never.txt"), b"").is_err());
    // A corrupt manifest hides only its own task.
    fs::write(f.store.dir().join("first/manifest.json"), "{").unwrap();
    assert!(f.store.open("first").is_err());
    assert_eq!(f.store.list().unwrap().len(), 2);
}

/// One test for everything that reads the environment: tests run in
/// parallel threads, and these variables are process-wide.
#[test]
fn cache_dir_and_stores_follow_the_environment() {
    crate::isolated::alone!(cache_dir_and_stores_follow_the_environment);
    std::env::set_var("FETTLE_CACHE_DIR", "/tmp/fettle-test-cache");
    assert_eq!(
        fettle::agent::checkpoint::cache_dir(),
        PathBuf::from("/tmp/fettle-test-cache")
    );
    std::env::remove_var("FETTLE_CACHE_DIR");
    std::env::set_var("XDG_CACHE_HOME", "/tmp/xdg");
    assert_eq!(
        fettle::agent::checkpoint::cache_dir(),
        PathBuf::from("/tmp/xdg/fettle")
    );
    std::env::set_var("XDG_CACHE_HOME", "relative");
    std::env::set_var("HOME", "/home/u");
    assert_eq!(
        fettle::agent::checkpoint::cache_dir(),
        PathBuf::from("/home/u/.cache/fettle")
    );

    let cache = tempfile::tempdir().unwrap();
    std::env::set_var("FETTLE_CACHE_DIR", cache.path());
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let sa = CheckpointStore::for_workspace(a.path()).unwrap();
    let sb = CheckpointStore::for_workspace(b.path()).unwrap();
    assert_ne!(sa.dir(), sb.dir());
    assert_eq!(
        sa.dir(),
        CheckpointStore::for_workspace(a.path()).unwrap().dir()
    );
    assert_eq!(sa.dir().parent().unwrap(), cache.path().join("tasks"));
    sa.begin("t", "g").unwrap();
    assert_eq!(
        sa.latest().unwrap().unwrap().root(),
        fs::canonicalize(a.path()).unwrap()
    );
    assert!(sb.latest().unwrap().is_none());
}

#[cfg(unix)]
#[test]
fn tree_state_returns_to_a_snapshot() {
    let f = fixture();
    let a = f.root.join("a.sh");
    let b = f.root.join("src/b.rs");
    let c = f.root.join("new/dir/c.rs");
    fs::write(&a, "a1\r\n").unwrap();
    set_mode(&a, 0o755);
    fs::write(&b, "b1\n").unwrap();
    let best = TreeState::capture([&a, &b, &c]).unwrap();
    assert_eq!(best.get(&c), Some(None));
    assert_eq!(best.get(&a), Some(Some(&b"a1\r\n"[..])));
    // File times come from the kernel's coarse clock: a file created within
    // the same tick as the capture counts as older and is kept (the safe
    // side). An attempt takes far longer than a tick; so does this wait.
    std::thread::sleep(std::time::Duration::from_millis(50));

    // A worse attempt: a rewritten without its mode, b unchanged, c created.
    fs::remove_file(&a).unwrap();
    fs::write(&a, "a2\n").unwrap();
    set_mode(&a, 0o644);
    write_atomic(&c, b"c2\n", None).unwrap();

    let changed = best.apply().unwrap();
    assert_eq!(changed, vec![a.clone(), c.clone()]);
    assert_eq!(fs::read(&a).unwrap(), b"a1\r\n");
    assert_eq!(file_mode(&a).unwrap(), Some(0o755));
    assert_eq!(fs::read(&b).unwrap(), b"b1\n");
    assert!(!c.exists() && !f.root.join("new").exists());
    assert!(
        best.apply().unwrap().is_empty(),
        "applying twice changes nothing"
    );
}

#[test]
fn prune_keeps_the_most_recent_and_unfinished_tasks() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let store = fettle::agent::checkpoint::CheckpointStore::with_dir(cache.path(), ws.path());
    for i in 0..5 {
        let mut task = store.begin(&format!("t{i}"), "goal").unwrap();
        if i != 1 {
            task.finish("success").unwrap();
        }
    }
    // Keep 2: t4, t3; t1 never finished (a crash) so it stays too.
    assert_eq!(store.prune(2).unwrap(), 2);
    let mut left: Vec<String> = store
        .list()
        .unwrap()
        .into_iter()
        .map(|t| t.task_id)
        .collect();
    left.sort();
    assert_eq!(left, ["t1", "t3", "t4"]);
}

/// Writes like the agent does since directories are recorded: the missing
/// parents first, then the file.
fn agent_write_new(cp: &mut fettle::agent::checkpoint::Checkpoint, root: &Path, path: &Path) {
    let mut missing: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|d| *d != root && !d.exists())
        .map(Path::to_path_buf)
        .collect();
    missing.reverse();
    cp.record(path, None).unwrap();
    cp.record_dirs(&missing).unwrap();
    write_atomic(path, b"x\n", None).unwrap();
    cp.record_result(path, b"x\n").unwrap();
}

#[test]
fn created_directories_are_recorded_and_removed_deepest_first() {
    let f = fixture();
    let a = f.root.join("pkg/sub/mod.py");
    let b = f.root.join("pkg/other/deep/x.py");
    let mut cp = f.store.begin("t1", "goal").unwrap();
    agent_write_new(&mut cp, &f.root, &a);
    agent_write_new(&mut cp, &f.root, &b);
    let pkg = f.root.join("pkg");
    assert_eq!(
        cp.created_dirs(),
        [
            pkg.clone(),
            pkg.join("sub"),
            pkg.join("other"),
            pkg.join("other/deep")
        ]
    );
    // Durable: a re-opened checkpoint (after a crash) knows them too.
    let cp = f.store.open("t1").unwrap();
    let report = cp.restore(false).unwrap();
    assert_eq!(report.removed, vec![a, b]);
    assert!(!pkg.exists(), "no empty pkg/ left");
    assert_eq!(report.removed_dirs.len(), 4);
    assert_eq!(report.removed_dirs.last(), Some(&pkg), "parents last");
    assert!(report.kept_dirs.is_empty());
}

#[test]
fn a_created_directory_holding_user_files_is_kept_and_reported() {
    let f = fixture();
    let made = f.root.join("gen/sub/out.txt");
    let mut cp = f.store.begin("t1", "goal").unwrap();
    agent_write_new(&mut cp, &f.root, &made);
    fs::write(f.root.join("gen/user.txt"), "mine").unwrap();
    let report = cp.restore(false).unwrap();
    assert!(!made.exists());
    assert_eq!(report.removed_dirs, vec![f.root.join("gen/sub")]);
    assert_eq!(report.kept_dirs.len(), 1, "{report:?}");
    assert_eq!(report.kept_dirs[0].0, f.root.join("gen"));
    assert!(report.kept_dirs[0].1.contains("not empty"), "{report:?}");
    assert_eq!(
        fs::read_to_string(f.root.join("gen/user.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn directories_outside_the_workspace_are_never_recorded() {
    let f = fixture();
    let mut cp = f.store.begin("t1", "goal").unwrap();
    let outside = f.root.parent().unwrap().join("elsewhere");
    assert!(cp.record_dirs(std::slice::from_ref(&outside)).is_err());
    assert!(cp.record_dirs(std::slice::from_ref(&f.root)).is_err());
    assert!(cp.record_dirs(&[PathBuf::from("relative")]).is_err());
    assert!(cp.created_dirs().is_empty());
}

#[test]
fn a_file_a_command_changed_is_restored_from_its_recorded_original() {
    let f = fixture();
    let data = f.root.join("data.json");
    let made = f.root.join("out.txt");
    // The task began before its command wrote them (undo never removes a
    // file older than the task).
    let mut cp = f.store.begin("t1", "goal").unwrap();
    fs::write(&data, "{\"v\": 2}\n").unwrap();
    fs::write(&made, "made\n").unwrap();
    // A command already changed them: the originals come from elsewhere.
    cp.record_prior(&data, Some((b"{\"v\": 1}\n", 0o640)))
        .unwrap();
    cp.record_result(&data, b"{\"v\": 2}\n").unwrap();
    cp.record_prior(&made, None).unwrap();
    cp.record_result(&made, b"made\n").unwrap();
    let report = cp.restore(false).unwrap();
    assert_eq!(report.restored, vec![data.clone()]);
    assert_eq!(report.removed, vec![made.clone()]);
    assert_eq!(fs::read(&data).unwrap(), b"{\"v\": 1}\n");
    assert_eq!(file_mode(&data).unwrap(), Some(0o640));
    assert!(!made.exists());
}

#[test]
fn a_manifest_without_directories_still_loads_and_restores() {
    let f = fixture();
    let nested = f.root.join("old/style.txt");
    let mut cp = f.store.begin("t1", "goal").unwrap();
    agent_write(&mut cp, &nested, b"x\n");
    drop(cp);
    // As written by a version that did not record directories.
    let manifest = f.store.dir().join("t1/manifest.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&fs::read(&manifest).unwrap()).unwrap();
    assert!(json.get("dirs").is_none(), "no field when there are none");
    json.as_object_mut().unwrap().remove("dirs");
    fs::write(&manifest, serde_json::to_vec(&json).unwrap()).unwrap();
    let cp = f.store.open("t1").unwrap();
    assert!(cp.created_dirs().is_empty());
    cp.restore(false).unwrap();
    // The old way (nearest existing ancestor) still removes `old/`.
    assert!(!f.root.join("old").exists());
}
