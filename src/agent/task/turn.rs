//! One model turn: stream the answer, collect text and tool calls, count
//! tokens, and stop at once on cancellation or the task's deadline.

use futures::StreamExt;
use serde_json::json;

use super::explain::StopCause;
use super::Task;
use crate::agent::types::EventKind;
use crate::model::{ChatEvent, ChatRequest, GenOptions, ModelError, Role, ToolCall};

pub struct Turn {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// Set when the answer was malformed but the model can retry (e.g. a
    /// tool call whose arguments are not JSON): what to tell it.
    pub note: Option<String>,
}

/// Output tokens one turn may use.
const TURN_MAX_TOKENS: u32 = 4096;
/// The same for the embedded model: a tool call or a short summary fits, and
/// a small model that starts rambling is stopped within seconds, not minutes.
const LOCAL_TURN_MAX_TOKENS: usize = 768;

/// The least room left for an answer before old observations are elided.
const MIN_ANSWER_TOKENS: usize = 512;
/// What replaces an elided observation.
const ELIDED: &str = "[elided to fit the model's context]";

impl Task {
    pub(super) async fn model_turn(&mut self) -> Result<Turn, StopCause> {
        let tools = match self.compact_prompt() {
            true => super::tools::compact_definitions(),
            false => super::tools::definitions(),
        };
        let max_tokens = self.fit_context(&tools);
        let max_tokens = [self.answer_cap, self.approach_cap]
            .into_iter()
            .flatten()
            .fold(max_tokens, u32::min);
        let request = ChatRequest {
            messages: self.messages.clone(),
            tools,
            options: GenOptions {
                max_tokens: Some(max_tokens),
                temperature: Some(self.temperature()),
                stop: Vec::new(),
                latency_target: None,
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

/// The temperature after an attempt that changed nothing: at 0 the model
/// would give the same answer again.
const RETRY_TEMPERATURE: f64 = 0.7;
/// The temperature for asking again after an answer that repeated the
/// code as it is: at 0.7 the 1.5B model repeated it four times in a row.
const SAME_CODE_TEMPERATURE: f64 = 1.0;

impl Task {
    /// Greedy while attempts change something; sampled after one that did
    /// not (the same prompt at temperature 0 repeats the same answer). A
    /// fresh attempt (the compact prompt) is sampled after the first: each
    /// starts from nearly the same prompt, and greedily a small model gave
    /// the same wrong function six attempts in a row.
    fn temperature(&self) -> f64 {
        if self.same_code_again > 0 {
            return SAME_CODE_TEMPERATURE;
        }
        if let Some(drafting) = self.drafting_temperature() {
            return drafting;
        }
        self.single_line_temperature()
    }

    /// The temperature of a line of attempts (and of a first candidate).
    pub(super) fn single_line_temperature(&self) -> f64 {
        let fresh_retry = self.compact_prompt() && self.iterations > 1;
        match self.unchanged_attempts {
            0 if !fresh_retry => 0.0,
            _ => RETRY_TEMPERATURE,
        }
    }

    /// Whether the model gets the compact prompt (short, three tools, each
    /// attempt afresh): `agent.prompt`, by default for a model that runs
    /// in-process (small, slow to prefill).
    pub(super) fn compact_prompt(&self) -> bool {
        match self.spec.prompt {
            crate::config::AgentPrompt::Compact => true,
            crate::config::AgentPrompt::Full => false,
            crate::config::AgentPrompt::Auto => {
                self.model.config().provider == crate::config::Provider::Local
            }
        }
    }

    /// For a model with a known context window (the embedded one), elides
    /// the oldest messages until the conversation leaves room for an
    /// answer, and sizes the answer to what is left. Remote models have
    /// windows far larger than a task's turns; they get the full answer size.
    fn fit_context(&mut self, tools: &[crate::model::ToolDef]) -> u32 {
        let config = self.model.config();
        if config.provider != crate::config::Provider::Local {
            return TURN_MAX_TOKENS;
        }
        let window = config.context_tokens as usize;
        let tool_tokens = self
            .model
            .count_tokens(&serde_json::to_string(tools).unwrap_or_default());
        // The chat template, role markers and tool schema rendering add to the
        // raw text; count generously so the engine never rejects the prompt.
        let cost = |text: &str| self.model.count_tokens(text) * 115 / 100 + 12;
        let mut used = tool_tokens * 115 / 100
            + 200
            + self
                .messages
                .iter()
                .map(|m| cost(&m.content))
                .sum::<usize>();
        // What may go, oldest first: tool outputs, then the model's earlier
        // words, then earlier feedback. Never the system prompt, the task
        // message, or the last two messages (the exchange in progress).
        let keep_from = self.messages.len().saturating_sub(2);
        for pass in [Role::Tool, Role::Assistant, Role::User] {
            for i in 0..keep_from {
                if used + MIN_ANSWER_TOKENS <= window {
                    break;
                }
                let message = &self.messages[i];
                let first_user =
                    pass == Role::User && !self.messages[..i].iter().any(|m| m.role == Role::User);
                if message.role != pass || first_user || message.content == ELIDED {
                    continue;
                }
                used = used.saturating_sub(cost(&message.content)) + cost(ELIDED);
                self.messages[i].content = ELIDED.to_owned();
            }
        }
        window.saturating_sub(used).clamp(64, LOCAL_TURN_MAX_TOKENS) as u32
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

impl Task {
    /// A turn outside the conversation, in words only (no tools), at
    /// `temperature` (greedy but for a plan asked again after it came back
    /// unchanged): the plan, the review. Redacted like every prompt; tokens counted;
    /// stops at cancellation and the deadline. `Err` says why there is no
    /// answer.
    pub(super) async fn words_only_turn(
        &mut self,
        model: &crate::model::Model,
        mut messages: Vec<crate::model::Message>,
        max_tokens: u32,
        temperature: f64,
    ) -> Result<String, String> {
        for m in &mut messages {
            // Nothing secret leaves the machine, these turns included.
            if let std::borrow::Cow::Owned(redacted) = self.redactor.redact(&m.content) {
                m.content = redacted;
            }
        }
        let request = ChatRequest {
            messages,
            tools: Vec::new(),
            options: GenOptions {
                max_tokens: Some(max_tokens),
                temperature: Some(temperature),
                stop: Vec::new(),
                latency_target: None,
            },
        };
        let mut stream = model.chat(request);
        let mut text = String::new();
        let deadline = self.deadline();
        loop {
            let next = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err("the task was cancelled".to_owned()),
                () = tokio::time::sleep_until(deadline) => return Err("the task's time ran out".to_owned()),
                next = stream.next() => next,
            };
            match next {
                None => return Ok(text),
                Some(Ok(ChatEvent::TextDelta(delta))) => text.push_str(&delta),
                Some(Ok(ChatEvent::Usage(u))) => {
                    self.tokens.input += u.input_tokens;
                    self.tokens.output += u.output_tokens;
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(format!("the model failed: {err}")),
            }
        }
    }
}
