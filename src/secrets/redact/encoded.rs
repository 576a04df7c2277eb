//! Known secret values in other forms: the literal needles searched for
//! (base64 at every alignment, hex, URL-encoding) and the small codecs the
//! decoding passes share.
//!
//! A value inside a longer base64 stream (`base64 -w0 .env` encodes the
//! whole file) is not encoded on its own: it starts at byte 0, 1 or 2 of a
//! 3-byte group. For each alignment the needle is the run of characters
//! that depend on the value's bytes only: encode `k` zero bytes + value,
//! drop the characters that mix in the preceding bytes (0, 2 or 3) and the
//! last one if it mixes in the following byte. Needles shorter than
//! [`MIN_NEEDLE`] are dropped: they would match by chance in long base64.

/// Shortest value whose encodings are searched for.
pub(super) const MIN_ENCODED_VALUE: usize = 6;
/// Shortest needle kept.
const MIN_NEEDLE: usize = 8;

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The encoded forms of `value` to search for (not the value itself).
pub(super) fn needles(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    if bytes.len() < MIN_ENCODED_VALUE {
        return Vec::new();
    }
    let mut out = Vec::new();
    for k in 0..3 {
        let mut input = vec![0u8; k];
        input.extend_from_slice(bytes);
        let encoded = base64_unpadded(&input);
        let first = [0, 2, 3][k];
        // Characters made only of the input's bits.
        let last = input.len() * 8 / 6;
        if last > first && last - first >= MIN_NEEDLE {
            let needle = &encoded[first..last];
            out.push(needle.to_owned());
            let url_safe = needle.replace('+', "-").replace('/', "_");
            if url_safe != needle {
                out.push(url_safe);
            }
        }
    }
    let lower = hex(bytes);
    out.push(lower.to_ascii_uppercase());
    out.push(lower);
    let escaped = percent_encoded(bytes);
    if escaped != value {
        out.push(escaped.to_ascii_lowercase_escapes());
        out.push(escaped);
    }
    out.sort();
    out.dedup();
    out
}

fn base64_unpadded(input: &[u8]) -> String {
    let mut out = String::with_capacity(input.len() * 4 / 3 + 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            let index = (n >> (18 - 6 * i)) & 63;
            out.push(char::from(STANDARD[index as usize]));
        }
    }
    out
}

pub(super) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// Every byte outside RFC 3986's unreserved set as `%XX`.
fn percent_encoded(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

trait LowerEscapes {
    fn to_ascii_lowercase_escapes(&self) -> String;
}

impl LowerEscapes for String {
    /// `%2F` → `%2f`, the rest unchanged.
    fn to_ascii_lowercase_escapes(&self) -> String {
        let mut out = String::with_capacity(self.len());
        let mut left = 0;
        for c in self.chars() {
            if c == '%' {
                left = 2;
                out.push(c);
            } else if left > 0 {
                left -= 1;
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }
}

/// The value of a base64 character (standard or URL-safe alphabet).
pub(super) fn base64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

/// Decodes base64 characters (no padding, no whitespace), ignoring a
/// trailing partial character; `None` at a character outside the alphabets.
pub(super) fn base64_decode(chars: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(chars.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &c in chars {
        acc = (acc << 6) | u32::from(base64_value(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            // Truncation intended: the byte just completed.
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

pub(super) fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip() {
        let data = b"API_KEY=sk-secret-value\n";
        let enc = base64_unpadded(data);
        assert_eq!(enc, "QVBJX0tFWT1zay1zZWNyZXQtdmFsdWUK");
        assert_eq!(base64_decode(enc.as_bytes()).unwrap(), data);
    }

    #[test]
    fn needles_match_inside_any_alignment() {
        let value = "s3cr3t-Value-42";
        let needles = needles(value);
        for prefix in ["", "A", "AB", "ABC", "X=\n"] {
            let stream = base64_unpadded(format!("{prefix}{value}\nmore").as_bytes());
            assert!(
                needles.iter().any(|n| stream.contains(n.as_str())),
                "prefix {prefix:?}: {stream}"
            );
        }
        assert!(needles.contains(&hex(value.as_bytes())));
        assert!(needles.contains(&hex(value.as_bytes()).to_ascii_uppercase()));
    }

    #[test]
    fn percent_encoding_both_cases() {
        let needles = needles("p@ss/word+1");
        assert!(needles.contains(&"p%40ss%2Fword%2B1".to_string()));
        assert!(needles.contains(&"p%40ss%2fword%2b1".to_string()));
    }

    #[test]
    fn short_values_have_no_encodings() {
        assert!(needles("abcde").is_empty());
    }
}
