//! A response's body as it streams: lines with the idle and total
//! deadlines, decoded as newline-delimited JSON or server-sent events.
use std::time::Instant;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::{root_cause, Response};
use crate::model::error::{shorten, ModelError};

impl Response {
    /// The HTTP status (a success: `post` returns only those).
    pub fn status(&self) -> u16 {
        self.inner.status().as_u16()
    }

    /// The body as lines (NDJSON), each decoded as JSON. Empty lines are skipped.
    pub fn ndjson(self) -> impl Stream<Item = Result<Value, ModelError>> + Send + 'static {
        let endpoint = self.endpoint.clone();
        let url = self.url.clone();
        self.lines().map(move |line| {
            let Line { text, terminated } = line?;
            serde_json::from_str(&text).map_err(|e| {
                if terminated {
                    endpoint.malformed(&url, format!("{e} in line {:?}", shorten(&text, 200)))
                } else {
                    endpoint.truncated(&url, "the body ended in the middle of a line")
                }
            })
        })
    }

    /// The body as server-sent events.
    pub fn sse(self) -> impl Stream<Item = Result<SseEvent, ModelError>> + Send + 'static {
        async_stream::stream! {
            let mut event = SseEvent::default();
            let mut has_data = false;
            let lines = self.lines();
            futures::pin_mut!(lines);
            while let Some(line) = lines.next().await {
                let line = match line {
                    // An unterminated last line was cut off mid-event; the
                    // event is incomplete and, per the SSE spec, dropped.
                    Ok(Line { terminated: false, .. }) => return,
                    Ok(Line { text, .. }) => text,
                    Err(e) => { yield Err(e); return; }
                };
                if line.is_empty() {
                    if has_data || event.event.is_some() {
                        yield Ok(std::mem::take(&mut event));
                        has_data = false;
                    }
                    continue;
                }
                if line.starts_with(':') {
                    continue; // comment / keep-alive
                }
                let (field, value) = match line.split_once(':') {
                    Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                    None => (line.as_str(), ""),
                };
                match field {
                    "event" => event.event = Some(value.to_string()),
                    "data" => {
                        if has_data {
                            event.data.push('\n');
                        }
                        event.data.push_str(value);
                        has_data = true;
                    }
                    _ => {} // id, retry: unused
                }
            }
            // A stream that ends without the blank line that closes its last
            // event: servers do this after a final `data: [DONE]`, so the
            // event (its lines were complete) still counts.
            if has_data {
                yield Ok(event);
            }
        }
    }

    /// The body split into lines (without `\n`/`\r\n`), applying the idle
    /// (`timeout_ms`) and total deadlines. A transport error mid-body is a
    /// truncated stream.
    fn lines(self) -> impl Stream<Item = Result<Line, ModelError>> + Send + 'static {
        let Response {
            inner,
            deadline,
            endpoint,
            url,
        } = self;
        async_stream::stream! {
            let mut body = inner.bytes_stream();
            let mut buf: Vec<u8> = Vec::new();
            loop {
                let now = Instant::now();
                let idle = endpoint.first_byte_timeout.min(deadline.saturating_duration_since(now));
                let next: Option<Result<Bytes, reqwest::Error>> = match tokio::time::timeout(idle, body.next()).await {
                    Ok(n) => n,
                    Err(_) => {
                        let total_hit = Instant::now() >= deadline;
                        yield Err(if total_hit {
                            endpoint.timeout(&url, "complete answer", "total_timeout_ms", endpoint.total_timeout)
                        } else {
                            endpoint.timeout(&url, "further output", "timeout_ms", endpoint.first_byte_timeout)
                        });
                        return;
                    }
                };
                match next {
                    None => break,
                    Some(Err(e)) => {
                        yield Err(endpoint.truncated(&url, root_cause(&e)));
                        return;
                    }
                    Some(Ok(chunk)) => {
                        buf.extend_from_slice(&chunk);
                        while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
                            let mut line: Vec<u8> = buf.drain(..=pos).collect();
                            line.pop();
                            if line.last() == Some(&b'\r') {
                                line.pop();
                            }
                            yield Ok(Line { text: String::from_utf8_lossy(&line).into_owned(), terminated: true });
                        }
                    }
                }
            }
            if !buf.is_empty() {
                yield Ok(Line { text: String::from_utf8_lossy(&buf).into_owned(), terminated: false });
            }
        }
    }
}

/// One line of a body; `terminated` is false for a last line that had no
/// newline (the body may have been cut off there).
struct Line {
    text: String,
    terminated: bool,
}

/// One server-sent event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, when the server names its events (Anthropic does).
    pub event: Option<String>,
    pub data: String,
}
