//! Tests that must change process-wide state (environment variables such as
//! HOME, the sandbox's once-per-process notice) run in a child process of
//! this test binary: all other tests share this process and would see it.
//!
//! `alone!(test_fn_name)` as a test's first statement: in the parent it
//! runs the test binary again with only that test (`--exact`), requires it
//! to have passed exactly once, and returns; in the child it falls through
//! and the test body runs.
// In tests a panic is the failure report.
#![allow(clippy::expect_used)]

use std::process::Command;

/// Set in the child: the one test it runs.
const CHILD_VAR: &str = "FETTLE_TEST_ALONE";

/// True in a child started by [`ran_in_child`]: the only place a test may
/// change process-wide state.
pub fn in_child() -> bool {
    std::env::var_os(CHILD_VAR).is_some()
}

/// True in the parent, after the test ran (and passed) in a child.
pub fn ran_in_child(module_path: &str, name: &str) -> bool {
    // libtest names tests by path without the crate: `agent_sandbox::foo`.
    let module = module_path.split_once("::").map_or("", |(_, rest)| rest);
    let test = if module.is_empty() {
        name.to_string()
    } else {
        format!("{module}::{name}")
    };
    if std::env::var(CHILD_VAR).is_ok_and(|v| v == test) {
        return false;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([test.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD_VAR, &test)
        .output()
        .expect("running the test binary again");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{test} in its own process: {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    // What the child printed (logs, measurements) stays visible.
    eprint!("{stderr}");
    true
}

/// Runs the enclosing test in its own process (see the module docs).
macro_rules! alone {
    ($name:ident) => {
        if $crate::isolated::ran_in_child(module_path!(), stringify!($name)) {
            return;
        }
    };
}
pub(crate) use alone;
