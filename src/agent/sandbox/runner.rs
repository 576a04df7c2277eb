//! `fettle sandbox-exec`: the process between Fettle and a sandboxed
//! command. Fettle starts it with a scrubbed environment and rlimits; it
//!
//! 1. with namespaces: enters new user (the caller's uid/gid mapped to
//!    themselves), mount, PID and (without network) network namespaces;
//!    mounts the task's private temp dir on `/tmp`, a tmpfs on `/dev/shm`
//!    (and on `/run` without network: the sockets of system daemons), and
//!    the protected paths read-only on themselves; then forks the PID
//!    namespace's init, which mounts a fresh `/proc`, forks the command and
//!    reaps everything. When the command exits, init exits, and the kernel
//!    kills whatever is left in the namespace (setsid daemons, double forks).
//! 2. without namespaces: becomes a child subreaper, forks the command, and
//!    after it exits kills every descendant left (orphans are reparented to
//!    the runner, so none escapes by double-forking).
//!
//! The command itself drops every capability, applies Landlock, and `exec`s.
//! Fettle holds the write end of a "lifeline" pipe; when it closes (Fettle
//! exited, crashed or was SIGKILLed, or gave up on the command), the runner
//! kills everything and exits. (Not PR_SET_PDEATHSIG on the runner: it
//! fires when the Fettle *thread* that spawned it exits, and tokio's
//! threads come and go.) Protected paths that did not exist (or were
//! symlinks) are restored afterwards: a bind mount cannot stop a command
//! creating `fettle.toml`, so a created one is removed once nothing runs.

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::guard::Guards;
use super::rules;
use super::sys;

/// The exit code when the sandbox cannot be set up.
pub const SETUP_FAILED: i32 = 126;

/// What `fettle sandbox-exec` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct RunnerArgs {
    pub namespaces: bool,
    pub landlock: bool,
    /// Paths the command may write beneath (Landlock).
    pub write: Vec<PathBuf>,
    pub network: bool,
    /// The private temp dir (on `/tmp` with namespaces, else `TMPDIR`).
    pub tmp: Option<PathBuf>,
    /// Protected paths: read-only (namespaces) and restored afterwards.
    pub protect: Vec<PathBuf>,
    /// The read end of Fettle's lifeline pipe.
    pub lifeline: Option<i32>,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// Runs the command as described in the module docs; returns the exit code
/// (or re-raises the command's fatal signal).
pub fn main(args: &RunnerArgs) -> i32 {
    let lifeline = args.lifeline.and_then(|fd| {
        // Never handed on to the command.
        sys::set_cloexec(fd, true).ok()?;
        // SAFETY: Fettle passed this fd to us for our exclusive use.
        Some(unsafe { OwnedFd::from_raw_fd(fd) })
    });
    if args.command.is_empty() {
        eprintln!("fettle: sandbox-exec needs a command");
        return 2;
    }
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(err) => {
            eprintln!("fettle: sandbox: cannot read the working directory: {err}");
            return SETUP_FAILED;
        }
    };
    let guards = Guards::record(&args.protect, !args.namespaces);
    let split = (!args.namespaces && args.landlock)
        .then(|| rules::SplitRoots::record(&args.write, &args.protect));
    let outcome = if args.namespaces {
        run_namespaced(args, &cwd, lifeline)
    } else {
        run_plain(args, &cwd, lifeline)
    };
    for note in guards.restore() {
        eprintln!("fettle: {note}");
    }
    let failed = outcome
        .as_ref()
        .is_ok_and(|&status| !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0));
    if let Some(note) = split
        .filter(|_| failed)
        .and_then(|s| s.note_after_failure())
    {
        eprintln!("fettle: {note}");
    }
    match outcome {
        Ok(status) => sys::exit_like(status),
        Err(msg) => {
            eprintln!("fettle: sandbox: {msg}");
            SETUP_FAILED
        }
    }
}

fn run_namespaced(
    args: &RunnerArgs,
    cwd: &Path,
    lifeline: Option<OwnedFd>,
) -> Result<libc::c_int, String> {
    enter_namespaces(args.network).map_err(|e| format!("cannot create namespaces: {e}"))?;
    let tmp = setup_mounts(args, cwd).map_err(|e| format!("cannot set up the mounts: {e}"))?;
    let (status_read, status_write) = sys::pipe().map_err(|e| e.to_string())?;
    // The first child is PID 1 of the new PID namespace.
    let init = sys::fork().map_err(|e| format!("fork: {e}"))?;
    if init == 0 {
        drop(status_read);
        drop(lifeline);
        // Dies with the runner (which is single-threaded here, so the
        // "parent thread" is the runner's only thread).
        let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        init_main(args, cwd, &tmp, status_write);
    }
    drop(status_write);
    wait_with_lifeline(init, lifeline).map_err(|e| format!("waiting for the sandbox: {e}"))?;
    let mut bytes = [0u8; 4];
    let mut file = std::fs::File::from(status_read);
    match file.read_exact(&mut bytes) {
        Ok(()) => Ok(libc::c_int::from_ne_bytes(bytes)),
        // Init died before the command did: killed through the lifeline or
        // by Fettle's process-group kill.
        Err(_) => Ok(libc::SIGKILL),
    }
}

/// PID 1 of the sandbox: mounts `/proc`, runs the command, reaps every
/// process, and exits (killing the namespace) when the command exits.
fn init_main(args: &RunnerArgs, cwd: &Path, tmp: &Path, status_write: OwnedFd) -> ! {
    // A fresh /proc shows only the sandbox's processes. Where the kernel
    // refuses (a /proc with masked paths in some containers), the PID
    // namespace still keeps signals in, and Landlock keeps /proc/<outside
    // pid> closed (it denies ptrace-class access out of the sandbox).
    if let Err(err) = sys::mount(
        Some(Path::new("proc")),
        Path::new("/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    ) {
        eprintln!("fettle: sandbox: /proc not remounted ({err}); outside processes stay listed");
    }
    cap_processes();
    let command = match sys::fork() {
        Ok(0) => {
            drop(status_write);
            exec_command(args, cwd, tmp)
        }
        Ok(pid) => pid,
        Err(err) => {
            eprintln!("fettle: sandbox: fork: {err}");
            sys::exit_now(SETUP_FAILED)
        }
    };
    let status = loop {
        match sys::waitpid(-1, 0) {
            Ok((pid, status)) if pid == command => break status,
            Ok(_) => {}
            Err(_) => break libc::SIGKILL,
        }
    };
    let mut file = std::fs::File::from(status_write);
    let _ = file.write_all(&status.to_ne_bytes());
    // Exiting as PID 1 makes the kernel SIGKILL every process left here.
    sys::exit_now(0)
}

/// The lowest `pid_max` the kernel accepts (`RESERVED_PIDS + 1`).
const MIN_PID_MAX: u64 = 301;

/// Caps the processes of the sandbox's PID namespace at the command's
/// `RLIMIT_NPROC` (at least 300) through the namespace's own `pid_max`
/// (Linux ≥ 6.14): PIDs are 1..pid_max, so no more can exist at once. The
/// rlimit alone does not hold for a root caller (the kernel exempts uid 0
/// even inside a user namespace); this does. Older kernels refuse the
/// write: a root caller is told, others keep the rlimit.
fn cap_processes() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only to `limit`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return;
    }
    let max = limit.rlim_cur.saturating_add(1).max(MIN_PID_MAX);
    if let Err(err) = std::fs::write("/proc/sys/kernel/pid_max", max.to_string()) {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            eprintln!(
                "fettle: sandbox: the process limit does not hold for root on this kernel (pid_max per PID namespace: {err})"
            );
        }
    }
}

fn run_plain(
    args: &RunnerArgs,
    cwd: &Path,
    lifeline: Option<OwnedFd>,
) -> Result<libc::c_int, String> {
    // Orphans of the command are reparented to us, not to init: we can
    // find and kill them.
    sys::prctl(libc::PR_SET_CHILD_SUBREAPER, 1).map_err(|e| format!("subreaper: {e}"))?;
    let command = sys::fork().map_err(|e| format!("fork: {e}"))?;
    if command == 0 {
        drop(lifeline);
        let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        let tmp = args.tmp.clone().unwrap_or_else(std::env::temp_dir);
        exec_command(args, cwd, &tmp);
    }
    let status = wait_with_lifeline(command, lifeline)
        .map_err(|e| format!("waiting for the command: {e}"))?;
    kill_descendants();
    Ok(status)
}

/// SIGKILLs every child (and, as they are reparented to us, every further
/// descendant) until none is left; bounded in time against a fork storm
/// (which RLIMIT_NPROC bounds too).
fn kill_descendants() {
    let me = std::process::id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let children = children_of(me);
        for &child in &children {
            sys::kill(child, libc::SIGKILL);
        }
        loop {
            match sys::waitpid(-1, libc::WNOHANG) {
                Ok((0, _)) => break,
                Ok(_) => {}
                // ECHILD: no child left at all.
                Err(_) => return,
            }
        }
        if children.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Processes whose parent is `parent`, from `/proc/<pid>/stat`.
fn children_of(parent: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|&pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid …`; comm may hold spaces and parens.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
                == Some(parent)
        })
        .collect()
}

/// Waits for `child` to end, SIGKILLing it if the lifeline closes first
/// (Fettle is gone or gave up). No thread: after `unshare(CLONE_NEWPID)`
/// the kernel refuses to create one, so this polls a pidfd and the pipe.
fn wait_with_lifeline(
    child: libc::pid_t,
    lifeline: Option<OwnedFd>,
) -> std::io::Result<libc::c_int> {
    let pidfd = sys::pidfd_open(child).ok();
    let mut lifeline = lifeline;
    loop {
        let mut fds = Vec::with_capacity(2);
        if let Some(fd) = &pidfd {
            fds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if let Some(fd) = &lifeline {
            fds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // Without a pidfd (Linux < 5.3), look at the child every 50 ms.
        let timeout = if pidfd.is_some() { -1 } else { 50 };
        sys::poll(&mut fds, timeout)?;
        let lifeline_ready = lifeline.is_some() && fds.last().is_some_and(|p| p.revents != 0);
        if lifeline_ready && lifeline.as_ref().is_some_and(at_eof) {
            sys::kill(child, libc::SIGKILL);
            lifeline = None;
        }
        match sys::waitpid(child, libc::WNOHANG)? {
            (0, _) => {}
            (_, status) if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) => {
                return Ok(status)
            }
            _ => {}
        }
    }
}

/// Whether the lifeline has reached EOF (Fettle never writes to it).
fn at_eof(fd: &OwnedFd) -> bool {
    let mut byte = [0u8; 1];
    // SAFETY: reads at most one byte into a local buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
    n == 0 || (n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted)
}

/// In the forked command process: dies with its parent, drops capabilities,
/// applies Landlock, and becomes the command.
fn exec_command(args: &RunnerArgs, cwd: &Path, tmp: &Path) -> ! {
    let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    // Re-resolve the working directory through the new mounts: the
    // inherited one still points below them (past the read-only binds).
    if let Err(err) = std::env::set_current_dir(cwd) {
        eprintln!("fettle: sandbox: cannot enter {}: {err}", cwd.display());
        sys::exit_now(SETUP_FAILED);
    }
    if args.namespaces || args.landlock {
        // Root in the namespace (a root caller) must not keep the power to
        // undo the mounts; unconfined (`off`), a root user keeps root.
        sys::drop_capabilities();
    }
    let mut tmp_env = None;
    if args.tmp.is_some() {
        tmp_env = Some(tmp.to_path_buf());
    }
    if args.landlock {
        let mut writable = args.write.clone();
        writable.extend(tmp_env.clone());
        if args.namespaces {
            writable.push(PathBuf::from("/dev/shm"));
        }
        // With namespaces the protected paths are read-only bind mounts;
        // without, Landlock alone keeps them out of the writable set.
        let protect: &[PathBuf] = if args.namespaces { &[] } else { &args.protect };
        if let Err(err) = rules::restrict_self(&writable, protect, args.network) {
            eprintln!("fettle: sandbox: {err}");
            sys::exit_now(SETUP_FAILED);
        }
    }
    let Some((program, rest)) = args.command.split_first() else {
        sys::exit_now(2)
    };
    let mut command = std::process::Command::new(program);
    command.args(rest);
    if let Some(tmp) = &tmp_env {
        command.env("TMPDIR", tmp);
    }
    let err = command.exec();
    eprintln!("fettle: cannot run {}: {err}", program.to_string_lossy());
    sys::exit_now(127)
}

fn enter_namespaces(network: bool) -> std::io::Result<()> {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    if !network {
        // A new network namespace has only a loopback device, down: no
        // network at all, and its own abstract Unix socket namespace.
        flags |= libc::CLONE_NEWNET;
    }
    sys::unshare(flags)?;
    // Unprivileged callers may map only their own ids, and only after
    // giving up setgroups.
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    // Nothing mounted here propagates back to the host.
    sys::mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
}

/// Sets up the mount namespace; returns the command's temp dir (`/tmp`,
/// or the private dir itself when the workspace is `/tmp`).
fn setup_mounts(args: &RunnerArgs, cwd: &Path) -> std::io::Result<PathBuf> {
    let tmp_root = Path::new("/tmp");
    let mut tmp = tmp_root.to_path_buf();
    // A workspace that is /tmp itself cannot be hidden under the private
    // one: then TMPDIR alone points there.
    let workspace_is_tmp = cwd == tmp_root || args.write.iter().any(|w| w == tmp_root);
    if let (true, Some(private)) = (workspace_is_tmp, &args.tmp) {
        tmp = private.clone();
    }
    if let (false, Some(private)) = (workspace_is_tmp, &args.tmp) {
        // Paths the command needs that live under /tmp (a workspace in a
        // temp dir, a cache there) would vanish under the private /tmp:
        // hold them open and bind them back at the same place.
        let mut keep: Vec<PathBuf> = args
            .write
            .iter()
            .chain(std::iter::once(&cwd.to_path_buf()))
            .filter(|p| p.starts_with(tmp_root) && *p != private && p.as_path() != tmp_root)
            .cloned()
            .collect();
        keep.sort();
        keep.dedup();
        let mut kept: Vec<PathBuf> = Vec::new();
        let mut held = Vec::new();
        for path in keep {
            if kept.iter().any(|k| path.starts_with(k)) {
                continue;
            }
            if let Ok(file) = open_path(&path) {
                held.push((path.clone(), file));
                kept.push(path);
            }
        }
        sys::mount(
            Some(private),
            tmp_root,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        )?;
        for (path, file) in held {
            let is_dir = file.metadata().map(|m| m.is_dir()).unwrap_or(true);
            if is_dir {
                std::fs::create_dir_all(&path)?;
            } else {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::File::create(&path)?;
            }
            let source = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
            sys::mount(
                Some(&source),
                &path,
                None,
                libc::MS_BIND | libc::MS_REC,
                None,
            )?;
        }
    }
    let private_tmpfs = |dir: &str, mode: &str| -> std::io::Result<()> {
        let dir = Path::new(dir);
        if dir.is_dir() {
            sys::mount(
                Some(Path::new("tmpfs")),
                dir,
                Some("tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(mode),
            )?;
        }
        Ok(())
    };
    private_tmpfs("/dev/shm", "mode=1777")?;
    if !args.network {
        // The sockets of system daemons (D-Bus, Docker, agents) live here.
        private_tmpfs("/run", "mode=755")?;
    }
    for path in &args.protect {
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        if meta.file_type().is_symlink() {
            // Guarded instead: a bind would protect the link's target, not
            // the link.
            continue;
        }
        read_only_bind(path)?;
    }
    Ok(tmp)
}

fn read_only_bind(path: &Path) -> std::io::Result<()> {
    sys::mount(Some(path), path, None, libc::MS_BIND | libc::MS_REC, None)?;
    let locked = sys::locked_mount_flags(path)?;
    sys::mount(
        None,
        path,
        None,
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | locked,
        None,
    )
}

fn open_path(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
}

/// `fettle sandbox-exec --probe`: tries each namespace step in a child and
/// prints one `name: ok` or `name: error …` line per step; exit 0 when all
/// worked.
pub fn probe() -> i32 {
    let _ = std::io::stdout().flush();
    match sys::fork() {
        Ok(0) => sys::exit_now(probe_child()),
        Ok(pid) => match sys::waitpid(pid, 0) {
            Ok((_, status)) if libc::WIFEXITED(status) => libc::WEXITSTATUS(status),
            _ => 1,
        },
        Err(err) => {
            // The probe's report goes to its own stdout, a pipe Fettle reads
            // (never the LSP stream), in the same form as `probe_child`'s.
            let _ = std::io::stdout().write_all(format!("fork: error {err}\n").as_bytes());
            1
        }
    }
}

fn probe_child() -> i32 {
    let mut out = std::io::stdout();
    let mut step = |name: &str, result: std::io::Result<()>| -> bool {
        let line = match &result {
            Ok(()) => format!("{name}: ok\n"),
            Err(err) => format!("{name}: error {err}\n"),
        };
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
        result.is_ok()
    };
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let user = sys::unshare(libc::CLONE_NEWUSER).and_then(|()| {
        std::fs::write("/proc/self/setgroups", "deny")?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
    });
    if !step("user", user) {
        return 1;
    }
    let mount = sys::unshare(libc::CLONE_NEWNS).and_then(|()| {
        sys::mount(
            None,
            Path::new("/"),
            None,
            libc::MS_REC | libc::MS_PRIVATE,
            None,
        )?;
        sys::mount(
            Some(Path::new("tmpfs")),
            Path::new("/tmp"),
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            None,
        )
    });
    if !step("mount", mount) {
        return 1;
    }
    if !step("net", sys::unshare(libc::CLONE_NEWNET)) {
        return 1;
    }
    if !step("pid", sys::unshare(libc::CLONE_NEWPID)) {
        return 1;
    }
    match sys::fork() {
        Ok(0) => {
            let proc = sys::mount(
                Some(Path::new("proc")),
                Path::new("/proc"),
                Some("proc"),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                None,
            );
            sys::exit_now(if step("proc", proc) { 0 } else { 1 })
        }
        Ok(pid) => match sys::waitpid(pid, 0) {
            Ok((_, status)) if libc::WIFEXITED(status) => libc::WEXITSTATUS(status),
            _ => 1,
        },
        Err(err) => {
            step("proc", Err(err));
            1
        }
    }
}
