use super::*;
use std::fs;
use std::os::unix::fs::symlink;

fn both() -> Vec<Resolver> {
    let mut out = vec![Resolver::Walk];
    let probe = tempfile::tempdir().unwrap();
    if Confined::open_root(probe.path()).unwrap().resolver() == Resolver::Openat2 {
        out.push(Resolver::Openat2);
    }
    out
}

fn refusal(err: &io::Error) -> Refusal {
    Refusal::of(err)
        .cloned()
        .unwrap_or_else(|| panic!("not a refusal: {err:?}"))
}

#[test]
fn reads_writes_and_removes_inside() {
    for resolver in both() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confined::open_root_with(dir.path(), resolver).unwrap();
        assert_eq!(c.read("a/b/c.txt").unwrap(), None);
        c.write_atomic("a/b/c.txt", b"x", None).unwrap();
        assert_eq!(fs::read(dir.path().join("a/b/c.txt")).unwrap(), b"x");
        assert_eq!(c.read("a/b/c.txt").unwrap().unwrap(), b"x");
        let abs = dir.path().join("a/b/c.txt");
        assert_eq!(c.read(&abs).unwrap().unwrap(), b"x");
        fs::set_permissions(&abs, fs::Permissions::from_mode(0o755)).unwrap();
        c.write_atomic(&abs, b"y", None).unwrap();
        assert_eq!(
            c.metadata(&abs).unwrap().permissions().mode() & 0o7777,
            0o755
        );
        c.write_atomic(&abs, b"z", Some(0o600)).unwrap();
        assert_eq!(
            fs::metadata(&abs).unwrap().permissions().mode() & 0o7777,
            0o600
        );
        // No temporary files left.
        let names: Vec<_> = fs::read_dir(dir.path().join("a/b")).unwrap().collect();
        assert_eq!(names.len(), 1, "{resolver:?}");
        c.remove("a/b/c.txt").unwrap();
        assert_eq!(
            c.remove("a/b/c.txt").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        c.remove_dir("a/b").unwrap();
        c.create_dir_all("p/q").unwrap();
        assert!(dir.path().join("p/q").is_dir());
        assert_eq!(
            refusal(&c.read("p").unwrap_err()),
            Refusal::IsDirectory { path: "p".into() }
        );
    }
}

#[test]
fn symlinks_on_the_way_are_refused() {
    for resolver in both() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("x.txt"), "outside").unwrap();
        symlink(outside.path(), dir.path().join("d")).unwrap();
        fs::create_dir(dir.path().join("real")).unwrap();
        fs::write(dir.path().join("real/x.txt"), "inside").unwrap();
        symlink("real", dir.path().join("inner")).unwrap();
        symlink("real/x.txt", dir.path().join("file-link")).unwrap();
        let c = Confined::open_root_with(dir.path(), resolver).unwrap();
        for path in ["d/x.txt", "inner/x.txt", "file-link"] {
            let err = c.read(path).unwrap_err();
            assert!(
                matches!(refusal(&err), Refusal::Symlink { .. }),
                "{resolver:?} {path}: {err}"
            );
        }
        for path in ["d/x.txt", "d/new/y.txt", "file-link"] {
            let err = c.write_atomic(path, b"boom", None).unwrap_err();
            assert!(
                matches!(refusal(&err), Refusal::Symlink { .. }),
                "{resolver:?} {path}: {err}"
            );
        }
        assert!(c.remove("d/x.txt").is_err());
        assert!(c.create_dir_all("d/sub").is_err());
        assert_eq!(
            fs::read_to_string(outside.path().join("x.txt")).unwrap(),
            "outside"
        );
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
        assert_eq!(
            fs::read_to_string(dir.path().join("real/x.txt")).unwrap(),
            "inside"
        );
        // The link itself is looked at, not followed.
        assert!(c.metadata("file-link").unwrap().file_type().is_symlink());
    }
}

#[test]
fn outside_and_dotdot_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let c = Confined::open_root(dir.path()).unwrap();
    for path in [
        other.path().join("x"),
        PathBuf::from("../x"),
        PathBuf::from("a/../../x"),
    ] {
        let err = c.write_atomic(&path, b"x", None).unwrap_err();
        assert!(matches!(refusal(&err), Refusal::Outside { .. }), "{err}");
    }
    assert!(c.write_atomic("", b"x", None).is_err());
}

#[test]
fn hard_links_are_refused_unless_allowed() {
    for resolver in both() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "outside").unwrap();
        // Same filesystem: both temp dirs are under the same parent.
        fs::hard_link(outside.path().join("secret"), dir.path().join("h.txt")).unwrap();
        let c = Confined::open_root_with(dir.path(), resolver).unwrap();
        let err = c.read("h.txt").unwrap_err();
        assert_eq!(
            refusal(&err),
            Refusal::HardLink {
                path: "h.txt".into(),
                links: 2
            }
        );
        assert!(err.to_string().contains("agent.allow_hardlinks"), "{err}");
        let err = c.write_atomic("h.txt", b"new", None).unwrap_err();
        assert!(matches!(refusal(&err), Refusal::HardLink { .. }));
        let c = c.allow_hardlinks(true);
        assert_eq!(c.read("h.txt").unwrap().unwrap(), b"outside");
        c.write_atomic("h.txt", b"new", None).unwrap();
        // The write replaced the name; the other link keeps its bytes.
        assert_eq!(
            fs::read_to_string(outside.path().join("secret")).unwrap(),
            "outside"
        );
    }
}

#[test]
fn fifos_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = sys::cstring(dir.path().join("pipe").as_os_str()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let c = Confined::open_root(dir.path()).unwrap();
    let err = c.read("pipe").unwrap_err();
    assert!(matches!(refusal(&err), Refusal::NotRegular { .. }), "{err}");
}
