//! Completion statistics, kept in memory and never sent anywhere: what was
//! shown, what was accepted, cache hits, and latency split into the
//! server's own overhead and the time spent waiting for the model.
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::latency::{Percentiles, Samples};

/// Ids of shown suggestions remembered for acceptance.
const SHOWN_IDS: usize = 512;
/// The slowest requests kept whole, stage by stage: the tail's story,
/// which percentiles of each stage alone cannot tell.
const SLOWEST: usize = 5;

/// The engine's stages of a completion that asked the model, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Request in → the text at the cursor, the trigger's decision, the cache key.
    Locate,
    /// The prompt: context gathered, laid out, redacted.
    Context,
    /// The model request created → first running (in the request's own
    /// task: only the setting up).
    Spawn,
    /// The HTTP request built (body serialized) and handed to the client.
    Send,
    /// Sent → the response's headers.
    FirstByte,
    /// Headers → the last piece of the answer needed.
    Stream,
    /// The answer cleaned up into a suggestion.
    Postprocess,
    /// The model task finished → the request resumed.
    Join,
}

impl Stage {
    pub const ALL: [Stage; 8] = [
        Stage::Locate,
        Stage::Context,
        Stage::Spawn,
        Stage::Send,
        Stage::FirstByte,
        Stage::Stream,
        Stage::Postprocess,
        Stage::Join,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Locate => "locate",
            Stage::Context => "context",
            Stage::Spawn => "spawn",
            Stage::Send => "send",
            Stage::FirstByte => "firstByte",
            Stage::Stream => "stream",
            Stage::Postprocess => "postprocess",
            Stage::Join => "join",
        }
    }
}

/// How long each stage of one request took (the stages it reached).
#[derive(Clone, Copy, Debug, Default)]
pub struct StageTimes([Option<Duration>; Stage::ALL.len()]);

impl StageTimes {
    pub fn set(&mut self, stage: Stage, took: Duration) {
        self.0[stage as usize] = Some(took);
    }

    /// The time from `from` to `to`, when both are known.
    pub fn between(&mut self, stage: Stage, from: Option<Instant>, to: Option<Instant>) {
        if let (Some(from), Some(to)) = (from, to) {
            self.set(stage, to.saturating_duration_since(from));
        }
    }
}

/// One stage of one request in `fettle/stats`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageTime {
    pub stage: &'static str,
    pub ms: f64,
}

/// One stage's percentiles in `fettle/stats`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageReport {
    pub stage: &'static str,
    #[serde(flatten)]
    pub ms: Percentiles,
}

/// How one completion request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A suggestion was returned.
    Shown { from_cache: bool },
    /// Nothing worth showing (skipped, rejected by postprocessing, empty).
    Empty,
    /// Superseded, cancelled, or the document changed meanwhile.
    Cancelled,
    /// The model failed (the reason is logged).
    Error,
}

#[derive(Default)]
pub struct Stats {
    requests: u64,
    shown: u64,
    accepted: u64,
    cache_hits: u64,
    prepared_prompts: u64,
    empty: u64,
    cancelled: u64,
    errors: u64,
    server: Samples,
    model: Samples,
    total: Samples,
    cache_hit: Samples,
    stages: [Samples; Stage::ALL.len()],
    slowest: Vec<SlowRequest>,
    shown_ids: VecDeque<String>,
}

/// One of the slowest requests that asked the model, in `fettle/stats`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SlowRequest {
    /// Its place among the requests since the server started (1 = first).
    pub request: u64,
    /// Request received → response sent.
    pub total_ms: f64,
    /// Its stages in order, as in `stagesMs` (those it reached).
    pub stages: Vec<StageTime>,
    /// The time no stage accounts for (between them, around them).
    pub between_stages_ms: f64,
}

/// The `fettle/stats` answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub requests: u64,
    pub shown: u64,
    pub accepted: u64,
    /// accepted / shown, `None` before anything was shown.
    pub acceptance_rate: Option<f64>,
    pub cache_hits: u64,
    /// Requests that sent a prompt built ahead, after the edit's analysis.
    pub prepared_prompts: u64,
    pub empty: u64,
    pub cancelled: u64,
    pub errors: u64,
    /// Request received → response sent, minus the time waiting for the model.
    pub server_overhead_ms: Percentiles,
    /// Time waiting for the model (0 for cache hits; not sampled then).
    pub model_ms: Percentiles,
    /// Request received → response sent.
    pub end_to_end_ms: Percentiles,
    /// Request received → response sent, for answers from the cache.
    pub cache_hit_ms: Percentiles,
    /// Where the time of the requests that asked the model went, stage by
    /// stage in order (the protocol layer adds its own around these).
    pub stages_ms: Vec<StageReport>,
    /// The slowest requests that asked the model, slowest first.
    pub slowest: Vec<SlowRequest>,
}

impl Stats {
    /// Records a finished request. `model` is the time spent waiting for
    /// the model; `total` the whole request; `stages` its breakdown (kept
    /// for answers from the model only).
    pub fn record(
        &mut self,
        outcome: Outcome,
        total: Duration,
        model: Duration,
        stages: &StageTimes,
    ) {
        self.requests += 1;
        match outcome {
            Outcome::Shown { from_cache } => {
                self.shown += 1;
                if from_cache {
                    self.cache_hits += 1;
                }
            }
            Outcome::Empty => self.empty += 1,
            Outcome::Cancelled => self.cancelled += 1,
            Outcome::Error => self.errors += 1,
        }
        if outcome == Outcome::Cancelled {
            return; // its timing says nothing about the server
        }
        if outcome == (Outcome::Shown { from_cache: true }) {
            self.cache_hit.push(total);
        }
        if outcome == (Outcome::Shown { from_cache: false }) {
            for (samples, took) in self.stages.iter_mut().zip(stages.0) {
                if let Some(took) = took {
                    samples.push(took);
                }
            }
            self.keep_if_slow(total, stages);
        }
        self.total.push(total);
        self.server.push(total.saturating_sub(model));
        if !model.is_zero() {
            self.model.push(model);
        }
    }

    /// Keeps the request among the slowest if it is one of them.
    fn keep_if_slow(&mut self, total: Duration, stages: &StageTimes) {
        let total_ms = ms(total);
        let full = self.slowest.len() == SLOWEST;
        if full && self.slowest.last().is_some_and(|s| s.total_ms >= total_ms) {
            return;
        }
        let stages: Vec<StageTime> = Stage::ALL
            .iter()
            .zip(stages.0)
            .filter_map(|(stage, took)| {
                Some(StageTime {
                    stage: stage.name(),
                    ms: ms(took?),
                })
            })
            .collect();
        let staged: f64 = stages.iter().map(|s| s.ms).sum();
        let slow = SlowRequest {
            request: self.requests,
            total_ms,
            stages,
            // Rounded as the rest (the sum of rounded values is not).
            between_stages_ms: ((total_ms - staged).max(0.0) * 1000.0).round() / 1000.0,
        };
        let at = self.slowest.partition_point(|s| s.total_ms >= total_ms);
        self.slowest.insert(at, slow);
        self.slowest.truncate(SLOWEST);
    }

    /// Counts a request that sent a prompt built ahead.
    pub fn prompt_prepared(&mut self) {
        self.prepared_prompts += 1;
    }

    /// Remembers the id of a shown suggestion, so acceptance can be checked.
    pub fn shown_id(&mut self, id: String) {
        if self.shown_ids.len() == SHOWN_IDS {
            self.shown_ids.pop_front();
        }
        self.shown_ids.push_back(id);
    }

    /// Counts an acceptance of `id`, once; unknown ids are ignored.
    pub fn accept(&mut self, id: &str) -> bool {
        match self.shown_ids.iter().position(|s| s == id) {
            Some(i) => {
                self.shown_ids.remove(i);
                self.accepted += 1;
                true
            }
            None => false,
        }
    }

    pub fn report(&self) -> Report {
        Report {
            requests: self.requests,
            shown: self.shown,
            accepted: self.accepted,
            acceptance_rate: (self.shown > 0).then(|| self.accepted as f64 / self.shown as f64),
            cache_hits: self.cache_hits,
            prepared_prompts: self.prepared_prompts,
            empty: self.empty,
            cancelled: self.cancelled,
            errors: self.errors,
            server_overhead_ms: self.server.percentiles(),
            model_ms: self.model.percentiles(),
            end_to_end_ms: self.total.percentiles(),
            cache_hit_ms: self.cache_hit.percentiles(),
            stages_ms: Stage::ALL
                .iter()
                .zip(&self.stages)
                .map(|(stage, samples)| StageReport {
                    stage: stage.name(),
                    ms: samples.percentiles(),
                })
                .collect(),
            slowest: self.slowest.clone(),
        }
    }
}

/// Milliseconds, to the microsecond (as the percentiles).
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_rates_and_percentiles() {
        let mut s = Stats::default();
        for i in 1..=100u64 {
            s.record(
                Outcome::Shown {
                    from_cache: i % 10 == 0,
                },
                Duration::from_millis(i + 10),
                Duration::from_millis(10),
                &StageTimes::default(),
            );
            s.shown_id(format!("c{i}"));
        }
        s.record(
            Outcome::Cancelled,
            Duration::from_secs(9),
            Duration::ZERO,
            &StageTimes::default(),
        );
        assert!(s.accept("c5"));
        assert!(!s.accept("c5"), "counted once");
        assert!(!s.accept("nope"));
        let r = s.report();
        assert_eq!(
            (r.requests, r.shown, r.accepted, r.cache_hits, r.cancelled),
            (101, 100, 1, 10, 1)
        );
        assert_eq!(r.acceptance_rate, Some(0.01));
        assert_eq!(r.server_overhead_ms.p50, Some(51.0));
        assert_eq!(r.server_overhead_ms.p99, Some(99.0));
        assert_eq!(
            r.end_to_end_ms.count, 100,
            "cancelled requests are not sampled"
        );
    }

    #[test]
    fn keeps_the_slowest_requests_whole() {
        let mut s = Stats::default();
        for ms in [3u64, 9, 1, 7, 5, 8, 2, 6] {
            let mut stages = StageTimes::default();
            stages.set(Stage::Locate, Duration::from_micros(250));
            stages.set(Stage::FirstByte, Duration::from_millis(ms - 1));
            s.record(
                Outcome::Shown { from_cache: false },
                Duration::from_millis(ms),
                Duration::from_millis(ms - 1),
                &stages,
            );
        }
        // A cache hit or a cancelled request is never among them.
        s.record(
            Outcome::Shown { from_cache: true },
            Duration::from_secs(1),
            Duration::ZERO,
            &StageTimes::default(),
        );
        let report = serde_json::to_value(s.report()).unwrap();
        let slowest: Vec<(u64, f64)> = report["slowest"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["request"].as_u64().unwrap(),
                    r["totalMs"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(slowest, [(2, 9.0), (6, 8.0), (4, 7.0), (8, 6.0), (5, 5.0)]);
        assert_eq!(
            report["slowest"][0]["stages"],
            serde_json::json!([{ "stage": "locate", "ms": 0.25 }, { "stage": "firstByte", "ms": 8.0 }])
        );
        assert_eq!(report["slowest"][0]["betweenStagesMs"], 0.75);
    }
}
