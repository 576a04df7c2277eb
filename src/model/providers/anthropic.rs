//! Anthropic's Messages API (`POST /v1/messages`), streamed as named
//! server-sent events. Anthropic has no native fill-in-the-middle: FIM
//! requests are rendered with the `chat` template and sent as a chat.
use std::collections::BTreeMap;

use futures::stream::BoxStream;
use serde_json::{json, Map, Value};

use super::stream::{self, text_only};

use crate::config::{FimTemplate, ModelConfig};
use crate::model::error::shorten;
use crate::model::fim::{self, FimOrder, FimPrompt};
use crate::model::http::{merge_extra_body, Endpoint, Response, SseEvent};
use crate::model::{
    ChatEvent, ChatRequest, ChatStream, FimRequest, GenOptions, Message, ModelError, Provider,
    Role, StopReason, TextStream, ToolCall, ToolDef, Usage,
};

/// The API version this decoder speaks.
const API_VERSION: &str = "2023-06-01";

pub(crate) struct Anthropic {
    endpoint: Endpoint,
    config: ModelConfig,
    /// The model name sent to the server (the model's own name when unset).
    model: String,
}

impl Anthropic {
    pub fn new(name: &str, config: &ModelConfig) -> Result<Self, ModelError> {
        Ok(Self {
            endpoint: Endpoint::from_config(name, config)?,
            config: config.clone(),
            model: config.model.clone().unwrap_or_else(|| name.to_string()),
        })
    }

    fn stream(&self, body: Value) -> ChatStream {
        let url = self.endpoint.url("/v1/messages");
        let decoder = Decoder::new(&self.endpoint.name, &url);
        stream::request(
            self.endpoint.clone(),
            url,
            headers(&self.endpoint),
            body,
            decoder,
        )
    }

    fn body(
        &self,
        messages: &[Message],
        tools: &[ToolDef],
        opts: &GenOptions,
        stop: &[String],
    ) -> Value {
        request_body(&self.model, &self.config, messages, tools, opts, stop)
    }
}

impl Provider for Anthropic {
    fn preconnect(&self) {
        self.endpoint.preconnect();
    }
    fn fim(&self, req: FimRequest) -> TextStream {
        // No FIM endpoint: `chat` is the only template that fits.
        let rendered = fim::render(FimTemplate::Chat, &req, FimOrder::Psm);
        let FimPrompt::Chat(messages) = rendered.prompt else {
            let err = ModelError::Unsupported {
                model: self.endpoint.name.clone(),
                reason: "Anthropic has no fill-in-the-middle endpoint, and the chat template \
                         did not render a chat"
                    .to_string(),
            };
            return Box::pin(futures::stream::once(async move { Err(err) }));
        };
        text_only(self.stream(self.body(&messages, &[], &req.options, &rendered.stop)))
    }

    fn chat(&self, req: ChatRequest) -> ChatStream {
        let stop = &req.options.stop;
        self.stream(self.body(&req.messages, &req.tools, &req.options, stop))
    }
}

/// The request headers. The JSON content type is set with the body.
fn headers(endpoint: &Endpoint) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("anthropic-version", API_VERSION.to_string()),
        ("accept", "text/event-stream".to_string()),
    ];
    if let Some(key) = endpoint.api_key() {
        headers.push(("x-api-key", key.to_string()));
    }
    headers
}

/// A streaming Messages API body: the request's options over the model's
/// configured values, system messages lifted to the top-level `system`,
/// `extra_body` merged last.
pub(crate) fn request_body(
    model: &str,
    config: &ModelConfig,
    messages: &[Message],
    tools: &[ToolDef],
    options: &GenOptions,
    stop: &[String],
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(options.max_tokens.unwrap_or(config.max_tokens)),
    );
    body.insert(
        "temperature".into(),
        json!(options.temperature.unwrap_or(config.temperature)),
    );
    // The API rejects stop sequences that are only whitespace.
    let stop: Vec<&String> = stop.iter().filter(|s| !s.trim().is_empty()).collect();
    if !stop.is_empty() {
        body.insert("stop_sequences".into(), json!(stop));
    }
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert("messages".into(), encode_messages(messages));
    if !tools.is_empty() {
        let tools = tools
            .iter()
            .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.parameters }))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    let mut body = Value::Object(body);
    merge_extra_body(&mut body, &config.extra_body);
    body
}

/// The conversation without its system messages, as content blocks. Tool
/// results become `tool_result` blocks of a user message; consecutive
/// messages of one role are merged, as the API wants roles to alternate.
fn encode_messages(messages: &[Message]) -> Value {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => ("user", vec![text_block(&message.content)]),
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id.as_deref().unwrap_or_default(),
                    "content": message.content,
                })],
            ),
            Role::Assistant => {
                let mut blocks = Vec::new();
                // Empty text blocks are rejected; a turn of only calls has none.
                if !message.content.is_empty() || message.tool_calls.is_empty() {
                    blocks.push(text_block(&message.content));
                }
                blocks.extend(message.tool_calls.iter().map(|call| {
                    json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments })
                }));
                ("assistant", blocks)
            }
        };
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    Value::Array(
        turns
            .into_iter()
            .map(|(role, content)| json!({ "role": role, "content": content }))
            .collect(),
    )
}

fn text_block(text: &str) -> Value {
    json!({ "type": "text", "text": text })
}

/// A `tool_use` content block still arriving.
#[derive(Debug)]
struct PartialCall {
    id: String,
    name: String,
    /// The `input` of `content_block_start` (used when no deltas come).
    input: Value,
    json: String,
}

/// Decodes Anthropic's stream events into [`ChatEvent`]s: text as it
/// comes, each tool call when its block stops, then usage and the one
/// `Stop` at `message_stop`.
#[derive(Debug)]
pub(crate) struct Decoder {
    model: String,
    url: String,
    /// The open `tool_use` blocks by index (text and thinking need no state).
    calls: BTreeMap<u64, PartialCall>,
    usage: Option<Usage>,
    stop: Option<StopReason>,
    saw_calls: bool,
    done: bool,
    /// Bytes of thinking received (not yielded; progress all the same).
    thought: usize,
}

impl Decoder {
    pub fn new(model: &str, url: &str) -> Self {
        Self {
            model: model.to_string(),
            url: url.to_string(),
            calls: BTreeMap::new(),
            usage: None,
            stop: None,
            saw_calls: false,
            done: false,
            thought: 0,
        }
    }

    /// Whether `message_stop` was seen; read no further.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Decodes one event: `event` is its SSE name (the data's `type` when
    /// the server sent none).
    pub fn feed(&mut self, event: Option<&str>, data: &str) -> Result<Vec<ChatEvent>, ModelError> {
        if self.done {
            return Ok(Vec::new());
        }
        if let Some(name) = event {
            if !KNOWN_EVENTS.contains(&name) {
                return Err(self.unknown(name));
            }
        }
        if event == Some("ping") {
            return Ok(Vec::new());
        }
        let value = self.parse(data)?;
        let name = match event {
            Some(name) => name.to_string(),
            None => match value.get("type").and_then(Value::as_str) {
                Some(t) if KNOWN_EVENTS.contains(&t) => t.to_string(),
                Some(t) => return Err(self.unknown(t)),
                None => return Err(self.unknown(&shorten(data, 120))),
            },
        };
        let mut out = Vec::new();
        match name.as_str() {
            "message_start" => self.add_usage(value.pointer("/message/usage")),
            "content_block_start" => {
                let index = self.index(&value)?;
                let block = value.get("content_block").unwrap_or(&Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => push_text(&mut out, block.get("text")),
                    Some("tool_use") => {
                        let call = PartialCall {
                            id: string_field(block, "id"),
                            name: string_field(block, "name"),
                            input: block.get("input").cloned().unwrap_or(Value::Null),
                            json: String::new(),
                        };
                        self.calls.insert(index, call);
                    }
                    // thinking, redacted_thinking, ...
                    _ => {}
                }
            }
            "content_block_delta" => {
                let index = self.index(&value)?;
                let delta = value.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => push_text(&mut out, delta.get("text")),
                    Some("input_json_delta") => {
                        let piece = delta.get("partial_json").and_then(Value::as_str);
                        match self.calls.get_mut(&index) {
                            Some(call) => call.json.push_str(piece.unwrap_or("")),
                            _ => {
                                return Err(self.malformed(format!(
                                    "input_json_delta for content block {index}, which is not a tool_use block"
                                )))
                            }
                        }
                    }
                    // Not shown, but the model is producing: counts for
                    // the idle limit (`pending`).
                    Some("thinking_delta") => {
                        let piece = delta.get("thinking").and_then(Value::as_str);
                        self.thought += piece.map_or(0, str::len);
                    }
                    // signature_delta, citations_delta ...
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = self.index(&value)?;
                if let Some(PartialCall {
                    id,
                    name,
                    input,
                    json,
                }) = self.calls.remove(&index)
                {
                    let arguments = self.arguments(&name, input, &json)?;
                    self.saw_calls = true;
                    out.push(ChatEvent::ToolCall(ToolCall {
                        id,
                        name,
                        arguments,
                    }));
                }
            }
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop_reason(reason));
                }
                self.add_usage(value.get("usage"));
            }
            "message_stop" => {
                out.extend(self.usage.map(ChatEvent::Usage));
                let fallback = match self.saw_calls {
                    true => StopReason::ToolUse,
                    false => StopReason::EndTurn,
                };
                out.push(ChatEvent::Stop(self.stop.unwrap_or(fallback)));
                self.done = true;
            }
            "error" => return Err(self.stream_error(value.get("error").unwrap_or(&value))),
            _ => {}
        }
        Ok(out)
    }

    /// A tool call's arguments: the streamed JSON, or the block's `input`
    /// when nothing streamed; nothing at all means `{}`.
    fn arguments(&self, tool: &str, input: Value, json: &str) -> Result<Value, ModelError> {
        if json.trim().is_empty() {
            return Ok(if input.is_object() { input } else { json!({}) });
        }
        serde_json::from_str(json).map_err(|e| ModelError::BadToolArguments {
            model: self.model.clone(),
            tool: tool.to_string(),
            reason: e.to_string(),
            arguments: shorten(json, 200),
        })
    }

    fn parse(&self, data: &str) -> Result<Value, ModelError> {
        match serde_json::from_str::<Value>(data) {
            Ok(v) if v.is_object() => Ok(v),
            Ok(_) => Err(self.malformed(format!(
                "expected a JSON object, got {:?}",
                shorten(data, 200)
            ))),
            Err(e) => Err(self.malformed(format!("{e} in {:?}", shorten(data, 200)))),
        }
    }

    /// Takes the counts present in a `usage` object: `input_tokens` comes
    /// with `message_start`, the cumulative `output_tokens` with `message_delta`.
    fn add_usage(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage.filter(|u| u.is_object()) else {
            return;
        };
        let current = self.usage.get_or_insert_with(Usage::default);
        if let Some(n) = usage.get("input_tokens").and_then(Value::as_u64) {
            current.input_tokens = n;
        }
        if let Some(n) = usage.get("output_tokens").and_then(Value::as_u64) {
            current.output_tokens = n;
        }
    }

    fn index(&self, value: &Value) -> Result<u64, ModelError> {
        value.get("index").and_then(Value::as_u64).ok_or_else(|| {
            self.malformed(format!(
                "content block event without an index: {}",
                shorten(&value.to_string(), 200)
            ))
        })
    }

    /// An `error` event: the API failed after the answer had started.
    fn stream_error(&self, error: &Value) -> ModelError {
        let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| error.to_string());
        let message = shorten(&message, 300);
        match kind {
            "overloaded_error" | "api_error" => ModelError::Server {
                model: self.model.clone(),
                url: self.url.clone(),
                status: if kind == "overloaded_error" { 529 } else { 500 },
                detail: format!(": {message} ({kind}, mid-stream)"),
                attempts: 1,
            },
            _ => ModelError::ServerReported {
                model: self.model.clone(),
                url: self.url.clone(),
                message: format!("{kind}: {message}"),
            },
        }
    }

    fn malformed(&self, reason: String) -> ModelError {
        ModelError::MalformedResponse {
            model: self.model.clone(),
            url: self.url.clone(),
            reason,
        }
    }

    fn unknown(&self, event: &str) -> ModelError {
        ModelError::UnknownEvent {
            model: self.model.clone(),
            url: self.url.clone(),
            event: event.to_string(),
        }
    }
}

const KNOWN_EVENTS: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
];

/// Emits `text` when it is a non-empty string.
fn push_text(out: &mut Vec<ChatEvent>, text: Option<&Value>) {
    if let Some(text) = text.and_then(Value::as_str).filter(|t| !t.is_empty()) {
        out.push(ChatEvent::TextDelta(text.to_string()));
    }
}

fn string_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "tool_use" => StopReason::ToolUse,
        _ => StopReason::Other,
    }
}

impl stream::Decode for Decoder {
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
    fn truncated(&self) -> ModelError {
        ModelError::TruncatedStream {
            model: self.model.clone(),
            url: self.url.clone(),
            reason: "the stream ended before message_stop".to_string(),
        }
    }
    fn pending(&self) -> usize {
        self.calls.values().map(|c| c.json.len()).sum::<usize>() + self.thought
    }
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
