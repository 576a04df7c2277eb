//! Where the protocol layer's time goes, for the message that matters most:
//! `textDocument/inlineCompletion` (shown in `fettle/stats` around the
//! engine's own stages).
use std::time::Duration;

use parking_lot::Mutex;

use crate::completion::stats::StageReport;
use crate::latency::Samples;

#[derive(Clone, Copy)]
pub enum Stage {
    /// The frame's first byte at hand → its whole body read.
    Read,
    /// The body parsed as JSON-RPC.
    Parse,
    /// Routed, its params decoded, the handler's future built.
    Dispatch,
    /// The handler, start to answer (the engine's stages are inside).
    Handler,
    /// The answer serialized and framed.
    Serialize,
    /// Handed to the writer → written to stdout.
    Write,
}

const STAGES: [(Stage, &str); 6] = [
    (Stage::Read, "read"),
    (Stage::Parse, "parse"),
    (Stage::Dispatch, "dispatch"),
    (Stage::Handler, "handler"),
    (Stage::Serialize, "serialize"),
    (Stage::Write, "write"),
];

/// One process, one stdio transport: the samples are process-wide.
static SAMPLES: Mutex<[Samples; 6]> = Mutex::new([const { Samples::new() }; 6]);

pub fn record(stage: Stage, took: Duration) {
    SAMPLES.lock()[stage as usize].push(took);
}

/// The stages before the handler's work, and those from it on.
pub fn report() -> (Vec<StageReport>, Vec<StageReport>) {
    let samples = SAMPLES.lock();
    let mut all: Vec<StageReport> = STAGES
        .iter()
        .map(|(stage, name)| StageReport {
            stage: name,
            ms: samples[*stage as usize].percentiles(),
        })
        .collect();
    let after = all.split_off(Stage::Handler as usize);
    (all, after)
}
