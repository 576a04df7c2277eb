//! The `openai` provider against the mock model server: the requests it
//! sends, the streams it decodes, and every fault it must report honestly.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use crate::fault_suite;
use crate::openai_compat_common;

use fettle::config::FimTemplate;
use fettle::mock::{MockToolCall, MockUsage, ScriptedResponse};
use fettle::model::{
    ChatEvent, ChatRequest, FimRequest, GenOptions, Message, Snippet, StopReason, ToolCall,
    ToolDef, Usage,
};
use openai_compat_common::*;
use serde_json::json;

const T: Target = OPENAI;

fn read_file_tool() -> ToolDef {
    ToolDef {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }
}

#[tokio::test]
async fn chat_request_and_streamed_answer() {
    let server = server(vec![ScriptedResponse {
        text: "Let me look.".into(),
        tool_calls: vec![
            MockToolCall {
                id: Some("call_abc".into()),
                ..MockToolCall::new("read_file", json!({"path": "src/main.rs"}))
            },
            MockToolCall::new("list_files", json!({})),
        ],
        usage: Some(MockUsage {
            input_tokens: 42,
            output_tokens: 7,
        }),
        ..ScriptedResponse::default()
    }])
    .await;
    set_env("FETTLE_TEST_OPENAI_KEY_CHAT", "sk-test-chat");
    let mut cfg = T.config(&server.url());
    cfg.api_key_env = Some("FETTLE_TEST_OPENAI_KEY_CHAT".into());
    cfg.max_tokens = 500;
    cfg.temperature = 0.7;
    cfg.extra_body.insert("temperature".into(), json!(0.9));
    cfg.extra_body.insert("seed".into(), json!(42));
    let req = ChatRequest {
        messages: vec![
            Message::system("You are terse."),
            Message::user("What is in main?"),
            Message {
                tool_calls: vec![ToolCall {
                    id: "call_0".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "Cargo.toml"}),
                }],
                ..Message::assistant("")
            },
            Message::tool_result("call_0", "[package]"),
        ],
        tools: vec![read_file_tool()],
        options: GenOptions {
            max_tokens: Some(64),
            temperature: None,
            stop: vec!["END".into()],
            latency_target: None,
        },
    };
    let events = chat_ok(model(&cfg).chat(req)).await;
    assert_eq!(text_of(&events), "Let me look.");
    let tail: Vec<&ChatEvent> = events
        .iter()
        .filter(|e| !matches!(e, ChatEvent::TextDelta(_)))
        .collect();
    assert_eq!(
        tail,
        [
            &ChatEvent::ToolCall(ToolCall {
                id: "call_abc".into(),
                name: "read_file".into(),
                arguments: json!({"path": "src/main.rs"}),
            }),
            &ChatEvent::ToolCall(ToolCall {
                id: "call_1_1".into(),
                name: "list_files".into(),
                arguments: json!({}),
            }),
            &ChatEvent::Usage(Usage {
                input_tokens: 42,
                output_tokens: 7
            }),
            &ChatEvent::Stop(StopReason::ToolUse),
        ]
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(sent.headers["authorization"], "Bearer sk-test-chat");
    assert_eq!(sent.headers["content-type"], "application/json");
    assert_eq!(
        sent.body,
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "What is in main?"},
                {"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_0", "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\":\"Cargo.toml\"}"},
                }]},
                {"role": "tool", "content": "[package]", "tool_call_id": "call_0"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file", "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            }}],
            "max_tokens": 64,
            "temperature": 0.9,
            "stop": ["END"],
            "stream": true,
            "stream_options": {"include_usage": true},
            "seed": 42,
        })
    );
}

#[tokio::test]
async fn no_key_no_authorization_and_finish_reasons() {
    let server = server(vec![
        ScriptedResponse {
            text: "cut".into(),
            stop_reason: Some("length".into()),
            ..ScriptedResponse::default()
        },
        ScriptedResponse::text("done"),
    ])
    .await;
    let model = model(&T.config(&server.url()));
    let events = chat_ok(model.chat(hello())).await;
    assert_eq!(stop_of(&events), Some(StopReason::MaxTokens));
    assert!(events.contains(&ChatEvent::Usage(Usage {
        input_tokens: 10,
        output_tokens: 5
    })));
    let events = chat_ok(model.chat(hello())).await;
    assert_eq!(stop_of(&events), Some(StopReason::EndTurn));
    let sent = &server.requests()[0];
    assert!(
        !sent.headers.contains_key("authorization"),
        "{:?}",
        sent.headers
    );
    assert!(sent.body.get("tools").is_none() && sent.body.get("stop").is_none());
}

#[tokio::test]
async fn fim_through_completions_with_suffix() {
    let server = server(vec![ScriptedResponse {
        text: "a + b".into(),
        chunks: Some(vec!["a".into(), " +".into(), " b".into()]),
        ..ScriptedResponse::default()
    }])
    .await;
    set_env("FETTLE_TEST_OPENAI_KEY_FIM", "sk-test-fim");
    let mut cfg = T.config(&server.url());
    cfg.api_key_env = Some("FETTLE_TEST_OPENAI_KEY_FIM".into());
    cfg.extra_body.insert("top_p".into(), json!(0.5));
    let mut req = fim_req();
    req.options.stop = vec!["\n\n".into()];
    req.options.temperature = Some(0.0);
    assert_eq!(
        fim_text(model(&cfg).fim(req.clone())).await.unwrap(),
        "a + b"
    );
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/completions");
    assert_eq!(sent.headers["authorization"], "Bearer sk-test-fim");
    assert_eq!(
        sent.body,
        json!({
            "model": "gpt-test", "prompt": req.prefix, "suffix": req.suffix,
            "max_tokens": 128, "temperature": 0.0, "stop": ["\n\n"], "stream": true,
            "top_p": 0.5,
        })
    );
}

#[tokio::test]
async fn fim_with_a_token_template_sends_one_prompt() {
    let server = server(vec![ScriptedResponse::text("a + b")]).await;
    let mut cfg = T.config(&server.url());
    cfg.fim_template = FimTemplate::StarCoder;
    let req = FimRequest {
        snippets: vec![Snippet {
            path: "src/util.rs".into(),
            text: "pub fn util() {}".into(),
        }],
        ..fim_req()
    };
    assert_eq!(fim_text(model(&cfg).fim(req)).await.unwrap(), "a + b");
    let body = &server.requests()[0].body;
    let prompt = body["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("<fim_prefix>") && prompt.contains("pub fn util()"),
        "{prompt}"
    );
    assert!(body.get("suffix").is_none(), "{body}");
    let stop = body["stop"].as_array().unwrap();
    assert!(stop.contains(&json!("<|endoftext|>")), "{stop:?}");
}

#[tokio::test]
async fn fim_through_chat_yields_only_text() {
    let server = server(vec![ScriptedResponse::text("a + b")]).await;
    let mut cfg = T.config(&server.url());
    cfg.fim_template = FimTemplate::Chat;
    assert_eq!(fim_text(model(&cfg).fim(fim_req())).await.unwrap(), "a + b");
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    let messages = sent.body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(messages[1]["content"].as_str().unwrap().contains("fn add("));
}

// The fault suite every remote provider passes (openai_compat_common/faults.rs).
fault_suite!(T, "FETTLE_TEST_OPENAI_KEY_401");
