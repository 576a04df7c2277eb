//! The embedded llama.cpp runtime: one dedicated thread per loaded model,
//! fed through a channel, that keeps its KV cache between requests.
//!
//! Every request's prompt is tokenized with the model's own vocabulary and
//! compared with the tokens already in the KV cache: the longest common
//! prefix is kept, only what diverged is dropped, and only the new tokens
//! are evaluated. With suffix-first FIM prompts, a keystroke changes only
//! the end of the prompt, so a warm request costs a handful of tokens
//! instead of the whole prompt.
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::mpsc::UnboundedSender;

use super::slots::{Cached, Parked, MAX_SEQUENCES};
use super::text::{StopMatcher, StopStep, Utf8Assembler};
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

/// Prompt tokens evaluated per `decode` call; also the cancellation
/// granularity during a long prefill.
const PREFILL_CHUNK: usize = 256;
/// A warm-up's chunk: a real request that arrives meanwhile waits for at
/// most one (~0.15 s on two cores) before the warm-up yields. Smaller
/// chunks evaluate more slowly (24: ~150 tokens/s against ~250 for 256).
const WARM_CHUNK: usize = 32;

struct Session<'m> {
    name: String,
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    /// The sequence in use: its tokens (exactly those whose KV entries are
    /// in `active.seq`, in order) and the body of the prompt they came from.
    active: Cached<LlamaToken>,
    /// The other sequences' cached prompts (other files, the chat lane).
    parked: Parked<LlamaToken>,
    /// Prompt tokens evaluated per second, measured (a moving average).
    prefill_speed: Option<f64>,
    /// A warm-up that yielded to a real job, to go on with afterwards.
    resume: Option<Job>,
    n_ctx: usize,
}

/// Until a prefill has been measured: this model on two cores (llama-bench
/// pp512 ≈ 250 tokens/s), a little under.
const ASSUMED_PREFILL_SPEED: f64 = 200.0;
/// However tight the target, a request may add this many tokens (a line
/// or two of code: without it a suggestion has nothing to go on).
const MIN_NEW_TOKENS: usize = 48;
/// Prefills shorter than this say little about the speed.
const MIN_MEASURED_TOKENS: usize = 32;
/// The sequence key of chat jobs (edits, the agent on this engine).
const CHAT_LANE: &str = "\0chat";
/// The sequence key of warm-ups (one at a time, whatever the file; the
/// sequence takes its file's key once complete).
const WARM_LANE: &str = "\0warm";

impl<'m> Session<'m> {
    fn new(name: &str, key: &EngineKey, model: &'m LlamaModel) -> Result<Self, ModelError> {
        let threads = if key.threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            key.threads as usize
        };
        let threads = i32::try_from(threads).unwrap_or(i32::MAX);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(key.context_tokens))
            .with_n_batch(PREFILL_CHUNK as u32)
            .with_n_ubatch(PREFILL_CHUNK as u32)
            .with_n_threads(threads)
            .with_n_threads_batch(threads)
            // One KV sequence per recently used file; unified, so that
            // they share the `context_tokens` cells (see slots.rs).
            .with_n_seq_max(MAX_SEQUENCES as u32)
            .with_kv_unified(true);
        let backend = backend().map_err(|reason| ModelError::Local {
            model: name.to_string(),
            reason,
        })?;
        let ctx = model
            .new_context(backend, params)
            .map_err(|e| ModelError::Local {
                model: name.to_string(),
                reason: format!(
                    "cannot create a context of {} tokens: {e} (models.{name}.context_tokens)",
                    key.context_tokens
                ),
            })?;
        let n_ctx = ctx.n_ctx() as usize;
        Ok(Self {
            name: name.to_string(),
            model,
            ctx,
            active: Cached::new(0, CHAT_LANE),
            parked: Parked::new(),
            prefill_speed: None,
            resume: None,
            n_ctx,
        })
    }

    fn error(&self, reason: impl Into<String>) -> ModelError {
        ModelError::Local {
            model: self.name.clone(),
            reason: reason.into(),
        }
    }

    /// Runs one job. `Err(None)` means it was cancelled (nobody to tell).
    fn generate(&mut self, job: Job, shared: &Shared) -> Result<RequestStats, Option<ModelError>> {
        let started = Instant::now();
        let vocab = self.model.vocab();
        // The prompt builder is consumed; the rest of the job stays usable.
        let Prompt {
            text,
            mut stop,
            body,
        } = (job.prompt)(&Vocabulary { model: self.model });
        let slot = job.slot.as_deref().unwrap_or(CHAT_LANE).to_owned();
        let warm = job.warm.is_some();
        // A warm-up fills a sequence of its own, which replaces the file's
        // only once complete: one that yields half-way to a keystroke must
        // not have thrown away the prompt the keystroke continues.
        let lane = if warm { WARM_LANE } else { slot.as_str() };
        self.switch_to(lane);
        let add_bos = vocab.should_add_bos();
        let (mut text, body, tokens) = match (job.latency_target, body) {
            (Some(target), Some(body)) if body.start <= body.end && body.end <= text.len() => {
                let speed = self.prefill_speed.unwrap_or(ASSUMED_PREFILL_SPEED);
                let cap = ((speed * target.as_secs_f64()) as usize).max(MIN_NEW_TOKENS);
                let tokenize =
                    |s: &str, first: bool| vocab.tokenize(s.as_bytes(), first && add_bos, true);
                let count = |s: &str| shared.count(self.model, s);
                let fitted = super::fit::fit(
                    &text,
                    body,
                    &self.active.tokens,
                    self.active.body.as_deref(),
                    &tokenize,
                    &count,
                    cap,
                );
                if fitted.text.len() < text.len() {
                    tracing::debug!(model = %self.name, cap, kept = fitted.body.len(), estimated_new = fitted.new_tokens, "completion prompt fitted to the latency target");
                }
                (fitted.text, Some(fitted.body), fitted.tokens)
            }
            (_, body) => {
                let kept = body.and_then(|b| text.get(b)).map(str::to_owned);
                (text, kept, None)
            }
        };
        let prompt = tokens.unwrap_or_else(|| vocab.tokenize(text.as_bytes(), add_bos, true));
        if prompt.is_empty() {
            return Err(Some(self.error("empty prompt")));
        }
        let room = self.n_ctx.saturating_sub(job.max_tokens as usize);
        if prompt.len() > room {
            return Err(Some(self.error(format!(
                "the prompt is {} tokens; with max_tokens {} it does not fit the context of {} tokens (models.{}.context_tokens)",
                prompt.len(),
                job.max_tokens,
                self.n_ctx,
                self.name
            ))));
        }

        if warm {
            self.seed_from(&slot, &prompt);
        }
        // Keep the longest common prefix; at least the last prompt token is
        // evaluated again because its logits are needed.
        let common = self
            .active
            .tokens
            .iter()
            .zip(&prompt)
            .take_while(|(a, b)| a == b)
            .count()
            // A warm-up needs no logits: a prompt all cached is done.
            .min(prompt.len() - usize::from(job.warm.is_none()));
        if common < self.active.tokens.len() {
            let pos = u32::try_from(common).unwrap_or(u32::MAX);
            let seq_id = u32::try_from(self.active.seq).unwrap_or(0);
            match self.ctx.clear_kv_cache_seq(Some(seq_id), Some(pos), None) {
                Ok(true) => self.active.tokens.truncate(common),
                // The cache could not drop a tail (some architectures):
                // start over rather than decode on top of stale entries.
                _ => self.clear_all(),
            }
        }
        // Cells for the new tokens and the answer: parked prompts go first.
        let need = prompt.len() - self.active.tokens.len() + job.max_tokens as usize;
        for seq in self
            .parked
            .make_room(need, self.active.tokens.len(), self.n_ctx)
        {
            self.clear_sequence(seq);
        }
        let reused = self.active.tokens.len();
        let seq = self.active.seq;
        // Set before the prefill: a warm-up that yields half-way has still
        // cached this body's beginning.
        let mut body_range = body
            .as_deref()
            .and_then(|b| text.rfind(b).map(|start| start..start + b.len()));
        self.active.body = body;

        let chunk_size = if warm { WARM_CHUNK } else { PREFILL_CHUNK };
        let mut batch = LlamaBatch::new(PREFILL_CHUNK.max(1), 1);
        let mut last_index = 0;
        let todo: Vec<LlamaToken> = prompt[reused..].to_vec();
        let mut yielded = false;
        for (chunk_no, chunk) in todo.chunks(chunk_size).enumerate() {
            if warm && shared.warm_outdated(job.warm) {
                // What is evaluated so far stays cached; unless a newer
                // warm-up replaces it, this one goes on after the real
                // jobs, from there (its prompt as fitted, not fitted again).
                yielded = true;
                let (text, stop) = (std::mem::take(&mut text), std::mem::take(&mut stop));
                let body = body_range.take();
                self.resume = Some(Job {
                    prompt: Box::new(move |_| Prompt { text, stop, body }),
                    max_tokens: job.max_tokens,
                    temperature: job.temperature,
                    deadline: job.deadline,
                    limit: job.limit,
                    latency_target: None,
                    slot: job.slot.clone(),
                    warm: job.warm,
                    out: job.out.clone(),
                });
                break;
            }
            if !warm && job.out.is_closed() {
                return Err(None);
            }
            if Instant::now() >= job.deadline {
                return Err(Some(self.timeout(job.limit)));
            }
            batch.clear();
            let is_last_chunk = (chunk_no + 1) * chunk_size >= todo.len();
            for (i, token) in chunk.iter().enumerate() {
                let pos = (self.active.tokens.len() + i) as i32;
                let logits = !warm && is_last_chunk && i + 1 == chunk.len();
                batch
                    .add(*token, pos, &[seq], logits)
                    .map_err(|e| Some(self.error(format!("batch: {e}"))))?;
            }
            self.decode(&mut batch)?;
            self.active.tokens.extend_from_slice(chunk);
            last_index = batch.n_tokens() - 1;
        }
        let prefill = started.elapsed();
        let evaluated = self.active.tokens.len() - reused;
        if warm {
            if !yielded {
                // Complete: it becomes the file's cached prompt.
                if let Some(seq) = self.parked.remove(&slot) {
                    self.clear_sequence(seq);
                }
                self.active.key = slot;
            }
            // No answer: the prompt is in the cache for the request to come.
            return Ok(RequestStats {
                prompt_tokens: self.active.tokens.len(),
                reused_tokens: reused,
                prefill,
                total: prefill,
                ..RequestStats::default()
            });
        }
        // Known now, and kept even if the caller stops reading early (a
        // single-line completion drops the stream at the first newline).
        *shared.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(RequestStats {
            prompt_tokens: prompt.len(),
            reused_tokens: reused,
            prefill,
            first_token: prefill,
            total: prefill,
            ..RequestStats::default()
        });
        if evaluated >= MIN_MEASURED_TOKENS {
            let measured = evaluated as f64 / prefill.as_secs_f64().max(1e-3);
            self.prefill_speed = Some(match self.prefill_speed {
                Some(speed) => 0.7 * speed + 0.3 * measured,
                None => measured,
            });
        }

        let mut sampler = sampler(job.temperature);
        let mut utf8 = Utf8Assembler::default();
        let mut stops = StopMatcher::new(&stop);
        let mut generated = 0usize;
        let mut first_token = None;
        // The answer so far (its end), to notice a model stuck in a loop.
        let mut tail = String::new();
        let mut reason = StopReason::MaxTokens;
        while generated < job.max_tokens as usize {
            if job.out.is_closed() {
                return Err(None);
            }
            if Instant::now() >= job.deadline {
                return Err(Some(self.timeout(job.limit)));
            }
            let token = sampler.sample(&self.ctx, last_index);
            sampler.accept(token);
            generated += 1;
            if vocab.is_eog(token) {
                reason = StopReason::EndTurn;
                break;
            }
            let piece = utf8.push(&vocab.token_to_piece(token, false, None));
            let step = stops.push(&piece);
            let (text, stop) = match step {
                StopStep::Continue(t) => (t, false),
                StopStep::Stop(t) => (t, true),
            };
            let line_ended = text.contains('\n');
            tail.push_str(&text);
            if !text.is_empty() {
                first_token.get_or_insert_with(|| started.elapsed());
                if job.out.send(Ok(Output::Text(text))).is_err() {
                    return Err(None);
                }
            }
            if stop {
                reason = StopReason::StopSequence;
                break;
            }
            if line_ended && decode_budget_spent(job.latency_target, started.elapsed()) {
                // A suggestion of whole lines now beats more lines later.
                break;
            }
            if line_ended {
                if tail.len() > REPEAT_WINDOW_BYTES * 2 {
                    let mut cut = tail.len() - REPEAT_WINDOW_BYTES;
                    while !tail.is_char_boundary(cut) {
                        cut += 1;
                    }
                    tail.drain(..cut);
                }
                if repeating(&tail) {
                    // Seconds of the same lines again help nobody.
                    tracing::info!(generated, "the model repeats itself; stopped");
                    reason = StopReason::EndTurn;
                    break;
                }
            }
            if self.active.tokens.len() + 1 >= self.n_ctx {
                break; // context full: report MaxTokens
            }
            batch.clear();
            batch
                .add(token, self.active.tokens.len() as i32, &[seq], true)
                .map_err(|e| Some(self.error(format!("batch: {e}"))))?;
            self.decode(&mut batch)?;
            self.active.tokens.push(token);
            last_index = batch.n_tokens() - 1;
        }
        if reason != StopReason::StopSequence {
            let tail = stops.finish();
            if !tail.is_empty() {
                let _ = job.out.send(Ok(Output::Text(tail)));
            }
        }
        let usage = Usage {
            input_tokens: prompt.len() as u64,
            output_tokens: generated as u64,
        };
        let _ = job.out.send(Ok(Output::Done { usage, reason }));
        Ok(RequestStats {
            prompt_tokens: prompt.len(),
            reused_tokens: reused,
            generated_tokens: generated,
            prefill,
            first_token: first_token.unwrap_or_else(|| started.elapsed()),
            total: started.elapsed(),
            cancelled_jobs: 0,
            warmed_tokens: 0,
        })
    }

    fn decode(&mut self, batch: &mut LlamaBatch) -> Result<(), Option<ModelError>> {
        if let Err(e) = self.ctx.decode(batch) {
            // The cache may hold part of the batch now; forget it all so the
            // next request starts from a known state.
            self.clear_all();
            return Err(Some(self.error(format!("llama.cpp decode failed: {e}"))));
        }
        Ok(())
    }

    /// Before a warm-up of `slot` evaluates `prompt` in its own sequence:
    /// if the file's sequence shares more of `prompt` (the head, typically)
    /// than the warm-up's own, its entries are copied over instead of being
    /// evaluated again.
    fn seed_from(&mut self, slot: &str, prompt: &[LlamaToken]) {
        let Some(source) = self.parked.find(slot) else {
            return;
        };
        let shared = common_prefix(&source.tokens, prompt);
        if shared <= common_prefix(&self.active.tokens, prompt) {
            return;
        }
        let (from, to) = (source.seq, self.active.seq);
        let tokens = source.tokens[..shared].to_vec();
        self.clear_sequence(to);
        if self.parked.find(slot).is_none() {
            return; // the whole cache had to be cleared
        }
        let end = u32::try_from(shared).unwrap_or(u32::MAX);
        if self
            .ctx
            .copy_kv_cache_seq(from, to, Some(0), Some(end))
            .is_ok()
        {
            self.active.tokens = tokens;
        } else {
            self.active.tokens.clear();
        }
    }

    /// Makes the sequence for `key` the active one (see slots.rs).
    fn switch_to(&mut self, key: &str) {
        let active = std::mem::replace(&mut self.active, Cached::new(0, key));
        let (active, cleared) = self.parked.switch(active, key);
        self.active = active;
        for seq in cleared {
            self.clear_sequence(seq);
        }
    }

    /// Drops one sequence's KV entries (the whole cache if that fails).
    fn clear_sequence(&mut self, seq: i32) {
        let seq_id = u32::try_from(seq).unwrap_or(0);
        if !matches!(
            self.ctx.clear_kv_cache_seq(Some(seq_id), None, None),
            Ok(true)
        ) {
            self.clear_all();
        }
    }

    /// Forgets every cached prompt.
    fn clear_all(&mut self) {
        self.ctx.clear_kv_cache();
        self.active.tokens.clear();
        self.active.body = None;
        self.parked.clear();
    }

    fn timeout(&self, limit: Duration) -> ModelError {
        ModelError::Timeout {
            model: self.name.clone(),
            url: "the local model".to_string(),
            what: "complete answer",
            key: "total_timeout_ms",
            limit,
        }
    }
}

fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A completion (a request with a latency target) stops at the end of a
/// line once it has taken this many latency targets in all, prefill
/// included: long multi-line answers made the p90 latency (seconds of
/// decoding on a laptop CPU: a p90 of 4–16 s at 30 positions), and what is
/// shown first is the first lines anyway. One target: the target covers
/// decoding, not only prefill (at three, Qwen2.5-Coder-0.5B's first
/// completion p50 was 0.64 s at 200 Python positions; see
/// `docs/performance.md`).
const DECODE_BUDGET_TARGETS: u32 = 1;

/// Whether a completion has spent its decode budget; it then stops at the
/// next line end (a code tokenizer's piece is often a line break and the
/// next line's indentation: whitespace the post-processing drops).
fn decode_budget_spent(target: Option<Duration>, elapsed: Duration) -> bool {
    target.is_some_and(|t| elapsed >= t * DECODE_BUDGET_TARGETS)
}

/// How much of the answer's end [`repeating`] looks at.
const REPEAT_WINDOW_BYTES: usize = 2048;
/// The least text a repetition must span to count: short lines (`}`,
/// blank lines, `end`) repeat legitimately.
const REPEAT_MIN_BYTES: usize = 90;

/// Whether `text` ends with a block of one or more whole lines written
/// three times in a row, spanning at least [`REPEAT_MIN_BYTES`]: a small
/// model in a loop (seen: the same sentence until the token limit).
fn repeating(text: &str) -> bool {
    let lines: Vec<&str> = text.trim_end_matches('\n').split('\n').collect();
    let n = lines.len();
    (1..=n / 3).any(|block| {
        let last = &lines[n - block..];
        let span: usize = last.iter().map(|l| l.len() + 1).sum::<usize>() * 3;
        span >= REPEAT_MIN_BYTES
            && last.iter().any(|l| !l.trim().is_empty())
            && lines[n - 2 * block..n - block] == *last
            && lines[n - 3 * block..n - 2 * block] == *last
    })
}

/// Greedy at temperature 0 (deterministic completions); otherwise the usual
/// top-k → top-p → temperature → random pick.
fn sampler(temperature: f32) -> LlamaSampler {
    if temperature <= 0.0 {
        return LlamaSampler::greedy();
    }
    LlamaSampler::chain_simple([
        LlamaSampler::top_k(40),
        LlamaSampler::top_p(0.95, 1),
        LlamaSampler::temp(temperature),
        LlamaSampler::dist(fastrand::u32(..)),
    ])
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
    fn a_block_written_three_times_in_a_row_is_a_loop() {
        let sentence = "To fix the function, change the formula so it adds 32.\n";
        assert!(!repeating(&sentence.repeat(2)));
        assert!(repeating(&sentence.repeat(3)));
        let block = "total = total + value\ncount = count + 1\nmean = total / count\n";
        assert!(repeating(&format!("Intro.\n{}", block.repeat(3))));
        assert!(!repeating(&format!("Intro.\n{}", block.repeat(2))));
        // Short lines repeat in real code.
        assert!(!repeating("    }\n    }\n    }\n"));
        assert!(!repeating("\n\n\n\n\n\n"));
        // Repeated, but not at the end: the model moved on.
        assert!(!repeating(&format!(
            "{}done, and here is why it works.\n",
            sentence.repeat(3)
        )));
    }

    #[test]
    fn a_completion_s_decode_budget_is_its_latency_target() {
        let target = Some(Duration::from_millis(400));
        let ms = Duration::from_millis;
        assert!(!decode_budget_spent(target, ms(399)));
        assert!(decode_budget_spent(target, ms(400)));
        // Chat and the agent have no latency target: never cut.
        assert!(!decode_budget_spent(None, ms(60_000)));
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
