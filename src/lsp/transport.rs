//! Framing between stdio and tower-lsp.
//!
//! tower-lsp's reader stops for good after the first message it cannot decode
//! (tokio-util's `FramedRead` ends the stream after a decoder error), so bad
//! input from a client would silently kill the session. This layer reads the
//! frames itself, answers malformed JSON with a parse error (`-32700`) and
//! non-JSON-RPC values with an invalid-request error (`-32600`), and hands
//! only well-formed messages to tower-lsp. Output from tower-lsp and from this
//! layer goes through one writer, a whole frame at a time, so frames never
//! interleave on stdout.

use serde_json::{json, Value};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tower_lsp::jsonrpc::{Request, Response};

/// Largest body accepted; anything bigger is a broken or hostile client.
const MAX_BODY_BYTES: usize = 256 << 20;
/// Room in the pipes between this layer and tower-lsp.
const PIPE_BYTES: usize = 1 << 20;

pub struct Transport {
    /// What tower-lsp reads.
    pub server_input: DuplexStream,
    /// What tower-lsp writes.
    pub server_output: DuplexStream,
    /// Ends once everything tower-lsp and this layer wrote has reached stdout.
    pub writer: JoinHandle<()>,
}

pub fn spawn<I, O>(stdin: I, stdout: O) -> Transport
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (server_input, to_server) = tokio::io::duplex(PIPE_BYTES);
    let (server_output, from_server) = tokio::io::duplex(PIPE_BYTES);
    let (frames_tx, frames_rx) = mpsc::unbounded_channel::<Vec<u8>>();

    tokio::spawn(read_client(stdin, to_server, frames_tx.clone()));
    tokio::spawn(relay_server(from_server, frames_tx));
    let writer = tokio::spawn(write_stdout(stdout, frames_rx));
    Transport {
        server_input,
        server_output,
        writer,
    }
}

pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

enum Frame {
    Body(Vec<u8>),
    /// A header block we could not use; the reader has resynchronised.
    BadHeader(String),
    Eof,
}

async fn read_client<I: AsyncRead + Unpin>(
    stdin: I,
    mut to_server: DuplexStream,
    errors: mpsc::UnboundedSender<Vec<u8>>,
) {
    let mut reader = BufReader::new(stdin);
    loop {
        let body = match read_frame(&mut reader).await {
            Frame::Body(body) => body,
            Frame::BadHeader(why) => {
                tracing::error!(%why, "malformed message header; skipped");
                let _ = errors.send(error_frame(
                    Value::Null,
                    -32700,
                    &format!("Parse error: {why}"),
                ));
                continue;
            }
            Frame::Eof => break,
        };
        match check_message(&body) {
            Ok(()) => {
                if to_server.write_all(&frame(&body)).await.is_err() {
                    break; // tower-lsp has stopped: the session is over.
                }
            }
            Err((id, code, message)) => {
                tracing::error!(code, %message, "rejected a message from the client");
                let _ = errors.send(error_frame(id, code, &message));
            }
        }
    }
    let _ = to_server.shutdown().await;
}

async fn read_frame<I: AsyncRead + Unpin>(reader: &mut BufReader<I>) -> Frame {
    let mut length: Option<Result<usize, String>> = None;
    let mut saw_header = false;
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => return Frame::Eof,
            Ok(_) => {}
            Err(err) => {
                tracing::error!(%err, "reading stdin failed");
                return Frame::Eof;
            }
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if !saw_header {
                continue; // Stray blank lines between messages are harmless.
            }
            break;
        }
        saw_header = true;
        if let Some((name, value)) = text.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = Some(
                    value
                        .trim()
                        .parse::<usize>()
                        .map_err(|_| format!("invalid Content-Length {:?}", value.trim())),
                );
            }
        }
    }
    let length = match length {
        Some(Ok(length)) if length <= MAX_BODY_BYTES => length,
        Some(Ok(length)) => {
            return Frame::BadHeader(format!(
                "Content-Length {length} exceeds the limit of {MAX_BODY_BYTES} bytes"
            ))
        }
        Some(Err(why)) => return Frame::BadHeader(why),
        None => return Frame::BadHeader("missing Content-Length header".to_owned()),
    };
    let mut body = vec![0; length];
    match reader.read_exact(&mut body).await {
        Ok(_) => Frame::Body(body),
        Err(_) => Frame::Eof,
    }
}

/// Ok when tower-lsp can decode the body; else the error response to send.
fn check_message(body: &[u8]) -> Result<(), (Value, i64, String)> {
    let value: Value = serde_json::from_slice(body).map_err(|err| {
        (
            Value::Null,
            -32700,
            format!("Parse error: invalid JSON: {err}"),
        )
    })?;
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let decodes = if value.get("method").is_some() {
        serde_json::from_value::<Request>(value).is_ok()
    } else {
        serde_json::from_value::<Response>(value).is_ok()
    };
    if decodes {
        Ok(())
    } else {
        Err((
            id,
            -32600,
            "Invalid request: not a JSON-RPC 2.0 request, notification or response".to_owned(),
        ))
    }
}

fn error_frame(id: Value, code: i64, message: &str) -> Vec<u8> {
    let body = json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } });
    frame(body.to_string().as_bytes())
}

/// Splits tower-lsp's output back into whole frames for the single writer.
async fn relay_server(from_server: DuplexStream, frames: mpsc::UnboundedSender<Vec<u8>>) {
    let mut reader = BufReader::new(from_server);
    loop {
        match read_frame(&mut reader).await {
            Frame::Body(body) => {
                if frames.send(frame(&body)).is_err() {
                    return;
                }
            }
            Frame::BadHeader(why) => tracing::error!(%why, "tower-lsp wrote a malformed frame"),
            Frame::Eof => return,
        }
    }
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
