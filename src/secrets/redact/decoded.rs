//! Decoding what a command may have encoded: blocks of base64 lines
//! (`base64 .env`, `base64 -w0 key.pem`, PEM bodies) and dumps (`xxd`,
//! `xxd -p`, `od -c`, `od -tx1`, `od`'s octal words, `hexdump -C`). A
//! literal needle cannot see a value split across lines or spread over a
//! dump's columns; decoding the block can.
//!
//! Each line is classified by its tail (tools prefix lines with numbers or
//! paths): a trailing run of hex digits, a trailing base64 run, or dump
//! columns after an optional offset. Consecutive lines of one class form a
//! block; a block is decoded (base64 at each of the 4 character offsets;
//! hex and octal words in both byte orders; base32; each line reversed
//! and the whole block reversed, for `| rev`) and the bytes are checked
//! for known secret values, private-key text (`PRIVATE KEY`,
//! `openssh-key-v1`) and key shapes — and, when they are a gzip or zlib
//! stream (`gzip -c .env | base64`), inflated ([`super::inflate`]) and
//! checked again. Only a block whose decoded bytes hold
//! a secret is redacted — whole, dump lines with their ASCII column — so
//! hashes, data URIs and binary dumps of ordinary files pass untouched.
use std::ops::Range;

use regex::bytes::Regex;

use super::encoded::{base64_decode, base64_value, hex_value};
use super::inflate::inflate;
use super::keys;
use super::transforms::base32_decode;

/// Shortest base64 or hex tail that makes a line part of a block.
const MIN_RUN: usize = 16;
/// Decoded blocks larger than this are checked on their first bytes only.
const MAX_DECODED: usize = 1 << 20;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    Base64,
    Hex,
    /// `od -c`: one character (or escape) per column.
    Chars,
    /// `od`'s default: 6-digit octal little-endian 16-bit words.
    Octal,
}

struct Line {
    class: Class,
    /// The part redacted: the run (base64, hex tails) or the whole line.
    span: Range<usize>,
    /// The encoded data: the run, or a dump's data columns.
    tokens: Vec<Range<usize>>,
}

/// Spans of encoded secrets in `text`. `values` matches known secret
/// values in decoded bytes.
pub(super) fn find(text: &str, values: Option<&Regex>) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut block: Vec<Line> = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    while start < bytes.len() {
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| start + i);
        let line = classify(bytes, start..end);
        match line {
            Some(line) if block.last().is_none_or(|l| l.class == line.class) => block.push(line),
            other => {
                flush(text, &mut block, values, &mut out);
                block.extend(other);
            }
        }
        start = end + 1;
    }
    flush(text, &mut block, values, &mut out);
    out
}

fn flush(text: &str, block: &mut Vec<Line>, values: Option<&Regex>, out: &mut Vec<Range<usize>>) {
    if block.is_empty() {
        return;
    }
    let bytes = text.as_bytes();
    let secret = match block[0].class {
        Class::Base64 => orders(bytes, block, MAX_DECODED * 4 / 3)
            .iter()
            .any(|chars| {
                let base32 = chars
                    .iter()
                    .all(|c| c.is_ascii_uppercase() || (b'2'..=b'7').contains(c));
                (0..4.min(chars.len())).any(|skip| {
                    base64_decode(&chars[skip..])
                        .is_some_and(|decoded| holds_secret(&decoded, values))
                }) || (base32
                    && (0..8.min(chars.len()))
                        .any(|skip| holds_secret(&base32_decode(&chars[skip..]), values)))
            }),
        Class::Hex => {
            let words = block.iter().all(|l| l.tokens.iter().all(|t| t.len() == 4));
            orders(bytes, block, MAX_DECODED * 2).iter().any(|digits| {
                let decoded = decode_hex(digits);
                holds_secret(&decoded, values)
                    || (words && holds_secret(&swap_pairs(&decoded), values))
                    || (digits.len() > 1 && holds_secret(&decode_hex(&digits[1..]), values))
            })
        }
        Class::Octal => {
            let mut decoded = Vec::new();
            for line in block.iter() {
                for token in &line.tokens {
                    let word = bytes[token.clone()]
                        .iter()
                        .fold(0u32, |acc, &d| acc * 8 + u32::from(d - b'0'));
                    // Truncation intended: the word's two bytes, little-endian.
                    decoded.extend_from_slice(&[(word & 0xff) as u8, ((word >> 8) & 0xff) as u8]);
                }
            }
            holds_secret(&decoded, values) || holds_secret(&swap_pairs(&decoded), values)
        }
        Class::Chars => {
            let mut decoded = Vec::new();
            for line in block.iter() {
                for token in &line.tokens {
                    match &bytes[token.clone()] {
                        b"\\n" => decoded.push(b'\n'),
                        b"\\0" => decoded.push(0),
                        b"\\t" => decoded.push(b'\t'),
                        b"\\r" => decoded.push(b'\r'),
                        other => decoded.extend_from_slice(other),
                    }
                }
            }
            holds_secret(&decoded, values)
        }
    };
    if secret {
        out.extend(block.iter().map(|l| l.span.clone()));
    }
    block.clear();
}

/// A block's characters in the orders a command may have left them in:
/// as printed, each line reversed (`xxd -p .env | rev`), and the whole
/// block reversed (`… | tr -d '\n' | rev`); each at most `max` bytes.
fn orders(bytes: &[u8], block: &[Line], max: usize) -> [Vec<u8>; 3] {
    let mut plain: Vec<u8> = Vec::new();
    let mut lines_reversed: Vec<u8> = Vec::new();
    for line in block {
        for token in &line.tokens {
            let token = &bytes[token.clone()];
            plain.extend_from_slice(token);
            lines_reversed.extend(token.iter().rev());
        }
        if plain.len() >= max {
            break;
        }
    }
    let mut all_reversed = plain.clone();
    all_reversed.reverse();
    for chars in [&mut plain, &mut lines_reversed, &mut all_reversed] {
        chars.truncate(max);
    }
    [plain, lines_reversed, all_reversed]
}

fn holds_secret(decoded: &[u8], values: Option<&Regex>) -> bool {
    if decoded.len() < 4 {
        return false;
    }
    if values.is_some_and(|re| re.is_match(decoded)) || keys::der_key_header(decoded) {
        return true;
    }
    let text = String::from_utf8_lossy(decoded);
    if text.contains("PRIVATE KEY")
        || text.contains("openssh-key-v1")
        || !keys::find(&text).is_empty()
    {
        return true;
    }
    // Compressed, then encoded: inflate (capped) and look again, once.
    inflate(decoded).is_some_and(|inflated| {
        values.is_some_and(|re| re.is_match(&inflated)) || {
            let text = String::from_utf8_lossy(&inflated);
            text.contains("PRIVATE KEY") || text.contains("openssh-key-v1")
        }
    })
}

fn decode_hex(digits: &[u8]) -> Vec<u8> {
    digits
        .chunks_exact(2)
        .filter_map(|pair| Some((hex_value(pair[0])? << 4) | hex_value(pair[1])?))
        .collect()
}

fn swap_pairs(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for pair in out.chunks_exact_mut(2) {
        pair.swap(0, 1);
    }
    out
}

/// The class of one line (`range` excludes the newline), if any.
fn classify(text: &[u8], range: Range<usize>) -> Option<Line> {
    let mut end = range.end;
    while end > range.start && text[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    if end == range.start {
        return None;
    }
    dump_line(text, range.start..end).or_else(|| tail_run(text, range.start..end))
}

/// A trailing hex or base64 run (then optional `=` padding) of at least
/// [`MIN_RUN`] characters.
fn tail_run(text: &[u8], range: Range<usize>) -> Option<Line> {
    let mut chars_end = range.end;
    // Up to 2 `=` of base64 padding, 6 of base32's.
    while chars_end > range.start && text[chars_end - 1] == b'=' && range.end - chars_end < 6 {
        chars_end -= 1;
    }
    let mut start = chars_end;
    while start > range.start && base64_value(text[start - 1]).is_some() {
        start -= 1;
    }
    if chars_end - start < MIN_RUN {
        return None;
    }
    let run = &text[start..chars_end];
    let hex = run.len() % 2 == 0 && run.iter().all(|&b| hex_value(b).is_some());
    Some(Line {
        class: if hex { Class::Hex } else { Class::Base64 },
        span: start..range.end,
        tokens: std::iter::once(start..chars_end).collect(),
    })
}

/// A dump's line: an optional offset column, then at least 4 data columns
/// of one kind (hex groups, octal words or characters); for hex dumps the
/// ASCII column that may follow is ignored.
fn dump_line(text: &[u8], range: Range<usize>) -> Option<Line> {
    let tokens = split_tokens(text, range.clone());
    let mut data = &tokens[..];
    if let [offset, rest @ ..] = data {
        let t = &text[offset.clone()];
        let is_offset = t.ends_with(b":")
            || (t.len() >= 6
                && t.iter().all(u8::is_ascii_hexdigit)
                && rest.first().is_some_and(|r| r.len() != offset.len()));
        if is_offset {
            data = rest;
        }
    }
    let hex_group = |r: &Range<usize>| {
        matches!(r.len(), 2 | 4 | 8) && text[r.clone()].iter().all(u8::is_ascii_hexdigit)
    };
    let octal = |r: &Range<usize>| {
        r.len() == 6 && text[r.clone()].iter().all(|b| (b'0'..=b'7').contains(b))
    };
    let char_col = |r: &Range<usize>| r.len() == 1 || (r.len() <= 4 && text[r.start] == b'\\');
    let (class, taken): (Class, Vec<Range<usize>>) = if data.iter().all(octal) {
        (Class::Octal, data.to_vec())
    } else if let Some(width) = data.first().filter(|f| hex_group(f)).map(|f| f.len()) {
        let taken: Vec<_> = data
            .iter()
            .take_while(|r| r.len() == width && hex_group(r))
            .cloned()
            .collect();
        (Class::Hex, taken)
    } else if data.iter().all(char_col) {
        (Class::Chars, data.to_vec())
    } else {
        return None;
    };
    if taken.len() < 4 {
        return None;
    }
    Some(Line {
        class,
        span: range,
        tokens: taken,
    })
}

fn split_tokens(text: &[u8], range: Range<usize>) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut at = range.start;
    while at < range.end {
        while at < range.end && text[at].is_ascii_whitespace() {
            at += 1;
        }
        let start = at;
        while at < range.end && !text[at].is_ascii_whitespace() {
            at += 1;
        }
        if at > start {
            out.push(start..at);
        }
    }
    out
}
