//! Superseded, cancelled and failing requests are answered promptly.

use super::*;

#[test]
fn a_model_that_is_down_gives_an_empty_result_fast() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let options = json!({
        "models": { "down": { "provider": "openai", "base_url": format!("http://127.0.0.1:{port}/v1"), "model": "m", "max_retries": 0 } },
        "completion": { "model": "down" },
    });
    let (_ws, mut lsp, uri) = open_lib(options);
    let started = Instant::now();
    let result = complete(&mut lsp, &uri, 3, 12);
    assert!(result.is_null(), "{result}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    assert_eq!(stats["errors"], 1, "{stats}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_newer_request_supersedes_and_a_stale_result_is_discarded() {
    let slow = ScriptedResponse {
        delay_ms: 600,
        repeat: true,
        ..ScriptedResponse::text("p.x;\n")
    };
    let mock = Mock::start(vec![slow]);
    let (_ws, mut lsp, uri) = open_lib(mock.options());

    let params =
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 12 } });
    let first = lsp.send_request("textDocument/inlineCompletion", params.clone());
    std::thread::sleep(Duration::from_millis(100));
    let second = lsp.send_request("textDocument/inlineCompletion", params);
    let started = Instant::now();
    let answer = lsp.response(&first);
    assert!(answer["result"].is_null(), "{answer}");
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "superseded answers at once"
    );

    // The document changes while the second waits for the model.
    std::thread::sleep(Duration::from_millis(100));
    insert(&mut lsp, &uri, 2, (0, 0), "// edited\n");
    let answer = lsp.response(&second);
    assert!(answer["result"].is_null(), "stale: {answer}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn cancel_request_and_a_hanging_model_are_answered_promptly() {
    use fettle::mock::Fault;
    let hang = ScriptedResponse {
        fault: Some(Fault::Hang),
        repeat: true,
        ..Default::default()
    };
    let mock = Mock::start(vec![hang]);
    let mut options = mock.options();
    options["models"]["mock"]["timeout_ms"] = json!(400);
    let (_ws, mut lsp, uri) = open_lib(options);
    let params =
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 12 } });

    // $/cancelRequest: RequestCancelled, at once.
    let id = lsp.send_request("textDocument/inlineCompletion", params.clone());
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    lsp.notify("$/cancelRequest", json!({ "id": id }));
    let answer = lsp.response(&id);
    assert_eq!(answer["error"]["code"], -32800, "{answer}");
    assert!(started.elapsed() < Duration::from_millis(300));

    // A model that never answers: an empty result within its timeout.
    let started = Instant::now();
    let result = complete(&mut lsp, &uri, 3, 12);
    assert!(result.is_null(), "{result}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_keystroke_reuses_the_model_request_already_in_flight() {
    let slow = ScriptedResponse {
        delay_ms: 500,
        ..ScriptedResponse::text("p.x * p.y;\n")
    };
    let mock = Mock::start(vec![slow]);
    let (_ws, mut lsp, uri) = open_lib(mock.options());
    let first = lsp.send_request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 12 } }),
    );
    std::thread::sleep(Duration::from_millis(150));
    // The user types the suggestion's first character while the model works.
    insert(&mut lsp, &uri, 2, (3, 12), "p");
    let second = lsp.send_request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 13 } }),
    );
    assert!(lsp.response(&first)["result"].is_null(), "superseded");
    let answer = lsp.response(&second);
    assert_eq!(
        answer["result"]["items"][0]["insertText"], ".x * p.y;",
        "{answer}"
    );
    assert_eq!(
        mock.prompts().len(),
        1,
        "one model request served both keystrokes"
    );
    assert!(lsp.shutdown_and_exit().success());
}

/// VS Code cancels each inline completion request ($/cancelRequest) as the
/// user types on: the model request it started still serves the next one.
#[test]
fn a_request_the_client_cancels_leaves_its_model_request_to_the_next() {
    let slow = ScriptedResponse {
        delay_ms: 500,
        ..ScriptedResponse::text("p.x * p.y;\n")
    };
    let mock = Mock::start(vec![slow]);
    let (_ws, mut lsp, uri) = open_lib(mock.options());
    let first = lsp.send_request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 12 } }),
    );
    std::thread::sleep(Duration::from_millis(150));
    lsp.notify("$/cancelRequest", json!({ "id": first }));
    let cancelled = lsp.response(&first);
    assert_eq!(cancelled["error"]["code"], -32800, "{cancelled}");
    insert(&mut lsp, &uri, 2, (3, 12), "p");
    let second = lsp.send_request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 13 } }),
    );
    let answer = lsp.response(&second);
    assert_eq!(
        answer["result"]["items"][0]["insertText"], ".x * p.y;",
        "{answer}"
    );
    assert_eq!(mock.prompts().len(), 1, "one model request for both");
    assert!(lsp.shutdown_and_exit().success());
}
