//! OpenAI and OpenAI-compatible servers (vLLM, LM Studio, OpenRouter, ...):
//! chat at `/chat/completions`, fill-in-the-middle at `/completions` (with
//! the prompt rendered by the FIM template) or through chat for models
//! without FIM.
use super::openai_wire::{self, Sampling};
use super::stream;
use crate::config::{FimTemplate, ModelConfig, Provider as ProviderKind};
use crate::model::fim::{self, FimOrder, FimPrompt};
use crate::model::http::Endpoint;
use crate::model::{ChatRequest, ChatStream, FimRequest, ModelError, Provider, TextStream};

pub(crate) struct OpenAi {
    endpoint: Endpoint,
    config: ModelConfig,
    /// The model name sent to the server (the model's own name when unset).
    model: String,
    template: FimTemplate,
}

impl OpenAi {
    pub fn new(name: &str, config: &ModelConfig) -> Result<Self, ModelError> {
        let model = config.model.clone().unwrap_or_else(|| name.to_string());
        Ok(Self {
            endpoint: Endpoint::from_config(name, config)?,
            template: fim::resolve(config.fim_template, ProviderKind::OpenAi, &model),
            config: config.clone(),
            model,
        })
    }
}

impl Provider for OpenAi {
    fn fim(&self, req: FimRequest) -> TextStream {
        let rendered = fim::render(self.template, &req, FimOrder::Psm);
        let sampling = Sampling::new(&self.config, &req.options, rendered.stop);
        let (path, body) = match rendered.prompt {
            FimPrompt::Chat(messages) => {
                let body = openai_wire::chat_body(
                    Some(&self.model),
                    &messages,
                    &[],
                    &sampling,
                    true,
                    &self.config.extra_body,
                );
                ("/chat/completions", body)
            }
            FimPrompt::Text(prompt) => {
                let extra = &self.config.extra_body;
                let body = openai_wire::prompt_body(&self.model, prompt, None, &sampling, extra);
                ("/completions", body)
            }
            FimPrompt::Split { prompt, suffix } => {
                let extra = &self.config.extra_body;
                let body =
                    openai_wire::prompt_body(&self.model, prompt, Some(suffix), &sampling, extra);
                ("/completions", body)
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
            true,
            &self.config.extra_body,
        );
        let url = self.endpoint.url("/chat/completions");
        openai_wire::chat_stream(self.endpoint.clone(), url, body)
    }
}
