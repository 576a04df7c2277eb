//! OpenAI and the servers that speak its wire with a dialect of their own:
//! chat at `/chat/completions`, fill-in-the-middle at the dialect's FIM
//! path (OpenAI-compatible servers — vLLM, LM Studio, OpenRouter, … — at
//! `/completions` with the prompt rendered by the FIM template; Mistral at
//! `/fim/completions`, see `mistral.rs`) or through chat for models without
//! FIM.
use super::openai_wire::{self, Sampling};
use super::stream;
use crate::config::{FimTemplate, ModelConfig, Provider as ProviderKind};
use crate::model::fim::{self, FimOrder, FimPrompt};
use crate::model::http::Endpoint;
use crate::model::{ChatRequest, ChatStream, FimRequest, ModelError, Provider, TextStream};

/// What differs between servers on the OpenAI wire.
pub(crate) struct Dialect {
    pub(crate) provider: ProviderKind,
    /// Where FIM prompts (not chat-shaped ones) go.
    pub(crate) fim_path: &'static str,
    /// Whether to ask for usage in the last chunk (`stream_options`).
    pub(crate) include_usage: bool,
    /// The server lays a FIM prompt out itself, so every template but
    /// `chat` and `none` (a plain continuation) sends prefix and suffix apart.
    pub(crate) lays_out_fim: bool,
}

pub(crate) const OPENAI: Dialect = Dialect {
    provider: ProviderKind::OpenAi,
    fim_path: "/completions",
    include_usage: true,
    lays_out_fim: false,
};

pub(crate) struct OpenAi {
    endpoint: Endpoint,
    config: ModelConfig,
    dialect: &'static Dialect,
    /// The model name sent to the server (the model's own name when unset).
    model: String,
    template: FimTemplate,
}

impl OpenAi {
    pub fn new(
        name: &str,
        config: &ModelConfig,
        dialect: &'static Dialect,
    ) -> Result<Self, ModelError> {
        let model = config.model.clone().unwrap_or_else(|| name.to_string());
        Ok(Self {
            endpoint: Endpoint::from_config(name, config)?,
            template: fim::resolve(config.fim_template, dialect.provider, &model),
            config: config.clone(),
            dialect,
            model,
        })
    }
}

impl Provider for OpenAi {
    fn preconnect(&self) {
        self.endpoint.preconnect();
    }
    fn fim(&self, req: FimRequest) -> TextStream {
        let template = match self.template {
            FimTemplate::Chat | FimTemplate::None => self.template,
            _ if self.dialect.lays_out_fim => FimTemplate::Suffix,
            other => other,
        };
        let rendered = fim::render(template, &req, FimOrder::Psm);
        let sampling = Sampling::new(&self.config, &req.options, rendered.stop);
        let extra = &self.config.extra_body;
        let (path, body) = match rendered.prompt {
            FimPrompt::Chat(messages) => {
                let body = openai_wire::chat_body(
                    Some(&self.model),
                    &messages,
                    &[],
                    &sampling,
                    self.dialect.include_usage,
                    extra,
                );
                ("/chat/completions", body)
            }
            FimPrompt::Text(prompt) => {
                let body = openai_wire::prompt_body(&self.model, prompt, None, &sampling, extra);
                (self.dialect.fim_path, body)
            }
            // The snippets are already in the prompt part.
            FimPrompt::Split { prompt, suffix } => {
                let body =
                    openai_wire::prompt_body(&self.model, prompt, Some(suffix), &sampling, extra);
                (self.dialect.fim_path, body)
            }
        };
        let url = self.endpoint.url(path);
        stream::text_only(openai_wire::chat_stream(self.endpoint.clone(), url, body))
    }

    fn chat(&self, req: ChatRequest) -> ChatStream {
        let sampling = Sampling::new(&self.config, &req.options, req.options.stop.clone());
        let body = openai_wire::chat_body(
            Some(&self.model),
            &req.messages,
            &req.tools,
            &sampling,
            self.dialect.include_usage,
            &self.config.extra_body,
        );
        let url = self.endpoint.url("/chat/completions");
        openai_wire::chat_stream(self.endpoint.clone(), url, body)
    }
}
