//! Turning a scripted response into an HTTP response: the format's body,
//! streamed or whole, with the script's delays and injected faults.
use std::io;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Response, StatusCode};
use serde_json::Value;

use super::formats::{default_error_message, Ctx, Event, Format, Framing, MALFORMED};
use super::script::{Fault, ScriptedResponse};

/// The response body type: whole or streamed, and able to fail mid-body.
pub(crate) type Body = UnsyncBoxBody<Bytes, io::Error>;

/// How long a disconnecting body waits after its last chunk before failing,
/// so that the chunks reach the client before the connection drops.
const DISCONNECT_GRACE: Duration = Duration::from_millis(20);

pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn with_type(status: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

pub(crate) fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    with_type(status, "application/json", full(value.to_string()))
}

/// Answers a request in `format` with the scripted `resp`.
pub(crate) async fn answer(
    format: Format,
    stream: bool,
    resp: ScriptedResponse,
    ctx: Ctx,
) -> Response<Body> {
    if resp.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(resp.delay_ms)).await;
    }
    match &resp.fault {
        Some(Fault::Hang) => {
            tracing::debug!(seq = ctx.seq, "mock: hanging");
            // Never answers; the connection task ends when the client gives
            // up or the server shuts down.
            return std::future::pending().await;
        }
        Some(Fault::Status {
            status,
            retry_after,
            body,
        }) => return status_response(format, *status, retry_after.as_deref(), body, &ctx),
        _ => {}
    }
    if stream {
        stream_response(format, &resp, &ctx)
    } else {
        whole_response(format, &resp, &ctx)
    }
}

fn status_response(
    format: Format,
    status: u16,
    retry_after: Option<&str>,
    body: &Option<String>,
    ctx: &Ctx,
) -> Response<Body> {
    let code = StatusCode::from_u16(status).unwrap_or_else(|_| {
        tracing::warn!(status, "mock: invalid status in script; sending 500");
        StatusCode::INTERNAL_SERVER_ERROR
    });
    let mut response = match body {
        Some(text) => {
            let content_type = if serde_json::from_str::<Value>(text).is_ok() {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            };
            with_type(code, content_type, full(text.clone()))
        }
        None => {
            let message = default_error_message(code.as_u16(), &ctx.model);
            json_response(code, &format.error_body(code.as_u16(), &message))
        }
    };
    if let Some(value) = retry_after {
        match HeaderValue::from_str(value) {
            Ok(v) => {
                response.headers_mut().insert(RETRY_AFTER, v);
            }
            Err(_) => tracing::warn!(value, "mock: invalid Retry-After in script; not sent"),
        }
    }
    response
}

/// The first half of `text`, cut at a char boundary.
fn first_half(text: &str) -> String {
    let mut cut = text.len() / 2;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text[..cut].to_string()
}

fn whole_response(format: Format, resp: &ScriptedResponse, ctx: &Ctx) -> Response<Body> {
    let text = format.whole(resp, ctx).to_string();
    let body = match &resp.fault {
        Some(Fault::Disconnect { .. }) => {
            chunked(vec![Bytes::from(first_half(&text))], Duration::ZERO, true)
        }
        Some(Fault::Truncate { .. }) => full(first_half(&text)),
        Some(Fault::MalformedJson) => full(MALFORMED),
        Some(Fault::UnknownEvent) => full(format.unknown_event(ctx).data),
        _ => full(text),
    };
    with_type(StatusCode::OK, format.content_type(false), body)
}

/// The events up to the cut of `after_chunks` content chunks: everything
/// before the `after_chunks + 1`-th counted event.
fn cut(events: Vec<Event>, after_chunks: usize) -> Vec<Event> {
    let mut sent = 0usize;
    let mut out = Vec::new();
    for event in events {
        if event.counted {
            if sent == after_chunks {
                break;
            }
            sent += 1;
        }
        out.push(event);
    }
    out
}

fn stream_response(format: Format, resp: &ScriptedResponse, ctx: &Ctx) -> Response<Body> {
    let plan = format.stream(resp, ctx);
    let mut events = plan.events;
    let mut terminal = Some(plan.terminal);
    let mut fail_at_end = false;
    match &resp.fault {
        Some(Fault::Disconnect { after_chunks }) => {
            events = cut(events, *after_chunks);
            terminal = None;
            fail_at_end = true;
        }
        Some(Fault::Truncate { after_chunks }) => {
            events = cut(events, *after_chunks);
            terminal = None;
        }
        Some(Fault::MalformedJson) => {
            let first = events.first_mut().or(terminal.as_mut());
            if let Some(first) = first {
                first.data = MALFORMED.to_string();
            }
        }
        Some(Fault::UnknownEvent) => {
            let at = events.len().min(1);
            events.insert(at, format.unknown_event(ctx));
        }
        _ => {}
    }
    let framing = format.framing();
    let pieces: Vec<Bytes> = events
        .iter()
        .chain(terminal.iter())
        .map(|e| e.encode(framing))
        .collect();
    let keepalive = match framing {
        Framing::Sse => Bytes::from_static(b": keep-alive\n\n"),
        Framing::Ndjson => Bytes::from_static(b"\n"),
    };
    let prelude = Prelude {
        piece: keepalive,
        count: resp.keepalives,
        every: Duration::from_millis(resp.keepalive_ms),
    };
    let body = chunked_after(
        prelude,
        pieces,
        Duration::from_millis(resp.chunk_delay_ms),
        fail_at_end,
    );
    let mut response = with_type(StatusCode::OK, format.content_type(true), body);
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Frames sent before the answer: `count` times `piece`, `every` apart.
struct Prelude {
    piece: Bytes,
    count: u32,
    every: Duration,
}

/// A streamed body sending `pieces` with `delay` between them; when `fail`,
/// it then errors, which makes hyper drop the connection mid-body.
fn chunked(pieces: Vec<Bytes>, delay: Duration, fail: bool) -> Body {
    let none = Prelude {
        piece: Bytes::new(),
        count: 0,
        every: Duration::ZERO,
    };
    chunked_after(none, pieces, delay, fail)
}

/// [`chunked`] after the `prelude`'s frames.
fn chunked_after(prelude: Prelude, pieces: Vec<Bytes>, delay: Duration, fail: bool) -> Body {
    let frames = async_stream::stream! {
        for i in 0..prelude.count {
            if i > 0 {
                tokio::time::sleep(prelude.every).await;
            }
            yield Ok::<_, io::Error>(Frame::data(prelude.piece.clone()));
        }
        if prelude.count > 0 {
            tokio::time::sleep(prelude.every).await;
        }
        for (i, piece) in pieces.into_iter().enumerate() {
            if i > 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            yield Ok::<_, io::Error>(Frame::data(piece));
        }
        if fail {
            tokio::time::sleep(DISCONNECT_GRACE).await;
            tracing::debug!("mock: dropping the connection mid-body");
            yield Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "mock: injected disconnect",
            ));
        }
    };
    StreamBody::new(frames).boxed_unsync()
}
