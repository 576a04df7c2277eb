//! The embedded model: a GGUF file run in-process by llama.cpp on the CPU,
//! the default whenever no other model is configured. No server, no network.
//!
//! Inference runs on a dedicated thread per model (see [`engine`]), never on
//! the async runtime; results come back through a channel and dropping the
//! stream cancels generation at the next token.
pub mod catalog;
mod engine;
pub mod fetch;
pub mod fetch_parts;
mod fetch_work;
mod fit;
mod slots;
mod text;
mod tools;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::mpsc;

pub use engine::RequestStats;
use engine::{Engine, EngineKey, Job, Output, Prompt, PromptFn, Vocabulary};
use tools::{Parsed, ToolCallParser};

use super::fim::{self, FimOrder, FimPrompt};
use super::{
    ChatEvent, ChatRequest, ChatStream, FimRequest, GenOptions, Message, ModelError, Provider,
    Role, TextStream,
};
use crate::config::{FimTemplate, ModelConfig};

pub struct LocalProvider {
    name: String,
    config: ModelConfig,
    template: FimTemplate,
    engine: Arc<Engine>,
}

impl LocalProvider {
    pub fn new(name: &str, config: &ModelConfig) -> Result<Self, ModelError> {
        Self::in_lane(name, config, false)
    }

    /// `background`: on its own engine (thread, KV cache) at a lower CPU
    /// priority, for long work that must not hold up completions.
    pub fn in_lane(name: &str, config: &ModelConfig, background: bool) -> Result<Self, ModelError> {
        let path = weights_path(name, config)?;
        let key = EngineKey {
            path,
            context_tokens: config.context_tokens,
            threads: config.threads,
            background,
        };
        Ok(Self {
            name: name.to_string(),
            config: config.clone(),
            template: fim::resolve(config.fim_template, config.provider, name),
            engine: Engine::shared(name, key),
        })
    }

    /// Starts the prompt `prompt` builds and returns its output channel;
    /// `warm`: a warm-up's generation (no answer is read).
    fn submit(
        &self,
        prompt: PromptFn,
        options: &GenOptions,
        slot: Option<String>,
        warm: Option<u64>,
    ) -> mpsc::UnboundedReceiver<Result<Output, ModelError>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let limit = Duration::from_millis(self.config.total_timeout_ms);
        self.engine.submit(Job {
            prompt,
            max_tokens: options.max_tokens.unwrap_or(self.config.max_tokens),
            temperature: options.temperature.unwrap_or(self.config.temperature) as f32,
            deadline: Instant::now() + limit,
            limit,
            latency_target: options.latency_target,
            slot,
            warm,
            out: tx,
        });
        rx
    }
}

/// `messages` in ChatML (SmolLM2's chat format, and Qwen's), ending with
/// the assistant's turn opened. Tool results go back as Qwen2.5's template
/// sends them: in a user turn, each in `<tool_response>` (ChatML has no
/// `tool` role the model was trained on).
fn chatml(messages: &[Message], tools_section: Option<String>) -> String {
    let mut out = String::new();
    let mut system_done = false;
    let mut in_tool_turn = false;
    for m in messages {
        if m.role == Role::Tool {
            if !in_tool_turn {
                out.push_str("<|im_start|>user");
                in_tool_turn = true;
            }
            out.push_str(&format!(
                "\n<tool_response>\n{}\n</tool_response>",
                m.content
            ));
            continue;
        }
        if in_tool_turn {
            out.push_str("<|im_end|>\n");
            in_tool_turn = false;
        }
        let (role, mut content) = match m.role {
            Role::System => ("system", m.content.clone()),
            Role::Assistant => (
                "assistant",
                m.content.clone() + &tools::render_calls(&m.tool_calls),
            ),
            Role::User | Role::Tool => ("user", m.content.clone()),
        };
        if m.role == Role::System && !system_done {
            if let Some(t) = &tools_section {
                content = format!("{content}\n\n{t}");
            }
            system_done = true;
        }
        out.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
    }
    if in_tool_turn {
        out.push_str("<|im_end|>\n");
    }
    if !system_done {
        if let Some(t) = tools_section {
            out = format!("<|im_start|>system\n{t}<|im_end|>\n{out}");
        }
    }
    out.push_str("<|im_start|>assistant\n");
    out
}

impl Provider for LocalProvider {
    fn fim(&self, req: FimRequest) -> TextStream {
        let options = req.options.clone();
        let (prompt, slot) = self.fim_job(req);
        let rx = self.submit(prompt, &options, slot, None);
        Box::pin(tokio_stream_of(rx).filter_map(|item| async move {
            match item {
                Ok(Output::Text(t)) => Some(Ok(t)),
                Ok(Output::Done { .. }) => None,
                Err(e) => Some(Err(e)),
            }
        }))
    }

    fn chat(&self, req: ChatRequest) -> ChatStream {
        let tools_section = (!req.tools.is_empty()).then(|| tools::describe(&req.tools));
        let text = chatml(&req.messages, tools_section);
        // The messages were redacted before they reached a model.
        tracing::trace!(model = %self.name, prompt = %text, "local chat prompt");
        let mut stop = vec!["<|im_end|>".to_string(), "<|im_start|>".to_string()];
        stop.extend(req.options.stop.iter().cloned());
        let rx = self.submit(
            Box::new(move |_| Prompt {
                text,
                stop,
                body: None,
            }),
            &req.options,
            None,
            None,
        );
        let mut parser = ToolCallParser::new(&self.name);
        Box::pin(async_stream::stream! {
            let mut saw_call = false;
            let outputs = tokio_stream_of(rx);
            futures::pin_mut!(outputs);
            while let Some(item) = outputs.next().await {
                match item {
                    Ok(Output::Text(t)) => match parser.push(&t) {
                        Ok(parsed) => for p in parsed {
                            saw_call |= matches!(p, Parsed::Call(_));
                            yield Ok(event(p));
                        },
                        Err(e) => { yield Err(e); return; }
                    },
                    Ok(Output::Done { usage, reason }) => {
                        match parser.finish() {
                            Ok(Some(p)) => {
                                saw_call |= matches!(p, Parsed::Call(_));
                                yield Ok(event(p));
                            }
                            Ok(None) => {}
                            Err(e) => { yield Err(e); return; }
                        }
                        yield Ok(ChatEvent::Usage(usage));
                        let reason = if saw_call { super::StopReason::ToolUse } else { reason };
                        yield Ok(ChatEvent::Stop(reason));
                        return;
                    }
                    Err(e) => { yield Err(e); return; }
                }
            }
        })
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        self.engine.count_tokens(text)
    }

    fn local_stats(&self) -> Option<RequestStats> {
        self.engine.last_stats()
    }

    /// Two warm-ups, one after the other, in the same generation: the
    /// prompt fitted to the completion's latency target (what the request
    /// itself would evaluate, ready within that target), then fitted to
    /// [`WARM_TARGET_FACTOR`] times it. A warm-up has time (it yields to
    /// any request), and the request that follows finds its prompt cached,
    /// so it gets that much more context within the target. But only a
    /// complete warm-up becomes the file's cached prompt, and pauses are
    /// short: with the large one alone, a request 0.75 s after the cursor
    /// came to rest found nothing usable and evaluated its own ~55 tokens
    /// cold (0.4 s of a 0.6 s answer, 0.5B coder model, two cores). The
    /// small one is ready first, so such a request only decodes.
    fn warm(&self, req: FimRequest) {
        if !self.engine.is_loaded() {
            // Loading the weights is the first real request's business:
            // an editor that never asks for a completion never pays it.
            return;
        }
        let generation = self.engine.next_warm();
        let factors: &[u32] = match req.options.latency_target {
            Some(_) => &[1, WARM_TARGET_FACTOR],
            // No target: the whole prompt, once.
            None => &[1],
        };
        for &factor in factors {
            let mut req = req.clone();
            req.options.latency_target = req.options.latency_target.map(|t| t * factor);
            let options = req.options.clone();
            let (prompt, slot) = self.fim_job(req);
            // Nobody reads the answer: a warm-up has none.
            drop(self.submit(prompt, &options, slot, Some(generation)));
        }
    }

    fn cancel_warm(&self) {
        self.engine.next_warm();
    }
}

/// The larger warm-up's time budget, in completion latency targets
/// (4 × 0.4 s: ~180–230 tokens for SmolLM2-135M here, measured).
const WARM_TARGET_FACTOR: u32 = 4;

impl LocalProvider {
    /// A FIM request's prompt builder and its cached prompt's key: one per
    /// file (an untitled buffer shares one).
    fn fim_job(&self, req: FimRequest) -> (PromptFn, Option<String>) {
        let template = self.template;
        let auto = self.config.fim_template == FimTemplate::Auto;
        let name = self.name.clone();
        let slot = Some(format!("fim:{}", req.path.as_deref().unwrap_or("")));
        let prompt: PromptFn =
            Box::new(move |vocab| fim_prompt(&name, template, auto, &req, vocab));
        (prompt, slot)
    }
}

/// The FIM prompt for `req`. Suffix-first where the template allows: typing
/// then changes only the end of the prompt, and the KV cache keeps the rest.
/// With `auto`, a template whose markers this model's vocabulary lacks (as
/// SmolLM2, which has no FIM tokens) falls back to completing the prefix
/// (`none`) instead of feeding the markers to the model as text.
fn fim_prompt(
    name: &str,
    template: FimTemplate,
    auto: bool,
    req: &FimRequest,
    vocab: &Vocabulary<'_>,
) -> Prompt {
    let mut rendered = fim::render(template, req, FimOrder::Spm);
    if auto {
        let probe = fim::render(template, &FimRequest::default(), FimOrder::Psm);
        if let FimPrompt::Text(markers) = &probe.prompt {
            if !markers.is_empty() && !vocab.has_special_tokens(markers) {
                static ONCE: std::sync::Once = std::sync::Once::new();
                ONCE.call_once(|| {
                    tracing::info!(model = name, template = %template, "the model has no FIM tokens; completing the prefix only (fim_template = \"none\")");
                });
                rendered = fim::render(FimTemplate::None, req, FimOrder::Spm);
            }
        }
    }
    let prompt = match rendered.prompt {
        FimPrompt::Text(p) => p,
        // Nothing here lays out a separate suffix; complete the prefix.
        FimPrompt::Split { prompt, .. } => prompt,
        FimPrompt::Chat(messages) => chatml(&messages, None),
    };
    // The prefix is the trimmable body: every layout ends with it (SPM and
    // `none`), give or take a closing marker.
    let body = (!req.prefix.is_empty())
        .then(|| prompt.rfind(&req.prefix))
        .flatten()
        .map(|start| start..start + req.prefix.len());
    Prompt {
        text: prompt,
        stop: rendered.stop,
        body,
    }
}

fn event(p: Parsed) -> ChatEvent {
    match p {
        Parsed::Text(t) => ChatEvent::TextDelta(t),
        Parsed::Call(c) => ChatEvent::ToolCall(c),
    }
}

/// The receiver as a stream; it ends when the engine drops its sender.
fn tokio_stream_of<T: Send + 'static>(
    mut rx: mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Makes llama.cpp's OpenMP worker threads sleep when they wait, instead
/// of spinning (OpenMP's default). Spinning only pays on an idle machine:
/// beside any other busy process (a build, a second Fettle) the spinning
/// threads take the cores from the ones they wait for, and generation
/// slows by 4–5× (two servers completing at once on two cores: 55–68 s
/// against 12.5–15 s with sleeping threads; see docs/performance.md). A
/// user's own `OMP_WAIT_POLICY` is kept. Call first thing in `main`, while
/// the process has one thread (the environment is not thread-safe).
pub fn idle_threads_sleep() {
    if std::env::var_os("OMP_WAIT_POLICY").is_none() {
        std::env::set_var("OMP_WAIT_POLICY", "PASSIVE");
    }
}

/// Checks that the weights at `config`'s path exist and are GGUF, without
/// loading them (for `fettle doctor` and friendly errors).
pub fn check_weights(name: &str, config: &ModelConfig) -> Result<std::path::PathBuf, ModelError> {
    let path = weights_path(name, config)?;
    engine::check_weights(name, &path)?;
    Ok(path)
}

fn weights_path(name: &str, config: &ModelConfig) -> Result<std::path::PathBuf, ModelError> {
    config.expanded_path().ok_or_else(|| ModelError::Local {
        model: name.to_string(),
        reason: format!("models.{name}.path is not set"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;

    #[test]
    fn tool_results_go_back_in_one_user_turn_as_qwen_s_template_writes_them() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: serde_json::json!({"path": "a.py"}),
        };
        let messages = vec![
            Message::system("sys"),
            Message::user("fix it"),
            Message {
                tool_calls: vec![call("1"), call("2")],
                ..Message::assistant("")
            },
            Message::tool_result("1", "one"),
            Message::tool_result("2", "two"),
        ];
        let prompt = chatml(&messages, Some("TOOLS".into()));
        assert_eq!(
            prompt,
            "<|im_start|>system\nsys\n\nTOOLS<|im_end|>\n\
             <|im_start|>user\nfix it<|im_end|>\n\
             <|im_start|>assistant\n<tool_call>\n{\"arguments\":{\"path\":\"a.py\"},\"name\":\"read_file\"}\n</tool_call><tool_call>\n{\"arguments\":{\"path\":\"a.py\"},\"name\":\"read_file\"}\n</tool_call><|im_end|>\n\
             <|im_start|>user\n<tool_response>\none\n</tool_response>\n<tool_response>\ntwo\n</tool_response><|im_end|>\n\
             <|im_start|>assistant\n"
        );
        let tools = tools::describe(&[crate::model::ToolDef {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: serde_json::json!({"type": "object"}),
        }]);
        assert!(
            tools.contains("<tools>\n{\"function\":{\"description\":"),
            "{tools}"
        );
        assert!(tools.ends_with("</tool_call>"), "{tools}");
    }
}
