#![allow(clippy::unwrap_used, clippy::expect_used)]
use serde_json::json;

use super::*;
use crate::config::Provider as ProviderKind;

fn feed_all(decoder: &mut ChunkDecoder, lines: &[&str]) -> Result<Vec<ChatEvent>, ModelError> {
    let mut out = Vec::new();
    for line in lines {
        out.extend(decoder.feed(None, line)?);
        if decoder.is_done() {
            return Ok(out);
        }
    }
    out.extend(decoder.end()?);
    Ok(out)
}

fn decode(lines: &[&str]) -> Result<Vec<ChatEvent>, ModelError> {
    feed_all(
        &mut ChunkDecoder::new("fast", "http://x/chat/completions"),
        lines,
    )
}

#[test]
fn text_usage_and_stop_in_order() {
    let events = decode(&[
        r#"{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14}}"#,
        "[DONE]",
        r#"{"ignored":"after done"}"#,
    ])
    .unwrap();
    assert_eq!(
        events,
        vec![
            ChatEvent::TextDelta("Hel".into()),
            ChatEvent::TextDelta("lo".into()),
            ChatEvent::Usage(Usage {
                input_tokens: 12,
                output_tokens: 2
            }),
            ChatEvent::Stop(StopReason::EndTurn),
        ]
    );
}

#[test]
fn completion_chunks_carry_text() {
    let events = decode(&[
        r#"{"object":"text_completion","choices":[{"text":"x = ","index":0}]}"#,
        r#"{"choices":[{"text":"1","index":0,"finish_reason":"length"}]}"#,
        "[DONE]",
    ])
    .unwrap();
    assert_eq!(
        events,
        vec![
            ChatEvent::TextDelta("x = ".into()),
            ChatEvent::TextDelta("1".into()),
            ChatEvent::Stop(StopReason::MaxTokens),
        ]
    );
}

#[test]
fn tool_calls_assembled_by_index() {
    let events = decode(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"noop","arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\": \"a.rs\"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#,
        "[DONE]",
    ])
    .unwrap();
    assert_eq!(
        events,
        vec![
            ChatEvent::ToolCall(ToolCall {
                id: "call_a".into(),
                name: "read_file".into(),
                arguments: json!({"path": "a.rs"}),
            }),
            ChatEvent::ToolCall(ToolCall {
                id: "call_b".into(),
                name: "noop".into(),
                arguments: json!({}),
            }),
            ChatEvent::Usage(Usage {
                input_tokens: 5,
                output_tokens: 7
            }),
            ChatEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[test]
fn tool_calls_without_index_or_id_and_parsed_arguments() {
    // Mistral-like: whole calls in one chunk; some servers send parsed arguments.
    let events = decode(&[
        r#"{"choices":[{"delta":{"content":"","tool_calls":[{"function":{"name":"a","arguments":"{\"n\":1}"}},{"id":"x","function":{"name":"b","arguments":{"m":2}}}]}}]}"#,
        "[DONE]",
    ])
    .unwrap();
    assert_eq!(
        events,
        vec![
            ChatEvent::ToolCall(ToolCall {
                id: "call_0".into(),
                name: "a".into(),
                arguments: json!({"n": 1})
            }),
            ChatEvent::ToolCall(ToolCall {
                id: "x".into(),
                name: "b".into(),
                arguments: json!({"m": 2})
            }),
            ChatEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[test]
fn bad_tool_arguments() {
    let err = decode(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"edit","arguments":"{\"path\": "}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ])
    .unwrap_err();
    assert!(
        matches!(&err, ModelError::BadToolArguments { tool, .. } if tool == "edit"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("model \"fast\"") && msg.contains("\"edit\""),
        "{msg}"
    );
    assert!(msg.contains("{\"path\": "), "{msg}");
}

#[test]
fn tool_call_without_name_is_malformed() {
    let err = decode(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
    ])
    .unwrap_err();
    assert!(
        matches!(err, ModelError::MalformedResponse { .. }),
        "{err:?}"
    );
}

#[test]
fn finish_reasons() {
    for (reason, stop) in [
        ("stop", StopReason::EndTurn),
        ("length", StopReason::MaxTokens),
        ("tool_calls", StopReason::ToolUse),
        ("content_filter", StopReason::Other),
    ] {
        let chunk = format!(r#"{{"choices":[{{"delta":{{}},"finish_reason":"{reason}"}}]}}"#);
        let events = decode(&[&chunk, "[DONE]"]).unwrap();
        assert_eq!(events, vec![ChatEvent::Stop(stop)], "{reason}");
    }
    // [DONE] without a finish reason still ends the turn.
    assert_eq!(
        decode(&["[DONE]"]).unwrap(),
        vec![ChatEvent::Stop(StopReason::EndTurn)]
    );
}

#[test]
fn end_without_done() {
    // A finish reason makes the stream complete even without [DONE].
    let events =
        decode(&[r#"{"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}"#]).unwrap();
    assert_eq!(
        events,
        vec![
            ChatEvent::TextDelta("a".into()),
            ChatEvent::Stop(StopReason::EndTurn)
        ]
    );
    let err = decode(&[r#"{"choices":[{"delta":{"content":"a"}}]}"#]).unwrap_err();
    assert!(matches!(err, ModelError::TruncatedStream { .. }), "{err:?}");
    assert!(
        err.to_string().contains("stopped before it was complete"),
        "{err}"
    );
}

#[test]
fn malformed_unknown_and_error_chunks() {
    let err = decode(&["{\"choices\": [oops"]).unwrap_err();
    assert!(
        matches!(err, ModelError::MalformedResponse { .. }),
        "{err:?}"
    );
    let err = decode(&["42"]).unwrap_err();
    assert!(
        matches!(err, ModelError::MalformedResponse { .. }),
        "{err:?}"
    );
    let err = decode(&[r#"{"type":"mystery","x":1}"#]).unwrap_err();
    assert!(
        matches!(&err, ModelError::UnknownEvent { event, .. } if event == "mystery"),
        "{err:?}"
    );
    let err = decode(&[r#"{"error":{"message":"overloaded","type":"server_error"}}"#]).unwrap_err();
    assert!(err.to_string().contains("overloaded"), "{err}");
    let mut d = ChunkDecoder::new("fast", "u");
    let err = d.feed(Some("error"), r#"{"message":"boom"}"#).unwrap_err();
    assert!(err.to_string().contains("boom"), "{err}");
}

#[test]
fn chat_body_encoding() {
    let messages = vec![
        Message::system("be brief"),
        Message::user("read a.rs"),
        Message {
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: json!({"path": "a.rs"}),
            }],
            ..Message::assistant("")
        },
        Message::tool_result("call_1", "fn a() {}"),
    ];
    let tools = vec![ToolDef {
        name: "read_file".into(),
        description: "Reads a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    let sampling = Sampling {
        max_tokens: 100,
        temperature: 0.2,
        stop: vec!["END".into()],
    };
    let mut extra = Map::new();
    extra.insert("max_tokens".into(), json!(7));
    extra.insert("seed".into(), json!(1));
    let body = chat_body(Some("gpt-x"), &messages, &tools, &sampling, true, &extra);
    assert_eq!(
        body,
        json!({
            "model": "gpt-x",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "read a.rs"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}}
                ]},
                {"role": "tool", "content": "fn a() {}", "tool_call_id": "call_1"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file", "description": "Reads a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            }}],
            "max_tokens": 7,
            "temperature": 0.2,
            "stop": ["END"],
            "stream": true,
            "stream_options": {"include_usage": true},
            "seed": 1,
        })
    );
    let plain = Sampling {
        stop: Vec::new(),
        ..sampling
    };
    let body = chat_body(
        None,
        &[Message::user("hi")],
        &[],
        &plain,
        false,
        &Map::new(),
    );
    assert_eq!(
        body,
        json!({
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 100, "temperature": 0.2, "stream": true,
        })
    );
}

#[test]
fn sampling_prefers_request_options() {
    let mut cfg = ModelConfig::new(ProviderKind::OpenAi);
    cfg.max_tokens = 10;
    cfg.temperature = 0.5;
    let s = Sampling::new(&cfg, &GenOptions::default(), Vec::new());
    assert_eq!((s.max_tokens, s.temperature), (10, 0.5));
    let opts = GenOptions {
        max_tokens: Some(3),
        temperature: Some(0.0),
        stop: vec!["x".into()],
        latency_target: None,
    };
    let s = Sampling::new(&cfg, &opts, opts.stop.clone());
    assert_eq!(
        (s.max_tokens, s.temperature, s.stop),
        (3, 0.0, vec!["x".to_string()])
    );
}

#[test]
fn prompt_body_fields() {
    let sampling = Sampling {
        max_tokens: 64,
        temperature: 0.1,
        stop: vec!["\n\n".into()],
    };
    let mut extra = Map::new();
    extra.insert("top_p".into(), json!(0.9));
    let body = prompt_body("m", "pre".into(), Some("suf".into()), &sampling, &extra);
    assert_eq!(
        body,
        json!({
            "model": "m", "prompt": "pre", "suffix": "suf", "max_tokens": 64,
            "temperature": 0.1, "stop": ["\n\n"], "stream": true, "top_p": 0.9,
        })
    );
    let body = prompt_body("m", "p".into(), None, &sampling, &Map::new());
    assert!(body.get("suffix").is_none());
}

#[test]
fn headers_never_without_key() {
    let cfg = ModelConfig::new(ProviderKind::OpenAi);
    let endpoint = Endpoint::from_config("fast", &cfg).unwrap();
    let h = headers(&endpoint);
    assert!(h.iter().all(|(name, _)| *name != "authorization"), "{h:?}");
}
