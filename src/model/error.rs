//! Typed model errors, each with a message a user can act on.
use std::time::Duration;

/// Why a model request failed. `Display` is the user-facing message: it
/// names the model, what went wrong and what to do about it. Secrets never
/// appear in it (only the *name* of the variable that should hold a key).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("model \"{model}\": invalid base_url {url:?}: {reason}")]
    BadUrl {
        model: String,
        url: String,
        reason: String,
    },
    #[error("model \"{model}\": cannot connect to {url}: {reason}. Is the server running?")]
    Connect {
        model: String,
        url: String,
        reason: String,
    },
    #[error("model \"{model}\": {url} rejected the API key (HTTP {status}). {hint}")]
    Auth {
        model: String,
        url: String,
        status: u16,
        /// Which environment variable to set or fix.
        hint: String,
    },
    #[error("model \"{model}\": {url} does not know model {name:?}, or has no such endpoint (HTTP 404). Check models.{model}.model and models.{model}.base_url{detail}")]
    ModelNotFound {
        model: String,
        url: String,
        name: String,
        /// The server's own words, prefixed with ": " when present.
        detail: String,
    },
    #[error("model \"{model}\": rate limited by {url} (HTTP 429){}; gave up after {attempts} attempt(s)", retry_after.map(|d| format!(", server asked to retry after {}s", d.as_secs())).unwrap_or_default())]
    RateLimited {
        model: String,
        url: String,
        retry_after: Option<Duration>,
        attempts: u32,
    },
    #[error("model \"{model}\": server error HTTP {status} from {url}{detail}; gave up after {attempts} attempt(s)")]
    Server {
        model: String,
        url: String,
        status: u16,
        detail: String,
        attempts: u32,
    },
    /// Any other non-success status (400 with the server's message, ...).
    #[error("model \"{model}\": HTTP {status} from {url}{detail}")]
    Http {
        model: String,
        url: String,
        status: u16,
        detail: String,
    },
    #[error("model \"{model}\": no {what} from {url} within {}ms (models.{model}.{key})", limit.as_millis())]
    Timeout {
        model: String,
        url: String,
        /// "connection", "answer", "complete answer" ...
        what: &'static str,
        /// The config key that sets this limit.
        key: &'static str,
        limit: Duration,
    },
    #[error("model \"{model}\": malformed response from {url}: {reason}")]
    MalformedResponse {
        model: String,
        url: String,
        reason: String,
    },
    #[error("model \"{model}\": the answer from {url} stopped before it was complete ({reason})")]
    TruncatedStream {
        model: String,
        url: String,
        reason: String,
    },
    /// The server put an error into a stream it had started (OpenAI's
    /// `error` object, Anthropic's `error` event, Ollama's `{"error"}` line).
    #[error("model \"{model}\": {url} reported an error mid-answer: {message}")]
    ServerReported {
        model: String,
        url: String,
        message: String,
    },
    #[error("model \"{model}\": the API key in ${var} contains characters that cannot be sent in an HTTP header (a stray newline or quote?)")]
    InvalidKey { model: String, var: String },
    #[error("model \"{model}\": unknown event {event:?} in the stream from {url}")]
    UnknownEvent {
        model: String,
        url: String,
        event: String,
    },
    #[error("model \"{model}\": tool call {tool:?} has arguments that are not valid JSON ({reason}): {arguments}")]
    BadToolArguments {
        model: String,
        tool: String,
        reason: String,
        /// The raw arguments, shortened for the message.
        arguments: String,
    },
    /// The local model's weights file is missing.
    #[error("model \"{model}\": weights file {path} not found. {advice}")]
    MissingWeights {
        model: String,
        path: String,
        /// What to do, fitting the situation (see `local::engine::weights_advice`).
        advice: String,
    },
    /// The local runtime failed (load, context, decode).
    #[error("model \"{model}\": {reason}")]
    Local { model: String, reason: String },
    /// The provider cannot do this (e.g. FIM on Anthropic).
    #[error("model \"{model}\": {reason}")]
    Unsupported { model: String, reason: String },
    /// The server asked for a pause (`429` with `Retry-After`): requests to
    /// the model are refused until it ends, without reaching the server.
    #[error("model \"{model}\": paused for another {}s: {reason}. Requests to {url} resume by themselves", remaining.as_secs().max(1))]
    Paused {
        model: String,
        url: String,
        remaining: Duration,
        /// The error that opened the pause.
        reason: String,
    },
    /// The caller's deadline for the whole request (retries included)
    /// passed: `completion.deadline_ms` for completions.
    #[error("model \"{model}\": no complete answer within the completion deadline of {}ms (completion.deadline_ms)", limit.as_millis())]
    DeadlineExceeded { model: String, limit: Duration },
    /// No model of that name is configured.
    #[error("no model named {name:?} in [models] (configured: {known})")]
    UnknownModel { name: String, known: String },
}

impl ModelError {
    /// Whether a fresh attempt may succeed: rate limits, server errors and
    /// connection failures. Callers retry only before any output arrived.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. } | ModelError::Server { .. } | ModelError::Connect { .. }
        )
    }
}

/// Shortens `s` to about `max` bytes on a char boundary, for messages.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
