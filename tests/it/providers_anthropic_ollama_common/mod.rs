//! Helpers for the Anthropic and Ollama provider tests against the mock
//! model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::Duration;

use fettle::config::{ModelConfig, Provider as ProviderKind};
use fettle::mock::{Fault, MockServer, Script, ScriptedResponse};
use fettle::model::{ChatEvent, ChatStream, Model, ModelError, TextStream};
use futures::StreamExt;

/// A model of `provider` pointed at `server`, with quick timeouts.
pub fn config(provider: ProviderKind, base_url: &str, model: &str) -> ModelConfig {
    let mut cfg = ModelConfig::new(provider);
    cfg.base_url = Some(base_url.to_string());
    cfg.model = Some(model.to_string());
    cfg.timeout_ms = 3000;
    cfg.total_timeout_ms = 10_000;
    cfg
}

/// Sets the environment variable `var` (unique per test) to `value`.
pub fn set_key(var: &str, value: &str) {
    std::env::set_var(var, value);
}

pub async fn server(responses: Vec<ScriptedResponse>) -> MockServer {
    MockServer::start(Script::new(responses)).await.unwrap()
}

pub fn model(name: &str, cfg: &ModelConfig) -> Model {
    Model::new(name, cfg).unwrap()
}

/// Every event of a chat stream, or the first error (with the events
/// before it).
pub async fn collect_chat(mut stream: ChatStream) -> (Vec<ChatEvent>, Option<ModelError>) {
    let mut events = Vec::new();
    let limit = tokio::time::sleep(Duration::from_secs(20));
    tokio::pin!(limit);
    loop {
        tokio::select! {
            _ = &mut limit => panic!("chat stream did not end within 20 s; got {events:?}"),
            next = stream.next() => match next {
                None => return (events, None),
                Some(Ok(event)) => events.push(event),
                Some(Err(e)) => {
                    // An error ends the stream.
                    assert!(stream.next().await.is_none(), "stream went on after {e}");
                    return (events, Some(e));
                }
            },
        }
    }
}

/// The chat's events; panics on an error.
pub async fn chat_ok(stream: ChatStream) -> Vec<ChatEvent> {
    let (events, err) = collect_chat(stream).await;
    if let Some(e) = err {
        panic!("unexpected error {e} after {events:?}");
    }
    events
}

/// The chat's error; panics when it succeeds.
pub async fn chat_err(stream: ChatStream) -> ModelError {
    let (events, err) = collect_chat(stream).await;
    err.unwrap_or_else(|| panic!("expected an error, got {events:?}"))
}

/// The text pieces of a FIM stream, or the first error.
pub async fn collect_text(mut stream: TextStream) -> Result<Vec<String>, ModelError> {
    let mut pieces = Vec::new();
    let run = async {
        while let Some(piece) = stream.next().await {
            pieces.push(piece?);
        }
        Ok::<_, ModelError>(())
    };
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("FIM stream did not end within 20 s")?;
    Ok(pieces)
}

/// The text deltas of a chat, concatenated.
pub fn text_of(events: &[ChatEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// Asserts the stream's shape: exactly one `Stop`, last.
pub fn assert_one_stop_last(events: &[ChatEvent]) {
    let stops = events
        .iter()
        .filter(|e| matches!(e, ChatEvent::Stop(_)))
        .count();
    assert_eq!(stops, 1, "{events:?}");
    assert!(
        matches!(events.last(), Some(ChatEvent::Stop(_))),
        "{events:?}"
    );
}

pub fn fault(fault: Fault) -> ScriptedResponse {
    ScriptedResponse {
        fault: Some(fault),
        ..ScriptedResponse::text("never seen")
    }
}

pub fn status(status: u16, retry_after: Option<&str>, body: Option<&str>) -> ScriptedResponse {
    fault(Fault::Status {
        status,
        retry_after: retry_after.map(str::to_string),
        body: body.map(str::to_string),
    })
}

/// A local address where nothing listens.
pub async fn refused_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

/// A one-shot HTTP server that answers the first request with `head`
/// (status line and headers, chunked) and one chunk `first`, then holds the
/// connection open. The receiver fires when the client closes the
/// connection: proof that dropping a stream cancels its request.
pub async fn cancel_probe(
    content_type: &str,
    first: &str,
) -> (String, tokio::sync::oneshot::Receiver<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (closed, on_close) = tokio::sync::oneshot::channel();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{first}\r\n",
        first.len()
    );
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        // Read the request head and body (the body ends with the JSON's `}`).
        while !request.ends_with(b"}") {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "client closed before sending its request");
            request.extend_from_slice(&buf[..n]);
        }
        socket.write_all(head.as_bytes()).await.unwrap();
        // Wait for EOF (or a reset) from the client.
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = closed.send(());
    });
    (url, on_close)
}
