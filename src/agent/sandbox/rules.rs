//! The Landlock half of the sandbox: read and execute anything, write only
//! beneath the given paths, no TCP unless allowed, and (ABI ≥ 6) no
//! abstract Unix sockets or signals reaching outside the sandbox.

use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, ABI,
};

/// The newest ABI whose rights this code has been checked against: V6 adds
/// the scopes; V7 only adds logging flags.
const ABI_USED: ABI = ABI::V6;

/// Device files a command may write (when they exist): what shells, test
/// runners and terminals open for writing. Not the rest of `/dev`.
pub const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// How well the running kernel enforced the ruleset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    Full,
    /// Some rights could not be restricted (an older kernel: TCP before
    /// Linux 6.7, scopes before 6.12).
    Partial,
}

/// Restricts the current process (and everything it will `exec` or fork).
/// Fails when the kernel has no Landlock at all: a sandbox that silently is
/// not there is worse than an error.
///
/// `protect`: paths that must stay read-only although they lie beneath a
/// writable one (without namespaces, no read-only bind mount does it).
/// Landlock only grants, and a right granted on a directory holds for all
/// beneath it, so a writable directory holding a protected path is split
/// (see [`split_writable`]).
pub fn restrict_self(
    writable: &[PathBuf],
    protect: &[PathBuf],
    network: bool,
) -> Result<Enforcement, String> {
    let abi = ABI_USED;
    let fail = |e: landlock::RulesetError| format!("cannot set up Landlock: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(fail)?;
    }
    ruleset = ruleset.scope(Scope::from_all(abi)).map_err(fail)?;
    let mut created = ruleset
        .create()
        .map_err(fail)?
        .add_rules(landlock::path_beneath_rules(
            ["/"],
            AccessFs::from_read(abi),
        ))
        .map_err(fail)?;
    let devices = WRITABLE_DEVICES.iter().map(PathBuf::from);
    let mut grants = split_writable(writable, protect);
    grants.extend(devices.map(|d| (d, AccessFs::from_all(abi))));
    for (path, rights) in grants {
        // path_beneath_rules skips paths that do not exist and narrows the
        // rights of a file to the ones a file can have.
        created = created
            .add_rules(landlock::path_beneath_rules(
                [path],
                rights & AccessFs::from_all(abi),
            ))
            .map_err(fail)?;
    }
    let status = created.restrict_self().map_err(fail)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(Enforcement::Full),
        RulesetStatus::PartiallyEnforced => Ok(Enforcement::Partial),
        RulesetStatus::NotEnforced => Err(
            "Landlock is not enforced by this kernel (Linux 5.13 or later, enabled at boot)"
                .to_owned(),
        ),
    }
}

/// What a directory that holds a protected path gets: make and write
/// files beneath it, but remove or rename nothing, so the protected entry
/// can be neither deleted, renamed away (`mv .git .git-away` needs
/// `REMOVE_DIR` here) nor replaced. (These rights reach into the protected
/// directory too: what a command writes there is undone by the guards.)
pub fn container_rights() -> landlock::BitFlags<AccessFs> {
    AccessFs::from_read(ABI_USED)
        | AccessFs::WriteFile
        | AccessFs::Truncate
        | AccessFs::MakeReg
        | AccessFs::MakeDir
        | AccessFs::MakeSym
        | AccessFs::MakeFifo
        | AccessFs::MakeSock
        | AccessFs::IoctlDev
}

/// Most directory entries looked at when splitting (beyond: the rest of
/// that directory gets the container's rights only).
const SPLIT_LIMIT: usize = 10_000;

/// The grants for `writable` with `protect` kept out: a writable path
/// holding no protected path gets every right; one holding some gets
/// [`container_rights`], and each of its entries is treated the same way
/// (a protected entry gets nothing of its own).
pub fn split_writable(
    writable: &[PathBuf],
    protect: &[PathBuf],
) -> Vec<(PathBuf, landlock::BitFlags<AccessFs>)> {
    let mut out = Vec::new();
    let mut budget = SPLIT_LIMIT;
    for path in writable {
        split_one(path, protect, &mut out, &mut budget);
    }
    out
}

fn split_one(
    path: &Path,
    protect: &[PathBuf],
    out: &mut Vec<(PathBuf, landlock::BitFlags<AccessFs>)>,
    budget: &mut usize,
) {
    if protect.iter().any(|p| p == path) {
        return;
    }
    if !protect.iter().any(|p| p.starts_with(path)) {
        out.push((path.to_path_buf(), AccessFs::from_all(ABI_USED)));
        return;
    }
    out.push((path.to_path_buf(), container_rights()));
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        // A symlink gets no rule: a rule opens its path, which would grant
        // the link's target (anywhere) instead of the link.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        split_one(&entry.path(), protect, out, budget);
    }
}

/// The directories [`split_writable`] gives only [`container_rights`]
/// (those holding a protected path: the workspace root), with the
/// directories at their top when a command starts. One a command creates
/// there has those rights too for the rest of its run: nothing inside it
/// can be removed or renamed (a first `cargo build` making `target/`
/// fails). From the next command on it is an entry of its own, with every
/// right. [`SplitRoots::note_after_failure`] tells the command's output.
pub struct SplitRoots(Vec<(PathBuf, std::collections::HashSet<std::ffi::OsString>)>);

/// Build directories a tool makes at the top of a project by renaming a
/// temporary one into place, which a split directory refuses every time
/// (`cargo` makes `target3kQ9a/` and renames it to `target/`: "failed to
/// create directory"), or fills by renaming inside it (`npm`): made empty
/// before the command when the project file says the tool is used, so
/// that they are entries of their own with every right. Undo removes them
/// with what the task made.
const BUILD_DIRS: &[(&str, &str)] = &[("Cargo.toml", "target"), ("package.json", "node_modules")];

impl SplitRoots {
    /// Also makes the missing [`BUILD_DIRS`] of each split directory.
    pub fn record(writable: &[PathBuf], protect: &[PathBuf]) -> Self {
        let split: Vec<_> = writable
            .iter()
            .filter(|w| protect.iter().any(|p| p.starts_with(w) && p != *w))
            .collect();
        for root in &split {
            for (marker, dir) in BUILD_DIRS {
                let (marker, dir) = (root.join(marker), root.join(dir));
                // Not over anything, and not through a symlink: a plain
                // `mkdir` fails on any existing entry.
                if marker.is_file() && std::fs::create_dir(&dir).is_ok() {
                    eprintln!(
                        "fettle: sandbox: made {}/ (Landlock only: a directory made at the top \
                         during a command could not be renamed into place)",
                        dir.file_name()
                            .map(|n| n.to_string_lossy())
                            .unwrap_or_default()
                    );
                }
            }
        }
        SplitRoots(
            split
                .into_iter()
                .map(|w| (w.clone(), top_dirs(w)))
                .collect(),
        )
    }

    /// After a command that failed: a note naming the directories it made
    /// at the top of a split directory, and why it may have failed there.
    pub fn note_after_failure(&self) -> Option<String> {
        let mut made: Vec<String> = Vec::new();
        for (root, before) in &self.0 {
            let mut new: Vec<String> = top_dirs(root)
                .difference(before)
                .map(|name| format!("{}/", name.to_string_lossy()))
                .collect();
            new.sort();
            made.extend(new);
        }
        if made.is_empty() {
            return None;
        }
        made.truncate(8);
        Some(format!(
            "sandbox: this command made {} at the top of the workspace. Without user \
             namespaces (Landlock only, to keep .git/ whole) nothing inside a directory made \
             there during the same run can be removed or renamed, nor can entries at the top \
             itself. If it failed on that (Permission denied), run it again: a directory that \
             exists when a command starts is fully writable.",
            made.join(", ")
        ))
    }
}

/// The names of the directories directly in `dir` (at most [`SPLIT_LIMIT`]).
fn top_dirs(dir: &Path) -> std::collections::HashSet<std::ffi::OsString> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Default::default();
    };
    entries
        .flatten()
        .take(SPLIT_LIMIT)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name())
        .collect()
}

/// The Landlock ABI version of the running kernel; 0 when it has none.
pub fn abi_version() -> i64 {
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the
    // VERSION flag only returns the ABI version (or -1); it touches no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    v.max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_dir_holding_a_protected_path_is_split() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in [".git/objects", "src", "vendor/lib/.git", "vendor/lib/code"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("app.py"), "").unwrap();
        std::os::unix::fs::symlink("/", root.join("escape")).unwrap();
        let protect = [root.join(".git"), root.join("vendor/lib/.git")];
        let grants: std::collections::HashMap<PathBuf, _> =
            split_writable(&[root.to_path_buf()], &protect)
                .into_iter()
                .collect();
        let all = AccessFs::from_all(ABI_USED);
        // Holding a protected entry: make and write, never remove or rename.
        for holder in [
            root.to_path_buf(),
            root.join("vendor"),
            root.join("vendor/lib"),
        ] {
            let rights = grants[&holder];
            assert_eq!(rights, container_rights(), "{}", holder.display());
            assert!(!rights.contains(AccessFs::RemoveDir) && !rights.contains(AccessFs::Refer));
        }
        for free in ["src", "app.py", "vendor/lib/code"] {
            assert_eq!(grants[&root.join(free)], all, "{free}");
        }
        for none in [".git", "vendor/lib/.git", "escape"] {
            assert!(!grants.contains_key(&root.join(none)), "{none} got a rule");
        }
    }
}
