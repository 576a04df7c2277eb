//! The `llamacpp` provider against the mock model server: `/infill` with
//! the snippets as `input_extra`, `/completion` for explicit templates,
//! OpenAI-compatible chat at `/v1/chat/completions`, and every fault.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use crate::fault_suite;
use crate::openai_compat_common;

use fettle::config::FimTemplate;
use fettle::mock::{MockToolCall, ScriptedResponse};
use fettle::model::{
    ChatEvent, ChatRequest, FimRequest, GenOptions, Message, Snippet, StopReason, ToolCall,
};
use openai_compat_common::*;
use serde_json::json;

const T: Target = LLAMACPP;

#[tokio::test]
async fn infill_request_and_answer() {
    let server = server(vec![ScriptedResponse {
        chunks: Some(vec!["a".into(), " + ".into(), "b".into()]),
        ..ScriptedResponse::default()
    }])
    .await;
    let mut cfg = T.config(&server.url());
    cfg.extra_body.insert("top_k".into(), json!(40));
    cfg.extra_body.insert("cache_prompt".into(), json!(false));
    let req = FimRequest {
        snippets: vec![
            Snippet {
                path: "src/util.rs".into(),
                text: "pub fn util() {}".into(),
            },
            Snippet {
                path: "src/types.rs".into(),
                text: "pub struct T;".into(),
            },
        ],
        options: GenOptions {
            max_tokens: Some(16),
            temperature: Some(0.1),
            stop: vec!["\n\n".into()],
            latency_target: None,
        },
        ..fim_req()
    };
    assert_eq!(
        fim_text(model(&cfg).fim(req.clone())).await.unwrap(),
        "a + b"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/infill")
    );
    assert!(!sent.headers.contains_key("authorization"));
    assert_eq!(sent.headers["content-type"], "application/json");
    assert_eq!(
        sent.body,
        json!({
            "input_prefix": req.prefix,
            "input_suffix": req.suffix,
            "input_extra": [
                {"filename": "src/util.rs", "text": "pub fn util() {}"},
                {"filename": "src/types.rs", "text": "pub struct T;"},
            ],
            "prompt": "",
            "n_predict": 16,
            "temperature": 0.1,
            "stop": ["\n\n"],
            "stream": true,
            "cache_prompt": false,
            "top_k": 40,
        })
    );
}

#[tokio::test]
async fn key_and_model_sent_when_configured() {
    let server = server(vec![
        ScriptedResponse::text("x"),
        ScriptedResponse::text("y"),
    ])
    .await;
    set_env("FETTLE_TEST_LLAMACPP_KEY", "llama-key");
    let mut cfg = T.config(&server.url());
    cfg.api_key_env = Some("FETTLE_TEST_LLAMACPP_KEY".into());
    cfg.model = Some("qwen2.5-coder-1.5b".into());
    let model = model(&cfg);
    assert_eq!(fim_text(model.fim(fim_req())).await.unwrap(), "x");
    chat_ok(model.chat(hello())).await;
    let requests = server.requests();
    // `auto` leaves the template to the server even for a known model name.
    assert_eq!(requests[0].path, "/infill");
    for sent in &requests {
        assert_eq!(sent.headers["authorization"], "Bearer llama-key");
        assert_eq!(sent.body["model"], "qwen2.5-coder-1.5b");
    }
}

#[tokio::test]
async fn explicit_template_goes_to_completion() {
    let server = server(vec![ScriptedResponse::text("a + b")]).await;
    let mut cfg = T.config(&server.url());
    cfg.fim_template = FimTemplate::Qwen;
    assert_eq!(fim_text(model(&cfg).fim(fim_req())).await.unwrap(), "a + b");
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/completion");
    let prompt = sent.body["prompt"].as_str().unwrap();
    assert!(prompt.contains("<|fim_prefix|>"), "{prompt}");
    assert!(sent.body["stop"]
        .as_array()
        .unwrap()
        .contains(&json!("<|fim_middle|>")));
    assert_eq!(sent.body["n_predict"], 128);
    assert_eq!(sent.body["cache_prompt"], true);
}

#[tokio::test]
async fn chat_without_model_name() {
    let server = server(vec![ScriptedResponse {
        text: "Sure.".into(),
        tool_calls: vec![MockToolCall::new("run_tests", json!({"filter": "parse"}))],
        ..ScriptedResponse::default()
    }])
    .await;
    let req = ChatRequest {
        messages: vec![Message::user("test it")],
        ..ChatRequest::default()
    };
    let events = chat_ok(model(&T.config(&server.url())).chat(req)).await;
    assert_eq!(text_of(&events), "Sure.");
    assert!(events.contains(&ChatEvent::ToolCall(ToolCall {
        id: "call_1_0".into(),
        name: "run_tests".into(),
        arguments: json!({"filter": "parse"}),
    })));
    assert_eq!(stop_of(&events), Some(StopReason::ToolUse));
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert!(sent.body.get("model").is_none(), "{}", sent.body);
    assert_eq!(
        sent.body["messages"],
        json!([{"role": "user", "content": "test it"}])
    );
}

// The fault suite every remote provider passes (openai_compat_common/faults.rs).
fault_suite!(T, "FETTLE_TEST_LLAMACPP_KEY_401");
