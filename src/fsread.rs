//! Reading files Fettle did not create: configuration, checkers' configs,
//! indexed sources, documents asked for by URI.
//!
//! A cloned repository is hostile. Its `fettle.toml` may be a FIFO (a plain
//! `open` blocks forever), a symlink to `/dev/zero` (a plain read never ends
//! and eats the machine's memory), `/dev/stdin`, a socket, or a 10 GB file.
//! Every such read goes through here: the path is stat'ed (following
//! symlinks) and refused unless it is a regular file, then opened with
//! `O_NONBLOCK` (so a FIFO swapped in meanwhile cannot block the open) and
//! `O_NOCTTY`, the opened descriptor is `fstat`'ed again (what is read is what
//! was checked), and at most `max_bytes + 1` bytes are read.
use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub mod ignore_files;

/// Cap for configuration files (`fettle.toml`, the user config, trust
/// store, checkers' configs such as `package.json` or `go.mod`): real ones
/// are a few KiB.
pub const CONFIG_MAX_BYTES: u64 = 1 << 20;

/// What a path turned out to be, when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
    Directory,
    Other,
}

impl FileKind {
    fn of(meta: &Metadata) -> Option<Self> {
        let t = meta.file_type();
        if t.is_file() {
            None
        } else if t.is_fifo() {
            Some(Self::Fifo)
        } else if t.is_char_device() {
            Some(Self::CharDevice)
        } else if t.is_block_device() {
            Some(Self::BlockDevice)
        } else if t.is_socket() {
            Some(Self::Socket)
        } else if t.is_dir() {
            Some(Self::Directory)
        } else {
            Some(Self::Other)
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::Fifo => "a FIFO (a pipe)",
            Self::CharDevice => "a character device",
            Self::BlockDevice => "a block device",
            Self::Socket => "a socket",
            Self::Directory => "a directory",
            Self::Other => "not a regular file",
        }
    }
}

/// Why a file was not read. Every message names the file.
#[derive(Debug)]
pub enum ReadError {
    /// The path (or a symlink's target) does not exist.
    NotFound { path: PathBuf },
    /// Not a regular file. `target` is where symlinks led, when elsewhere.
    NotRegular {
        path: PathBuf,
        kind: FileKind,
        target: Option<PathBuf>,
    },
    /// Larger than the cap; `size` is what was known (at least `cap + 1`).
    TooLarge { path: PathBuf, size: u64, cap: u64 },
    /// Valid bytes but not UTF-8 (only from [`read_regular_to_string`]).
    NotUtf8 { path: PathBuf },
    /// Any other I/O error (permission denied, EIO, ...).
    Io { path: PathBuf, source: io::Error },
}

impl ReadError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    pub fn path(&self) -> &Path {
        match self {
            Self::NotFound { path }
            | Self::NotRegular { path, .. }
            | Self::TooLarge { path, .. }
            | Self::NotUtf8 { path }
            | Self::Io { path, .. } => path,
        }
    }

    /// The message without the leading file name, for callers that already
    /// print the path themselves (`ConfigError { path, message }`).
    pub fn reason(&self) -> String {
        match self {
            Self::NotFound { .. } => "does not exist".to_string(),
            Self::NotRegular { kind, target, .. } => {
                let via = match target {
                    Some(t) => format!(" ({})", t.display()),
                    None => String::new(),
                };
                format!(
                    "is {}{via}, not a regular file: refused (Fettle reads only regular files; \
                     replace or remove it)",
                    kind.describe()
                )
            }
            Self::TooLarge { size, cap, .. } => format!(
                "is too large ({} bytes, the limit is {cap} bytes): refused (shrink it or \
                 remove it)",
                size
            ),
            Self::NotUtf8 { .. } => "is not valid UTF-8".to_string(),
            Self::Io { source, .. } => format!("cannot read: {source}"),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path().display(), self.reason())
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io_error(path: &Path, err: io::Error) -> ReadError {
    if err.kind() == io::ErrorKind::NotFound {
        ReadError::NotFound {
            path: path.to_path_buf(),
        }
    } else {
        ReadError::Io {
            path: path.to_path_buf(),
            source: err,
        }
    }
}

fn not_regular(path: &Path, kind: FileKind) -> ReadError {
    // Name where symlinks led ("/dev/zero"), so the message says what the
    // file really is; best effort, only when it differs from `path`.
    let target = std::fs::canonicalize(path)
        .ok()
        .filter(|t| t.as_path() != path);
    ReadError::NotRegular {
        path: path.to_path_buf(),
        kind,
        target,
    }
}

/// Opens `path` for reading if (and only if) it is a regular file.
///
/// The returned metadata is the opened descriptor's (`fstat`). Reading from
/// the file is up to the caller; prefer [`read_regular`].
pub fn open_regular(path: &Path) -> Result<(File, Metadata), ReadError> {
    // stat first so a device is never even opened (opening some devices has
    // side effects); the fstat below closes the race with a swap.
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
    if let Some(kind) = FileKind::of(&meta) {
        return Err(not_regular(path, kind));
    }
    // std sets O_CLOEXEC itself. O_NONBLOCK: a FIFO put in place after the
    // stat opens at once instead of waiting for a writer; it changes nothing
    // for a regular file's reads.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            // A socket cannot be opened at all (ENXIO): say what it is.
            match std::fs::metadata(path).ok().as_ref().and_then(FileKind::of) {
                Some(kind) => not_regular(path, kind),
                None => io_error(path, e),
            }
        })?;
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    if let Some(kind) = FileKind::of(&meta) {
        return Err(not_regular(path, kind));
    }
    Ok((file, meta))
}

/// Reads a regular file of at most `max_bytes` bytes.
pub fn read_regular(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let (file, meta) = open_regular(path)?;
    let too_large = |size| ReadError::TooLarge {
        path: path.to_path_buf(),
        size,
        cap: max_bytes,
    };
    if meta.len() > max_bytes {
        return Err(too_large(meta.len()));
    }
    // `meta.len() <= max_bytes` here, so the capacity is bounded by the cap.
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    // One byte past the cap notices a file that grew since the fstat.
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_to_string(path: &Path, max_bytes: u64) -> Result<String, ReadError> {
    let bytes = read_regular(path, max_bytes)?;
    String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8 {
        path: path.to_path_buf(),
    })
}

/// [`read_regular_to_string`] with `Ok(None)` for a missing file: the shape
/// optional configuration files want.
pub fn read_optional_to_string(path: &Path, max_bytes: u64) -> Result<Option<String>, ReadError> {
    match read_regular_to_string(path, max_bytes) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether `path` is (after symlinks) something other than a regular file
/// that exists: a check for paths that other code (a library) will open.
pub fn non_regular_kind(path: &Path) -> Option<FileKind> {
    std::fs::metadata(path).ok().as_ref().and_then(FileKind::of)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;

    fn mkfifo(path: &Path) {
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    #[test]
    fn reads_a_regular_file_and_a_symlink_to_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.toml");
        std::fs::write(&file, "x = 1\n").unwrap();
        let link = dir.path().join("link.toml");
        symlink(&file, &link).unwrap();
        assert_eq!(read_regular(&file, 100).unwrap(), b"x = 1\n");
        assert_eq!(read_regular_to_string(&link, 100).unwrap(), "x = 1\n");
        // Exactly at the cap is fine.
        assert_eq!(read_regular(&file, 6).unwrap().len(), 6);
    }

    #[test]
    fn missing_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_regular(&dir.path().join("nope"), 100).unwrap_err();
        assert!(err.is_not_found(), "{err}");
        assert_eq!(
            read_optional_to_string(&dir.path().join("nope"), 100).unwrap(),
            None
        );
        // A dangling symlink is missing too.
        let link = dir.path().join("dangling");
        symlink(dir.path().join("gone"), &link).unwrap();
        assert!(read_regular(&link, 100).unwrap_err().is_not_found());
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fettle.toml");
        mkfifo(&fifo);
        let err = read_regular(&fifo, 100).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::NotRegular {
                    kind: FileKind::Fifo,
                    ..
                }
            ),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains("fettle.toml") && msg.contains("FIFO"), "{msg}");
    }

    #[test]
    fn dev_zero_symlink_is_refused_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("z.py");
        symlink("/dev/zero", &link).unwrap();
        let err = read_regular(&link, 100).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("z.py") && msg.contains("character device") && msg.contains("/dev/zero"),
            "{msg}"
        );
        let err = read_regular(Path::new("/dev/null"), 100).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::NotRegular {
                    kind: FileKind::CharDevice,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn socket_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let err = read_regular(&path, 100).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::NotRegular {
                    kind: FileKind::Socket,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("socket"), "{err}");
    }

    #[test]
    fn directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_regular(dir.path(), 100).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::NotRegular {
                    kind: FileKind::Directory,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn over_cap_is_refused_with_size_and_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.toml");
        let file = File::create(&path).unwrap();
        // Sparse: 100 MB without writing them.
        file.set_len(100_000_000).unwrap();
        let err = read_regular(&path, CONFIG_MAX_BYTES).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("big.toml") && msg.contains("100000000") && msg.contains("1048576"),
            "{msg}"
        );
        std::fs::write(&path, "12345").unwrap();
        assert!(matches!(
            read_regular(&path, 4).unwrap_err(),
            ReadError::TooLarge { .. }
        ));
    }

    #[test]
    fn non_utf8_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin");
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_regular_to_string(&path, 100).unwrap_err(),
            ReadError::NotUtf8 { .. }
        ));
    }
}
