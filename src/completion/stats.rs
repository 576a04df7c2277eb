//! Completion statistics, kept in memory and never sent anywhere: what was
//! shown, what was accepted, cache hits, and latency split into the
//! server's own overhead and the time spent waiting for the model.
use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use crate::latency::{Percentiles, Samples};

/// Ids of shown suggestions remembered for acceptance.
const SHOWN_IDS: usize = 512;

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
    empty: u64,
    cancelled: u64,
    errors: u64,
    server: Samples,
    model: Samples,
    total: Samples,
    cache_hit: Samples,
    shown_ids: VecDeque<String>,
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
}

impl Stats {
    /// Records a finished request. `model` is the time spent waiting for
    /// the model; `total` the whole request.
    pub fn record(&mut self, outcome: Outcome, total: Duration, model: Duration) {
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
        self.total.push(total);
        self.server.push(total.saturating_sub(model));
        if !model.is_zero() {
            self.model.push(model);
        }
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
            empty: self.empty,
            cancelled: self.cancelled,
            errors: self.errors,
            server_overhead_ms: self.server.percentiles(),
            model_ms: self.model.percentiles(),
            end_to_end_ms: self.total.percentiles(),
            cache_hit_ms: self.cache_hit.percentiles(),
        }
    }
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
            );
            s.shown_id(format!("c{i}"));
        }
        s.record(Outcome::Cancelled, Duration::from_secs(9), Duration::ZERO);
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
}
