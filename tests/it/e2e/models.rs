//! What the server says about its models.
use std::time::{Duration, Instant};

use fettle::mock::{Fault, MockServer, Script, ScriptedResponse};
use serde_json::json;

use super::harness::{BackgroundMock, Lsp, Workspace};

#[test]
fn a_missing_embedded_model_is_reported_once_naming_the_fetch_command() {
    let ws = Workspace::new(&[]);
    let missing = ws.root().join("no-such-model.gguf");
    // A home without models: with a coder model installed, edit and agent
    // would default to it and this message would name completion alone.
    let home = tempfile::tempdir().unwrap();
    let mut lsp = Lsp::spawn_with(&[], &[("HOME", home.path().to_str().unwrap())]);
    lsp.initialize(
        &ws.root(),
        json!({}),
        Some(json!({ "models": { "local": { "path": missing.display().to_string() } } })),
    );
    let shown = lsp.notification("window/showMessage", |m| m["type"] == 2);
    let text = shown["message"].as_str().unwrap();
    assert!(text.contains("fettle model fetch"), "{text}");
    assert!(text.contains("no-such-model.gguf"), "{text}");
    assert!(text.contains("used by completion, edit, agent"), "{text}");

    // A configuration change that leaves the problem as it was does not
    // repeat the message. (The unknown key makes the change observable: its
    // warning is sent just before the models are checked, in the same step.)
    lsp.notify(
        "workspace/didChangeConfiguration",
        json!({ "settings": { "fettle": { "models": { "local": { "path": missing.display().to_string() } }, "completion": { "debouce_ms": 5 } } } }),
    );
    lsp.notification("window/showMessage", |m| {
        m["message"].as_str().unwrap_or("").contains("debouce_ms")
    });
    lsp.request("workspace/symbol", json!({ "query": "" }))
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let repeated: Vec<_> = lsp
        .pending_notifications("window/showMessage")
        .into_iter()
        .filter(|m| {
            m["message"]
                .as_str()
                .unwrap_or("")
                .contains("fettle model fetch")
        })
        .collect();
    assert!(repeated.is_empty(), "{repeated:?}");
    assert!(lsp.shutdown_and_exit().success());
}

// ---- Model health: deadline, pause, failure and recovery messages ----

const LIB: &str = "fn area(w: f64, h: f64) -> f64 {\n    let a = \n    a\n}\n";

fn openai_model(base: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut model = json!({
        "provider": "openai", "base_url": format!("{base}/v1"), "model": "starcoder2-3b",
        "fim_template": "starcoder", "timeout_ms": 3000,
    });
    if let (Some(m), Some(e)) = (model.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    model
}

/// A workspace with `src/lib.rs` open, completing with the OpenAI-style
/// model `name` at `base` (`model` and `completion` merge into its settings).
fn session(
    name: &str,
    base: &str,
    model: serde_json::Value,
    completion: serde_json::Value,
) -> (Workspace, Lsp, String) {
    let ws = Workspace::new(&[("src/lib.rs", LIB)]);
    let mut lsp = Lsp::spawn();
    let mut completion_settings = json!({ "model": name });
    if let (Some(c), Some(e)) = (completion_settings.as_object_mut(), completion.as_object()) {
        c.extend(e.clone());
    }
    let options = json!({
        "models": { name: openai_model(base, model) },
        "completion": completion_settings,
    });
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), Some(options));
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", LIB);
    (ws, lsp, uri)
}

/// An automatic inline completion at the end of `let a = `.
fn complete(lsp: &mut Lsp, uri: &str) -> serde_json::Value {
    lsp.request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 1, "character": 12 },
                "context": { "triggerKind": 2 } }),
    )
    .unwrap()
}

/// The `fettle/stats` entry for `model`.
fn health_of(lsp: &mut Lsp, model: &str) -> serde_json::Value {
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    stats["models"]
        .as_array()
        .and_then(|all| all.iter().find(|m| m["model"] == model).cloned())
        .unwrap_or_else(|| panic!("no health for {model} in {stats}"))
}

fn messages_about(lsp: &mut Lsp, needle: &str) -> Vec<String> {
    lsp.pending_notifications("window/showMessage")
        .iter()
        .filter_map(|m| m["message"].as_str().map(str::to_owned))
        .filter(|m| m.contains(needle))
        .collect()
}

/// A `429` with `Retry-After: 30`: the completion gives up well before
/// 30 s (the bug: 60 s of honoured retries), the model is paused, later
/// completions are skipped without a request reaching the server, and
/// `fettle/stats` shows the pause (model, until, reason).
#[test]
fn a_rate_limited_model_is_paused_and_completions_skip_it() {
    let mut ok = ScriptedResponse::text("w * h;\n");
    ok.repeat = true;
    let limited = ScriptedResponse {
        fault: Some(Fault::Status {
            status: 429,
            retry_after: Some("30".into()),
            body: None,
        }),
        ..ScriptedResponse::default()
    };
    let mock = BackgroundMock::start(Script::new(vec![limited, ok]));
    let (_ws, mut lsp, uri) = session(
        "busy",
        &mock.server.url(),
        json!({ "max_retries": 2 }),
        json!({ "deadline_ms": 2000 }),
    );

    let started = Instant::now();
    assert!(complete(&mut lsp, &uri).is_null());
    // A generous ceiling: the point is "does not wait out the 30 s".
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    for _ in 0..3 {
        assert!(complete(&mut lsp, &uri).is_null());
    }
    assert_eq!(
        mock.server.requests().len(),
        1,
        "paused: no further requests"
    );

    let health = health_of(&mut lsp, "busy");
    assert_eq!(health["state"], "paused", "{health}");
    assert!(health["pausedForMs"].as_u64().unwrap() > 20_000, "{health}");
    let until = health["pausedUntilUnixMs"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(until > now + 20_000 && until <= now + 31_000, "{health}");
    assert!(
        health["reason"].as_str().unwrap().contains("HTTP 429"),
        "{health}"
    );

    let shown = lsp.notification("window/showMessage", |m| {
        m["message"].as_str().unwrap_or("").contains("\"busy\"")
    });
    assert!(
        shown["message"].as_str().unwrap().contains("429"),
        "{shown}"
    );
    assert!(messages_about(&mut lsp, "\"busy\"").is_empty(), "said once");
    assert!(lsp.shutdown_and_exit().success());
}

/// A model on a closed port: one message naming the model and the fix
/// (not one per keystroke), the reason in `fettle/stats`, and when a
/// server appears on that port, a message that it works again.
#[test]
fn a_model_that_is_down_is_reported_once_and_so_is_its_return() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let (_ws, mut lsp, uri) = session("down", &base, json!({ "max_retries": 0 }), json!({}));

    for _ in 0..4 {
        assert!(complete(&mut lsp, &uri).is_null());
    }
    let shown = lsp.notification("window/showMessage", |m| {
        m["message"].as_str().unwrap_or("").contains("\"down\"")
    });
    assert_eq!(shown["type"], 2, "a warning: {shown}");
    let text = shown["message"].as_str().unwrap();
    assert!(text.contains("cannot connect"), "{text}");
    assert!(text.contains("models.down"), "the fix: {text}");
    lsp.request("workspace/symbol", json!({ "query": "" }))
        .unwrap();
    assert!(
        messages_about(&mut lsp, "\"down\"").is_empty(),
        "once, not per keystroke"
    );

    let health = health_of(&mut lsp, "down");
    assert_eq!(health["state"], "failing", "{health}");
    assert_eq!(health["failures"], 4, "{health}");
    assert!(
        health["reason"]
            .as_str()
            .unwrap()
            .contains("cannot connect"),
        "{health}"
    );

    // The server comes up on that port.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut ok = ScriptedResponse::text("w * h;\n");
    ok.repeat = true;
    let server = runtime
        .block_on(MockServer::start_on(Script::new(vec![ok]), addr))
        .unwrap();
    let answer = complete(&mut lsp, &uri);
    let text = answer["items"][0]["insertText"].as_str().unwrap_or("");
    assert!(text.contains("w * h"), "{answer}");
    let back = lsp.notification("window/showMessage", |m| {
        m["message"].as_str().unwrap_or("").contains("\"down\"")
    });
    assert!(
        back["message"].as_str().unwrap().contains("works again"),
        "{back}"
    );
    assert_eq!(health_of(&mut lsp, "down")["state"], "ok");
    assert_eq!(server.requests().len(), 1);
    assert!(lsp.shutdown_and_exit().success());
}

/// A model that trickles (a token every 3 s, or only keep-alive
/// comments) cannot hold a completion: the completion deadline bounds the
/// first (the bug: it ran to `total_timeout_ms`), and keep-alives do not
/// reset the idle limit (`timeout_ms`) for the second, even with no
/// deadline. Both end empty, well before the stream would.
#[test]
fn a_trickling_model_cannot_hold_a_completion() {
    let tokens = ScriptedResponse {
        chunks: Some(
            ["w", " *", " h", " *", " 2.0", ";\n"]
                .map(String::from)
                .to_vec(),
        ),
        chunk_delay_ms: 3000,
        ..ScriptedResponse::default()
    };
    let comments = ScriptedResponse {
        text: "w * h;\n".into(),
        keepalives: 80,
        keepalive_ms: 250,
        ..ScriptedResponse::default()
    };
    let mock = BackgroundMock::start(Script::new(vec![tokens, comments]));
    let (_ws, mut lsp, uri) = session(
        "slow",
        &mock.server.url(),
        json!({ "max_retries": 0 }),
        json!({ "deadline_ms": 1000 }),
    );

    let started = Instant::now();
    assert!(complete(&mut lsp, &uri).is_null());
    // Ceiling, not a target: the stream itself would take 15 s.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    lsp.notify(
        "workspace/didChangeConfiguration",
        json!({ "settings": { "fettle": { "completion": { "model": "slow", "deadline_ms": 0 },
            "models": { "slow": openai_model(&mock.server.url(), json!({ "max_retries": 0, "timeout_ms": 1000 })) } } } }),
    );
    lsp.request("workspace/symbol", json!({ "query": "" }))
        .unwrap();
    let started = Instant::now();
    assert!(complete(&mut lsp, &uri).is_null());
    // The keep-alives alone would hold it 20 s.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(mock.server.requests().len(), 2);
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    assert_eq!(stats["errors"], 2, "{stats}");
    assert!(lsp.shutdown_and_exit().success());
}
