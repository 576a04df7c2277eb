//! The one interface every model backend implements.
use super::types::{ChatRequest, ChatStream, FimRequest, TextStream};

/// A model backend. Both methods return at once with a lazy stream: the
/// request starts when the stream is first polled, and dropping the stream
/// cancels it (aborting the HTTP request, or stopping local inference at the
/// next token).
pub trait Provider: Send + Sync + 'static {
    /// Fill in the middle: the text between `req.prefix` and `req.suffix`.
    fn fim(&self, req: FimRequest) -> TextStream;
    /// A chat turn: text deltas, tool calls, usage, then one stop reason.
    fn chat(&self, req: ChatRequest) -> ChatStream;
    /// Tokens in `text` by this model's own tokenizer, when it has one here
    /// (the embedded model); `None` means "use the calibrated estimate".
    fn count_tokens(&self, _text: &str) -> Option<usize> {
        None
    }
    /// The embedded model's counters for its last request (KV reuse, time
    /// to first token); `None` for remote providers.
    fn local_stats(&self) -> Option<super::local::RequestStats> {
        None
    }
    /// Evaluates `req`'s prompt ahead of a request that will probably come
    /// (the user paused there), so that it starts warm; no answer. Only the
    /// embedded model has a cache worth warming: the others do nothing.
    /// Background work: any real request stops it.
    fn warm(&self, _req: FimRequest) {}
    /// Gives up the warm-ups queued or running: the user is active again
    /// (a later pause starts a new one).
    fn cancel_warm(&self) {}
    /// Opens a connection to the model's server ahead of a request that
    /// will probably come (the user opened a file or typed), unless one was
    /// used lately; no request to the model itself. The embedded model has
    /// no connection: nothing to do.
    fn preconnect(&self) {}
}
