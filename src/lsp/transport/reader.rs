//! A byte-level frame reader that survives bad framing.
//!
//! A wrong `Content-Length` either cuts a body short (the rest of it, then
//! the next header, follow) or makes it swallow the start of the next
//! header. Either way the body does not parse; the caller hands it back with
//! [`FrameReader::reject`], which puts all but its first byte back in front
//! of the stream and has the next read look for the next
//! `Content-Length:` (case-insensitive, anywhere, not just at a line start),
//! so the messages that follow are not lost.

use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt};

const HEADER_NAME: &[u8] = b"content-length:";
/// A header block longer than this is not one.
const MAX_HEADER_BYTES: usize = 64 << 10;
/// While looking for a header, skipped bytes are dropped past this much.
const MAX_SCAN_BUFFER: usize = 1 << 20;
const READ_CHUNK: usize = 64 << 10;
/// A body at least this big is read straight into a buffer of its own,
/// exactly its size: through the shared buffer it was copied once more,
/// and the buffer kept the body's capacity (12 MB after a 12 MB
/// document) for the rest of the session.
const DIRECT_BODY_BYTES: usize = 1 << 20;
/// The shared buffer's most capacity kept once its content is consumed
/// (a rejected huge body is put back into it).
const MAX_KEPT_CAPACITY: usize = 1 << 20;

pub enum Frame {
    Body(Vec<u8>),
    /// A header that claims more than the limit; its body was not read.
    TooLarge(usize),
    /// Bytes that are not a usable frame; already skipped.
    Bad(String),
    Eof,
}

pub struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// After a rejected body: skip quietly to the next header (the bad frame
    /// has had its error already).
    resync: bool,
    /// When the first byte of the frame being read was at hand.
    started: Option<Instant>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            pos: 0,
            eof: false,
            resync: false,
            started: None,
        }
    }

    /// When the first byte of the last frame returned was at hand (for the
    /// time reading a frame takes).
    pub fn started(&self) -> Option<Instant> {
        self.started
    }

    /// Puts a body that did not parse back (all but its first byte, so the
    /// reader always moves on) and makes the next read resynchronise.
    pub fn reject(&mut self, body: &[u8]) {
        let rest = body.get(1..).unwrap_or_default();
        let mut buf = Vec::with_capacity(rest.len() + self.buf.len() - self.pos);
        buf.extend_from_slice(rest);
        buf.extend_from_slice(&self.buf[self.pos..]);
        self.buf = buf;
        self.pos = 0;
        self.resync = true;
    }

    /// The next frame whose body is at most `limit` bytes.
    pub async fn next(&mut self, limit: usize) -> Frame {
        self.started = (self.pos < self.buf.len()).then(Instant::now);
        loop {
            match self.scan().await {
                Scan::Eof => return Frame::Eof,
                Scan::Junk(why) => return Frame::Bad(why),
                Scan::Header => {}
            }
            let (length, header_len) = match self.header().await {
                Ok(found) => found,
                Err(why) => {
                    // Not a header after all: look past its first byte.
                    self.pos += 1;
                    if std::mem::replace(&mut self.resync, true) {
                        tracing::debug!(%why, "skipped a broken header while resynchronising");
                        continue;
                    }
                    return Frame::Bad(why);
                }
            };
            self.resync = false;
            if length > limit {
                self.pos += header_len;
                return Frame::TooLarge(length);
            }
            self.pos += header_len;
            return match self.take(length).await {
                Some(body) => Frame::Body(body),
                None => Frame::Eof,
            };
        }
    }

    /// Moves to the next `Content-Length:`. Stray blank lines and other
    /// header lines before it are fine; anything else is junk, reported
    /// once (unless resynchronising), as is a header block without a length.
    async fn scan(&mut self) -> Scan {
        let mut junk = false;
        let mut dropped = 0usize;
        loop {
            let window = &self.buf[self.pos..];
            let found = find_header(window);
            let looked = found.unwrap_or(window.len());
            // A blank line ending a non-empty block before any length.
            if let Some(end) = block_end(&window[..looked]) {
                if !self.resync && !window[..end].iter().all(u8::is_ascii_whitespace) {
                    self.pos += end;
                    return Scan::Junk("missing Content-Length header".to_owned());
                }
            }
            if let Some(at) = found {
                junk |= !header_lines(&window[..at]);
                self.pos += at;
                if junk && !self.resync {
                    return Scan::Junk(format!(
                        "{} bytes that are not a message before the next header",
                        dropped + at
                    ));
                }
                return Scan::Header;
            }
            // Keep what could be the start of a split header name.
            let keep = HEADER_NAME.len() - 1;
            if window.len() > MAX_SCAN_BUFFER {
                let skip = window.len() - keep;
                junk = true;
                dropped += skip;
                self.pos += skip;
            }
            if !self.fill().await {
                return Scan::Eof;
            }
        }
    }

    /// Parses the header block at `pos` (which starts `Content-Length:`):
    /// `(length, bytes up to the body)`, without consuming it.
    async fn header(&mut self) -> Result<(usize, usize), String> {
        loop {
            let window = &self.buf[self.pos..];
            if let Some(end) = header_end(window) {
                return parse_header(&window[..end]).map(|length| (length, end));
            }
            if window.len() > MAX_HEADER_BYTES {
                return Err("header block too long or not terminated".to_owned());
            }
            if !self.fill().await {
                return Err("end of input inside a header".to_owned());
            }
        }
    }

    async fn take(&mut self, length: usize) -> Option<Vec<u8>> {
        if length >= DIRECT_BODY_BYTES {
            return self.take_direct(length).await;
        }
        while self.buf.len() - self.pos < length {
            if !self.fill().await {
                return None;
            }
        }
        let body = self.buf[self.pos..self.pos + length].to_vec();
        self.pos += length;
        Some(body)
    }

    /// [`Self::take`] for a big body: what the shared buffer holds of it
    /// is moved out, the rest is read from the input into the body itself.
    async fn take_direct(&mut self, length: usize) -> Option<Vec<u8>> {
        let held = (self.buf.len() - self.pos).min(length);
        let mut body = Vec::with_capacity(length);
        body.extend_from_slice(&self.buf[self.pos..self.pos + held]);
        self.pos += held;
        self.compact();
        while body.len() < length {
            if self.eof {
                return None;
            }
            let want = (length - body.len()) as u64;
            match (&mut self.inner).take(want).read_buf(&mut body).await {
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(err) => {
                    tracing::error!(%err, "reading input failed");
                    self.eof = true;
                }
            }
        }
        Some(body)
    }

    /// Drops the consumed front of the buffer when it is most of it, and
    /// gives back capacity far beyond what the buffer holds.
    fn compact(&mut self) {
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        if self.buf.capacity() > MAX_KEPT_CAPACITY && self.buf.len() * 4 < self.buf.capacity() {
            self.buf.shrink_to(self.buf.len().max(READ_CHUNK));
        }
    }

    /// Reads more input; false at end of input.
    async fn fill(&mut self) -> bool {
        if self.eof {
            return false;
        }
        self.compact();
        // Into spare capacity: nothing to zero first.
        self.buf.reserve(READ_CHUNK);
        let read = loop {
            match self.inner.read_buf(&mut self.buf).await {
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        let n = match read {
            Ok(n) => n,
            Err(err) => {
                tracing::error!(%err, "reading input failed");
                0
            }
        };
        if n == 0 {
            self.eof = true;
        } else if self.started.is_none() {
            self.started = Some(Instant::now());
        }
        n > 0
    }
}

enum Scan {
    Header,
    Junk(String),
    Eof,
}

fn find_header(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(HEADER_NAME.len())
        .position(|w| w.eq_ignore_ascii_case(HEADER_NAME))
}

/// The end of the first blank line that follows some text, if any.
fn block_end(bytes: &[u8]) -> Option<usize> {
    let mut seen_text = false;
    let mut line_empty = true;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\n' if line_empty && seen_text => return Some(i + 1),
            b'\n' => line_empty = true,
            b'\r' => {}
            _ => {
                line_empty = false;
                seen_text = true;
            }
        }
    }
    None
}

/// Whether `bytes` are only blank lines and `Name: value` header lines.
fn header_lines(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return true;
    }
    if !bytes.ends_with(b"\n") {
        return false;
    }
    bytes.split(|&b| b == b'\n').all(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        line.iter().all(u8::is_ascii_whitespace)
            || line.iter().position(|&b| b == b':').is_some_and(|colon| {
                colon > 0
                    && line[..colon]
                        .iter()
                        .all(|&b| b.is_ascii_alphanumeric() || b == b'-')
            })
    })
}

/// The length of a header block up to and including its blank line.
fn header_end(bytes: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            let line = &bytes[line_start..i];
            if line.is_empty() || line == b"\r" {
                return Some(i + 1);
            }
            line_start = i + 1;
        }
    }
    None
}

fn parse_header(block: &[u8]) -> Result<usize, String> {
    let text = String::from_utf8_lossy(block);
    let mut length = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("malformed header line {line:?}"));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| format!("invalid Content-Length {value:?}"))?,
            );
        }
    }
    length.ok_or_else(|| "missing Content-Length header".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8]) -> Vec<String> {
        let mut reader = FrameReader::new(input);
        let mut out = Vec::new();
        loop {
            match reader.next(1 << 20).await {
                Frame::Body(body) => {
                    if serde_json::from_slice::<serde_json::Value>(&body).is_ok() {
                        out.push(String::from_utf8_lossy(&body).into_owned());
                    } else {
                        out.push("BAD".to_owned());
                        reader.reject(&body);
                    }
                }
                Frame::Bad(_) => out.push("JUNK".to_owned()),
                Frame::TooLarge(n) => out.push(format!("LARGE {n}")),
                Frame::Eof => return out,
            }
        }
    }

    fn framed(body: &str, delta: i64) -> Vec<u8> {
        let len = body.len() as i64 + delta;
        format!("Content-Length: {len}\r\n\r\n{body}").into_bytes()
    }

    #[tokio::test]
    async fn a_big_body_is_read_whole_and_leaves_the_buffer_small() {
        let big = format!(r#"{{"id":1,"text":"{}"}}"#, "x".repeat(3 << 20));
        // Through a pipe, in pieces of uneven size: the body's bytes come
        // partly with its header, the rest straight into the body.
        let (mut tx, rx) = tokio::io::duplex(100_003);
        let mut input = framed(&big, 0);
        input.extend(framed(r#"{"id":2}"#, 0));
        // Too short by 10: the body does not parse and is put back.
        input.extend(framed(&big, -10));
        input.extend(framed(r#"{"id":3}"#, 0));
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for piece in input.chunks(77_777) {
                tx.write_all(piece).await.expect("write");
            }
        });
        let mut reader = FrameReader::new(rx);
        let mut seen = Vec::new();
        loop {
            match reader.next(64 << 20).await {
                Frame::Body(body) => match serde_json::from_slice::<serde_json::Value>(&body) {
                    Ok(value) => {
                        assert_eq!(body.len(), body.capacity(), "a body of exactly its size");
                        seen.push(value["id"].to_string());
                    }
                    Err(_) => {
                        seen.push("BAD".to_owned());
                        reader.reject(&body);
                    }
                },
                Frame::Bad(_) => seen.push("JUNK".to_owned()),
                Frame::TooLarge(n) => seen.push(format!("LARGE {n}")),
                Frame::Eof => break,
            }
            assert!(
                reader.buf.capacity() <= MAX_KEPT_CAPACITY
                    || reader.buf.len() * 4 >= reader.buf.capacity(),
                "the buffer kept {} bytes of capacity for {} bytes",
                reader.buf.capacity(),
                reader.buf.len()
            );
        }
        writer.await.expect("writer");
        assert_eq!(seen.first().map(String::as_str), Some("1"));
        assert_eq!(seen.get(1).map(String::as_str), Some("2"));
        assert_eq!(seen.last().map(String::as_str), Some("3"), "{seen:?}");
        assert!(
            reader.buf.capacity() <= MAX_KEPT_CAPACITY,
            "{}",
            reader.buf.capacity()
        );
    }

    #[tokio::test]
    async fn wrong_lengths_lose_only_the_bad_frame() {
        for delta in [-10, -1, 1, 10] {
            let mut input = framed(r#"{"jsonrpc":"2.0","id":0,"method":"x/yy"}"#, delta);
            for i in 1..=3 {
                input.extend(framed(&format!(r#"{{"id":{i}}}"#), 0));
            }
            assert_eq!(
                frames(&input).await,
                ["BAD", r#"{"id":1}"#, r#"{"id":2}"#, r#"{"id":3}"#],
                "delta {delta}"
            );
        }
    }

    #[tokio::test]
    async fn junk_between_frames_is_reported_once() {
        let mut input = framed(r#"{"id":1}"#, 0);
        input.extend(b"garbage\r\nmore}");
        input.extend(framed(r#"{"id":2}"#, 0));
        input.extend(b"\r\n\r\ncontent-LENGTH: 8\r\nContent-Type: x\r\n\r\n{\"id\":3}");
        assert_eq!(
            frames(&input).await,
            [r#"{"id":1}"#, "JUNK", r#"{"id":2}"#, r#"{"id":3}"#]
        );
    }

    #[tokio::test]
    async fn a_block_without_length_and_a_bad_length_are_errors() {
        let mut input = b"Content-Type: x\r\n\r\n".to_vec();
        input.extend(b"Content-Length: nope\r\n\r\n");
        input.extend(framed(r#"{"id":2}"#, 0));
        input.extend(b"Content-Length: 99999999\r\n\r\n");
        assert_eq!(
            frames(&input).await,
            ["JUNK", "JUNK", r#"{"id":2}"#, "LARGE 99999999"]
        );
    }
}
