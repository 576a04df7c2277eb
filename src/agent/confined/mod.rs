//! Race-free file access inside the workspace: every read, write, rename,
//! removal and directory creation of the agent goes through a directory
//! handle of the workspace root opened once per task, and the kernel
//! confines each lookup atomically.
//!
//! [`WorkspacePaths`](super::paths::WorkspacePaths) is the friendly first
//! check (its messages tell the model what to send instead); it resolves
//! symlinks that stay inside the workspace to the file's real path. This
//! module is the enforcement: it opens that real path relative to the root
//! handle with `openat2(2)` and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS`, so a directory swapped for a symlink between the
//! check and the use (to the outside, or to `.git/` inside) fails the open
//! instead of redirecting it. No symlink is followed here at all: the path
//! was already resolved, and one that appears afterwards is a race.
//!
//! Without `openat2` (Linux < 5.6, or a seccomp filter that refuses it) the
//! same rule is kept by a walk: one `openat(O_NOFOLLOW | O_DIRECTORY)` per
//! component from the root handle, which refuses every symlink. Writes go
//! to a temporary file created with `O_CREAT | O_EXCL | O_NOFOLLOW` in the
//! confined parent directory and renamed within it (`renameat`); missing
//! parents are created one component at a time (`mkdirat`, then a confined
//! open of each).
//!
//! Regular files with more than one hard link are refused (checked with
//! `fstat` on the opened descriptor, so without a race) unless
//! `agent.allow_hardlinks` is set: their other name may be outside the
//! workspace.
mod refusal;
mod sys;

pub use refusal::{check_depth, Refusal, MAX_DEPTH};

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Confinement for `openat2`: beneath the root, and no symlinks at all.
#[cfg(target_os = "linux")]
const RESOLVE: u64 =
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;

/// Flags to look at an entry without opening its contents.
#[cfg(target_os = "linux")]
const LOOK: libc::c_int = libc::O_PATH | libc::O_NOFOLLOW;
#[cfg(not(target_os = "linux"))]
const LOOK: libc::c_int = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;

/// How lookups are confined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolver {
    /// One `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` per lookup.
    Openat2,
    /// One `openat(O_NOFOLLOW)` per component (kernels without `openat2`).
    Walk,
}

/// A handle on the workspace root; cheap to clone (the descriptor is
/// shared). Paths given to its methods are relative to the root, or
/// absolute under it.
#[derive(Clone, Debug)]
pub struct Confined {
    root: Arc<OwnedFd>,
    /// Canonical.
    root_path: PathBuf,
    /// As given (absolute paths may be spelled under either).
    given_root: PathBuf,
    resolver: Resolver,
    allow_hardlinks: bool,
}

impl Confined {
    /// Opens `root` (a directory) once; lookups use `openat2` where the
    /// kernel has it, else the walk.
    pub fn open_root(root: impl AsRef<Path>) -> io::Result<Self> {
        let mut confined = Self::open_root_with(root, Resolver::Walk)?;
        if confined.openat2_works() {
            confined.resolver = Resolver::Openat2;
        } else {
            tracing::info!(
                "openat2 is unavailable: workspace files are opened component by component, \
                 refusing every symlink"
            );
        }
        Ok(confined)
    }

    /// Opens `root` with the given resolver (tests use it to check the walk
    /// on kernels that have `openat2`).
    pub fn open_root_with(root: impl AsRef<Path>, resolver: Resolver) -> io::Result<Self> {
        let given_root = root.as_ref().to_path_buf();
        let root_path = std::fs::canonicalize(&given_root)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(&root_path)?;
        Ok(Self {
            root: Arc::new(OwnedFd::from(file)),
            root_path,
            given_root,
            resolver,
            allow_hardlinks: false,
        })
    }

    /// Whether regular files with several hard links may be read and
    /// written (`agent.allow_hardlinks`).
    pub fn allow_hardlinks(mut self, allow: bool) -> Self {
        self.allow_hardlinks = allow;
        self
    }

    pub fn resolver(&self) -> Resolver {
        self.resolver
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    /// The bytes of a regular file; `Ok(None)` when it does not exist.
    pub fn read(&self, path: impl AsRef<Path>) -> io::Result<Option<Vec<u8>>> {
        Ok(self.read_with_metadata(path)?.map(|(bytes, _)| bytes))
    }

    /// [`read`](Self::read), with the metadata of the file that was read
    /// (from the same descriptor: its mode, for instance).
    pub fn read_with_metadata(
        &self,
        path: impl AsRef<Path>,
    ) -> io::Result<Option<(Vec<u8>, Metadata)>> {
        let parts = self.parts(path.as_ref())?;
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let fd = match self.open_in_root(&parts, flags) {
            Ok(fd) => fd,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        let mut file = File::from(fd);
        let meta = file.metadata()?;
        self.check_file(&meta, &parts)?;
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.read_to_end(&mut bytes)?;
        Ok(Some((bytes, meta)))
    }

    /// The entry's metadata, not following a symlink (none is followed on
    /// the way either).
    pub fn metadata(&self, path: impl AsRef<Path>) -> io::Result<Metadata> {
        let parts = self.parts(path.as_ref())?;
        File::from(self.open_in_root(&parts, LOOK)?).metadata()
    }

    /// Replaces (or creates) a regular file atomically: a temporary file in
    /// the confined parent, fsync, `renameat` over the target, fsync of the
    /// directory. The file keeps its permissions unless `mode` is given; a
    /// new one gets `0o666 & !umask`. Missing parents are created. A
    /// symlink in the target's place is refused, not written through.
    ///
    /// It blocks on disk syncs: on the server's async worker it hands the
    /// worker on first ([`crate::runtime::blocking`]).
    pub fn write_atomic(
        &self,
        path: impl AsRef<Path>,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> io::Result<()> {
        crate::runtime::blocking(|| self.write_atomic_here(path.as_ref(), bytes, mode))
    }

    fn write_atomic_here(&self, path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
        let parts = self.parts(path)?;
        check_depth(&join_path(&parts))?;
        let (name, dirs) = split_last(&parts, path)?;
        let parent = self.open_dir(dirs, true)?;
        let cname = sys::cstring(name)?;
        let existing = match self.look(parent.as_fd(), &cname) {
            Ok(meta) => Some(meta),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(self.explain(err, &parts)),
        };
        if let Some(meta) = &existing {
            if meta.file_type().is_symlink() {
                return Err(Refusal::Symlink {
                    path: display(&parts),
                }
                .into_io());
            }
            self.check_file(meta, &parts)?;
        }
        let mode = mode.or_else(|| existing.map(|m| m.permissions().mode() & 0o7777));
        let (tmp_name, mut tmp) = create_temp(parent.as_fd(), name)?;
        let written = (|| {
            tmp.write_all(bytes)?;
            if let Some(mode) = mode {
                // fchmod: exact, not subject to the umask.
                tmp.set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            tmp.sync_all()?;
            drop(tmp);
            sys::renameat(parent.as_fd(), &tmp_name, &cname)
        })();
        if let Err(err) = written {
            // Best effort: the temporary file is ours and useless now.
            let _ = sys::unlinkat(parent.as_fd(), &tmp_name, false);
            return Err(err);
        }
        sync(parent);
        Ok(())
    }

    /// Deletes a file (not a directory); a symlink is removed itself.
    /// `NotFound` when it does not exist.
    pub fn remove(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.unlink(path.as_ref(), false)
    }

    /// Deletes an empty directory.
    pub fn remove_dir(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.unlink(path.as_ref(), true)
    }

    /// Moves the file at `path` out of the workspace to `dest` (an
    /// absolute path that must not exist: undo's trash), renaming it when
    /// both are on one filesystem, else copying its bytes (a regular file
    /// only) and then unlinking it. Nothing is deleted before its copy is
    /// durable.
    pub fn move_out(&self, path: impl AsRef<Path>, dest: &Path) -> io::Result<()> {
        let path = path.as_ref();
        let parts = self.parts(path)?;
        let (name, dirs) = split_last(&parts, path)?;
        let parent = self.open_dir(dirs, false)?;
        let cname = sys::cstring(name)?;
        let cdest = sys::cstring(dest.as_os_str())?;
        match sys::rename_out(parent.as_fd(), &cname, &cdest) {
            Ok(()) => {
                sync(parent);
                return Ok(());
            }
            Err(err) if err.raw_os_error() == Some(libc::EXDEV) => {}
            Err(err) => return Err(self.explain(err, &parts)),
        }
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW;
        let mut from = File::from(sys::openat(parent.as_fd(), &cname, flags, 0)?);
        let meta = from.metadata()?;
        if !meta.is_file() {
            return Err(Refusal::NotRegular {
                path: display(&parts),
            }
            .into_io());
        }
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dest)?;
        io::copy(&mut from, &mut to)?;
        to.sync_all()?;
        sys::unlinkat(parent.as_fd(), &cname, false)?;
        sync(parent);
        Ok(())
    }

    /// Creates the directory and its missing parents, one confined
    /// component at a time.
    pub fn create_dir_all(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let parts = self.parts(path.as_ref())?;
        // A directory counts as a file inside it would.
        check_depth(&join_path(&parts).join("x"))?;
        self.open_dir(&parts, true).map(drop)
    }

    /// `path` relative to the root, with `/` separators.
    pub fn relative(&self, path: &Path) -> io::Result<String> {
        Ok(display(&self.parts(path)?))
    }

    fn unlink(&self, path: &Path, dir: bool) -> io::Result<()> {
        let parts = self.parts(path)?;
        let (name, dirs) = split_last(&parts, path)?;
        let parent = self.open_dir(dirs, false)?;
        sys::unlinkat(parent.as_fd(), &sys::cstring(name)?, dir)?;
        sync(parent);
        Ok(())
    }

    /// The components of `path` below the root; `..`, and absolute paths
    /// elsewhere, are refused.
    fn parts<'p>(&self, path: &'p Path) -> io::Result<Vec<&'p OsStr>> {
        let inside = if path.is_absolute() {
            path.strip_prefix(&self.root_path)
                .or_else(|_| path.strip_prefix(&self.given_root))
                .map_err(|_| {
                    Refusal::Outside {
                        path: path.display().to_string(),
                    }
                    .into_io()
                })?
        } else {
            path
        };
        let mut parts = Vec::new();
        for c in inside.components() {
            match c {
                Component::Normal(name) => parts.push(name),
                Component::CurDir => {}
                _ => {
                    return Err(Refusal::Outside {
                        path: path.display().to_string(),
                    }
                    .into_io())
                }
            }
        }
        Ok(parts)
    }

    /// Opens `parts` (a file, or with `create` missing directories made).
    fn open_in_root(&self, parts: &[&OsStr], flags: libc::c_int) -> io::Result<OwnedFd> {
        let Some((name, dirs)) = parts.split_last() else {
            return Err(Refusal::IsDirectory {
                path: ".".to_owned(),
            }
            .into_io());
        };
        let opened = match self.resolver {
            #[cfg(target_os = "linux")]
            Resolver::Openat2 => {
                let joined = sys::cstring(&join(parts))?;
                sys::openat2(self.root.as_fd(), &joined, flags, 0, RESOLVE)
            }
            _ => {
                let parent = self.open_dir(dirs, false)?;
                let cname = sys::cstring(name)?;
                sys::openat(parent.as_fd(), &cname, flags | libc::O_NOFOLLOW, 0)
                    .map_err(|err| self.explain_at(err, parent.as_fd(), &cname))
            }
        };
        opened.map_err(|err| self.explain(err, parts))
    }

    /// Opens the directory `parts` (the root when empty) for `*at` calls.
    fn open_dir(&self, parts: &[&OsStr], create: bool) -> io::Result<OwnedFd> {
        if parts.is_empty() {
            return self.root.try_clone();
        }
        #[cfg(target_os = "linux")]
        if self.resolver == Resolver::Openat2 {
            let joined = sys::cstring(&join(parts))?;
            let flags = libc::O_RDONLY | libc::O_DIRECTORY;
            match sys::openat2(self.root.as_fd(), &joined, flags, 0, RESOLVE) {
                Ok(fd) => return Ok(fd),
                Err(err) if create && err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(self.explain(err, parts)),
            }
        }
        let mut dir = self.root.try_clone()?;
        for name in parts {
            let cname = sys::cstring(name)?;
            dir = match self.step(dir.as_fd(), &cname) {
                Err(err) if create && err.kind() == io::ErrorKind::NotFound => {
                    match sys::mkdirat(dir.as_fd(), &cname, 0o777) {
                        Ok(()) => {}
                        // Made meanwhile by someone else: the open checks it.
                        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(err) => return Err(err),
                    }
                    self.step(dir.as_fd(), &cname)
                }
                other => other,
            }
            .map_err(|err| self.explain(err, parts))?;
        }
        Ok(dir)
    }

    /// Opens one directory component below `dir`, never through a symlink.
    fn step(&self, dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> io::Result<OwnedFd> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY;
        #[cfg(target_os = "linux")]
        if self.resolver == Resolver::Openat2 {
            return sys::openat2(dir, name, flags, 0, RESOLVE);
        }
        sys::openat(dir, name, flags | libc::O_NOFOLLOW, 0)
            .map_err(|e| self.explain_at(e, dir, name))
    }

    /// The entry `name` in `dir`, not followed.
    fn look(&self, dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> io::Result<Metadata> {
        File::from(sys::openat(dir, name, LOOK, 0)?).metadata()
    }

    /// `O_NOFOLLOW | O_DIRECTORY` on a symlink fails with `ENOTDIR` (or
    /// `ELOOP`): tell a symlink from a plain file so it is reported as one.
    fn explain_at(&self, err: io::Error, dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> io::Error {
        if err.raw_os_error() == Some(libc::ENOTDIR)
            && self
                .look(dir, name)
                .is_ok_and(|m| m.file_type().is_symlink())
        {
            return io::Error::from_raw_os_error(libc::ELOOP);
        }
        err
    }

    /// `ELOOP` (a symlink where none may be) and `EXDEV` (a lookup that
    /// would leave the root) become a [`Refusal`].
    fn explain(&self, err: io::Error, parts: &[&OsStr]) -> io::Error {
        if Refusal::of(&err).is_some() {
            return err;
        }
        match err.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::EXDEV) => Refusal::Symlink {
                path: display(parts),
            }
            .into_io(),
            _ => err,
        }
    }

    /// Regular, single-linked (unless allowed).
    fn check_file(&self, meta: &Metadata, parts: &[&OsStr]) -> io::Result<()> {
        let path = display(parts);
        let kind = meta.file_type();
        if kind.is_dir() {
            return Err(Refusal::IsDirectory { path }.into_io());
        }
        if !kind.is_file() {
            return Err(Refusal::NotRegular { path }.into_io());
        }
        if meta.nlink() > 1 && !self.allow_hardlinks {
            return Err(Refusal::HardLink {
                path,
                links: meta.nlink(),
            }
            .into_io());
        }
        Ok(())
    }

    /// Whether `openat2` with our flags works here (not `ENOSYS`, not
    /// refused by a seccomp filter or an older kernel's flag check).
    #[cfg(target_os = "linux")]
    fn openat2_works(&self) -> bool {
        let dot = sys::cstring(OsStr::new(".")).ok();
        dot.is_some_and(|dot| {
            sys::openat2(
                self.root.as_fd(),
                &dot,
                libc::O_PATH | libc::O_DIRECTORY,
                0,
                RESOLVE,
            )
            .is_ok()
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn openat2_works(&self) -> bool {
        false
    }
}

fn split_last<'a, 'p>(
    parts: &'a [&'p OsStr],
    path: &Path,
) -> io::Result<(&'p OsStr, &'a [&'p OsStr])> {
    match parts.split_last() {
        Some((name, dirs)) => Ok((name, dirs)),
        None => Err(Refusal::IsDirectory {
            path: path.display().to_string(),
        }
        .into_io()),
    }
}

#[cfg(target_os = "linux")]
fn join(parts: &[&OsStr]) -> std::ffi::OsString {
    let mut out = std::ffi::OsString::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push("/");
        }
        out.push(part);
    }
    out
}

fn join_path(parts: &[&OsStr]) -> PathBuf {
    parts.iter().collect()
}

fn display(parts: &[&OsStr]) -> String {
    if parts.is_empty() {
        return ".".to_owned();
    }
    parts
        .iter()
        .map(|p| p.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A new file in `dir` next to the target, named so it is recognisable if
/// a crash leaves it behind; `O_EXCL | O_NOFOLLOW`: never an existing entry.
fn create_temp(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<(std::ffi::CString, File)> {
    // Keep the temporary name under NAME_MAX (255) for long targets.
    let short: String = name.to_string_lossy().chars().take(100).collect();
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let mut last_err = None;
    for _ in 0..16 {
        let tmp = format!(
            ".{short}.fettle-tmp-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        );
        let tmp = sys::cstring(OsStr::new(&tmp))?;
        match sys::openat(dir, &tmp, flags, 0o666) {
            Ok(fd) => return Ok((tmp, File::from(fd))),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last_err = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("could not create a temporary file")))
}

/// Makes a directory entry (a rename or an unlink in it) durable. Best
/// effort: some filesystems refuse to fsync a directory.
fn sync(dir: OwnedFd) {
    let _ = File::from(dir).sync_all();
}

#[cfg(test)]
mod tests;
