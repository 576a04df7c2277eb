//! Thin wrappers over the Linux calls the sandbox runner needs (namespaces,
//! mounts, fork/wait, prctl), each turning `-1` into an `io::Error`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

pub fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

fn with_context(err: io::Error, what: impl FnOnce() -> String) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {err}", what()))
}

pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes flags only.
    cvt(unsafe { libc::unshare(flags) }).map(drop)
}

/// `mount(2)`; `None` passes NULL.
pub fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source_c = source.map(cstring).transpose()?;
    let target_c = cstring(target)?;
    let fstype_c = fstype
        .map(|s| CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput)))
        .transpose()?;
    let data_c = data
        .map(|s| CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput)))
        .transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is NULL or a NUL-terminated string that outlives
    // the call.
    let ret = unsafe {
        libc::mount(
            ptr(&source_c),
            target_c.as_ptr(),
            ptr(&fstype_c),
            flags,
            ptr(&data_c).cast(),
        )
    };
    cvt(ret)
        .map(drop)
        .map_err(|e| with_context(e, || format!("mount on {}", target.display())))
}

/// The mount flags a read-only remount of `path`'s mount must keep: in a
/// user namespace the kernel refuses to clear the locked ones.
pub fn locked_mount_flags(path: &Path) -> io::Result<libc::c_ulong> {
    let c = cstring(path)?;
    // SAFETY: statvfs writes only to the zeroed struct we pass.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a valid out pointer.
    cvt(unsafe { libc::statvfs(c.as_ptr(), &mut st) })?;
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    Ok(flags)
}

/// `fork(2)`: `Ok(0)` in the child. Only call it while single-threaded.
pub fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: the runner forks only while it has a single thread, so the
    // child may allocate freely.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid)
    }
}

/// `waitpid`, retried on EINTR: `(pid, status)`, `pid == 0` with WNOHANG
/// when nothing changed.
pub fn waitpid(pid: libc::pid_t, flags: libc::c_int) -> io::Result<(libc::pid_t, libc::c_int)> {
    loop {
        let mut status = 0;
        // SAFETY: writes only to `status`.
        let ret = unsafe { libc::waitpid(pid, &mut status, flags) };
        if ret >= 0 {
            return Ok((ret, status));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

pub fn kill(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: no memory involved; ESRCH for a process already gone is fine.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// `prctl` with one argument.
pub fn prctl(option: libc::c_int, arg: libc::c_ulong) -> io::Result<()> {
    // SAFETY: the options used here (PDEATHSIG, CHILD_SUBREAPER, CAPBSET_DROP,
    // CAP_AMBIENT) take integers only.
    cvt(unsafe {
        libc::prctl(
            option,
            arg,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    })
    .map(drop)
}

/// Drops every capability from the bounding and ambient sets, so the
/// command `exec`s with none even as uid 0 in its user namespace.
pub fn drop_capabilities() {
    let _ = prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
    );
    for cap in 0..64 {
        // EINVAL past the last capability the kernel knows: done.
        if let Err(e) = prctl(libc::PR_CAPBSET_DROP, cap) {
            if e.raw_os_error() == Some(libc::EINVAL) {
                break;
            }
        }
    }
}

pub fn set_cloexec(fd: libc::c_int, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on an fd number; EBADF is reported.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    let flags = if on {
        flags | libc::FD_CLOEXEC
    } else {
        flags & !libc::FD_CLOEXEC
    };
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFD, flags) }).map(drop)
}

/// A pipe whose ends are close-on-exec: `(read, write)`.
pub fn pipe() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd as _;
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both fds are fresh and owned by nobody else.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// Ends the process now without running destructors or atexit handlers
/// (for forked children).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and has no preconditions.
    unsafe { libc::_exit(code) }
}

/// Ends this process the way a child with wait `status` ended: the same
/// exit code, or the same signal (re-raised with its default action).
pub fn exit_like(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        return libc::WEXITSTATUS(status);
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: resetting a handler and raising a signal on ourselves.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
        }
        return 128 + sig;
    }
    1
}

/// A pidfd for `pid` (Linux ≥ 5.3): readable when the process exits.
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd as _;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fd is fresh and ours alone.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// `poll(2)`, retried on EINTR; `timeout_ms` -1 waits forever.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: the slice is valid for its length.
        let ret = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if ret >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}
