//! llama.cpp server's native `/completion` and `/infill`.
use serde_json::{json, Value};

use super::{stop_reason, Ctx, Event, StreamPlan};
use crate::mock::script::ScriptedResponse;

/// The closing object: `stop: true`, the stop type (llama.cpp's `eos`,
/// `limit`, `word`; the script's `stop_reason` overrides it) and the counts.
fn last(resp: &ScriptedResponse, ctx: &Ctx, content: String) -> Value {
    let usage = resp.usage_or_default();
    json!({
        "index": 0,
        "content": content,
        "stop": true,
        "stop_type": stop_reason(resp, "eos"),
        "model": ctx.model,
        "tokens_predicted": usage.output_tokens,
        "tokens_evaluated": usage.input_tokens,
        "truncated": false,
    })
}

pub(super) fn whole(resp: &ScriptedResponse, ctx: &Ctx) -> Value {
    last(resp, ctx, resp.whole_text())
}

pub(super) fn stream(resp: &ScriptedResponse, ctx: &Ctx) -> StreamPlan {
    let events = resp
        .stream_pieces()
        .into_iter()
        .map(|piece| Event::data(json!({ "index": 0, "content": piece, "stop": false }), true))
        .collect();
    StreamPlan {
        events,
        terminal: Event::data(last(resp, ctx, String::new()), false),
    }
}
