#![allow(clippy::unwrap_used, clippy::expect_used)]
use serde_json::json;

use super::*;

fn feed_all(lines: &[Value]) -> Result<Vec<ChatEvent>, ModelError> {
    let mut decoder = Decoder::new("llama", "http://x/api/chat");
    let mut out = Vec::new();
    for line in lines {
        out.extend(decoder.feed(line)?);
    }
    stream::Decode::finish(&mut decoder)?;
    Ok(out)
}

#[test]
fn chat_body_shapes_messages_tools_and_options() {
    let mut config = ModelConfig::new(ProviderKind::Ollama);
    config.max_tokens = 99;
    config.extra_body.insert("keep_alive".into(), json!("5m"));
    let call = ToolCall {
        id: "call_0".into(),
        name: "read".into(),
        arguments: json!({"path": "a"}),
    };
    let messages = vec![
        Message::system("sys"),
        Message::user("hi"),
        Message {
            tool_calls: vec![call],
            ..Message::assistant("")
        },
        Message::tool_result("call_0", "A"),
        Message::tool_result("call_9", "?"),
    ];
    let tools = vec![ToolDef {
        name: "read".into(),
        description: "Read".into(),
        parameters: json!({"type": "object"}),
    }];
    let opts = GenOptions {
        temperature: Some(0.5),
        ..GenOptions::default()
    };
    let options = options(&config, &opts, &["END".to_string()]);
    let body = chat_body("llama3", &config, &messages, &tools, options);
    assert_eq!(
        body,
        json!({
            "model": "llama3",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "read", "arguments": {"path": "a"}}}]},
                {"role": "tool", "content": "A", "tool_name": "read"},
                {"role": "tool", "content": "?"},
            ],
            "tools": [{"type": "function", "function": {"name": "read", "description": "Read", "parameters": {"type": "object"}}}],
            "stream": true,
            "options": {"num_predict": 99, "temperature": 0.5, "stop": ["END"]},
            "keep_alive": "5m",
        })
    );
}

#[test]
fn generate_body_with_suffix_or_raw() {
    let config = ModelConfig::new(ProviderKind::Ollama);
    let opts = options(&config, &GenOptions::default(), &[]);
    let body = generate_body(
        "m",
        &config,
        json!({"prompt": "a", "suffix": "b"}),
        opts.clone(),
    );
    assert_eq!(
        body,
        json!({"model": "m", "prompt": "a", "suffix": "b", "stream": true,
               "options": {"num_predict": 128, "temperature": 0.2}})
    );
    let body = generate_body("m", &config, json!({"prompt": "<fim>", "raw": true}), opts);
    assert_eq!(body["raw"], json!(true));
    assert!(body.get("suffix").is_none());
}

#[test]
fn decodes_text_calls_usage_and_stop() {
    let lines = [
        json!({"message": {"role": "assistant", "content": "Hel"}, "done": false}),
        json!({"message": {"role": "assistant", "content": "lo"}, "done": false}),
        json!({"message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "read", "arguments": {"path": "a"}}},
            {"id": "given", "function": {"name": "list", "arguments": "{\"dir\": \".\"}"}},
        ]}, "done": false}),
        json!({"message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
               "prompt_eval_count": 7, "eval_count": 3}),
    ];
    assert_eq!(
        feed_all(&lines).unwrap(),
        vec![
            ChatEvent::TextDelta("Hel".into()),
            ChatEvent::TextDelta("lo".into()),
            ChatEvent::ToolCall(ToolCall {
                id: "call_0".into(),
                name: "read".into(),
                arguments: json!({"path": "a"})
            }),
            ChatEvent::ToolCall(ToolCall {
                id: "given".into(),
                name: "list".into(),
                arguments: json!({"dir": "."})
            }),
            ChatEvent::Usage(Usage {
                input_tokens: 7,
                output_tokens: 3
            }),
            ChatEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[test]
fn generate_lines_and_stop_reasons() {
    let lines = [
        json!({"response": "fn", "done": false}),
        json!({"response": "", "done": true, "done_reason": "length", "eval_count": 2}),
    ];
    assert_eq!(
        feed_all(&lines).unwrap(),
        vec![
            ChatEvent::TextDelta("fn".into()),
            ChatEvent::Usage(Usage {
                input_tokens: 0,
                output_tokens: 2
            }),
            ChatEvent::Stop(StopReason::MaxTokens),
        ]
    );
    let last = feed_all(&[json!({"done": true})]).unwrap();
    assert_eq!(last.last(), Some(&ChatEvent::Stop(StopReason::EndTurn)));
    let last = feed_all(&[json!({"done": true, "done_reason": "unload"})]).unwrap();
    assert_eq!(last.last(), Some(&ChatEvent::Stop(StopReason::Other)));
}

#[test]
fn faults_are_typed() {
    let err = feed_all(&[json!({"response": "a", "done": false})]).unwrap_err();
    assert!(matches!(err, ModelError::TruncatedStream { .. }), "{err:?}");
    let err = feed_all(&[json!({"error": "out of memory"})]).unwrap_err();
    assert!(err.to_string().contains("out of memory"), "{err}");
    let err = feed_all(&[json!({"model": "m", "mystery": true})]).unwrap_err();
    assert!(matches!(err, ModelError::UnknownEvent { .. }), "{err:?}");
    let err = feed_all(&[json!([1, 2])]).unwrap_err();
    assert!(
        matches!(err, ModelError::MalformedResponse { .. }),
        "{err:?}"
    );
    let bad = json!({"message": {"tool_calls": [{"function": {"name": "read", "arguments": "{oops"}}]}, "done": false});
    let err = feed_all(&[bad]).unwrap_err();
    assert!(
        matches!(&err, ModelError::BadToolArguments { tool, .. } if tool == "read"),
        "{err:?}"
    );
}
