//! The loop every remote provider runs: POST, then decode the streamed body
//! frame by frame (SSE events or NDJSON lines) into items, lazily. Providers
//! differ only in their [`Decode`] implementation.
use std::time::Instant;

use futures::stream::BoxStream;
use futures::StreamExt;
use serde_json::Value;

use crate::model::http::{Endpoint, JsonBody, Response, SseEvent};
use crate::model::{ChatEvent, ChatStream, ModelError, TextStream};

/// A provider's stream decoder.
pub(crate) trait Decode: Send + 'static {
    /// One unit of the body: an [`SseEvent`] or an NDJSON line.
    type Frame: Send + 'static;
    /// What the stream yields: chat events, or text pieces.
    type Item: Token + Send + 'static;
    /// How the body is framed.
    fn frames(response: Response) -> BoxStream<'static, Result<Self::Frame, ModelError>>;
    fn decode(&mut self, frame: Self::Frame) -> Result<Vec<Self::Item>, ModelError>;
    /// The terminal marker arrived; anything after it is ignored.
    fn done(&self) -> bool;
    /// The body ended: last items, or why the stream was incomplete. By
    /// default: nothing more once the terminal marker arrived
    /// ([`done`](Self::done)), [`truncated`](Self::truncated) before it.
    fn finish(&mut self) -> Result<Vec<Self::Item>, ModelError> {
        if self.done() {
            Ok(Vec::new())
        } else {
            Err(self.truncated())
        }
    }
    /// The error for a body that ended before its terminal marker.
    fn truncated(&self) -> ModelError;
    /// How much output was received but not yet yielded (a tool call's
    /// arguments, thinking, a finish reason): its growth is progress too.
    fn pending(&self) -> usize {
        0
    }
}

/// Whether a decoded item is real output (resets the idle limit).
pub(crate) trait Token {
    fn is_token(&self) -> bool;
}

impl Token for String {
    fn is_token(&self) -> bool {
        !self.is_empty()
    }
}

impl Token for ChatEvent {
    fn is_token(&self) -> bool {
        match self {
            ChatEvent::TextDelta(text) => !text.is_empty(),
            // Usage comes with or after the last output, never as filler.
            ChatEvent::ToolCall(_) | ChatEvent::Stop(_) | ChatEvent::Usage(_) => true,
        }
    }
}

/// Server-sent events as frames.
pub(crate) fn sse(response: Response) -> BoxStream<'static, Result<SseEvent, ModelError>> {
    Box::pin(response.sse())
}

/// NDJSON lines as frames.
pub(crate) fn ndjson(response: Response) -> BoxStream<'static, Result<Value, ModelError>> {
    Box::pin(response.ndjson())
}

/// POSTs `body` to `url` and streams what `decoder` makes of the answer.
/// Lazy: nothing is sent until the stream is first polled (the body is
/// serialized now, so a stream made ahead sends at once); dropping it
/// aborts the request.
pub(crate) fn request<D: Decode>(
    endpoint: Endpoint,
    url: String,
    headers: Vec<(&'static str, String)>,
    body: Value,
    mut decoder: D,
) -> BoxStream<'static, Result<D::Item, ModelError>> {
    let body = JsonBody::new(&body);
    Box::pin(async_stream::try_stream! {
        let started = Instant::now();
        tracing::debug!(model = %endpoint.name, %url, "model request");
        let response = endpoint.post(&url, &headers, &body).await?;
        tracing::debug!(
            model = %endpoint.name, %url, status = response.status(),
            first_byte_ms = started.elapsed().as_millis() as u64,
            "model response started"
        );
        let mut frames = D::frames(response);
        // The idle limit (`timeout_ms`) runs from the last real token: SSE
        // comments, keep-alive lines and empty deltas do not reset it, so a
        // server that only trickles those cannot hold the request open.
        let idle = endpoint.first_byte_timeout;
        let mut last_token = Instant::now();
        loop {
            let left = idle.saturating_sub(last_token.elapsed());
            let frame = match tokio::time::timeout(left, frames.next()).await {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => Err(endpoint.timeout(&url, "further output", "timeout_ms", idle))?,
            };
            let pending = decoder.pending();
            let items = decoder.decode(frame?)?;
            if decoder.pending() > pending || items.iter().any(Token::is_token) {
                last_token = Instant::now();
            }
            for item in items {
                yield item;
            }
            if decoder.done() {
                break;
            }
        }
        for item in decoder.finish()? {
            yield item;
        }
        tracing::debug!(
            model = %endpoint.name, %url,
            total_ms = started.elapsed().as_millis() as u64,
            "model response complete"
        );
    })
}

/// Only the text of a chat stream (FIM answered through a chat endpoint);
/// errors pass through.
pub(crate) fn text_only(stream: ChatStream) -> TextStream {
    Box::pin(stream.filter_map(|event| async move {
        match event {
            Ok(ChatEvent::TextDelta(text)) => Some(Ok(text)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        }
    }))
}
