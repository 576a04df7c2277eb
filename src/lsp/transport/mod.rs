//! Framing between stdio and tower-lsp's service, and the loop that serves it.
//!
//! tower-lsp's own `Server` is not used: its reader stops for good after the
//! first message it cannot decode (so bad input from a client would silently
//! kill the session), and each message crossed three tasks and two in-memory
//! pipes on its way in and out. Here one task reads frames itself
//! ([`reader`]: it recovers from a wrong `Content-Length` and from junk
//! between frames), parses each body once, answers malformed JSON with a
//! parse error (`-32700`) and non-JSON-RPC values with an invalid-request
//! error (`-32600`, echoing the id exactly as the client wrote it), and
//! calls the service (tower-lsp's router, behind [`super::guard`]). Each
//! handler's synchronous start runs right away, in arrival order (a
//! notification's state change lands before the next message is handled,
//! as under tower-lsp); the rest of it runs as its own task, in parallel
//! with the others. Answers, and the server's own requests and
//! notifications, are serialized where they are made (framed in place, no
//! copy) and written whole and in order ([`out`]: by the handler itself
//! when nothing is queued before it, else by the writer task), so frames
//! never interleave on stdout; a frame over the output limit is never
//! written: its request is answered with an error instead. stdin and stdout are watched
//! by the runtime's reactor ([`stdio`]), not read on the blocking pool.

mod out;
mod raw_id;
mod reader;
pub mod stdio;
pub mod timing;

use std::sync::Arc;
use std::time::Instant;

use futures::{Sink, StreamExt};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower::Service;
use tower_lsp::jsonrpc::{Error, ErrorCode, Request, Response};
use tower_lsp::{ClientSocket, ExitedError};

use out::Out;
use raw_id::raw_id;
use reader::{Frame, FrameReader};
use timing::Stage;

/// Largest body accepted; anything bigger is a broken or hostile client.
const MAX_BODY_BYTES: usize = 256 << 20;
/// Largest frame written to the client; a response over it becomes an
/// error response (clients choke on such frames, and no answer Fettle gives
/// should be that big).
pub const MAX_OUTPUT_BYTES: usize = 64 << 20;
/// Room kept before a serialized body for its header, which is written in
/// front of it in place: `Content-Length: ` + 20 digits + `\r\n\r\n`.
const HEADER_ROOM: usize = 40;
/// The request whose stages `fettle/stats` breaks down.
const TIMED_METHOD: &str = "textDocument/inlineCompletion";

/// A frame for the writer: `buf[start..]`.
struct Outgoing {
    buf: Vec<u8>,
    start: usize,
    /// When it was handed over, for the requests whose stages are timed.
    queued: Option<Instant>,
}

impl Outgoing {
    fn untimed(buf: Vec<u8>) -> Self {
        Outgoing {
            buf,
            start: 0,
            queued: None,
        }
    }
}

/// tower-lsp's sink for the client's answers to the server's requests.
type Responses = Arc<Mutex<std::pin::Pin<Box<dyn Sink<Response, Error = ExitedError> + Send>>>>;

pub struct Transport {
    /// Ends once the client's input has ended and every handler has answered.
    pub served: JoinHandle<()>,
    /// Resolves when the client's input has ended (EOF or a read error).
    pub input_closed: oneshot::Receiver<()>,
    /// The writer: once `finish` is cancelled, ends when what was queued
    /// has been written.
    pub writer: JoinHandle<()>,
    pub finish: CancellationToken,
}

/// Serves `service` over `stdin`/`stdout`; the server's own messages come
/// from `socket`.
pub fn spawn<I, O, S>(stdin: I, stdout: O, service: S, socket: ClientSocket) -> Transport
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
    S: Service<Request, Response = Option<Response>, Error = ExitedError> + Send + 'static,
    S::Future: Send + 'static,
{
    let (closed_tx, input_closed) = oneshot::channel();
    let (requests, responses) = socket.split();
    let responses: Responses = Arc::new(Mutex::new(Box::pin(responses)));
    let finish = CancellationToken::new();
    let (out, write_queued) = Out::new(stdout, finish.clone());
    let writer = tokio::spawn(write_queued);
    tokio::spawn(forward_server_messages(
        requests,
        out.clone(),
        responses.clone(),
    ));
    let served = tokio::spawn(read_client(stdin, service, out, responses, closed_tx));
    Transport {
        served,
        input_closed,
        writer,
        finish,
    }
}

/// A whole frame for `body`.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// `message` serialized with room for its header in front; `None` if it
/// could not be serialized.
fn serialize(message: &impl Serialize) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(256);
    buf.resize(HEADER_ROOM, 0);
    match serde_json::to_writer(&mut buf, message) {
        Ok(()) => Some(buf),
        Err(err) => {
            tracing::error!(%err, "could not serialize a message");
            None
        }
    }
}

/// The frame for a body serialized by [`serialize`]: the header written in
/// the room before it.
fn framed_in_place(mut buf: Vec<u8>) -> Outgoing {
    let header = format!("Content-Length: {}\r\n\r\n", buf.len() - HEADER_ROOM);
    let start = HEADER_ROOM - header.len();
    buf[start..HEADER_ROOM].copy_from_slice(header.as_bytes());
    Outgoing {
        buf,
        start,
        queued: None,
    }
}

async fn read_client<I, S>(
    stdin: I,
    mut service: S,
    out: Out,
    responses: Responses,
    closed: oneshot::Sender<()>,
) where
    I: AsyncRead + Unpin,
    S: Service<Request, Response = Option<Response>, Error = ExitedError>,
    S::Future: Send + 'static,
{
    // Each handler task holds a sender; `recv` ends when all are gone.
    let (alive, mut all_done) = mpsc::channel::<()>(1);
    let mut reader = FrameReader::new(stdin);
    loop {
        let body = match reader.next(MAX_BODY_BYTES).await {
            Frame::Body(body) => body,
            Frame::Bad(why) => {
                tracing::error!(%why, "malformed input skipped");
                let _ = out.send(error_frame("null", -32700, &format!("Parse error: {why}")));
                continue;
            }
            Frame::TooLarge(length) => {
                let why =
                    format!("Content-Length {length} exceeds the limit of {MAX_BODY_BYTES} bytes");
                tracing::error!(%why, "message skipped");
                let _ = out.send(error_frame("null", -32700, &format!("Parse error: {why}")));
                // The length cannot be trusted: look for the next header.
                reader.reject(&[]);
                continue;
            }
            Frame::Eof => break,
        };
        let read = reader.started().map(|t| t.elapsed());
        let parsing = Instant::now();
        match decode(&body) {
            Ok(Incoming::Request(request)) => {
                let timed = request.id().is_some() && request.method() == TIMED_METHOD;
                // The user waits for this one: background jobs hold off
                // until its answer is written.
                let busy = timed.then(crate::background::Busy::begin);
                if timed {
                    if let Some(read) = read {
                        timing::record(Stage::Read, read);
                    }
                    timing::record(Stage::Parse, parsing.elapsed());
                }
                if futures::future::poll_fn(|cx| service.poll_ready(cx))
                    .await
                    .is_err()
                {
                    tracing::info!("the server has exited; no more input is read");
                    break;
                }
                let dispatching = Instant::now();
                let answer = service.call(request);
                if timed {
                    timing::record(Stage::Dispatch, dispatching.elapsed());
                }
                let out = out.clone();
                let alive = alive.clone();
                let started = Instant::now();
                let mut handler = Box::pin(async move {
                    let answer = answer.await;
                    if timed {
                        timing::record(Stage::Handler, started.elapsed());
                    }
                    // Err: the server has exited (the process is ending).
                    if let Ok(Some(response)) = answer {
                        send_response(&out, &response, timed);
                    }
                    drop(busy);
                    drop(alive);
                });
                // Its synchronous start now, in arrival order; the rest as
                // its own task.
                if futures::poll!(handler.as_mut()).is_pending() {
                    tokio::spawn(handler);
                }
            }
            Ok(Incoming::Response(response)) => deliver(&responses, response),
            Err(Rejected::NotJson(err)) => {
                tracing::error!(%err, "invalid JSON; looking for the next header");
                let message = format!("Parse error: invalid JSON: {err}");
                let _ = out.send(error_frame("null", -32700, &message));
                // Most likely a wrong Content-Length: the next message may
                // start inside this body, or this body may go on after it.
                reader.reject(&body);
            }
            Err(Rejected::NotJsonRpc) => {
                let id = raw_id(&body).unwrap_or("null");
                let message = "Invalid request: not a JSON-RPC 2.0 request, notification or \
                               response (ids must be strings or integers that fit in 64 bits)";
                tracing::error!(%id, "rejected a message that is not JSON-RPC");
                let _ = out.send(error_frame(id, -32600, message));
            }
        }
    }
    tracing::info!("client input ended");
    let _ = closed.send(());
    drop(alive);
    let _ = all_done.recv().await;
}

/// An answer to a request of the server's, for the handler waiting on it.
fn deliver(responses: &Responses, response: Response) {
    let mut sink = responses.lock();
    let mut cx = std::task::Context::from_waker(futures::task::noop_waker_ref());
    // tower-lsp's sink is always ready (it files the answer at once) until
    // the server has exited.
    let ready = sink.as_mut().poll_ready(&mut cx);
    if !matches!(ready, std::task::Poll::Ready(Ok(()))) {
        tracing::debug!("an answer from the client after the server exited");
        return;
    }
    if sink.as_mut().start_send(response).is_err() {
        tracing::debug!("an answer from the client after the server exited");
    }
}

fn send_response(out: &Out, response: &Response, timed: bool) {
    let serializing = Instant::now();
    let Some(buf) = serialize(response) else {
        let id = serde_json::to_string(response.id()).unwrap_or_else(|_| "null".to_owned());
        let _ = out.send(error_frame(
            &id,
            -32603,
            "the answer could not be serialized",
        ));
        return;
    };
    let length = buf.len() - HEADER_ROOM;
    let mut frame = if length > MAX_OUTPUT_BYTES {
        too_large_response(length, response)
    } else {
        framed_in_place(buf)
    };
    if timed {
        timing::record(Stage::Serialize, serializing.elapsed());
        frame.queued = Some(Instant::now());
    }
    let _ = out.send(frame);
}

/// The error that replaces a response too big to write.
fn too_large_response(length: usize, response: &Response) -> Outgoing {
    let message = too_large("response", length);
    let id = serde_json::to_string(response.id()).unwrap_or_else(|_| "null".to_owned());
    tracing::error!(%message, bytes = length, %id, "not writing an oversized response");
    error_frame(&id, -32603, &message)
}

fn too_large(what: &str, length: usize) -> String {
    const MB: usize = 1 << 20;
    format!(
        "{what} too large ({} MB, limit {} MB)",
        length.div_ceil(MB),
        MAX_OUTPUT_BYTES / MB
    )
}

/// The server's requests and notifications to the client. A request too
/// big to write is answered for the client with an error (so its handler
/// does not wait forever); such a notification is dropped.
async fn forward_server_messages(
    mut requests: impl futures::Stream<Item = Request> + Unpin,
    out: Out,
    responses: Responses,
) {
    while let Some(request) = requests.next().await {
        let Some(buf) = serialize(&request) else {
            continue;
        };
        let length = buf.len() - HEADER_ROOM;
        if length <= MAX_OUTPUT_BYTES {
            if out.send(framed_in_place(buf)).is_err() {
                return;
            }
            continue;
        }
        let message = too_large("request", length);
        tracing::error!(%message, bytes = length, method = request.method(), "not writing an oversized request");
        if let Some(id) = request.id() {
            let error = Error {
                code: ErrorCode::InternalError,
                message: message.into(),
                data: None,
            };
            deliver(&responses, Response::from_error(id.clone(), error));
        }
    }
}

enum Incoming {
    Request(Request),
    Response(Response),
}

enum Rejected {
    NotJson(serde_json::Error),
    NotJsonRpc,
}

/// The body as tower-lsp's types, parsed once (its top level scanned first:
/// a response would parse as a request with an empty method).
fn decode(body: &[u8]) -> Result<Incoming, Rejected> {
    let members = raw_id::members(body);
    // A float id (how serde_json reads integers past u64) would be echoed
    // as a different number: refuse it here, where the raw text is known.
    let exact_id = match members.id {
        Some(id) => id.starts_with(['"', 'n']) || id.parse::<i64>().is_ok(),
        None => true,
    };
    let parsed = if members.method {
        serde_json::from_slice::<Request>(body).map(Incoming::Request)
    } else {
        serde_json::from_slice::<Response>(body).map(Incoming::Response)
    };
    match parsed {
        Ok(message) if exact_id => Ok(message),
        Ok(_) => Err(Rejected::NotJsonRpc),
        // Which kind of failure: not JSON at all, or not JSON-RPC.
        Err(_) => match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
            Err(err) => Err(Rejected::NotJson(err)),
            Ok(_) => Err(Rejected::NotJsonRpc),
        },
    }
}

/// An error response; `id` is raw JSON text.
fn error_frame(id: &str, code: i64, message: &str) -> Outgoing {
    let message = Value::from(message);
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{message}}}}}"#);
    Outgoing::untimed(frame(body.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_would_not_round_trip_are_rejected() {
        for body in [
            r#"{"jsonrpc":"2.0","id":18446744073709551617,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"m"}"#,
        ] {
            assert!(
                matches!(decode(body.as_bytes()), Err(Rejected::NotJsonRpc)),
                "{body}"
            );
        }
        for body in [
            r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"m"}"#,
            r#"{"jsonrpc":"2.0","method":"m"}"#,
        ] {
            assert!(decode(body.as_bytes()).is_ok(), "{body}");
        }
    }
}

#[cfg(test)]
mod framing_tests {
    use super::*;

    #[test]
    fn frames_are_framed_in_place() {
        let buf = serialize(&serde_json::json!({ "a": "é" })).unwrap();
        let frame = framed_in_place(buf);
        assert_eq!(
            &frame.buf[frame.start..],
            "Content-Length: 10\r\n\r\n{\"a\":\"é\"}".as_bytes()
        );
    }

    #[test]
    fn requests_and_responses_are_told_apart() {
        let request = br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}}"#;
        assert!(matches!(decode(request), Ok(Incoming::Request(_))));
        let response = br#"{"jsonrpc":"2.0","id":"x","result":null}"#;
        assert!(matches!(decode(response), Ok(Incoming::Response(_))));
        let neither = br#"{"jsonrpc":"2.0","id":1,"method":3}"#;
        assert!(matches!(decode(neither), Err(Rejected::NotJsonRpc)));
        let no_result = br#"{"jsonrpc":"2.0","id":1}"#;
        assert!(matches!(decode(no_result), Err(Rejected::NotJsonRpc)));
        assert!(matches!(decode(b"{\"x"), Err(Rejected::NotJson(_))));
    }
}
