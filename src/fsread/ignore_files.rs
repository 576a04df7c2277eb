//! The `ignore` crate opens `.gitignore`, `.ignore` and `.git/info/exclude`
//! itself (a plain `File::open` and a line reader) as a walk descends. A
//! FIFO there blocks the walk forever and `/dev/zero` is one endless line,
//! so a directory whose ignore files are not small regular files is never
//! entered: checked here before the crate gets to read them.
use std::path::{Path, PathBuf};

use ignore::{DirEntry, WalkBuilder};

use super::{non_regular_kind, read_regular_to_string, ReadError};

/// Largest ignore file read. Real ones are a few KiB; the crate turns every
/// line into a glob, so this bounds the memory one file can take.
pub const IGNORE_FILE_MAX_BYTES: u64 = 4 << 20;

/// Where a `.git` file (a worktree) may point; only its first line counts.
const DOT_GIT_FILE_MAX_BYTES: u64 = 64 << 10;

/// The ignore files the crate reads in `dir` (with `.rgignore`, in case a
/// caller adds it as a custom name).
fn candidates(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [".gitignore", ".ignore", ".rgignore"]
        .iter()
        .map(|name| dir.join(name))
        .collect();
    let dot_git = dir.join(".git");
    match std::fs::symlink_metadata(&dot_git) {
        Ok(meta) if meta.is_file() => {
            // A worktree: `gitdir: <path>`, and that directory's
            // `commondir` names where `info/exclude` is (ignore's rules).
            files.push(dot_git.clone());
            if let Some(git_dir) = first_line(&dot_git)
                .as_deref()
                .and_then(|l| l.strip_prefix("gitdir: "))
                .map(PathBuf::from)
            {
                let commondir = git_dir.join("commondir");
                files.push(commondir.clone());
                if let Some(line) = first_line(&commondir) {
                    let common = if line.starts_with('.') {
                        git_dir.join(line)
                    } else {
                        PathBuf::from(line)
                    };
                    files.push(common.join("info/exclude"));
                }
            }
        }
        _ => files.push(dot_git.join("info/exclude")),
    }
    files
}

fn first_line(path: &Path) -> Option<String> {
    let text = read_regular_to_string(path, DOT_GIT_FILE_MAX_BYTES).ok()?;
    text.lines().next().map(str::to_string)
}

/// Why a file the walk would read is refused: not a regular file, or past
/// [`IGNORE_FILE_MAX_BYTES`]. `None`: absent or fine.
fn refusal(path: &Path) -> Option<ReadError> {
    if non_regular_kind(path).is_some() {
        // `open_regular` stats again and builds the message naming it.
        return super::open_regular(path).err();
    }
    let meta = std::fs::metadata(path).ok()?;
    (meta.len() > IGNORE_FILE_MAX_BYTES).then(|| ReadError::TooLarge {
        path: path.to_path_buf(),
        size: meta.len(),
        cap: IGNORE_FILE_MAX_BYTES,
    })
}

/// The first ignore file in `dir` the `ignore` crate must not read, with
/// why (the message names the file).
pub fn hostile_ignore_file(dir: &Path) -> Option<ReadError> {
    candidates(dir).iter().find_map(|path| refusal(path))
}

/// For a walk's `filter_entry`: false for a directory whose ignore files
/// must not be read (logged, naming the file), true otherwise.
pub fn entry_is_safe(entry: &DirEntry) -> bool {
    if !entry.file_type().is_some_and(|t| t.is_dir()) {
        return true;
    }
    match hostile_ignore_file(entry.path()) {
        None => true,
        Some(err) => {
            tracing::warn!("skipping the directory {}: {err}", entry.path().display());
            false
        }
    }
}

/// Makes a walk of `root` safe from hostile ignore files: directories whose
/// ignore files are FIFOs, devices, sockets or huge are not entered, and the
/// ignore files of `root`'s parents are not read when one of them is such a
/// file. Sets the builder's `filter_entry` (a caller with its own filter
/// calls [`entry_is_safe`] in it instead).
///
/// `Err` when `root` itself holds such a file: the walk must not run.
pub fn guard_walk(builder: &mut WalkBuilder, root: &Path) -> Result<(), ReadError> {
    guard_parents(builder, root)?;
    builder.filter_entry(entry_is_safe);
    Ok(())
}

/// [`guard_walk`] without setting `filter_entry`.
pub fn guard_parents(builder: &mut WalkBuilder, root: &Path) -> Result<(), ReadError> {
    if let Some(err) = hostile_ignore_file(root) {
        return Err(err);
    }
    let abs = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    if let Some(err) = abs.ancestors().skip(1).find_map(hostile_ignore_file) {
        tracing::warn!(
            "not reading the ignore files above {}: {err}",
            root.display()
        );
        builder.parents(false);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    fn walk(root: &Path) -> Result<Vec<PathBuf>, ReadError> {
        let mut b = WalkBuilder::new(root);
        b.require_git(false);
        guard_walk(&mut b, root)?;
        let mut files: Vec<PathBuf> = b
            .build()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .map(|e| e.path().strip_prefix(root).unwrap().to_path_buf())
            .collect();
        files.sort();
        Ok(files)
    }

    #[test]
    fn a_directory_with_a_fifo_gitignore_is_skipped_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.py"), "x = 1\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b.py"), "y = 1\n").unwrap();
        mkfifo(&dir.path().join("sub/.gitignore"));
        std::fs::create_dir(dir.path().join("zero")).unwrap();
        std::fs::write(dir.path().join("zero/c.py"), "z = 1\n").unwrap();
        symlink("/dev/zero", dir.path().join("zero/.ignore")).unwrap();
        assert_eq!(walk(dir.path()).unwrap(), vec![PathBuf::from("a.py")]);
    }

    #[test]
    fn a_root_with_a_hostile_exclude_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git/info")).unwrap();
        mkfifo(&dir.path().join(".git/info/exclude"));
        let err = walk(dir.path()).unwrap_err();
        assert!(err.to_string().contains("exclude"), "{err}");
        assert!(err.to_string().contains("FIFO"), "{err}");
    }

    #[test]
    fn a_worktree_commondir_fifo_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join("gitdir");
        std::fs::create_dir(&git).unwrap();
        mkfifo(&git.join("commondir"));
        std::fs::write(
            dir.path().join(".git"),
            format!("gitdir: {}\n", git.display()),
        )
        .unwrap();
        assert!(hostile_ignore_file(dir.path()).is_some());
    }

    #[test]
    fn a_huge_gitignore_is_refused_and_a_normal_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".gitignore"), "*.log\n").unwrap();
        std::fs::write(dir.path().join("a.log"), "").unwrap();
        std::fs::write(dir.path().join("a.py"), "").unwrap();
        assert_eq!(walk(dir.path()).unwrap(), vec![PathBuf::from("a.py")]);
        std::fs::File::create(dir.path().join(".ignore"))
            .unwrap()
            .set_len(IGNORE_FILE_MAX_BYTES + 1)
            .unwrap();
        let err = walk(dir.path()).unwrap_err();
        assert!(matches!(err, ReadError::TooLarge { .. }), "{err}");
    }
}
