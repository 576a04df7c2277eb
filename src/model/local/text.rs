//! Turning generated tokens into text: UTF-8 pieces that may split a
//! character, and stop sequences that may span pieces.

/// Collects token bytes and hands out only complete UTF-8.
#[derive(Default)]
pub(crate) struct Utf8Assembler {
    pending: Vec<u8>,
}

impl Utf8Assembler {
    /// Adds `bytes` and returns the longest valid UTF-8 prefix of what is
    /// pending. Invalid sequences (not just incomplete ones) become U+FFFD.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        match std::str::from_utf8(&self.pending) {
            Ok(s) => {
                let out = s.to_string();
                self.pending.clear();
                out
            }
            Err(e) => {
                let valid = e.valid_up_to();
                if e.error_len().is_some() {
                    // A real encoding error, not a split character.
                    let out = String::from_utf8_lossy(&self.pending).into_owned();
                    self.pending.clear();
                    return out;
                }
                let out = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
                self.pending.drain(..valid);
                out
            }
        }
    }
}

/// Finds stop sequences in streamed text, holding back the tail that could
/// still become one so that no part of a stop sequence is ever emitted.
pub(crate) struct StopMatcher {
    stops: Vec<String>,
    text: String,
    emitted: usize,
}

/// What to do after feeding more text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StopStep {
    /// Emit this (maybe empty) text and go on.
    Continue(String),
    /// Emit this text and stop: a stop sequence matched.
    Stop(String),
}

impl StopMatcher {
    pub fn new(stops: &[String]) -> Self {
        Self {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            text: String::new(),
            emitted: 0,
        }
    }

    pub fn push(&mut self, piece: &str) -> StopStep {
        let search_from = floor_boundary(
            &self.text,
            self.emitted
                .saturating_sub(self.stops.iter().map(String::len).max().unwrap_or(0)),
        );
        self.text.push_str(piece);
        let first_stop = self
            .stops
            .iter()
            .filter_map(|s| self.text[search_from..].find(s.as_str()))
            .min();
        if let Some(at) = first_stop {
            let end = (search_from + at).max(self.emitted);
            let out = self.text[self.emitted..end].to_string();
            self.emitted = end;
            return StopStep::Stop(out);
        }
        let held = self
            .stops
            .iter()
            .map(|s| longest_suffix_prefix(&self.text[self.emitted..], s))
            .max()
            .unwrap_or(0);
        let end = self.text.len() - held;
        let out = self.text[self.emitted..end].to_string();
        self.emitted = end;
        StopStep::Continue(out)
    }

    /// The held-back tail, once generation ended without a stop match.
    pub fn finish(&mut self) -> String {
        let out = self.text[self.emitted..].to_string();
        self.emitted = self.text.len();
        out
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `stop`.
fn longest_suffix_prefix(text: &str, stop: &str) -> usize {
    let max = text.len().min(stop.len().saturating_sub(1));
    (1..=max)
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n) && stop.starts_with(&text[text.len() - n..])
        })
        .unwrap_or(0)
}

fn floor_boundary(s: &str, mut at: usize) -> usize {
    at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut m = StopMatcher::new(&stops);
        let mut out = String::new();
        for p in pieces {
            match m.push(p) {
                StopStep::Continue(t) => out.push_str(&t),
                StopStep::Stop(t) => {
                    out.push_str(&t);
                    return (out, true);
                }
            }
        }
        out.push_str(&m.finish());
        (out, false)
    }

    #[test]
    fn stop_split_across_pieces_is_never_emitted() {
        assert_eq!(
            run(&["<fim_prefix>"], &["a + b", "<fim_", "prefix>x"]),
            ("a + b".into(), true)
        );
        assert_eq!(run(&["\n\n"], &["x\n", "\ny"]), ("x".into(), true));
        assert_eq!(run(&["END"], &["EN", "D"]), ("".into(), true));
    }

    #[test]
    fn held_back_text_is_released_when_it_cannot_match() {
        assert_eq!(run(&["<stop>"], &["a<", "b"]), ("a<b".into(), false));
        assert_eq!(run(&["<stop>"], &["a<st"]), ("a<st".into(), false));
        assert_eq!(run(&[], &["α", "β"]), ("αβ".into(), false));
    }

    #[test]
    fn earliest_stop_wins() {
        assert_eq!(run(&["b", "a"], &["xab"]), ("x".into(), true));
    }

    #[test]
    fn utf8_split_characters_are_joined() {
        let mut a = Utf8Assembler::default();
        let bytes = "é😀".as_bytes();
        assert_eq!(a.push(&bytes[..1]), "");
        assert_eq!(a.push(&bytes[1..3]), "é");
        assert_eq!(a.push(&bytes[3..]), "😀");
        assert_eq!(a.push(&[0xff, b'a']), "\u{fffd}a");
    }
}
