//! Faults the script injects: HTTP errors, broken streams, hangs.

use super::*;

// ---------------------------------------------------------------- faults

#[tokio::test]
async fn fault_429_with_retry_after() {
    let server = serve(vec![with_fault(
        "",
        Fault::Status {
            status: 429,
            retry_after: Some("1".into()),
            body: None,
        },
    )])
    .await;
    let resp = post(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    let v: Value = resp.json().await.unwrap();
    assert!(v["error"]["message"].is_string());
}

#[tokio::test]
async fn fault_500_and_custom_body() {
    let server = serve(vec![
        with_fault(
            "",
            Fault::Status {
                status: 500,
                retry_after: None,
                body: None,
            },
        ),
        with_fault(
            "",
            Fault::Status {
                status: 401,
                retry_after: None,
                body: Some("go away".into()),
            },
        ),
    ])
    .await;
    let resp = post(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(resp.status(), 500);
    assert!(resp.headers().get("retry-after").is_none());
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "api_error");
    let resp = post(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.text().await.unwrap(), "go away");
}

#[tokio::test]
async fn fault_disconnect_mid_stream() {
    let server = serve(vec![with_fault(
        "one two three four five",
        Fault::Disconnect { after_chunks: 2 },
    )])
    .await;
    let resp = post(&server, "/v1/chat/completions", json!({"stream": true})).await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut got = Vec::new();
    let mut failed = false;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(bytes) => got.extend_from_slice(&bytes),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the body should end with an error");
    let events = parse_sse(&String::from_utf8(got).unwrap());
    let (text, _, _) = openai_collect(&events);
    assert_eq!(text, "one two");
    assert!(events.iter().all(|e| e.data != "[DONE]"));
}

#[tokio::test]
async fn fault_disconnect_whole_body() {
    let server = serve(vec![with_fault(
        "a long enough answer",
        Fault::Disconnect { after_chunks: 0 },
    )])
    .await;
    let resp = post(&server, "/v1/messages", json!({})).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.bytes().await.is_err());
}

#[tokio::test]
async fn fault_truncate_omits_terminal_marker() {
    let server = serve(vec![
        with_fault("alpha beta gamma", Fault::Truncate { after_chunks: 1 }),
        with_fault("alpha beta gamma", Fault::Truncate { after_chunks: 99 }),
        with_fault("alpha beta gamma", Fault::Truncate { after_chunks: 1 }),
        with_fault("alpha beta gamma", Fault::Truncate { after_chunks: 99 }),
    ])
    .await;
    // OpenAI: one content chunk, no [DONE].
    let events = post_sse(&server, "/v1/chat/completions", json!({"stream": true})).await;
    let (text, _, _) = openai_collect(&events);
    assert_eq!(text, "alpha");
    assert!(events.iter().all(|e| e.data != "[DONE]"));
    // Anthropic: everything but message_stop.
    let events = post_sse(&server, "/v1/messages", json!({"stream": true})).await;
    assert_eq!(
        events.last().unwrap().event.as_deref(),
        Some("message_delta")
    );
    // Ollama: no done:true line.
    let lines = post_ndjson(&server, "/api/chat", json!({})).await;
    assert_eq!(lines.len(), 1);
    assert!(lines.iter().all(|l| l["done"] == false));
    // llama.cpp: no stop:true chunk.
    let events = post_sse(&server, "/completion", json!({"stream": true})).await;
    assert_eq!(events.len(), 3);
    assert!(events.iter().all(|e| e.json()["stop"] == false));
}

#[tokio::test]
async fn fault_malformed_json() {
    let server = serve(vec![
        with_fault("hi there", Fault::MalformedJson),
        with_fault("hi there", Fault::MalformedJson),
        with_fault("hi there", Fault::MalformedJson),
    ])
    .await;
    let resp = post(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(resp.status(), 200);
    assert!(serde_json::from_str::<Value>(&resp.text().await.unwrap()).is_err());
    let events = post_sse(&server, "/v1/chat/completions", json!({"stream": true})).await;
    assert!(serde_json::from_str::<Value>(&events[0].data).is_err());
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let resp = post(&server, "/api/generate", json!({})).await;
    let body = resp.text().await.unwrap();
    let first = body.lines().next().unwrap();
    assert!(serde_json::from_str::<Value>(first).is_err());
}

#[tokio::test]
async fn fault_unknown_event() {
    let server = serve(vec![
        with_fault("hello world", Fault::UnknownEvent),
        with_fault("hello world", Fault::UnknownEvent),
        with_fault("hello world", Fault::UnknownEvent),
    ])
    .await;
    let events = post_sse(&server, "/v1/messages", json!({"stream": true})).await;
    assert!(events.iter().any(|e| e.event.as_deref() == Some("mystery")));
    assert_eq!(
        events.last().unwrap().event.as_deref(),
        Some("message_stop")
    );

    let events = post_sse(&server, "/v1/chat/completions", json!({"stream": true})).await;
    let odd: Vec<Value> = events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(Sse::json)
        .filter(|v| v.get("choices").is_none() && v.get("error").is_none())
        .collect();
    assert_eq!(odd.len(), 1);
    let (text, _, _) = openai_collect(&events);
    assert_eq!(text, "hello world");

    let lines = post_ndjson(&server, "/api/chat", json!({})).await;
    let odd = lines
        .iter()
        .filter(|l| {
            l.get("message").is_none() && l.get("response").is_none() && l.get("done").is_none()
        })
        .count();
    assert_eq!(odd, 1);
}

#[tokio::test]
async fn fault_hang_until_client_timeout() {
    let server = serve(vec![with_fault("never", Fault::Hang), text("fine")]).await;
    let hung = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = hung
        .post(format!("{}/v1/messages", server.url()))
        .json(&json!({}))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    // The server still answers others.
    let v = post_json(&server, "/v1/messages", json!({})).await;
    assert_eq!(v["content"][0]["text"], "fine");
}
