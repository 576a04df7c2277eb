//! File writes that cannot leave a half-written file, and line endings.
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, fsync, rename over the target, fsync of the directory. A crash
/// leaves either the old file or the new one, never a mix.
///
/// The file keeps its current permissions, unless `mode` is given (then it
/// gets exactly `mode`); a new file gets the usual `0o666 & !umask`. Missing
/// parent directories are created. A symlink is written through (its target
/// is replaced), not replaced by a regular file.
///
/// It blocks on disk syncs: on the server's async worker it hands the
/// worker on first ([`crate::runtime::blocking`]).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    crate::runtime::blocking(|| write_atomic_here(path, bytes, mode))
}

fn write_atomic_here(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    let target = follow_symlink(path)?;
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir)?;
    let mode = match mode {
        Some(mode) => Some(mode),
        None => file_mode(&target)?,
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (tmp_path, mut tmp) = create_temp(&dir, &name)?;
    let written = (|| {
        tmp.write_all(bytes)?;
        if let Some(mode) = mode {
            set_mode(&tmp, mode)?;
        }
        tmp.sync_all()?;
        drop(tmp);
        fs::rename(&tmp_path, &target)
    })();
    if let Err(err) = written {
        // Best effort: the temporary file is ours and useless now.
        let _ = fs::remove_file(&tmp_path);
        return Err(err);
    }
    sync_dir(&dir);
    Ok(())
}

/// The permission bits of `path` (`0o7777`), or `None` if it does not exist
/// (or on platforms without Unix modes).
pub fn file_mode(path: &Path) -> io::Result<Option<u32>> {
    match fs::metadata(path) {
        Ok(meta) => Ok(mode_of(&meta)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// Makes a directory entry (a rename or an unlink in it) durable. Best
/// effort: some filesystems refuse to fsync a directory, and the data itself
/// is already on disk.
pub fn sync_dir(dir: &Path) {
    crate::runtime::blocking(|| {
        if let Ok(handle) = File::open(dir) {
            let _ = handle.sync_all();
        }
    });
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineEnding {
    Lf,
    CrLf,
}

impl LineEnding {
    pub fn as_str(self) -> &'static str {
        match self {
            LineEnding::Lf => "\n",
            LineEnding::CrLf => "\r\n",
        }
    }
}

/// The majority line ending of `text`; `Lf` on a tie or with no newline.
pub fn line_ending(text: &str) -> LineEnding {
    let newlines = text.bytes().filter(|&b| b == b'\n').count();
    let crlf = text.matches("\r\n").count();
    if crlf > newlines - crlf {
        LineEnding::CrLf
    } else {
        LineEnding::Lf
    }
}

/// `\r\n` → `\n`. A lone `\r` is kept: it is content, not a line ending.
pub fn to_lf(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// `\n` → `ending`, for LF-only text (as produced by [`to_lf`]).
pub fn from_lf(text: &str, ending: LineEnding) -> String {
    match ending {
        LineEnding::Lf => text.to_owned(),
        LineEnding::CrLf => text.replace('\n', "\r\n"),
    }
}

fn follow_symlink(path: &Path) -> io::Result<PathBuf> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => fs::canonicalize(path),
        _ => Ok(path.to_path_buf()),
    }
}

/// A new file next to the target, named so it is recognisable if a crash
/// leaves it behind.
fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    let mut last_err = None;
    for _ in 0..16 {
        let tmp = dir.join(format!(
            ".{name}.fettle-tmp-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last_err = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("could not create a temporary file")))
}

#[cfg(unix)]
fn mode_of(meta: &fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    Some(meta.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn mode_of(_meta: &fs::Metadata) -> Option<u32> {
    None
}

#[cfg(unix)]
fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // `set_permissions` is not subject to the umask: the mode is exact.
    file.set_permissions(fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_file: &File, _mode: u32) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_line_ending() {
        assert_eq!(line_ending(""), LineEnding::Lf);
        assert_eq!(line_ending("a\r\nb\r\nc\n"), LineEnding::CrLf);
        assert_eq!(line_ending("a\r\nb\nc\n"), LineEnding::Lf);
        assert_eq!(line_ending("a\r\nb\n"), LineEnding::Lf);
        assert_eq!(to_lf("a\r\nb\rc\n"), "a\nb\rc\n");
        assert_eq!(from_lf("a\nb\n", LineEnding::CrLf), "a\r\nb\r\n");
    }

    #[cfg(unix)]
    #[test]
    fn keeps_mode_and_replaces_content() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.sh");
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        write_atomic(&path, b"new", None).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(file_mode(&path).unwrap(), Some(0o755));
        write_atomic(&path, b"newer", Some(0o600)).unwrap();
        assert_eq!(file_mode(&path).unwrap(), Some(0o600));
        let nested = dir.path().join("a/b/c.txt");
        write_atomic(&nested, b"x", None).unwrap();
        assert_eq!(fs::read(&nested).unwrap(), b"x");
        // Only the targets are left: no temporary files.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[cfg(unix)]
    #[test]
    fn writes_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, b"new", None).unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&real).unwrap(), b"new");
    }
}
