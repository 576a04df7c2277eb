//! Talking to models: one provider-neutral interface ([`Provider`]) with two
//! capabilities, fill-in-the-middle and chat, both streamed; the providers
//! (remote servers over HTTP, and the embedded llama.cpp model); FIM prompt
//! templates; token counting and budgets.
//!
//! Knows nothing about LSP: callers hand in text and get text back.
mod error;
pub mod fim;
pub mod health;
pub(crate) mod http;
pub mod local;
mod provider;
mod providers;
pub mod timing;
pub mod tokens;
mod types;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use error::ModelError;
pub use provider::Provider;
pub use types::{
    ChatEvent, ChatRequest, ChatStream, FimRequest, GenOptions, Message, Role, Snippet, StopReason,
    TextStream, ToolCall, ToolDef, Usage,
};

use crate::config::{Config, FimTemplate, ModelConfig, Provider as ProviderKind};

/// `text` cut to about `max` bytes for a one-line display.
pub fn shorten_for_display(text: &str, max: usize) -> String {
    error::shorten(text.trim(), max)
}

/// One configured model, ready to use.
#[derive(Clone)]
pub struct Model {
    name: String,
    config: ModelConfig,
    template: FimTemplate,
    provider: Arc<dyn Provider>,
    /// Bounds every request (see [`Model::with_deadline`]).
    deadline: Option<Duration>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("name", &self.name)
            .field("provider", &self.config.provider)
            .field("template", &self.template)
            .finish()
    }
}

impl Model {
    /// Builds the model `name` from its configuration. Remote models only
    /// check their URL here and read their key; the local model's weights
    /// load on first use, on the inference thread.
    pub fn new(name: &str, config: &ModelConfig) -> Result<Self, ModelError> {
        Self::build(name, config, false)
    }

    /// The same model for long background work (the agent): a local model
    /// gets its own engine at a lower priority, so completions never wait
    /// behind an agent turn; remote models are the same as [`Model::new`].
    pub fn new_background(name: &str, config: &ModelConfig) -> Result<Self, ModelError> {
        Self::build(name, config, true)
    }

    fn build(name: &str, config: &ModelConfig, background: bool) -> Result<Self, ModelError> {
        let template = fim::resolve(
            config.fim_template,
            config.provider,
            config.model.as_deref().unwrap_or(name),
        );
        let provider: Arc<dyn Provider> = match config.provider {
            ProviderKind::Local => {
                Arc::new(local::LocalProvider::in_lane(name, config, background)?)
            }
            ProviderKind::OpenAi => Arc::new(providers::openai::OpenAi::new(
                name,
                config,
                &providers::openai::OPENAI,
            )?),
            ProviderKind::Anthropic => {
                Arc::new(providers::anthropic::Anthropic::new(name, config)?)
            }
            ProviderKind::Ollama => Arc::new(providers::ollama::Ollama::new(name, config)?),
            ProviderKind::Mistral => Arc::new(providers::openai::OpenAi::new(
                name,
                config,
                &providers::mistral::MISTRAL,
            )?),
            ProviderKind::LlamaCpp => Arc::new(providers::llamacpp::LlamaCpp::new(name, config)?),
        };
        Ok(Self {
            name: name.to_string(),
            config: config.clone(),
            template,
            provider,
            deadline: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }
    /// The FIM template in use (`auto` already resolved).
    pub fn fim_template(&self) -> FimTemplate {
        self.template
    }
    pub fn fim(&self, req: FimRequest) -> TextStream {
        match self.deadline {
            Some(deadline) => self.fim_within(req, deadline),
            None => self.provider.fim(req),
        }
    }
    /// Lets a stream whose answer is no longer needed (a single-line
    /// completion has its line) run to its end in the background for a
    /// moment, so its HTTP/1.1 connection goes back to the pool instead of
    /// being closed: the next completion then skips a connect, and over
    /// HTTPS a TLS handshake. A server still generating when the moment is
    /// up is stopped by closing (what dropping the stream did at once
    /// before): briefly on plain HTTP (a local server's one slot should
    /// not spend long on text nobody reads; reconnecting costs little),
    /// longer over HTTPS (a hosted model generates in parallel, and a new
    /// handshake costs the next request tens of milliseconds). The embedded
    /// model is stopped at once.
    pub fn release(&self, mut stream: TextStream) {
        let grace = match self.config.provider {
            ProviderKind::Local => return,
            _ if self
                .config
                .effective_base_url()
                .is_some_and(|u| u.starts_with("https:")) =>
            {
                Duration::from_secs(2)
            }
            _ => Duration::from_millis(20),
        };
        tokio::spawn(async move {
            let drained = async { while futures::StreamExt::next(&mut stream).await.is_some() {} };
            let _ = tokio::time::timeout(grace, drained).await;
        });
    }
    /// This model with every request (`fim` and `chat`) bounded by
    /// `deadline` (see [`Model::fim_within`]); `None`: only the model's own
    /// limits. Completions use it; the agent does not.
    pub fn with_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.deadline = deadline;
        self
    }
    /// [`Model::fim`] within `deadline` from the first poll, retries
    /// included: a retry that cannot fit gives up at once, and at the
    /// deadline the stream ends with [`ModelError::DeadlineExceeded`].
    pub fn fim_within(&self, req: FimRequest, deadline: Duration) -> TextStream {
        health::bounded(&self.name, deadline, self.provider.fim(req))
    }
    pub fn chat(&self, req: ChatRequest) -> ChatStream {
        match self.deadline {
            Some(deadline) => health::bounded(&self.name, deadline, self.provider.chat(req)),
            None => self.provider.chat(req),
        }
    }
    /// The embedded model's counters for its last request; `None` for
    /// remote models.
    pub fn local_stats(&self) -> Option<local::RequestStats> {
        self.provider.local_stats()
    }
    /// Prefills `req`'s prompt in the background (see [`Provider::warm`]).
    pub fn warm(&self, req: FimRequest) {
        self.provider.warm(req)
    }
    /// Gives up the warm-ups in progress (see [`Provider::cancel_warm`]).
    pub fn cancel_warm(&self) {
        self.provider.cancel_warm()
    }
    /// Tokens in `text`: the model's own tokenizer where Fettle has it, the
    /// calibrated estimate otherwise.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.provider
            .count_tokens(text)
            .unwrap_or_else(|| tokens::estimate(text))
    }
}

/// The configured models by name. Building is cheap; rebuild on each
/// configuration change (the local runtime is shared across rebuilds as
/// long as its path and settings stay the same).
#[derive(Clone, Debug, Default)]
pub struct Models {
    models: BTreeMap<String, Result<Model, ModelError>>,
}

impl Models {
    pub fn from_config(config: &Config) -> Self {
        let models = config
            .models
            .iter()
            .map(|(name, cfg)| (name.clone(), Model::new(name, cfg)))
            .collect();
        Self { models }
    }

    /// The model `name`, or why it cannot be used.
    pub fn get(&self, name: &str) -> Result<Model, ModelError> {
        match self.models.get(name) {
            Some(Ok(model)) => Ok(model.clone()),
            Some(Err(e)) => Err(e.clone()),
            None => Err(ModelError::UnknownModel {
                name: name.to_string(),
                known: self.models.keys().cloned().collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// Gives up model `name`'s warm-ups, if it has any (see
    /// [`Provider::cancel_warm`]). Borrows: it runs on every keystroke.
    pub fn cancel_warm(&self, name: &str) {
        if let Some(Ok(model)) = self.models.get(name) {
            model.cancel_warm();
        }
    }

    /// Opens a connection to model `name`'s server if none was used lately
    /// (see [`Provider::preconnect`]). Borrows: it runs on every keystroke.
    pub fn preconnect(&self, name: &str) {
        if let Some(Ok(model)) = self.models.get(name) {
            model.provider.preconnect();
        }
    }

    /// [`Models::get`] for long background work: see [`Model::new_background`].
    pub fn get_background(&self, name: &str) -> Result<Model, ModelError> {
        let model = self.get(name)?;
        if model.config.provider == ProviderKind::Local {
            return Model::new_background(name, &model.config);
        }
        Ok(model)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }
}
