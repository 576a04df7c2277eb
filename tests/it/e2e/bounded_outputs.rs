//! One big output must not stall everything (issue 39): a command that
//! writes a huge file, a model that sends megabytes of tool arguments and
//! a rewrite of a multi-megabyte selection all end with answers of bounded
//! size (`docs/lsp-extensions.md`, "Size limits").
use std::io::Read as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use fettle::mock::Script;
use serde_json::{json, Value};

use super::harness::{BackgroundMock, Lsp, Workspace};
use crate::agent_common::{fettle_command, Mock};

/// The documented caps: one event or result, serialized.
const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// The command writes 64 MiB of zeros (six times that as JSON escapes,
/// before the fix), the tests print 4 MB: `--json` prints one small line,
/// with the file's size and hash instead of its content.
#[test]
fn fix_json_stays_small_when_a_command_writes_a_huge_file() {
    let script = json!({ "responses": [
        { "tool_calls": [{ "name": "run_command",
            "arguments": { "command": "head -c 67108864 /dev/zero > big.bin" } }] },
        { "text": "Done." },
    ] });
    let mock = Mock::start(Script::from_json(&script.to_string()).unwrap());
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(
        ws.join("check.sh"),
        "yes ok | head -c 4000000\ntest -f big.bin\n",
    )
    .unwrap();
    std::fs::write(ws.join("fettle.toml"), mock.config("")).unwrap();
    let mut child = fettle_command(
        &[
            "fix",
            "--json",
            "--yes",
            "--test",
            "sh check.sh",
            ws.to_str().unwrap(),
        ],
        &temp.path().join("cache"),
    )
    .env("FETTLE_LOG", "warn")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Counted, not kept: before the fix this was 400 MB.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut kept, mut total, mut buf) = (Vec::new(), 0usize, vec![0u8; 1 << 16]);
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
            if kept.len() < 8 * MAX_EVENT_BYTES {
                kept.extend_from_slice(&buf[..n]);
            }
        }
        (kept, total)
    });
    let mut stderr = child.stderr.take().unwrap();
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("fettle fix did not finish within 240 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (kept, total) = reader.join().unwrap();
    let stderr = stderr_reader.join().unwrap();
    assert!(
        total < 2 * MAX_EVENT_BYTES,
        "--json printed {total} bytes\n{stderr}"
    );
    assert_eq!(status.code(), Some(0), "{stderr}");
    let result: Value = serde_json::from_slice(&kept).unwrap();
    assert_eq!(result["status"], "success", "{result:#}");
    let diff = result["diff"].as_str().unwrap();
    assert!(
        diff.contains("big.bin changed (absent → 67108864 bytes, sha256 "),
        "{diff}"
    );
    assert!(result["changedFiles"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f.as_str().unwrap().ends_with("big.bin")));
}

/// The model sends 3 MB of arguments (a `write_file`): no
/// `fettle/taskEvent` and not the command's answer carries more than the
/// documented 1 MiB, and the event says what it left out.
#[test]
fn task_events_over_lsp_are_bounded() {
    let content = "0123456789abcdef\n".repeat(3 * 1024 * 1024 / 17);
    let script = json!({ "responses": [
        { "tool_calls": [{ "name": "write_file",
            "arguments": { "path": "big.txt", "content": content } }] },
        { "text": "Wrote it." },
    ] });
    let mock = BackgroundMock::start(Script::from_json(&script.to_string()).unwrap());
    let ws = Workspace::new(&[("notes.txt", "hello\n")]);
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_str().unwrap().to_owned();
    let mut lsp = Lsp::spawn_with(&[], &[("FETTLE_CACHE_DIR", cache_dir.as_str())]);
    let mut caps = Lsp::capabilities(&["utf-8"]);
    caps["window"] = json!({ "workDoneProgress": true, "showMessage": {} });
    caps["workspace"]["applyEdit"] = json!(true);
    let options = json!({
        "models": { "mock": {
            "provider": "openai", "base_url": format!("{}/v1", mock.server.url()),
            "model": "mock-coder", "max_retries": 0,
        } },
        "agent": { "model": "mock", "test_command": "test -f big.txt" },
    });
    lsp.initialize(&ws.root(), caps, Some(options));
    let id = lsp.send_request(
        "workspace/executeCommand",
        json!({ "command": "fettle.chat", "arguments": [{ "message": "write big.txt" }] }),
    );
    let response = lsp.response_within(&id, Duration::from_secs(120));
    let result = &response["result"];
    assert_eq!(
        result["status"],
        "success",
        "{response:#}\n{}",
        lsp.stderr()
    );
    assert!(serde_json::to_string(&response).unwrap().len() <= MAX_EVENT_BYTES + 1024);
    assert_eq!(
        std::fs::read_to_string(ws.path("big.txt")).unwrap().len(),
        content.len(),
        "the write itself is whole"
    );
    let events = lsp.pending_notifications("fettle/taskEvent");
    let largest = events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap().len())
        .max()
        .unwrap();
    assert!(largest <= MAX_EVENT_BYTES, "an event of {largest} bytes");
    let call = events
        .iter()
        .find(|e| e["kind"] == "tool_call" && e["data"]["name"] == "write_file")
        .expect("the write_file call's event");
    let shown = call["data"]["arguments"]["content"].as_str().unwrap();
    assert!(shown.len() < content.len(), "{} bytes shown", shown.len());
    assert!(shown.contains("bytes) elided …]"), "the cut is said");
}

/// A rewrite of a 3 MB selection is refused from its size alone, before it
/// is tokenized, with the usual clear message; the model is never asked.
#[test]
fn a_rewrite_of_megabytes_is_refused_by_its_size() {
    let mock = BackgroundMock::start(
        Script::from_json(r#"{"responses": [{"text": "x", "repeat": true}]}"#).unwrap(),
    );
    let text = "value = 1\n".repeat(300_000);
    let ws = Workspace::new(&[("big.py", &text)]);
    let uri = ws.uri("big.py");
    let mut lsp = Lsp::spawn();
    let mut caps = Lsp::capabilities(&["utf-8"]);
    caps["window"] = json!({ "workDoneProgress": true, "showMessage": {} });
    caps["workspace"]["applyEdit"] = json!(true);
    let options = json!({
        "models": { "mock": {
            "provider": "openai", "base_url": format!("{}/v1", mock.server.url()),
            "model": "mock-coder", "max_retries": 0,
        } },
        "edit": { "model": "mock" },
    });
    lsp.initialize(&ws.root(), caps, Some(options));
    lsp.open(&uri, "python", &text);
    let range = json!({ "start": { "line": 0, "character": 0 },
                        "end": { "line": 300_000, "character": 0 } });
    let result = lsp
        .request(
            "workspace/executeCommand",
            json!({ "command": "fettle.rewrite", "arguments": [{
                "uri": uri, "range": range, "version": 1, "instruction": "Use a constant" }] }),
        )
        .unwrap();
    assert_eq!(result["applied"], false, "{result}");
    let summary = result["summary"].as_str().unwrap();
    assert!(
        summary.contains("the selection is too large for the model `mock`: its 3000000 bytes are at least 23437 tokens and the prompt's budget is 6000"),
        "{summary}"
    );
    assert!(summary.contains("select less"), "{summary}");
    assert!(
        !mock
            .server
            .requests()
            .iter()
            .any(|r| r.path.contains("/chat/completions")),
        "the model was asked"
    );
}
