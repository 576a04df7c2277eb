//! HTTP plumbing shared by the remote providers: one pooled client, the
//! retry policy, status → [`ModelError`] mapping, and the streaming decoders
//! (server-sent events and newline-delimited JSON) with idle and total
//! deadlines (`http/body.rs`).

mod body;

pub(crate) use body::SseEvent;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;

use super::error::{shorten, ModelError};
use super::health;
use crate::config::ModelConfig;

/// A connection used within this long is taken to be open still: the pool
/// keeps an idle one 90 s, and servers commonly close theirs after 5 to 75
/// s idle (a closed one is noticed when taken from the pool, and the
/// request connects anew). Shorter: more `HEAD`s; longer: more requests
/// that connect first.
const USED_LATELY: Duration = Duration::from_secs(30);

/// The shared client for a given connect timeout. Models almost always share
/// one value, so in practice this is one client: one connection pool with
/// keep-alive, HTTP/2 where the server offers it (ALPN).
pub(crate) fn client(connect_timeout: Duration) -> reqwest::Client {
    static CLIENTS: OnceLock<Mutex<HashMap<Duration, reqwest::Client>>> = OnceLock::new();
    let clients = CLIENTS.get_or_init(Default::default);
    let mut clients = clients
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    clients
        .entry(connect_timeout)
        .or_insert_with(|| {
            reqwest::Client::builder()
                .connect_timeout(connect_timeout)
                .pool_idle_timeout(Duration::from_secs(90))
                .tcp_nodelay(true)
                .user_agent(concat!("fettle/", env!("CARGO_PKG_VERSION")))
                .build()
                // Building fails only when the TLS backend cannot initialise;
                // a default client then still serves plain-http endpoints.
                .unwrap_or_default()
        })
        .clone()
}

/// A JSON request body, serialized once: when the request is made (a
/// completion's prompt built ahead comes with its body ready), and for
/// every retry.
#[derive(Clone, Debug)]
pub(crate) struct JsonBody {
    bytes: Bytes,
    /// The body's `model`, for a 404's message.
    model: Option<String>,
}

impl JsonBody {
    pub fn new(body: &Value) -> Self {
        JsonBody {
            // A `Value` always serializes (its map keys are strings).
            bytes: serde_json::to_vec(body).unwrap_or_default().into(),
            model: body.get("model").and_then(Value::as_str).map(str::to_owned),
        }
    }
}

/// Everything a provider needs to talk to one configured model over HTTP.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    /// The model's name in `[models]`, for messages.
    pub name: String,
    /// `base_url` without a trailing slash.
    pub base_url: String,
    /// The key, read from `api_key_env` (through [`crate::secrets::store`],
    /// not the process environment) when the model was built. Never logged.
    api_key: Option<String>,
    pub api_key_env: Option<String>,
    pub first_byte_timeout: Duration,
    pub connect_timeout: Duration,
    pub total_timeout: Duration,
    pub max_retries: u32,
}

impl Endpoint {
    pub fn from_config(name: &str, cfg: &ModelConfig) -> Result<Self, ModelError> {
        let base = cfg.effective_base_url().unwrap_or_default();
        let base_url = base.trim_end_matches('/').to_string();
        if let Err(e) = reqwest::Url::parse(&base_url) {
            return Err(ModelError::BadUrl {
                model: name.to_string(),
                url: base.to_string(),
                reason: e.to_string(),
            });
        }
        let api_key_env = cfg.api_key_env.clone().filter(|v| !v.is_empty());
        let api_key = api_key_env.as_deref().and_then(crate::secrets::store::var);
        if let (Some(key), Some(var)) = (&api_key, &api_key_env) {
            if reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).is_err() {
                return Err(ModelError::InvalidKey {
                    model: name.to_string(),
                    var: var.clone(),
                });
            }
        }
        Ok(Self {
            name: name.to_string(),
            base_url,
            api_key,
            api_key_env,
            first_byte_timeout: Duration::from_millis(cfg.timeout_ms),
            connect_timeout: Duration::from_millis(cfg.connect_timeout_ms),
            total_timeout: Duration::from_millis(cfg.total_timeout_ms),
            max_retries: cfg.max_retries,
        })
    }

    /// The key, if the configured variable holds one.
    pub fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    /// `base_url` joined with `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// Opens a connection to the server ahead of a request (an HTTP `HEAD`
    /// of `base_url`, without the key; whatever it answers, the connection
    /// stays in the pool), unless a request or another preconnect used one
    /// within [`USED_LATELY`]. The first completion of a session, or after a
    /// pause, then skips the connect (over HTTPS also the TLS handshake:
    /// tens of milliseconds to a hosted model). It never counts as a
    /// failure: a server that is down or paused is left to the real request.
    pub fn preconnect(&self) {
        if !self.mark_used(true) {
            return;
        }
        if health::check(&self.name, &self.base_url, &self.base_url).is_err() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let request = client(self.connect_timeout)
            .head(&self.base_url)
            .timeout(self.connect_timeout + self.first_byte_timeout);
        let name = self.name.clone();
        runtime.spawn(async move {
            match request.send().await {
                Ok(response) => {
                    tracing::debug!(model = %name, status = %response.status(), "connected to the model ahead");
                }
                Err(err) => {
                    tracing::debug!(model = %name, %err, "could not connect to the model ahead");
                }
            }
        });
    }

    /// Notes a use of the server's connection now. With `only_if_stale`,
    /// only when none was noted within [`USED_LATELY`]; returns whether it
    /// noted this one.
    fn mark_used(&self, only_if_stale: bool) -> bool {
        static USED: OnceLock<Mutex<HashMap<String, Instant>>> = OnceLock::new();
        let mut used = USED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        if only_if_stale
            && used
                .get(&self.base_url)
                .is_some_and(|at| now.duration_since(*at) < USED_LATELY)
        {
            return false;
        }
        // Keyed by `base_url`: the pool keys by origin, and models on one
        // server almost always share their base URL.
        match used.get_mut(&self.base_url) {
            Some(at) => *at = now,
            None => {
                used.insert(self.base_url.clone(), now);
            }
        }
        true
    }

    /// POSTs `body` as JSON and returns the response once its headers are in
    /// and its status is a success. Retries 429, 5xx and connection errors
    /// with exponential backoff and jitter (honoring `Retry-After`). Retrying
    /// happens only here, before any of the body was read, so a stream that
    /// has produced output is never retried.
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &JsonBody,
    ) -> Result<Response, ModelError> {
        // While the server's Retry-After runs, nothing reaches it. A caller
        // without a deadline of its own (the agent, edits) waits the pause
        // out when its budget allows; a completion gives up at once.
        if let Err(paused) = health::check(&self.name, &self.base_url, url) {
            match &paused {
                ModelError::Paused { remaining, .. }
                    if health::deadline().is_none() && *remaining < self.total_timeout =>
                {
                    tracing::info!(model = %self.name, wait_ms = remaining.as_millis() as u64, "waiting out the model's pause");
                    tokio::time::sleep(*remaining).await;
                }
                _ => return Err(paused),
            }
        }
        self.mark_used(false);
        let result = self.post_with_retries(url, headers, body).await;
        match &result {
            Ok(_) => health::record_ok(&self.name, &self.base_url),
            Err(err) => health::record_failure(&self.name, &self.base_url, err),
        }
        result
    }

    async fn post_with_retries(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &JsonBody,
    ) -> Result<Response, ModelError> {
        let started = Instant::now();
        // The caller's budget (a completion's deadline), retries included.
        let deadline = health::deadline();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let mut request = client(self.connect_timeout)
                .post(url)
                .body(body.bytes.clone());
            let mut extra = reqwest::header::HeaderMap::new();
            extra.insert(
                reqwest::header::CONTENT_TYPE,
                reqwest::header::HeaderValue::from_static("application/json"),
            );
            // Replace, not append: a provider may name its own content-type.
            for (name, value) in headers {
                if let (Ok(name), Ok(value)) = (
                    reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                    reqwest::header::HeaderValue::from_str(value),
                ) {
                    extra.insert(name, value);
                }
            }
            request = request.headers(extra);
            super::timing::mark_sent();
            let err = match tokio::time::timeout(self.first_byte_timeout, request.send()).await {
                Err(_) => self.timeout(url, "answer", "timeout_ms", self.first_byte_timeout),
                Ok(Err(e)) => self.transport_error(url, &e),
                Ok(Ok(resp)) if resp.status().is_success() => {
                    super::timing::mark_headers();
                    return Ok(Response {
                        inner: resp,
                        deadline: started + self.total_timeout,
                        endpoint: self.clone(),
                        url: url.to_string(),
                    });
                }
                Ok(Ok(resp)) => self.status_error(url, resp, attempt, body).await,
            };
            let retry_after = retry_after_of(&err).filter(|ra| !ra.is_zero());
            if let Some(wait) = retry_after {
                // The server's word holds for every request to the model,
                // not only this one's retry.
                health::pause(&self.name, &self.base_url, wait, &err);
            }
            if !err.is_retryable() || attempt > self.max_retries {
                return Err(err);
            }
            let delay = backoff(attempt, retry_after);
            let past_deadline = deadline.is_some_and(|d| Instant::now() + delay >= d);
            if started.elapsed() + delay >= self.total_timeout || past_deadline {
                return Err(err);
            }
            tracing::info!(model = %self.name, attempt, delay_ms = delay.as_millis() as u64, error = %err, "retrying model request");
            tokio::time::sleep(delay).await;
        }
    }

    pub fn timeout(
        &self,
        url: &str,
        what: &'static str,
        key: &'static str,
        limit: Duration,
    ) -> ModelError {
        ModelError::Timeout {
            model: self.name.clone(),
            url: url.to_string(),
            what,
            key,
            limit,
        }
    }

    pub fn malformed(&self, url: &str, reason: impl Into<String>) -> ModelError {
        ModelError::MalformedResponse {
            model: self.name.clone(),
            url: url.to_string(),
            reason: reason.into(),
        }
    }

    pub fn truncated(&self, url: &str, reason: impl Into<String>) -> ModelError {
        ModelError::TruncatedStream {
            model: self.name.clone(),
            url: url.to_string(),
            reason: reason.into(),
        }
    }

    fn transport_error(&self, url: &str, e: &reqwest::Error) -> ModelError {
        if e.is_builder() {
            return ModelError::BadUrl {
                model: self.name.clone(),
                url: url.to_string(),
                reason: root_cause(e),
            };
        }
        if e.is_timeout() {
            return self.timeout(
                url,
                "connection",
                "connect_timeout_ms",
                self.connect_timeout,
            );
        }
        ModelError::Connect {
            model: self.name.clone(),
            url: url.to_string(),
            reason: root_cause(e),
        }
    }

    async fn status_error(
        &self,
        url: &str,
        resp: reqwest::Response,
        attempts: u32,
        body: &JsonBody,
    ) -> ModelError {
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        // The error body is short; cap the wait so a stalled one cannot hang us.
        let text = tokio::time::timeout(self.first_byte_timeout, resp.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let detail = error_detail(&text)
            .map(|d| format!(": {}", shorten(&d, 300)))
            .unwrap_or_default();
        let model = self.name.clone();
        let url = url.to_string();
        match status {
            401 | 403 => ModelError::Auth {
                model,
                url,
                status,
                hint: self.auth_hint(),
            },
            404 => ModelError::ModelNotFound {
                name: body.model.as_deref().unwrap_or("(none)").to_string(),
                model,
                url,
                detail,
            },
            429 => ModelError::RateLimited {
                model,
                url,
                retry_after,
                attempts,
            },
            500..=599 => ModelError::Server {
                model,
                url,
                status,
                detail,
                attempts,
            },
            _ => ModelError::Http {
                model,
                url,
                status,
                detail,
            },
        }
    }

    fn auth_hint(&self) -> String {
        match (&self.api_key_env, self.api_key.is_some()) {
            (Some(var), true) => format!(
                "Check the key in the environment variable {var} (models.{}.api_key_env).",
                self.name
            ),
            (Some(var), false) => format!(
                "The environment variable {var} (models.{}.api_key_env) is not set or empty; set it to your API key and restart.",
                self.name
            ),
            (None, _) => format!(
                "This server needs a key: set models.{}.api_key_env to the name of an environment variable holding it.",
                self.name
            ),
        }
    }
}

/// A successful response whose body is still to be read.
pub(crate) struct Response {
    inner: reqwest::Response,
    deadline: Instant,
    endpoint: Endpoint,
    url: String,
}

/// Merges a model's `extra_body` into a request body, key by key (the
/// user's values win).
pub(crate) fn merge_extra_body(body: &mut Value, extra: &serde_json::Map<String, Value>) {
    if let Value::Object(map) = body {
        for (k, v) in extra {
            map.insert(k.clone(), v.clone());
        }
    }
}

/// The message of an error body: `{"error": {"message": ...}}`,
/// `{"error": "..."}`, `{"message": ...}`, or the text itself.
fn error_detail(text: &str) -> Option<String> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        let msg = v
            .pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("message"))
            .or_else(|| v.get("detail"));
        if let Some(Value::String(s)) = msg {
            return Some(s.clone());
        }
    }
    Some(text.to_string())
}

/// `Retry-After` as delta-seconds or an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_secs_f64(secs.min(3600.0)));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

fn retry_after_of(err: &ModelError) -> Option<Duration> {
    match err {
        ModelError::RateLimited { retry_after, .. } => *retry_after,
        _ => None,
    }
}

/// Exponential backoff from 250 ms with full jitter, capped at 8 s; a
/// server's `Retry-After` wins when it asks for longer.
fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
    let base = 250u64
        .saturating_mul(1 << attempt.saturating_sub(1).min(5))
        .min(8000);
    let jittered = Duration::from_millis(base / 2 + fastrand::u64(0..=base / 2));
    retry_after.map_or(jittered, |ra| {
        ra.max(jittered.min(Duration::from_millis(50)))
    })
}

/// The innermost cause of a reqwest error ("Connection refused (os error
/// 111)"), which is what a user can act on.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn backoff_grows_and_honors_retry_after() {
        for attempt in 1..8 {
            let d = backoff(attempt, None);
            let base = 250u64 * (1 << (attempt - 1).min(5));
            assert!(
                d.as_millis() as u64 >= base.min(8000) / 2,
                "{attempt}: {d:?}"
            );
            assert!(d.as_millis() as u64 <= base.min(8000), "{attempt}: {d:?}");
        }
        assert_eq!(
            backoff(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn error_details() {
        assert_eq!(
            error_detail(r#"{"error":{"message":"bad model"}}"#).as_deref(),
            Some("bad model")
        );
        assert_eq!(
            error_detail(r#"{"error":"model 'x' not found"}"#).as_deref(),
            Some("model 'x' not found")
        );
        assert_eq!(error_detail("  "), None);
        assert_eq!(error_detail("oops").as_deref(), Some("oops"));
    }
}
