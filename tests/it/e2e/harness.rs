//! Drives the real `fettle` binary over its stdio with real `Content-Length`
//! framing. Every feature's end-to-end tests reuse this.
//!
//! The harness answers the server's own requests (configuration, progress
//! tokens, registrations) like a real client would, keeps every notification,
//! and checks the "every request is answered exactly once" rule on the way.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const TIMEOUT: Duration = Duration::from_secs(30);

enum Incoming {
    /// A message and when its bytes had all been read (before the harness
    /// hands it to the test's thread).
    Message(Value, Instant),
    Closed,
}

pub struct Lsp {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Incoming>,
    next_id: i64,
    /// Responses not yet taken, with when each was read off stdout.
    responses: HashMap<Value, (Value, Instant)>,
    answered: HashSet<Value>,
    notifications: VecDeque<Value>,
    /// Every request the server sent us, in order.
    pub server_requests: Vec<Value>,
    /// What we answer to `workspace/configuration` (one value per item).
    pub configuration: Value,
    /// The editor's buffers (uri → version, text), kept by `open`, `type_text`
    /// and applied `workspace/applyEdit`s (positions in UTF-8: tests that edit
    /// negotiate it).
    pub buffers: HashMap<String, (i32, String)>,
    /// Apply `workspace/applyEdit` to `buffers` like an editor (refusing a
    /// stale version) instead of answering `null`.
    pub apply_edits: bool,
    /// Before answering the next `applyEdit`, the user types this text at the
    /// start of this line of that buffer (so the edit arrives stale).
    pub type_before_next_apply: Option<(String, u32, String)>,
    /// Answers to `window/showMessageRequest`, in order (`None`: dismissed).
    pub approvals: VecDeque<Option<String>>,
    /// Answer `fettle/saveDocuments` like an editor that saves: write each
    /// listed buffer to its file (otherwise: report every one as not saved).
    pub save_documents: bool,
    /// Server requests with these methods are recorded but never answered
    /// (a client that does not answer).
    pub unanswered: Vec<&'static str>,
    /// The last bodies from the server, as sent (small ones only): for what
    /// parsing into a `Value` would hide, like the exact text of an id.
    raw: Arc<Mutex<VecDeque<String>>>,
    stderr: Arc<Mutex<String>>,
    closed: bool,
}

impl Lsp {
    pub fn spawn() -> Self {
        Self::spawn_with(&[], &[])
    }

    pub fn spawn_with(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn_removing(args, env, &[])
    }

    /// [`Self::spawn_with`], with the variables in `remove` left out of the
    /// environment (e.g. the `FETTLE_LOG=debug` tests set by default).
    pub fn spawn_removing(args: &[&str], env: &[(&str, &str)], remove: &[&str]) -> Self {
        Self::spawn_program(Path::new(env!("CARGO_BIN_EXE_fettle")), args, env, remove)
    }

    /// Another language server (the benches compare with one), spawned
    /// like Fettle.
    pub fn spawn_program(
        program: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        remove: &[&str],
    ) -> Self {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("FETTLE_LOG", "debug")
            // Keep the user's own config file out of tests.
            .env(
                "XDG_CONFIG_HOME",
                std::env::temp_dir().join("fettle-e2e-no-user-config"),
            );
        for (key, value) in env {
            cmd.env(key, value);
        }
        for key in remove {
            cmd.env_remove(key);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let stderr_pipe = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        let raw = Arc::new(Mutex::new(VecDeque::new()));
        let raw_sink = raw.clone();
        std::thread::spawn(move || read_messages(stdout, tx, raw_sink));
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr_pipe);
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        Self {
            child,
            stdin,
            rx,
            next_id: 1,
            responses: HashMap::new(),
            answered: HashSet::new(),
            notifications: VecDeque::new(),
            server_requests: Vec::new(),
            configuration: Value::Null,
            buffers: HashMap::new(),
            apply_edits: false,
            type_before_next_apply: None,
            approvals: VecDeque::new(),
            save_documents: false,
            unanswered: Vec::new(),
            raw,
            stderr,
            closed: false,
        }
    }

    /// `initialize` + `initialized` with a workspace folder; returns the initialize result.
    pub fn initialize(
        &mut self,
        root: &Path,
        capabilities: Value,
        options: Option<Value>,
    ) -> Value {
        let uri = file_uri(root);
        let mut params = json!({
            "processId": std::process::id(),
            "clientInfo": { "name": "fettle-e2e" },
            "rootUri": uri,
            "workspaceFolders": [ { "uri": uri, "name": "ws" } ],
            "capabilities": capabilities,
        });
        if let Some(options) = options {
            params["initializationOptions"] = options;
        }
        let result = self
            .request("initialize", params)
            .expect("initialize failed");
        self.notify("initialized", json!({}));
        result
    }

    /// A server spawned and initialized for the workspace folder `root`:
    /// the server, and the initialize result.
    pub fn initialized(root: &Path, capabilities: Value, options: Option<Value>) -> (Self, Value) {
        let mut lsp = Self::spawn();
        let result = lsp.initialize(root, capabilities, options);
        (lsp, result)
    }

    /// A client that supports what Fettle can use: hierarchical symbols, pull
    /// configuration, progress, dynamic registration, and the given encodings.
    pub fn capabilities(encodings: &[&str]) -> Value {
        json!({
            "general": { "positionEncodings": encodings },
            "textDocument": {
                "documentSymbol": { "hierarchicalDocumentSymbolSupport": true },
                "publishDiagnostics": { "versionSupport": true },
            },
            "workspace": {
                "configuration": true,
                "didChangeConfiguration": { "dynamicRegistration": true },
                "didChangeWatchedFiles": { "dynamicRegistration": true },
                "workspaceFolders": true,
                "symbol": {},
            },
            "window": { "workDoneProgress": true },
        })
    }

    pub fn send(&mut self, message: &Value) {
        self.send_raw(&frame(message));
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin already closed");
        stdin.write_all(bytes).expect("write to fettle");
        stdin.flush().expect("flush to fettle");
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Sends a request without waiting; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    /// Sends a request and returns its response message with the time from
    /// the request's write to the response read off stdout (what
    /// an editor reading on its own loop sees; the harness's hand-off to this
    /// thread is not counted), and the time until this thread had it.
    #[allow(dead_code)] // The benches time round trips with it.
    pub fn request_timed(&mut self, method: &str, params: Value) -> (Value, Duration, Duration) {
        let id = json!(self.next_id);
        self.next_id += 1;
        let framed =
            frame(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        // From the write on: waking the server is part of the round trip.
        let sent = Instant::now();
        self.send_raw(&framed);
        let (response, read_at) = self.response_read_within(&id, TIMEOUT);
        let handed = sent.elapsed();
        (response, read_at.saturating_duration_since(sent), handed)
    }

    /// Waits for the whole response message to request `id`.
    pub fn response(&mut self, id: &Value) -> Value {
        self.response_within(id, TIMEOUT)
    }

    /// Waits up to `wait` for the whole response message to request `id`.
    pub fn response_within(&mut self, id: &Value, wait: Duration) -> Value {
        self.response_read_within(id, wait).0
    }

    /// [`Lsp::response_within`], with when the reader thread had it.
    fn response_read_within(&mut self, id: &Value, wait: Duration) -> (Value, Instant) {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(response) = self.responses.remove(id) {
                return response;
            }
            self.pump(deadline, &format!("the response to request {id}"));
        }
    }

    /// The response to `id` if it has arrived (without waiting).
    pub fn try_response(&mut self, id: &Value) -> Option<Value> {
        while let Ok(Incoming::Message(message, at)) = self.rx.try_recv() {
            self.dispatch(message, at);
        }
        self.responses.remove(id).map(|(response, _)| response)
    }

    /// Handles whatever arrives within `wait` (answering server requests).
    pub fn pump_for(&mut self, wait: Duration) {
        if let Ok(Incoming::Message(message, at)) = self.rx.recv_timeout(wait) {
            self.dispatch(message, at);
        }
    }

    /// Sends a request and returns its `result`, or its `error` object as `Err`.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.request_within(method, params, TIMEOUT)
    }

    /// [`Lsp::request`], waiting up to `wait` for the answer: for work
    /// that may outlast `TIMEOUT` on a loaded machine (the embedded model).
    pub fn request_within(
        &mut self,
        method: &str,
        params: Value,
        wait: Duration,
    ) -> Result<Value, Value> {
        let id = self.send_request(method, params);
        let response = self.response_within(&id, wait);
        match response.get("error") {
            Some(error) => Err(error.clone()),
            None => Ok(response.get("result").cloned().unwrap_or(Value::Null)),
        }
    }

    /// Waits for (and consumes) the first notification `method` matching `pred`.
    pub fn notification(&mut self, method: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(pos) = self
                .notifications
                .iter()
                .position(|n| n["method"] == method && pred(&n["params"]))
            {
                return self.notifications.remove(pos).unwrap()["params"].clone();
            }
            self.pump(deadline, &format!("a {method} notification"));
        }
    }

    /// Notifications received so far and not consumed, without waiting.
    pub fn pending_notifications(&mut self, method: &str) -> Vec<Value> {
        while let Ok(Incoming::Message(message, at)) = self.rx.try_recv() {
            self.dispatch(message, at);
        }
        self.notifications
            .iter()
            .filter(|n| n["method"] == method)
            .map(|n| n["params"].clone())
            .collect()
    }

    /// The diagnostics published for `uri` once they satisfy `pred`.
    pub fn diagnostics(&mut self, uri: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let params = self.notification("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri
                && pred(
                    p["diagnostics"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or(&[]),
                )
        });
        params["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Polls a request until its result satisfies `pred` (for background work like indexing).
    pub fn poll(&mut self, method: &str, params: Value, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let result = self
                .request(method, params.clone())
                .expect("request failed");
            if pred(&result) {
                return result;
            }
            assert!(
                Instant::now() < deadline,
                "{method} never satisfied the condition; last result: {result}\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn open(&mut self, uri: &str, language_id: &str, text: &str) {
        self.buffers.insert(uri.to_owned(), (1, text.to_owned()));
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": language_id, "version": 1, "text": text } }),
        );
    }

    /// The `textDocument/documentSymbol` result for `uri`.
    pub fn document_symbols(&mut self, uri: &str) -> Value {
        self.request(
            "textDocument/documentSymbol",
            json!({ "textDocument": { "uri": uri } }),
        )
        .expect("documentSymbol failed")
    }

    /// The names of the document's top-level symbols.
    pub fn symbol_names(&mut self, uri: &str) -> Vec<String> {
        self.document_symbols(uri)
            .as_array()
            .expect("a symbol list")
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    }

    pub fn shutdown_and_exit(mut self) -> ExitStatus {
        let result = self.request("shutdown", Value::Null);
        assert_eq!(result, Ok(Value::Null));
        self.notify("exit", Value::Null);
        self.wait_exit()
    }

    /// Closes our end of stdin (if still open) and waits for the process.
    pub fn wait_exit(mut self) -> ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "fettle did not exit\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's process id.
    #[allow(dead_code)] // The benches read its memory.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The bodies of the last small messages from the server, as sent.
    pub fn raw_messages(&self) -> Vec<String> {
        self.raw.lock().unwrap().iter().cloned().collect()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether the server's stderr says `needle` within 10 s. stderr is
    /// read by a thread of its own: a line the server wrote before a
    /// response may arrive after it.
    #[allow(dead_code)] // Not every test binary reads it.
    pub fn stderr_says(&self, needle: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.stderr.lock().unwrap().contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The stderr log itself, readable after the session is consumed (what
    /// the server wrote while exiting).
    #[allow(dead_code)] // Not every test binary reads it.
    pub fn stderr_log(&self) -> Arc<Mutex<String>> {
        self.stderr.clone()
    }

    fn pump(&mut self, deadline: Instant, waiting_for: &str) {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(Incoming::Message(message, at)) => self.dispatch(message, at),
            Ok(Incoming::Closed) | Err(RecvTimeoutError::Disconnected) => {
                self.closed = true;
                panic!(
                    "fettle closed its stdout while waiting for {waiting_for}\n--- stderr ---\n{}",
                    self.stderr()
                )
            }
            Err(RecvTimeoutError::Timeout) => {
                panic!(
                    "timed out waiting for {waiting_for}\n--- stderr ---\n{}",
                    self.stderr()
                )
            }
        }
    }

    fn dispatch(&mut self, message: Value, at: Instant) {
        let has_id = message.get("id").is_some();
        if let Some(method) = message.get("method").and_then(Value::as_str) {
            if has_id && self.unanswered.contains(&method) {
                self.server_requests.push(message.clone());
            } else if has_id {
                let reply = self.answer_server_request(method, &message["params"]);
                self.server_requests.push(message.clone());
                let id = message["id"].clone();
                self.send(&json!({ "jsonrpc": "2.0", "id": id, "result": reply }));
            } else {
                self.notifications.push_back(message);
            }
            return;
        }
        // A response: exactly one per request id (a null id answers a message that had none).
        let id = message["id"].clone();
        if !id.is_null() {
            assert!(
                self.answered.insert(id.clone()),
                "request {id} was answered twice: {message}"
            );
        }
        self.responses.insert(id, (message, at));
    }
}

impl Drop for Lsp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_messages(stdout: impl Read, tx: mpsc::Sender<Incoming>, raw: Arc<Mutex<VecDeque<String>>>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut length = None;
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Incoming::Closed);
                    return;
                }
                Ok(_) => {}
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("Content-Length:") {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let Some(length) = length else {
            panic!("fettle sent a message without Content-Length");
        };
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            let _ = tx.send(Incoming::Closed);
            return;
        }
        if body.len() <= 4096 {
            let mut raw = raw.lock().unwrap();
            raw.push_back(String::from_utf8_lossy(&body).into_owned());
            if raw.len() > 1000 {
                raw.pop_front();
            }
        }
        let message: Value = serde_json::from_slice(&body).expect("fettle sent invalid JSON");
        // Stamped here, where an editor's event loop has the answer: the
        // hand-off to the test's thread below is the harness's own cost.
        if tx.send(Incoming::Message(message, Instant::now())).is_err() {
            return;
        }
    }
}

/// `message` with its `Content-Length` header.
fn frame(message: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(message).unwrap();
    let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    framed.extend_from_slice(&body);
    framed
}

// By path: benches include this file with `#[path]`, which would look
// for these beside it.
#[path = "harness/client.rs"]
mod client;
#[path = "harness/fixtures.rs"]
mod fixtures;
// The benches that include this file use only some.
#[allow(unused_imports)]
pub use fixtures::{apply_utf8_edit, file_uri, redact, BackgroundMock, Workspace};
