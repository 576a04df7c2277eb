//! The sandbox for tests and commands (`agent.sandbox`, default `auto`).
//!
//! Every command runs through `fettle sandbox-exec` ([`runner`]), which
//! makes sure that no process it starts outlives it (a PID namespace, or a
//! subreaper that kills what is left) nor Fettle (a lifeline pipe). On top
//! of that, as strong as the kernel allows:
//! * namespaces: user, mount, PID, network (no network at all unless
//!   `agent.sandbox_network`); a private `/tmp` per task, a private
//!   `/dev/shm`, `/run` hidden, a fresh `/proc`, the protected paths
//!   ([`super::protected`]) read-only;
//! * Landlock: read anything, write only beneath the workspace, the private
//!   temp dir and the build caches (not `~/.cargo/bin`), no TCP, and no
//!   abstract Unix sockets or signals reaching outside (ABI ≥ 6).
//!
//! `auto` uses what the kernel has and says once what is missing;
//! `workspace` requires namespaces and Landlock and fails closed; `off`
//! confines nothing (processes still die with the task).

mod guard;
pub mod probe;
pub mod rules;
pub mod runner;
mod sys;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use probe::{support, Support};
pub use rules::{restrict_self, Enforcement};

use crate::agent::protected::Protected;
use crate::config::{AgentConfig, SandboxMode};

/// How a command is run: which confinement, and what it may write.
#[derive(Clone, Debug)]
pub struct SandboxPolicy {
    /// The `fettle` binary that runs the command (`sandbox-exec`).
    pub launcher: PathBuf,
    /// User, mount, PID and (unless `network`) network namespaces.
    pub namespaces: bool,
    /// Landlock: writes, TCP and scopes.
    pub landlock: bool,
    /// Paths the command may write beneath (with Landlock).
    pub writable: Vec<PathBuf>,
    /// Whether the network is reachable (no network namespace, no TCP rule).
    pub network: bool,
    /// Absolute protected paths: read-only when they exist (namespaces),
    /// restored when a command creates or changes them.
    pub protect: Vec<PathBuf>,
    /// The task's private temp dir (on `/tmp` with namespaces, `TMPDIR`
    /// otherwise); removed when the last clone of the policy is dropped.
    pub tmp: Option<Arc<tempfile::TempDir>>,
}

impl SandboxPolicy {
    /// No confinement: only the runner's guarantee that every process of a
    /// command dies with it and with Fettle.
    pub fn unconfined(launcher: PathBuf) -> Self {
        Self {
            launcher,
            namespaces: false,
            landlock: false,
            writable: Vec::new(),
            network: true,
            protect: Vec::new(),
            tmp: None,
        }
    }

    /// This policy for commands that work elsewhere than the workspace
    /// `root` (a candidate's copy, a bisection's clone): they may write in
    /// `writable` instead of under `root`, the rest unchanged.
    pub fn writing_elsewhere(
        &self,
        root: &Path,
        writable: impl IntoIterator<Item = PathBuf>,
    ) -> Self {
        let mut moved = self.clone();
        moved.writable = self
            .writable
            .iter()
            .filter(|p| !p.starts_with(root))
            .cloned()
            .chain(writable)
            .collect();
        moved
    }

    /// Whether anything beyond process cleanup is enforced.
    pub fn confines(&self) -> bool {
        self.namespaces || self.landlock
    }

    /// The `sandbox-exec` arguments that run `sh -c command` under this
    /// policy; `lifeline` is the fd number of the lifeline's read end.
    pub fn wrap(&self, command: &str, lifeline: Option<i32>) -> Vec<String> {
        let mut args = vec!["sandbox-exec".to_owned()];
        if self.namespaces {
            args.push("--namespaces".to_owned());
        }
        if self.landlock {
            args.push("--landlock".to_owned());
        }
        if self.network {
            args.push("--network".to_owned());
        }
        if let Some(tmp) = &self.tmp {
            args.push("--tmp".to_owned());
            args.push(tmp.path().display().to_string());
        }
        for dir in &self.writable {
            args.push("--write".to_owned());
            args.push(dir.display().to_string());
        }
        for path in &self.protect {
            args.push("--protect".to_owned());
            args.push(path.display().to_string());
        }
        if let Some(fd) = lifeline {
            args.push("--lifeline".to_owned());
            args.push(fd.to_string());
        }
        args.extend([
            "--".to_owned(),
            "sh".to_owned(),
            "-c".to_owned(),
            command.to_owned(),
        ]);
        args
    }
}

/// What confinement to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strength {
    pub namespaces: bool,
    pub landlock: bool,
}

/// Everything the workspace policy is built from.
pub struct WorkspaceOptions<'a> {
    pub strength: Strength,
    pub network: bool,
    /// `agent.sandbox_writable`, expanded.
    pub extra_writable: &'a [PathBuf],
    pub protected: &'a Protected,
    /// Where the task's private temp dir is created.
    pub tmp_parent: &'a Path,
}

impl SandboxPolicy {
    /// The workspace policy for `root` (canonical).
    pub fn workspace(
        launcher: PathBuf,
        root: &Path,
        options: &WorkspaceOptions<'_>,
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(options.tmp_parent)?;
        sweep_stale(options.tmp_parent);
        // The owner's pid in the name: a later Fettle removes the dir once
        // that process is gone (killed, or ended without cleaning up).
        let tmp = tempfile::Builder::new()
            .prefix(&format!("tmp-{}-", std::process::id()))
            .tempdir_in(options.tmp_parent)?;
        let mut writable = vec![root.to_path_buf()];
        writable.extend(build_caches());
        writable.extend(options.extra_writable.iter().cloned());
        writable.retain(|p| p.exists());
        writable.sort();
        writable.dedup();
        Ok(Self {
            launcher,
            namespaces: options.strength.namespaces,
            landlock: options.strength.landlock,
            writable,
            network: options.network,
            protect: protected_paths(root, options.protected),
            tmp: Some(Arc::new(tmp)),
        })
    }
}

/// Private temp dirs older than this were left by a Fettle that died.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Removes private temp dirs a Fettle that did not end normally (killed,
/// crashed, or exited without dropping its policy) left behind: those
/// whose owner process is gone, and any older than a day.
pub fn sweep_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("tmp-") else {
            continue;
        };
        let owner_gone = rest
            .split_once('-')
            .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
            .is_some_and(|pid| pid > 0 && !process_alive(pid));
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_TMP);
        if owner_gone || old {
            // Not a symlink: remove_dir_all never follows one out.
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// Whether a process `pid` exists (any user's: EPERM means it does).
fn process_alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 checks only; no memory involved.
    let ret = unsafe { libc::kill(pid, 0) };
    ret == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The build caches test runners write, where they exist: cargo's registry
/// and git checkouts (not `~/.cargo/bin`, which is on PATH), npm's, pip's
/// and go's caches, `$CARGO_TARGET_DIR`. Not all of `~/.cache`: Fettle's
/// own checkpoints live there.
fn build_caches() -> Vec<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = var("HOME");
    let mut out = Vec::new();
    if let Some(cargo) = var("CARGO_HOME").or_else(|| home.as_ref().map(|h| h.join(".cargo"))) {
        // The lock files cargo takes even offline sit next to bin/: they
        // are allowed one by one.
        for sub in [
            "registry",
            "git",
            ".package-cache",
            ".package-cache-mutate",
            ".global-cache",
        ] {
            out.push(cargo.join(sub));
        }
    }
    if let Some(home) = &home {
        for sub in [
            ".rustup/tmp",
            ".npm",
            ".cache/pip",
            ".cache/go-build",
            ".cache/yarn",
            "go/pkg",
        ] {
            out.push(home.join(sub));
        }
    }
    for name in [
        "CARGO_TARGET_DIR",
        "GOCACHE",
        "GOMODCACHE",
        "npm_config_cache",
        "PIP_CACHE_DIR",
    ] {
        out.extend(var(name));
    }
    if let Some(gopath) = var("GOPATH") {
        out.push(gopath.join("pkg"));
    }
    out
}

/// Directories not searched for nested `.git` (big, and never a repository
/// the user commits from).
const SKIP_DIRS: &[&str] = &["node_modules", "target", ".venv", "venv", "__pycache__"];

/// Most entries looked at when searching nested `.git`s.
const WALK_LIMIT: usize = 100_000;

/// Absolute protected paths: every entry of `protected` under `root`
/// (existing or not), `root/.git`, and the `.git` of nested repositories
/// and submodules.
pub fn protected_paths(root: &Path, protected: &Protected) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = protected
        .entries()
        .iter()
        .map(|e| root.join(e.trim_end_matches('/')))
        .collect();
    out.push(root.join(".git"));
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > WALK_LIMIT {
                tracing::warn!(root = %root.display(), "the workspace is too large to find every nested .git; only the first {WALK_LIMIT} entries were searched");
                stack.clear();
                break;
            }
            let name = entry.file_name();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if name == ".git" {
                out.push(entry.path());
            } else if kind.is_dir() && !SKIP_DIRS.iter().any(|s| name == *s) {
                stack.push(entry.path());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A policy and, the first time this process falls back to a weaker
/// sandbox, the message to show the user.
pub struct Prepared {
    pub policy: SandboxPolicy,
    pub notice: Option<String>,
}

static NOTICE_SHOWN: AtomicBool = AtomicBool::new(false);

/// True the first time only: the fallback is announced once per process.
fn first_notice() -> bool {
    !NOTICE_SHOWN.swap(true, Ordering::Relaxed)
}

/// The policy `agent.sandbox` asks for in `root`, run by this very binary;
/// an error when `workspace` is asked for and cannot be had.
pub fn from_config(
    config: &AgentConfig,
    root: &Path,
    test_command: Option<&str>,
) -> Result<Prepared, String> {
    let launcher = std::env::current_exe()
        .map_err(|e| format!("cannot find the fettle binary to run commands: {e}"))?;
    let tmp_parent = crate::agent::checkpoint::cache_dir().join("sandbox");
    from_config_with(config, root, test_command, launcher, &tmp_parent)
}

/// [`from_config`] with an explicit `fettle` binary and temp-dir parent
/// (tests, which are not the `fettle` binary).
pub fn from_config_with(
    config: &AgentConfig,
    root: &Path,
    test_command: Option<&str>,
    launcher: PathBuf,
    tmp_parent: &Path,
) -> Result<Prepared, String> {
    if config.sandbox == SandboxMode::Off {
        return Ok(Prepared {
            policy: SandboxPolicy::unconfined(launcher),
            notice: None,
        });
    }
    let support = support(&launcher);
    let strength = Strength {
        namespaces: support.namespaces,
        landlock: support.landlock_abi > 0,
    };
    let mut notice = None;
    if config.sandbox == SandboxMode::Workspace {
        if !(strength.namespaces && strength.landlock) {
            return Err(format!(
                "agent.sandbox = \"workspace\" needs user namespaces and Landlock, and this system lacks {}; set agent.sandbox = \"auto\" to use what it has (`fettle doctor` shows what that is)",
                support.missing().join(" and ")
            ));
        }
    } else if !(strength.namespaces && strength.landlock) && first_notice() {
        let text = if strength.namespaces || strength.landlock {
            format!(
                "the sandbox for tests and commands is partial on this system (no {}); `fettle doctor` shows what is enforced",
                support.missing().join(", no ")
            )
        } else {
            "this system supports no sandbox for tests and commands (no user namespaces, no Landlock): they run with resource limits only; `fettle doctor` shows why".to_owned()
        };
        tracing::warn!(details = ?support, "{text}");
        notice = Some(text);
    }
    let extra: Vec<PathBuf> = config
        .sandbox_writable
        .iter()
        .map(|p| crate::config::expand_home(p))
        .collect();
    let protected = Protected::new(root, &config.protected_paths, test_command);
    let policy = SandboxPolicy::workspace(
        launcher,
        root,
        &WorkspaceOptions {
            strength,
            network: config.sandbox_network,
            extra_writable: &extra,
            protected: &protected,
            tmp_parent,
        },
    )
    .map_err(|e| format!("cannot create the sandbox's temp dir: {e}"))?;
    Ok(Prepared { policy, notice })
}

/// The lifeline pipe between Fettle and a runner: `(read, write)`, both
/// close-on-exec (the read end is handed to the runner alone).
pub fn lifeline_pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    sys::pipe()
}

/// Whether the running kernel can enforce Landlock.
pub fn available() -> bool {
    rules::abi_version() > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_paths_include_missing_entries_and_nested_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("vendor/dep/.git")).unwrap();
        std::fs::create_dir_all(root.join("node_modules/x/.git")).unwrap();
        std::fs::write(root.join("sub.git"), "").unwrap();
        std::fs::create_dir_all(root.join("mod")).unwrap();
        std::fs::write(root.join("mod/.git"), "gitdir: ../.git/modules/mod\n").unwrap();
        let protected = Protected::new(root, &[], None);
        let paths = protected_paths(root, &protected);
        for want in [
            ".git",
            "vendor/dep/.git",
            "mod/.git",
            "fettle.toml",
            ".fettle",
        ] {
            assert!(paths.contains(&root.join(want)), "{want} in {paths:?}");
        }
        assert!(!paths.contains(&root.join("node_modules/x/.git")));
        assert!(!paths.contains(&root.join("sub.git")));
    }

    #[test]
    fn stale_temp_dirs_of_dead_fettles_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        // A pid that was just freed: a child that exited and was reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let gone = parent.path().join(format!("tmp-{dead}-abc"));
        let live = parent
            .path()
            .join(format!("tmp-{}-def", std::process::id()));
        let other = parent.path().join("unrelated");
        for dir in [&gone, &live, &other] {
            std::fs::create_dir_all(dir.join("sub")).unwrap();
        }
        sweep_stale(parent.path());
        assert!(!gone.exists(), "the dead process's dir is left");
        assert!(live.exists() && other.exists());
    }

    #[test]
    fn build_caches_never_include_bin_directories() {
        for path in build_caches() {
            assert!(
                !path.ends_with("bin") && !path.ends_with(".cargo") && !path.ends_with("go"),
                "{}",
                path.display()
            );
        }
    }

    #[test]
    fn wrap_passes_the_policy_and_the_command_last() {
        let mut policy = SandboxPolicy::unconfined(PathBuf::from("/f"));
        policy.namespaces = true;
        policy.landlock = true;
        policy.network = false;
        policy.writable = vec![PathBuf::from("/w")];
        policy.protect = vec![PathBuf::from("/w/.git")];
        let args = policy.wrap("echo --write x", Some(7));
        assert_eq!(
            args,
            [
                "sandbox-exec",
                "--namespaces",
                "--landlock",
                "--write",
                "/w",
                "--protect",
                "/w/.git",
                "--lifeline",
                "7",
                "--",
                "sh",
                "-c",
                "echo --write x"
            ]
        );
    }
}
