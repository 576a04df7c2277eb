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
//!   version: PKCS#1, PKCS#8, SEC1) or an AlgorithmIdentifier (an encrypted
//!   PKCS#8 key, or a public key): `MII…`, `MIG…`, `MHc…`, `MC4…`.
//!   Certificates (`MII…` too, but a TBSCertificate inside) are left alone.
//! * **Body lines**: a run of exactly 64 (PEM) or 70 (OpenSSH) characters
//!   that is alone at the end of its line (whatever prefix a tool adds:
//!   `12│ `, `path:3:`) and mixes upper case, lower case and digits — the
//!   middle of a key, where no header is left to see. The short last line
//!   of a body (a run ending its line, right after such a line) goes too.
//!
//! Runs inside a visible public PEM block (`BEGIN CERTIFICATE`, `BEGIN
//! PUBLIC KEY`, …) are left alone; a certificate's body without its header
//! cannot be told from a key's and is redacted.
//!
//! What these rules leave alone: lockfile and checksum hashes (hex, or
//! behind a prefix like `sha512-`/`sha384-`/`h1:` on the same token), JWTs
//! and other dotted tokens, base64 runs of other widths (data URIs, `base64`
//! output wrapped at 76: those are checked by decoding, see [`super::decoded`]).
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

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
            // After a backslash the first letter is an escape's (`\n` in
            // a JSON string), not data.
            let start = if at > 0 && text[at - 1] == b'\\' {
                at + 1
            } else {
                at
            };
            while at < text.len() && is_b64(text[at]) {
                at += 1;
            }
            let end = at.max(start);
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
    let Some((len, body)) = der_sequence(bytes) else {
        return false;
    };
    if len < 32 {
        return false;
    }
    match body.first() {
        // A key's version (PKCS#1, PKCS#8, SEC1).
        Some(0x02) => true,
        // An AlgorithmIdentifier first: an encrypted PKCS#8 key (or a
        // public key). A certificate's TBSCertificate starts with [0] or an
        // INTEGER instead: certificates are public, left alone.
        Some(0x30) => der_sequence(body).is_some_and(|(_, inner)| inner.first() == Some(&0x06)),
        _ => false,
    }
}

/// A SEQUENCE's declared length and what follows its header.
fn der_sequence(bytes: &[u8]) -> Option<(usize, &[u8])> {
    match bytes {
        [0x30, 0x82, hi, lo, rest @ ..] => Some(((usize::from(*hi) << 8) | usize::from(*lo), rest)),
        [0x30, 0x81, len, rest @ ..] => Some((usize::from(*len), rest)),
        [0x30, len, rest @ ..] if *len < 0x80 => Some((usize::from(*len), rest)),
        _ => None,
    }
}

/// `-----BEGIN CERTIFICATE-----` … `-----END …-----` and the like: public
/// material whose body lines look like a key's.
static PUBLIC_BLOCK: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"-----BEGIN (?:CERTIFICATE|TRUSTED CERTIFICATE|X509 CRL|CERTIFICATE REQUEST|NEW CERTIFICATE REQUEST|PUBLIC KEY|RSA PUBLIC KEY|PGP PUBLIC KEY BLOCK|PGP SIGNATURE|SSH2 PUBLIC KEY)-----(?s:.*?)(?:-----END [A-Z0-9 ]+-----|\z)")
        .map_err(|err| tracing::error!("redactor: public block pattern: {err}"))
        .ok()
});

/// Compiles the public-block pattern now; whether it compiled.
pub(super) fn compile() -> bool {
    PUBLIC_BLOCK.is_some()
}

/// The spans of key material in `text`.
pub(super) fn find(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut out: Vec<Range<usize>> = Vec::new();
    let public: Vec<Range<usize>> = if text.contains("-----BEGIN ") {
        PUBLIC_BLOCK
            .as_ref()
            .map(|re| re.find_iter(text).map(|m| m.range()).collect())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    for run in runs(bytes, 16) {
        if public.iter().any(|p| p.contains(&run.chars.start)) {
            continue;
        }
        let chars = &text[run.chars.clone()];
        let len = chars.len();
        let hit = chars.starts_with(OPENSSH_MAGIC)
            || (len >= MIN_DER_RUN
                && base64_decode(&chars.as_bytes()[..16]).is_some_and(|b| der_key_header(&b)))
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

/// Whether only spaces, tabs, quotes or commas follow `at` before the end
/// of the line (a newline, or a `\n` escape inside a string).
fn ends_line(text: &[u8], at: usize) -> bool {
    line_break(text, at).is_some() || text[at..].iter().all(|b| b" \t\r\"'`,".contains(b))
}

/// Where the next line starts, if only spaces, tabs, quotes or commas come
/// before the newline (or `\n`, `\r\n` escape) that ends this one.
fn line_break(text: &[u8], at: usize) -> Option<usize> {
    let mut i = at;
    while i < text.len() {
        match text[i] {
            b'\n' => return Some(i + 1),
            b'\\' => {
                let rest = &text[i + 1..];
                if rest.starts_with(b"n") {
                    return Some(i + 2);
                }
                if rest.starts_with(b"r\\n") {
                    return Some(i + 4);
                }
                return None;
            }
            b' ' | b'\t' | b'\r' | b'"' | b'\'' | b'`' | b',' => i += 1,
            _ => return None,
        }
    }
    None
}

/// The last line of a body: after the line break that follows `end` (the
/// end of a body line's run), a run that ends its line. On a real line it
/// is the line's last run (tools prefix lines); after a `\n` escape, the
/// run right there.
fn tail_line(text: &[u8], end: usize) -> Option<Range<usize>> {
    let next = line_break(text, end)?;
    let escaped = next >= 2 && text[next - 1] != b'\n';
    let line_end = next
        + text[next..]
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(text.len() - next);
    let line = &text[next..line_end];
    let run = if escaped {
        runs(line, 4).next().filter(|r| r.chars.start == 0)?
    } else {
        runs(line, 4).last()?
    };
    let run = Run {
        chars: run.chars.start + next..run.chars.end + next,
        with_padding: run.with_padding.start + next..run.with_padding.end + next,
    };
    let before = run.chars.start.checked_sub(1).map(|i| text[i]);
    let chars = &text[run.chars.clone()];
    // Alone on its line but for a tool's prefix (`27│ `), and random-looking
    // or padded: not the last word of a sentence.
    let alone = !text[next..run.chars.start]
        .iter()
        .any(u8::is_ascii_alphabetic);
    let looks_encoded = run.with_padding.len() > chars.len()
        || (chars.len() >= 16
            && chars.iter().any(u8::is_ascii_uppercase)
            && chars
                .iter()
                .any(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
    (alone
        && looks_encoded
        && ends_line(text, run.with_padding.end)
        && chars.len() <= 70
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
        // Encrypted PKCS#8: an AlgorithmIdentifier first.
        assert!(der_key_header(&[
            0x30, 0x82, 0x05, 0x00, 0x30, 0x4d, 0x06, 0x09
        ]));
        // A certificate: a TBSCertificate ([0] version) first.
        assert!(!der_key_header(&[
            0x30, 0x82, 0x03, 0x00, 0x30, 0x82, 0x02, 0x00, 0xa0, 0x03
        ]));
    }

    #[test]
    fn hashes_are_not_keys() {
        let text = "checksum = \"5f8e3a4b9c7d6e5f8e3a4b9c7d6e5f8e3a4b9c7d6e5f8e3a4b9c7d6e5f8e3a4b\"\n\
                    integrity sha384-oqVuAfXRKap7fdgcCY5uykM6R9GqQ8K1uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC1\n\
                    go.opencensus.io v0.24.0 h1:y73uSU6J157QMP2kn2r30vwW1A2W2WFwSCGnAVxeaD0=\n";
        assert!(find(text).is_empty(), "{:?}", find(text));
    }
}
