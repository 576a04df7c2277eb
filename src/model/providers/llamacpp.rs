//! llama.cpp's `llama-server`: fill-in-the-middle at `/infill` (the server
//! applies its model's own FIM tokens, and takes the snippets as
//! `input_extra`), or at `/completion` with a prompt rendered by an
//! explicitly configured template; chat at `/v1/chat/completions`
//! (OpenAI-compatible). The server serves the model it was started with,
//! so `model` is sent only when configured.
use futures::stream::BoxStream;
use serde_json::{json, Map, Value};

use super::openai_wire::{self, Sampling};
use super::stream;
use crate::config::{FimTemplate, ModelConfig, Provider as ProviderKind};
use crate::model::fim::{self, FimOrder, FimPrompt};
use crate::model::http::{merge_extra_body, Endpoint, Response, SseEvent};
use crate::model::{
    ChatRequest, ChatStream, FimRequest, ModelError, Provider, Snippet, TextStream,
};

pub(crate) struct LlamaCpp {
    endpoint: Endpoint,
    config: ModelConfig,
    template: FimTemplate,
}

impl LlamaCpp {
    pub fn new(name: &str, config: &ModelConfig) -> Result<Self, ModelError> {
        let model = config.model.as_deref().unwrap_or(name);
        Ok(Self {
            endpoint: Endpoint::from_config(name, config)?,
            template: fim::resolve(config.fim_template, ProviderKind::LlamaCpp, model),
            config: config.clone(),
        })
    }

    /// `auto` (and `suffix`) leave the layout to the server's `/infill`,
    /// which knows its model's FIM tokens better than a guess from a name.
    fn server_templates(&self) -> bool {
        matches!(
            self.config.fim_template,
            FimTemplate::Auto | FimTemplate::Suffix
        )
    }

    /// The common fields of `/infill` and `/completion`.
    fn native_body(&self, mut body: Map<String, Value>, sampling: &Sampling) -> Value {
        if let Some(model) = &self.config.model {
            body.insert("model".into(), json!(model));
        }
        sampling.apply(&mut body, "n_predict");
        body.insert("stream".into(), json!(true));
        body.insert("cache_prompt".into(), json!(true));
        let mut body = Value::Object(body);
        merge_extra_body(&mut body, &self.config.extra_body);
        body
    }

    fn infill_body(&self, req: &FimRequest, sampling: &Sampling) -> Value {
        let mut body = Map::new();
        body.insert("input_prefix".into(), json!(req.prefix));
        body.insert("input_suffix".into(), json!(req.suffix));
        body.insert("input_extra".into(), input_extra(&req.snippets));
        body.insert("prompt".into(), json!(""));
        self.native_body(body, sampling)
    }
}

impl Provider for LlamaCpp {
    fn preconnect(&self) {
        self.endpoint.preconnect();
    }
    fn fim(&self, req: FimRequest) -> TextStream {
        if self.server_templates() {
            let sampling = Sampling::new(&self.config, &req.options, req.options.stop.clone());
            let body = self.infill_body(&req, &sampling);
            let url = self.endpoint.url("/infill");
            return native_stream(self.endpoint.clone(), url, body);
        }
        let rendered = fim::render(self.template, &req, FimOrder::Psm);
        let sampling = Sampling::new(&self.config, &req.options, rendered.stop);
        match rendered.prompt {
            FimPrompt::Text(prompt) => {
                let mut body = Map::new();
                body.insert("prompt".into(), json!(prompt));
                let body = self.native_body(body, &sampling);
                let url = self.endpoint.url("/completion");
                native_stream(self.endpoint.clone(), url, body)
            }
            FimPrompt::Split { .. } => {
                let body = self.infill_body(&req, &sampling);
                let url = self.endpoint.url("/infill");
                native_stream(self.endpoint.clone(), url, body)
            }
            FimPrompt::Chat(messages) => {
                let body = openai_wire::chat_body(
                    self.config.model.as_deref(),
                    &messages,
                    &[],
                    &sampling,
                    true,
                    &self.config.extra_body,
                );
                let url = self.endpoint.url("/v1/chat/completions");
                stream::text_only(openai_wire::chat_stream(self.endpoint.clone(), url, body))
            }
        }
    }

    fn chat(&self, req: ChatRequest) -> ChatStream {
        let sampling = Sampling::new(&self.config, &req.options, req.options.stop.clone());
        let body = openai_wire::chat_body(
            self.config.model.as_deref(),
            &req.messages,
            &req.tools,
            &sampling,
            true,
            &self.config.extra_body,
        );
        let url = self.endpoint.url("/v1/chat/completions");
        openai_wire::chat_stream(self.endpoint.clone(), url, body)
    }
}

fn input_extra(snippets: &[Snippet]) -> Value {
    snippets
        .iter()
        .map(|s| json!({ "filename": s.path, "text": s.text }))
        .collect()
}

/// POSTs to `/infill` or `/completion` and streams the text. Lazy; dropping
/// the stream aborts the request.
fn native_stream(endpoint: Endpoint, url: String, body: Value) -> TextStream {
    let decoder = NativeDecoder::new(&endpoint.name, &url);
    let headers = openai_wire::headers(&endpoint);
    stream::request(endpoint, url, headers, body, decoder)
}

/// Decodes llama-server's native stream: `{"content": "...", "stop": false}`
/// events, the last with `"stop": true`.
#[derive(Debug)]
struct NativeDecoder {
    model: String,
    url: String,
    stopped: bool,
}

impl NativeDecoder {
    fn new(model: &str, url: &str) -> Self {
        Self {
            model: model.to_string(),
            url: url.to_string(),
            stopped: false,
        }
    }

    /// The text of one event, if it has any.
    fn feed(&mut self, data: &str) -> Result<Option<String>, ModelError> {
        let data = data.trim();
        if self.stopped || data.is_empty() {
            return Ok(None);
        }
        if data == "[DONE]" {
            self.stopped = true;
            return Ok(None);
        }
        let chunk = openai_wire::parse_object(&self.model, &self.url, data)?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(openai_wire::stream_error(&self.model, &self.url, error));
        }
        let content = chunk.get("content").and_then(Value::as_str);
        let stop = chunk.get("stop").and_then(Value::as_bool);
        if content.is_none() && stop.is_none() {
            return Err(ModelError::UnknownEvent {
                model: self.model.clone(),
                url: self.url.clone(),
                event: crate::model::error::shorten(data, 120),
            });
        }
        self.stopped = stop == Some(true);
        Ok(content.filter(|c| !c.is_empty()).map(str::to_string))
    }
}

impl stream::Decode for NativeDecoder {
    type Frame = SseEvent;
    type Item = String;
    fn frames(response: Response) -> BoxStream<'static, Result<SseEvent, ModelError>> {
        stream::sse(response)
    }
    fn decode(&mut self, frame: SseEvent) -> Result<Vec<String>, ModelError> {
        Ok(self.feed(&frame.data)?.into_iter().collect())
    }
    fn done(&self) -> bool {
        self.stopped
    }
    fn truncated(&self) -> ModelError {
        ModelError::TruncatedStream {
            model: self.model.clone(),
            url: self.url.clone(),
            reason: "the stream ended before an event with \"stop\": true".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn provider(extra: Map<String, Value>, model: Option<&str>) -> LlamaCpp {
        let mut cfg = ModelConfig::new(ProviderKind::LlamaCpp);
        cfg.model = model.map(str::to_string);
        cfg.extra_body = extra;
        LlamaCpp::new("local-server", &cfg).unwrap()
    }

    #[test]
    fn infill_body_fields() {
        let mut extra = Map::new();
        extra.insert("top_k".into(), json!(20));
        let p = provider(extra, None);
        let req = FimRequest {
            prefix: "fn main() {".into(),
            suffix: "}".into(),
            snippets: vec![Snippet {
                path: "src/lib.rs".into(),
                text: "pub fn x() {}".into(),
            }],
            ..Default::default()
        };
        let sampling = Sampling {
            max_tokens: 50,
            temperature: 0.3,
            stop: vec!["\n".into()],
        };
        assert_eq!(
            p.infill_body(&req, &sampling),
            json!({
                "input_prefix": "fn main() {", "input_suffix": "}",
                "input_extra": [{"filename": "src/lib.rs", "text": "pub fn x() {}"}],
                "prompt": "", "n_predict": 50, "temperature": 0.3, "stop": ["\n"],
                "stream": true, "cache_prompt": true, "top_k": 20,
            })
        );
        let p = provider(Map::new(), Some("qwen"));
        assert_eq!(p.infill_body(&req, &sampling)["model"], json!("qwen"));
    }

    #[test]
    fn native_decoder() {
        let mut d = NativeDecoder::new("m", "u");
        assert_eq!(
            d.feed(r#"{"content":"ab","stop":false}"#)
                .unwrap()
                .as_deref(),
            Some("ab")
        );
        assert_eq!(d.feed(r#"{"content":"","stop":false}"#).unwrap(), None);
        assert!(stream::Decode::finish(&mut d).is_err());
        assert_eq!(
            d.feed(r#"{"content":"c","stop":true}"#).unwrap().as_deref(),
            Some("c")
        );
        assert!(d.stopped);
        assert!(stream::Decode::finish(&mut d).is_ok());

        let mut d = NativeDecoder::new("m", "u");
        assert!(matches!(
            d.feed("{oops"),
            Err(ModelError::MalformedResponse { .. })
        ));
        assert!(matches!(
            d.feed(r#"{"hello":1}"#),
            Err(ModelError::UnknownEvent { .. })
        ));
        let err = d
            .feed(r#"{"error":{"code":500,"message":"slot busy"}}"#)
            .unwrap_err();
        assert!(err.to_string().contains("slot busy"), "{err}");
        let err = stream::Decode::finish(&mut d).unwrap_err();
        assert!(matches!(err, ModelError::TruncatedStream { .. }), "{err}");
    }
}
