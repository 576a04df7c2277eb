//! `./install.sh`'s prerequisite step on a machine without CMake: with
//! `apt-get` usable it installs the packages (a stand-in `apt-get` records
//! the call here), without it it says in one line what to run and builds
//! nothing. (The whole script runs for real in CI, as on a fresh machine:
//! `.ci/run`.)
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A `PATH` folder with only the programs named (links to the real ones)
/// and the given scripts; no CMake, no apt-get unless given.
fn bin_dir(dir: &Path, real: &[&str], scripts: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for name in real {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .unwrap();
        let target = String::from_utf8(found.stdout).unwrap();
        std::os::unix::fs::symlink(target.trim(), dir.join(name)).unwrap();
    }
    for (name, body) in scripts {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn install_sh(path: &Path, args: &[&str]) -> std::process::Output {
    Command::new(repo().join("install.sh"))
        .args(args)
        .env("PATH", path)
        .env("FETTLE_BIN_DIR", path.join("never-used"))
        .output()
        .unwrap()
}

#[test]
fn without_cmake_or_a_way_to_install_it_says_what_to_run_and_builds_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let bin = temp.path().join("bin");
    let log = temp.path().join("cargo-ran");
    bin_dir(
        &bin,
        &["bash", "dirname", "id"],
        &[
            ("cargo", &format!("echo \"$@\" >> {}", log.display())),
            ("c++", "exit 0"),
        ],
    );
    let out = install_sh(&bin, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let fatal: Vec<&str> = stderr.lines().filter(|l| l.starts_with("FATAL")).collect();
    assert_eq!(fatal.len(), 1, "one line: {stderr}");
    assert!(fatal[0].contains("missing cmake"), "{}", fatal[0]);
    assert!(fatal[0].contains("then run this again"), "{}", fatal[0]);
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!ran.contains("build"), "built anyway: {ran}");
    // `--check` says the same without trying anything.
    let out = install_sh(&bin, &["--check"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("missing: cmake"));
}

#[test]
fn with_apt_get_usable_the_missing_packages_are_installed_first() {
    let temp = tempfile::tempdir().unwrap();
    let bin = temp.path().join("bin");
    let apt = temp.path().join("apt-calls");
    let cargo = temp.path().join("cargo-calls");
    bin_dir(
        &bin,
        &[
            "bash", "dirname", "id", "mkdir", "install", "du", "cut", "sed", "tee", "grep", "rm",
        ],
        &[
            ("apt-get", &format!("echo \"$@\" >> {}", apt.display())),
            ("sudo", "[ \"$1\" = -n ] && shift; \"$@\""),
            // The build "fails" right away: this test is about the step before.
            (
                "cargo",
                &format!(
                    "echo \"$@\" >> {}; [ \"$1\" = --version ] || exit 3",
                    cargo.display()
                ),
            ),
            ("c++", "exit 0"),
        ],
    );
    let out = install_sh(&bin, &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let apt_calls = std::fs::read_to_string(&apt).unwrap();
    assert!(
        apt_calls
            .lines()
            .any(|l| l.starts_with("install -y -qq cmake")),
        "{apt_calls}"
    );
    let cargo_calls = std::fs::read_to_string(&cargo).unwrap();
    assert!(
        cargo_calls.contains("build --release --locked --bin fettle"),
        "then the build: {cargo_calls}"
    );
}
