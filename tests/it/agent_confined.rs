//! The agent's file access is confined and race-free (issue 10, point 8) and
//! refuses protected paths (point 9, file tools): a directory flipped between
//! a real directory and a symlink (to the outside, or to `.git/hooks` inside)
//! while the agent writes and reads through it, hard links to outside files,
//! and writes to `.git/`, `fettle.toml`, `.fettle/`, the test script and
//! `agent.protected_paths`, through the library and through `fettle fix`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // in tests a panic is the failure report

use crate::agent_common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use agent_common::{fettle, Mock};
use fettle::agent::confined::{Confined, Refusal, Resolver};
use fettle::agent::paths::{PathError, WorkspacePaths};
use fettle::agent::protected::Protected;
use fettle::mock::{MockToolCall, Script, ScriptedResponse};
use serde_json::{json, Value};

const OUTSIDE: &str = "OUTSIDE-CONTENT-7f3a\n";
const ROUNDS: usize = 1000;

/// A thread swapping `ws/d` between a real directory and a symlink to
/// `target` as fast as it can (`renameat2(RENAME_EXCHANGE)` with `ws/d-other`,
/// so `d` always exists), until stopped.
struct Flipper {
    stop: Arc<AtomicBool>,
    flips: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Flipper {
    fn start(ws: &Path, target: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flips = Arc::new(AtomicU64::new(0));
        fs::create_dir_all(ws.join("d")).unwrap();
        std::os::unix::fs::symlink(target, ws.join("d-other")).unwrap();
        let c =
            |p: PathBuf| std::ffi::CString::new(p.into_os_string().into_encoded_bytes()).unwrap();
        let (d, other) = (c(ws.join("d")), c(ws.join("d-other")));
        let thread = {
            let (stop, flips) = (stop.clone(), flips.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: two NUL-terminated paths that outlive the call.
                    let ret = unsafe {
                        libc::renameat2(
                            libc::AT_FDCWD,
                            d.as_ptr(),
                            libc::AT_FDCWD,
                            other.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    };
                    assert_eq!(ret, 0, "renameat2: {}", std::io::Error::last_os_error());
                    flips.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        Self {
            stop,
            flips,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        self.flips.load(Ordering::Relaxed)
    }
}

impl Drop for Flipper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Every entry under `dir`, recursively, relative, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            out.push(
                path.strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
            if entry.file_type().unwrap().is_dir() {
                walk(base, &path, out);
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A workspace `ws/` (with `.git/hooks/`) and a sibling `outside/x.txt`.
fn workspace() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("x.txt"), OUTSIDE).unwrap();
    let ws = ws.canonicalize().unwrap();
    let outside = outside.canonicalize().unwrap();
    (tmp, ws, outside)
}

/// What the task does for `write_file d/x.txt` and `read_file d/x.txt`: the
/// friendly path check, then the confined operation. 1,000 of each while
/// `d` flips: every write lands inside (or is refused) and every read
/// returns inside content (or is refused).
fn stress(resolver: Resolver, target_inside_git: bool) {
    let (_tmp, ws, outside) = workspace();
    let hooks = ws.join(".git/hooks");
    let target = if target_inside_git { &hooks } else { &outside };
    let paths = WorkspacePaths::new(&ws).unwrap();
    let disk = Confined::open_root_with(&ws, resolver).unwrap();
    let flipper = Flipper::start(&ws, target);
    let (mut wrote, mut read) = (0, 0);
    for i in 0..ROUNDS {
        if let Ok(path) = paths.resolve_for_write("d/x.txt") {
            if disk
                .write_atomic(&path, format!("inside {i}\n").as_bytes(), None)
                .is_ok()
            {
                wrote += 1;
            }
        }
        if let Ok(path) = paths.resolve("d/x.txt") {
            if let Ok(Some(bytes)) = disk.read(&path) {
                let text = String::from_utf8_lossy(&bytes);
                assert!(
                    text.starts_with("inside "),
                    "read returned {text:?}, not a file of the workspace"
                );
                read += 1;
            }
        }
    }
    let flips = flipper.stop();
    eprintln!(
        "{resolver:?}, target {}: {wrote} writes and {read} reads of {ROUNDS} went through, {flips} flips",
        target.display()
    );
    assert!(flips > 0, "the flipper never ran");
    assert_eq!(listing(&outside), ["x.txt"], "files appeared outside");
    assert_eq!(fs::read_to_string(outside.join("x.txt")).unwrap(), OUTSIDE);
    assert!(listing(&hooks).is_empty(), "files appeared in .git/hooks");
    // With `d` a plain directory again, the same write goes through.
    let _ = fs::remove_file(ws.join("d"));
    let _ = fs::remove_file(ws.join("d-other"));
    let _ = fs::rename(ws.join("d-other"), ws.join("d"));
    let path = paths.resolve_for_write("d/x.txt").unwrap();
    disk.write_atomic(&path, b"inside\n", None).unwrap();
    assert_eq!(disk.read(&path).unwrap().unwrap(), b"inside\n");
}

fn have_openat2() -> bool {
    let dir = tempfile::tempdir().unwrap();
    let ok = Confined::open_root(dir.path()).unwrap().resolver() == Resolver::Openat2;
    if !ok {
        eprintln!("skipping: openat2 is not available on this kernel");
    }
    ok
}

#[test]
fn flipping_directory_to_the_outside_openat2() {
    if have_openat2() {
        stress(Resolver::Openat2, false);
    }
}

#[test]
fn flipping_directory_to_the_outside_walk() {
    stress(Resolver::Walk, false);
}

#[test]
fn flipping_directory_to_git_hooks_inside() {
    stress(Resolver::Walk, true);
    if have_openat2() {
        stress(Resolver::Openat2, true);
    }
}

#[test]
fn protected_paths_are_refused_for_writes() {
    let (_tmp, ws, _outside) = workspace();
    fs::write(ws.join("run_tests.sh"), "exit 1\n").unwrap();
    fs::create_dir_all(ws.join("conf")).unwrap();
    fs::write(ws.join("conf/real.toml"), "").unwrap();
    std::os::unix::fs::symlink("conf/real.toml", ws.join("fettle.toml")).unwrap();
    std::os::unix::fs::symlink(".git/hooks", ws.join("hooks")).unwrap();
    let protected = Protected::new(&ws, &["docs/".to_owned()], Some("sh ./run_tests.sh -q"));
    let paths = WorkspacePaths::new(&ws).unwrap().with_protected(protected);
    for (given, why) in [
        (".git/hooks/post-commit", "inside .git/"),
        ("hooks/post-commit", "inside .git/"),
        ("sub/.git/config", "inside .git/"),
        ("fettle.toml", "Fettle's own configuration"),
        (".fettle/x", "inside .fettle/"),
        ("run_tests.sh", "the test command runs it"),
        ("./run_tests.sh", "the test command runs it"),
        ("docs/guide.md", "listed in agent.protected_paths"),
    ] {
        let err = paths.resolve_for_write(given).unwrap_err();
        assert!(
            matches!(err, PathError::Protected { .. }),
            "{given}: {err:?}"
        );
        assert!(err.to_string().contains(why), "{given}: {err}");
        assert!(
            err.to_string().contains("must not modify"),
            "{given}: {err}"
        );
    }
    for fine in [
        "src/lib.rs",
        "sub/fettle.toml",
        "docsx/a.md",
        "run_tests.py",
    ] {
        assert!(paths.resolve_for_write(fine).is_ok(), "{fine}");
    }
    // Reading them stays allowed.
    assert!(paths.resolve("run_tests.sh").is_ok());
}

#[test]
fn refusals_say_why_for_the_model() {
    let (_tmp, ws, outside) = workspace();
    fs::hard_link(outside.join("x.txt"), ws.join("h.txt")).unwrap();
    let disk = Confined::open_root(&ws).unwrap();
    let err = disk.read("h.txt").unwrap_err();
    assert!(matches!(
        Refusal::of(&err),
        Some(Refusal::HardLink { links: 2, .. })
    ));
    assert!(err.to_string().contains("agent.allow_hardlinks"), "{err}");
    std::os::unix::fs::symlink(&outside, ws.join("d")).unwrap();
    let err = disk.write_atomic("d/x.txt", b"boom", None).unwrap_err();
    assert!(
        matches!(Refusal::of(&err), Some(Refusal::Symlink { .. })),
        "{err}"
    );
    assert_eq!(fs::read_to_string(outside.join("x.txt")).unwrap(), OUTSIDE);
}

// ---- through `fettle fix`, with the mock model ----

struct Run {
    result: Value,
    bodies: Vec<String>,
}

/// Runs `fettle fix` on `ws` with the mock answering `responses`; the
/// configuration goes in the user's own config (trusted), not the
/// workspace's.
fn fix(ws: &Path, cache: &Path, responses: Vec<ScriptedResponse>, agent_extra: &str) -> Run {
    let mock = Mock::start(Script::new(responses));
    let user = cache.join("no-user-config/fettle");
    fs::create_dir_all(&user).unwrap();
    fs::write(user.join("config.toml"), mock.config(agent_extra)).unwrap();
    let out = fettle(
        &[
            "fix",
            "--json",
            "--goal",
            "tidy up",
            "--test",
            "true",
            ws.to_str().unwrap(),
        ],
        cache,
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a task result ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Run {
        result,
        bodies: mock.bodies(),
    }
}

fn turn(calls: Vec<MockToolCall>) -> ScriptedResponse {
    ScriptedResponse {
        tool_calls: calls,
        ..ScriptedResponse::text("")
    }
}

#[test]
fn fettle_fix_writes_and_reads_race_a_flipping_directory_and_stay_inside() {
    const TURNS: usize = 150;
    let (tmp, ws, outside) = workspace();
    let cache = tmp.path().join("cache");
    let mut responses: Vec<ScriptedResponse> = (0..TURNS)
        .map(|i| {
            turn(vec![
                MockToolCall::new(
                    "write_file",
                    json!({ "path": "d/x.txt", "content": format!("inside {i}\n") }),
                ),
                MockToolCall::new("read_file", json!({ "path": "d/x.txt" })),
            ])
        })
        .collect();
    responses.push(ScriptedResponse::text("Done."));
    let flipper = Flipper::start(&ws, &outside);
    let run = fix(
        &ws,
        &cache,
        responses,
        "commands = \"never\"\nmax_tool_calls = 10000\nmax_tokens = 1000000000\n",
    );
    let flips = flipper.stop();
    eprintln!(
        "{flips} flips during the task; status {}",
        run.result["status"]
    );
    assert!(flips > 0);
    // Every turn ran; one more request when the directory was flipped
    // away as the attempt ended (nothing changed then, while the tests
    // passed before: another attempt is asked for).
    assert!(
        (TURNS + 1..=TURNS + 2).contains(&run.bodies.len()),
        "{} requests: {:#}",
        run.bodies.len(),
        run.result
    );
    assert_eq!(listing(&outside), ["x.txt"], "files appeared outside");
    assert_eq!(fs::read_to_string(outside.join("x.txt")).unwrap(), OUTSIDE);
    for (i, body) in run.bodies.iter().enumerate() {
        assert!(
            !body.contains("OUTSIDE-CONTENT"),
            "request #{i} carries the outside file's content"
        );
    }
}

#[test]
fn fettle_fix_refuses_hard_links_unless_allowed() {
    for allow in [false, true] {
        let (tmp, ws, outside) = workspace();
        let cache = tmp.path().join("cache");
        fs::hard_link(outside.join("x.txt"), ws.join("h.txt")).unwrap();
        let responses = vec![
            turn(vec![MockToolCall::new(
                "read_file",
                json!({ "path": "h.txt" }),
            )]),
            turn(vec![MockToolCall::new(
                "write_file",
                json!({ "path": "h.txt", "content": "changed\n" }),
            )]),
            ScriptedResponse::text("Done."),
        ];
        let run = fix(
            &ws,
            &cache,
            responses,
            &format!("commands = \"never\"\nallow_hardlinks = {allow}\n"),
        );
        // Refused, nothing changed while the tests passed before too: one
        // more attempt is asked for (and finds the script at its end).
        let requests = if allow { 3 } else { 4 };
        assert_eq!(run.bodies.len(), requests, "{:#}", run.result);
        // Whatever happens, the other name's bytes stay.
        assert_eq!(fs::read_to_string(outside.join("x.txt")).unwrap(), OUTSIDE);
        if allow {
            assert!(run.bodies[1].contains("OUTSIDE-CONTENT"));
            assert_eq!(fs::read_to_string(ws.join("h.txt")).unwrap(), "changed\n");
        } else {
            for body in &run.bodies {
                assert!(!body.contains("OUTSIDE-CONTENT"), "the hard link was read");
            }
            for i in [1, 2] {
                assert!(
                    run.bodies[i].contains("has 2 hard links")
                        && run.bodies[i].contains("agent.allow_hardlinks"),
                    "request #{i} does not say why: {}",
                    run.bodies[i]
                );
            }
            assert_eq!(fs::read_to_string(ws.join("h.txt")).unwrap(), OUTSIDE);
        }
    }
}

#[test]
fn fettle_fix_refuses_configured_protected_paths() {
    let (tmp, ws, _outside) = workspace();
    let cache = tmp.path().join("cache");
    fs::create_dir_all(ws.join("docs")).unwrap();
    fs::write(ws.join("docs/guide.md"), "guide\n").unwrap();
    fs::write(ws.join("Makefile"), "all:\n").unwrap();
    let responses = vec![
        turn(vec![
            MockToolCall::new(
                "write_file",
                json!({ "path": "docs/guide.md", "content": "rewritten\n" }),
            ),
            MockToolCall::new(
                "edit",
                json!({ "path": "Makefile", "search": "all:\n", "replace": "all: evil\n" }),
            ),
        ]),
        ScriptedResponse::text("Done."),
    ];
    let run = fix(
        &ws,
        &cache,
        responses,
        "commands = \"never\"\nprotected_paths = [\"docs/\", \"Makefile\"]\n",
    );
    // Every write refused, the tests passing before too: a second attempt
    // is asked for (and finds the script at its end).
    assert_eq!(run.bodies.len(), 3, "{:#}", run.result);
    assert_eq!(run.result["status"], "failed");
    assert!(
        run.bodies[1].contains(
            "is inside docs/, which the agent must not modify: listed in agent.protected_paths"
        ),
        "{}",
        run.bodies[1]
    );
    assert!(
        run.bodies[1].contains("is protected (Makefile)"),
        "{}",
        run.bodies[1]
    );
    assert_eq!(
        fs::read_to_string(ws.join("docs/guide.md")).unwrap(),
        "guide\n"
    );
    assert_eq!(fs::read_to_string(ws.join("Makefile")).unwrap(), "all:\n");
}

#[test]
fn fettle_fix_symlinks_inside_the_workspace_keep_working() {
    let (tmp, ws, _outside) = workspace();
    let cache = tmp.path().join("cache");
    fs::create_dir_all(ws.join("src")).unwrap();
    fs::write(ws.join("src/a.py"), "A = 'through the link'\n").unwrap();
    std::os::unix::fs::symlink("src", ws.join("lib")).unwrap();
    std::os::unix::fs::symlink(ws.join("src/a.py"), ws.join("abs-link.py")).unwrap();
    let responses = vec![
        turn(vec![
            MockToolCall::new("read_file", json!({ "path": "lib/a.py" })),
            MockToolCall::new("read_file", json!({ "path": "abs-link.py" })),
            MockToolCall::new(
                "write_file",
                json!({ "path": "lib/b.py", "content": "B = 1\n" }),
            ),
        ]),
        ScriptedResponse::text("Done."),
    ];
    let run = fix(&ws, &cache, responses, "commands = \"never\"\n");
    assert_eq!(run.bodies.len(), 2, "{:#}", run.result);
    assert_eq!(
        run.bodies[1]
            .matches(r#"source=\"read_file\">\n1│ A = 'through the link'"#)
            .count(),
        2,
        "{}",
        run.bodies[1]
    );
    assert_eq!(fs::read_to_string(ws.join("src/b.py")).unwrap(), "B = 1\n");
    assert!(fs::symlink_metadata(ws.join("lib"))
        .unwrap()
        .file_type()
        .is_symlink());
}
