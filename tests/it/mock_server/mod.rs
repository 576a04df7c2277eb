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

mod faults;
mod providers;
mod script;
