//! Compressed data a command printed encoded (`gzip -c .env | base64`,
//! `gzip -c .env | xxd -p`, `zlib-flate`, Python's `zlib.compress`): the
//! decoded bytes of a block are inflated, with a cap, and checked again.
//!
//! Only gzip (`1f 8b 08`) and zlib (`78 01|5e|9c|da`, header checksum)
//! streams are recognised, by their header: raw deflate has none, and
//! inflating every decoded block "just in case" would cost on every base64
//! blob a tool prints. A truncated stream (`head -c`) still yields what it
//! decoded so far.

/// Inflated output kept at most: a value sits near the start of a small
/// file; a zip bomb costs at most this much memory.
pub(super) const MAX_INFLATED: usize = 1 << 20;

/// The inflated bytes of a gzip or zlib stream at the start of `bytes`
/// (the part inflated before an error or the cap), if it is one.
pub(super) fn inflate(bytes: &[u8]) -> Option<Vec<u8>> {
    use miniz_oxide::inflate::{decompress_to_vec_with_limit, decompress_to_vec_zlib_with_limit};
    let result = if let Some(body) = gzip_body(bytes) {
        decompress_to_vec_with_limit(body, MAX_INFLATED)
    } else if is_zlib(bytes) {
        decompress_to_vec_zlib_with_limit(bytes, MAX_INFLATED)
    } else {
        return None;
    };
    let out = result.unwrap_or_else(|err| err.output);
    (!out.is_empty()).then_some(out)
}

fn is_zlib(bytes: &[u8]) -> bool {
    match bytes {
        [cmf, flg, ..] => {
            *cmf == 0x78 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0 && flg & 0x20 == 0
        }
        _ => false,
    }
}

/// The deflate stream of a gzip member (RFC 1952 header skipped).
fn gzip_body(bytes: &[u8]) -> Option<&[u8]> {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    let [0x1f, 0x8b, 8, flags, _, _, _, _, _, _, rest @ ..] = bytes else {
        return None;
    };
    let mut rest = rest;
    if flags & FEXTRA != 0 {
        let [lo, hi, tail @ ..] = rest else {
            return None;
        };
        let len = usize::from(*lo) | usize::from(*hi) << 8;
        rest = tail.get(len..)?;
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let end = rest.iter().position(|&b| b == 0)?;
            rest = &rest[end + 1..];
        }
    }
    if flags & FHCRC != 0 {
        rest = rest.get(2..)?;
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `printf 'API_KEY=sk-inflate-test-1234\n' | gzip -n | xxd -p`
    const GZIP: &str = "1f8b0800000000000003730cf08cf7768db42dced6cdcc4bcb492c49d52d\
                        492d2ed135343236e102007ceebaff1d000000";

    fn unhex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn gzip_and_zlib_are_inflated() {
        let gz = unhex(GZIP);
        let out = inflate(&gz).expect("gzip");
        assert!(String::from_utf8_lossy(&out).contains("sk-inflate-test-1234"));
        // Truncated: what was inflated so far.
        assert!(inflate(&gz[..gz.len() - 8]).is_some());
        // zlib: the same deflate body behind a zlib header.
        let mut z = vec![0x78, 0x9c];
        z.extend_from_slice(&gz[10..gz.len() - 8]);
        let out = inflate(&z).expect("zlib");
        assert!(String::from_utf8_lossy(&out).contains("sk-inflate-test-1234"));
        assert!(inflate(b"plain text, not compressed").is_none());
    }
}
