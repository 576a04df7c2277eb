//! Short pieces of known values at the edges of lines, which the other
//! rules (whole values, [`super::transforms::GRAM`]-character pieces) let
//! through:
//!
//! * **Value position**: a line ending in `=`/`:` (then an optional quote)
//!   and ≥ [`MIN_AT_VALUE`] leading characters of a known value —
//!   `cut -c1-12 .env` prints `API_KEY=sk-a`. A known value's prefix
//!   right after an assignment, cut off by the end of the line, is that
//!   value being leaked, not code.
//! * **Split reads**: a line ending in ≥ [`MIN_PIECE`] leading characters
//!   of a value (`head -c 40 .env`), and a later line — in the same text or
//!   in a later tool output of the task ([`Window`]) — starting with
//!   what follows them (`tail -c +41 .env`): that continuation is redacted,
//!   and may itself be continued. So a value read in pieces at line edges
//!   never reaches the model whole, whatever the framing between them.
//!
//! Prefixes are looked up by binary search in the sorted values, after a
//! bitmap of the values' first two bytes rules out most positions: a line
//! costs a few bit tests.
use std::ops::Range;

/// Shortest piece at a line's edge that continues (or starts) a split read.
const MIN_PIECE: usize = 3;
/// Shortest prefix redacted in value position.
const MIN_AT_VALUE: usize = 4;
/// Longest line-end piece looked at (longer pieces are caught as
/// [`super::transforms::GRAM`]-character pieces).
const MAX_PIECE: usize = 64;
/// Values shorter than this have no pieces worth tracking.
const MIN_VALUE: usize = 6;
/// Split reads remembered across texts.
const MAX_PENDING: usize = 64;
/// Texts after which an open split read is forgotten: the reads of one
/// attack come in consecutive tool results (with, at most, the model's
/// own message and a few other results between them); a stale one could
/// only misfire on a later line that happens to start alike.
const MAX_PENDING_AGE: u32 = 8;

/// A value read up to `at` bytes: what follows is its continuation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pending {
    value: usize,
    at: usize,
    /// Texts seen since it was opened.
    age: u32,
}

/// The split reads still open after the task's previous tool outputs.
#[derive(Default, Debug)]
pub(super) struct Window {
    pending: Vec<Pending>,
}

pub(super) struct Prefixes {
    /// Values of ≥ [`MIN_VALUE`] bytes, sorted.
    sorted: Vec<String>,
    /// Bit `b0 << 8 | b1` set when a value starts with bytes b0 b1.
    starts: Vec<u64>,
}

impl Prefixes {
    pub(super) fn build(values: &[String]) -> Prefixes {
        let mut sorted: Vec<String> = values
            .iter()
            .filter(|v| v.len() >= MIN_VALUE)
            .cloned()
            .collect();
        sorted.sort();
        sorted.dedup();
        let mut starts = vec![0u64; 1 << 10];
        for v in &sorted {
            let b = v.as_bytes();
            let bit = usize::from(b[0]) << 8 | usize::from(b[1]);
            starts[bit / 64] |= 1 << (bit % 64);
        }
        Prefixes { sorted, starts }
    }

    fn may_start(&self, piece: &[u8]) -> bool {
        match piece {
            [a, b, ..] => {
                let bit = usize::from(*a) << 8 | usize::from(*b);
                self.starts[bit / 64] & (1 << (bit % 64)) != 0
            }
            _ => false,
        }
    }

    /// A value that `piece` is a proper prefix of.
    fn value_starting(&self, piece: &[u8]) -> Option<usize> {
        let i = self.sorted.partition_point(|v| v.as_bytes() < piece);
        let v = self.sorted.get(i)?.as_bytes();
        (v.len() > piece.len() && v.starts_with(piece)).then_some(i)
    }

    /// Redacted spans of `text`; `window` carries split reads in from the
    /// previous texts and out to the next.
    pub(super) fn find(&self, text: &str, window: Option<&mut Window>) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        if self.sorted.is_empty() {
            return out;
        }
        let mut local = Window::default();
        let window = window.unwrap_or(&mut local);
        window.pending.retain_mut(|p| {
            p.age += 1;
            p.age <= MAX_PENDING_AGE
        });
        let bytes = text.as_bytes();
        let mut start = 0;
        while start < bytes.len() {
            let end = bytes[start..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| start + i);
            self.line(text, start..end, window, &mut out);
            start = end + 1;
        }
        if window.pending.len() > MAX_PENDING {
            let extra = window.pending.len() - MAX_PENDING;
            window.pending.drain(..extra);
        }
        out
    }

    fn line(
        &self,
        text: &str,
        line: Range<usize>,
        window: &mut Window,
        out: &mut Vec<Range<usize>>,
    ) {
        let bytes = text.as_bytes();
        let mut first = line.start;
        while first < line.end && bytes[first].is_ascii_whitespace() {
            first += 1;
        }
        let mut last = line.end;
        while last > first && bytes[last - 1].is_ascii_whitespace() {
            last -= 1;
        }
        if first == last {
            return;
        }
        // A continuation of an open split read, at the line's start.
        let token_end = bytes[first..last]
            .iter()
            .position(u8::is_ascii_whitespace)
            .map_or(last, |i| first + i);
        let token = &bytes[first..token_end];
        let mut continued = Vec::new();
        window.pending.retain(|p| {
            let rest = &self.sorted[p.value].as_bytes()[p.at..];
            let m = token.iter().zip(rest).take_while(|(a, b)| a == b).count();
            let hit =
                (m >= MIN_PIECE || (m == rest.len() && m > 0)) && text.is_char_boundary(first + m);
            if hit {
                out.push(first..first + m);
                if p.at + m < self.sorted[p.value].len() {
                    continued.push(Pending {
                        value: p.value,
                        at: p.at + m,
                        age: 0,
                    });
                }
            }
            !hit
        });
        window.pending.extend(continued);
        // The start of a value, at the line's end.
        let token_start = bytes[first..last]
            .iter()
            .rposition(u8::is_ascii_whitespace)
            .map_or(first, |i| first + i + 1);
        let from = token_start.max(last.saturating_sub(MAX_PIECE));
        for at in from..last.saturating_sub(MIN_PIECE - 1) {
            let piece = &bytes[at..last];
            if !self.may_start(piece) || !text.is_char_boundary(at) {
                continue;
            }
            let Some(value) = self.value_starting(piece) else {
                continue;
            };
            let before = &bytes[token_start..at];
            let before = before
                .strip_suffix(b"\"")
                .or_else(|| before.strip_suffix(b"'"))
                .unwrap_or(before);
            if piece.len() >= MIN_AT_VALUE && (before.ends_with(b"=") || before.ends_with(b":")) {
                out.push(at..last);
            }
            window.pending.push(Pending {
                value,
                at: piece.len(),
                age: 0,
            });
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixes() -> Prefixes {
        Prefixes::build(&["sk-Zq8xR2mK9vLpW4".to_owned(), "hunter2-Qx7".to_owned()])
    }

    #[test]
    fn a_prefix_in_value_position_is_redacted() {
        let p = prefixes();
        let text = "API_KEY=sk-Z\nX=\"hunter\nplain sk-Z\nfn f() -> x=y\n";
        let spans = p.find(text, None);
        let got: Vec<&str> = spans.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(got, ["sk-Z", "hunter"]);
    }

    #[test]
    fn a_read_split_across_texts_is_redacted_where_it_continues() {
        let p = prefixes();
        let mut window = Window::default();
        assert!(
            p.find("exit code 0\nDB=1\nTOKEN=sk-Zq", Some(&mut window))
                .len()
                == 1
        );
        let second = "exit code 0\n8xR2m\n";
        let spans = p.find(second, Some(&mut window));
        assert_eq!(
            spans.iter().map(|r| &second[r.clone()]).collect::<Vec<_>>(),
            ["8xR2m"]
        );
        // And further on.
        let third = "K9vLpW4 tail";
        let spans = p.find(third, Some(&mut window));
        assert_eq!(
            spans.iter().map(|r| &third[r.clone()]).collect::<Vec<_>>(),
            ["K9vLpW4"]
        );
        // A line that merely starts alike elsewhere is left alone.
        assert!(p.find("8xR nothing", Some(&mut window)).is_empty());
        // An open split read is forgotten after a few texts.
        p.find("TOKEN=sk-Zq", Some(&mut window));
        for _ in 0..MAX_PENDING_AGE {
            p.find("unrelated", Some(&mut window));
        }
        assert!(p.find("8xR2m", Some(&mut window)).is_empty());
    }
}
