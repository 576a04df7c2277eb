//! Model-given paths: containment, `..`, symlinks, protected directories.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::fs;
use std::path::Path;

use fettle::agent::paths::{PathError, WorkspacePaths};

struct Fixture {
    _outside: tempfile::TempDir,
    outside: std::path::PathBuf,
    _root: tempfile::TempDir,
    paths: WorkspacePaths,
}

/// A workspace with `src/lib.rs`, `.git/config`, and a sibling directory
/// outside it holding `secret.txt`.
fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join("src")).unwrap();
    fs::write(root.path().join("src/lib.rs"), "").unwrap();
    fs::create_dir_all(root.path().join(".git")).unwrap();
    fs::write(root.path().join(".git/config"), "").unwrap();
    fs::write(outside.path().join("secret.txt"), "").unwrap();
    Fixture {
        paths: WorkspacePaths::new(root.path()).unwrap(),
        outside: fs::canonicalize(outside.path()).unwrap(),
        _outside: outside,
        _root: root,
    }
}

#[test]
fn plain_relative_paths_resolve_inside() {
    let f = fixture();
    let root = f.paths.root().to_path_buf();
    assert_eq!(
        fs::canonicalize(&root).unwrap(),
        root,
        "the root is canonical"
    );
    assert_eq!(
        f.paths.resolve("src/lib.rs").unwrap(),
        root.join("src/lib.rs")
    );
    assert_eq!(
        f.paths.resolve("./src/../src/lib.rs").unwrap(),
        root.join("src/lib.rs")
    );
    assert_eq!(f.paths.resolve(".").unwrap(), root);
    assert_eq!(f.paths.relative(&root.join("src/lib.rs")), "src/lib.rs");
    assert_eq!(f.paths.relative(&root), ".");
}

#[test]
fn absolute_paths_inside_are_accepted_outside_refused() {
    let f = fixture();
    let inside = f.paths.root().join("src/lib.rs");
    assert_eq!(f.paths.resolve(inside.to_str().unwrap()).unwrap(), inside);
    let outside = f.outside.join("secret.txt");
    let err = f.paths.resolve(outside.to_str().unwrap()).unwrap_err();
    assert!(
        matches!(
            err,
            PathError::Outside {
                via_symlink: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "\"{}\" is outside the workspace ({}); paths are relative to the workspace root",
            outside.display(),
            f.paths.root().display()
        )
    );
    let err = f.paths.resolve("/etc/passwd").unwrap_err();
    assert!(matches!(err, PathError::Outside { .. }), "{err:?}");
}

#[test]
fn dotdot_out_of_the_root_is_refused() {
    let f = fixture();
    for given in [
        "../x",
        "src/../../x",
        "..",
        "src/../../../../../../etc/passwd",
    ] {
        let err = f.paths.resolve(given).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "\"{given}\" is outside the workspace ({}); paths are relative to the workspace root",
                f.paths.root().display()
            )
        );
    }
}

#[test]
fn dotdot_after_a_missing_directory_is_refused() {
    let f = fixture();
    let err = f.paths.resolve("new/../../x").unwrap_err();
    assert_eq!(
        err,
        PathError::DotDotInNewPath {
            given: "new/../../x".to_owned()
        }
    );
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(f.paths.resolve("new/..").is_err());
}

#[test]
fn nonexistent_nested_new_file_inside_is_fine() {
    let f = fixture();
    let want = f.paths.root().join("a/b/c/new.py");
    assert_eq!(f.paths.resolve("a/b/c/new.py").unwrap(), want);
    assert_eq!(f.paths.resolve_for_write("a/b/c/new.py").unwrap(), want);
    assert_eq!(f.paths.relative(&want), "a/b/c/new.py");
}

#[cfg(unix)]
#[test]
fn symlinks_pointing_out_are_refused() {
    use std::os::unix::fs::symlink;
    let f = fixture();
    let root = f.paths.root();
    symlink(&f.outside, root.join("out_dir")).unwrap();
    symlink(f.outside.join("secret.txt"), root.join("out_file")).unwrap();
    symlink(f.outside.join("nowhere.txt"), root.join("dangling")).unwrap();
    symlink(root.join("src"), root.join("src_link")).unwrap();

    for given in ["out_dir/secret.txt", "out_dir/new.txt", "out_file"] {
        let err = f.paths.resolve(given).unwrap_err();
        assert!(
            matches!(
                err,
                PathError::Outside {
                    via_symlink: true,
                    ..
                }
            ),
            "{given}: {err:?}"
        );
        assert!(err.to_string().contains("symlink"), "{err}");
        assert!(f.paths.resolve_for_write(given).is_err());
    }
    let err = f.paths.resolve("dangling").unwrap_err();
    assert!(matches!(err, PathError::BrokenSymlink { .. }), "{err:?}");
    // A symlink that stays inside resolves to its target.
    assert_eq!(
        f.paths.resolve("src_link/lib.rs").unwrap(),
        root.join("src/lib.rs")
    );
}

#[test]
fn git_directory_is_readable_but_not_writable() {
    let f = fixture();
    let root = f.paths.root();
    assert_eq!(
        f.paths.resolve(".git/config").unwrap(),
        root.join(".git/config")
    );
    for given in [
        ".git/config",
        ".git",
        ".git/hooks/new",
        "sub/.git/config",
        ".GIT/config",
    ] {
        let err = f.paths.resolve_for_write(given).unwrap_err();
        assert!(
            matches!(err, PathError::Protected { .. }),
            "{given}: {err:?}"
        );
        assert!(err.to_string().contains(".git/"), "{err}");
    }
    // Names that only start with .git are ordinary files.
    assert!(f.paths.resolve_for_write(".gitignore").is_ok());
    assert!(f
        .paths
        .resolve_for_write(".github/workflows/ci.yml")
        .is_ok());
}

#[test]
fn directories_and_empty_paths_are_refused_for_writes() {
    let f = fixture();
    assert!(matches!(
        f.paths.resolve_for_write("src").unwrap_err(),
        PathError::IsDirectory { .. }
    ));
    assert_eq!(f.paths.resolve("").unwrap_err(), PathError::Empty);
    assert_eq!(f.paths.resolve("  ").unwrap_err(), PathError::Empty);
    assert!(WorkspacePaths::new(Path::new("/definitely/not/here")).is_err());
}
