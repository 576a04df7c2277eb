//! Shared by the tests of the remote providers (the OpenAI-compatible
//! `openai`, `mistral`, `llamacpp`, and `anthropic`, `ollama`): building
//! models against the mock server, collecting streams, and the fault suite
//! every provider must pass, run through either capability.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod faults;
pub use faults::*;

use std::time::Duration;

use fettle::config::{FimTemplate, ModelConfig, Provider};
use fettle::mock::{MockServer, Script, ScriptedResponse};
use fettle::model::{ChatEvent, ChatRequest, FimRequest, Message, Model, ModelError, StopReason};
use futures::StreamExt;

/// One provider under test and where it talks on the mock.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub provider: Provider,
    /// Appended to the mock's URL to make `base_url`.
    pub base_suffix: &'static str,
    pub chat_path: &'static str,
    pub fim_path: &'static str,
    pub model: Option<&'static str>,
    pub fim_template: FimTemplate,
}

pub const OPENAI: Target = Target {
    provider: Provider::OpenAi,
    base_suffix: "/v1",
    chat_path: "/v1/chat/completions",
    fim_path: "/v1/completions",
    model: Some("gpt-test"),
    fim_template: FimTemplate::Suffix,
};

pub const MISTRAL: Target = Target {
    provider: Provider::Mistral,
    base_suffix: "/v1",
    chat_path: "/v1/chat/completions",
    fim_path: "/v1/fim/completions",
    model: Some("codestral-latest"),
    fim_template: FimTemplate::Auto,
};

pub const LLAMACPP: Target = Target {
    provider: Provider::LlamaCpp,
    base_suffix: "",
    chat_path: "/v1/chat/completions",
    fim_path: "/infill",
    model: None,
    fim_template: FimTemplate::Auto,
};

/// Anthropic and Ollama run the same fault suite (through chat; their FIM
/// goes through chat or `/api/generate`).
pub const ANTHROPIC: Target = Target {
    provider: Provider::Anthropic,
    base_suffix: "",
    chat_path: "/v1/messages",
    fim_path: "/v1/messages",
    model: Some("claude-test"),
    fim_template: FimTemplate::Auto,
};

pub const OLLAMA: Target = Target {
    provider: Provider::Ollama,
    base_suffix: "",
    chat_path: "/api/chat",
    fim_path: "/api/generate",
    model: Some("llama-test"),
    fim_template: FimTemplate::Auto,
};

/// Which capability a fault test goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    Chat,
    Fim,
}

impl Target {
    pub fn config(&self, server_url: &str) -> ModelConfig {
        let mut cfg = ModelConfig::new(self.provider);
        cfg.base_url = Some(format!("{server_url}{}", self.base_suffix));
        cfg.model = self.model.map(str::to_string);
        cfg.fim_template = self.fim_template;
        cfg.timeout_ms = 3000;
        cfg.max_retries = 2;
        cfg
    }

    pub fn path(&self, cap: Cap) -> &'static str {
        match cap {
            Cap::Chat => self.chat_path,
            Cap::Fim => self.fim_path,
        }
    }

    /// Why the decoder behind `cap` says a stream cut short is incomplete
    /// (the `reason` of `TruncatedStream`).
    pub fn truncation(&self, cap: Cap) -> &'static str {
        match (self.provider, cap) {
            (Provider::Anthropic, _) => "the stream ended before message_stop",
            (Provider::Ollama, _) => "the stream ended without its final \"done\": true line",
            (Provider::LlamaCpp, Cap::Fim) => {
                "the stream ended before an event with \"stop\": true"
            }
            _ => "the stream ended without a finish reason or [DONE]",
        }
    }

    /// Whether the decoder behind `cap` reports an unknown event by its
    /// name (SSE `event:`, `object`, `type`) rather than by its whole line.
    pub fn names_events(&self, cap: Cap) -> bool {
        !matches!(
            (self.provider, cap),
            (Provider::Ollama, _) | (Provider::LlamaCpp, Cap::Fim)
        )
    }

    /// The start of a streamed answer whose first text is "hi", as this
    /// provider's server sends it through either capability: the content
    /// type and the body.
    pub fn opening(&self) -> (&'static str, &'static str) {
        match self.provider {
            Provider::Anthropic => (
                "text/event-stream",
                concat!(
                    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n",
                    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
                    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
                ),
            ),
            // One line that `/api/chat` and `/api/generate` both read.
            Provider::Ollama => (
                "application/x-ndjson",
                "{\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},\"response\":\"hi\",\"done\":false}\n",
            ),
            // One event that chat, completions, `/infill` and `/completion` all read.
            _ => (
                "text/event-stream",
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"text\":\"hi\"}],\
                 \"content\":\"hi\",\"stop\":false}\n\n",
            ),
        }
    }
}

pub async fn server(responses: Vec<ScriptedResponse>) -> MockServer {
    MockServer::start(Script::new(responses)).await.unwrap()
}

pub fn model(cfg: &ModelConfig) -> Model {
    Model::new("fast", cfg).unwrap()
}

/// Sets a test-only environment variable (each test uses its own name).
pub fn set_env(var: &str, value: &str) {
    std::env::set_var(var, value);
}

pub fn hello() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    }
}

pub fn fim_req() -> FimRequest {
    FimRequest {
        prefix: "fn add(a: i32, b: i32) -> i32 {\n    ".into(),
        suffix: "\n}\n".into(),
        path: Some("src/lib.rs".into()),
        ..FimRequest::default()
    }
}

/// Every event of a chat stream, or the first error (with the events
/// before it), which must end the stream.
pub async fn collect_chat(
    mut stream: fettle::model::ChatStream,
) -> (Vec<ChatEvent>, Option<ModelError>) {
    let mut events = Vec::new();
    let limit = tokio::time::sleep(Duration::from_secs(20));
    tokio::pin!(limit);
    loop {
        tokio::select! {
            _ = &mut limit => panic!("chat stream did not end within 20 s; got {events:?}"),
            next = stream.next() => match next {
                None => return (events, None),
                Some(Ok(event)) => events.push(event),
                Some(Err(e)) => {
                    assert!(stream.next().await.is_none(), "stream went on after {e}");
                    return (events, Some(e));
                }
            },
        }
    }
}

/// A successful chat: the events, checked to end with exactly one `Stop`.
pub async fn chat_ok(stream: fettle::model::ChatStream) -> Vec<ChatEvent> {
    let (events, err) = collect_chat(stream).await;
    assert!(err.is_none(), "unexpected error {err:?} after {events:?}");
    assert_one_stop_last(&events);
    events
}

/// Asserts the stream's shape: exactly one `Stop`, last.
pub fn assert_one_stop_last(events: &[ChatEvent]) {
    let stops = events
        .iter()
        .filter(|e| matches!(e, ChatEvent::Stop(_)))
        .count();
    assert_eq!(stops, 1, "{events:?}");
    assert!(
        matches!(events.last(), Some(ChatEvent::Stop(_))),
        "{events:?}"
    );
}

pub fn text_of(events: &[ChatEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

pub fn stop_of(events: &[ChatEvent]) -> Option<StopReason> {
    events.iter().find_map(|e| match e {
        ChatEvent::Stop(s) => Some(*s),
        _ => None,
    })
}

/// The text of a FIM stream, or its first error.
pub async fn fim_text(mut stream: fettle::model::TextStream) -> Result<String, ModelError> {
    let mut text = String::new();
    while let Some(piece) = stream.next().await {
        text.push_str(&piece?);
    }
    Ok(text)
}
