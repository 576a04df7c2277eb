//! Matching, recording, timing, connections and scripts.

use super::*;

// ---------------------------------------------------------------- matching

#[tokio::test]
async fn matching_by_path_contains_and_order() {
    let server = serve(vec![
        ScriptedResponse {
            when: Some(Matcher {
                path: Some("/v1/messages".into()),
                contains: None,
            }),
            ..text("anthropic")
        },
        ScriptedResponse {
            when: Some(Matcher {
                path: None,
                contains: Some("second".into()),
            }),
            ..text("by body")
        },
        text("first any"),
        text("second any"),
    ])
    .await;
    let ask = |body: Value| {
        let server = &server;
        async move {
            let v = post_json(server, "/v1/chat/completions", body).await;
            v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    assert_eq!(ask(json!({"q": "one"})).await, "first any");
    assert_eq!(ask(json!({"q": "the second"})).await, "by body");
    assert_eq!(ask(json!({"q": "three"})).await, "second any");
    let v = post_json(&server, "/v1/messages", json!({})).await;
    assert_eq!(v["content"][0]["text"], "anthropic");
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn repeat_is_not_consumed() {
    let server = serve(vec![
        ScriptedResponse {
            when: Some(Matcher {
                path: None,
                contains: Some("special".into()),
            }),
            ..text("once")
        },
        ScriptedResponse {
            repeat: true,
            ..text("always")
        },
    ])
    .await;
    assert_eq!(server.remaining(), 1);
    for _ in 0..3 {
        let v = post_json(&server, "/v1/completions", json!({})).await;
        assert_eq!(v["choices"][0]["text"], "always");
    }
    let v = post_json(&server, "/v1/completions", json!({"p": "special"})).await;
    assert_eq!(v["choices"][0]["text"], "once");
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn exhausted_script_answers_500() {
    let server = serve(vec![text("only")]).await;
    post_json(&server, "/v1/chat/completions", json!({})).await;
    let resp = post(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(resp.status(), 500);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        v["error"]["message"],
        "mock: no scripted response for POST /v1/chat/completions"
    );
}

#[tokio::test]
async fn unknown_endpoint_is_404_and_consumes_nothing() {
    let server = serve(vec![text("kept")]).await;
    let resp = post(&server, "/v1/embeddings", json!({})).await;
    assert_eq!(resp.status(), 404);
    let v: Value = resp.json().await.unwrap();
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/v1/embeddings"));
    assert_eq!(server.remaining(), 1);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn push_and_remaining() {
    let server = serve(Vec::new()).await;
    assert_eq!(server.remaining(), 0);
    server.push(text("pushed"));
    server.push(ScriptedResponse {
        repeat: true,
        ..text("r")
    });
    assert_eq!(server.remaining(), 1);
    let v = post_json(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(v["choices"][0]["message"]["content"], "pushed");
    assert_eq!(server.remaining(), 0);
}

// ---------------------------------------------------------------- recording

#[tokio::test]
async fn records_requests() {
    let server = serve(vec![ScriptedResponse {
        repeat: true,
        ..text("ok")
    }])
    .await;
    client()
        .post(format!("{}/v1/messages", server.url()))
        .header("X-Api-Key", "secret")
        .header("Anthropic-Version", "2023-06-01")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    client()
        .post(format!("{}/api/generate", server.url()))
        .body("not json at all")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Neither of these is recorded.
    let health: Value = client()
        .get(format!("{}/health", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health, json!({"status": "ok"}));

    let recorded = server.requests();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].method, "POST");
    assert_eq!(recorded[0].path, "/v1/messages");
    assert_eq!(recorded[0].headers["x-api-key"], "secret");
    assert_eq!(recorded[0].headers["anthropic-version"], "2023-06-01");
    assert!(recorded[0]
        .headers
        .keys()
        .all(|k| *k == k.to_ascii_lowercase()));
    assert_eq!(recorded[0].body["messages"][0]["content"], "hi");
    assert_eq!(recorded[1].body, json!("not json at all"));

    let listed: Vec<RecordedRequest> = client()
        .get(format!("{}/__mock/requests", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].path, "/v1/messages");
    assert_eq!(listed[1].path, "/api/generate");
    assert_eq!(server.requests().len(), 2);
}

// ---------------------------------------------------------------- timing and connections

#[tokio::test]
async fn delay_does_not_block_other_connections() {
    let server = serve(vec![
        ScriptedResponse {
            when: Some(Matcher {
                path: None,
                contains: Some("slow".into()),
            }),
            delay_ms: 1500,
            ..text("slow")
        },
        text("fast"),
    ])
    .await;
    let slow = {
        let url = format!("{}/v1/chat/completions", server.url());
        tokio::spawn(async move {
            client()
                .post(url)
                .json(&json!({"q": "slow"}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let v = post_json(&server, "/v1/chat/completions", json!({"q": "quick"})).await;
    assert_eq!(v["choices"][0]["message"]["content"], "fast");
    assert!(started.elapsed() < Duration::from_millis(1000));
    let v = slow.await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "slow");
}

#[tokio::test]
async fn chunk_delay_spaces_the_stream() {
    let server = serve(vec![ScriptedResponse {
        chunk_delay_ms: 50,
        ..text("a b c d")
    }])
    .await;
    let started = Instant::now();
    let lines = post_ndjson(&server, "/api/generate", json!({})).await;
    assert_eq!(lines.len(), 5);
    // Four gaps between five lines.
    assert!(started.elapsed() >= Duration::from_millis(200));
}

#[tokio::test]
async fn keep_alive_and_concurrency() {
    let server = serve(vec![ScriptedResponse {
        repeat: true,
        chunk_delay_ms: 5,
        ..text("same answer every time")
    }])
    .await;
    let shared = client();
    let url = format!("{}/v1/chat/completions", server.url());
    for _ in 0..5 {
        let v: Value = shared
            .post(&url)
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            v["choices"][0]["message"]["content"],
            "same answer every time"
        );
    }
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let c = shared.clone();
            let url = url.clone();
            tokio::spawn(async move {
                c.post(url)
                    .json(&json!({"stream": true}))
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap()
            })
        })
        .collect();
    for t in tasks {
        let (text, _, _) = openai_collect(&parse_sse(&t.await.unwrap()));
        assert_eq!(text, "same answer every time");
    }
    assert_eq!(server.requests().len(), 13);
}

#[tokio::test]
async fn dropping_the_server_shuts_it_down() {
    let server = serve(vec![with_fault("", Fault::Hang)]).await;
    let url = server.url();
    let hanging = tokio::spawn({
        let url = url.clone();
        async move { client().post(format!("{url}/v1/messages")).send().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(server);
    // The hanging request ends (the connection closes) rather than waiting forever.
    let outcome = tokio::time::timeout(Duration::from_secs(5), hanging)
        .await
        .expect("the hanging request should end when the server is dropped")
        .unwrap();
    assert!(outcome.is_err());
    tokio::time::sleep(Duration::from_millis(50)).await;
    let after = reqwest::Client::new()
        .get(format!("{url}/health"))
        .timeout(Duration::from_secs(2))
        .send()
        .await;
    assert!(after.is_err());
}

// ---------------------------------------------------------------- scripts

#[tokio::test]
async fn script_from_json() {
    let script = Script::from_json(
        r#"{"responses": [
            {"when": {"path": "/v1/messages"}, "text": "hi", "tool_calls": [{"name": "t", "arguments": {"a": 1}}]},
            {"fault": {"kind": "status", "status": 429, "retry_after": "2"}},
            {"fault": {"kind": "disconnect", "after_chunks": 3}, "repeat": true},
            {"fault": {"kind": "hang"}, "delay_ms": 5, "chunk_delay_ms": 1, "usage": {"input_tokens": 1, "output_tokens": 2}}
        ]}"#,
    )
    .unwrap();
    assert_eq!(script.responses.len(), 4);
    assert_eq!(script.responses[0].tool_calls[0].arguments, json!({"a": 1}));
    assert!(matches!(
        script.responses[1].fault,
        Some(Fault::Status { status: 429, .. })
    ));
    assert!(script.responses[2].repeat);
    assert_eq!(Script::from_json("{}").unwrap().responses.len(), 0);
}

#[tokio::test]
async fn script_rejects_unknown_fields() {
    let err = Script::from_json(r#"{"responses": [{"text": "a"}, {"delay": 5}]}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("delay"), "{err}");
    assert!(err.contains("responses[1]"), "{err}");
    let err = Script::from_json(r#"{"responses": [{"when": {"pth": "/x"}}]}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("pth"), "{err}");
    let err = Script::from_json(r#"{"response": []}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("response"), "{err}");
    let err = Script::from_json(r#"{"responses": [{"fault": {"kind": "explode"}}]}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("explode"), "{err}");
}

#[tokio::test]
async fn script_from_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    std::fs::write(&path, r#"{"responses": [{"text": "from a file"}]}"#).unwrap();
    let server = MockServer::start(Script::from_file(&path).unwrap())
        .await
        .unwrap();
    let v = post_json(&server, "/v1/completions", json!({})).await;
    assert_eq!(v["choices"][0]["text"], "from a file");
    let missing = Script::from_file(&dir.path().join("nope.json"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("nope.json"), "{missing}");
}

#[tokio::test]
async fn start_on_a_given_address() {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let server = MockServer::start_on(Script::default(), addr).await.unwrap();
    assert_eq!(server.addr(), addr);
    assert_eq!(server.url(), format!("http://127.0.0.1:{}", addr.port()));
}

#[tokio::test]
async fn run_cli_serves_and_records() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    let record = dir.path().join("requests.jsonl");
    std::fs::write(
        &script,
        r#"{"responses": [{"text": "cli", "repeat": true}]}"#,
    )
    .unwrap();
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let (announced_tx, announced) = std::sync::mpsc::channel::<String>();
    let task = tokio::spawn({
        let (script, record) = (script.clone(), record.clone());
        async move {
            let listening = move |url: &str| {
                announced_tx.send(url.to_owned()).unwrap();
                Ok(())
            };
            fettle::mock::run_cli(&script, port, Some(&record), listening).await
        }
    });
    let url = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..100 {
        if client().get(format!("{url}/health")).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(up, "run_cli did not start");
    // The URL is announced once the server accepts connections.
    assert_eq!(announced.try_recv().unwrap(), url);
    for q in ["one", "two"] {
        let v: Value = client()
            .post(format!("{url}/v1/completions"))
            .json(&json!({"q": q}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["choices"][0]["text"], "cli");
    }
    let lines: Vec<RecordedRequest> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1].body["q"], "two");
    assert!(!task.is_finished());
    task.abort();
}
