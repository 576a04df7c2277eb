//! Running a shell command for the agent: its own process group, a scrubbed
//! environment, resource limits, a timeout and cancellation that kill the
//! whole group, and output shaped for a model in bounded memory.
//!
//! The group never outlives [`run`]: it is killed on timeout, on
//! cancellation, shortly after the main process exits (background children
//! included), and when the future is dropped. With a [`SandboxPolicy`]
//! (every command Fettle runs for a task) the command runs through
//! `fettle sandbox-exec`, which also kills what left the group (`setsid`,
//! double forks) and dies with Fettle: it holds the read end of a
//! "lifeline" pipe whose write end only this function holds, so it sees
//! EOF when Fettle is gone, however it died.
//!
//! [`SandboxPolicy`]: crate::agent::sandbox::SandboxPolicy

use std::ffi::OsString;
use std::os::fd::AsRawFd as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt as _;
use tokio::process::Command;

use super::output::{HeadTail, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, NO_OUTPUT};
use tokio_util::sync::CancellationToken;

/// How long to keep reading after the main process exited, for output still
/// in flight from children; a background child holding the pipe open is
/// killed after this.
const EXIT_GRACE: Duration = Duration::from_millis(300);

/// How long the sandbox runner gets to kill what a command left behind
/// after its lifeline closed, before its process group is SIGKILLed.
const RUNNER_GRACE: Duration = Duration::from_millis(1000);

/// Resource limits applied to the command (and inherited by its children).
/// A value of 0 leaves that limit as inherited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_AS`: address space per process.
    pub memory_bytes: u64,
    /// `RLIMIT_NPROC`: processes of the user (a fork bomb stops here).
    pub processes: u64,
    /// `RLIMIT_FSIZE`: largest file a process may write.
    pub file_size_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 8 << 30,
            processes: 4096,
            file_size_bytes: 1 << 30,
        }
    }
}

impl Limits {
    /// The limits `[agent]` sets for tests, commands and checkers.
    pub fn for_agent(config: &crate::config::AgentConfig) -> Self {
        Self {
            memory_bytes: config.memory_limit_mb.saturating_mul(1024 * 1024),
            ..Self::default()
        }
    }
}

/// `text` as one `sh` word (single-quoted).
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[derive(Clone, Debug)]
pub struct CommandSpec {
    /// Run by `sh -c`.
    pub command: String,
    pub cwd: PathBuf,
    pub timeout: Duration,
    pub max_output_bytes: usize,
    pub max_output_lines: usize,
    /// Variables passed through even though their name looks secret.
    pub env_allow: Vec<String>,
    pub limits: Limits,
    /// Run through `fettle sandbox-exec` under this policy (`agent.sandbox`);
    /// `None`: a plain `sh -c` in its own process group.
    pub sandbox: Option<crate::agent::sandbox::SandboxPolicy>,
}

impl CommandSpec {
    /// A spec with the default budget, limits and a 300 s timeout.
    pub fn new(command: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            command: command.into(),
            cwd: cwd.into(),
            timeout: Duration::from_secs(300),
            max_output_bytes: DEFAULT_MAX_BYTES,
            max_output_lines: DEFAULT_MAX_LINES,
            env_allow: Vec::new(),
            limits: Limits::default(),
            sandbox: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandOutcome {
    /// `None` when the main process was killed by a signal.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
    /// stdout and stderr interleaved in the order written (one pipe), head
    /// and tail kept.
    pub output: String,
    /// Everything the command wrote, including what was elided.
    pub total_output_bytes: usize,
    pub elapsed: Duration,
    /// The spec's timeout, for [`describe`](Self::describe).
    pub timeout: Duration,
}

impl CommandOutcome {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.cancelled
    }

    /// How it ended, in words for the model, then the output.
    pub fn describe(&self) -> String {
        let status = if self.cancelled {
            "cancelled".to_string()
        } else if self.timed_out {
            format!(
                "killed after the {} timeout (the whole process group)",
                seconds(self.timeout)
            )
        } else if let Some(code) = self.exit_code {
            format!("exit code {code}")
        } else if let Some(sig) = self.signal {
            format!("killed by signal {sig}{}", signal_name(sig))
        } else {
            "ended without an exit status".to_string()
        };
        if self.output.is_empty() {
            if self.success() {
                return NO_OUTPUT.to_string();
            }
            return format!("{status}, no output");
        }
        let mut out = status;
        out.push('\n');
        out.push_str(&self.output);
        out
    }
}

fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGSEGV => " (SIGSEGV, a crash)",
        libc::SIGABRT => " (SIGABRT, an abort)",
        libc::SIGXFSZ => " (SIGXFSZ: file size limit exceeded)",
        libc::SIGXCPU => " (SIGXCPU)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGPIPE => " (SIGPIPE)",
        _ => "",
    }
}

/// The current environment minus variables whose name looks secret (KEY,
/// TOKEN, SECRET, PASSWORD, CREDENTIAL, any case) or that Fettle holds as
/// secret (API keys), unless named in `allow`; allowed variables that were
/// moved out of Fettle's environment at start-up come from the store.
pub fn scrubbed_env(allow: &[String]) -> Vec<(OsString, OsString)> {
    use crate::secrets::store;
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, _)| {
            let text = name.to_string_lossy();
            allow.iter().any(|a| a.as_str() == text)
                || !(store::looks_secret_name(&text) || store::holds(name))
        })
        .collect();
    for (name, value) in store::allowed(allow) {
        if !env.iter().any(|(n, _)| *n == name) {
            env.push((name, value));
        }
    }
    env
}

/// Kills the process group when dropped: covers the future being dropped
/// mid-run (the caller gave up) as well as every normal exit.
struct GroupKiller {
    pgid: libc::pid_t,
    /// The write end of the sandbox runner's lifeline; closing it makes the
    /// runner kill everything the command started, then exit.
    lifeline: Option<std::os::fd::OwnedFd>,
    runner: bool,
}

impl GroupKiller {
    /// Asks the runner to stop the command (it kills what escaped the
    /// group too); without a runner, kills the group now.
    fn stop(&mut self) {
        if self.runner {
            self.lifeline = None;
        } else {
            self.kill();
        }
    }

    fn kill(&self) {
        // SAFETY: killpg has no memory-safety preconditions; the pgid is the
        // group we created (`process_group(0)` makes it the child's pid),
        // and ESRCH for a group already gone is ignored.
        unsafe {
            libc::killpg(self.pgid, libc::SIGKILL);
        }
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if self.runner && self.lifeline.take().is_some() {
            // Dropped mid-run: the runner is cleaning up after the closed
            // lifeline; the group goes a moment later, should it hang.
            let pgid = self.pgid;
            let _ = std::thread::Builder::new()
                .name("fettle-kill".into())
                .spawn(move || {
                    std::thread::sleep(RUNNER_GRACE);
                    GroupKiller {
                        pgid,
                        lifeline: None,
                        runner: false,
                    }
                    .kill();
                });
            return;
        }
        self.kill();
    }
}

/// Runs `spec.command` with `sh -c` and waits for it, its timeout, or
/// `cancel`. Errors only when the command cannot be started (or waited on);
/// a failing command is an `Ok` outcome.
pub async fn run(
    spec: &CommandSpec,
    cancel: &CancellationToken,
) -> std::io::Result<CommandOutcome> {
    let start = Instant::now();
    // One pipe for stdout and stderr, like `2>&1`: the kernel keeps the
    // order of writes, which reading two pipes could not.
    let (sender, mut reader) = tokio::net::unix::pipe::pipe()?;
    let write_end = sender.into_blocking_fd()?;
    let write_end_2 = write_end.try_clone()?;

    let mut lifeline = None;
    let mut cmd = match &spec.sandbox {
        // `fettle sandbox-exec` sets up the sandbox, then runs `sh -c`.
        Some(policy) => {
            let (read, write) = crate::agent::sandbox::lifeline_pipe()?;
            let mut cmd = Command::new(&policy.launcher);
            cmd.args(policy.wrap(&spec.command, Some(read.as_raw_fd())));
            lifeline = Some((read, write));
            cmd
        }
        None => {
            let mut cmd = Command::new("sh");
            cmd.arg("-c").arg(&spec.command);
            cmd
        }
    };
    let runner = lifeline.is_some();
    cmd.current_dir(&spec.cwd)
        .env_clear()
        .envs(scrubbed_env(&spec.env_allow))
        .stdin(Stdio::null())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::from(write_end_2))
        .process_group(0)
        // The runner must get the chance to clean up (see GroupKiller).
        .kill_on_drop(!runner);
    let limits = spec.limits;
    let lifeline_fd = lifeline.as_ref().map(|(read, _)| read.as_raw_fd());
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: it calls getrlimit/setrlimit and
    // fcntl (plain syscalls) and reads errno, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = lifeline_fd {
                // Inherited by the runner only: it is close-on-exec in
                // Fettle, so no other child keeps it.
                clear_cloexec(fd)?;
            }
            apply_limits(&limits)
        });
    }
    let spawned = cmd.spawn();
    // Close our copies of the write end, or the pipe never reaches EOF,
    // and our copy of the lifeline's read end, so that the runner alone
    // holds it.
    drop(cmd);
    let lifeline = lifeline.map(|(read, write)| {
        drop(read);
        write
    });
    let mut child = spawned?;
    let Some(pid) = child.id() else {
        return Err(std::io::Error::other(
            "the command exited before it started",
        ));
    };
    let mut killer = GroupKiller {
        pgid: pid as libc::pid_t,
        lifeline,
        runner,
    };
    // After a timeout or cancellation with a runner: when to stop waiting
    // for its cleanup and kill the group.
    let mut kill_at = None;

    let mut collected = HeadTail::new(spec.max_output_bytes);
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let mut status = None;
    let mut grace_until = None;
    let mut eof = false;
    let mut timed_out = false;
    let mut cancelled = false;

    while !(eof && status.is_some()) {
        tokio::select! {
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) => eof = true,
                Ok(n) => collected.push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!("reading command output: {e}");
                    eof = true;
                }
            },
            waited = child.wait(), if status.is_none() => {
                status = Some(waited?);
                grace_until = Some(tokio::time::Instant::now() + EXIT_GRACE);
            },
            () = tokio::time::sleep_until(deadline), if status.is_none() && !timed_out && !cancelled => {
                timed_out = true;
                killer.stop();
                kill_at = Some(tokio::time::Instant::now() + RUNNER_GRACE);
            },
            () = cancel.cancelled(), if status.is_none() && !timed_out && !cancelled => {
                cancelled = true;
                killer.stop();
                kill_at = Some(tokio::time::Instant::now() + RUNNER_GRACE);
            },
            () = sleep_until_opt(kill_at), if status.is_none() && kill_at.is_some() => {
                kill_at = None;
                killer.kill();
            },
            () = sleep_until_opt(grace_until), if grace_until.is_some() => {
                // The main process is gone; whoever still holds the pipe is
                // a background child. It dies with the group below.
                break;
            },
        }
    }
    killer.lifeline = None;
    killer.runner = false;
    killer.kill();
    drop(killer);

    let status = status.ok_or_else(|| std::io::Error::other("no exit status"))?;
    Ok(CommandOutcome {
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
        cancelled,
        total_output_bytes: collected.total_bytes(),
        output: collected.finish(spec.max_output_bytes, spec.max_output_lines),
        elapsed: start.elapsed(),
        timeout: spec.timeout,
    })
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Runs in the child between fork and exec: async-signal-safe calls only.
fn clear_cloexec(fd: libc::c_int) -> std::io::Result<()> {
    // SAFETY: fcntl on an fd number is async-signal-safe; errors are reported.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs in the child between fork and exec: async-signal-safe calls only.
fn apply_limits(limits: &Limits) -> std::io::Result<()> {
    for (resource, value) in [
        (libc::RLIMIT_AS, limits.memory_bytes),
        (libc::RLIMIT_NPROC, limits.processes),
        (libc::RLIMIT_FSIZE, limits.file_size_bytes),
    ] {
        if value != 0 {
            set_limit(resource, value)?;
        }
    }
    // A crash must not leave a core file in the workspace for the agent
    // to trip over.
    set_limit(libc::RLIMIT_CORE, 0)
}

#[cfg(target_os = "linux")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_os = "linux"))]
type Resource = libc::c_int;

fn set_limit(resource: Resource, value: u64) -> std::io::Result<()> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit are async-signal-safe syscalls writing
    // only to the struct we pass.
    unsafe {
        if libc::getrlimit(resource, &mut current) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Never above the hard limit (that would fail); lowering the hard
        // limit too keeps the command from raising it back.
        let value = (value as libc::rlim_t).min(current.rlim_max);
        let wanted = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        if libc::setrlimit(resource, &wanted) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
