//! Completion with the real embedded model.

use super::*;

/// Whether the embedded model's weights are installed; when they are not, a
/// test skips, unless FETTLE_REQUIRE_MODEL=1 (as in CI) makes it fail.
fn embedded_model_installed() -> bool {
    let model = fettle::config::expand_home(fettle::config::DEFAULT_LOCAL_MODEL_PATH);
    if model.is_file() {
        return true;
    }
    assert!(
        std::env::var_os("FETTLE_REQUIRE_MODEL").is_none_or(|v| v != "1"),
        "{} is missing; run `fettle model fetch`",
        model.display()
    );
    eprintln!("skipping: {} is missing", model.display());
    false
}

/// The real embedded model, end to end (skipped when it is not installed,
/// unless FETTLE_REQUIRE_MODEL=1, as in CI).
#[test]
fn completes_with_the_real_embedded_model() {
    if !embedded_model_installed() {
        return;
    }
    let text = CALC_PY;
    let ws = Workspace::new(&[("calc.py", text)]);
    // Greedy decoding, so the test sees the same answer every run.
    let options = json!({ "models": { "local": { "temperature": 0 } } });
    let mut lsp = session(&ws, Some(options));
    let uri = ws.uri("calc.py");
    lsp.open(&uri, "python", text);
    // Three samples queue on the one embedded engine; on a loaded machine
    // (the whole suite in one process) they can take longer than TIMEOUT.
    let result = lsp
        .request_within(
            "textDocument/inlineCompletion",
            json!({ "textDocument": { "uri": uri }, "position": { "line": 2, "character": 8 },
                    "context": { "triggerKind": 1 } }),
            Duration::from_secs(180),
        )
        .unwrap();
    let insert = result["items"][0]["insertText"].as_str().unwrap_or("");
    assert!(
        !insert.trim().is_empty(),
        "{result}\n{}",
        lsp.stderr()
            .lines()
            .filter(|l| l.contains("completion"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(!insert.contains('\n'), "single-line here: {insert:?}");
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    assert_eq!(stats["shown"], 1, "{stats}");
    let stderr = lsp.stderr_log();
    let status = lsp.shutdown_and_exit();
    // The stderr reader may still be draining what was written at exit.
    std::thread::sleep(Duration::from_millis(200));
    assert!(status.success(), "{status}\n{}", stderr.lock().unwrap());
}

/// `shutdown` and `exit` while the embedded model is loading its weights,
/// generating or idle: the exit is clean every time. Exiting used to run
/// llama.cpp's static destructors under its busy thread, a SIGSEGV now and
/// then (this catches it only sometimes; a run of the old binary under
/// load crashed about once in 40 exits).
#[test]
fn exiting_while_the_embedded_model_works_is_clean() {
    if !embedded_model_installed() {
        return;
    }
    let text = CALC_PY;
    let ws = Workspace::new(&[("calc.py", text)]);
    let uri = ws.uri("calc.py");
    for delay_ms in [0, 50, 150, 300, 600, 1000] {
        let mut lsp = session(&ws, None);
        lsp.open(&uri, "python", text);
        lsp.send_request(
            "textDocument/inlineCompletion",
            json!({ "textDocument": { "uri": uri }, "position": { "line": 2, "character": 8 },
                    "context": { "triggerKind": 1 } }),
        );
        std::thread::sleep(Duration::from_millis(delay_ms));
        let stderr = lsp.stderr_log();
        let status = lsp.shutdown_and_exit();
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            status.success(),
            "exit {delay_ms} ms after the request: {status}\n{}",
            stderr.lock().unwrap()
        );
    }
}
