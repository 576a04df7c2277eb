//! Telling the user how the models are doing: one `window/showMessage` when
//! a model starts failing (rate-limited in `model::health`: not one per
//! keystroke), one when it answers again, and the state of each model in
//! `fettle/stats`.
use std::sync::{Arc, Weak};

use tokio::sync::broadcast::error::RecvError;
use tower_lsp::lsp_types::MessageType;

use super::state::State;
use crate::model::health::{self, HealthEvent};

/// Forwards model failures and recoveries to the client as messages, for
/// the life of the server. Called once, when the client is ready for them.
pub fn watch(state: &Arc<State>) {
    let mut events = health::subscribe();
    let state: Weak<State> = Arc::downgrade(state);
    tokio::spawn(async move {
        loop {
            let event = match events.recv().await {
                Ok(event) => event,
                // Missed some (a burst): the next one still says the state.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            let Some(state) = state.upgrade() else {
                return;
            };
            let (kind, text) = message(&state, &event);
            state.client.show_message(kind, text).await;
        }
    });
}

fn message(state: &State, event: &HealthEvent) -> (MessageType, String) {
    let config = state.config();
    match event {
        HealthEvent::Failing {
            model,
            reason,
            paused_for,
        } => {
            let features = config.features_using(model);
            let used_by = if features.is_empty() {
                String::new()
            } else {
                format!(" (used by {})", features.join(", "))
            };
            let fix = match paused_for {
                Some(wait) => format!(
                    "requests to it are paused for {}s, as its server asked; if this recurs, \
                     use a model with a higher rate limit (models.{model})",
                    wait.as_secs().max(1)
                ),
                None => format!(
                    "it gives no answers until this is fixed: start or fix its server, \
                     or change models.{model} in the configuration"
                ),
            };
            (
                MessageType::WARNING,
                format!(
                    "fettle: {reason} — model \"{model}\"{used_by}: {fix}. \
                     fettle/stats shows the reason; you will be told when it works again."
                ),
            )
        }
        HealthEvent::Recovered { model } => (
            MessageType::INFO,
            format!("fettle: model \"{model}\" works again."),
        ),
    }
}

/// `fettle/stats`: the completion statistics and, under `models`, the
/// state of each configured model that has been used.
pub fn stats(state: &State) -> serde_json::Result<serde_json::Value> {
    let mut report = serde_json::to_value(super::inline_completion::stats(state))?;
    let models = state.models();
    let health = health::report(models.names());
    if let Some(map) = report.as_object_mut() {
        map.insert("models".to_string(), serde_json::to_value(health)?);
        let edit = state.rewrite.stats.lock().report();
        map.insert("edit".to_string(), serde_json::to_value(edit)?);
        // Where the resident memory is (benches/completion.rs reads it).
        if let Some(heap) = crate::allocator::heap_pages() {
            map.insert("heapBytes".to_string(), serde_json::to_value(heap)?);
        }
        // The embedded completion model's last request: how much of its
        // prompt came from the KV cache, and what warm-ups evaluated.
        let completion_model = models.get(&state.config().completion.model).ok();
        if let Some(local) = completion_model.and_then(|m| m.local_stats()) {
            map.insert(
                "localModel".to_string(),
                serde_json::json!({
                    "promptTokens": local.prompt_tokens,
                    "reusedTokens": local.reused_tokens,
                    "generatedTokens": local.generated_tokens,
                    "prefillMs": local.prefill.as_secs_f64() * 1000.0,
                    "firstTokenMs": local.first_token.as_secs_f64() * 1000.0,
                    "totalMs": local.total.as_secs_f64() * 1000.0,
                    "cancelledJobs": local.cancelled_jobs,
                    "warmedTokens": local.warmed_tokens,
                }),
            );
        }
    }
    Ok(report)
}
