//! The `ollama` provider against the mock model server: the requests it
//! sends to `/api/chat` and `/api/generate`, the NDJSON it decodes, and
//! every fault it must report honestly.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use crate::fault_suite;
use crate::openai_compat_common::{hello, Target, OLLAMA};
use crate::providers_anthropic_ollama_common;

use std::time::{Duration, Instant};

use fettle::config::{FimTemplate, ModelConfig, Provider as ProviderKind};
use fettle::mock::{Matcher, MockToolCall, MockUsage, ScriptedResponse};
use fettle::model::{
    ChatEvent, ChatRequest, FimRequest, GenOptions, Message, ModelError, StopReason, ToolCall,
    ToolDef, Usage,
};
use futures::StreamExt;
use providers_anthropic_ollama_common::*;
use serde_json::json;

const T: Target = OLLAMA;

fn llama(url: &str) -> ModelConfig {
    config(ProviderKind::Ollama, url, "qwen2.5-coder:1.5b")
}

fn fim_request() -> FimRequest {
    FimRequest {
        prefix: "def add(a, b):\n    ".into(),
        suffix: "\n".into(),
        options: GenOptions {
            max_tokens: Some(16),
            stop: vec!["\n\n".into()],
            ..GenOptions::default()
        },
        ..FimRequest::default()
    }
}

#[tokio::test]
async fn chat_request_shape() {
    let server = server(vec![ScriptedResponse::text("ok")]).await;
    set_key("FETTLE_TEST_OLLAMA_KEY_REQUEST", "proxy-secret");
    let mut cfg = llama(&server.url());
    cfg.api_key_env = Some("FETTLE_TEST_OLLAMA_KEY_REQUEST".into());
    cfg.temperature = 0.7;
    cfg.extra_body.insert("keep_alive".into(), json!("10m"));
    let call = ToolCall {
        id: "call_0".into(),
        name: "read_file".into(),
        arguments: json!({"path": "a.py"}),
    };
    let req = ChatRequest {
        messages: vec![
            Message::system("Be brief."),
            Message::user("Read a.py"),
            Message {
                tool_calls: vec![call],
                ..Message::assistant("")
            },
            Message::tool_result("call_0", "print(1)"),
        ],
        tools: vec![ToolDef {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object"}),
        }],
        options: GenOptions {
            max_tokens: Some(50),
            stop: vec!["###".into()],
            ..GenOptions::default()
        },
    };
    let events = chat_ok(model("llama", &cfg).chat(req)).await;
    assert_eq!(text_of(&events), "ok");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.path, "/api/chat");
    assert_eq!(
        sent.headers.get("authorization").map(String::as_str),
        Some("Bearer proxy-secret")
    );
    assert_eq!(
        sent.headers.get("content-type").map(String::as_str),
        Some("application/json")
    );
    assert_eq!(
        sent.body,
        json!({
            "model": "qwen2.5-coder:1.5b",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Read a.py"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"function": {"name": "read_file", "arguments": {"path": "a.py"}}},
                ]},
                {"role": "tool", "content": "print(1)", "tool_name": "read_file"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file", "description": "Read a file", "parameters": {"type": "object"},
            }}],
            "stream": true,
            "options": {"num_predict": 50, "temperature": 0.7, "stop": ["###"]},
            "keep_alive": "10m",
        })
    );
}

#[tokio::test]
async fn no_authorization_without_a_key() {
    let server = server(vec![ScriptedResponse::text("ok")]).await;
    chat_ok(model("llama", &llama(&server.url())).chat(hello())).await;
    let sent = &server.requests()[0];
    assert!(
        !sent.headers.contains_key("authorization"),
        "{:?}",
        sent.headers
    );
    assert_eq!(
        sent.body["options"],
        json!({"num_predict": 128, "temperature": 0.2})
    );
}

#[tokio::test]
async fn fim_with_suffix_template() {
    let server = server(vec![ScriptedResponse {
        chunks: Some(vec!["return ".into(), "a + b".into()]),
        usage: Some(MockUsage {
            input_tokens: 9,
            output_tokens: 4,
        }),
        ..ScriptedResponse::default()
    }])
    .await;
    let mut cfg = llama(&server.url());
    cfg.fim_template = FimTemplate::Suffix;
    let text = collect_text(model("llama", &cfg).fim(fim_request()))
        .await
        .unwrap();
    assert_eq!(text, ["return ", "a + b"]);
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/api/generate");
    assert_eq!(sent.body["model"], json!("qwen2.5-coder:1.5b"));
    assert_eq!(sent.body["suffix"], json!("\n"));
    assert!(sent.body["prompt"]
        .as_str()
        .unwrap()
        .ends_with("def add(a, b):\n    "));
    assert!(sent.body.get("raw").is_none());
    assert_eq!(sent.body["stream"], json!(true));
    assert_eq!(sent.body["options"]["num_predict"], json!(16));
    assert_eq!(sent.body["options"]["stop"], json!(["\n\n"]));
}

#[tokio::test]
async fn fim_with_a_concrete_template_is_raw() {
    let server = server(vec![ScriptedResponse::text("a + b")]).await;
    let mut cfg = llama(&server.url());
    cfg.fim_template = FimTemplate::Qwen;
    let text = collect_text(model("llama", &cfg).fim(fim_request()))
        .await
        .unwrap();
    assert_eq!(text.concat(), "a + b");
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/api/generate");
    assert_eq!(sent.body["raw"], json!(true), "{}", sent.body);
    assert!(sent.body.get("suffix").is_none());
    let prompt = sent.body["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("<|fim_prefix|>") && prompt.contains("def add"),
        "{prompt}"
    );
}

#[tokio::test]
async fn fim_with_the_chat_template_uses_chat() {
    let server = server(vec![ScriptedResponse::text("a + b")]).await;
    let mut cfg = llama(&server.url());
    cfg.fim_template = FimTemplate::Chat;
    let text = collect_text(model("llama", &cfg).fim(fim_request()))
        .await
        .unwrap();
    assert_eq!(text.concat(), "a + b");
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/api/chat");
    assert!(sent.body["messages"]
        .as_array()
        .is_some_and(|m| !m.is_empty()));
}

#[tokio::test]
async fn streams_text_tool_calls_usage_and_stop() {
    let server = server(vec![ScriptedResponse {
        chunks: Some(vec!["Checking".into(), " now".into()]),
        tool_calls: vec![
            MockToolCall::new("read_file", json!({"path": "a.py", "lines": [1, 2]})),
            MockToolCall::new("list_dir", json!({})),
        ],
        usage: Some(MockUsage {
            input_tokens: 30,
            output_tokens: 12,
        }),
        ..ScriptedResponse::default()
    }])
    .await;
    let events = chat_ok(model("llama", &llama(&server.url())).chat(hello())).await;
    assert_one_stop_last(&events);
    assert_eq!(text_of(&events), "Checking now");
    let calls: Vec<&ToolCall> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolCall(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_0", "read_file")
    );
    assert_eq!(calls[0].arguments, json!({"path": "a.py", "lines": [1, 2]}));
    assert_eq!(
        (calls[1].id.as_str(), calls[1].name.as_str()),
        ("call_1", "list_dir")
    );
    let n = events.len();
    assert_eq!(
        events[n - 2],
        ChatEvent::Usage(Usage {
            input_tokens: 30,
            output_tokens: 12
        })
    );
    assert_eq!(events[n - 1], ChatEvent::Stop(StopReason::ToolUse));
}

#[tokio::test]
async fn stop_reasons_come_through() {
    let server = server(vec![
        ScriptedResponse::text("x"),
        ScriptedResponse {
            stop_reason: Some("length".into()),
            ..ScriptedResponse::text("x")
        },
    ])
    .await;
    let model = model("llama", &llama(&server.url()));
    for expected in [StopReason::EndTurn, StopReason::MaxTokens] {
        let events = chat_ok(model.chat(hello())).await;
        assert_eq!(events.last(), Some(&ChatEvent::Stop(expected)));
    }
}

#[tokio::test]
async fn missing_model_says_to_pull_it() {
    let body = r#"{"error":"model \"qwen2.5-coder:1.5b\" not found, try pulling it first"}"#;
    let server = server(vec![status(404, None, Some(body))]).await;
    let err = chat_err(model("llama", &llama(&server.url())).chat(hello())).await;
    assert!(matches!(err, ModelError::ModelNotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "model \"llama\": {}/api/chat does not know model \"qwen2.5-coder:1.5b\", or has no such endpoint (HTTP 404). \
             Check models.llama.model and models.llama.base_url: model \"qwen2.5-coder:1.5b\" not found, try pulling it first",
            server.url()
        )
    );
}

#[tokio::test]
async fn streams_are_lazy_and_dropping_ends_promptly() {
    let server = server(vec![
        ScriptedResponse {
            when: Some(Matcher {
                path: Some("/api/chat".into()),
                contains: None,
            }),
            chunk_delay_ms: 300,
            ..ScriptedResponse::text("a b c d e f g h")
        },
        ScriptedResponse::text("again"),
    ])
    .await;
    let model = model("llama", &llama(&server.url()));
    let mut stream = model.chat(hello());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(server.requests().is_empty());
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    assert_eq!(first.unwrap().unwrap(), ChatEvent::TextDelta("a".into()));
    let started = Instant::now();
    drop(stream);
    assert!(started.elapsed() < Duration::from_millis(100));
    let events = chat_ok(model.chat(hello())).await;
    assert_eq!(text_of(&events), "again");
}

// The fault suite every remote provider passes (openai_compat_common/faults.rs).
// Neither idle-limit fault: the mock's NDJSON keep-alive is an empty
// line, which the NDJSON reader takes for a malformed one.
fault_suite!(T, "FETTLE_TEST_OLLAMA_KEY_401", idle: []);
