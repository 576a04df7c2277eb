//! Framing between stdio and tower-lsp.
//!
//! tower-lsp's reader stops for good after the first message it cannot decode
//! (tokio-util's `FramedRead` ends the stream after a decoder error), so bad
//! input from a client would silently kill the session. This layer reads the
//! frames itself ([`reader`]: it recovers from a wrong `Content-Length` and
//! from junk between frames), answers malformed JSON with a parse error
//! (`-32700`) and non-JSON-RPC values with an invalid-request error
//! (`-32600`, echoing the id exactly as the client wrote it), and hands only
//! well-formed messages to tower-lsp. Output from tower-lsp and from this
//! layer goes through one writer, a whole frame at a time, so frames never
//! interleave on stdout; a frame over the output limit is never written: its
//! request is answered with an error instead.

mod raw_id;
mod reader;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tower_lsp::jsonrpc::{Request, Response};

use raw_id::raw_id;
use reader::{Frame, FrameReader};

/// Largest body accepted; anything bigger is a broken or hostile client.
const MAX_BODY_BYTES: usize = 256 << 20;
/// Largest frame written to the client; a response over it becomes an
/// error response (clients choke on such frames, and no answer Fettle gives
/// should be that big).
pub const MAX_OUTPUT_BYTES: usize = 64 << 20;
/// Room in the pipes between this layer and tower-lsp.
const PIPE_BYTES: usize = 1 << 20;
/// How much of each end of an oversized frame is kept to find its id.
const KEEP_ENDS: usize = 4 << 10;

type Frames = mpsc::UnboundedSender<Vec<u8>>;

pub struct Transport {
    /// What tower-lsp reads.
    pub server_input: DuplexStream,
    /// What tower-lsp writes.
    pub server_output: DuplexStream,
    /// Ends once everything tower-lsp and this layer wrote has reached stdout.
    pub writer: JoinHandle<()>,
    /// Resolves when the client's input has ended (EOF or a read error).
    pub input_closed: oneshot::Receiver<()>,
}

pub fn spawn<I, O>(stdin: I, stdout: O) -> Transport
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (server_input, to_server) = tokio::io::duplex(PIPE_BYTES);
    let (server_output, from_server) = tokio::io::duplex(PIPE_BYTES);
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let (in_tx, in_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let (closed_tx, input_closed) = oneshot::channel();

    // The relay holds only a weak sender, so the end of the client's input
    // still ends tower-lsp's input.
    tokio::spawn(relay_server(from_server, out_tx.clone(), in_tx.downgrade()));
    tokio::spawn(read_client(stdin, in_tx, out_tx, closed_tx));
    tokio::spawn(write_server(to_server, in_rx));
    let writer = tokio::spawn(write_stdout(stdout, out_rx));
    Transport {
        server_input,
        server_output,
        writer,
        input_closed,
    }
}

pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

async fn read_client<I: AsyncRead + Unpin>(
    stdin: I,
    to_server: Frames,
    to_client: Frames,
    closed: oneshot::Sender<()>,
) {
    let mut reader = FrameReader::new(stdin);
    loop {
        let body = match reader.next(MAX_BODY_BYTES).await {
            Frame::Body(body) => body,
            Frame::Bad(why) => {
                tracing::error!(%why, "malformed input skipped");
                let _ = to_client.send(error_frame("null", -32700, &format!("Parse error: {why}")));
                continue;
            }
            Frame::TooLarge(length) => {
                let why =
                    format!("Content-Length {length} exceeds the limit of {MAX_BODY_BYTES} bytes");
                tracing::error!(%why, "message skipped");
                let _ = to_client.send(error_frame("null", -32700, &format!("Parse error: {why}")));
                // The length cannot be trusted: look for the next header.
                reader.reject(&[]);
                continue;
            }
            Frame::Eof => break,
        };
        match check_message(&body) {
            Ok(()) => {
                if to_server.send(frame(&body)).is_err() {
                    break; // tower-lsp has stopped: the session is over.
                }
            }
            Err(Rejected::NotJson(err)) => {
                tracing::error!(%err, "invalid JSON; looking for the next header");
                let message = format!("Parse error: invalid JSON: {err}");
                let _ = to_client.send(error_frame("null", -32700, &message));
                // Most likely a wrong Content-Length: the next message may
                // start inside this body, or this body may go on after it.
                reader.reject(&body);
            }
            Err(Rejected::NotJsonRpc) => {
                let id = raw_id(&body).unwrap_or("null");
                let message = "Invalid request: not a JSON-RPC 2.0 request, notification or \
                               response (ids must be strings or integers that fit in 64 bits)";
                tracing::error!(%id, "rejected a message that is not JSON-RPC");
                let _ = to_client.send(error_frame(id, -32600, message));
            }
        }
    }
    tracing::info!("client input ended");
    let _ = closed.send(());
}

enum Rejected {
    NotJson(serde_json::Error),
    NotJsonRpc,
}

/// Ok when tower-lsp can decode the body.
fn check_message(body: &[u8]) -> Result<(), Rejected> {
    let value: Value = serde_json::from_slice(body).map_err(Rejected::NotJson)?;
    let decodes = if value.get("method").is_some() {
        serde_json::from_value::<Request>(value).is_ok()
    } else {
        serde_json::from_value::<Response>(value).is_ok()
    };
    // A float id (how serde_json reads integers past u64) would be echoed
    // as a different number: refuse it here, where the raw text is known.
    let exact_id = match raw_id(body) {
        Some(id) => id.starts_with(['"', 'n']) || id.parse::<i64>().is_ok(),
        None => true,
    };
    if decodes && exact_id {
        Ok(())
    } else {
        Err(Rejected::NotJsonRpc)
    }
}

/// An error response; `id` is raw JSON text.
fn error_frame(id: &str, code: i64, message: &str) -> Vec<u8> {
    let message = Value::from(message);
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{message}}}}}"#);
    frame(body.as_bytes())
}

/// Feeds tower-lsp; its input ends when the client's does.
async fn write_server(mut to_server: DuplexStream, mut frames: mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(frame) = frames.recv().await {
        if to_server.write_all(&frame).await.is_err() {
            return;
        }
    }
    let _ = to_server.shutdown().await;
}

/// Splits tower-lsp's output back into whole frames for the single writer.
async fn relay_server(
    from_server: DuplexStream,
    to_client: Frames,
    to_server: mpsc::WeakUnboundedSender<Vec<u8>>,
) {
    let mut reader = FrameReader::new(from_server);
    loop {
        match reader.next(MAX_OUTPUT_BYTES).await {
            Frame::Body(body) => {
                if to_client.send(frame(&body)).is_err() {
                    return;
                }
            }
            Frame::TooLarge(length) => {
                let Some((head, tail)) = reader.skip(length, KEEP_ENDS).await else {
                    return;
                };
                oversized(length, &head, &tail, &to_client, &to_server);
            }
            Frame::Bad(why) => tracing::error!(%why, "tower-lsp wrote a malformed frame"),
            Frame::Eof => return,
        }
    }
}

/// A frame from tower-lsp too big to write: a response becomes an error for
/// the client, a request to the client an error for tower-lsp (so its
/// handler does not wait forever), a notification is dropped.
fn oversized(
    length: usize,
    head: &[u8],
    tail: &[u8],
    to_client: &Frames,
    to_server: &mpsc::WeakUnboundedSender<Vec<u8>>,
) {
    const MB: usize = 1 << 20;
    let is_request = find(head, b"\"method\":").is_some();
    let method = is_request.then(|| method_name(head)).flatten();
    let id = tail_id(tail);
    let what = if is_request { "request" } else { "response" };
    let message = format!(
        "{what} too large ({} MB, limit {} MB)",
        length.div_ceil(MB),
        MAX_OUTPUT_BYTES / MB
    );
    tracing::error!(
        %message,
        bytes = length,
        id = id.unwrap_or("none"),
        method = method.as_deref().unwrap_or(""),
        "not writing an oversized frame"
    );
    match (is_request, id) {
        (false, id) => {
            let _ = to_client.send(error_frame(id.unwrap_or("null"), -32603, &message));
        }
        (true, Some(id)) => {
            if let Some(to_server) = to_server.upgrade() {
                let _ = to_server.send(error_frame(id, -32603, &message));
            }
        }
        (true, None) => {}
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// tower-lsp writes `"id"` last: `…,"id":<id>}`. The last `"id":` is that
/// member (the id itself cannot contain an unescaped quote).
fn tail_id(tail: &[u8]) -> Option<&str> {
    let key = b"\"id\":";
    let at = tail.windows(key.len()).rposition(|w| w == key)? + key.len();
    let text = std::str::from_utf8(&tail[at..]).ok()?;
    let text = text.trim_end().strip_suffix('}')?.trim();
    (!text.is_empty()).then_some(text)
}

fn method_name(head: &[u8]) -> Option<String> {
    let at = find(head, b"\"method\":")? + b"\"method\":".len();
    let rest = std::str::from_utf8(&head[at..]).ok()?;
    let rest = rest.trim_start().strip_prefix('"')?;
    Some(rest.split('"').next()?.to_owned())
}

async fn write_stdout<O: AsyncWrite + Unpin>(
    mut stdout: O,
    mut frames: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(frame) = frames.recv().await {
        if stdout.write_all(&frame).await.is_err() || stdout.flush().await.is_err() {
            tracing::error!("stdout is closed; dropping output");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_an_oversized_frame_comes_from_its_tail() {
        assert_eq!(tail_id(br#"xx"},"id":17}"#), Some("17"));
        assert_eq!(tail_id(br#"x":"\"id\":3","id":"a"}"#), Some(r#""a""#));
        assert_eq!(tail_id(br#"{"method":"m","params":[]}"#), None);
        assert_eq!(
            method_name(br#"{"jsonrpc":"2.0","method":"workspace/applyEdit","params""#).as_deref(),
            Some("workspace/applyEdit")
        );
    }

    #[test]
    fn ids_that_would_not_round_trip_are_rejected() {
        for body in [
            r#"{"jsonrpc":"2.0","id":18446744073709551617,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"m"}"#,
        ] {
            assert!(
                matches!(check_message(body.as_bytes()), Err(Rejected::NotJsonRpc)),
                "{body}"
            );
        }
        for body in [
            r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"m"}"#,
            r#"{"jsonrpc":"2.0","method":"m"}"#,
        ] {
            assert!(check_message(body.as_bytes()).is_ok(), "{body}");
        }
    }
}
