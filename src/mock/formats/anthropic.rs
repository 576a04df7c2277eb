//! The Anthropic Messages API.
use serde_json::{json, Value};

use super::{stop_reason, Ctx, Event, StreamPlan};
use crate::mock::script::{split_arguments, MockToolCall, ScriptedResponse};

fn call_id(call: &MockToolCall, ctx: &Ctx, index: usize) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| format!("toolu_mock_{}_{index}", ctx.seq))
}

fn message_id(ctx: &Ctx) -> String {
    format!("msg_mock_{}", ctx.seq)
}

fn finish(resp: &ScriptedResponse) -> String {
    stop_reason(
        resp,
        if resp.tool_calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        },
    )
}

pub(super) fn whole(resp: &ScriptedResponse, ctx: &Ctx) -> Value {
    let text = resp.whole_text();
    let mut content = Vec::new();
    if !text.is_empty() || resp.tool_calls.is_empty() {
        content.push(json!({ "type": "text", "text": text }));
    }
    for (i, call) in resp.tool_calls.iter().enumerate() {
        content.push(json!({
            "type": "tool_use",
            "id": call_id(call, ctx, i),
            "name": call.name,
            "input": call.arguments_value(),
        }));
    }
    let usage = resp.usage_or_default();
    json!({
        "id": message_id(ctx),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": finish(resp),
        "stop_sequence": null,
        "usage": { "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens },
    })
}

pub(super) fn stream(resp: &ScriptedResponse, ctx: &Ctx) -> StreamPlan {
    let usage = resp.usage_or_default();
    let mut events = vec![
        Event::named(
            "message_start",
            json!({
                "type": "message_start",
                "message": {
                    "id": message_id(ctx),
                    "type": "message",
                    "role": "assistant",
                    "model": ctx.model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": { "input_tokens": usage.input_tokens, "output_tokens": 1 },
                },
            }),
            false,
        ),
        Event::named("ping", json!({ "type": "ping" }), false),
    ];
    let pieces = resp.stream_pieces();
    let mut index = 0usize;
    if !pieces.is_empty() || resp.tool_calls.is_empty() {
        events.push(block_start(index, json!({ "type": "text", "text": "" })));
        for piece in pieces {
            events.push(Event::named(
                "content_block_delta",
                json!({
                    "type": "content_block_delta",
                    "index": index,
                    "delta": { "type": "text_delta", "text": piece },
                }),
                true,
            ));
        }
        events.push(block_stop(index));
        index += 1;
    }
    for (i, call) in resp.tool_calls.iter().enumerate() {
        events.push(block_start(
            index,
            json!({ "type": "tool_use", "id": call_id(call, ctx, i), "name": call.name, "input": {} }),
        ));
        for piece in split_arguments(&call.arguments_text()) {
            events.push(Event::named(
                "content_block_delta",
                json!({
                    "type": "content_block_delta",
                    "index": index,
                    "delta": { "type": "input_json_delta", "partial_json": piece },
                }),
                true,
            ));
        }
        events.push(block_stop(index));
        index += 1;
    }
    events.push(Event::named(
        "message_delta",
        json!({
            "type": "message_delta",
            "delta": { "stop_reason": finish(resp), "stop_sequence": null },
            "usage": { "output_tokens": usage.output_tokens },
        }),
        false,
    ));
    StreamPlan {
        events,
        terminal: Event::named("message_stop", json!({ "type": "message_stop" }), false),
    }
}

fn block_start(index: usize, block: Value) -> Event {
    Event::named(
        "content_block_start",
        json!({ "type": "content_block_start", "index": index, "content_block": block }),
        false,
    )
}

fn block_stop(index: usize) -> Event {
    Event::named(
        "content_block_stop",
        json!({ "type": "content_block_stop", "index": index }),
        false,
    )
}
