//! One loaded model's context: its KV cache kept between requests (the
//! longest common prefix of the cached and the new prompt reused), the
//! prefill in chunks that a cancellation or a real request can interrupt,
//! and the decoding loop with its stops (stop strings, a repetition, a
//! completion's latency budget, the time limit).

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::super::slots::{Cached, Parked, MAX_SEQUENCES};
use super::super::text::{StopMatcher, StopStep, Utf8Assembler};
use super::{backend, EngineKey, Job, Output, Prompt, RequestStats, Shared, Vocabulary};
use crate::model::{ModelError, StopReason, Usage};

/// Prompt tokens evaluated per `decode` call; also the cancellation
/// granularity during a long prefill.
const PREFILL_CHUNK: usize = 256;
/// A warm-up's chunk: a real request that arrives meanwhile waits for at
/// most one (~0.15 s on two cores) before the warm-up yields. Smaller
/// chunks evaluate more slowly (24: ~150 tokens/s against ~250 for 256).
const WARM_CHUNK: usize = 32;

pub(super) struct Session<'m> {
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
    pub(super) resume: Option<Job>,
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
    pub(super) fn new(
        name: &str,
        key: &EngineKey,
        model: &'m LlamaModel,
    ) -> Result<Self, ModelError> {
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
    pub(super) fn generate(
        &mut self,
        job: Job,
        shared: &Shared,
    ) -> Result<RequestStats, Option<ModelError>> {
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
                let fitted = super::super::fit::fit(
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
}
