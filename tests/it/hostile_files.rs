//! Files a cloned repository holds that are not files: `fettle.toml` as a
//! FIFO, a symlink to `/dev/zero` or `/dev/stdin`, a socket, or 100 MB.
//! Before, `check`, `trust`, `doctor` and `fix` hung on a FIFO, `serve`
//! never answered `initialize` (and grew to 11 GB on `/dev/zero`), and a
//! `documentSymbol` of such an unopened file read forever. Every command
//! here runs the real binary under a deadline and is killed past it: a hang
//! fails the test, never CI.
#![allow(clippy::unwrap_used, clippy::expect_used)] // in tests a panic is the failure report

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use fettle::mock::Script;
use serde_json::json;

use crate::agent_common::{fettle_command, Mock};
use crate::e2e::harness::{file_uri, Lsp};

/// Past this a command is hung (each takes well under a second).
const DEADLINE: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, Debug)]
enum Kind {
    Fifo,
    DevZero,
    DevStdin,
    Socket,
    /// 100 MB, sparse.
    Huge,
}

const KINDS: [Kind; 5] = [
    Kind::Fifo,
    Kind::DevZero,
    Kind::DevStdin,
    Kind::Socket,
    Kind::Huge,
];

impl Kind {
    /// Puts this kind of non-file at `path`.
    fn make(self, path: &Path) {
        match self {
            Kind::Fifo => {
                let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
                // SAFETY: a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
            }
            Kind::DevZero => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
            Kind::DevStdin => std::os::unix::fs::symlink("/dev/stdin", path).unwrap(),
            // The socket file stays after the listener is gone: still a socket.
            Kind::Socket => drop(std::os::unix::net::UnixListener::bind(path).unwrap()),
            Kind::Huge => std::fs::File::create(path)
                .unwrap()
                .set_len(100_000_000)
                .unwrap(),
        }
    }

    /// What the message must say the file is. `/dev/stdin` of a process
    /// whose stdin is a pipe is a FIFO.
    fn said(self) -> &'static [&'static str] {
        match self {
            Kind::Fifo | Kind::DevStdin => &["FIFO"],
            Kind::DevZero => &["character device", "/dev/zero"],
            Kind::Socket => &["socket"],
            Kind::Huge => &["too large", "100000000"],
        }
    }

    fn check_message(self, text: &str, file: &str, what: &str) {
        assert!(
            text.contains(file),
            "{what} ({self:?}): {file} not named in:\n{text}"
        );
        for word in self.said() {
            assert!(
                text.contains(word),
                "{what} ({self:?}): no {word:?} in:\n{text}"
            );
        }
    }
}

/// A finished or killed command.
struct Ran {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs `cmd` with stdin a pipe we keep open (so `/dev/stdin` never ends),
/// killing it at [`DEADLINE`].
fn run_bounded(mut cmd: Command) -> Ran {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child: Child = cmd.spawn().unwrap();
    let _stdin = child.stdin.take();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    Ran {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        took,
    }
}

/// A workspace whose `fettle.toml` is `kind`, with one real source file.
fn workspace(kind: Kind) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("app.py"), "def main():\n    return 1\n").unwrap();
    kind.make(&ws.path().join("fettle.toml"));
    ws
}

#[test]
fn cli_commands_refuse_a_hostile_fettle_toml_and_exit() {
    // The mock model is the user's configured agent model: if `fix` went
    // on past the configuration, it would talk to 127.0.0.1 only.
    let mock = Mock::start(Script::from_json(r#"{"responses": [{"text": "Done."}]}"#).unwrap());
    let cache = tempfile::tempdir().unwrap();
    let user = cache.path().join("no-user-config/fettle");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(user.join("config.toml"), mock.config("")).unwrap();
    for kind in KINDS {
        let ws = workspace(kind);
        let root = ws.path().to_str().unwrap();
        let commands: [&[&str]; 5] = [
            &["check", root],
            &["trust", "--yes", root],
            &["doctor", "--no-probe", root],
            &[
                "fix",
                "--json",
                "--max-iterations",
                "1",
                "--test",
                "false",
                root,
            ],
            &["index", root],
        ];
        for args in commands {
            let ran = run_bounded(fettle_command(args, cache.path()));
            let what = format!("fettle {}", args[0]);
            assert!(
                ran.status.is_some(),
                "{what} ({kind:?}) hung: killed after {:?}; stderr:\n{}",
                ran.took,
                ran.stderr
            );
            // `doctor` is a report: its findings are on stdout; the
            // other commands say it on stderr.
            let said = if args[0] == "doctor" {
                &ran.stdout
            } else {
                &ran.stderr
            };
            kind.check_message(said, "fettle.toml", &what);
            // As for a file that does not parse (docs/configuration.md).
            let expected = match args[0] {
                "index" => 0,
                "doctor" => 1,
                _ => 2,
            };
            assert_eq!(
                ran.status.unwrap().code(),
                Some(expected),
                "{what} ({kind:?}): {}",
                ran.stderr
            );
        }
    }
    assert!(
        mock.server.requests().is_empty(),
        "fix went past a configuration it could not read"
    );
}

#[test]
fn serve_answers_initialize_and_names_a_hostile_fettle_toml() {
    for kind in KINDS {
        let ws = workspace(kind);
        let mut lsp = Lsp::spawn();
        // The harness fails the test (and kills the server) if no answer comes.
        let result = lsp.initialize(ws.path(), Lsp::capabilities(&["utf-16"]), None);
        assert!(result["capabilities"].is_object(), "{kind:?}: {result}");
        let shown = lsp.notification("window/showMessage", |p| {
            p["message"]
                .as_str()
                .is_some_and(|m| m.contains("fettle.toml"))
        });
        kind.check_message(
            shown["message"].as_str().unwrap(),
            "fettle.toml",
            "serve's showMessage",
        );
        // Still serving: an open document's symbols come back.
        let uri = file_uri(&ws.path().join("app.py"));
        lsp.open(&uri, "python", "def main():\n    return 1\n");
        assert_eq!(lsp.symbol_names(&uri), ["main"], "{kind:?}");
        lsp.shutdown_and_exit();
    }
}

#[test]
fn document_symbol_of_an_unopened_non_file_is_an_error_at_once() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("ok.py"), "def ok():\n    pass\n").unwrap();
    let mut lsp = Lsp::spawn();
    lsp.initialize(ws.path(), Lsp::capabilities(&["utf-16"]), None);
    for kind in KINDS {
        let path = ws.path().join(format!("z_{kind:?}.py"));
        kind.make(&path);
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let error = lsp
            .request(
                "textDocument/documentSymbol",
                json!({ "textDocument": { "uri": file_uri(&path) } }),
            )
            .expect_err("a non-file has no symbols");
        assert_eq!(error["code"], -32602, "{kind:?}: invalid params: {error}");
        kind.check_message(error["message"].as_str().unwrap(), &name, "documentSymbol");
    }
    // The devices themselves, named by their own URIs (the server's stdin
    // is the pipe the client writes to: reading it would eat the protocol).
    for (uri, said) in [
        ("file:///dev/zero", "character device"),
        ("file:///dev/stdin", "FIFO"),
    ] {
        let error = lsp
            .request(
                "textDocument/documentSymbol",
                json!({ "textDocument": { "uri": uri } }),
            )
            .expect_err("a device has no symbols");
        let path = uri.trim_start_matches("file://");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains(path) && m.contains(said)),
            "{error}"
        );
    }
    // The server is fine: a real unopened file still works.
    assert_eq!(
        lsp.symbol_names(&file_uri(&ws.path().join("ok.py"))),
        ["ok"]
    );
    lsp.shutdown_and_exit();
}

#[test]
fn index_skips_a_directory_whose_gitignore_is_not_a_file() {
    let cache = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("top.py"), "def top():\n    pass\n").unwrap();
        std::fs::create_dir(ws.path().join("sub")).unwrap();
        std::fs::write(ws.path().join("sub/deep.py"), "def deep():\n    pass\n").unwrap();
        kind.make(&ws.path().join("sub/.gitignore"));
        let root = ws.path().to_str().unwrap();
        let ran = run_bounded(fettle_command(&["index", "--json", root], cache.path()));
        assert!(
            ran.status.is_some(),
            "fettle index ({kind:?}) hung: killed after {:?}; stderr:\n{}",
            ran.took,
            ran.stderr
        );
        kind.check_message(&ran.stderr, ".gitignore", "fettle index");
        assert!(ran.status.unwrap().success(), "{kind:?}: {}", ran.stderr);
        // The rest of the workspace is indexed; `sub/` is not entered.
        let out: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
        assert_eq!(out["files"], 1, "{kind:?}: {out}");
    }
}

#[test]
fn index_refuses_a_root_whose_git_exclude_is_a_fifo() {
    let cache = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("top.py"), "def top():\n    pass\n").unwrap();
    std::fs::create_dir_all(ws.path().join(".git/info")).unwrap();
    Kind::Fifo.make(&ws.path().join(".git/info/exclude"));
    let ran = run_bounded(fettle_command(
        &["index", ws.path().to_str().unwrap()],
        cache.path(),
    ));
    assert!(ran.status.is_some(), "hung; stderr:\n{}", ran.stderr);
    Kind::Fifo.check_message(&ran.stderr, "exclude", "fettle index");
}

/// Runs `f` on a thread of its own and fails the test if it does not
/// return within [`DEADLINE`] (the stuck thread is left behind).
fn within_deadline<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("{what} hung (still blocked after {DEADLINE:?})"))
}

#[test]
fn index_updates_do_not_block_on_fifos_or_read_devices() {
    use fettle::index::{IndexSettings, WorkspaceIndex};
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().to_path_buf();
    std::fs::write(root.join("top.py"), "def top():\n    pass\n").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/deep.py"), "def deep():\n    pass\n").unwrap();
    let index = std::sync::Arc::new(WorkspaceIndex::new(IndexSettings::default()));
    let walk = index.clone();
    let roots = vec![root.clone()];
    within_deadline("the first walk", move || {
        walk.index_roots(
            &roots,
            &|_: fettle::index::IndexProgress| {},
            &Default::default(),
        )
    });
    // Then the repository changes under the server: a pipe named like a
    // source, a device link, and a FIFO `.gitignore` in `sub/`.
    Kind::Fifo.make(&root.join("pipe.py"));
    Kind::DevZero.make(&root.join("zero.py"));
    Kind::Fifo.make(&root.join("sub/.gitignore"));
    std::fs::write(root.join("sub/deep.py"), "def deeper():\n    pass\n").unwrap();
    for name in ["pipe.py", "zero.py", "sub/deep.py", "sub"] {
        let (index, path) = (index.clone(), root.join(name));
        within_deadline(&format!("update_file({name})"), move || {
            index.update_file(&path)
        });
    }
    let names = |q: &str| -> Vec<String> {
        index
            .search(q, 10)
            .iter()
            .map(|s| s.name.to_string())
            .collect()
    };
    assert_eq!(names("top"), ["top"]);
    // `sub/` cannot have its rules read: it is left out, not guessed at.
    assert!(names("deep").is_empty(), "{:?}", names("deep"));
}

#[test]
fn serve_indexes_a_workspace_whose_subfolder_gitignore_is_a_fifo() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("top.py"), "def top_level():\n    pass\n").unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    std::fs::write(ws.path().join("sub/deep.py"), "def deep():\n    pass\n").unwrap();
    Kind::Fifo.make(&ws.path().join("sub/.gitignore"));
    let mut lsp = Lsp::spawn();
    lsp.initialize(ws.path(), Lsp::capabilities(&["utf-16"]), None);
    // The walk finishes (it used to block on the FIFO forever).
    lsp.poll("workspace/symbol", json!({ "query": "top_level" }), |r| {
        r.as_array().is_some_and(|a| !a.is_empty())
    });
    assert!(lsp.stderr_says(".gitignore"), "{}", lsp.stderr());
    lsp.shutdown_and_exit();
}
