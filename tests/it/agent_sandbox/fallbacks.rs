//! The weaker sandboxes (no namespaces, Landlock only) and killing what escapes: leftovers, timeouts, cancellation, drop.

use super::*;

/// Where namespaces (or Landlock too) are missing, the fallbacks still
/// hold what they promise: no process outlives the command (the runner is
/// a subreaper), and with Landlock nothing outside is written (the real
/// /tmp neither: TMPDIR is the private dir).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallbacks_kill_leftovers_and_landlock_still_confines_writes() {
    crate::isolated::alone!(fallbacks_kill_leftovers_and_landlock_still_confines_writes);
    for landlock in [true, false] {
        let mut fx = fixture(true);
        fx.policy.namespaces = false;
        fx.policy.landlock = landlock;
        let mark = format!("3002.{}{}", std::process::id(), u8::from(landlock));
        let tmp_file = std::env::temp_dir().join(format!("fettle-fallback-{mark}"));
        let command = format!(
            "setsid sleep {mark} >/dev/null 2>&1 & python3 -c 'import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp(\"sleep\", [\"sleep\", \"{mark}\"])\n    os._exit(0)\nos.wait()'; echo x > {tmp}; echo y > \"$TMPDIR/mine\" && echo private-ok; rm -f fettle.toml; echo 'sandbox = \"off\"' > fettle.toml",
            tmp = tmp_file.display()
        );
        let out = run_in(&fx, &command).await;
        let left = processes_with(&format!("sleep\0{mark}"));
        kill_all(&left);
        assert!(
            left.is_empty(),
            "landlock={landlock}: {} process(es) outlived the command",
            left.len()
        );
        assert!(out.output.contains("private-ok"), "{}", out.describe());
        // Restored after the command, with or without Landlock.
        assert_eq!(
            std::fs::read_to_string(fx.ws.join("fettle.toml")).unwrap(),
            "[agent]\nsandbox = \"auto\"\n",
            "landlock={landlock}"
        );
        let wrote_tmp = tmp_file.exists();
        let _ = std::fs::remove_file(&tmp_file);
        assert_eq!(wrote_tmp, !landlock, "landlock={landlock}: /tmp written?");
    }
}

/// Landlock without namespaces keeps the workspace root from losing or
/// renaming entries (so `.git` stays): a directory a command makes there
/// has only those rights until the command ends. The failure comes with a
/// note that says so, and the next command has every right in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_namespaces_a_new_top_directory_is_writable_from_the_next_command() {
    crate::isolated::alone!(
        without_namespaces_a_new_top_directory_is_writable_from_the_next_command
    );
    let mut fx = fixture(true);
    fx.policy.namespaces = false;
    fx.policy.landlock = true;
    if !fx.policy.confines() {
        eprintln!("skipped: no Landlock here");
        return;
    }
    let first = run_in(
        &fx,
        "mkdir build && echo x > build/a.tmp && mv build/a.tmp build/a",
    )
    .await;
    assert_ne!(first.exit_code, Some(0), "{}", first.describe());
    assert!(
        first
            .output
            .contains("made build/ at the top of the workspace")
            && first.output.contains("run it again"),
        "{}",
        first.describe()
    );
    let second = run_in(
        &fx,
        "echo x > build/b.tmp && mv build/b.tmp build/b && rm build/a.tmp && echo renamed-ok",
    )
    .await;
    assert!(
        second.output.contains("renamed-ok"),
        "{}",
        second.describe()
    );
    assert!(
        !second.output.contains("at the top of the workspace"),
        "{}",
        second.describe()
    );
    assert!(fx.ws.join("build/b").exists() && !fx.ws.join("build/a.tmp").exists());
    // A Cargo project gets `target/` made before the command: cargo's
    // first build makes it by renaming a temporary directory into place.
    std::fs::write(fx.ws.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    let cargo_like = run_in(
        &fx,
        "mkdir target/debug && echo x > target/debug/a.tmp && mv target/debug/a.tmp target/debug/a && echo built-ok",
    )
    .await;
    assert!(
        cargo_like.output.contains("built-ok"),
        "{}",
        cargo_like.describe()
    );
    assert!(
        cargo_like.output.contains("made target/"),
        "{}",
        cargo_like.describe()
    );
    // The price stays: `.git` can be neither renamed nor removed.
    let git = run_in(&fx, "mv .git .git-away; rm -rf .git; ls -d .git").await;
    assert!(fx.ws.join(".git/HEAD").exists(), "{}", git.describe());
}

/// A timeout, a cancellation and a dropped run: through the runner, the
/// escaped (`setsid`) processes die as well as the group, with and
/// without namespaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_cancel_and_drop_kill_escaped_processes_too() {
    crate::isolated::alone!(timeout_cancel_and_drop_kill_escaped_processes_too);
    for namespaces in [true, false] {
        for how in ["timeout", "cancel", "drop"] {
            let mut fx = fixture(false);
            fx.policy.namespaces = namespaces;
            let mark = format!(
                "3004.{}{}{}",
                std::process::id(),
                u8::from(namespaces),
                how.len()
            );
            let mut spec = CommandSpec::new(
                format!("setsid sleep {mark} >/dev/null 2>&1 & sleep {mark}"),
                &fx.ws,
            );
            spec.sandbox = Some(fx.policy.clone());
            let needle = format!("sleep\0{mark}");
            let cancel = CancellationToken::new();
            match how {
                "timeout" => {
                    spec.timeout = Duration::from_secs(1);
                    let out = run(&spec, &cancel).await.unwrap();
                    assert!(out.timed_out, "{}", out.describe());
                }
                "cancel" => {
                    let canceller = cancel.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(800)).await;
                        canceller.cancel();
                    });
                    let out = run(&spec, &cancel).await.unwrap();
                    assert!(out.cancelled, "{}", out.describe());
                }
                _ => {
                    let dropped =
                        tokio::time::timeout(Duration::from_millis(800), run(&spec, &cancel)).await;
                    assert!(dropped.is_err(), "the run ended by itself");
                }
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut left = processes_with(&needle);
            while !left.is_empty() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
                left = processes_with(&needle);
            }
            kill_all(&left);
            assert!(
                left.is_empty(),
                "namespaces={namespaces}, {how}: {} process(es) left",
                left.len()
            );
        }
    }
}
