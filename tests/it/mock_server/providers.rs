//! The providers' wire formats: OpenAI, Anthropic, Ollama, llama.cpp.

use super::*;

// ---------------------------------------------------------------- OpenAI

#[tokio::test]
async fn openai_chat_whole_shape() {
    let server = serve(vec![ScriptedResponse {
        usage: Some(MockUsage {
            input_tokens: 7,
            output_tokens: 3,
        }),
        ..text("Hello there")
    }])
    .await;
    let v = post_json(
        &server,
        "/v1/chat/completions",
        json!({"model": "gpt-x", "messages": []}),
    )
    .await;
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "gpt-x");
    assert!(v["id"].is_string());
    assert_eq!(v["choices"][0]["index"], 0);
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"], "Hello there");
    assert!(v["choices"][0]["message"].get("tool_calls").is_none());
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})
    );
}

#[tokio::test]
async fn openai_chat_whole_tool_calls() {
    let mut second = MockToolCall::new("list", json!({}));
    second.id = Some("call_custom".into());
    let server = serve(vec![ScriptedResponse {
        tool_calls: vec![read_file_call(), second],
        ..text("")
    }])
    .await;
    let v = post_json(&server, "/chat/completions", json!({"model": "m"})).await;
    let message = &v["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    let calls = message["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "read_file");
    let args: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"path": "src/main.rs", "line": 3}));
    assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(calls[1]["id"], "call_custom");
    assert_ne!(calls[0]["id"], calls[1]["id"]);
}

#[tokio::test]
async fn openai_chat_stream_text() {
    let server = serve(vec![text("The quick brown fox jumps.")]).await;
    let events = post_sse(
        &server,
        "/v1/chat/completions",
        json!({"model": "m", "stream": true}),
    )
    .await;
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let first = events[0].json();
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    let (text, calls, chunks) = openai_collect(&events);
    assert_eq!(text, "The quick brown fox jumps.");
    assert!(calls.is_empty());
    assert!(chunks >= 3, "{chunks} content chunks");
    // Without include_usage, usage rides on the finish chunk.
    let finish = events[events.len() - 2].json();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert_eq!(finish["usage"]["prompt_tokens"], 10);
    assert_eq!(finish["usage"]["completion_tokens"], 5);
}

#[tokio::test]
async fn openai_chat_stream_usage_chunk_when_requested() {
    let server = serve(vec![text("hi there")]).await;
    let events = post_sse(
        &server,
        "/v1/chat/completions",
        json!({"stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    let n = events.len();
    assert_eq!(events[n - 1].data, "[DONE]");
    let usage = events[n - 2].json();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 15);
    let finish = events[n - 3].json();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert!(finish.get("usage").is_none());
}

#[tokio::test]
async fn openai_chat_stream_tool_calls() {
    let server = serve(vec![ScriptedResponse {
        tool_calls: vec![
            read_file_call(),
            MockToolCall::new("grep", json!({"pattern": "fn main"})),
        ],
        ..text("Let me look.")
    }])
    .await;
    let events = post_sse(&server, "/v1/chat/completions", json!({"stream": true})).await;
    let (text, calls, _) = openai_collect(&events);
    assert_eq!(text, "Let me look.");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].1, "read_file");
    let args: Value = serde_json::from_str(&calls[0].2).unwrap();
    assert_eq!(args, json!({"path": "src/main.rs", "line": 3}));
    assert_eq!(calls[1].1, "grep");
    let args: Value = serde_json::from_str(&calls[1].2).unwrap();
    assert_eq!(args, json!({"pattern": "fn main"}));
    // The arguments come in several pieces, after a first delta with id and name.
    let pieces = events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .filter(|e| {
            let v = e.json();
            let tc = &v["choices"][0]["delta"]["tool_calls"][0];
            tc["index"] == 0 && tc.get("id").is_none() && tc["function"]["arguments"].is_string()
        })
        .count();
    assert!((2..=3).contains(&pieces), "{pieces} argument pieces");
    let finish = events[events.len() - 2].json();
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn openai_invalid_raw_arguments_sent_verbatim() {
    let mut call = MockToolCall::new("edit", json!({}));
    call.arguments_raw = Some("{\"path\": ".into());
    let script = ScriptedResponse {
        tool_calls: vec![call],
        repeat: true,
        ..text("")
    };
    let server = serve(vec![script]).await;
    let events = post_sse(&server, "/v1/chat/completions", json!({"stream": true})).await;
    let (_, calls, _) = openai_collect(&events);
    assert_eq!(calls[0].2, "{\"path\": ");
    let v = post_json(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"path\": "
    );
}

#[tokio::test]
async fn openai_completions_whole_and_stream() {
    let answer = "    let x = 1;\n    x + 1";
    let server = serve(vec![ScriptedResponse {
        repeat: true,
        ..text(answer)
    }])
    .await;
    let v = post_json(
        &server,
        "/v1/completions",
        json!({"model": "c", "prompt": "fn f() {", "suffix": "}"}),
    )
    .await;
    assert_eq!(v["choices"][0]["text"], answer);
    assert_eq!(v["choices"][0]["index"], 0);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["completion_tokens"], 5);

    let events = post_sse(&server, "/completions", json!({"stream": true})).await;
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(Sse::json).collect();
    assert!(chunks.len() > 2);
    let joined: String = chunks
        .iter()
        .map(|c| c["choices"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(joined, answer);
    assert!(chunks[..chunks.len() - 1]
        .iter()
        .all(|c| c["choices"][0]["finish_reason"].is_null()));
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
}

#[tokio::test]
async fn mistral_fim_uses_chat_shape() {
    let server = serve(vec![
        text("return 42;"),
        ScriptedResponse {
            chunks: Some(vec!["ret".into(), "urn ".into(), "42;".into()]),
            ..text("")
        },
    ])
    .await;
    let v = post_json(
        &server,
        "/v1/fim/completions",
        json!({"model": "codestral-latest", "prompt": "a", "suffix": "b"}),
    )
    .await;
    assert_eq!(v["choices"][0]["message"]["content"], "return 42;");
    let events = post_sse(&server, "/v1/fim/completions", json!({"stream": true})).await;
    let (text, _, chunks) = openai_collect(&events);
    assert_eq!(text, "return 42;");
    assert_eq!(chunks, 3);
}

#[tokio::test]
async fn stop_reason_override() {
    let server = serve(vec![ScriptedResponse {
        stop_reason: Some("length".into()),
        ..text("cut")
    }])
    .await;
    let v = post_json(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(v["choices"][0]["finish_reason"], "length");
}

// ---------------------------------------------------------------- Anthropic

#[tokio::test]
async fn anthropic_whole_shape() {
    let server = serve(vec![ScriptedResponse {
        tool_calls: vec![read_file_call()],
        ..text("Reading.")
    }])
    .await;
    let v = post_json(
        &server,
        "/v1/messages",
        json!({"model": "claude-x", "max_tokens": 10}),
    )
    .await;
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["model"], "claude-x");
    assert_eq!(v["content"][0], json!({"type": "text", "text": "Reading."}));
    assert_eq!(v["content"][1]["type"], "tool_use");
    assert_eq!(v["content"][1]["name"], "read_file");
    assert_eq!(
        v["content"][1]["input"],
        json!({"path": "src/main.rs", "line": 3})
    );
    assert!(v["content"][1]["id"]
        .as_str()
        .unwrap()
        .starts_with("toolu_"));
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(v["usage"], json!({"input_tokens": 10, "output_tokens": 5}));
}

#[tokio::test]
async fn anthropic_stream_events() {
    let server = serve(vec![ScriptedResponse {
        tool_calls: vec![read_file_call()],
        usage: Some(MockUsage {
            input_tokens: 20,
            output_tokens: 9,
        }),
        ..text("I will read the file.")
    }])
    .await;
    let events = post_sse(&server, "/v1/messages", json!({"stream": true})).await;
    let names: Vec<&str> = events.iter().map(|e| e.event.as_deref().unwrap()).collect();
    assert_eq!(names[0], "message_start");
    assert!(names.contains(&"ping"));
    assert_eq!(names[names.len() - 2], "message_delta");
    assert_eq!(names[names.len() - 1], "message_stop");
    for e in &events {
        assert_eq!(e.json()["type"], e.event.as_deref().unwrap());
    }
    assert_eq!(events[0].json()["message"]["usage"]["input_tokens"], 20);
    let mut text = String::new();
    let mut partial = String::new();
    let mut text_deltas = 0;
    let mut tool_start = None;
    for e in &events {
        let v = e.json();
        match e.event.as_deref().unwrap() {
            "content_block_start" if v["content_block"]["type"] == "tool_use" => {
                assert_eq!(v["content_block"]["input"], json!({}));
                tool_start = Some(v["content_block"].clone());
            }
            "content_block_delta" => match v["delta"]["type"].as_str().unwrap() {
                "text_delta" => {
                    text_deltas += 1;
                    text.push_str(v["delta"]["text"].as_str().unwrap());
                }
                "input_json_delta" => {
                    partial.push_str(v["delta"]["partial_json"].as_str().unwrap())
                }
                other => panic!("delta type {other}"),
            },
            _ => {}
        }
    }
    assert_eq!(text, "I will read the file.");
    assert!(text_deltas > 2);
    assert_eq!(tool_start.unwrap()["name"], "read_file");
    let input: Value = serde_json::from_str(&partial).unwrap();
    assert_eq!(input, json!({"path": "src/main.rs", "line": 3}));
    let delta = events[events.len() - 2].json();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 9);
    let starts = names
        .iter()
        .filter(|n| **n == "content_block_start")
        .count();
    let stops = names.iter().filter(|n| **n == "content_block_stop").count();
    assert_eq!((starts, stops), (2, 2));
}

#[tokio::test]
async fn anthropic_error_body_style() {
    let server = serve(vec![with_fault(
        "",
        Fault::Status {
            status: 429,
            retry_after: Some("1".into()),
            body: None,
        },
    )])
    .await;
    let resp = post(&server, "/v1/messages", json!({})).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert!(v["error"]["message"].is_string());
}

// ---------------------------------------------------------------- Ollama

#[tokio::test]
async fn ollama_chat_streams_by_default() {
    let server = serve(vec![text("Sure thing, here it is.")]).await;
    let lines = post_ndjson(
        &server,
        "/api/chat",
        json!({"model": "qwen", "messages": []}),
    )
    .await;
    assert!(lines.len() > 3);
    let (last, pieces) = lines.split_last().unwrap();
    let joined: String = pieces
        .iter()
        .map(|l| {
            assert_eq!(l["done"], false);
            assert_eq!(l["model"], "qwen");
            assert!(l["created_at"].is_string());
            assert_eq!(l["message"]["role"], "assistant");
            l["message"]["content"].as_str().unwrap()
        })
        .collect();
    assert_eq!(joined, "Sure thing, here it is.");
    assert_eq!(last["done"], true);
    assert_eq!(last["done_reason"], "stop");
    assert_eq!(last["prompt_eval_count"], 10);
    assert_eq!(last["eval_count"], 5);
}

#[tokio::test]
async fn ollama_chat_tool_calls_are_objects() {
    let mut bad = MockToolCall::new("broken", json!({}));
    bad.arguments_raw = Some("{not json".into());
    let script = ScriptedResponse {
        tool_calls: vec![read_file_call(), bad],
        repeat: true,
        ..text("")
    };
    let server = serve(vec![script]).await;
    let lines = post_ndjson(&server, "/api/chat", json!({"stream": true})).await;
    let with_calls: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"].get("tool_calls").is_some())
        .collect();
    assert_eq!(with_calls.len(), 1);
    let calls = &with_calls[0]["message"]["tool_calls"];
    assert_eq!(calls[0]["function"]["name"], "read_file");
    assert_eq!(
        calls[0]["function"]["arguments"],
        json!({"path": "src/main.rs", "line": 3})
    );
    assert_eq!(calls[1]["function"]["arguments"], "{not json");
    assert_eq!(lines.last().unwrap()["done"], true);

    let v = post_json(&server, "/api/chat", json!({"stream": false})).await;
    assert_eq!(v["done"], true);
    assert_eq!(v["message"]["content"], "");
    assert_eq!(
        v["message"]["tool_calls"][0]["function"]["arguments"]["line"],
        3
    );
}

#[tokio::test]
async fn ollama_generate_whole_and_stream() {
    let server = serve(vec![ScriptedResponse {
        repeat: true,
        ..text("x + y }")
    }])
    .await;
    let v = post_json(
        &server,
        "/api/generate",
        json!({"model": "coder", "prompt": "p", "stream": false}),
    )
    .await;
    assert_eq!(v["response"], "x + y }");
    assert_eq!(v["done"], true);
    assert_eq!(v["model"], "coder");
    assert_eq!(v["eval_count"], 5);

    let lines = post_ndjson(&server, "/api/generate", json!({"model": "coder"})).await;
    let (last, pieces) = lines.split_last().unwrap();
    let joined: String = pieces
        .iter()
        .map(|l| l["response"].as_str().unwrap())
        .collect();
    assert_eq!(joined, "x + y }");
    assert_eq!(pieces.len(), 4);
    assert_eq!(last["done"], true);
    assert_eq!(last["response"], "");
    assert_eq!(last["done_reason"], "stop");
    assert_eq!(last["prompt_eval_count"], 10);
}

#[tokio::test]
async fn ollama_error_body_style() {
    let server = serve(vec![with_fault(
        "",
        Fault::Status {
            status: 404,
            retry_after: None,
            body: None,
        },
    )])
    .await;
    let resp = post(&server, "/api/chat", json!({"model": "nope"})).await;
    assert_eq!(resp.status(), 404);
    let v: Value = resp.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("nope"), "{v}");
}

// ---------------------------------------------------------------- llama.cpp

#[tokio::test]
async fn llamacpp_infill_and_completion() {
    let server = serve(vec![ScriptedResponse {
        repeat: true,
        ..text("a b c d")
    }])
    .await;
    let events = post_sse(
        &server,
        "/infill",
        json!({"input_prefix": "p", "input_suffix": "s", "stream": true}),
    )
    .await;
    let values: Vec<Value> = events.iter().map(Sse::json).collect();
    let (last, pieces) = values.split_last().unwrap();
    assert_eq!(pieces.len(), 4);
    let joined: String = pieces
        .iter()
        .map(|p| {
            assert_eq!(p["stop"], false);
            p["content"].as_str().unwrap()
        })
        .collect();
    assert_eq!(joined, "a b c d");
    assert_eq!(last["stop"], true);
    assert_eq!(last["content"], "");
    assert_eq!(last["tokens_predicted"], 5);
    assert_eq!(last["tokens_evaluated"], 10);

    let v = post_json(&server, "/completion", json!({"prompt": "p"})).await;
    assert_eq!(v["content"], "a b c d");
    assert_eq!(v["stop"], true);
}
