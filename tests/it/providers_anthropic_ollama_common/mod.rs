//! Helpers for the Anthropic and Ollama provider tests against the mock
//! model server (their fault suite is the one in `openai_compat_common`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::Duration;

use fettle::config::{ModelConfig, Provider as ProviderKind};
use fettle::mock::{Fault, ScriptedResponse};
use fettle::model::{ChatEvent, ChatStream, Model, ModelError, TextStream};
use futures::StreamExt;

pub use crate::openai_compat_common::{assert_one_stop_last, collect_chat, server, text_of};

/// A model of `provider` pointed at `server`, with quick timeouts.
pub fn config(provider: ProviderKind, base_url: &str, model: &str) -> ModelConfig {
    let mut cfg = ModelConfig::new(provider);
    cfg.base_url = Some(base_url.to_string());
    cfg.model = Some(model.to_string());
    cfg.timeout_ms = 3000;
    cfg.total_timeout_ms = 10_000;
    cfg
}

/// Sets the environment variable `var` (unique per test) to `value`.
pub fn set_key(var: &str, value: &str) {
    std::env::set_var(var, value);
}

pub fn model(name: &str, cfg: &ModelConfig) -> Model {
    Model::new(name, cfg).unwrap()
}

/// The chat's events; panics on an error.
pub async fn chat_ok(stream: ChatStream) -> Vec<ChatEvent> {
    let (events, err) = collect_chat(stream).await;
    if let Some(e) = err {
        panic!("unexpected error {e} after {events:?}");
    }
    events
}

/// The chat's error; panics when it succeeds.
pub async fn chat_err(stream: ChatStream) -> ModelError {
    let (events, err) = collect_chat(stream).await;
    err.unwrap_or_else(|| panic!("expected an error, got {events:?}"))
}

/// The text pieces of a FIM stream, or the first error.
pub async fn collect_text(mut stream: TextStream) -> Result<Vec<String>, ModelError> {
    let mut pieces = Vec::new();
    let run = async {
        while let Some(piece) = stream.next().await {
            pieces.push(piece?);
        }
        Ok::<_, ModelError>(())
    };
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("FIM stream did not end within 20 s")?;
    Ok(pieces)
}

pub fn fault(fault: Fault) -> ScriptedResponse {
    ScriptedResponse {
        fault: Some(fault),
        ..ScriptedResponse::text("never seen")
    }
}

pub fn status(status: u16, retry_after: Option<&str>, body: Option<&str>) -> ScriptedResponse {
    fault(Fault::Status {
        status,
        retry_after: retry_after.map(str::to_string),
        body: body.map(str::to_string),
    })
}
