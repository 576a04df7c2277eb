//! Fettle's own secrets: the API keys and other secret-looking variables of
//! its environment, moved out of it at start-up.
//!
//! A command the agent runs gets a scrubbed environment, but it could still
//! read Fettle's: `/proc/<fettle>/environ` shows the environment block the
//! kernel copied onto the process's initial stack, and `unsetenv` does not
//! change that block. So [`protect_process`], called first thing in `main`
//! while the process has a single thread:
//!
//! 1. moves every variable whose name looks secret ([`looks_secret_name`]:
//!    `KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `CREDENTIAL`, any case) and every
//!    `api_key_env` named in the user's own `config.toml` into a private
//!    in-process store, and removes it from the environment;
//! 2. overwrites those values with NUL bytes in the original block (found
//!    through `env_start`/`env_end` of `/proc/self/stat`), so
//!    `/proc/<fettle>/environ` shows `NAME=` and nothing more;
//! 3. makes the process non-dumpable (`PR_SET_DUMPABLE` 0): `/proc/<pid>/`
//!    files become root's, so processes of the same user can no longer read
//!    its `environ` or `mem`, nor ptrace it (with `kernel.yama.ptrace_scope`
//!    0, the default on some distributions, a command could otherwise read
//!    the keys out of Fettle's heap). Children are unaffected: `execve`
//!    makes them dumpable again. What it costs: no core dumps and no
//!    debugger or profiler attaching to a running Fettle without root;
//!    `FETTLE_DUMPABLE=1` keeps the process dumpable for such debugging.
//!
//! Providers read keys through [`var`]; a name that was not moved at
//! start-up (an `api_key_env` from the workspace or the editor's settings
//! naming an ordinary-looking variable) is read from the environment and
//! remembered, so commands still do not get it and redaction still knows
//! its value. Values never appear in logs or `Debug` output.
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::{LazyLock, RwLock};

/// Substrings (upper case) of variable names that hold secrets.
const MARKERS: [&str; 5] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"];

/// Set to `1` to keep the process dumpable (debuggers, profilers).
pub const DUMPABLE_VAR: &str = "FETTLE_DUMPABLE";

#[derive(Default)]
struct Store {
    vars: BTreeMap<OsString, OsString>,
    /// Bumped on every change, so a cached redactor knows to rebuild.
    generation: u64,
}

static STORE: LazyLock<RwLock<Store>> = LazyLock::new(Default::default);

fn read() -> std::sync::RwLockReadGuard<'static, Store> {
    STORE
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write() -> std::sync::RwLockWriteGuard<'static, Store> {
    STORE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What [`protect_process`] did, for `fettle doctor` and the logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Protection {
    /// Variables moved out of the environment.
    pub moved: usize,
    /// Values overwritten in the original environment block.
    pub wiped: usize,
    /// Whether the process was made non-dumpable.
    pub non_dumpable: bool,
}

static PROTECTION: RwLock<Option<Protection>> = RwLock::new(None);

/// What [`protect_process`] did, if it ran.
pub fn protection() -> Option<Protection> {
    *PROTECTION
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether a variable of this name is treated as secret: it is moved out
/// of Fettle's environment and never passed to commands (unless allowed).
pub fn looks_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    MARKERS.iter().any(|m| upper.contains(m))
}

/// Moves secrets out of the environment (see the module docs). Call it
/// first thing in `main`, before any thread exists: changing the
/// environment while another thread may read it is undefined behaviour.
pub fn protect_process() -> Protection {
    let extra = user_config_key_names();
    let (moved, wiped) = take_from_environment(&extra);
    let non_dumpable = std::env::var_os(DUMPABLE_VAR).is_none_or(|v| v != "1") && {
        // SAFETY: prctl(PR_SET_DUMPABLE) only changes a flag of this process.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 }
    };
    let done = Protection {
        moved,
        wiped,
        non_dumpable,
    };
    *PROTECTION
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(done);
    done
}

/// Moves the secret-looking variables and those named in `extra` from the
/// environment into the store and wipes their values in the original
/// block. Returns (moved, wiped). Single-threaded callers only.
fn take_from_environment(extra: &[String]) -> (usize, usize) {
    let taken: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, _)| {
            let text = name.to_string_lossy();
            looks_secret_name(&text) || extra.iter().any(|e| *e == text)
        })
        .collect();
    if taken.is_empty() {
        return (0, 0);
    }
    for (name, _) in &taken {
        std::env::remove_var(name);
    }
    let names: Vec<&[u8]> = taken.iter().map(|(n, _)| n.as_bytes()).collect();
    let wiped = wipe_original_block(&names);
    let moved = taken.len();
    let mut store = write();
    store.vars.extend(taken);
    store.generation += 1;
    (moved, wiped)
}

/// Overwrites, in the environment block `/proc/self/environ` shows, the
/// values of the variables named in `names`. Returns how many.
fn wipe_original_block(names: &[&[u8]]) -> usize {
    let Some((start, end)) = environment_block() else {
        return 0;
    };
    let mut wiped = 0;
    let mut entry_start = start;
    let mut at = start;
    while at < end {
        // SAFETY: [start, end) is the environment block the kernel wrote on
        // this process's initial stack (`env_start`/`env_end` of
        // /proc/self/stat); it stays mapped and writable for the process's
        // life, and no other thread exists yet (see `protect_process`).
        // Raw pointer reads and writes: no Rust reference aliases it.
        let byte = unsafe { std::ptr::read(at as *const u8) };
        if byte == 0 {
            wiped += wipe_entry(entry_start, at, names);
            entry_start = at + 1;
        }
        at += 1;
    }
    if entry_start < end {
        wiped += wipe_entry(entry_start, end, names);
    }
    wiped
}

/// Zeroes the value of the entry `NAME=value` at [from, to) if its name is
/// one of `names`.
fn wipe_entry(from: usize, to: usize, names: &[&[u8]]) -> usize {
    // SAFETY: a sub-range of the block, see `wipe_original_block`; the
    // slice is dropped before anything writes to the block.
    let entry = unsafe { std::slice::from_raw_parts(from as *const u8, to - from) };
    let Some(eq) = entry.iter().position(|&b| b == b'=') else {
        return 0;
    };
    if !names.contains(&&entry[..eq]) || eq + 1 >= entry.len() {
        return 0;
    }
    let value_start = from + eq + 1;
    // SAFETY: as above; the value lies inside the block.
    unsafe { std::ptr::write_bytes(value_start as *mut u8, 0, to - value_start) };
    1
}

/// `env_start` and `env_end` (fields 50 and 51) of `/proc/self/stat`.
fn environment_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Field 2 (the command name, in parentheses) may contain anything.
    let (_, after) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3.
    let start: usize = fields.get(50 - 3)?.parse().ok()?;
    let end: usize = fields.get(51 - 3)?.parse().ok()?;
    // A block larger than the kernel's own argument limit is not one.
    (start != 0 && start < end && end - start <= 32 << 20).then_some((start, end))
}

/// The `api_key_env` names in the user's own `config.toml`, read without
/// validating anything else (errors are reported later, by the real load).
fn user_config_key_names() -> Vec<String> {
    let Some(path) = crate::config::user_config_path() else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Ok(value) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let Some(models) = value.get("models").and_then(toml::Value::as_table) else {
        return Vec::new();
    };
    models
        .values()
        .filter_map(|m| m.get("api_key_env")?.as_str())
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The value of the secret variable `name`: from the store, else from the
/// environment (then remembered as secret: see the module docs). `None`
/// when unset or empty.
pub fn var(name: &str) -> Option<String> {
    if let Some(value) = read().vars.get(OsStr::new(name)) {
        return value.to_str().filter(|v| !v.is_empty()).map(str::to_owned);
    }
    let value = std::env::var_os(name).filter(|v| !v.is_empty())?;
    let mut store = write();
    store.vars.insert(name.into(), value.clone());
    store.generation += 1;
    value.into_string().ok()
}

/// Whether `name` holds a non-empty value (store or environment), without
/// remembering it.
pub fn is_set(name: &str) -> bool {
    read()
        .vars
        .get(OsStr::new(name))
        .or(std::env::var_os(name).as_ref())
        .is_some_and(|v| !v.is_empty())
}

/// Whether `name` is held in the store (so commands never get it unless
/// allowed).
pub fn holds(name: &OsStr) -> bool {
    read().vars.contains_key(name)
}

/// The stored variables named in `allow`, for commands allowed to see them.
pub fn allowed(allow: &[String]) -> Vec<(OsString, OsString)> {
    let store = read();
    allow
        .iter()
        .filter_map(|name| {
            let value = store.vars.get(OsStr::new(name))?;
            Some((OsString::from(name), value.clone()))
        })
        .collect()
}

/// Every stored value, for redaction.
pub fn values() -> Vec<String> {
    read()
        .vars
        .values()
        .map(|v| v.to_string_lossy().into_owned())
        .collect()
}

/// Changes whenever the store does.
pub fn generation() -> u64 {
    read().generation
}

/// Adds a variable to the store (tests, and hosts that receive a key some
/// other way). The environment is not touched.
pub fn remember(name: &str, value: &str) {
    let mut store = write();
    store.vars.insert(name.into(), value.into());
    store.generation += 1;
}

/// Held by unit tests that change the store, and by those that need its
/// generation to stay put (a cached redactor is dropped when it changes).
#[cfg(test)]
pub static TEST_GENERATION: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for name in [
            "OPENAI_API_KEY",
            "github_token",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(looks_secret_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "FETTLE_LOG", "SSH_AUTH_SOCK", "LANG"] {
            assert!(!looks_secret_name(name), "{name}");
        }
    }

    #[test]
    fn remembered_values_are_held_and_given_only_when_allowed() {
        let _generation = TEST_GENERATION.lock();
        remember("H3_UNIT_STORE_VAR", "v-123456789");
        assert!(holds(OsStr::new("H3_UNIT_STORE_VAR")));
        assert!(is_set("H3_UNIT_STORE_VAR"));
        assert_eq!(var("H3_UNIT_STORE_VAR").as_deref(), Some("v-123456789"));
        assert!(values().contains(&"v-123456789".to_string()));
        assert!(allowed(&[]).is_empty());
        assert_eq!(
            allowed(&["H3_UNIT_STORE_VAR".to_string()]),
            vec![(
                OsString::from("H3_UNIT_STORE_VAR"),
                OsString::from("v-123456789")
            )]
        );
    }

    #[test]
    fn the_environment_block_is_found() {
        let (start, end) = environment_block().expect("env_start/env_end in /proc/self/stat");
        assert!(start < end);
    }
}
