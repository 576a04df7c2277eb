//! The `mistral` provider against the mock model server: Codestral FIM at
//! `/fim/completions`, OpenAI-compatible chat with tools, and every fault.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use crate::fault_suite;
use crate::openai_compat_common;

use fettle::config::FimTemplate;
use fettle::mock::{MockToolCall, MockUsage, ScriptedResponse};
use fettle::model::{
    ChatEvent, ChatRequest, FimRequest, Message, Snippet, StopReason, ToolCall, ToolDef, Usage,
};
use openai_compat_common::*;
use serde_json::json;

const T: Target = MISTRAL;

#[tokio::test]
async fn fim_request_and_answer() {
    let server = server(vec![ScriptedResponse {
        chunks: Some(vec!["a".into(), " + ".into(), "b".into()]),
        ..ScriptedResponse::default()
    }])
    .await;
    set_env("FETTLE_TEST_MISTRAL_KEY_FIM", "mk-test-fim");
    let mut cfg = T.config(&server.url());
    cfg.api_key_env = Some("FETTLE_TEST_MISTRAL_KEY_FIM".into());
    cfg.max_tokens = 40;
    cfg.extra_body.insert("min_tokens".into(), json!(1));
    let req = FimRequest {
        snippets: vec![Snippet {
            path: "src/util.rs".into(),
            text: "pub fn util() {}".into(),
        }],
        ..fim_req()
    };
    let mut with_stop = req.clone();
    with_stop.options.stop = vec!["\n\n".into()];
    assert_eq!(fim_text(model(&cfg).fim(with_stop)).await.unwrap(), "a + b");

    let sent = &server.requests()[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/fim/completions")
    );
    assert_eq!(sent.headers["authorization"], "Bearer mk-test-fim");
    assert_eq!(sent.headers["content-type"], "application/json");
    let prompt = sent.body["prompt"].as_str().unwrap();
    assert!(prompt.ends_with(&req.prefix), "{prompt}");
    assert!(
        prompt.contains("pub fn util() {}"),
        "snippets go in the prompt: {prompt}"
    );
    let mut expected = json!({
        "model": "codestral-latest", "suffix": req.suffix, "max_tokens": 40,
        "temperature": 0.2, "stop": ["\n\n"], "stream": true, "min_tokens": 1,
    });
    expected["prompt"] = json!(prompt);
    assert_eq!(sent.body, expected);
}

#[tokio::test]
async fn explicit_codestral_template_still_sends_prompt_and_suffix() {
    let server = server(vec![ScriptedResponse::text("x")]).await;
    let mut cfg = T.config(&server.url());
    cfg.fim_template = FimTemplate::Codestral;
    assert_eq!(fim_text(model(&cfg).fim(fim_req())).await.unwrap(), "x");
    let body = &server.requests()[0].body;
    assert_eq!(body["prompt"], json!(fim_req().prefix));
    assert_eq!(body["suffix"], json!(fim_req().suffix));
}

#[tokio::test]
async fn non_codestral_models_complete_through_chat() {
    let server = server(vec![ScriptedResponse::text("a + b")]).await;
    let mut cfg = T.config(&server.url());
    cfg.model = Some("mistral-large-latest".into());
    assert_eq!(fim_text(model(&cfg).fim(fim_req())).await.unwrap(), "a + b");
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert!(sent.body.get("stream_options").is_none(), "{}", sent.body);
}

#[tokio::test]
async fn chat_with_tools_and_usage_on_the_finish_chunk() {
    let server = server(vec![ScriptedResponse {
        text: "Reading.".into(),
        tool_calls: vec![MockToolCall {
            id: Some("D681PevKs".into()),
            ..MockToolCall::new("read_file", json!({"path": "a.rs", "lines": [1, 2]}))
        }],
        usage: Some(MockUsage {
            input_tokens: 30,
            output_tokens: 12,
        }),
        ..ScriptedResponse::default()
    }])
    .await;
    set_env("FETTLE_TEST_MISTRAL_KEY_CHAT", "mk-test-chat");
    let mut cfg = T.config(&server.url());
    cfg.api_key_env = Some("FETTLE_TEST_MISTRAL_KEY_CHAT".into());
    let req = ChatRequest {
        messages: vec![Message::system("Be brief."), Message::user("Read a.rs")],
        tools: vec![ToolDef {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object"}),
        }],
        ..ChatRequest::default()
    };
    let events = chat_ok(model(&cfg).chat(req)).await;
    assert_eq!(text_of(&events), "Reading.");
    assert!(events.contains(&ChatEvent::ToolCall(ToolCall {
        id: "D681PevKs".into(),
        name: "read_file".into(),
        arguments: json!({"path": "a.rs", "lines": [1, 2]}),
    })));
    let n = events.len();
    assert_eq!(
        events[n - 2..],
        [
            ChatEvent::Usage(Usage {
                input_tokens: 30,
                output_tokens: 12
            }),
            ChatEvent::Stop(StopReason::ToolUse),
        ]
    );
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.headers["authorization"], "Bearer mk-test-chat");
    assert_eq!(
        sent.body,
        json!({
            "model": "codestral-latest",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Read a.rs"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file", "description": "Read a file", "parameters": {"type": "object"},
            }}],
            "max_tokens": 128, "temperature": 0.2, "stream": true,
        })
    );
}

// The fault suite every remote provider passes (openai_compat_common/faults.rs).
fault_suite!(T, "FETTLE_TEST_MISTRAL_KEY_401");
