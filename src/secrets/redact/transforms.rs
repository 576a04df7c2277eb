//! Known values under the transforms a command can apply with one stock
//! tool, searched for in a *whitespace-free view* of the text.
//!
//! Forms of each value of ≥ [`MIN_LONG`] characters (whitespace removed):
//!
//! * the value itself, reversed (`rev`), rot13 (`tr A-Za-z N-ZA-Mn-za-m`),
//!   rot13 of the reversed value, rot47;
//! * base64 (both alphabets) and base32 at every alignment the value can
//!   have inside a longer stream (`base64 .env`, `base32 .env`), hex in
//!   either case and reversed hex (`xxd -p .env | tr -d '\n' | rev`),
//!   URL-encoding (see [`super::encoded`]);
//! * **pieces**: every [`GRAM`]-character window of each random-looking
//!   segment of the value (see [`grams`]), so `cut -c13-30 .env`, `head -c`
//!   and a value split over two reads show no piece of [`GRAM`] characters
//!   or more.
//!
//! The view drops ASCII whitespace (spaces, tabs, newlines): a value printed
//! one character per line (`fold -w1`, `grep -o .`), broken over lines
//! (`fold -w 32`) or spaced out is contiguous there, and so is `base32`'s or
//! `base64`'s wrapped output. A hit is mapped back to the original text and
//! redacted from its first to its last character. All forms are matched by
//! one Aho-Corasick automaton in one pass, overlapping matches included (so
//! every character of a long piece is covered by some window).
//!
//! False positives: every needle is ≥ [`GRAM`] characters of a *known*
//! value's form, so ordinary text matches only by copying it; pieces come
//! only from windows that change between lower case, upper case and
//! digits at least 3 times (a password made of dictionary words yields
//! none: `battery-` must not vanish from code, nor `-value-1` because a
//! `.env` holds `deep-value-123`); joining words across whitespace can create a needle only by
//! an 8-character coincidence with a random string.
use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

use super::encoded;

/// Values this long (whitespace removed) or longer are matched in the
/// whitespace-free view with all their forms; shorter ones literally only.
pub(super) const MIN_LONG: usize = 8;
/// Piece length: the most of a random value a model can see in one run.
pub(super) const GRAM: usize = 8;
/// A segment must be this long to yield pieces (shorter ones are words,
/// ports, hosts: `5432`, `db.internal`).
const MIN_SEGMENT: usize = 12;
/// Values whose transforms and pieces are searched for (the rest: plain
/// and whitespace-free only). Bounds the automaton (~60 needles a value).
pub(super) const MAX_RICH_VALUES: usize = 2_000;

/// Needles up to which the automaton is a DFA.
const DFA_NEEDLES: usize = 4_000;

/// What a needle stands for: the plain value (`[REDACTED]`) or another
/// form of it (`[REDACTED:encoded-secret]`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Form {
    Plain,
    Encoded,
}

/// The automaton over every needle, and each needle's form.
pub(super) struct Forms {
    automaton: AhoCorasick,
    forms: Vec<Form>,
}

/// ASCII whitespace removed.
pub(super) fn strip(text: &str) -> String {
    let bytes: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    // Removing ASCII bytes from UTF-8 leaves UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

impl Forms {
    /// The needles of `values` (plain values; only the first
    /// [`MAX_RICH_VALUES`] get their transforms and pieces). `None` when
    /// there is none or the automaton cannot be built.
    pub(super) fn build(values: &[String]) -> Option<Forms> {
        let mut needles: Vec<(String, Form)> = Vec::new();
        let mut rich = 0;
        for value in values {
            let flat = strip(value);
            if flat.chars().count() < MIN_LONG {
                continue;
            }
            if rich >= MAX_RICH_VALUES {
                needles.push((flat, Form::Plain));
                continue;
            }
            rich += 1;
            needles.extend(grams(value).into_iter().map(|g| (g, Form::Plain)));
            let reversed: String = flat.chars().rev().collect();
            let hex = encoded::hex(flat.as_bytes());
            let mut encodings = vec![
                rot13(&flat),
                rot13(&reversed),
                rot47(&flat),
                hex.chars().rev().collect(),
                hex.to_ascii_uppercase().chars().rev().collect(),
                reversed,
            ];
            encodings.extend(encoded::needles(value));
            encodings.extend(base32_needles(value.as_bytes()));
            needles.push((flat, Form::Plain));
            needles.extend(
                encodings
                    .into_iter()
                    .filter(|n| n.len() >= GRAM)
                    .map(|n| (n, Form::Encoded)),
            );
        }
        if values.len() > rich && rich == MAX_RICH_VALUES {
            tracing::warn!(
                values = values.len(),
                rich = MAX_RICH_VALUES,
                "redactor: too many secret values; only the first get their transforms and pieces matched"
            );
        }
        // A needle that is both a plain piece and an encoding is plain.
        needles.sort();
        needles.dedup_by(|a, b| a.0 == b.0);
        if needles.is_empty() {
            return None;
        }
        // A DFA scans fastest; past a few thousand needles its memory
        // (256 transitions a state) is not worth it.
        let kind = (needles.len() <= DFA_NEEDLES).then_some(AhoCorasickKind::DFA);
        let automaton = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .kind(kind)
            .build(needles.iter().map(|(n, _)| n.as_bytes()))
            .map_err(|err| tracing::error!("redactor: value forms: {err}"))
            .ok()?;
        Some(Forms {
            automaton,
            forms: needles.into_iter().map(|(_, f)| f).collect(),
        })
    }

    /// Spans (in `text`) of every needle found in its whitespace-free view,
    /// with their form.
    pub(super) fn find(&self, text: &str) -> Vec<(Range<usize>, Form)> {
        let has_space = text.bytes().any(|b| b.is_ascii_whitespace());
        let flat_owned;
        let flat: &str = if has_space {
            flat_owned = strip(text);
            &flat_owned
        } else {
            text
        };
        let mut hits: Vec<(Range<usize>, Form)> = self
            .automaton
            .find_overlapping_iter(flat)
            .map(|m| (m.range(), self.forms[m.pattern().as_usize()]))
            .collect();
        if hits.is_empty() || !has_space {
            return hits;
        }
        map_back(text, &mut hits);
        hits
    }
}

/// Maps ranges of the whitespace-free view back onto `text` (first to last
/// character, whatever whitespace lies between).
fn map_back(text: &str, hits: &mut [(Range<usize>, Form)]) {
    // Each view offset `o` of interest: a start (the byte at o) or an end
    // (one past the byte at o - 1).
    let mut wanted: Vec<usize> = hits
        .iter()
        .flat_map(|(r, _)| [r.start, r.end.saturating_sub(1)])
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut at_view = Vec::with_capacity(wanted.len());
    let mut next = wanted.iter().peekable();
    let mut view = 0;
    for (i, b) in text.bytes().enumerate() {
        if b.is_ascii_whitespace() {
            continue;
        }
        while next.peek().is_some_and(|&&w| w == view) {
            at_view.push((view, i));
            next.next();
        }
        view += 1;
        if next.peek().is_none() {
            break;
        }
    }
    let original = |v: usize| {
        at_view
            .binary_search_by_key(&v, |&(view, _)| view)
            .map_or(text.len(), |k| at_view[k].1)
    };
    for (range, _) in hits.iter_mut() {
        let start = original(range.start);
        let last = original(range.end.saturating_sub(1));
        // The last byte of the match, and the rest of its UTF-8 character.
        let mut end = (last + 1).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        *range = start..end.max(start);
    }
}

/// Every [`GRAM`]-character window of the random-looking segments of
/// `value`: segments split at URL and list punctuation and whitespace, ≥
/// [`MIN_SEGMENT`] ASCII characters; a window counts when it looks random
/// ([`random_looking`]).
pub(super) fn grams(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    for segment in value.split(|c: char| c.is_whitespace() || "/:@.?&=,;\"'`".contains(c)) {
        if segment.len() < MIN_SEGMENT || !segment.is_ascii() {
            continue;
        }
        let bytes = segment.as_bytes();
        for window in bytes.windows(GRAM) {
            if random_looking(window) {
                // ASCII: a window of a str is a str.
                out.push(String::from_utf8_lossy(window).into_owned());
            }
        }
    }
    out
}

/// At least 3 changes between lower case, upper case and digits from one
/// character to the next: `4f9a8b7c`, `Zq8xR2mK` (random strings change
/// class at most steps) but not `value-12`, `-value-1`, `release2024`
/// (words and numbers glued together, shared by unrelated values).
fn random_looking(window: &[u8]) -> bool {
    let class = |b: u8| match b {
        b'a'..=b'z' => Some(0),
        b'A'..=b'Z' => Some(1),
        b'0'..=b'9' => Some(2),
        _ => None,
    };
    let changes = window
        .windows(2)
        .filter(|pair| matches!((class(pair[0]), class(pair[1])), (Some(a), Some(b)) if a != b))
        .count();
    changes >= 3
}

pub(super) fn rot13(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'a'..='z' => char::from((c as u8 - b'a' + 13) % 26 + b'a'),
            'A'..='Z' => char::from((c as u8 - b'A' + 13) % 26 + b'A'),
            _ => c,
        })
        .collect()
}

/// `tr '!-~' 'P-~!-O'`.
pub(super) fn rot47(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '!'..='~' => char::from((c as u8 - b'!' + 47) % 94 + b'!'),
            _ => c,
        })
        .collect()
}

const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// Base32 (RFC 4648) of `value` at each of the 5 byte alignments it can
/// have inside a longer stream: the characters made only of its bits.
pub(super) fn base32_needles(value: &[u8]) -> Vec<String> {
    if value.len() < encoded::MIN_ENCODED_VALUE {
        return Vec::new();
    }
    let mut out = Vec::new();
    for k in 0..5 {
        let mut input = vec![0u8; k];
        input.extend_from_slice(value);
        let chars = base32(&input);
        let first = (8 * k).div_ceil(5);
        let last = (8 * input.len() / 5).min(chars.len());
        if last > first && last - first >= GRAM {
            out.push(chars[first..last].to_owned());
        }
    }
    out
}

/// Unpadded base32 (the characters, no `=`).
pub(super) fn base32(input: &[u8]) -> String {
    let mut out = String::with_capacity(input.len() * 8 / 5 + 8);
    let mut acc: u64 = 0;
    let mut bits = 0;
    for &b in input {
        acc = (acc << 8) | u64::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(BASE32[((acc >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(BASE32[((acc << (5 - bits)) & 31) as usize]));
    }
    out
}

/// Decodes base32 characters (`=` and anything else outside the alphabet
/// ends it), ignoring a trailing partial byte.
pub(super) fn base32_decode(chars: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(chars.len() * 5 / 8);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &c in chars {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'2'..=b'7' => c - b'2' + 26,
            _ => break,
        };
        acc = (acc << 5) | u32::from(v);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            // Truncation intended: the byte just completed.
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rot_and_base32() {
        assert_eq!(rot13("Hello-123"), "Uryyb-123");
        assert_eq!(rot13(&rot13("abcXYZ")), "abcXYZ");
        assert_eq!(rot47(&rot47("p@ss{w0rd}")), "p@ss{w0rd}");
        assert_eq!(base32(b"foobar"), "MZXW6YTBOI");
        assert_eq!(base32_decode(b"MZXW6YTBOI======"), b"foobar");
    }

    #[test]
    fn base32_needles_match_at_every_alignment() {
        let value = "s3cr3t-Value-42-xyz";
        let needles = base32_needles(value.as_bytes());
        for prefix in ["", "A", "AB", "ABC", "ABCD", "KEY=\n"] {
            let stream = base32(format!("{prefix}{value}\nmore").as_bytes());
            assert!(
                needles.iter().any(|n| stream.contains(n.as_str())),
                "prefix {prefix:?}: {stream}"
            );
        }
    }

    #[test]
    fn pieces_come_from_random_segments_only() {
        assert!(grams("correct-horse-battery-staple").is_empty());
        assert!(grams("https://api.example.com/v1").is_empty());
        let g = grams("postgres://app:Zq8xR2mK9vLp@db.internal:5432/shop");
        assert!(g.contains(&"Zq8xR2mK".to_owned()), "{g:?}");
        assert!(!g.iter().any(|p| p.contains("postgres")));
    }

    #[test]
    fn the_whitespace_free_view_maps_back() {
        let forms = Forms::build(&["Zq8xR2mK9vLpW4".to_owned()]).unwrap();
        let text = "a\nZ\nq\n8\nx\nR\n2\nm\nK\n9\nv\nL\np\nW\n4\nb";
        let hits = forms.find(text);
        let start = hits.iter().map(|h| h.0.start).min().unwrap();
        let end = hits.iter().map(|h| h.0.end).max().unwrap();
        assert_eq!(&text[start..end], &text[2..text.len() - 2]);
        // Nothing in ordinary text.
        assert!(forms
            .find("fn main() { let answer = compute(\"hi\"); }")
            .is_empty());
    }
}
