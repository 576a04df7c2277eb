//! `agent::exec`: real shell commands in temp dirs — exit codes, output
//! shaping, timeouts and cancellation that kill the whole process group,
//! the environment scrub, rlimits.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use fettle::agent::exec::{run, scrubbed_env, CommandOutcome, CommandSpec};
use fettle::agent::output::NO_OUTPUT;
use tokio_util::sync::CancellationToken;

/// Every test is bounded so a broken kill hangs nothing: it fails.
const TEST_LIMIT: Duration = Duration::from_secs(60);

fn spec(command: &str, cwd: &Path) -> CommandSpec {
    CommandSpec::new(command, cwd)
}

async fn run_ok(spec: &CommandSpec) -> CommandOutcome {
    tokio::time::timeout(TEST_LIMIT, run(spec, &CancellationToken::new()))
        .await
        .expect("run did not return")
        .expect("run failed to start")
}

/// Whether `pid` is gone (or a zombie, i.e. dead and not yet reaped). Polls
/// for a while: reparenting and reaping happen after the kill returns.
async fn wait_dead(pid: i32) -> bool {
    for _ in 0..200 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) => {
                // "pid (comm) S ...": the state follows the last ')'.
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                if state.starts_with('Z') || state.starts_with('X') {
                    return true;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn read_pid(path: &Path) -> i32 {
    for _ in 0..400 {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} was never written", path.display());
}

#[tokio::test]
async fn exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let ok = run_ok(&spec("echo hi", dir.path())).await;
    assert!(ok.success());
    assert_eq!(ok.exit_code, Some(0));
    assert_eq!(ok.output, "hi\n");
    assert_eq!(ok.describe(), "exit code 0\nhi\n");

    let three = run_ok(&spec("echo bad >&2; exit 3", dir.path())).await;
    assert!(!three.success());
    assert_eq!(three.exit_code, Some(3));
    assert_eq!(three.signal, None);
    assert_eq!(three.describe(), "exit code 3\nbad\n");

    let killed = run_ok(&spec("kill -9 $$", dir.path())).await;
    assert_eq!(killed.exit_code, None);
    assert_eq!(killed.signal, Some(9));
    assert_eq!(killed.describe(), "killed by signal 9 (SIGKILL), no output");
}

#[tokio::test]
async fn no_output_wording() {
    let dir = tempfile::tempdir().unwrap();
    let quiet = run_ok(&spec("true", dir.path())).await;
    assert_eq!(quiet.output, "");
    assert_eq!(quiet.describe(), NO_OUTPUT);
    let failed = run_ok(&spec("false", dir.path())).await;
    assert_eq!(failed.describe(), "exit code 1, no output");
}

#[tokio::test]
async fn stdout_and_stderr_interleave_in_write_order() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(&spec(
        "echo out1; echo err1 >&2; echo out2; echo err2 >&2; printf tail",
        dir.path(),
    ))
    .await;
    assert_eq!(out.output, "out1\nerr1\nout2\nerr2\ntail");
}

#[tokio::test]
async fn huge_output_keeps_head_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("seq 1 200000", dir.path());
    s.max_output_bytes = 4096;
    s.max_output_lines = 100;
    let out = run_ok(&s).await;
    assert!(out.success());
    // Every byte was counted (the sum of the lengths of "1\n".."200000\n")...
    assert_eq!(out.total_output_bytes, 1_288_895);
    // ...but only the budget (plus the marker line) was kept.
    assert!(out.output.len() <= 4096 + 64, "{}", out.output.len());
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(lines.len(), 101);
    assert_eq!(&lines[..3], ["1", "2", "3"]);
    assert_eq!(lines[49], "50");
    assert_eq!(lines[50], "[… 199900 lines (1288404 bytes) elided …]");
    assert_eq!(lines[51], "199951");
    assert_eq!(lines[100], "200000");
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(
        "sleep 1000 & echo $! > bg.pid; sleep 1000; wait",
        dir.path(),
    );
    s.timeout = Duration::from_millis(500);
    let out = run_ok(&s).await;
    assert!(out.timed_out);
    assert!(!out.success());
    assert_eq!(out.signal, Some(libc::SIGKILL));
    assert_eq!(
        out.describe(),
        "killed after the 0.5 s timeout (the whole process group), no output"
    );
    let bg = read_pid(&dir.path().join("bg.pid")).await;
    assert!(wait_dead(bg).await, "background child {bg} survived");
}

#[tokio::test]
async fn cancellation_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        "echo started; sleep 1000 & echo $! > bg.pid; sleep 1000; wait",
        dir.path(),
    );
    let cancel = CancellationToken::new();
    let task = {
        let cancel = cancel.clone();
        tokio::spawn(async move { run(&s, &cancel).await })
    };
    let bg = read_pid(&dir.path().join("bg.pid")).await;
    cancel.cancel();
    let out = tokio::time::timeout(TEST_LIMIT, task)
        .await
        .expect("cancel did not stop the run")
        .unwrap()
        .unwrap();
    assert!(out.cancelled);
    assert!(!out.timed_out);
    assert_eq!(out.describe(), "cancelled\nstarted\n");
    assert!(wait_dead(bg).await, "background child {bg} survived");
}

#[tokio::test]
async fn dropping_the_future_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec("sleep 1000 & echo $! > bg.pid; sleep 1000", dir.path());
    let cancel = CancellationToken::new();
    let pid_file = dir.path().join("bg.pid");
    let bg = tokio::select! {
        _ = run(&s, &cancel) => panic!("the command ended by itself"),
        bg = read_pid(&pid_file) => bg,
    };
    // The run future is dropped here.
    assert!(
        wait_dead(bg).await,
        "background child {bg} survived the drop"
    );
}

#[tokio::test]
async fn background_child_holding_the_pipe_does_not_hang_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(&spec(
        "sleep 1000 & echo $! > bg.pid; echo done",
        dir.path(),
    ))
    .await;
    assert!(out.success());
    assert_eq!(out.output, "done\n");
    let bg = read_pid(&dir.path().join("bg.pid")).await;
    assert!(
        wait_dead(bg).await,
        "background child {bg} outlived the run"
    );
}

#[tokio::test]
async fn environment_is_scrubbed() {
    crate::isolated::alone!(environment_is_scrubbed);
    // Process-wide: this test runs alone in its own process.
    std::env::set_var("FETTLE_TEST_API_KEY", "k1");
    std::env::set_var("MY_TOKEN", "t1");
    std::env::set_var("fettle_test_lower_secret", "s1");
    std::env::set_var("FETTLE_TEST_ALLOWED_PASSWORD", "p1");
    std::env::set_var("FETTLE_TEST_PLAIN", "plain");
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("env", dir.path());
    s.env_allow = vec!["FETTLE_TEST_ALLOWED_PASSWORD".to_string()];
    s.max_output_bytes = 1 << 20;
    s.max_output_lines = 100_000;
    let out = run_ok(&s).await;
    let vars: Vec<&str> = out.output.lines().collect();
    assert!(vars.contains(&"FETTLE_TEST_PLAIN=plain"), "{vars:?}");
    assert!(
        vars.contains(&"FETTLE_TEST_ALLOWED_PASSWORD=p1"),
        "{vars:?}"
    );
    for hidden in [
        "FETTLE_TEST_API_KEY",
        "MY_TOKEN",
        "fettle_test_lower_secret",
    ] {
        assert!(
            !vars.iter().any(|v| v.starts_with(&format!("{hidden}="))),
            "{hidden} leaked: {vars:?}"
        );
    }
    // PATH is kept: commands must still be found.
    assert!(vars.iter().any(|v| v.starts_with("PATH=")));

    let direct = scrubbed_env(&[]);
    assert!(direct.iter().all(|(k, _)| k != "MY_TOKEN"));
    assert!(direct.iter().any(|(k, _)| k == "FETTLE_TEST_PLAIN"));
}

#[tokio::test]
async fn runs_in_the_given_cwd() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let out = run_ok(&spec("pwd -P", &dir.path().join("sub"))).await;
    let expected = dir.path().join("sub").canonicalize().unwrap();
    assert_eq!(out.output.trim_end(), expected.to_str().unwrap());
}

#[tokio::test]
async fn missing_cwd_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(
        &spec("true", &dir.path().join("nope")),
        &CancellationToken::new(),
    )
    .await;
    assert!(result.is_err());
}

#[tokio::test]
async fn file_size_limit_stops_big_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("head -c 2000000 /dev/zero > f", dir.path());
    s.limits.file_size_bytes = 1_000_000;
    let out = run_ok(&s).await;
    assert!(!out.success(), "{out:?}");
    let size = std::fs::metadata(dir.path().join("f")).unwrap().len();
    assert!(size <= 1_000_000, "{size}");

    // The same command passes under the default limit.
    let out = run_ok(&spec("head -c 2000000 /dev/zero > g", dir.path())).await;
    assert!(out.success(), "{out:?}");
    assert_eq!(
        std::fs::metadata(dir.path().join("g")).unwrap().len(),
        2_000_000
    );
}

#[tokio::test]
async fn memory_limit_stops_big_allocations() {
    let dir = tempfile::tempdir().unwrap();
    // A shell builtin loop would not allocate; `head` into a variable does,
    // through the shell's own memory.
    let mut s = spec(
        "x=$(head -c 600000000 /dev/zero | tr '\\0' a); echo ${#x}",
        dir.path(),
    );
    s.limits.memory_bytes = 256 << 20;
    let out = run_ok(&s).await;
    assert!(!out.success(), "{out:?}");
    assert!(
        !out.output.contains("600000000"),
        "the allocation went through: {out:?}"
    );
}
