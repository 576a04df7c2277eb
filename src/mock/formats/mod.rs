//! The wire formats the mock speaks, chosen by request path: how a scripted
//! response becomes a whole JSON body or a list of stream events, and what
//! an error body looks like in each format's style.
use bytes::Bytes;
use serde_json::{json, Value};

use super::script::ScriptedResponse;

mod anthropic;
mod llamacpp;
mod ollama;
mod openai;

/// One wire format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// OpenAI chat completions; also Mistral chat and FIM, llama.cpp's
    /// OpenAI-compatible chat.
    OpenAiChat,
    /// OpenAI legacy text completions (FIM through `suffix`).
    OpenAiCompletions,
    /// Anthropic Messages API.
    Anthropic,
    /// Ollama `/api/chat`.
    OllamaChat,
    /// Ollama `/api/generate`.
    OllamaGenerate,
    /// llama.cpp server `/completion` and `/infill`.
    LlamaCpp,
}

/// How stream events are framed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Server-sent events: `event: name\ndata: json\n\n`.
    Sse,
    /// Newline-delimited JSON: one `json\n` per event.
    Ndjson,
}

/// What a response is rendered with, besides the script entry.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    /// The request's sequence number (1-based), for ids.
    pub seq: u64,
    /// The request's `model`, or `mock-model`.
    pub model: String,
    /// Whether the request asked for `stream_options.include_usage`.
    pub include_usage: bool,
    /// Unix seconds, for OpenAI's `created`.
    pub created: u64,
}

impl Ctx {
    pub fn new(seq: u64, request: &Value) -> Self {
        Self {
            seq,
            model: request
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("mock-model")
                .to_string(),
            include_usage: request
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }
}

/// One stream event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    /// The SSE `event:` name (Anthropic); `None` for unnamed events and NDJSON.
    pub name: Option<String>,
    /// The data: JSON text, or anything for injected faults.
    pub data: String,
    /// Whether this event carries content (a text piece, a piece of tool
    /// call arguments, an Ollama tool call): these are what
    /// `after_chunks` counts.
    pub counted: bool,
}

impl Event {
    pub fn data(value: Value, counted: bool) -> Self {
        Self {
            name: None,
            data: value.to_string(),
            counted,
        }
    }

    pub fn named(name: &str, value: Value, counted: bool) -> Self {
        Self {
            name: Some(name.to_string()),
            data: value.to_string(),
            counted,
        }
    }

    /// The bytes on the wire.
    pub fn encode(&self, framing: Framing) -> Bytes {
        match framing {
            Framing::Sse => {
                let mut out = String::new();
                if let Some(name) = &self.name {
                    out.push_str("event: ");
                    out.push_str(name);
                    out.push('\n');
                }
                for line in self.data.split('\n') {
                    out.push_str("data: ");
                    out.push_str(line);
                    out.push('\n');
                }
                out.push('\n');
                Bytes::from(out)
            }
            Framing::Ndjson => Bytes::from(format!("{}\n", self.data)),
        }
    }
}

/// A streamed answer: the events, then the terminal marker (`[DONE]`,
/// `message_stop`, the `done: true` line, the `stop: true` chunk).
#[derive(Clone, Debug)]
pub(crate) struct StreamPlan {
    pub events: Vec<Event>,
    pub terminal: Event,
}

/// Data that is not JSON, for [`Fault::MalformedJson`](super::Fault).
pub(crate) const MALFORMED: &str = "{\"mock\": this is not json";

impl Format {
    /// The format answering `path`, if any.
    pub fn from_path(path: &str) -> Option<Self> {
        Some(match path {
            "/v1/chat/completions" | "/chat/completions" | "/v1/fim/completions" => {
                Self::OpenAiChat
            }
            "/v1/completions" | "/completions" => Self::OpenAiCompletions,
            "/v1/messages" => Self::Anthropic,
            "/api/chat" => Self::OllamaChat,
            "/api/generate" => Self::OllamaGenerate,
            "/completion" | "/infill" => Self::LlamaCpp,
            _ => return None,
        })
    }

    /// Whether the request asks for a stream: `"stream": true`, except for
    /// Ollama, which streams unless `"stream": false`.
    pub fn is_stream(self, request: &Value) -> bool {
        let flag = request.get("stream").and_then(Value::as_bool);
        match self {
            Self::OllamaChat | Self::OllamaGenerate => flag != Some(false),
            _ => flag == Some(true),
        }
    }

    pub fn framing(self) -> Framing {
        match self {
            Self::OllamaChat | Self::OllamaGenerate => Framing::Ndjson,
            _ => Framing::Sse,
        }
    }

    pub fn content_type(self, stream: bool) -> &'static str {
        match (stream, self.framing()) {
            (false, _) => "application/json",
            (true, Framing::Sse) => "text/event-stream",
            (true, Framing::Ndjson) => "application/x-ndjson",
        }
    }

    /// The non-streamed answer.
    pub fn whole(self, resp: &ScriptedResponse, ctx: &Ctx) -> Value {
        match self {
            Self::OpenAiChat => openai::chat_whole(resp, ctx),
            Self::OpenAiCompletions => openai::completions_whole(resp, ctx),
            Self::Anthropic => anthropic::whole(resp, ctx),
            Self::OllamaChat => ollama::chat_whole(resp, ctx),
            Self::OllamaGenerate => ollama::generate_whole(resp, ctx),
            Self::LlamaCpp => llamacpp::whole(resp, ctx),
        }
    }

    /// The streamed answer.
    pub fn stream(self, resp: &ScriptedResponse, ctx: &Ctx) -> StreamPlan {
        match self {
            Self::OpenAiChat => openai::chat_stream(resp, ctx),
            Self::OpenAiCompletions => openai::completions_stream(resp, ctx),
            Self::Anthropic => anthropic::stream(resp, ctx),
            Self::OllamaChat => ollama::chat_stream(resp, ctx),
            Self::OllamaGenerate => ollama::generate_stream(resp, ctx),
            Self::LlamaCpp => llamacpp::stream(resp, ctx),
        }
    }

    /// An error body in the format's style.
    pub fn error_body(self, status: u16, message: &str) -> Value {
        match self {
            Self::OpenAiChat | Self::OpenAiCompletions => json!({
                "error": {
                    "message": message,
                    "type": error_type(status),
                    "param": null,
                    "code": null,
                }
            }),
            Self::Anthropic => json!({
                "type": "error",
                "error": { "type": error_type(status), "message": message },
            }),
            Self::OllamaChat | Self::OllamaGenerate => json!({ "error": message }),
            Self::LlamaCpp => json!({
                "error": { "code": status, "message": message, "type": error_type(status) }
            }),
        }
    }

    /// An event the format does not define; for non-streamed answers its
    /// data is the whole body.
    pub fn unknown_event(self, ctx: &Ctx) -> Event {
        match self {
            Self::Anthropic => Event::named("mystery", json!({ "type": "mystery" }), false),
            Self::OpenAiChat | Self::OpenAiCompletions => Event::data(
                json!({ "id": format!("mock-{}", ctx.seq), "object": "mystery", "mystery": true }),
                false,
            ),
            Self::OllamaChat | Self::OllamaGenerate => Event::data(
                json!({ "model": ctx.model, "created_at": ollama::CREATED_AT, "mystery": true }),
                false,
            ),
            Self::LlamaCpp => Event::data(json!({ "mystery": true }), false),
        }
    }
}

/// The default message of an injected status fault.
pub(crate) fn default_error_message(status: u16, model: &str) -> String {
    match status {
        401 => "mock: invalid API key".to_string(),
        403 => "mock: permission denied".to_string(),
        404 => format!("mock: model \"{model}\" not found"),
        429 => "mock: rate limit exceeded".to_string(),
        529 => "mock: overloaded".to_string(),
        _ => format!("mock: injected HTTP {status}"),
    }
}

/// The error `type` for a status, in the Anthropic/OpenAI vocabulary.
fn error_type(status: u16) -> &'static str {
    match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

/// The stop reason to report: the script's override or the format's natural one.
fn stop_reason(resp: &ScriptedResponse, natural: &str) -> String {
    resp.stop_reason
        .clone()
        .unwrap_or_else(|| natural.to_string())
}
