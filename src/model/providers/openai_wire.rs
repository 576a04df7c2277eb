//! The OpenAI-compatible wire format, shared by the `openai`, `mistral` and
//! `llamacpp` providers: request bodies, and the decoder for streamed
//! chunks — chat chunks (`choices[0].delta`) as well as text-completion
//! chunks (`choices[0].text`), which differ only in where the text is.
use std::collections::BTreeMap;

use futures::stream::BoxStream;
use serde_json::{json, Map, Value};

use super::stream;

use crate::config::ModelConfig;
use crate::model::error::shorten;
use crate::model::http::{merge_extra_body, Endpoint, Response, SseEvent};
use crate::model::{
    ChatEvent, ChatStream, GenOptions, Message, ModelError, StopReason, ToolCall, ToolDef, Usage,
};

/// Sampling settings for one request: the request's options over the
/// model's configured values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sampling {
    pub max_tokens: u32,
    pub temperature: f64,
    pub stop: Vec<String>,
}

impl Sampling {
    /// `stop` is the full list of stop sequences to send (for FIM, the
    /// rendered template's, which already include the request's own).
    pub fn new(config: &ModelConfig, options: &GenOptions, stop: Vec<String>) -> Self {
        Self {
            max_tokens: options.max_tokens.unwrap_or(config.max_tokens),
            temperature: options.temperature.unwrap_or(config.temperature),
            stop,
        }
    }

    /// Adds `max_tokens` (under `max_key`), `temperature` and, when there
    /// are any, `stop` to `body`.
    pub fn apply(&self, body: &mut Map<String, Value>, max_key: &str) {
        body.insert(max_key.to_string(), json!(self.max_tokens));
        body.insert("temperature".to_string(), json!(self.temperature));
        if !self.stop.is_empty() {
            body.insert("stop".to_string(), json!(self.stop));
        }
    }
}

/// The request headers: a bearer token when the model has a key. The JSON
/// content type is set by the client with the body.
pub(crate) fn headers(endpoint: &Endpoint) -> Vec<(&'static str, String)> {
    let mut headers = vec![("accept", "text/event-stream".to_string())];
    if let Some(key) = endpoint.api_key() {
        headers.push(("authorization", format!("Bearer {key}")));
    }
    headers
}

/// A streaming chat-completions body. `include_usage` asks for the final
/// usage chunk (`stream_options`), which not every server accepts.
pub(crate) fn chat_body(
    model: Option<&str>,
    messages: &[Message],
    tools: &[ToolDef],
    sampling: &Sampling,
    include_usage: bool,
    extra: &Map<String, Value>,
) -> Value {
    let mut body = Map::new();
    if let Some(model) = model {
        body.insert("model".into(), json!(model));
    }
    body.insert(
        "messages".into(),
        Value::Array(messages.iter().map(encode_message).collect()),
    );
    if !tools.is_empty() {
        let tools = tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    sampling.apply(&mut body, "max_tokens");
    body.insert("stream".into(), json!(true));
    if include_usage {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    let mut body = Value::Object(body);
    merge_extra_body(&mut body, extra);
    body
}

/// A streaming prompt-completion body (OpenAI's `/completions`, Mistral's
/// `/fim/completions`), with `suffix` when the server lays out the FIM
/// prompt itself.
pub(crate) fn prompt_body(
    model: &str,
    prompt: String,
    suffix: Option<String>,
    sampling: &Sampling,
    extra: &Map<String, Value>,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("prompt".into(), json!(prompt));
    if let Some(suffix) = suffix {
        body.insert("suffix".into(), json!(suffix));
    }
    sampling.apply(&mut body, "max_tokens");
    body.insert("stream".into(), json!(true));
    let mut body = Value::Object(body);
    merge_extra_body(&mut body, extra);
    body
}

fn encode_message(message: &Message) -> Value {
    let role = message.role.as_str();
    let mut out = Map::new();
    out.insert("role".into(), json!(role));
    if message.tool_calls.is_empty() || !message.content.is_empty() {
        out.insert("content".into(), json!(message.content));
    } else {
        out.insert("content".into(), Value::Null);
    }
    if !message.tool_calls.is_empty() {
        let calls = message
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": c.arguments.to_string() },
                })
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    Value::Object(out)
}

/// POSTs `body` to `url` and streams the decoded chunks. Lazy: nothing is
/// sent until the stream is first polled; dropping it aborts the request.
pub(crate) fn chat_stream(endpoint: Endpoint, url: String, body: Value) -> ChatStream {
    let decoder = ChunkDecoder::new(&endpoint.name, &url);
    let headers = headers(&endpoint);
    stream::request(endpoint, url, headers, body, decoder)
}

/// The error for an `error` object (or string) the server sent inside a
/// stream that had started well.
pub(crate) fn stream_error(model: &str, url: &str, error: &Value) -> ModelError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| error.as_str().map(str::to_string))
        .unwrap_or_else(|| error.to_string());
    ModelError::ServerReported {
        model: model.to_string(),
        url: url.to_string(),
        message: shorten(&message, 300),
    }
}

/// Parses one event's data as a JSON object.
pub(crate) fn parse_object(model: &str, url: &str, data: &str) -> Result<Value, ModelError> {
    let malformed = |reason: String| ModelError::MalformedResponse {
        model: model.to_string(),
        url: url.to_string(),
        reason,
    };
    match serde_json::from_str::<Value>(data) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err(malformed(format!(
            "expected a JSON object, got {:?}",
            shorten(data, 200)
        ))),
        Err(e) => Err(malformed(format!("{e} in {:?}", shorten(data, 200)))),
    }
}

/// A tool call whose pieces are still arriving.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Decodes the `data` of OpenAI-style stream events into [`ChatEvent`]s.
///
/// Text is emitted as it comes; tool calls are assembled by `index` and
/// emitted when the choice finishes; usage when reported; the one `Stop`
/// at `[DONE]` (or at the end of a stream that reported a finish reason).
#[derive(Debug)]
pub(crate) struct ChunkDecoder {
    model: String,
    url: String,
    calls: BTreeMap<u64, PartialCall>,
    finish: Option<StopReason>,
    saw_calls: bool,
    done: bool,
}

impl ChunkDecoder {
    pub fn new(model: &str, url: &str) -> Self {
        Self {
            model: model.to_string(),
            url: url.to_string(),
            calls: BTreeMap::new(),
            finish: None,
            saw_calls: false,
            done: false,
        }
    }

    /// Whether the stream is complete (`[DONE]` seen); read no further.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Decodes one event. `event` is its SSE event name, if any.
    pub fn feed(&mut self, event: Option<&str>, data: &str) -> Result<Vec<ChatEvent>, ModelError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            return self.complete();
        }
        let chunk = parse_object(&self.model, &self.url, data)?;
        if event == Some("error") {
            let error = chunk.get("error").unwrap_or(&chunk);
            return Err(stream_error(&self.model, &self.url, error));
        }
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(stream_error(&self.model, &self.url, error));
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        let usage = chunk.get("usage").filter(|u| u.is_object());
        if choices.is_none() && usage.is_none() {
            let name = event
                .map(str::to_string)
                .or_else(|| {
                    ["object", "type"]
                        .iter()
                        .find_map(|k| chunk.get(*k).and_then(Value::as_str))
                        .map(str::to_string)
                })
                .unwrap_or_else(|| shorten(data, 120));
            return Err(ModelError::UnknownEvent {
                model: self.model.clone(),
                url: self.url.clone(),
                event: name,
            });
        }
        let mut out = Vec::new();
        if let Some(choice) = choices.and_then(|c| c.first()) {
            self.choice(choice, &mut out)?;
        }
        if let Some(usage) = usage {
            let count = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
            out.push(ChatEvent::Usage(Usage {
                input_tokens: count("prompt_tokens"),
                output_tokens: count("completion_tokens"),
            }));
        }
        Ok(out)
    }

    fn choice(&mut self, choice: &Value, out: &mut Vec<ChatEvent>) -> Result<(), ModelError> {
        let delta = choice.get("delta");
        let text = delta
            .and_then(|d| d.get("content"))
            .and_then(Value::as_str)
            .or_else(|| choice.get("text").and_then(Value::as_str));
        if let Some(text) = text.filter(|t| !t.is_empty()) {
            out.push(ChatEvent::TextDelta(text.to_string()));
        }
        let calls = delta
            .and_then(|d| d.get("tool_calls"))
            .and_then(Value::as_array);
        for (position, call) in calls.into_iter().flatten().enumerate() {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64);
            let partial = self.calls.entry(index).or_default();
            self.saw_calls = true;
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                if !id.is_empty() {
                    partial.id = id.to_string();
                }
            }
            let function = call.get("function");
            if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
                if !name.is_empty() {
                    partial.name = name.to_string();
                }
            }
            match function.and_then(|f| f.get("arguments")) {
                Some(Value::String(piece)) => partial.arguments.push_str(piece),
                Some(Value::Null) | None => {}
                // Some servers send the arguments already parsed.
                Some(whole) => partial.arguments = whole.to_string(),
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(finish_reason(reason));
            self.flush_calls(out)?;
        }
        Ok(())
    }

    /// Emits the assembled tool calls, in index order.
    fn flush_calls(&mut self, out: &mut Vec<ChatEvent>) -> Result<(), ModelError> {
        for (index, call) in std::mem::take(&mut self.calls) {
            if call.name.is_empty() {
                return Err(ModelError::MalformedResponse {
                    model: self.model.clone(),
                    url: self.url.clone(),
                    reason: format!("tool call #{index} has no function name"),
                });
            }
            let arguments = parse_arguments(&self.model, &call.name, &call.arguments)?;
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            out.push(ChatEvent::ToolCall(ToolCall {
                id,
                name: call.name,
                arguments,
            }));
        }
        Ok(())
    }

    /// The end of a complete stream: pending tool calls, then the `Stop`.
    fn complete(&mut self) -> Result<Vec<ChatEvent>, ModelError> {
        let mut out = Vec::new();
        self.flush_calls(&mut out)?;
        let reason = self.finish.unwrap_or(if self.saw_calls {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        });
        out.push(ChatEvent::Stop(reason));
        self.done = true;
        Ok(out)
    }

    /// The body ended. Without `[DONE]` the stream still counts as complete
    /// when a finish reason arrived; otherwise it was cut short.
    pub fn end(&mut self) -> Result<Vec<ChatEvent>, ModelError> {
        if self.done {
            return Ok(Vec::new());
        }
        if self.finish.is_none() {
            return Err(stream::Decode::truncated(self));
        }
        self.complete()
    }
}

/// A tool call's arguments: JSON text, where empty means no arguments.
pub(crate) fn parse_arguments(model: &str, tool: &str, raw: &str) -> Result<Value, ModelError> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(raw).map_err(|e| ModelError::BadToolArguments {
        model: model.to_string(),
        tool: tool.to_string(),
        reason: e.to_string(),
        arguments: shorten(raw, 200),
    })
}

fn finish_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "length" | "model_length" => StopReason::MaxTokens,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        _ => StopReason::Other,
    }
}

impl stream::Decode for ChunkDecoder {
    type Frame = SseEvent;
    type Item = ChatEvent;
    fn frames(response: Response) -> BoxStream<'static, Result<SseEvent, ModelError>> {
        stream::sse(response)
    }
    fn decode(&mut self, frame: SseEvent) -> Result<Vec<ChatEvent>, ModelError> {
        self.feed(frame.event.as_deref(), &frame.data)
    }
    fn done(&self) -> bool {
        self.is_done()
    }
    fn finish(&mut self) -> Result<Vec<ChatEvent>, ModelError> {
        self.end()
    }
    fn truncated(&self) -> ModelError {
        ModelError::TruncatedStream {
            model: self.model.clone(),
            url: self.url.clone(),
            reason: "the stream ended without a finish reason or [DONE]".to_string(),
        }
    }
    fn pending(&self) -> usize {
        let calls: usize = self
            .calls
            .values()
            .map(|c| c.name.len() + c.arguments.len())
            .sum();
        // The finish reason is output too (the Stop it becomes waits for
        // `[DONE]`).
        calls + usize::from(self.finish.is_some())
    }
}

#[cfg(test)]
#[path = "openai_wire_tests.rs"]
mod tests;
