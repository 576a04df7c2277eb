//! OpenAI chat completions (also Mistral chat/FIM and llama.cpp's
//! OpenAI-compatible chat) and legacy text completions.
use serde_json::{json, Map, Value};

use super::{stop_reason, Ctx, Event, StreamPlan};
use crate::mock::script::{split_arguments, MockToolCall, MockUsage, ScriptedResponse};

fn usage_json(u: MockUsage) -> Value {
    json!({
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
    })
}

fn call_id(call: &MockToolCall, ctx: &Ctx, index: usize) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| format!("call_{}_{index}", ctx.seq))
}

fn chat_finish(resp: &ScriptedResponse) -> String {
    stop_reason(
        resp,
        if resp.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        },
    )
}

pub(super) fn chat_whole(resp: &ScriptedResponse, ctx: &Ctx) -> Value {
    let text = resp.whole_text();
    let mut message = Map::new();
    message.insert("role".into(), "assistant".into());
    let content = if text.is_empty() && !resp.tool_calls.is_empty() {
        Value::Null
    } else {
        Value::String(text)
    };
    message.insert("content".into(), content);
    if !resp.tool_calls.is_empty() {
        let calls: Vec<Value> = resp
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                json!({
                    "id": call_id(call, ctx, i),
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments_text() },
                })
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    json!({
        "id": format!("chatcmpl-mock-{}", ctx.seq),
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": chat_finish(resp),
        }],
        "usage": usage_json(resp.usage_or_default()),
    })
}

fn chat_chunk(ctx: &Ctx, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": format!("chatcmpl-mock-{}", ctx.seq),
        "object": "chat.completion.chunk",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
    })
}

/// The closing chunks: the one with `finish_reason`, and usage either as
/// its own chunk with empty `choices` (when the request asked for
/// `stream_options.include_usage`, as OpenAI does) or on the finish chunk
/// itself (as Mistral and llama.cpp do).
fn closing(ctx: &Ctx, mut finish_chunk: Value, usage: MockUsage, object: &str) -> Vec<Event> {
    if ctx.include_usage {
        let usage_chunk = json!({
            "id": finish_chunk.get("id").cloned().unwrap_or(Value::Null),
            "object": object,
            "created": ctx.created,
            "model": ctx.model,
            "choices": [],
            "usage": usage_json(usage),
        });
        vec![
            Event::data(finish_chunk, false),
            Event::data(usage_chunk, false),
        ]
    } else {
        if let Some(obj) = finish_chunk.as_object_mut() {
            obj.insert("usage".into(), usage_json(usage));
        }
        vec![Event::data(finish_chunk, false)]
    }
}

fn done() -> Event {
    Event {
        name: None,
        data: "[DONE]".to_string(),
        counted: false,
    }
}

pub(super) fn chat_stream(resp: &ScriptedResponse, ctx: &Ctx) -> StreamPlan {
    let mut events = vec![Event::data(
        chat_chunk(ctx, json!({ "role": "assistant", "content": "" }), None),
        false,
    )];
    for piece in resp.stream_pieces() {
        events.push(Event::data(
            chat_chunk(ctx, json!({ "content": piece }), None),
            true,
        ));
    }
    for (i, call) in resp.tool_calls.iter().enumerate() {
        let start = json!({ "tool_calls": [{
            "index": i,
            "id": call_id(call, ctx, i),
            "type": "function",
            "function": { "name": call.name, "arguments": "" },
        }]});
        events.push(Event::data(chat_chunk(ctx, start, None), false));
        for piece in split_arguments(&call.arguments_text()) {
            let delta =
                json!({ "tool_calls": [{ "index": i, "function": { "arguments": piece } }] });
            events.push(Event::data(chat_chunk(ctx, delta, None), true));
        }
    }
    let finish = chat_finish(resp);
    let finish_chunk = chat_chunk(ctx, json!({}), Some(&finish));
    events.extend(closing(
        ctx,
        finish_chunk,
        resp.usage_or_default(),
        "chat.completion.chunk",
    ));
    StreamPlan {
        events,
        terminal: done(),
    }
}

fn completion_finish(resp: &ScriptedResponse) -> String {
    stop_reason(resp, "stop")
}

pub(super) fn completions_whole(resp: &ScriptedResponse, ctx: &Ctx) -> Value {
    json!({
        "id": format!("cmpl-mock-{}", ctx.seq),
        "object": "text_completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{
            "text": resp.whole_text(),
            "index": 0,
            "logprobs": null,
            "finish_reason": completion_finish(resp),
        }],
        "usage": usage_json(resp.usage_or_default()),
    })
}

fn completion_chunk(ctx: &Ctx, text: &str, finish: Option<&str>) -> Value {
    json!({
        "id": format!("cmpl-mock-{}", ctx.seq),
        "object": "text_completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{ "text": text, "index": 0, "logprobs": null, "finish_reason": finish }],
    })
}

pub(super) fn completions_stream(resp: &ScriptedResponse, ctx: &Ctx) -> StreamPlan {
    let mut events: Vec<Event> = resp
        .stream_pieces()
        .iter()
        .map(|piece| Event::data(completion_chunk(ctx, piece, None), true))
        .collect();
    let finish = completion_finish(resp);
    events.extend(closing(
        ctx,
        completion_chunk(ctx, "", Some(&finish)),
        resp.usage_or_default(),
        "text_completion",
    ));
    StreamPlan {
        events,
        terminal: done(),
    }
}
