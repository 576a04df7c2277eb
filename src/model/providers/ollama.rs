//! Ollama's native API, streamed as newline-delimited JSON: chat at
//! `/api/chat`, fill-in-the-middle at `/api/generate` (with `suffix`, so the
//! server applies the model's own FIM template, or with a prompt rendered by
//! a concrete template and `raw: true`).
use futures::stream::BoxStream;
use serde_json::{json, Map, Value};

use super::stream::{self, text_only};

use crate::config::{FimTemplate, ModelConfig, Provider as ProviderKind};
use crate::model::error::shorten;
use crate::model::fim::{self, FimOrder, FimPrompt};
use crate::model::http::{merge_extra_body, Endpoint, Response};
use crate::model::{
    ChatEvent, ChatRequest, ChatStream, FimRequest, GenOptions, Message, ModelError, Provider,
    Role, StopReason, TextStream, ToolCall, ToolDef, Usage,
};

pub(crate) struct Ollama {
    endpoint: Endpoint,
    config: ModelConfig,
    /// The model name sent to the server (the model's own name when unset).
    model: String,
    template: FimTemplate,
}

impl Ollama {
    pub fn new(name: &str, config: &ModelConfig) -> Result<Self, ModelError> {
        let model = config.model.clone().unwrap_or_else(|| name.to_string());
        Ok(Self {
            endpoint: Endpoint::from_config(name, config)?,
            template: fim::resolve(config.fim_template, ProviderKind::Ollama, &model),
            config: config.clone(),
            model,
        })
    }

    fn stream(&self, path: &str, body: Value) -> ChatStream {
        let url = self.endpoint.url(path);
        let decoder = Decoder::new(&self.endpoint.name, &url);
        stream::request(
            self.endpoint.clone(),
            url,
            headers(&self.endpoint),
            body,
            decoder,
        )
    }
}

impl Provider for Ollama {
    fn preconnect(&self) {
        self.endpoint.preconnect();
    }
    fn fim(&self, req: FimRequest) -> TextStream {
        let rendered = fim::render(self.template, &req, FimOrder::Psm);
        let options = options(&self.config, &req.options, &rendered.stop);
        let (path, body) = match rendered.prompt {
            FimPrompt::Chat(messages) => {
                let body = chat_body(&self.model, &self.config, &messages, &[], options);
                ("/api/chat", body)
            }
            FimPrompt::Split { prompt, suffix } => {
                let fields = json!({ "prompt": prompt, "suffix": suffix });
                (
                    "/api/generate",
                    generate_body(&self.model, &self.config, fields, options),
                )
            }
            FimPrompt::Text(prompt) => {
                let fields = json!({ "prompt": prompt, "raw": true });
                (
                    "/api/generate",
                    generate_body(&self.model, &self.config, fields, options),
                )
            }
        };
        text_only(self.stream(path, body))
    }

    fn chat(&self, req: ChatRequest) -> ChatStream {
        let options = options(&self.config, &req.options, &req.options.stop);
        let body = chat_body(
            &self.model,
            &self.config,
            &req.messages,
            &req.tools,
            options,
        );
        self.stream("/api/chat", body)
    }
}

/// The request headers: a bearer token when a key is configured (Ollama
/// behind an authenticating proxy). The JSON content type is set with the body.
fn headers(endpoint: &Endpoint) -> Vec<(&'static str, String)> {
    let mut headers = vec![("accept", "application/x-ndjson".to_string())];
    if let Some(key) = endpoint.api_key() {
        headers.push(("authorization", format!("Bearer {key}")));
    }
    headers
}

/// Ollama's `options`: the request's values over the model's configured ones.
pub(crate) fn options(config: &ModelConfig, options: &GenOptions, stop: &[String]) -> Value {
    let mut out = Map::new();
    out.insert(
        "num_predict".into(),
        json!(options.max_tokens.unwrap_or(config.max_tokens)),
    );
    out.insert(
        "temperature".into(),
        json!(options.temperature.unwrap_or(config.temperature)),
    );
    if !stop.is_empty() {
        out.insert("stop".into(), json!(stop));
    }
    Value::Object(out)
}

/// A streaming `/api/generate` body: `fields` (prompt and suffix, or raw
/// prompt) plus the common ones, `extra_body` merged last.
pub(crate) fn generate_body(
    model: &str,
    config: &ModelConfig,
    fields: Value,
    options: Value,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    if let Value::Object(fields) = fields {
        body.extend(fields);
    }
    body.insert("stream".into(), json!(true));
    body.insert("options".into(), options);
    let mut body = Value::Object(body);
    merge_extra_body(&mut body, &config.extra_body);
    body
}

/// A streaming `/api/chat` body, `extra_body` merged last.
pub(crate) fn chat_body(
    model: &str,
    config: &ModelConfig,
    messages: &[Message],
    tools: &[ToolDef],
    options: Value,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), encode_messages(messages));
    if !tools.is_empty() {
        let tools = tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": { "name": t.name, "description": t.description, "parameters": t.parameters },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    body.insert("options".into(), options);
    let mut body = Value::Object(body);
    merge_extra_body(&mut body, &config.extra_body);
    body
}

/// Messages in Ollama's shape. Calls carry no ids there, so a tool result
/// names its tool (`tool_name`), found among the calls of the assistant
/// turn before it.
fn encode_messages(messages: &[Message]) -> Value {
    let mut last_calls: &[ToolCall] = &[];
    let encoded = messages
        .iter()
        .map(|message| {
            let role = message.role.as_str();
            let mut out = Map::new();
            out.insert("role".into(), json!(role));
            out.insert("content".into(), json!(message.content));
            if message.role == Role::Assistant {
                last_calls = &message.tool_calls;
            }
            if !message.tool_calls.is_empty() {
                let calls = message
                    .tool_calls
                    .iter()
                    .map(|c| json!({ "function": { "name": c.name, "arguments": c.arguments } }))
                    .collect();
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            if message.role == Role::Tool {
                let name = message
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| last_calls.iter().find(|c| c.id == id));
                if let Some(call) = name {
                    out.insert("tool_name".into(), json!(call.name));
                }
            }
            Value::Object(out)
        })
        .collect();
    Value::Array(encoded)
}

/// Decodes Ollama's stream lines (from `/api/chat` and `/api/generate`)
/// into [`ChatEvent`]s: text as it comes, each tool call as it arrives
/// (Ollama sends them whole), then usage and the one `Stop` at `done`.
#[derive(Debug)]
pub(crate) struct Decoder {
    model: String,
    url: String,
    calls: usize,
    done: bool,
}

impl Decoder {
    pub fn new(model: &str, url: &str) -> Self {
        Self {
            model: model.to_string(),
            url: url.to_string(),
            calls: 0,
            done: false,
        }
    }

    /// Whether the final `done: true` line was seen; read no further.
    pub fn is_done(&self) -> bool {
        self.done
    }

    pub fn feed(&mut self, line: &Value) -> Result<Vec<ChatEvent>, ModelError> {
        if self.done {
            return Ok(Vec::new());
        }
        let Some(object) = line.as_object() else {
            return Err(self.malformed(format!(
                "expected a JSON object, got {}",
                shorten(&line.to_string(), 200)
            )));
        };
        if let Some(error) = object.get("error").filter(|e| !e.is_null()) {
            let message = error
                .as_str()
                .map_or_else(|| error.to_string(), str::to_string);
            return Err(ModelError::ServerReported {
                model: self.model.clone(),
                url: self.url.clone(),
                message: shorten(&message, 300),
            });
        }
        let done = object.get("done").and_then(Value::as_bool);
        let message = object.get("message").filter(|m| m.is_object());
        let response = object.get("response").and_then(Value::as_str);
        if done.is_none() && message.is_none() && response.is_none() {
            return Err(ModelError::UnknownEvent {
                model: self.model.clone(),
                url: self.url.clone(),
                event: shorten(&line.to_string(), 120),
            });
        }
        let mut out = Vec::new();
        let text = response.or_else(|| {
            message
                .and_then(|m| m.get("content"))
                .and_then(Value::as_str)
        });
        if let Some(text) = text.filter(|t| !t.is_empty()) {
            out.push(ChatEvent::TextDelta(text.to_string()));
        }
        let calls = message
            .and_then(|m| m.get("tool_calls"))
            .and_then(Value::as_array);
        for call in calls.into_iter().flatten() {
            out.push(ChatEvent::ToolCall(self.tool_call(call)?));
        }
        if done == Some(true) {
            let count = |k: &str| object.get(k).and_then(Value::as_u64).unwrap_or(0);
            out.push(ChatEvent::Usage(Usage {
                input_tokens: count("prompt_eval_count"),
                output_tokens: count("eval_count"),
            }));
            let reason = object.get("done_reason").and_then(Value::as_str);
            out.push(ChatEvent::Stop(self.stop_reason(reason)));
            self.done = true;
        }
        Ok(out)
    }

    /// One complete call. Arguments come as an object; a string is parsed.
    /// Ollama gives no ids (newer versions may), so they are generated.
    fn tool_call(&mut self, call: &Value) -> Result<ToolCall, ModelError> {
        let function = call.get("function").unwrap_or(&Value::Null);
        let Some(name) = function
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            return Err(self.malformed(format!(
                "tool call without a function name: {}",
                shorten(&call.to_string(), 200)
            )));
        };
        let arguments = match function.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(Value::String(raw)) if raw.trim().is_empty() => Value::Object(Map::new()),
            Some(Value::String(raw)) => {
                serde_json::from_str(raw).map_err(|e| ModelError::BadToolArguments {
                    model: self.model.clone(),
                    tool: name.to_string(),
                    reason: e.to_string(),
                    arguments: shorten(raw, 200),
                })?
            }
            Some(other) => other.clone(),
        };
        let id = match call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
        {
            Some(id) => id.to_string(),
            None => format!("call_{}", self.calls),
        };
        self.calls += 1;
        Ok(ToolCall {
            id,
            name: name.to_string(),
            arguments,
        })
    }

    fn stop_reason(&self, reason: Option<&str>) -> StopReason {
        if self.calls > 0 {
            return StopReason::ToolUse;
        }
        match reason {
            None | Some("stop") => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            Some(_) => StopReason::Other,
        }
    }

    fn malformed(&self, reason: String) -> ModelError {
        ModelError::MalformedResponse {
            model: self.model.clone(),
            url: self.url.clone(),
            reason,
        }
    }
}

impl stream::Decode for Decoder {
    type Frame = Value;
    type Item = ChatEvent;
    fn frames(response: Response) -> BoxStream<'static, Result<Value, ModelError>> {
        stream::ndjson(response)
    }
    fn decode(&mut self, frame: Value) -> Result<Vec<ChatEvent>, ModelError> {
        self.feed(&frame)
    }
    fn done(&self) -> bool {
        self.is_done()
    }
    fn truncated(&self) -> ModelError {
        ModelError::TruncatedStream {
            model: self.model.clone(),
            url: self.url.clone(),
            reason: "the stream ended without its final \"done\": true line".to_string(),
        }
    }
}

#[cfg(test)]
#[path = "ollama_tests.rs"]
mod tests;
