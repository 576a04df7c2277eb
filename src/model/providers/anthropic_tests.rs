#![allow(clippy::unwrap_used, clippy::expect_used)]
use serde_json::json;

use super::*;
use crate::config::Provider as ProviderKind;

fn feed_all(events: &[(&str, Value)]) -> Result<Vec<ChatEvent>, ModelError> {
    let mut decoder = Decoder::new("claude", "http://x/v1/messages");
    let mut out = Vec::new();
    for (name, data) in events {
        out.extend(decoder.feed(Some(name), &data.to_string())?);
    }
    stream::Decode::finish(&mut decoder)?;
    Ok(out)
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
    }
}

#[test]
fn body_lifts_system_and_merges_tool_results() {
    let mut config = ModelConfig::new(ProviderKind::Anthropic);
    config.extra_body.insert("top_k".into(), json!(5));
    config.extra_body.insert("temperature".into(), json!(0.9));
    let messages = vec![
        Message::system("Be brief."),
        Message::user("Read two files."),
        Message {
            tool_calls: vec![
                call("t1", "read", json!({"path": "a"})),
                call("t2", "read", json!({"path": "b"})),
            ],
            ..Message::assistant("")
        },
        Message::tool_result("t1", "A"),
        Message::tool_result("t2", "B"),
        Message::system("Answer in English."),
        Message::user("Thanks"),
    ];
    let tools = vec![ToolDef {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object"}),
    }];
    let options = GenOptions {
        max_tokens: Some(64),
        ..GenOptions::default()
    };
    let stop = vec!["\n\n".to_string(), "END".to_string()];
    let body = request_body("claude-x", &config, &messages, &tools, &options, &stop);
    assert_eq!(
        body,
        json!({
            "model": "claude-x",
            "max_tokens": 64,
            "temperature": 0.9,
            "stop_sequences": ["END"],
            "system": "Be brief.\n\nAnswer in English.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Read two files."}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "b"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "B"},
                    {"type": "text", "text": "Thanks"},
                ]},
            ],
            "tools": [{"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}],
            "stream": true,
            "top_k": 5,
        })
    );
}

#[test]
fn decodes_text_tool_calls_usage_and_stop() {
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"pa"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "th\": \"a.rs\"}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "list", "input": {}}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 2}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    assert_eq!(
        feed_all(&events).unwrap(),
        vec![
            ChatEvent::TextDelta("Hi".into()),
            ChatEvent::ToolCall(call("toolu_1", "read", json!({"path": "a.rs"}))),
            ChatEvent::ToolCall(call("toolu_2", "list", json!({}))),
            ChatEvent::Usage(Usage {
                input_tokens: 12,
                output_tokens: 30
            }),
            ChatEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[test]
fn stop_reasons_map() {
    for (wire, ours) in [
        ("end_turn", StopReason::EndTurn),
        ("max_tokens", StopReason::MaxTokens),
        ("stop_sequence", StopReason::StopSequence),
        ("tool_use", StopReason::ToolUse),
        ("refusal", StopReason::Other),
    ] {
        assert_eq!(stop_reason(wire), ours);
    }
}

#[test]
fn invalid_tool_arguments_are_an_error() {
    let events = [
        (
            "content_block_start",
            json!({"index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "read", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": "}}),
        ),
        ("content_block_stop", json!({"index": 0})),
    ];
    let err = feed_all(&events).unwrap_err();
    assert!(
        matches!(&err, ModelError::BadToolArguments { tool, .. } if tool == "read"),
        "{err:?}"
    );
}

#[test]
fn stream_faults_are_typed() {
    let mut decoder = Decoder::new("claude", "u");
    let err = decoder.feed(Some("mystery"), "{}").unwrap_err();
    assert!(matches!(&err, ModelError::UnknownEvent { event, .. } if event == "mystery"));
    let err = decoder
        .feed(Some("message_start"), "{not json")
        .unwrap_err();
    assert!(matches!(err, ModelError::MalformedResponse { .. }));
    let err = decoder.feed(None, r#"{"type": "mystery"}"#).unwrap_err();
    assert!(matches!(err, ModelError::UnknownEvent { .. }));
    assert!(matches!(
        stream::Decode::finish(&mut decoder).unwrap_err(),
        ModelError::TruncatedStream { .. }
    ));

    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let err = decoder
        .feed(Some("error"), &overloaded.to_string())
        .unwrap_err();
    assert!(
        matches!(err, ModelError::Server { status: 529, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("Overloaded"), "{err}");
    let other =
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}});
    let err = decoder.feed(Some("error"), &other.to_string()).unwrap_err();
    assert!(matches!(err, ModelError::ServerReported { .. }), "{err:?}");
    assert!(
        err.to_string().contains("invalid_request_error: bad"),
        "{err}"
    );
}

#[test]
fn nothing_after_message_stop() {
    let mut decoder = Decoder::new("claude", "u");
    let stop = decoder.feed(Some("message_stop"), "{}").unwrap();
    assert_eq!(stop, vec![ChatEvent::Stop(StopReason::EndTurn)]);
    assert!(decoder.is_done());
    assert!(decoder.feed(Some("message_stop"), "{}").unwrap().is_empty());
    assert!(stream::Decode::finish(&mut decoder).is_ok());
}
