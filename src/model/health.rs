//! How each remote model is doing, shared by every use of it (completion,
//! edit, agent): the circuit breaker a `429 Retry-After` opens, the last
//! failure and whether it was announced, and the caller's deadline for one
//! request (retries included).
//!
//! Process-wide, keyed by model name *and* `base_url`: a configuration
//! change that points a model elsewhere starts it with a clean slate, and
//! models rebuilt on every configuration change keep their state.
use std::collections::HashMap;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use serde::Serialize;
use tokio::sync::broadcast;

use super::error::ModelError;

/// A failure is announced at most this often per model, however often it
/// recurs (one message, not one per keystroke).
const ANNOUNCE_EVERY: Duration = Duration::from_secs(10 * 60);

tokio::task_local! {
    /// The end of the caller's budget for the request being polled; see
    /// [`bounded`]. Read by the HTTP retry loop.
    static DEADLINE: Instant;
}

/// The caller's deadline for the request being polled, if it set one.
pub(crate) fn deadline() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// A change worth telling the user about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthEvent {
    /// Requests to `model` fail; `reason` says why and what to do. While
    /// the server's `Retry-After` runs, `paused_for` says how long.
    Failing {
        model: String,
        reason: String,
        paused_for: Option<Duration>,
    },
    /// `model` answered again after an announced failure.
    Recovered { model: String },
}

/// One model's state, as `fettle/stats` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelHealth {
    pub model: String,
    pub base_url: String,
    /// `ok`, `failing` or `paused`.
    pub state: &'static str,
    /// The last failure's message (kept after a pause ends, until a success).
    pub reason: Option<String>,
    /// When the current run of failures began (Unix milliseconds).
    pub failing_since_unix_ms: Option<u64>,
    /// Failed requests in the current run.
    pub failures: u32,
    /// While paused: when requests resume (Unix milliseconds) ...
    pub paused_until_unix_ms: Option<u64>,
    /// ... and how long that is from now.
    pub paused_for_ms: Option<u64>,
}

#[derive(Default)]
struct Entry {
    /// Requests are refused until then (a circuit breaker opened by the
    /// server's `Retry-After`).
    paused_until: Option<(Instant, SystemTime)>,
    reason: Option<String>,
    failing_since: Option<SystemTime>,
    failures: u32,
    /// When a failure was last announced.
    announced_at: Option<Instant>,
    /// The current run of failures was announced: its end will be too.
    announced: bool,
}

struct Registry {
    entries: Mutex<HashMap<(String, String), Entry>>,
    events: broadcast::Sender<HealthEvent>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Registry {
        entries: Mutex::new(HashMap::new()),
        events: broadcast::channel(32).0,
    })
}

fn entries() -> MutexGuard<'static, HashMap<(String, String), Entry>> {
    registry()
        .entries
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn key(model: &str, base_url: &str) -> (String, String) {
    (model.to_string(), base_url.to_string())
}

/// Announcements of failures and recoveries, from now on.
pub fn subscribe() -> broadcast::Receiver<HealthEvent> {
    registry().events.subscribe()
}

/// `Err(Paused)` while the breaker for this model is open.
pub(crate) fn check(model: &str, base_url: &str, url: &str) -> Result<(), ModelError> {
    let entries = entries();
    let Some(entry) = entries.get(&key(model, base_url)) else {
        return Ok(());
    };
    match entry.paused_until {
        Some((until, _)) if until > Instant::now() => Err(ModelError::Paused {
            model: model.to_string(),
            url: url.to_string(),
            remaining: until.saturating_duration_since(Instant::now()),
            reason: entry.reason.clone().unwrap_or_default(),
        }),
        _ => Ok(()),
    }
}

/// Opens the breaker: requests to the model are refused for `wait`.
pub(crate) fn pause(model: &str, base_url: &str, wait: Duration, reason: &ModelError) {
    let Some(until) = Instant::now().checked_add(wait) else {
        return;
    };
    tracing::warn!(%model, wait_ms = wait.as_millis() as u64, "model paused: {reason}");
    let mut entries = entries();
    let entry = entries.entry(key(model, base_url)).or_default();
    entry.paused_until = Some((until, SystemTime::now() + wait));
    entry.reason = Some(reason.to_string());
}

/// The model answered (its response headers arrived with a success).
pub(crate) fn record_ok(model: &str, base_url: &str) {
    let recovered = {
        let mut entries = entries();
        let entry = entries.entry(key(model, base_url)).or_default();
        let recovered = entry.announced;
        entry.paused_until = None;
        entry.reason = None;
        entry.failing_since = None;
        entry.failures = 0;
        entry.announced = false;
        recovered
    };
    if recovered {
        tracing::info!(%model, "model answers again");
        let _ = registry().events.send(HealthEvent::Recovered {
            model: model.to_string(),
        });
    }
}

/// A request to the model failed before any output (after its retries).
pub(crate) fn record_failure(model: &str, base_url: &str, error: &ModelError) {
    let announce = {
        let mut entries = entries();
        let entry = entries.entry(key(model, base_url)).or_default();
        let paused_for = entry
            .paused_until
            .map(|(until, _)| until.saturating_duration_since(Instant::now()))
            .filter(|left| !left.is_zero());
        entry.reason = Some(error.to_string());
        entry.failures += 1;
        entry.failing_since.get_or_insert_with(SystemTime::now);
        let now = Instant::now();
        let due = entry
            .announced_at
            .is_none_or(|at| now.duration_since(at) >= ANNOUNCE_EVERY);
        if !entry.announced && due {
            entry.announced = true;
            entry.announced_at = Some(now);
            Some(paused_for)
        } else {
            None
        }
    };
    if let Some(paused_for) = announce {
        let _ = registry().events.send(HealthEvent::Failing {
            model: model.to_string(),
            reason: error.to_string(),
            paused_for,
        });
    }
}

/// The state of the models named in `names` that have been used.
pub fn report<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<ModelHealth> {
    let names: Vec<&str> = names.into_iter().collect();
    let entries = entries();
    let now = Instant::now();
    let mut out: Vec<ModelHealth> = entries
        .iter()
        .filter(|((model, _), _)| names.contains(&model.as_str()))
        .map(|((model, base_url), e)| {
            let paused = e.paused_until.filter(|(until, _)| *until > now);
            let state = if paused.is_some() {
                "paused"
            } else if e.failures > 0 {
                "failing"
            } else {
                "ok"
            };
            ModelHealth {
                model: model.clone(),
                base_url: base_url.clone(),
                state,
                reason: e.reason.clone(),
                failing_since_unix_ms: e.failing_since.map(unix_ms),
                failures: e.failures,
                paused_until_unix_ms: paused.map(|(_, wall)| unix_ms(wall)),
                paused_for_ms: paused
                    .map(|(until, _)| until.saturating_duration_since(now).as_millis() as u64),
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.model, &a.base_url).cmp(&(&b.model, &b.base_url)));
    out
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `stream` bounded by `limit` from its first poll: every poll runs with
/// the deadline in scope (so retries give up when they cannot fit, see
/// `http::Endpoint::post`), and when it passes the stream ends with
/// [`ModelError::DeadlineExceeded`] (dropping `stream` cancels the request).
pub(crate) fn bounded<T: Send + 'static>(
    model: &str,
    limit: Duration,
    stream: BoxStream<'static, Result<T, ModelError>>,
) -> BoxStream<'static, Result<T, ModelError>> {
    Box::pin(Bounded {
        model: model.to_string(),
        limit,
        inner: Some(stream),
        timer: None,
    })
}

struct Bounded<T> {
    model: String,
    limit: Duration,
    /// `None` once ended.
    inner: Option<BoxStream<'static, Result<T, ModelError>>>,
    /// Armed on the first poll.
    timer: Option<(Instant, Pin<Box<tokio::time::Sleep>>)>,
}

impl<T> Stream for Bounded<T> {
    type Item = Result<T, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let limit = this.limit;
        let (end, timer) = this.timer.get_or_insert_with(|| {
            let end = Instant::now() + limit;
            (end, Box::pin(tokio::time::sleep_until(end.into())))
        });
        let end = *end;
        let polled = DEADLINE.sync_scope(end, || inner.poll_next_unpin(cx));
        if let Poll::Ready(item) = polled {
            if item.is_none() {
                this.inner = None;
            }
            return Poll::Ready(item);
        }
        if timer.as_mut().poll(cx).is_ready() {
            this.inner = None;
            return Poll::Ready(Some(Err(ModelError::DeadlineExceeded {
                model: this.model.clone(),
                limit,
            })));
        }
        Poll::Pending
    }
}
