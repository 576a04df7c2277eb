//! The `anthropic` provider against the mock model server: the request it
//! sends, the stream it decodes, and every fault it must report honestly.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use crate::fault_suite;
use crate::openai_compat_common::{hello, Target, ANTHROPIC};
use crate::providers_anthropic_ollama_common;

use std::time::{Duration, Instant};

use fettle::config::{ModelConfig, Provider as ProviderKind};
use fettle::mock::{MockToolCall, MockUsage, ScriptedResponse};
use fettle::model::{
    ChatEvent, ChatRequest, FimRequest, GenOptions, Message, ModelError, StopReason, ToolCall,
    ToolDef, Usage,
};
use futures::StreamExt;
use providers_anthropic_ollama_common::*;
use serde_json::json;

const T: Target = ANTHROPIC;

fn claude(url: &str) -> ModelConfig {
    config(ProviderKind::Anthropic, url, "claude-test")
}

#[tokio::test]
async fn sends_the_messages_api_request() {
    let server = server(vec![ScriptedResponse::text("ok")]).await;
    set_key("FETTLE_TEST_ANTHROPIC_KEY_REQUEST", "sk-ant-request");
    let mut cfg = claude(&server.url());
    cfg.api_key_env = Some("FETTLE_TEST_ANTHROPIC_KEY_REQUEST".into());
    cfg.max_tokens = 300;
    cfg.extra_body
        .insert("metadata".into(), json!({"user_id": "u1"}));
    let model = model("claude", &cfg);
    let call = ToolCall {
        id: "toolu_1".into(),
        name: "read_file".into(),
        arguments: json!({"path": "src/a.rs"}),
    };
    let call2 = ToolCall {
        id: "toolu_2".into(),
        name: "read_file".into(),
        arguments: json!({"path": "src/b.rs"}),
    };
    let req = ChatRequest {
        messages: vec![
            Message::system("You are terse."),
            Message::user("Compare a and b."),
            Message {
                tool_calls: vec![call, call2],
                ..Message::assistant("Reading.")
            },
            Message::tool_result("toolu_1", "fn a() {}"),
            Message::tool_result("toolu_2", "fn b() {}"),
        ],
        tools: vec![ToolDef {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        options: GenOptions {
            temperature: Some(0.0),
            stop: vec!["STOP".into()],
            ..GenOptions::default()
        },
    };
    let events = chat_ok(model.chat(req)).await;
    assert_eq!(text_of(&events), "ok");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(
        sent.headers.get("x-api-key").map(String::as_str),
        Some("sk-ant-request")
    );
    assert_eq!(
        sent.headers.get("anthropic-version").map(String::as_str),
        Some("2023-06-01")
    );
    assert_eq!(
        sent.headers.get("content-type").map(String::as_str),
        Some("application/json")
    );
    assert!(!sent.headers.contains_key("authorization"));
    assert_eq!(
        sent.body,
        json!({
            "model": "claude-test",
            "max_tokens": 300,
            "temperature": 0.0,
            "stop_sequences": ["STOP"],
            "system": "You are terse.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Compare a and b."}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "src/a.rs"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "src/b.rs"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "fn a() {}"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "fn b() {}"},
                ]},
            ],
            "tools": [{
                "name": "read_file",
                "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            }],
            "stream": true,
            "metadata": {"user_id": "u1"},
        })
    );
}

#[tokio::test]
async fn no_key_header_without_a_key() {
    let server = server(vec![ScriptedResponse::text("ok")]).await;
    let model = model("claude", &claude(&server.url()));
    chat_ok(model.chat(hello())).await;
    let sent = &server.requests()[0];
    assert!(
        !sent.headers.contains_key("x-api-key"),
        "{:?}",
        sent.headers
    );
    assert_eq!(sent.body["max_tokens"], json!(128));
    assert!(sent.body.get("system").is_none());
    assert!(sent.body.get("tools").is_none());
    assert!(sent.body.get("stop_sequences").is_none());
}

#[tokio::test]
async fn streams_text_tool_calls_usage_and_stop() {
    let server = server(vec![ScriptedResponse {
        chunks: Some(vec!["Let me ".into(), "look".into(), ".".into()]),
        tool_calls: vec![
            MockToolCall::new(
                "read_file",
                json!({"path": "src/main.rs", "lines": [1, 20]}),
            ),
            MockToolCall {
                id: Some("toolu_given".into()),
                ..MockToolCall::new("list_dir", json!({}))
            },
        ],
        usage: Some(MockUsage {
            input_tokens: 42,
            output_tokens: 17,
        }),
        ..ScriptedResponse::default()
    }])
    .await;
    let model = model("claude", &claude(&server.url()));
    let events = chat_ok(model.chat(hello())).await;
    assert_one_stop_last(&events);
    let deltas: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, ChatEvent::TextDelta(_)))
        .collect();
    assert_eq!(deltas.len(), 3, "text arrives piece by piece: {events:?}");
    assert_eq!(text_of(&events), "Let me look.");
    let calls: Vec<&ToolCall> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolCall(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].name, "read_file");
    assert!(calls[0].id.starts_with("toolu_"), "{:?}", calls[0]);
    assert_eq!(
        calls[0].arguments,
        json!({"path": "src/main.rs", "lines": [1, 20]})
    );
    assert_eq!(calls[1].id, "toolu_given");
    assert_eq!(calls[1].arguments, json!({}));
    let n = events.len();
    assert_eq!(
        events[n - 2],
        ChatEvent::Usage(Usage {
            input_tokens: 42,
            output_tokens: 17
        })
    );
    assert_eq!(events[n - 1], ChatEvent::Stop(StopReason::ToolUse));
}

#[tokio::test]
async fn stop_reasons_come_through() {
    let mut responses = Vec::new();
    for reason in ["end_turn", "max_tokens", "stop_sequence"] {
        responses.push(ScriptedResponse {
            stop_reason: Some(reason.into()),
            ..ScriptedResponse::text("x")
        });
    }
    let server = server(responses).await;
    let model = model("claude", &claude(&server.url()));
    for expected in [
        StopReason::EndTurn,
        StopReason::MaxTokens,
        StopReason::StopSequence,
    ] {
        let events = chat_ok(model.chat(hello())).await;
        assert_eq!(events.last(), Some(&ChatEvent::Stop(expected)));
    }
}

#[tokio::test]
async fn fim_goes_through_chat() {
    let server = server(vec![ScriptedResponse {
        chunks: Some(vec!["a + ".into(), "b".into()]),
        ..ScriptedResponse::default()
    }])
    .await;
    let model = model("claude", &claude(&server.url()));
    let req = FimRequest {
        prefix: "fn add(a: i32, b: i32) -> i32 {\n    ".into(),
        suffix: "\n}\n".into(),
        options: GenOptions {
            max_tokens: Some(32),
            ..GenOptions::default()
        },
        ..FimRequest::default()
    };
    let text = collect_text(model.fim(req)).await.unwrap();
    assert_eq!(text.concat(), "a + b");
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.body["max_tokens"], json!(32));
    let messages = sent.body["messages"].as_array().unwrap();
    assert!(!messages.is_empty());
    assert!(sent.body.to_string().contains("fn add"), "{}", sent.body);
}

#[tokio::test]
async fn persistent_overload_gives_up() {
    let server = server(vec![ScriptedResponse {
        repeat: true,
        ..status(529, None, None)
    }])
    .await;
    let mut cfg = claude(&server.url());
    cfg.max_retries = 1;
    let err = chat_err(model("claude", &cfg).chat(hello())).await;
    assert!(
        matches!(
            err,
            ModelError::Server {
                status: 529,
                attempts: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("mock: overloaded"), "{err}");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn unknown_model_carries_the_server_detail() {
    let server = server(vec![status(404, None, None)]).await;
    let err = chat_err(model("claude", &claude(&server.url())).chat(hello())).await;
    match &err {
        ModelError::ModelNotFound { name, detail, .. } => {
            assert_eq!(name, "claude-test");
            assert!(
                detail.contains("mock: model \"claude-test\" not found"),
                "{detail}"
            );
        }
        other => panic!("expected ModelNotFound, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!(
            "model \"claude\": {}/v1/messages does not know model \"claude-test\", or has no such endpoint (HTTP 404). \
             Check models.claude.model and models.claude.base_url: mock: model \"claude-test\" not found",
            server.url()
        )
    );
}

#[tokio::test]
async fn streams_are_lazy_and_dropping_ends_promptly() {
    let server = server(vec![ScriptedResponse {
        chunk_delay_ms: 300,
        ..ScriptedResponse::text("a b c d e f g h i j")
    }])
    .await;
    let model = model("claude", &claude(&server.url()));
    let mut stream = model.chat(hello());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        server.requests().is_empty(),
        "nothing is sent before the first poll"
    );
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    assert_eq!(first.unwrap().unwrap(), ChatEvent::TextDelta("a".into()));
    let started = Instant::now();
    drop(stream);
    assert!(started.elapsed() < Duration::from_millis(100));
    // The model stays usable.
    server.push(ScriptedResponse::text("again"));
    let events = chat_ok(model.chat(hello())).await;
    assert_eq!(text_of(&events), "again");
}

// The fault suite every remote provider passes (openai_compat_common/faults.rs).
// Of the idle-limit faults, not `slow_tokens_keep_the_stream_alive`: the
// mock spaces every event, and the three before the first text
// (`message_start`, `ping`, `content_block_start`) and the two between
// the last text and `message_stop` (`content_block_stop`, `message_delta`)
// are no output to the idle limit: at 400 ms each, its 1 s passes.
fault_suite!(T, "FETTLE_TEST_ANTHROPIC_KEY_AUTH", idle: [keepalives_do_not_reset_the_idle_limit]);
