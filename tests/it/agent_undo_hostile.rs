//! Undo and the sandbox's lesser holes, attacked through the real `fettle
//! fix` (the mock model scripts `run_command` and `write_file`), `fettle
//! fix --undo` and the real `fettle sandbox-exec`:
//!
//! * a command moves a gitignored file (`local/notes.txt`) and one from
//!   `node_modules/` into the tracked tree: undo and the automatic restore
//!   of a task that gives up must not delete them (they existed before the
//!   task: their inodes are older);
//! * without namespaces (`FETTLE_SANDBOX_DISABLE=namespaces`), `mv .git
//!   .git-away && mkdir .git` must be refused by Landlock, and `.git/` (its
//!   history) be intact after undo;
//! * a checkpoint manifest whose `root` was changed is refused by undo;
//! * a `write_file` 2,000 directories deep is refused at once;
//! * the default Python checker does not run a workspace `py_compile.py`;
//! * a fork bomb run as root stops at the process limit.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent_common::{fettle_command, Mock};
use fettle::mock::Script;
use serde_json::Value;

const NOTES: &str = "my private notes, in no version control\n";
const DATA: &str = "{\"vendored\": true}\n";

/// A workspace with a git history, a gitignored file and a vendored one.
fn workspace(temp: &Path) -> PathBuf {
    let ws = temp.join("ws");
    for (rel, text) in [
        (".gitignore", "local/\nnode_modules/\n"),
        ("app.py", "X = 1\n"),
        ("local/notes.txt", NOTES),
        ("node_modules/pkg/data.json", DATA),
        (".git/HEAD", "ref: refs/heads/main\n"),
        (
            ".git/refs/heads/main",
            "0123456789abcdef0123456789abcdef01234567\n",
        ),
        (".git/objects/01/23456789abcdef", "history\n"),
        (".git/config", "[core]\n\tbare = false\n"),
    ] {
        let path = ws.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    ws.canonicalize().unwrap()
}

/// The bytes of every file under `dir` (relative path → content).
fn tree(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, root: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                walk(&path, root, out);
            } else if kind.is_file() {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = Default::default();
    walk(dir, dir, &mut out);
    out
}

/// `fettle fix` in `ws` with the scripted answers; the JSON result and
/// stderr.
fn fix(
    ws: &Path,
    cache: &Path,
    script: Value,
    extra_args: &[&str],
    env: &[(&str, &str)],
) -> (Value, String, Mock) {
    let mock = Mock::start(Script::from_json(&script.to_string()).unwrap());
    std::fs::write(ws.join("fettle.toml"), mock.config("")).unwrap();
    let mut args = vec!["fix", "--json", "--yes"];
    args.extend_from_slice(extra_args);
    args.push(ws.to_str().unwrap());
    let mut command = fettle_command(&args, cache);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (result, stderr, mock)
}

fn undo(ws: &Path, cache: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let mut command = fettle_command(&["fix", "--undo", ws.to_str().unwrap()], cache);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run_command(command: &str, then: &[&str]) -> Value {
    let mut responses = vec![serde_json::json!({
        "text": "",
        "tool_calls": [ { "name": "run_command", "arguments": { "command": command } } ]
    })];
    for text in then {
        responses.push(serde_json::json!({ "text": text }));
    }
    serde_json::json!({ "responses": responses })
}

/// Both moved files' data is somewhere in the workspace: at the new path
/// (left there) or back at the old one.
fn assert_moved_data_survives(ws: &Path, when: &str) {
    let kept = |new: &str, old: &str, text: &str| {
        [new, old]
            .iter()
            .any(|rel| std::fs::read_to_string(ws.join(rel)).is_ok_and(|t| t == text))
    };
    assert!(
        kept("notes.txt", "local/notes.txt", NOTES),
        "{when}: the moved gitignored file is gone: {:?}",
        tree(ws).keys().collect::<Vec<_>>()
    );
    assert!(
        kept("data.json", "node_modules/pkg/data.json", DATA),
        "{when}: the file moved out of node_modules/ is gone: {:?}",
        tree(ws).keys().collect::<Vec<_>>()
    );
}

const MOVE_IN: &str =
    "mv local/notes.txt notes.txt && mv node_modules/pkg/data.json data.json && echo made > out.txt";

/// A command moves a gitignored file and a vendored one into the tracked
/// tree; the task succeeds; `--undo` removes what the task made (out.txt)
/// and leaves the moved files, whose data existed before the task.
#[test]
fn undo_keeps_files_a_command_moved_into_the_tree() {
    let temp = tempfile::tempdir().unwrap();
    let ws = workspace(temp.path());
    let cache = temp.path().join("cache");
    let (result, stderr, _mock) = fix(
        &ws,
        &cache,
        run_command(MOVE_IN, &["Done."]),
        &["--goal", "make out.txt", "--test", "test -f out.txt"],
        &[],
    );
    assert_eq!(result["status"], "success", "{result:#}\n{stderr}");
    assert!(ws.join("notes.txt").exists() && ws.join("out.txt").exists());
    let (code, stderr) = undo(&ws, &cache, &[]);
    assert!(!ws.join("out.txt").exists(), "undo did not run: {stderr}");
    assert_moved_data_survives(&ws, "after undo");
    assert!(code == 0 || code == 1, "undo failed ({code}): {stderr}");
}

/// The same moves in a task that gives up: the automatic restore must
/// keep them too (and still remove out.txt).
#[test]
fn the_gave_up_restore_keeps_files_a_command_moved_into_the_tree() {
    let temp = tempfile::tempdir().unwrap();
    let ws = workspace(temp.path());
    let cache = temp.path().join("cache");
    let (result, stderr, _mock) = fix(
        &ws,
        &cache,
        run_command(MOVE_IN, &["Done.", "The test always fails."]),
        &[
            "--goal",
            "make out.txt",
            "--test",
            "exit 1",
            "--max-iterations",
            "1",
        ],
        &[],
    );
    assert_eq!(result["status"], "gave_up", "{result:#}\n{stderr}");
    assert!(!ws.join("out.txt").exists(), "no restore ran: {stderr}");
    assert_moved_data_survives(&ws, "after the gave-up restore");
    undo(&ws, &cache, &[]);
    assert_moved_data_survives(&ws, "after undo of the gave-up task");
}

/// Without namespaces, Landlock keeps `.git` in place: renaming it away,
/// replacing it, deleting its files and writing into it are refused, and
/// after undo the history is there, byte for byte.
#[test]
fn git_stays_in_place_without_namespaces_and_after_undo() {
    if !fettle::agent::sandbox::available() {
        eprintln!("skipped: no Landlock on this kernel");
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let ws = workspace(temp.path());
    let cache = temp.path().join("cache");
    let git_before = tree(&ws.join(".git"));
    let env = [("FETTLE_SANDBOX_DISABLE", "namespaces")];
    let attack = "mv .git .git-away && mkdir .git; rm -rf .git/objects .git/refs; mv .git/HEAD HEAD.stolen; echo evil > .git/hooks-post-commit; mkdir -p .git/hooks && echo evil > .git/hooks/post-commit; printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config; echo made > out.txt";
    let (result, stderr, _mock) = fix(
        &ws,
        &cache,
        run_command(attack, &["Done."]),
        &["--goal", "make out.txt", "--test", "test -f out.txt"],
        &env,
    );
    assert_eq!(result["status"], "success", "{result:#}\n{stderr}");
    assert!(!ws.join(".git-away").exists(), ".git was renamed away");
    assert_eq!(
        tree(&ws.join(".git")),
        git_before,
        ".git changed by the command"
    );
    let (_, stderr) = undo(&ws, &cache, &env);
    assert!(!ws.join("out.txt").exists(), "undo did not run: {stderr}");
    assert_eq!(
        tree(&ws.join(".git")),
        git_before,
        ".git after undo: {stderr}"
    );
}

/// A manifest whose `root` now names another directory is refused by
/// undo, which writes nothing there.
#[test]
fn undo_refuses_a_manifest_changed_behind_its_back() {
    let temp = tempfile::tempdir().unwrap();
    let ws = workspace(temp.path());
    let cache = temp.path().join("cache");
    let script = serde_json::json!({ "responses": [
        { "text": "", "tool_calls": [ { "name": "write_file",
            "arguments": { "path": "app.py", "content": "X = 2\n" } } ] },
        { "text": "Done." }
    ] });
    let (result, stderr, _mock) = fix(
        &ws,
        &cache,
        script,
        &[
            "--goal",
            "set X",
            "--test",
            "grep -rq 'X = 2' --include=*.py .",
        ],
        &[],
    );
    assert_eq!(
        result["status"],
        "success",
        "{result:#}\n{stderr}\n{:?}",
        _mock.bodies()
    );
    let victim = temp.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("app.py"), "someone else's\n").unwrap();
    let manifest = walkdir_manifest(&cache.join("tasks"));
    let mut json: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    json["root"] = Value::from(victim.display().to_string());
    for file in json["files"].as_array_mut().unwrap() {
        let path = file["path"]
            .as_str()
            .unwrap()
            .replace(ws.to_str().unwrap(), victim.to_str().unwrap());
        file["path"] = Value::from(path);
    }
    std::fs::write(&manifest, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    let (code, stderr) = undo(&ws, &cache, &[]);
    assert_eq!(
        std::fs::read_to_string(victim.join("app.py")).unwrap(),
        "someone else's\n"
    );
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("not signed"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).unwrap(),
        "X = 2\n"
    );
}

fn walkdir_manifest(dir: &Path) -> PathBuf {
    for hash in std::fs::read_dir(dir).unwrap().flatten() {
        for task in std::fs::read_dir(hash.path()).unwrap().flatten() {
            let manifest = task.path().join("manifest.json");
            if manifest.exists() {
                return manifest;
            }
        }
    }
    panic!("no manifest under {}", dir.display());
}

/// `write_file` 2,000 directories deep: refused at once with a message
/// the model can act on, nothing created.
#[test]
fn a_write_thousands_of_directories_deep_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let ws = workspace(temp.path());
    let cache = temp.path().join("cache");
    let deep = format!("{}x.py", "d/".repeat(2000));
    let script = serde_json::json!({ "responses": [
        { "text": "", "tool_calls": [ { "name": "write_file",
            "arguments": { "path": deep, "content": "X = 1\n" } } ] },
        { "text": "Done." },
        { "text": "Gave up." }
    ] });
    let (result, stderr, mock) = fix(
        &ws,
        &cache,
        script,
        &[
            "--goal",
            "deep",
            "--test",
            "exit 1",
            "--max-iterations",
            "1",
        ],
        &[],
    );
    assert!(!result.is_null(), "{stderr}");
    let bodies = mock.bodies().join("\n");
    assert!(
        bodies.contains("directories deep"),
        "the model was not told: {}",
        crate::agent_common::clip(&bodies, 3000)
    );
    assert!(!ws.join("d").exists(), "directories were created");
}

/// The default Python checker (`py_compile`, when neither ruff nor
/// pyflakes is installed) must not import a `py_compile.py` the workspace
/// holds.
#[tokio::test]
async fn the_python_checker_does_not_run_a_workspace_py_compile() {
    crate::isolated::alone!(the_python_checker_does_not_run_a_workspace_py_compile);
    use fettle::agent::checkers::{run_checkers, RunSettings};
    // Only the system's python3 (no ruff, no pyflakes): py_compile.
    std::env::set_var("PATH", "/usr/bin:/bin");
    if !fettle::agent::checkers::on_path("python3") {
        eprintln!("skipped: no python3 in /usr/bin");
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().canonicalize().unwrap();
    std::fs::write(
        ws.join("py_compile.py"),
        "open('PWNED', 'w').write('ran')\nimport sys\nsys.exit(0)\n",
    )
    .unwrap();
    std::fs::write(ws.join("broken.py"), "def f(:\n    pass\n").unwrap();
    let config = fettle::config::CheckConfig::default();
    let found = fettle::agent::checkers::detect(&ws, &config, &[], Some("python"));
    assert_eq!(found.checkers.len(), 1, "{:?}", found.missing);
    assert_eq!(found.checkers[0].name, "py_compile");
    let settings = RunSettings {
        root: &ws,
        timeout: Duration::from_secs(60),
        allow_env: &[],
        limits: fettle::agent::exec::Limits::default(),
        sandbox: None,
    };
    let report = run_checkers(
        &found.checkers,
        None,
        &settings,
        &tokio_util::sync::CancellationToken::new(),
    )
    .await;
    assert!(
        !ws.join("PWNED").exists(),
        "the workspace's py_compile.py ran"
    );
    assert!(
        report.runs[0]
            .diagnostics
            .iter()
            .any(|d| d.path.ends_with("broken.py")),
        "{:?}",
        report.runs[0].diagnostics
    );
}

/// A fork bomb as root: with the process limit at 300, no more than 300
/// processes exist in the sandbox (the kernel exempts uid 0 from
/// `RLIMIT_NPROC`; the PID namespace's `pid_max` holds). Small and safe:
/// 400 sleeping children at most, all killed with the command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_stops_at_the_process_limit() {
    use fettle::agent::exec::{run, CommandSpec};
    use fettle::agent::sandbox::{self, SandboxPolicy};
    let launcher = PathBuf::from(env!("CARGO_BIN_EXE_fettle"));
    let support = sandbox::probe::probe_now(&launcher);
    if !support.namespaces {
        eprintln!("skipped: no namespaces here");
        return;
    }
    // A PID namespace's own `pid_max` (what holds root) came in Linux 6.14;
    // before it only RLIMIT_NPROC, which exempts root (docs/trust/sandbox.md).
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    // SAFETY: geteuid has no preconditions.
    if version < (6, 14) && unsafe { libc::geteuid() } == 0 {
        eprintln!("skipped: Linux {version:?} as root has no per-namespace pid_max");
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().canonicalize().unwrap();
    let mut policy = SandboxPolicy::unconfined(launcher);
    policy.namespaces = true;
    let bomb = "python3 -c \"
import os, time
n = 0
for i in range(400):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    n += 1
open('count.txt', 'w').write(str(n))
\"";
    let mut spec = CommandSpec::new(bomb, &ws);
    spec.timeout = Duration::from_secs(60);
    spec.limits.processes = 300;
    spec.sandbox = Some(policy);
    let _ = tokio::time::timeout(
        Duration::from_secs(90),
        run(&spec, &tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("the fork bomb did not end");
    let count: usize = std::fs::read_to_string(ws.join("count.txt"))
        .expect("the bomb wrote no count")
        .trim()
        .parse()
        .unwrap();
    eprintln!("{count} of 400 forks succeeded with a process limit of 300");
    assert!(
        (10..300).contains(&count),
        "{count} processes forked with a limit of 300"
    );
}
