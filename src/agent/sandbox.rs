//! The optional sandbox for tests and commands (`agent.sandbox =
//! "workspace"`): Landlock lets the command read and execute anything but
//! write only to the workspace, the temp dir, `/dev` and the build caches
//! test runners need, and (Linux ≥ 6.7) forbids TCP connect and bind.
//!
//! The restriction is applied by `fettle sandbox-exec` to itself right before
//! it `exec`s the command: Landlock is inherited across `exec` and by every
//! child, and doing it in a fresh process keeps the allocation-heavy setup
//! out of a `pre_exec` hook.

use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, ABI,
};

/// What a sandboxed command may do besides reading and executing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// The `fettle` binary that applies the policy (`sandbox-exec`).
    pub launcher: PathBuf,
    /// Directories the command may write beneath.
    pub writable: Vec<PathBuf>,
    /// Whether TCP connect/bind is allowed.
    pub network: bool,
}

impl SandboxPolicy {
    /// The workspace policy: write to `root`, the temp dir, `/dev`, and the
    /// build caches that exist (`~/.cargo`, `~/.npm`, `~/.cache/pip`,
    /// `~/.cache/go-build`, `~/go`, `$CARGO_HOME`, `$GOPATH`, `$GOCACHE`, …),
    /// plus `extra`. Not all of `~/.cache`: Fettle's own checkpoints live there.
    pub fn workspace(launcher: PathBuf, root: &Path, extra: &[PathBuf]) -> Self {
        let mut writable = vec![
            root.to_path_buf(),
            std::env::temp_dir(),
            PathBuf::from("/dev"),
        ];
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if let Some(home) = &home {
            writable.extend(
                [
                    ".cargo",
                    ".npm",
                    ".cache/pip",
                    ".cache/go-build",
                    ".rustup/tmp",
                    "go",
                ]
                .map(|d| home.join(d)),
            );
        }
        for var in [
            "CARGO_HOME",
            "GOPATH",
            "GOCACHE",
            "npm_config_cache",
            "PIP_CACHE_DIR",
        ] {
            if let Some(dir) = std::env::var_os(var) {
                writable.push(PathBuf::from(dir));
            }
        }
        writable.extend(extra.iter().cloned());
        writable.retain(|p| p.exists());
        writable.sort();
        writable.dedup();
        Self {
            launcher,
            writable,
            network: false,
        }
    }

    /// The `sandbox-exec` arguments that run `sh -c command` under this policy.
    pub fn wrap(&self, command: &str) -> Vec<String> {
        let mut args = vec!["sandbox-exec".to_owned()];
        for dir in &self.writable {
            args.push("--write".to_owned());
            args.push(dir.display().to_string());
        }
        if self.network {
            args.push("--network".to_owned());
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

/// The policy `agent.sandbox` asks for in `root`, run by this very binary;
/// an error when the sandbox is wanted but cannot be had.
pub fn from_config(
    config: &crate::config::AgentConfig,
    root: &Path,
) -> Result<Option<SandboxPolicy>, String> {
    match config.sandbox {
        crate::config::SandboxMode::Off => Ok(None),
        crate::config::SandboxMode::Workspace => {
            if !available() {
                return Err("agent.sandbox = \"workspace\" needs Landlock (Linux 5.13 or later, enabled at boot), which this kernel does not provide; set agent.sandbox = \"off\" to run tests and commands unsandboxed".to_owned());
            }
            let launcher = std::env::current_exe()
                .map_err(|e| format!("cannot find the fettle binary for the sandbox: {e}"))?;
            let extra: Vec<PathBuf> = config
                .sandbox_writable
                .iter()
                .map(|p| crate::config::expand_home(p))
                .collect();
            Ok(Some(SandboxPolicy::workspace(launcher, root, &extra)))
        }
    }
}

/// How well the running kernel enforced the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    Full,
    /// Some rights could not be restricted (an older kernel: typically the
    /// network rules before Linux 6.7).
    Partial,
}

/// Restricts the current process (and what it will `exec`) to `writable`
/// (and no TCP unless `network`). Fails when the kernel has no Landlock at
/// all: a sandbox that silently is not there is worse than an error.
pub fn restrict_self(writable: &[PathBuf], network: bool) -> Result<Enforcement, String> {
    let abi = ABI::V5;
    let fail = |e: landlock::RulesetError| format!("cannot set up the sandbox: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(fail)?;
    }
    let mut created = ruleset
        .create()
        .map_err(fail)?
        .add_rules(landlock::path_beneath_rules(
            ["/"],
            AccessFs::from_read(abi),
        ))
        .map_err(fail)?;
    for dir in writable {
        created = created
            .add_rules(landlock::path_beneath_rules([dir], AccessFs::from_all(abi)))
            .map_err(fail)?;
    }
    let status = created.restrict_self().map_err(fail)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(Enforcement::Full),
        RulesetStatus::PartiallyEnforced => Ok(Enforcement::Partial),
        RulesetStatus::NotEnforced => Err(
            "the sandbox needs Landlock (Linux 5.13 or later, enabled at boot); this kernel does not provide it. Set agent.sandbox = \"off\" to run commands unsandboxed."
                .to_owned(),
        ),
    }
}

/// Whether the running kernel can enforce a filesystem sandbox.
pub fn available() -> bool {
    landlock::Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create())
        .is_ok_and(|_| landlock_abi() > 0)
}

fn landlock_abi() -> i64 {
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the
    // VERSION flag only returns the ABI version (or -1); it touches no memory.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    }
}
