//! Latency samples in a sliding window, and their percentiles (for the
//! local statistics of `fettle/stats`).
use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

/// Latency samples kept per series.
const WINDOW: usize = 2000;

#[derive(Default)]
pub struct Samples(VecDeque<f64>);

impl Samples {
    pub const fn new() -> Self {
        Samples(VecDeque::new())
    }

    pub fn push(&mut self, d: Duration) {
        if self.0.len() == WINDOW {
            self.0.pop_front();
        }
        self.0.push_back(d.as_secs_f64() * 1000.0);
    }

    pub fn percentiles(&self) -> Percentiles {
        let mut v: Vec<f64> = self.0.iter().copied().collect();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| -> Option<f64> {
            if v.is_empty() {
                return None;
            }
            let i = ((v.len() as f64 - 1.0) * q).round() as usize;
            v.get(i).map(|x| (x * 1000.0).round() / 1000.0)
        };
        Percentiles {
            count: v.len(),
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
        }
    }
}

/// Milliseconds; `None` until there are samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: usize,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
}
