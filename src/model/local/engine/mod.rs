//! The embedded llama.cpp runtime: one dedicated thread per loaded model,
//! fed through a channel, that keeps its KV cache between requests.
//!
//! Every request's prompt is tokenized with the model's own vocabulary and
//! compared with the tokens already in the KV cache: the longest common
//! prefix is kept, only what diverged is dropped, and only the new tokens
//! are evaluated. With suffix-first FIM prompts, a keystroke changes only
//! the end of the prompt, so a warm request costs a handful of tokens
//! instead of the whole prompt.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use tokio::sync::mpsc::UnboundedSender;

mod session;
use session::Session;

use crate::model::{ModelError, StopReason, Usage};

/// What identifies a runtime: requests for the same weights and settings
/// share one thread, one context and one KV cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct EngineKey {
    pub path: PathBuf,
    pub context_tokens: u32,
    pub threads: u32,
    /// Long background work (the agent's turns) gets its own engine, at a
    /// lower CPU priority, so it never queues ahead of a completion.
    pub background: bool,
}

/// Builds a request's prompt and stop sequences on the engine thread, where
/// the model's vocabulary is known (a FIM template needs special tokens the
/// model may not have).
pub(crate) type PromptFn = Box<dyn FnOnce(&Vocabulary<'_>) -> Prompt + Send>;

/// A prompt as built for the engine.
pub(crate) struct Prompt {
    pub text: String,
    pub stop: Vec<String>,
    /// The window of code before the cursor, whose start may move down (to
    /// a line start) to meet a latency target (see `fit.rs`).
    pub body: Option<std::ops::Range<usize>>,
}

/// What a prompt builder may ask about the loaded model.
pub(crate) struct Vocabulary<'m> {
    model: &'m LlamaModel,
}

impl Vocabulary<'_> {
    /// Whether `text` contains markers that this vocabulary has as special
    /// tokens (e.g. `<fim_prefix>`); if not, they would be read as plain text.
    pub fn has_special_tokens(&self, text: &str) -> bool {
        let vocab = self.model.vocab();
        vocab.tokenize(text.as_bytes(), false, true).len()
            < vocab.tokenize(text.as_bytes(), false, false).len()
    }
}

/// One generation request.
pub(crate) struct Job {
    /// The prompt (special tokens written as text are parsed) and stops.
    pub prompt: PromptFn,
    pub max_tokens: u32,
    pub temperature: f32,
    pub deadline: Instant,
    /// The configured limit behind `deadline`, for the message.
    pub limit: Duration,
    /// At most this long to evaluate the prompt's uncached tokens (a
    /// completion's `completion.latency_target_ms`): the prompt's body is
    /// shortened to what the measured prefill speed allows.
    pub latency_target: Option<Duration>,
    /// Which cached prompt this request continues (a completion's file);
    /// `None`: the chat lane.
    pub slot: Option<String>,
    /// A warm-up (see [`Engine::next_warm`]): prefill only, no answer,
    /// given up as soon as a real job is queued or a newer warm-up comes.
    pub warm: Option<u64>,
    /// Where output goes. The job stops at the next token once the receiver
    /// is dropped: that is how callers cancel.
    pub out: UnboundedSender<Result<Output, ModelError>>,
}

#[derive(Debug)]
pub(crate) enum Output {
    Text(String),
    Done { usage: Usage, reason: StopReason },
}

/// Counters for the last request (not a warm-up), for logs, `fettle
/// doctor`, `fettle/stats` and benchmarks. A request stopped early keeps
/// its prompt's counters (the generation's stay zero); `cancelled_jobs`
/// and `warmed_tokens` are totals so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestStats {
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV entries were reused from the previous request.
    pub reused_tokens: usize,
    pub generated_tokens: usize,
    pub prefill: Duration,
    pub first_token: Duration,
    pub total: Duration,
    /// Jobs this engine stopped because their caller went away, so far.
    pub cancelled_jobs: u64,
    /// Prompt tokens evaluated by warm-ups ahead of requests, so far.
    pub warmed_tokens: u64,
}

/// A handle on one runtime thread.
pub(crate) struct Engine {
    key: EngineKey,
    /// The model's name in `[models]`, for messages.
    name: String,
    jobs: Mutex<mpsc::Sender<Job>>,
    shared: Arc<Shared>,
}

/// State the thread publishes for other threads.
#[derive(Default)]
struct Shared {
    /// Set once the weights are loaded; tokenizing is thread-safe.
    model: OnceLock<Arc<LlamaModel>>,
    last: Mutex<Option<RequestStats>>,
    /// Jobs stopped because their receiver was dropped.
    cancelled: AtomicU64,
    /// Token counts of short texts (see [`Engine::count_tokens`]).
    counts: Mutex<std::collections::HashMap<Box<str>, usize>>,
    /// Real (not warm-up) jobs submitted and not yet taken by the thread:
    /// a warm-up yields to them between chunks.
    real_pending: AtomicUsize,
    /// The newest warm-up; older ones are given up.
    warm_generation: AtomicU64,
    /// Prompt tokens evaluated by warm-ups.
    warmed: AtomicU64,
}

impl Shared {
    /// Whether warm-up `generation` should stop: a real job is waiting, or
    /// a newer warm-up was submitted.
    fn warm_outdated(&self, generation: Option<u64>) -> bool {
        generation.is_some_and(|g| {
            self.real_pending.load(Ordering::SeqCst) > 0
                || self.warm_generation.load(Ordering::SeqCst) != g
        })
    }

    /// Tokens in `text` (no BOS), remembered for short texts: prompt
    /// building and fitting count the same lines on every keystroke.
    fn count(&self, model: &LlamaModel, text: &str) -> usize {
        let cacheable = text.len() <= COUNT_CACHE_MAX_TEXT;
        if cacheable {
            let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(&n) = counts.get(text) {
                return n;
            }
        }
        let n = model.vocab().tokenize(text.as_bytes(), false, true).len();
        if cacheable {
            let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            if counts.len() >= COUNT_CACHE_ENTRIES {
                counts.clear();
            }
            counts.insert(text.into(), n);
        }
        n
    }
}

/// Texts up to this long have their token counts remembered...
const COUNT_CACHE_MAX_TEXT: usize = 512;
/// ...this many of them (~10 MB at most); then the memory starts over.
const COUNT_CACHE_ENTRIES: usize = 20_000;

/// Every engine started. Weak: an engine nobody uses any more (its model's
/// path changed) is dropped, which ends its thread and frees the weights.
static ENGINES: OnceLock<Mutex<Vec<Weak<Engine>>>> = OnceLock::new();

/// The process-wide llama.cpp backend; it may be initialised only once.
fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            LlamaBackend::init()
                .map(|mut b| {
                    // llama.cpp logs every tensor at load; our own errors say
                    // what went wrong.
                    b.void_logs();
                    b
                })
                .map_err(|e| format!("cannot initialise llama.cpp: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

impl Engine {
    /// The shared engine for `key`, starting its thread on first use.
    /// Configuration reloads rebuild providers (the new ones before the old
    /// ones are dropped); they keep getting the same engine, and its warm KV
    /// cache, as long as the key is the same.
    pub fn shared(name: &str, key: EngineKey) -> Arc<Engine> {
        let engines = ENGINES.get_or_init(Default::default);
        let mut engines = engines.lock().unwrap_or_else(|p| p.into_inner());
        engines.retain(|e| e.strong_count() > 0);
        if let Some(e) = engines
            .iter()
            .filter_map(Weak::upgrade)
            .find(|e| e.key == key)
        {
            return e;
        }
        let engine = Arc::new(Engine::start(name, key));
        engines.push(Arc::downgrade(&engine));
        engine
    }

    fn start(name: &str, key: EngineKey) -> Engine {
        let (tx, rx) = mpsc::channel::<Job>();
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let thread_key = key.clone();
        let thread_name = name.to_string();
        let spawned = std::thread::Builder::new()
            .name(format!("fettle-llama-{name}"))
            .spawn(move || run(&thread_name, &thread_key, rx, &thread_shared));
        if let Err(e) = spawned {
            // Jobs sent to a dead channel fail with a clear message below.
            tracing::error!(model = name, error = %e, "cannot start the local model thread");
        }
        Engine {
            key,
            name: name.to_string(),
            jobs: Mutex::new(tx),
            shared,
        }
    }

    pub fn submit(&self, job: Job) {
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if job.warm.is_none() {
            // Before the send: a warm-up running now stops at its next chunk.
            self.shared.real_pending.fetch_add(1, Ordering::SeqCst);
        }
        if let Err(mpsc::SendError(job)) = jobs.send(job) {
            if job.warm.is_none() {
                self.shared.real_pending.fetch_sub(1, Ordering::SeqCst);
            }
            let _ = job.out.send(Err(ModelError::Local {
                model: self.name.clone(),
                reason: "the local model thread is not running (see the log)".to_string(),
            }));
        }
    }

    /// Tokens in `text` by the model's vocabulary, once the model is loaded.
    /// Prompt building counts line by line, the same lines on every
    /// keystroke (the windows around the cursor, the snippets of open
    /// files): short texts' counts are remembered.
    pub fn count_tokens(&self, text: &str) -> Option<usize> {
        let model = self.shared.model.get()?;
        Some(self.shared.count(model, text))
    }

    /// A new warm-up's generation: any older warm-up, queued, running or
    /// put off, is given up (the user has moved on, or is typing).
    pub fn next_warm(&self) -> u64 {
        let generation = self.shared.warm_generation.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::trace!(model = %self.name, generation, "warm-up generation");
        generation
    }

    /// Whether the weights are loaded (a warm-up does not load them).
    pub fn is_loaded(&self) -> bool {
        self.shared.model.get().is_some()
    }

    pub fn last_stats(&self) -> Option<RequestStats> {
        let last = *self.shared.last.lock().unwrap_or_else(|p| p.into_inner());
        last.map(|stats| RequestStats {
            cancelled_jobs: self.shared.cancelled.load(Ordering::Relaxed),
            warmed_tokens: self.shared.warmed.load(Ordering::Relaxed),
            ..stats
        })
    }
}

/// The thread: load the model on the first job (and again on later jobs
/// while loading fails, e.g. until `fettle model fetch` has run), then
/// serve jobs in order with one context whose KV cache persists.
fn run(name: &str, key: &EngineKey, jobs: mpsc::Receiver<Job>, shared: &Shared) {
    if key.background {
        crate::background::lower_thread_priority(name);
    }
    let (model, mut pending) = loop {
        let Ok(job) = jobs.recv() else { return };
        match load(name, key) {
            Ok(model) => break (model, Some(job)),
            Err(e) => {
                if job.warm.is_none() {
                    shared.real_pending.fetch_sub(1, Ordering::SeqCst);
                }
                let _ = job.out.send(Err(e));
            }
        }
    };
    let model = Arc::new(model);
    let _ = shared.model.set(Arc::clone(&model));
    let mut session = match Session::new(name, key, &model) {
        Ok(s) => s,
        Err(e) => {
            // Without a context nothing can run; answer every job with why.
            for job in pending.into_iter().chain(jobs.iter()) {
                let _ = job.out.send(Err(e.clone()));
            }
            return;
        }
    };
    // The newest warm-up, put off while real jobs wait: it runs (or goes
    // on from where it yielded) once the queue is empty.
    let mut deferred: Option<Job> = None;
    loop {
        let next = pending.take().map(Ok).unwrap_or_else(|| jobs.try_recv());
        let job = match next {
            Ok(job) => job,
            Err(mpsc::TryRecvError::Disconnected) => return,
            Err(mpsc::TryRecvError::Empty) => match deferred.take() {
                Some(job) => job,
                None => match jobs.recv() {
                    Ok(job) => job,
                    Err(_) => return,
                },
            },
        };
        if job.warm.is_none() {
            shared.real_pending.fetch_sub(1, Ordering::SeqCst);
        } else if shared.warm_generation.load(Ordering::SeqCst) != job.warm.unwrap_or(0) {
            tracing::debug!(model = name, warm = ?job.warm, "local warm-up given up: a newer one came");
            continue;
        } else if shared.real_pending.load(Ordering::SeqCst) > 0 {
            tracing::debug!(model = name, warm = ?job.warm, "local warm-up put off: requests are waiting");
            deferred = Some(job);
            continue;
        }
        if job.warm.is_none() && job.out.is_closed() {
            continue; // cancelled while queued
        }
        let started = Instant::now();
        let out = job.out.clone();
        let warm = job.warm.is_some();
        let result = session.generate(job, shared);
        if let Some(rest) = session.resume.take() {
            deferred = Some(rest); // a warm-up that yielded to a real job
        }
        match result {
            Ok(stats) if warm => {
                let done = stats.prompt_tokens.saturating_sub(stats.reused_tokens);
                shared.warmed.fetch_add(done as u64, Ordering::Relaxed);
                tracing::debug!(model = name, ?stats, "local warm-up");
            }
            Ok(stats) => {
                tracing::debug!(model = name, ?stats, "local generation");
                *shared.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(stats);
            }
            Err(Some(e)) => {
                tracing::warn!(model = name, error = %e, elapsed_ms = started.elapsed().as_millis() as u64, "local generation failed");
                let _ = out.send(Err(e));
            }
            Err(None) => {
                shared.cancelled.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(model = name, "local generation cancelled");
            }
        }
    }
}

fn load(name: &str, key: &EngineKey) -> Result<LlamaModel, ModelError> {
    let local = |reason: String| ModelError::Local {
        model: name.to_string(),
        reason,
    };
    check_weights(name, &key.path)?;
    let backend = backend().map_err(local)?;
    let started = Instant::now();
    let model = LlamaModel::load_from_file(backend, &key.path, &LlamaModelParams::default())
        .map_err(|e| {
            local(format!(
                "cannot load {}: {e}. Is it a GGUF model llama.cpp supports? {}",
                key.path.display(),
                weights_advice(name, &key.path)
            ))
        })?;
    tracing::info!(model = name, path = %key.path.display(), load_ms = started.elapsed().as_millis() as u64, "local model loaded");
    Ok(model)
}

/// A missing or non-GGUF file gets a message naming the fix before
/// llama.cpp is asked to load it.
pub(crate) fn check_weights(name: &str, path: &Path) -> Result<(), ModelError> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic));
    match read {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ModelError::MissingWeights {
            model: name.to_string(),
            path: path.display().to_string(),
            advice: weights_advice(name, path),
        }),
        Err(e) => Err(ModelError::Local {
            model: name.to_string(),
            reason: format!("cannot read {}: {e}", path.display()),
        }),
        Ok(()) if &magic != b"GGUF" => Err(ModelError::Local {
            model: name.to_string(),
            reason: format!(
                "{} is not a GGUF file. {}",
                path.display(),
                weights_advice(name, path)
            ),
        }),
        Ok(()) => Ok(()),
    }
}

/// What to do about unusable weights at `path`. `fettle model fetch`
/// installs the default model (SmolLM2) at the model's configured path, so
/// it is the fix only when that path is the default one; for a custom path
/// it would save SmolLM2 under the custom name.
pub(crate) fn weights_advice(name: &str, path: &Path) -> String {
    let default = crate::config::expand_home(crate::config::DEFAULT_LOCAL_MODEL_PATH);
    if path == default {
        let set_path = format!("or set models.{name}.path to a GGUF model you have");
        return if name == crate::config::BUILTIN_MODEL {
            format!("Run `fettle model fetch` to install the default model, {set_path}")
        } else {
            format!("Run `fettle model fetch --model {name}` to install the default model there, {set_path}")
        };
    }
    // A model Fettle knows by name, at its own file name: the named fetch.
    let file = path
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default();
    if let Some(known) = super::catalog::CATALOG.iter().find(|m| m.file == file) {
        let dest = match path.parent() == default.parent() {
            true => String::new(),
            false => format!(" --dest {}", path.display()),
        };
        return format!(
            "Install it with `fettle model fetch {}{dest}` ({} MB, checksums verified)",
            known.name,
            known.bytes / 1_000_000
        );
    }
    let mut advice = format!(
        "Check models.{name}.path (it names a custom file), or download a GGUF model to it with \
         `fettle model fetch --model {name} --url <URL of the .gguf>`"
    );
    if name == crate::config::BUILTIN_MODEL {
        advice.push_str(
            "; to use the default model instead, remove models.local.path and run `fettle model fetch`",
        );
    }
    advice
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_named_model_is_installed_by_its_name() {
        let home = crate::config::expand_home("~/.cache/fettle/models");
        let builtin = home.join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
        assert_eq!(
            weights_advice("qwen2.5-coder-1.5b", &builtin),
            "Install it with `fettle model fetch qwen2.5-coder-1.5b` (1117 MB, checksums verified)"
        );
        let elsewhere = PathBuf::from("/models/qwen2.5-coder-0.5b-instruct-q4.gguf");
        assert!(weights_advice("coder", &elsewhere).ends_with(
            "`fettle model fetch qwen2.5-coder-0.5b --dest /models/qwen2.5-coder-0.5b-instruct-q4.gguf` (491 MB, checksums verified)"
        ));
        assert!(weights_advice("mine", &PathBuf::from("/m/mine.gguf")).contains("--url"));
    }

    #[test]
    fn background_work_gets_its_own_engine() {
        let key = |background| EngineKey {
            path: PathBuf::from("/nonexistent/model.gguf"),
            context_tokens: 512,
            threads: 1,
            background,
        };
        let interactive = Engine::shared("m", key(false));
        let again = Engine::shared("m", key(false));
        let background = Engine::shared("m", key(true));
        assert!(Arc::ptr_eq(&interactive, &again));
        assert!(!Arc::ptr_eq(&interactive, &background));
    }
}
