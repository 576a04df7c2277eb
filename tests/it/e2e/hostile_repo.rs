//! The hostile repository of issue 39, whole: one cloned repository with a
//! FIFO and a `/dev/zero` link for its `fettle.toml`, sources that are
//! devices and pipes, a command that prints 1 GiB and one that leaves a
//! 1 GiB file, a `.env` five directories deep, `.env.local` linked to a file
//! outside, gitignored data a command moves into the tree, and `.git` moved
//! away. Opened with `fettle serve`, `fettle check`, `fettle fix` and
//! `--undo`, it must leave every process answering, each under 500 MB of
//! memory, the repository (history and data) intact and no secret in any
//! request the model received. Each part has its own focused tests; this
//! one checks that they hold together, on one repository.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::{file_uri, Lsp};
use crate::agent_common::{fettle_command, rot13, Mock};

/// What any one Fettle process may use at its peak.
const MAX_RSS_BYTES: u64 = 500 << 20;
/// What `fettle fix --json` may print, whatever the commands printed.
const MAX_JSON_BYTES: usize = 16 << 20;
/// Any command here not done by then is hung (the test fails, never CI).
const HANG: Duration = Duration::from_secs(120);

/// A finished (or killed) process: its exit, its output (stdout kept up
/// to a cap, counted whole) and its peak RSS from `wait4`.
struct Ran {
    status: ExitStatus,
    stdout: Vec<u8>,
    stdout_len: usize,
    stderr: String,
    max_rss: u64,
    took: Duration,
    hung: bool,
}

/// Runs `cmd` to its end, or kills it after [`HANG`]; its peak RSS (and its
/// waited-for children's) comes from `wait4`, not from sampling.
#[allow(clippy::zombie_processes)] // reaped by `wait4` below, which std cannot do
fn run_bounded(cmd: &mut Command) -> Ran {
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_thread = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut total = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
            if kept.len() < (64 << 20) {
                kept.extend_from_slice(&buf[..n]);
            }
        }
        (kept, total)
    });
    let err_thread = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let pid = child.id() as libc::pid_t;
    let mut hung = false;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child, not yet reaped (std never waits
        // for it: we reap it here).
        let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if got == pid {
            break (ExitStatus::from_raw(status), usage);
        }
        assert!(got == 0, "wait4: {}", std::io::Error::last_os_error());
        if !hung && started.elapsed() > HANG {
            hung = true;
            // SAFETY: signalling our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stdout_len) = out_thread.join().unwrap();
    let stderr = err_thread.join().unwrap();
    Ran {
        status,
        stdout,
        stdout_len,
        stderr,
        max_rss: usage.ru_maxrss as u64 * 1024,
        took: started.elapsed(),
        hung,
    }
}

fn assert_sane(what: &str, ran: &Ran) {
    assert!(
        !ran.hung,
        "{what} hung (killed after {:?})\nstderr: {}",
        ran.took,
        tail(&ran.stderr)
    );
    assert!(
        ran.max_rss < MAX_RSS_BYTES,
        "{what} peaked at {} MB\nstderr: {}",
        ran.max_rss >> 20,
        tail(&ran.stderr)
    );
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(4000);
    let start = (start..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    &text[start..]
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

fn git(ws: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(ws)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Generated at run time: nothing secret-looking is committed.
fn fake(tag: &str, seed: u32) -> String {
    let alphabet = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let body: String = (0..32u32)
        .map(|i| {
            alphabet[((i * 11 + seed * 17 + i * i * 3) % alphabet.len() as u32) as usize] as char
        })
        .collect();
    format!("{tag}{body}")
}

fn run(command: &str) -> Value {
    json!({ "name": "run_command", "arguments": { "command": command } })
}

/// The repository as cloned (no `fettle.toml` yet): a commit, sources that
/// are not files, secrets deep and linked, gitignored data.
struct Repo {
    _temp: tempfile::TempDir,
    ws: PathBuf,
    cache: PathBuf,
    deep_secret: String,
    linked_secret: String,
    head: String,
}

fn hostile_repo() -> Repo {
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().join("ws");
    let cache = temp.path().join("cache");
    let outside = temp.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(cache.join("no-user-config")).unwrap();

    std::fs::write(
        ws.join("app.py"),
        "def area(side):\n    return side * side\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("test_app.py"),
        "from app import area\n\n\ndef test_area():\n    assert area(3) == 9\n",
    )
    .unwrap();
    std::fs::write(ws.join(".gitignore"), "local/\nnode_modules/\n.env*\n").unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "the project"]);
    let head = git(&ws, &["rev-parse", "HEAD"]);

    // Not files: a device, a pipe, stdin.
    std::os::unix::fs::symlink("/dev/zero", ws.join("z.py")).unwrap();
    std::os::unix::fs::symlink("/dev/stdin", ws.join("input.py")).unwrap();
    mkfifo(&ws.join("pipe.py"));
    // Gitignored data that existed before any task.
    std::fs::create_dir_all(ws.join("local")).unwrap();
    std::fs::write(ws.join("local/notes.txt"), "my notes, not in git\n").unwrap();
    std::fs::create_dir_all(ws.join("node_modules/pkg")).unwrap();
    std::fs::write(ws.join("node_modules/pkg/data.json"), "{\"kept\": true}\n").unwrap();
    // Secrets: five directories deep, and linked to a file outside.
    let deep_secret = fake("pw-", 5);
    let linked_secret = fake("tok-", 6);
    let deep = ws.join("a/b/c/d/e");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join(".env"), format!("PW={deep_secret}\n")).unwrap();
    std::fs::write(outside.join("secrets"), format!("TOK={linked_secret}\n")).unwrap();
    std::os::unix::fs::symlink(outside.join("secrets"), ws.join(".env.local")).unwrap();

    Repo {
        _temp: temp,
        ws,
        cache,
        deep_secret,
        linked_secret,
        head,
    }
}

fn fettle_in(repo: &Repo, args: &[&str]) -> Command {
    let mut cmd = fettle_command(args, &repo.cache);
    cmd.arg(&repo.ws);
    cmd
}

/// The server opens the workspace, answers `initialize` and every request
/// below promptly, whatever the workspace's files are, and stays small.
fn serve(repo: &Repo, bad_config: bool) {
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_CACHE_DIR", repo.cache.to_str().unwrap())]);
    let pid = lsp.pid();
    let quick = Duration::from_secs(20);
    let uri = file_uri(&repo.ws);
    let id = lsp.send_request(
        "initialize",
        json!({
            "processId": std::process::id(),
            "rootUri": uri,
            "workspaceFolders": [ { "uri": uri, "name": "ws" } ],
            "capabilities": Lsp::capabilities(&["utf-16"]),
        }),
    );
    let init = lsp.response_within(&id, quick);
    assert!(init.get("result").is_some(), "initialize: {init}");
    lsp.notify("initialized", json!({}));
    if bad_config {
        // The predicate and the result are the notification's params.
        let shown = lsp.notification("window/showMessage", |params| {
            params["message"]
                .as_str()
                .is_some_and(|text| text.contains("fettle.toml"))
        });
        assert!(shown["message"].is_string());
    }
    for name in ["z.py", "pipe.py", "input.py"] {
        let uri = file_uri(&repo.ws.join(name));
        let id = lsp.send_request(
            "textDocument/documentSymbol",
            json!({ "textDocument": { "uri": uri } }),
        );
        let answer = lsp.response_within(&id, quick);
        assert!(
            answer.get("error").is_some(),
            "documentSymbol of {name}: {answer}"
        );
    }
    let id = lsp.send_request("workspace/symbol", json!({ "query": "area" }));
    let answer = lsp.response_within(&id, quick);
    assert!(answer.get("result").is_some(), "workspace/symbol: {answer}");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let hwm_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(
        hwm_kb * 1024 < MAX_RSS_BYTES,
        "fettle serve peaked at {} MB",
        hwm_kb >> 10
    );
    let exit = lsp.shutdown_and_exit();
    assert!(exit.success(), "serve exited with {exit:?}");
}

#[test]
fn a_hostile_repository_leaves_fettle_answering_small_and_the_repository_whole() {
    let repo = hostile_repo();
    let ws = repo.ws.clone();

    // 1. Its `fettle.toml` is a FIFO, then a link to /dev/zero: every
    //    command says so and ends; the server answers.
    for kind in ["fifo", "zero"] {
        let config = ws.join("fettle.toml");
        let _ = std::fs::remove_file(&config);
        match kind {
            "fifo" => mkfifo(&config),
            _ => std::os::unix::fs::symlink("/dev/zero", &config).unwrap(),
        }
        for args in [
            &["check"][..],
            &["trust"][..],
            &["fix", "--json", "--yes", "--test", "true"][..],
        ] {
            let ran = run_bounded(&mut fettle_in(&repo, args));
            assert_sane(&format!("fettle {args:?} with fettle.toml as {kind}"), &ran);
            assert!(
                ran.stderr.contains("fettle.toml"),
                "fettle {args:?} ({kind}) did not name fettle.toml:\n{}",
                tail(&ran.stderr)
            );
        }
        let ran = run_bounded(&mut fettle_in(&repo, &["doctor", "--no-probe"]));
        assert_sane(&format!("fettle doctor with fettle.toml as {kind}"), &ran);
        serve(&repo, true);
        std::fs::remove_file(&config).unwrap();
    }

    // 2. The model: the user's own configuration (a workspace may not name
    //    it). A hostile script: 1 GiB printed, a 1 GiB file left, gitignored
    //    data moved into the tree, `.git` moved, secrets read in disguise.
    serve(&repo, false);
    let script = json!({ "responses": [
        { "text": "", "tool_calls": [
            run("yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -c 1073741824"),
            run("truncate -s 1G big.bin"),
            run("mv local/notes.txt notes.txt; mv node_modules/pkg/data.json data.json"),
            run("mv .git .git-away && mkdir .git; ls -a"),
            { "name": "write_file", "arguments": {
                "path": "app.py", "content": "def area(side):\n    return side ** 2\n" } },
            { "name": "write_file", "arguments": { "path": "done.txt", "content": "done\n" } },
        ] },
        { "text": "", "tool_calls": [
            run("cat a/b/c/d/e/.env .env.local"),
            run("rev a/b/c/d/e/.env; rev .env.local"),
            run("cut -c1-14 a/b/c/d/e/.env .env.local"),
            run("cat .env.local | tr 'A-Za-z' 'N-ZA-Mn-za-m'"),
            run("base32 -w0 a/b/c/d/e/.env"),
            { "name": "search", "arguments": { "pattern": "TOK=" } },
            { "name": "read_file", "arguments": { "path": ".env.local" } },
        ] },
        { "text": "Done." },
    ] });
    let mock = Mock::start(serde_json::from_value(script).unwrap());
    let user_config = repo.cache.join("no-user-config/fettle");
    std::fs::create_dir_all(&user_config).unwrap();
    std::fs::write(
        user_config.join("config.toml"),
        mock.config("max_iterations = 2\ncommands = \"auto\""),
    )
    .unwrap();

    let ran = run_bounded(&mut fettle_in(&repo, &["check"]));
    assert_sane("fettle check", &ran);

    let ran = run_bounded(&mut fettle_in(
        &repo,
        &[
            "fix",
            "--json",
            "--yes",
            "--goal",
            "make it right",
            "--test",
            "test -f done.txt",
        ],
    ));
    assert_sane("fettle fix", &ran);
    eprintln!(
        "fettle fix: {:?}, {} bytes on stdout, peak {} MB\n{}",
        ran.took,
        ran.stdout_len,
        ran.max_rss >> 20,
        tail(&ran.stderr)
    );
    assert!(
        ran.stdout_len < MAX_JSON_BYTES,
        "fettle fix --json printed {} bytes",
        ran.stdout_len
    );
    let result: Value = serde_json::from_slice(&ran.stdout).unwrap_or_else(|e| {
        panic!(
            "--json is not one JSON value ({e}): {}\n{}",
            String::from_utf8_lossy(&ran.stdout[..ran.stdout.len().min(2000)]),
            tail(&ran.stderr)
        )
    });
    assert!(result.is_object(), "{result}");
    let requests = mock.server.requests();
    assert!(
        requests.len() >= 2,
        "the script did not run ({} requests): {}",
        requests.len(),
        tail(&ran.stderr)
    );

    let undo = run_bounded(&mut fettle_in(&repo, &["fix", "--undo"]));
    assert_sane("fettle fix --undo", &undo);
    assert!(
        undo.status.success(),
        "fettle fix --undo: {:?}\n{}",
        undo.status,
        tail(&undo.stderr)
    );

    // Undo put back what the task wrote.
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).unwrap(),
        "def area(side):\n    return side * side\n",
        "undo did not restore app.py: {}",
        tail(&undo.stderr)
    );
    assert!(!ws.join("done.txt").exists(), "undo left done.txt");

    // The repository: its history, and the data that was there before.
    assert_eq!(
        git(&ws, &["rev-parse", "HEAD"]),
        repo.head,
        "git history lost"
    );
    git(&ws, &["fsck", "--no-progress"]);
    let notes = [ws.join("notes.txt"), ws.join("local/notes.txt")];
    assert!(
        notes
            .iter()
            .any(|p| std::fs::read_to_string(p).is_ok_and(|t| t == "my notes, not in git\n")),
        "the gitignored notes were lost"
    );
    let data = [ws.join("data.json"), ws.join("node_modules/pkg/data.json")];
    assert!(
        data.iter()
            .any(|p| std::fs::read_to_string(p).is_ok_and(|t| t == "{\"kept\": true}\n")),
        "node_modules data was lost"
    );
    let _ = std::fs::remove_file(ws.join("big.bin"));

    // No secret reached the model, raw, reversed, rot13'd or by its start.
    let mut everything = String::new();
    for request in &requests {
        everything.push_str(&request.body.to_string());
        everything.push('\n');
    }
    let mut leaks = Vec::new();
    for secret in [&repo.deep_secret, &repo.linked_secret] {
        let reversed: String = secret.chars().rev().collect();
        for (how, form) in [
            ("raw", secret.clone()),
            ("reversed", reversed[..20].to_string()),
            ("rot13", rot13(secret)),
            ("its first 10 characters", secret[..10].to_string()),
        ] {
            if everything.contains(&form) {
                leaks.push(format!("{secret} reached the model {how}"));
            }
        }
    }
    assert!(leaks.is_empty(), "{leaks:#?}");
}
