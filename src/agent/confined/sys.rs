//! The system calls behind [`super::Confined`], each wrapped once: every
//! `unsafe` block is a single call with owned or borrowed descriptors and
//! NUL-terminated names that outlive it.
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// A path component or relative path as a C string; a NUL byte is refused.
pub fn cstring(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL byte"))
}

/// `fd` from a successful call, or the error (`-1` and `errno`).
fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else
    // owns it, so `OwnedFd` may close it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Retries a call interrupted by a signal.
fn retry<T>(mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match call() {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// `openat(2)`; `O_CLOEXEC` is always added.
pub fn openat(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    retry(|| {
        // SAFETY: `dir` is an open descriptor for the call's duration and
        // `name` is NUL-terminated; the mode is passed as the variadic
        // argument's promoted type.
        owned(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        })
    })
}

/// The kernel's `struct open_how` (linux/openat2.h). Defined here because
/// libc's is `#[non_exhaustive]` and cannot be built without `unsafe`.
#[cfg(target_os = "linux")]
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `openat2(2)` (Linux ≥ 5.6); `O_CLOEXEC` is always added. `EAGAIN` (the
/// kernel could not rule out a race) is retried a few times.
#[cfg(target_os = "linux")]
pub fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: libc::c_int,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let how = OpenHow {
        // Open flags are non-negative bit sets.
        flags: u64::from((flags | libc::O_CLOEXEC).unsigned_abs()),
        mode: u64::from(mode),
        resolve,
    };
    let mut again = 0;
    retry(|| {
        // SAFETY: `how` is a live `struct open_how` of the size passed,
        // `path` is NUL-terminated and `dir` is open for the call.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        let fd = libc::c_int::try_from(ret).unwrap_or(-1);
        match owned(fd) {
            Err(err) if err.raw_os_error() == Some(libc::EAGAIN) && again < 8 => {
                again += 1;
                Err(io::Error::from(io::ErrorKind::Interrupted))
            }
            other => other,
        }
    })
}

pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    retry(|| {
        // SAFETY: `dir` is open for the call and `name` NUL-terminated.
        check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) })
    })
}

/// `unlinkat(2)`: a file, or with `dir_too` an empty directory.
pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, dir_too: bool) -> io::Result<()> {
    let flags = if dir_too { libc::AT_REMOVEDIR } else { 0 };
    retry(|| {
        // SAFETY: `dir` is open for the call and `name` NUL-terminated.
        check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) })
    })
}

/// `renameat(2)` within one directory.
pub fn renameat(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    retry(|| {
        // SAFETY: `dir` is open for the call; both names are NUL-terminated.
        check(unsafe {
            libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr())
        })
    })
}

/// `renameat(2)` from `name` in `dir` to the absolute path `to` (which
/// must not exist: `RENAME_NOREPLACE`).
pub fn rename_out(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    retry(|| {
        // SAFETY: `dir` is open for the call; both names are NUL-terminated;
        // `to` is absolute, so AT_FDCWD is not used to resolve it.
        check(unsafe {
            libc::renameat2(
                dir.as_raw_fd(),
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        })
    })
}
