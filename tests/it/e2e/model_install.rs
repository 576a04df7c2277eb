//! First use of the embedded model on a machine without it: the server
//! installs it in the background (`$/progress`, one message) from
//! `FETTLE_MODEL_URL` — here a file server on 127.0.0.1 with the real
//! GGUF — and completions work once it is there; offline, one clear
//! message and no hang; `auto_fetch = false` only says what to run.
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::Lsp;

const MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Serves `file` to every GET on 127.0.0.1 (HTTP/1.0, one request per
/// connection); returns the URL.
fn serve_file(file: &Path) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let bytes = std::fs::read(file).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let head = format!(
                "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
                bytes.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&bytes);
        }
    });
    format!("http://127.0.0.1:{port}/{MODEL_FILE}")
}

/// A server whose HOME has no model, downloading from `url`.
fn server(home: &Path, url: &str, options: Option<Value>) -> Lsp {
    let home = home.to_str().unwrap();
    let mut lsp = Lsp::spawn_with(&[], &[("HOME", home), ("FETTLE_MODEL_URL", url)]);
    let ws = home.to_owned() + "/ws";
    std::fs::create_dir_all(&ws).unwrap();
    lsp.initialize(Path::new(&ws), Lsp::capabilities(&["utf-16"]), options);
    lsp
}

/// Waits for the install's end (the indexing progress ends too) and
/// requires it to have succeeded with the checksum verified.
fn installed_verified(lsp: &mut Lsp) {
    let end = lsp.notification("$/progress", |p| {
        p["value"]["kind"] == "end"
            && p["value"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("installed") || m == "failed")
    });
    assert!(
        end["value"]["message"]
            .as_str()
            .unwrap()
            .contains("checksum verified"),
        "{end}"
    );
}

fn message(lsp: &mut Lsp, needle: &str) -> Value {
    lsp.notification("window/showMessage", |p| {
        p["message"].as_str().is_some_and(|m| m.contains(needle))
    })
}

#[test]
fn a_missing_embedded_model_is_installed_and_then_completes() {
    let Some(model) = crate::local_model::model_path() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let url = serve_file(&model);
    let started = Instant::now();
    let mut lsp = server(home.path(), &url, None);
    let notice = message(&mut lsp, "installing the embedded model");
    assert_eq!(notice["type"], 3, "information: {notice}");
    installed_verified(&mut lsp);
    let installed = home.path().join(".cache/fettle/models").join(MODEL_FILE);
    assert_eq!(
        std::fs::metadata(&installed).unwrap().len(),
        std::fs::metadata(&model).unwrap().len()
    );
    eprintln!("installed in {:?}", started.elapsed());
    // Ghost text works now: the engine loads the file on this request.
    let ws = home.path().join("ws");
    let file = ws.join("add.py");
    let text = "def add(a, b):\n    return ";
    std::fs::write(&file, text).unwrap();
    let uri = super::harness::file_uri(&file.canonicalize().unwrap());
    lsp.open(&uri, "python", text);
    lsp.request_within(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 1, "character": 11 },
                "context": { "triggerKind": 1 } }),
        Duration::from_secs(120),
    )
    .unwrap();
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    assert!(
        stats["localModel"]["promptTokens"].as_u64().unwrap_or(0) > 0,
        "the installed model ran: {stats:#}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

/// Serves half of a `len`-byte file to every GET and then stalls.
fn serve_half_and_stall(len: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            // The request first: a response sent before it is an error.
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let head = format!(
                "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {len}\r\n\r\n"
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&vec![b'G'; len / 2]);
            held.push(stream);
        }
    });
    format!("http://127.0.0.1:{port}/{MODEL_FILE}")
}

fn downloads_left(models: &Path) -> Vec<String> {
    std::fs::read_dir(models)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".fettle-download-"))
                .collect()
        })
        .unwrap_or_default()
}

/// An editor that kills the server halfway through the install leaves the
/// half-downloaded file behind; the next install removes it.
#[test]
fn a_killed_install_leaves_nothing_once_the_next_one_runs() {
    let Some(model) = crate::local_model::model_path() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let models = home.path().join(".cache/fettle/models");
    let len = std::fs::metadata(&model).unwrap().len() as usize;
    let mut first = server(home.path(), &serve_half_and_stall(len), None);
    message(&mut first, "installing the embedded model");
    let deadline = Instant::now() + Duration::from_secs(60);
    while downloads_left(&models).is_empty() && Instant::now() < deadline {
        first.pump_for(Duration::from_millis(100));
    }
    // Let the half arrive, then kill without warning.
    first.pump_for(Duration::from_millis(500));
    let left = downloads_left(&models);
    assert_eq!(
        left.len(),
        1,
        "one download under way: {left:?}\n{}",
        first.stderr()
    );
    unsafe { libc::kill(first.pid() as i32, libc::SIGKILL) };
    let _ = first.wait_exit();
    assert_eq!(
        downloads_left(&models),
        left,
        "a killed server cannot clean up"
    );

    let mut second = server(home.path(), &serve_file(&model), None);
    installed_verified(&mut second);
    assert!(models.join(MODEL_FILE).exists());
    assert_eq!(downloads_left(&models), Vec::<String>::new());
    assert!(second.shutdown_and_exit().success());
}

/// The editor closes while the model is being installed: the download
/// (pip, here a stand-in that only sleeps) ends with the server instead of
/// going on as an orphan.
#[test]
fn the_download_stops_when_the_server_exits() {
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let pid_file = home.path().join("pip.pid");
    let fake = format!(
        "#!/bin/sh\necho $$ > '{}'\nexec sleep 60\n",
        pid_file.display()
    );
    for name in ["python3", "python"] {
        let path = bin.join(name);
        std::fs::write(&path, &fake).unwrap();
        let mut perms = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&path, perms).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut lsp = Lsp::spawn_removing(
        &[],
        &[("HOME", home.path().to_str().unwrap()), ("PATH", &path)],
        &["FETTLE_MODEL_URL"],
    );
    let ws = home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    lsp.initialize(&ws, Lsp::capabilities(&["utf-16"]), None);
    message(&mut lsp, "installing the embedded model");
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(
            Instant::now() < deadline,
            "pip never started: {}",
            lsp.stderr()
        );
        lsp.pump_for(Duration::from_millis(50));
    };
    assert!(lsp.shutdown_and_exit().success());
    let deadline = Instant::now() + Duration::from_secs(5);
    // SAFETY: signal 0 only checks that the process exists.
    while unsafe { libc::kill(pid, 0) } == 0 {
        assert!(Instant::now() < deadline, "pip ({pid}) outlived the server");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn offline_the_install_fails_once_with_what_to_run_and_the_server_stays_up() {
    let home = tempfile::tempdir().unwrap();
    // Nothing listens on this port: the download is refused at once.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/{MODEL_FILE}", closed.local_addr().unwrap());
    drop(closed);
    let mut lsp = server(home.path(), &url, None);
    message(&mut lsp, "installing the embedded model");
    let failed = message(&mut lsp, "could not install the embedded model");
    assert_eq!(failed["type"], 2, "a warning: {failed}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("run `fettle model fetch`"),
        "{failed}"
    );
    // Still serving, and not retrying on every configuration change.
    lsp.notify(
        "workspace/didChangeConfiguration",
        json!({ "settings": { "fettle": { "completion": { "debounce_ms": 5 } } } }),
    );
    let symbols = lsp.request("workspace/symbol", json!({ "query": "x" }));
    assert!(symbols.is_ok(), "{symbols:?}");
    let again = lsp.pending_notifications("window/showMessage");
    assert!(
        !again
            .iter()
            .any(|m| m["message"].as_str().unwrap_or("").contains("installing")),
        "{again:#?}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn with_auto_fetch_off_the_server_only_says_what_to_run() {
    let home = tempfile::tempdir().unwrap();
    let mut lsp = server(
        home.path(),
        "http://127.0.0.1:9/unused",
        Some(json!({ "models": { "local": { "auto_fetch": false } } })),
    );
    let shown = message(&mut lsp, "fettle model fetch");
    assert!(
        !shown["message"].as_str().unwrap().contains("installing"),
        "{shown}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn fettle_fix_installs_the_missing_model_first_or_says_what_to_run() {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fettle"))
        .args(["fix", "--test", "true"])
        .arg(&ws)
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("FETTLE_MODEL_URL", "http://127.0.0.1:9/unused.gguf")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("installing it at"), "{stderr}");
    assert!(
        stderr.contains("could not install the embedded model")
            && stderr.contains("fettle model fetch"),
        "{stderr}"
    );
}
