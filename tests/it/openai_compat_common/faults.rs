//! The fault suite every remote provider must pass, through either
//! capability, and the macro that makes one test of each.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use fettle::mock::{Fault, MockToolCall, ScriptedResponse};
use fettle::model::{ChatEvent, Model, ModelError};
use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{collect_chat, fim_req, fim_text, hello, model, server, set_env, text_of, Cap, Target};

/// Runs one request through `cap` and returns its text or its error.
pub async fn run(model: &Model, cap: Cap) -> Result<String, ModelError> {
    match cap {
        Cap::Chat => {
            let (events, err) = collect_chat(model.chat(hello())).await;
            match err {
                Some(e) => Err(e),
                None => {
                    let stops = events
                        .iter()
                        .filter(|e| matches!(e, ChatEvent::Stop(_)))
                        .count();
                    assert_eq!(stops, 1, "{events:?}");
                    Ok(text_of(&events))
                }
            }
        }
        Cap::Fim => fim_text(model.fim(fim_req())).await,
    }
}

/// Runs one request through `cap` that must fail: the text that came
/// before the error, and the error.
pub async fn run_to_error(model: &Model, cap: Cap) -> (String, ModelError) {
    match cap {
        Cap::Chat => {
            let (events, err) = collect_chat(model.chat(hello())).await;
            let err = err.unwrap_or_else(|| panic!("expected an error, got {events:?}"));
            (text_of(&events), err)
        }
        Cap::Fim => {
            let mut stream = model.fim(fim_req());
            let mut text = String::new();
            while let Some(piece) = stream.next().await {
                match piece {
                    Ok(piece) => text.push_str(&piece),
                    Err(e) => return (text, e),
                }
            }
            panic!("expected an error, got {text:?}")
        }
    }
}

/// A `Timeout` of the `timeout_ms` limit (no answer, or no further output).
fn is_timeout_ms(err: &ModelError) -> bool {
    matches!(
        err,
        ModelError::Timeout {
            key: "timeout_ms",
            ..
        }
    )
}

pub fn fault(fault: Fault) -> ScriptedResponse {
    ScriptedResponse {
        text: "one two three four five six".into(),
        fault: Some(fault),
        ..ScriptedResponse::default()
    }
}

pub fn status(status: u16, retry_after: Option<&str>) -> ScriptedResponse {
    fault(Fault::Status {
        status,
        retry_after: retry_after.map(str::to_string),
        body: None,
    })
}

/// 429 with `Retry-After: 1`, then success: two requests, ≥ 1 s apart.
pub async fn rate_limited_then_ok(t: Target, cap: Cap) {
    let server = server(vec![
        status(429, Some("1")),
        ScriptedResponse::text("ok then"),
    ])
    .await;
    let model = model(&t.config(&server.url()));
    let started = Instant::now();
    assert_eq!(run(&model, cap).await.unwrap(), "ok then");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.path == t.path(cap)));
    assert_eq!(requests[0].body, requests[1].body);
}

/// Two 500s, then success on the third attempt (`max_retries = 2`).
pub async fn server_errors_then_ok(t: Target, cap: Cap) {
    let server = server(vec![
        status(500, None),
        status(500, None),
        ScriptedResponse::text("fine"),
    ])
    .await;
    let model = model(&t.config(&server.url()));
    assert_eq!(run(&model, cap).await.unwrap(), "fine");
    assert_eq!(server.requests().len(), 3);
}

/// 500 on every attempt: a `Server` error that counts the attempts.
pub async fn server_errors_exhaust_retries(t: Target, cap: Cap) {
    let mut always = status(503, None);
    always.repeat = true;
    let server = server(vec![always]).await;
    let mut cfg = t.config(&server.url());
    cfg.max_retries = 1;
    let err = run(&model(&cfg), cap).await.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Server {
                status: 503,
                attempts: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 2);
    let msg = err.to_string();
    assert!(
        msg.contains("HTTP 503") && msg.contains("gave up after 2 attempt(s)"),
        "{msg}"
    );
}

/// 401: an `Auth` error naming the variable, never the key; not retried.
pub async fn unauthorized(t: Target, var: &str) {
    set_env(var, "sk-secret-401");
    let server = server(vec![status(401, None), status(401, None)]).await;
    let mut cfg = t.config(&server.url());
    cfg.api_key_env = Some(var.to_string());
    let err = run(&model(&cfg), Cap::Chat).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Auth { status: 401, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains(var), "{msg}");
    assert!(msg.contains("HTTP 401"), "{msg}");
    assert!(!msg.contains("sk-secret-401"), "{msg}");
    assert_eq!(server.requests().len(), 1);

    // Unset variable: the message says so.
    let mut cfg = t.config(&server.url());
    cfg.api_key_env = Some(format!("{var}_UNSET"));
    let err = run(&model(&cfg), Cap::Chat).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Auth { status: 401, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{var}_UNSET")) && msg.contains("not set"),
        "{msg}"
    );
}

/// 404: `ModelNotFound` with the model name sent.
pub async fn model_not_found(t: Target, cap: Cap) {
    let server = server(vec![status(404, None)]).await;
    let err = run(&model(&t.config(&server.url())), cap)
        .await
        .unwrap_err();
    let ModelError::ModelNotFound { name, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(name, t.model.unwrap_or("(none)"));
    assert!(err.to_string().contains("does not know model"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

/// The connection drops after some output: that output, then truncated,
/// and not retried.
pub async fn disconnect_not_retried(t: Target, cap: Cap) {
    let server = server(vec![
        fault(Fault::Disconnect { after_chunks: 2 }),
        ScriptedResponse::text("must not be fetched"),
    ])
    .await;
    let (text, err) = run_to_error(&model(&t.config(&server.url())), cap).await;
    assert_eq!(text, "one two");
    assert!(matches!(err, ModelError::TruncatedStream { .. }), "{err:?}");
    assert_eq!(server.requests().len(), 1);
}

/// The body ends cleanly but without the terminal marker: the output
/// before, then an error naming what is missing.
pub async fn truncated(t: Target, cap: Cap) {
    let server = server(vec![fault(Fault::Truncate { after_chunks: 2 })]).await;
    let (text, err) = run_to_error(&model(&t.config(&server.url())), cap).await;
    assert_eq!(text, "one two");
    assert!(matches!(err, ModelError::TruncatedStream { .. }), "{err:?}");
    let expected = format!("stopped before it was complete ({})", t.truncation(cap));
    assert!(err.to_string().contains(&expected), "{err}");
    assert_eq!(server.requests().len(), 1);
}

pub async fn malformed(t: Target, cap: Cap) {
    let server = server(vec![fault(Fault::MalformedJson)]).await;
    let err = run(&model(&t.config(&server.url())), cap)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::MalformedResponse { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("model \"fast\": malformed response from"),
        "{err}"
    );
}

/// An event the format does not define: an error naming it (the mock's
/// is called `mystery`, or has `"mystery": true`).
pub async fn unknown_event(t: Target, cap: Cap) {
    let server = server(vec![fault(Fault::UnknownEvent)]).await;
    let err = run(&model(&t.config(&server.url())), cap)
        .await
        .unwrap_err();
    let ModelError::UnknownEvent { event, .. } = &err else {
        panic!("{err:?}");
    };
    if t.names_events(cap) {
        assert_eq!(event, "mystery");
    } else {
        assert!(event.contains(r#""mystery":true"#), "{event}");
    }
    let expected = format!("unknown event {event:?}");
    assert!(err.to_string().contains(&expected), "{err}");
}

/// A server that never answers: a `Timeout` after `timeout_ms`, not retried.
pub async fn hang_times_out(t: Target, cap: Cap) {
    let server = server(vec![fault(Fault::Hang)]).await;
    let mut cfg = t.config(&server.url());
    cfg.timeout_ms = 300;
    let started = Instant::now();
    let err = run(&model(&cfg), cap).await.unwrap_err();
    assert!(is_timeout_ms(&err), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(
        err.to_string()
            .contains("within 300ms (models.fast.timeout_ms)"),
        "{err}"
    );
}

/// Nothing listens on the port: a `Connect` error naming the URL,
/// quickly, with or without a retry.
pub async fn connection_refused(t: Target) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let base = format!("http://127.0.0.1:{port}");
    for retries in [0, 1] {
        let mut cfg = t.config(&base);
        cfg.max_retries = retries;
        let started = Instant::now();
        let err = run(&model(&cfg), Cap::Chat).await.unwrap_err();
        assert!(matches!(err, ModelError::Connect { .. }), "{err:?}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        let msg = err.to_string();
        let url = format!("{base}{}", t.chat_path);
        assert!(msg.contains(&format!("cannot connect to {url}")), "{msg}");
        assert!(msg.contains("Is the server running?"), "{msg}");
    }
}

pub fn bad_url(t: Target) {
    let mut cfg = t.config("");
    cfg.base_url = Some("not a url".into());
    let err = Model::new("fast", &cfg).unwrap_err();
    assert!(matches!(err, ModelError::BadUrl { .. }), "{err:?}");
    assert!(
        err.to_string().contains("invalid base_url \"not a url\""),
        "{err}"
    );
}

/// Invalid JSON in a tool call's arguments is an error, not an event.
pub async fn bad_tool_arguments(t: Target) {
    let call = MockToolCall {
        arguments_raw: Some("{\"path\": ".into()),
        ..MockToolCall::new("read_file", json!({}))
    };
    let server = server(vec![ScriptedResponse {
        tool_calls: vec![call],
        ..ScriptedResponse::default()
    }])
    .await;
    let (events, err) = collect_chat(model(&t.config(&server.url())).chat(hello())).await;
    let err = err.expect("an error");
    assert!(
        matches!(&err, ModelError::BadToolArguments { tool, .. } if tool == "read_file"),
        "{err:?}"
    );
    assert!(err.to_string().contains("not valid JSON"), "{err}");
    assert!(!events
        .iter()
        .any(|e| matches!(e, ChatEvent::ToolCall(_) | ChatEvent::Stop(_))));
}

/// Dropping the stream after the first piece ends at once, although the
/// server still has seconds of output to send.
pub async fn drop_mid_stream(t: Target, cap: Cap) {
    let words: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
    let server = server(vec![ScriptedResponse {
        chunks: Some(words),
        chunk_delay_ms: 100,
        ..ScriptedResponse::default()
    }])
    .await;
    let model = model(&t.config(&server.url()));
    let started = Instant::now();
    match cap {
        Cap::Chat => {
            let mut stream = model.chat(hello());
            let first = stream.next().await.unwrap().unwrap();
            assert!(matches!(first, ChatEvent::TextDelta(_)), "{first:?}");
        }
        Cap::Fim => {
            let mut stream = model.fim(fim_req());
            assert_eq!(stream.next().await.unwrap().unwrap(), "w0 ");
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

/// Dropping the stream closes the connection: a raw server that sends the
/// start of an answer and then waits sees the client hang up.
pub async fn drop_closes_connection(t: Target, cap: Cap) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
    let (content_type, opening) = t.opening();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut buf).await.unwrap();
            assert!(n > 0, "client closed before sending its request");
            seen.extend_from_slice(&buf[..n]);
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n\
             transfer-encoding: chunked\r\n\r\n"
        );
        let chunk = format!("{head}{:x}\r\n{opening}\r\n", opening.len());
        sock.write_all(chunk.as_bytes()).await.unwrap();
        // Read (and discard the rest of the request) until the client hangs up.
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = closed_tx.send(());
    });
    let mut cfg = t.config(&url);
    cfg.max_retries = 0;
    let model = model(&cfg);
    match cap {
        Cap::Chat => {
            let mut stream = model.chat(hello());
            let first = stream.next().await.unwrap().unwrap();
            assert_eq!(first, ChatEvent::TextDelta("hi".into()));
        }
        Cap::Fim => {
            let mut stream = model.fim(fim_req());
            assert_eq!(stream.next().await.unwrap().unwrap(), "hi");
        }
    }
    tokio::time::timeout(Duration::from_secs(1), closed_rx)
        .await
        .expect("the connection was not closed within 1 s of the drop")
        .unwrap();
}

/// `429 Retry-After: 30` to a request with a 2 s deadline: it gives up at
/// once instead of waiting 30 s per retry, and the model is paused: the
/// next requests with a deadline fail at once without reaching the server,
/// and the pause shows in the model's health.
pub async fn retry_after_beyond_the_deadline_pauses_the_model(t: Target, cap: Cap) {
    let mut ok = ScriptedResponse::text("too late");
    ok.repeat = true;
    let server = server(vec![status(429, Some("30")), ok]).await;
    // A name of its own: the pause is kept per model name and URL for the
    // whole process, and must not reach a later test whose server gets
    // this one's port.
    let name = format!("paused-{}-{cap:?}", t.provider);
    let model = Model::new(&name, &t.config(&server.url())).unwrap();
    let started = Instant::now();
    let err = fim_text(model.fim_within(fim_req(), Duration::from_secs(2)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(30)),
        "{err:?}"
    );
    // The bug waited 30 s per retry; a generous ceiling, not a timing target.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.requests().len(), 1);

    for _ in 0..3 {
        let err = run(
            &model.clone().with_deadline(Some(Duration::from_secs(2))),
            cap,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ModelError::Paused { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("paused for another") && msg.contains("429"),
            "{msg}"
        );
    }
    assert_eq!(
        server.requests().len(),
        1,
        "a paused model gets no requests"
    );

    let health = fettle::model::health::report([name.as_str()]);
    let mine: Vec<_> = health
        .iter()
        .filter(|h| h.base_url.starts_with(&server.url()))
        .collect();
    assert_eq!(mine.len(), 1, "{health:?}");
    assert_eq!(mine[0].state, "paused");
    assert!(mine[0].paused_for_ms.unwrap() > 20_000, "{:?}", mine[0]);
    assert!(mine[0].paused_until_unix_ms.is_some());
    assert!(mine[0].reason.as_deref().unwrap_or("").contains("HTTP 429"));
}

/// A request without a deadline (the agent's) waits out a pause another
/// request opened, then asks the server: one request during the pause, not
/// a failure.
pub async fn a_request_without_a_deadline_waits_out_the_pause(t: Target, cap: Cap) {
    let server = server(vec![
        status(429, Some("1")),
        ScriptedResponse::text("ok then"),
    ])
    .await;
    let model = model(&t.config(&server.url()));
    let err = fim_text(model.fim_within(fim_req(), Duration::from_millis(500)))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::RateLimited { .. }), "{err:?}");
    assert_eq!(server.requests().len(), 1);
    let started = Instant::now();
    assert_eq!(run(&model, cap).await.unwrap(), "ok then");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.requests().len(), 2);
}

/// A stream that only sends keep-alive comments (SSE `: keep-alive`) for
/// 3 s before its answer: the idle limit (`timeout_ms` = 1 s) counts only
/// real output, so the request times out instead of being held open.
pub async fn keepalives_do_not_reset_the_idle_limit(t: Target, cap: Cap) {
    let server = server(vec![ScriptedResponse {
        text: "late answer".into(),
        keepalives: 12,
        keepalive_ms: 250,
        ..ScriptedResponse::default()
    }])
    .await;
    let mut cfg = t.config(&server.url());
    cfg.timeout_ms = 1000;
    let err = run(&model(&cfg), cap).await.unwrap_err();
    assert!(is_timeout_ms(&err), "{err:?}");
    assert!(err.to_string().contains("no further output"), "{err}");
    assert_eq!(server.requests().len(), 1, "not retried");
}

/// Real output spaced under the idle limit keeps a stream going.
pub async fn slow_tokens_keep_the_stream_alive(t: Target, cap: Cap) {
    let server = server(vec![ScriptedResponse {
        text: "a b c d".into(),
        keepalives: 2,
        keepalive_ms: 100,
        chunk_delay_ms: 400,
        ..ScriptedResponse::default()
    }])
    .await;
    let mut cfg = t.config(&server.url());
    cfg.timeout_ms = 1000;
    assert_eq!(run(&model(&cfg), cap).await.unwrap(), "a b c d");
}

/// One test per fault for `$target` through `$cap`, in a module `$name`:
/// every fault, or (with a list) the others and, of the two idle-limit
/// faults, those listed.
#[macro_export]
macro_rules! fault_tests {
    (@each $target:expr, $cap:expr, $($case:ident),*) => {
        $(
            #[tokio::test]
            async fn $case() {
                $crate::openai_compat_common::$case($target, $cap).await;
            }
        )*
    };
    ($name:ident, $target:expr, $cap:expr) => {
        $crate::fault_tests!(
            $name,
            $target,
            $cap,
            [
                keepalives_do_not_reset_the_idle_limit,
                slow_tokens_keep_the_stream_alive
            ]
        );
    };
    ($name:ident, $target:expr, $cap:expr, [$($idle:ident),* $(,)?]) => {
        mod $name {
            $crate::fault_tests!(
                @each $target, $cap,
                rate_limited_then_ok,
                server_errors_then_ok,
                server_errors_exhaust_retries,
                model_not_found,
                disconnect_not_retried,
                truncated,
                malformed,
                unknown_event,
                hang_times_out,
                drop_mid_stream,
                retry_after_beyond_the_deadline_pauses_the_model,
                a_request_without_a_deadline_waits_out_the_pause,
                drop_closes_connection
                $(, $idle)*
            );
        }
    };
}

/// The whole fault suite for the provider `$target` (a constant in the
/// calling module): the chat-only faults (`$key_var` is the variable the
/// 401 test sets), and [`fault_tests!`] through chat and through FIM, with
/// the idle-limit cases listed after `idle:` when not all of them.
#[macro_export]
macro_rules! fault_suite {
    ($target:ident, $key_var:literal $(, idle: $idle:tt)?) => {
        #[tokio::test]
        async fn unauthorized_names_the_variable() {
            $crate::openai_compat_common::unauthorized($target, $key_var).await;
        }

        #[tokio::test]
        async fn connection_refused_is_connect() {
            $crate::openai_compat_common::connection_refused($target).await;
        }

        #[test]
        fn bad_url_fails_at_build() {
            $crate::openai_compat_common::bad_url($target);
        }

        #[tokio::test]
        async fn invalid_tool_arguments() {
            $crate::openai_compat_common::bad_tool_arguments($target).await;
        }

        $crate::fault_tests!(
            chat_faults,
            super::$target,
            $crate::openai_compat_common::Cap::Chat
            $(, $idle)?
        );
        $crate::fault_tests!(
            fim_faults,
            super::$target,
            $crate::openai_compat_common::Cap::Fim
            $(, $idle)?
        );
    };
}
