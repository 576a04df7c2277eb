//! Printing latency samples and `fettle/stats` percentiles, for the
//! benches that drive the real server over stdio.
use std::time::Duration;

use serde_json::Value;

/// One `fettle/stats` percentile object: `{ count, p50, p90, p99 }`.
pub fn percentiles(label: &str, p: &Value) {
    println!(
        "  {label}: p50 {} ms, p90 {} ms, p99 {} ms (n = {})",
        p["p50"], p["p90"], p["p99"], p["count"]
    );
}

/// Client-side samples: p50, p90, p99 and the maximum.
pub fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| {
        samples[((samples.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0
    };
    println!(
        "  {label}: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms (n = {})",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0),
        samples.len()
    );
}
