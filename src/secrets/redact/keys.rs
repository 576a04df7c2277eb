//! Private-key material by its shape, header or not: what `tail -n +2
//! key.pem`, `read_file` from line 3, `grep -r MII` or a search for a
//! fragment shows.
//!
//! Rules, on maximal runs of base64 characters (`[A-Za-z0-9+/]`, then `=`
//! padding):
//!
//! * **OpenSSH bodies**: a run starting `b3BlbnNzaC1rZXktdjE` (base64 of
//!   `openssh-key-v1`).
//! * **DER**: a run of ≥ [`MIN_DER_RUN`] characters that decodes to an ASN.1
//!   SEQUENCE of plausible length whose first element is an INTEGER (a key's
//!   version: PKCS#1, PKCS#8, SEC1) or a SEQUENCE (an encrypted PKCS#8 key;
//!   certificates too, which we cannot tell from keys by a fragment and
//!   whose bodies a repair never needs): `MII…`, `MIG…`, `MHc…`, `MC4…`.
//! * **Body lines**: a run of exactly 64 (PEM) or 70 (OpenSSH) characters
//!   that is alone at the end of its line (whatever prefix a tool adds:
//!   `12│ `, `path:3:`) and mixes upper case, lower case and digits — the
//!   middle of a key, where no header is left to see. The short last line
//!   of a body (a run ending its line, right after such a line) goes too.
//!
//! What these rules leave alone: lockfile and checksum hashes (hex, or
//! behind a prefix like `sha512-`/`sha384-`/`h1:` on the same token), JWTs
//! and other dotted tokens, base64 runs of other widths (data URIs, `base64`
//! output wrapped at 76: those are checked by decoding, see [`super::decoded`]).
use std::ops::Range;

use super::encoded::base64_decode;

/// Shortest run checked for a DER header.
const MIN_DER_RUN: usize = 60;
/// Widths of a key body's lines.
const BODY_WIDTHS: [usize; 2] = [64, 70];

const OPENSSH_MAGIC: &str = "b3BlbnNzaC1rZXktdjE";

fn is_b64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

/// A maximal base64 run: the characters, then the run with its padding.
struct Run {
    chars: Range<usize>,
    with_padding: Range<usize>,
}

fn runs(text: &[u8], min: usize) -> impl Iterator<Item = Run> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < text.len() {
            if !is_b64(text[at]) {
                at += 1;
                continue;
            }
            let start = at;
            while at < text.len() && is_b64(text[at]) {
                at += 1;
            }
            let end = at;
            while at < text.len() && text[at] == b'=' && at - end < 2 {
                at += 1;
            }
            if end - start >= min {
                return Some(Run {
                    chars: start..end,
                    with_padding: start..at,
                });
            }
        }
        None
    })
}

/// Whether `bytes` start like a DER-encoded key (see the module docs).
pub(super) fn der_key_header(bytes: &[u8]) -> bool {
    let (len, body) = match bytes {
        [0x30, 0x82, hi, lo, rest @ ..] => ((usize::from(*hi) << 8) | usize::from(*lo), rest),
        [0x30, 0x81, len, rest @ ..] => (usize::from(*len), rest),
        [0x30, len, rest @ ..] if *len < 0x80 => (usize::from(*len), rest),
        _ => return false,
    };
    len >= 32 && matches!(body.first(), Some(0x02 | 0x30))
}

/// The spans of key material in `text`.
pub(super) fn find(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut out: Vec<Range<usize>> = Vec::new();
    for run in runs(bytes, 16) {
        let chars = &text[run.chars.clone()];
        let len = chars.len();
        let hit = chars.starts_with(OPENSSH_MAGIC)
            || (len >= MIN_DER_RUN
                && base64_decode(&chars.as_bytes()[..8]).is_some_and(|b| der_key_header(&b)))
            || (BODY_WIDTHS.contains(&len) && body_line(bytes, &run));
        if hit {
            out.push(run.with_padding.clone());
            if let Some(tail) = tail_line(bytes, run.with_padding.end) {
                out.push(tail);
            }
        }
    }
    out
}

/// A key body line: alone at the end of its line, mixed character classes.
fn body_line(text: &[u8], run: &Run) -> bool {
    let before = run.chars.start.checked_sub(1).map(|i| text[i]);
    // `sha384-…`, `h1:…`-style prefixes glued to the run, dotted tokens.
    if before.is_some_and(|b| b"-._=".contains(&b)) {
        return false;
    }
    if !ends_line(text, run.with_padding.end) {
        return false;
    }
    let chars = &text[run.chars.clone()];
    chars.iter().any(u8::is_ascii_uppercase)
        && chars.iter().any(u8::is_ascii_lowercase)
        && chars.iter().any(u8::is_ascii_digit)
}

/// Whether only spaces, tabs, quotes, `\n`-escapes or commas follow `at`
/// before the end of the line.
fn ends_line(text: &[u8], at: usize) -> bool {
    for &b in &text[at..] {
        match b {
            b'\n' => return true,
            b' ' | b'\t' | b'\r' | b'"' | b'\'' | b'`' | b',' | b'\\' => {}
            _ => return false,
        }
    }
    true
}

/// The last line of a body: a run ending the line after `end` (the end of
/// a body line's run).
fn tail_line(text: &[u8], end: usize) -> Option<Range<usize>> {
    let newline = end + text[end..].iter().position(|&b| b == b'\n')?;
    let line_end = newline
        + 1
        + text[newline + 1..]
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(text.len() - newline - 1);
    let line = &text[newline + 1..line_end];
    let run = runs(line, 4).last()?;
    let run = Run {
        chars: run.chars.start + newline + 1..run.chars.end + newline + 1,
        with_padding: run.with_padding.start + newline + 1..run.with_padding.end + newline + 1,
    };
    let before = run.chars.start.checked_sub(1).map(|i| text[i]);
    (ends_line(text, run.with_padding.end)
        && run.chars.len() <= 70
        && !before.is_some_and(|b| b"-._=".contains(&b)))
    .then_some(run.with_padding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_headers() {
        assert!(der_key_header(&[0x30, 0x82, 0x04, 0xa4, 0x02, 0x01, 0x00]));
        assert!(der_key_header(&[0x30, 0x77, 0x02, 0x01, 0x01]));
        assert!(!der_key_header(&[0x30, 0x05, 0x02]));
        assert!(!der_key_header(b"hello world"));
    }

    #[test]
    fn hashes_are_not_keys() {
        let text = "checksum = \"5f8e3a4b9c7d6e5f8e3a4b9c7d6e5f8e3a4b9c7d6e5f8e3a4b9c7d6e5f8e3a4b\"\n\
                    integrity sha384-oqVuAfXRKap7fdgcCY5uykM6R9GqQ8K1uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC1\n\
                    go.opencensus.io v0.24.0 h1:y73uSU6J157QMP2kn2r30vwW1A2W2WFwSCGnAVxeaD0=\n";
        assert!(find(text).is_empty(), "{:?}", find(text));
    }
}
