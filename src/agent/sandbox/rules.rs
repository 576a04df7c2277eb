//! The Landlock half of the sandbox: read and execute anything, write only
//! beneath the given paths, no TCP unless allowed, and (ABI ≥ 6) no
//! abstract Unix sockets or signals reaching outside the sandbox.

use std::path::PathBuf;

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
pub fn restrict_self(writable: &[PathBuf], network: bool) -> Result<Enforcement, String> {
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
    for path in writable.iter().cloned().chain(devices) {
        // path_beneath_rules skips paths that do not exist and narrows the
        // rights of a file to the ones a file can have.
        created = created
            .add_rules(landlock::path_beneath_rules(
                [path],
                AccessFs::from_all(abi),
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
