//! Secrets in the rewritten code: the model sees `[REDACTED…]` markers in
//! their place, and the markers in its answer are put back to the original
//! values, in order. An answer whose markers cannot be matched one for one
//! is refused: writing a marker over a key would break the code, and
//! guessing could put a secret where it was not.
use std::sync::OnceLock;

use regex::Regex;

use crate::secrets::Redactor;

/// The selection as the model sees it, and how to put its secrets back.
pub struct Redacted {
    pub text: String,
    /// (marker, original value) in order.
    secrets: Vec<(String, String)>,
    /// The markers could not be matched to the original text.
    ambiguous: bool,
}

fn marker() -> Option<&'static Regex> {
    static MARKER: OnceLock<Option<Regex>> = OnceLock::new();
    MARKER
        .get_or_init(|| {
            Regex::new(r"\[REDACTED(?::[a-z-]+)?\]")
                .map_err(|err| tracing::error!("redaction marker pattern: {err}"))
                .ok()
        })
        .as_ref()
}

impl Redacted {
    pub fn new(redactor: &Redactor, original: &str) -> Redacted {
        let text = redactor.redact(original).into_owned();
        let mut secrets = Vec::new();
        let mut ambiguous = false;
        if text != original {
            match marker() {
                Some(re) => {
                    // The text between markers is the original's, so each
                    // marker stands for what lies between its neighbours.
                    let mut from_redacted = 0;
                    let mut from_original = 0;
                    let found: Vec<regex::Match<'_>> = re.find_iter(&text).collect();
                    for (i, m) in found.iter().enumerate() {
                        let literal = &text[from_redacted..m.start()];
                        from_original += literal.len();
                        let next_literal = match found.get(i + 1) {
                            Some(next) => &text[m.end()..next.start()],
                            None => &text[m.end()..],
                        };
                        let end = if found.get(i + 1).is_none() {
                            original.len() - next_literal.len()
                        } else if next_literal.is_empty() {
                            ambiguous = true;
                            break;
                        } else {
                            match original[from_original..].find(next_literal) {
                                Some(at) => from_original + at,
                                None => {
                                    ambiguous = true;
                                    break;
                                }
                            }
                        };
                        if end < from_original {
                            ambiguous = true;
                            break;
                        }
                        secrets.push((
                            m.as_str().to_owned(),
                            original[from_original..end].to_owned(),
                        ));
                        from_original = end;
                        from_redacted = m.end();
                    }
                }
                None => ambiguous = true,
            }
        }
        Redacted {
            text,
            secrets,
            ambiguous,
        }
    }

    /// Whether anything was hidden from the model.
    pub fn hid_secrets(&self) -> bool {
        !self.secrets.is_empty() || self.ambiguous
    }

    /// `answer` with its markers replaced by the hidden values, or why not.
    pub fn restore(&self, answer: &str) -> Result<String, String> {
        let Some(re) = marker() else {
            return Ok(answer.to_owned());
        };
        let found: Vec<regex::Match<'_>> = re.find_iter(answer).collect();
        if found.is_empty() {
            return Ok(answer.to_owned());
        }
        let matches = !self.ambiguous
            && found.len() == self.secrets.len()
            && found
                .iter()
                .zip(&self.secrets)
                .all(|(m, (marker, _))| m.as_str() == marker);
        if !matches {
            return Err(format!(
                "the selection holds {} secret value(s) that Fettle does not send to a model, and \
                 the answer moved or repeated their placeholders, so they could not be put back \
                 safely; select code without the secret, or edit it by hand",
                self.secrets.len().max(1)
            ));
        }
        let mut out = String::with_capacity(answer.len());
        let mut at = 0;
        for (m, (_, value)) in found.iter().zip(&self.secrets) {
            out.push_str(&answer[at..m.start()]);
            out.push_str(value);
            at = m.end();
        }
        out.push_str(&answer[at..]);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_put_back_in_order() {
        let redactor = Redactor::with_values(vec![
            "s3cr3t-value-AAAA1111".to_owned(),
            "an0ther-value-BBBB2222".to_owned(),
        ]);
        let original = "a = 's3cr3t-value-AAAA1111'\nb = 'an0ther-value-BBBB2222'\n";
        let r = Redacted::new(&redactor, original);
        assert!(!r.text.contains("s3cr3t"), "{}", r.text);
        assert!(r.hid_secrets());
        let answer = r.text.replace("a =", "alpha =");
        assert_eq!(
            r.restore(&answer).unwrap(),
            original.replace("a =", "alpha =")
        );
        let dropped_one = r.text.lines().next().unwrap().to_owned();
        assert!(r.restore(&dropped_one).is_err());
    }
}
