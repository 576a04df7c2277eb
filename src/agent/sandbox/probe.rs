//! What sandboxing the running system supports, found by trying it once
//! (`fettle sandbox-exec --probe` in a child: Fettle itself is
//! multi-threaded and must not fork to experiment) and remembered.

use std::path::Path;
use std::sync::OnceLock;

use super::rules::abi_version;

/// The namespace steps the probe tries, in order.
pub const STEPS: &[(&str, &str)] = &[
    ("user", "user namespace"),
    ("mount", "mount namespace"),
    ("net", "network namespace"),
    ("pid", "PID namespace"),
    ("proc", "a private /proc"),
];

#[derive(Clone, Debug)]
pub struct Support {
    /// Each step of [`STEPS`] tried, and its error (`None`: it worked).
    pub steps: Vec<(String, Option<String>)>,
    /// User, mount, network and PID namespaces all work.
    pub namespaces: bool,
    /// 0: no Landlock.
    pub landlock_abi: i64,
}

impl Support {
    fn step_ok(&self, name: &str) -> bool {
        self.steps.iter().any(|(n, e)| n == name && e.is_none())
    }

    /// Whether a fresh `/proc` can be mounted (hides outside processes).
    pub fn private_proc(&self) -> bool {
        self.step_ok("proc")
    }

    /// What the sandbox lacks here, in words.
    pub fn missing(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.namespaces {
            out.push("user namespaces".to_owned());
        }
        if self.landlock_abi == 0 {
            out.push("Landlock".to_owned());
        }
        out
    }

    /// What a sandboxed command is kept from here (`enforced`) and what
    /// not, for `fettle doctor`.
    pub fn describe(&self, network_allowed: bool) -> (Vec<String>, Vec<String>) {
        let (mut yes, mut no) = (Vec::new(), Vec::new());
        let mut put = |ok: bool, text: &str| {
            if ok {
                yes.push(text.to_owned());
            } else {
                no.push(text.to_owned());
            }
        };
        let abi = self.landlock_abi;
        put(
            true,
            "every process of a command dies with it and with Fettle",
        );
        put(
            self.namespaces,
            "private /tmp and /dev/shm per task; /run hidden",
        );
        put(
            self.namespaces,
            "protected paths (.git/, fettle.toml, .fettle/, the test script) read-only",
        );
        put(
            self.namespaces && self.private_proc(),
            "other processes invisible (own PID namespace and /proc)",
        );
        if network_allowed {
            put(false, "network: allowed (agent.sandbox_network = true)");
        } else {
            put(
                self.namespaces,
                "no network at all (own network namespace: TCP, UDP, abstract Unix sockets)",
            );
            put(abi >= 4, "no TCP connect/bind (Landlock ABI ≥ 4)");
        }
        put(
            abi >= 1,
            "writes only to the workspace, the private temp dir and build caches (Landlock)",
        );
        put(
            abi >= 6 || self.namespaces,
            "no signals to outside processes (Landlock ABI ≥ 6 or a PID namespace)",
        );
        put(
            abi >= 6 || (self.namespaces && !network_allowed),
            "no abstract Unix sockets outside (Landlock ABI ≥ 6 or a network namespace)",
        );
        put(
            false,
            "reading files outside the workspace (anything the user can read)",
        );
        put(
            false,
            "Unix path sockets the user can reach outside /tmp and /run",
        );
        (yes, no)
    }
}

static SUPPORT: OnceLock<Support> = OnceLock::new();

/// The system's support, probed once per process with `launcher` (a
/// process run and waited for: off the server's async worker, through
/// [`crate::runtime::blocking`], the first time).
pub fn support(launcher: &Path) -> Support {
    if let Some(known) = SUPPORT.get() {
        return known.clone();
    }
    crate::runtime::blocking(|| SUPPORT.get_or_init(|| probe_now(launcher)).clone())
}

/// The variable that turns sandbox parts off (`namespaces`, `landlock`,
/// comma-separated), as if the kernel lacked them: to work around a broken
/// setup, and to test the fallbacks. Only the user's own environment can
/// set it; it can only weaken `auto` (a `workspace` sandbox then fails).
pub const DISABLE_VAR: &str = "FETTLE_SANDBOX_DISABLE";

/// Probes without the cache.
pub fn probe_now(launcher: &Path) -> Support {
    let disabled = std::env::var(DISABLE_VAR).unwrap_or_default();
    let off = |part: &str| disabled.split(',').any(|d| d.trim() == part);
    let landlock_abi = if off("landlock") { 0 } else { abi_version() };
    if off("namespaces") {
        return Support {
            steps: STEPS
                .iter()
                .map(|(name, _)| (name.to_string(), Some(format!("disabled by {DISABLE_VAR}"))))
                .collect(),
            namespaces: false,
            landlock_abi,
        };
    }
    let output = std::process::Command::new(launcher)
        .args(["sandbox-exec", "--probe"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let text = match output {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(err) => format!("user: error cannot run {}: {err}", launcher.display()),
    };
    let steps: Vec<(String, Option<String>)> = text
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(": ")?;
            let err = match rest {
                "ok" => None,
                other => Some(other.strip_prefix("error ").unwrap_or(other).to_owned()),
            };
            Some((name.to_owned(), err))
        })
        .collect();
    let ok = |name: &str| steps.iter().any(|(n, e)| n == name && e.is_none());
    let namespaces = ["user", "mount", "net", "pid"].iter().all(|s| ok(s));
    Support {
        steps,
        namespaces,
        landlock_abi,
    }
}
