//! Mistral: fill-in-the-middle at Codestral's `/fim/completions` (prompt and
//! suffix sent apart; the stream is chat-shaped), chat at
//! `/chat/completions` (OpenAI-compatible, tool calls included).
use super::openai_wire::{self, Sampling};
use super::stream;
use crate::config::{FimTemplate, ModelConfig, Provider as ProviderKind};
use crate::model::fim::{self, FimOrder, FimPrompt};
use crate::model::http::Endpoint;
use crate::model::{ChatRequest, ChatStream, FimRequest, ModelError, Provider, TextStream};

/// Mistral reports usage in its last chunk unasked, and `stream_options` is
/// not part of its API, so it is not sent.
const INCLUDE_USAGE: bool = false;

pub(crate) struct Mistral {
    endpoint: Endpoint,
    config: ModelConfig,
    /// The model name sent to the server (the model's own name when unset).
    model: String,
    template: FimTemplate,
}

impl Mistral {
    pub fn new(name: &str, config: &ModelConfig) -> Result<Self, ModelError> {
        let model = config.model.clone().unwrap_or_else(|| name.to_string());
        Ok(Self {
            endpoint: Endpoint::from_config(name, config)?,
            template: fim::resolve(config.fim_template, ProviderKind::Mistral, &model),
            config: config.clone(),
            model,
        })
    }
}

impl Provider for Mistral {
    fn fim(&self, req: FimRequest) -> TextStream {
        // `/fim/completions` lays the prompt out itself, so every template
        // but `chat` and `none` (a plain continuation) sends it apart.
        let template = match self.template {
            FimTemplate::Chat | FimTemplate::None => self.template,
            _ => FimTemplate::Suffix,
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
                    INCLUDE_USAGE,
                    extra,
                );
                ("/chat/completions", body)
            }
            // The snippets are already in the prompt part.
            FimPrompt::Split { prompt, suffix } => {
                let body =
                    openai_wire::prompt_body(&self.model, prompt, Some(suffix), &sampling, extra);
                ("/fim/completions", body)
            }
            FimPrompt::Text(prompt) => {
                let body = openai_wire::prompt_body(&self.model, prompt, None, &sampling, extra);
                ("/fim/completions", body)
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
            INCLUDE_USAGE,
            &self.config.extra_body,
        );
        let url = self.endpoint.url("/chat/completions");
        openai_wire::chat_stream(self.endpoint.clone(), url, body)
    }
}
