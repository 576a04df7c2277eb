//! Ollama's native API: `/api/chat` and `/api/generate`, NDJSON streams.
use serde_json::{json, Map, Value};

use super::{stop_reason, Ctx, Event, StreamPlan};
use crate::mock::script::{MockUsage, ScriptedResponse};

/// A fixed `created_at`, so answers are reproducible.
pub(super) const CREATED_AT: &str = "2025-01-01T00:00:00.000000Z";

/// Ollama's tool calls: arguments as a JSON object (or, for an invalid
/// `arguments_raw`, a JSON string); an id only when the script gives one.
fn tool_calls(resp: &ScriptedResponse) -> Vec<Value> {
    resp.tool_calls
        .iter()
        .map(|call| {
            let mut out = Map::new();
            if let Some(id) = &call.id {
                out.insert("id".into(), Value::String(id.clone()));
            }
            out.insert(
                "function".into(),
                json!({ "name": call.name, "arguments": call.arguments_value() }),
            );
            Value::Object(out)
        })
        .collect()
}

fn message(content: &str, calls: Vec<Value>) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), "assistant".into());
    message.insert("content".into(), content.into());
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(message)
}

/// The fields of the closing (`done: true`) object, after `model` and `created_at`.
fn done_fields(resp: &ScriptedResponse, usage: MockUsage, out: &mut Map<String, Value>) {
    out.insert("done".into(), true.into());
    out.insert("done_reason".into(), stop_reason(resp, "stop").into());
    out.insert("total_duration".into(), 1_000_000u64.into());
    out.insert("load_duration".into(), 1_000u64.into());
    out.insert("prompt_eval_count".into(), usage.input_tokens.into());
    out.insert("prompt_eval_duration".into(), 100_000u64.into());
    out.insert("eval_count".into(), usage.output_tokens.into());
    out.insert("eval_duration".into(), 500_000u64.into());
}

fn head(ctx: &Ctx) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("model".into(), ctx.model.clone().into());
    out.insert("created_at".into(), CREATED_AT.into());
    out
}

pub(super) fn chat_whole(resp: &ScriptedResponse, ctx: &Ctx) -> Value {
    let mut out = head(ctx);
    out.insert(
        "message".into(),
        message(&resp.whole_text(), tool_calls(resp)),
    );
    done_fields(resp, resp.usage_or_default(), &mut out);
    Value::Object(out)
}

fn chat_line(ctx: &Ctx, message: Value) -> Value {
    let mut out = head(ctx);
    out.insert("message".into(), message);
    out.insert("done".into(), false.into());
    Value::Object(out)
}

pub(super) fn chat_stream(resp: &ScriptedResponse, ctx: &Ctx) -> StreamPlan {
    let mut events: Vec<Event> = resp
        .stream_pieces()
        .iter()
        .map(|piece| Event::data(chat_line(ctx, message(piece, Vec::new())), true))
        .collect();
    let calls = tool_calls(resp);
    if !calls.is_empty() {
        events.push(Event::data(chat_line(ctx, message("", calls)), true));
    }
    let mut last = head(ctx);
    last.insert("message".into(), message("", Vec::new()));
    done_fields(resp, resp.usage_or_default(), &mut last);
    StreamPlan {
        events,
        terminal: Event::data(Value::Object(last), false),
    }
}

pub(super) fn generate_whole(resp: &ScriptedResponse, ctx: &Ctx) -> Value {
    let mut out = head(ctx);
    out.insert("response".into(), resp.whole_text().into());
    done_fields(resp, resp.usage_or_default(), &mut out);
    Value::Object(out)
}

pub(super) fn generate_stream(resp: &ScriptedResponse, ctx: &Ctx) -> StreamPlan {
    let events = resp
        .stream_pieces()
        .iter()
        .map(|piece| {
            let mut line = head(ctx);
            line.insert("response".into(), piece.as_str().into());
            line.insert("done".into(), false.into());
            Event::data(Value::Object(line), true)
        })
        .collect();
    let mut last = head(ctx);
    last.insert("response".into(), "".into());
    done_fields(resp, resp.usage_or_default(), &mut last);
    StreamPlan {
        events,
        terminal: Event::data(Value::Object(last), false),
    }
}
