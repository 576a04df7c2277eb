//! The loop every remote provider runs: POST, then decode the streamed body
//! frame by frame (SSE events or NDJSON lines) into items, lazily. Providers
//! differ only in their [`Decode`] implementation.
use std::time::Instant;

use futures::stream::BoxStream;
use futures::StreamExt;
use serde_json::Value;

use crate::model::http::{Endpoint, Response, SseEvent};
use crate::model::{ChatEvent, ChatStream, ModelError, TextStream};

/// A provider's stream decoder.
pub(crate) trait Decode: Send + 'static {
    /// One unit of the body: an [`SseEvent`] or an NDJSON line.
    type Frame: Send + 'static;
    /// What the stream yields: chat events, or text pieces.
    type Item: Send + 'static;
    /// How the body is framed.
    fn frames(response: Response) -> BoxStream<'static, Result<Self::Frame, ModelError>>;
    fn decode(&mut self, frame: Self::Frame) -> Result<Vec<Self::Item>, ModelError>;
    /// The terminal marker arrived; anything after it is ignored.
    fn done(&self) -> bool;
    /// The body ended: last items, or why the stream was incomplete.
    fn finish(&mut self) -> Result<Vec<Self::Item>, ModelError>;
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
/// Lazy: nothing is sent until the stream is first polled; dropping it
/// aborts the request.
pub(crate) fn request<D: Decode>(
    endpoint: Endpoint,
    url: String,
    headers: Vec<(&'static str, String)>,
    body: Value,
    mut decoder: D,
) -> BoxStream<'static, Result<D::Item, ModelError>> {
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
        while let Some(frame) = frames.next().await {
            for item in decoder.decode(frame?)? {
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
