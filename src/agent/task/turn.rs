//! One model turn: stream the answer, collect text and tool calls, count
//! tokens, and stop at once on cancellation or the task's deadline.

use futures::StreamExt;
use serde_json::json;

use super::explain::StopCause;
use super::Task;
use crate::agent::types::EventKind;
use crate::model::{ChatEvent, ChatRequest, GenOptions, ModelError, ToolCall};

pub struct Turn {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// Set when the answer was malformed but the model can retry (e.g. a
    /// tool call whose arguments are not JSON): what to tell it.
    pub note: Option<String>,
}

/// Output tokens one turn may use.
const TURN_MAX_TOKENS: u32 = 4096;

impl Task {
    pub(super) async fn model_turn(&mut self) -> Result<Turn, StopCause> {
        let request = ChatRequest {
            messages: self.messages.clone(),
            tools: super::tools::definitions(),
            options: GenOptions {
                max_tokens: Some(TURN_MAX_TOKENS),
                temperature: Some(0.0),
                stop: Vec::new(),
            },
        };
        let input_estimate: u64 = self
            .messages
            .iter()
            .map(|m| crate::model::tokens::estimate(&m.content) as u64)
            .sum();
        let mut stream = self.model.chat(request);
        let mut turn = Turn {
            text: String::new(),
            tool_calls: Vec::new(),
            note: None,
        };
        let mut usage = None;
        let deadline = self.deadline();
        loop {
            let next = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err(StopCause::Cancelled),
                () = tokio::time::sleep_until(deadline) => return Err(StopCause::Timeout),
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Ok(ChatEvent::TextDelta(delta))) => turn.text.push_str(&delta),
                Some(Ok(ChatEvent::ToolCall(call))) => turn.tool_calls.push(call),
                Some(Ok(ChatEvent::Usage(u))) => usage = Some(u),
                Some(Ok(ChatEvent::Stop(_))) => {}
                Some(Err(err)) => {
                    if let Some(note) = retryable_note(&err) {
                        turn.note = Some(note);
                        break;
                    }
                    return Err(StopCause::Model(err.to_string()));
                }
            }
        }
        let (input, output) = match usage {
            Some(u) if u.input_tokens + u.output_tokens > 0 => (u.input_tokens, u.output_tokens),
            _ => (
                input_estimate,
                crate::model::tokens::estimate(&turn.text) as u64
                    + 20 * turn.tool_calls.len() as u64,
            ),
        };
        self.tokens.input += input;
        self.tokens.output += output;
        if !turn.text.trim().is_empty() {
            self.event(EventKind::Text, turn.text.clone(), json!({}));
        }
        Ok(turn)
    }
}

/// Errors that are the model's answer being malformed (not the model being
/// unreachable): the model gets another try with this note.
fn retryable_note(err: &ModelError) -> Option<String> {
    matches!(err, ModelError::BadToolArguments { .. }).then(|| {
        format!(
            "Your last answer could not be used: {err}. Send the tool call again with valid JSON arguments."
        )
    })
}
