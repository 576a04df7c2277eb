//! Tests of the scriptable mock model server itself, with reqwest as the client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use fettle::mock::{
    Fault, Matcher, MockServer, MockToolCall, MockUsage, RecordedRequest, Script, ScriptedResponse,
};
use futures::StreamExt;
use serde_json::{json, Value};

// ---------------------------------------------------------------- helpers

async fn serve(responses: Vec<ScriptedResponse>) -> MockServer {
    MockServer::start(Script::new(responses)).await.unwrap()
}

fn text(t: &str) -> ScriptedResponse {
    ScriptedResponse::text(t)
}

fn with_fault(t: &str, fault: Fault) -> ScriptedResponse {
    ScriptedResponse {
        fault: Some(fault),
        ..text(t)
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn post(server: &MockServer, path: &str, body: Value) -> reqwest::Response {
    client()
        .post(format!("{}{path}", server.url()))
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn post_json(server: &MockServer, path: &str, body: Value) -> Value {
    let resp = post(server, path, body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(content_type(&resp), "application/json");
    resp.json().await.unwrap()
}

fn content_type(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

/// A parsed server-sent event: its `event:` name and data.
#[derive(Debug)]
struct Sse {
    event: Option<String>,
    data: String,
}

impl Sse {
    fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("bad JSON {:?}: {e}", self.data))
    }
}

fn parse_sse(body: &str) -> Vec<Sse> {
    let mut out = Vec::new();
    for block in body.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut event = None;
        let mut data: Vec<&str> = Vec::new();
        for line in block.lines() {
            if let Some(name) = line.strip_prefix("event: ") {
                event = Some(name.to_string());
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push(d);
            } else {
                panic!("unexpected SSE line {line:?}");
            }
        }
        out.push(Sse {
            event,
            data: data.join("\n"),
        });
    }
    out
}

async fn post_sse(server: &MockServer, path: &str, body: Value) -> Vec<Sse> {
    let resp = post(server, path, body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(content_type(&resp), "text/event-stream");
    parse_sse(&resp.text().await.unwrap())
}

async fn post_ndjson(server: &MockServer, path: &str, body: Value) -> Vec<Value> {
    let resp = post(server, path, body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(content_type(&resp), "application/x-ndjson");
    resp.text()
        .await
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn read_file_call() -> MockToolCall {
    MockToolCall::new("read_file", json!({"path": "src/main.rs", "line": 3}))
}

/// The OpenAI chat stream's text and tool calls (id, name, joined arguments).
fn openai_collect(events: &[Sse]) -> (String, Vec<(String, String, String)>, usize) {
    let mut text = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut content_chunks = 0;
    for e in events.iter().filter(|e| e.data != "[DONE]") {
        let v = e.json();
        let Some(delta) = v.pointer("/choices/0/delta") else {
            continue;
        };
        if let Some(c) = delta.get("content").and_then(Value::as_str) {
            if !c.is_empty() {
                content_chunks += 1;
            }
            text.push_str(c);
        }
        for tc in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = tc["index"].as_u64().unwrap() as usize;
            if index == calls.len() {
                calls.push((
                    tc["id"].as_str().unwrap().to_string(),
                    tc["function"]["name"].as_str().unwrap().to_string(),
                    String::new(),
                ));
            }
            calls[index]
                .2
                .push_str(tc["function"]["arguments"].as_str().unwrap());
        }
    }
    (text, calls, content_chunks)
}

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

// ---------------------------------------------------------------- faults

#[tokio::test]
async fn fault_429_with_retry_after() {
    let server = serve(vec![with_fault(
        "",
        Fault::Status {
            status: 429,
            retry_after: Some("1".into()),
            body: None,
        },
    )])
    .await;
    let resp = post(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    let v: Value = resp.json().await.unwrap();
    assert!(v["error"]["message"].is_string());
}

#[tokio::test]
async fn fault_500_and_custom_body() {
    let server = serve(vec![
        with_fault(
            "",
            Fault::Status {
                status: 500,
                retry_after: None,
                body: None,
            },
        ),
        with_fault(
            "",
            Fault::Status {
                status: 401,
                retry_after: None,
                body: Some("go away".into()),
            },
        ),
    ])
    .await;
    let resp = post(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(resp.status(), 500);
    assert!(resp.headers().get("retry-after").is_none());
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "api_error");
    let resp = post(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.text().await.unwrap(), "go away");
}

#[tokio::test]
async fn fault_disconnect_mid_stream() {
    let server = serve(vec![with_fault(
        "one two three four five",
        Fault::Disconnect { after_chunks: 2 },
    )])
    .await;
    let resp = post(&server, "/v1/chat/completions", json!({"stream": true})).await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut got = Vec::new();
    let mut failed = false;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(bytes) => got.extend_from_slice(&bytes),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the body should end with an error");
    let events = parse_sse(&String::from_utf8(got).unwrap());
    let (text, _, _) = openai_collect(&events);
    assert_eq!(text, "one two");
    assert!(events.iter().all(|e| e.data != "[DONE]"));
}

#[tokio::test]
async fn fault_disconnect_whole_body() {
    let server = serve(vec![with_fault(
        "a long enough answer",
        Fault::Disconnect { after_chunks: 0 },
    )])
    .await;
    let resp = post(&server, "/v1/messages", json!({})).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.bytes().await.is_err());
}

#[tokio::test]
async fn fault_truncate_omits_terminal_marker() {
    let server = serve(vec![
        with_fault("alpha beta gamma", Fault::Truncate { after_chunks: 1 }),
        with_fault("alpha beta gamma", Fault::Truncate { after_chunks: 99 }),
        with_fault("alpha beta gamma", Fault::Truncate { after_chunks: 1 }),
        with_fault("alpha beta gamma", Fault::Truncate { after_chunks: 99 }),
    ])
    .await;
    // OpenAI: one content chunk, no [DONE].
    let events = post_sse(&server, "/v1/chat/completions", json!({"stream": true})).await;
    let (text, _, _) = openai_collect(&events);
    assert_eq!(text, "alpha");
    assert!(events.iter().all(|e| e.data != "[DONE]"));
    // Anthropic: everything but message_stop.
    let events = post_sse(&server, "/v1/messages", json!({"stream": true})).await;
    assert_eq!(
        events.last().unwrap().event.as_deref(),
        Some("message_delta")
    );
    // Ollama: no done:true line.
    let lines = post_ndjson(&server, "/api/chat", json!({})).await;
    assert_eq!(lines.len(), 1);
    assert!(lines.iter().all(|l| l["done"] == false));
    // llama.cpp: no stop:true chunk.
    let events = post_sse(&server, "/completion", json!({"stream": true})).await;
    assert_eq!(events.len(), 3);
    assert!(events.iter().all(|e| e.json()["stop"] == false));
}

#[tokio::test]
async fn fault_malformed_json() {
    let server = serve(vec![
        with_fault("hi there", Fault::MalformedJson),
        with_fault("hi there", Fault::MalformedJson),
        with_fault("hi there", Fault::MalformedJson),
    ])
    .await;
    let resp = post(&server, "/v1/chat/completions", json!({})).await;
    assert_eq!(resp.status(), 200);
    assert!(serde_json::from_str::<Value>(&resp.text().await.unwrap()).is_err());
    let events = post_sse(&server, "/v1/chat/completions", json!({"stream": true})).await;
    assert!(serde_json::from_str::<Value>(&events[0].data).is_err());
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let resp = post(&server, "/api/generate", json!({})).await;
    let body = resp.text().await.unwrap();
    let first = body.lines().next().unwrap();
    assert!(serde_json::from_str::<Value>(first).is_err());
}

#[tokio::test]
async fn fault_unknown_event() {
    let server = serve(vec![
        with_fault("hello world", Fault::UnknownEvent),
        with_fault("hello world", Fault::UnknownEvent),
        with_fault("hello world", Fault::UnknownEvent),
    ])
    .await;
    let events = post_sse(&server, "/v1/messages", json!({"stream": true})).await;
    assert!(events.iter().any(|e| e.event.as_deref() == Some("mystery")));
    assert_eq!(
        events.last().unwrap().event.as_deref(),
        Some("message_stop")
    );

    let events = post_sse(&server, "/v1/chat/completions", json!({"stream": true})).await;
    let odd: Vec<Value> = events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(Sse::json)
        .filter(|v| v.get("choices").is_none() && v.get("error").is_none())
        .collect();
    assert_eq!(odd.len(), 1);
    let (text, _, _) = openai_collect(&events);
    assert_eq!(text, "hello world");

    let lines = post_ndjson(&server, "/api/chat", json!({})).await;
    let odd = lines
        .iter()
        .filter(|l| {
            l.get("message").is_none() && l.get("response").is_none() && l.get("done").is_none()
        })
        .count();
    assert_eq!(odd, 1);
}

#[tokio::test]
async fn fault_hang_until_client_timeout() {
    let server = serve(vec![with_fault("never", Fault::Hang), text("fine")]).await;
    let hung = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = hung
        .post(format!("{}/v1/messages", server.url()))
        .json(&json!({}))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    // The server still answers others.
    let v = post_json(&server, "/v1/messages", json!({})).await;
    assert_eq!(v["content"][0]["text"], "fine");
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
