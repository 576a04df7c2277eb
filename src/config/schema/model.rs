//! `[models.NAME]`: one model — its provider, endpoint, key, limits and,
//! for the embedded engine, its weights and context.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{
    FimTemplate, Provider, CODER_CONTEXT_TOKENS, CODER_TOTAL_TIMEOUT_MS, DEFAULT_LOCAL_MODEL_PATH,
};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Required for every model except the built-in one, whose default layer sets it.
    pub provider: Provider,
    /// Weights file; only for `provider = "local"`. May start with `~/`.
    #[serde(default)]
    pub path: Option<String>,
    /// `resolve()` fills in the provider's default when unset (not for `local`).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The model name sent to the server.
    #[serde(default)]
    pub model: Option<String>,
    /// The NAME of the environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub fim_template: FimTemplate,
    #[serde(default = "default_model_max_tokens")]
    pub max_tokens: u32,
    #[serde(default = "default_temperature")]
    pub temperature: f64,
    /// Time to the first byte of the answer (headers, or the first streamed
    /// token for the local model), in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Time to establish the TCP/TLS connection, in milliseconds.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Whole-request limit including streaming, in milliseconds.
    #[serde(default = "default_total_timeout_ms")]
    pub total_timeout_ms: u64,
    /// Retries on 429, 5xx and connection errors, before any output arrived.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Local model only: context window in tokens (the KV cache size).
    #[serde(default = "default_context_tokens")]
    pub context_tokens: u32,
    /// Local model only: inference threads; 0 means one per CPU core.
    #[serde(default)]
    pub threads: u32,
    /// Local model only: when its weights are the default model's and
    /// missing, `fettle serve` and `fettle fix` install them (verified)
    /// instead of only saying how.
    #[serde(default = "default_true")]
    pub auto_fetch: bool,
    /// Merged into every request body.
    #[serde(default)]
    pub extra_body: serde_json::Map<String, serde_json::Value>,
}

fn default_model_max_tokens() -> u32 {
    128
}
fn default_temperature() -> f64 {
    0.2
}
fn default_timeout_ms() -> u64 {
    5000
}
fn default_connect_timeout_ms() -> u64 {
    2000
}
fn default_total_timeout_ms() -> u64 {
    120_000
}
fn default_max_retries() -> u32 {
    2
}
fn default_context_tokens() -> u32 {
    4096
}
fn default_true() -> bool {
    true
}

impl ModelConfig {
    /// A model of `provider` with every other field at its default.
    pub fn new(provider: Provider) -> Self {
        Self {
            provider,
            path: None,
            base_url: None,
            model: None,
            api_key_env: None,
            fim_template: FimTemplate::Auto,
            max_tokens: default_model_max_tokens(),
            temperature: default_temperature(),
            timeout_ms: default_timeout_ms(),
            connect_timeout_ms: default_connect_timeout_ms(),
            total_timeout_ms: default_total_timeout_ms(),
            max_retries: default_max_retries(),
            context_tokens: default_context_tokens(),
            threads: 0,
            auto_fetch: true,
            extra_body: serde_json::Map::new(),
        }
    }
    pub fn builtin_local() -> Self {
        Self {
            path: Some(DEFAULT_LOCAL_MODEL_PATH.to_string()),
            // As every embedded model's (see `config::resolve`).
            total_timeout_ms: CODER_TOTAL_TIMEOUT_MS,
            ..Self::new(Provider::Local)
        }
    }
    /// A built-in coder model, installed by `fettle model fetch NAME` next
    /// to the default one. Never fetched on first use: it is hundreds of MB
    /// to a GB, which a user asks for.
    pub fn builtin_coder(file: &str) -> Self {
        let dir = DEFAULT_LOCAL_MODEL_PATH
            .rsplit_once('/')
            .map_or("~/.cache/fettle/models", |(dir, _)| dir);
        Self {
            path: Some(format!("{dir}/{file}")),
            auto_fetch: false,
            // The agent's first message shows the failing code and tests
            // (3–5k tokens); the KV cache of 8k is ~230 MB for the 1.5B.
            context_tokens: CODER_CONTEXT_TOKENS,
            // An agent turn prefills a few thousand tokens at ~20 a second
            // on a laptop CPU: minutes, not the default two. The task has
            // its own budget (`agent.timeout_s`).
            total_timeout_ms: CODER_TOTAL_TIMEOUT_MS,
            ..Self::new(Provider::Local)
        }
    }
    /// `base_url` or, when unset, the provider's default (`None` for `local`).
    pub fn effective_base_url(&self) -> Option<&str> {
        self.base_url
            .as_deref()
            .or(self.provider.default_base_url())
    }
    /// `path` with a leading `~/` expanded against `$HOME`.
    pub fn expanded_path(&self) -> Option<PathBuf> {
        self.path.as_deref().map(expand_home)
    }
}

/// Expands a leading `~/` (or a lone `~`) to `$HOME`; other paths are returned as is.
pub fn expand_home(path: &str) -> PathBuf {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    match (path.strip_prefix('~'), home) {
        (Some(""), Some(home)) => PathBuf::from(home),
        (Some(rest), Some(home)) if rest.starts_with('/') => {
            PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(path),
    }
}
