//! The [`Redactor`] every piece of text passes through on its way into a
//! prompt: agent tool output (file reads, search hits, command and test
//! output), every agent message, and completion prompts.
//!
//! What counts as secret, and the decisions behind it:
//!
//! * **Secret files** ([`crate::secrets::is_secret_path`]): dotenv files
//!   (`.env`, `.env.*`, `*.env`, `.envrc`), key material (`*.pem`, `*.key`,
//!   `*.p12`, `*.pfx`, `*.jks`, `*.keystore`, `*.ppk`, `id_rsa*`, `id_dsa*`,
//!   `id_ecdsa*`, `id_ed25519*`) and credential stores (`credentials.json`,
//!   `client_secret*.json`, `.netrc`, `.git-credentials`, `.pgpass`,
//!   `.pypirc`, `*.tfstate`). Templates (`.env.example`, `.env.sample`,
//!   `.env.template`, `.env.dist`, `.env.defaults`) are *not* secret: they
//!   document which variables exist, which helps a repair, and their
//!   values are placeholders, so they are neither hidden nor harvested.
//!   `.npmrc` is not a secret file either (it mostly holds registry
//!   settings a build fix may need); its `_authToken=` lines are caught by
//!   the secret-looking-key rule below.
//! * **Known values** ([`Redactor::from_workspace`]): every value of every
//!   secret dotenv file, and every variable Fettle holds as secret (its
//!   API keys: [`crate::secrets::store`]), wherever it appears, except
//!   values that are trivially common (see [`env`]) — redacting `true` or
//!   `3000` everywhere would blind the model to the code without
//!   protecting anything.
//! * **Known values, transformed** ([`transforms`], [`encoded`],
//!   [`decoded`], [`inflate`]): reversed, rot13, rot47, base64 (standard
//!   and URL-safe, at each of the 3 alignments inside a longer stream),
//!   base32 (5 alignments), hex (either case, and reversed) and
//!   URL-encoding, searched for in a whitespace-free view of the text (so
//!   one character per line, `fold`, wrapped base64/base32 are found);
//!   every 8-character piece of a random-looking value (`cut -c13-30`);
//!   blocks of base64/base32 lines and hex/octal/character dumps, decoded
//!   (as printed, each line reversed, the whole reversed) and inflated when
//!   gzip/zlib, then checked for the values. Values shorter than 6 bytes
//!   are searched for literally only (their encodings would match by
//!   chance).
//! * **Pieces at line edges** ([`fragments`]): a value's first characters
//!   cut off by the end of the line after `=` (`cut -c1-12 .env`), and the
//!   continuation of a value read in pieces (`head -c`, then `tail -c`),
//!   across the task's tool outputs ([`Redactor::redact_in_sequence`]).
//! * **Key material by shape** ([`keys`]): key bodies without their
//!   header — OpenSSH bodies, base64 that decodes to a DER key, PEM-width
//!   body lines — and, through decoding, base64 of a whole key file.
//! * **Shapes** ([`patterns`]): PEM private key blocks, well-known API token
//!   formats, JWTs, `Bearer`/`Basic` credentials, passwords in URLs, and the
//!   value of an assignment whose key looks secret (`api_key = "…"`).
//!
//! False positives are kept out by construction: encoded and decoded
//! checks only fire on *known* values or on key structure (a DER header,
//! the OpenSSH magic, a `PRIVATE KEY` text), never on "looks random", so
//! lockfile hashes, checksums, UUIDs and base64 test data stay visible;
//! the one width-based rule (64/70-character body lines) needs the run to
//! be alone at the end of its line and to mix cases and digits (hex
//! digests never do). See each module for its exact rules.
//!
//! Replacements read `[REDACTED]` (known values, secret assignments) or
//! `[REDACTED:<kind>]` (`encoded-secret`, `private-key`, recognised token
//! shapes), so the model knows something was there and does not try to
//! "fix" it.
//!
//! Cost: one pass of each literal set and each shape regex, plus a linear
//! scan for base64 runs and dump lines; see `docs/trust/secrets.md` for the
//! measurements.
mod decoded;
mod encoded;
pub(super) mod env;
mod fragments;
mod inflate;
mod keys;
mod patterns;
mod transforms;

use std::borrow::Cow;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use regex::{Regex, RegexBuilder};

pub use env::env_secret_values;

/// Values per compiled alternation: keeps each regex well inside the
/// regex crate's size limit however many values a workspace has.
const VALUES_PER_REGEX: usize = 256;

/// Replaces secrets in text bound for a model. Cheap to share; build it
/// once per task ([`from_workspace`](Self::from_workspace)).
pub struct Redactor {
    /// Literal secret values, longest first within each regex so a value
    /// that contains another is replaced whole.
    values: Vec<Regex>,
    /// Their other forms and pieces, in the whitespace-free view (see
    /// [`transforms`]).
    forms: Option<transforms::Forms>,
    /// Their first characters, for pieces at line edges (see [`fragments`]).
    prefixes: fragments::Prefixes,
    /// Split reads still open after the texts given to
    /// [`Redactor::redact_in_sequence`].
    window: parking_lot::Mutex<fragments::Window>,
    /// The values again, for decoded bytes (see [`decoded`]).
    decoded_values: Option<regex::bytes::Regex>,
    value_count: usize,
    /// The literal values, sorted: to tell whether a rebuild would change
    /// anything ([`Redactor::knows_exactly`]).
    known: Vec<String>,
    redactions: AtomicUsize,
}

/// Compiles the shape patterns now, on a thread nobody waits for: each is
/// compiled on its first use, which otherwise fell on the first
/// completion's prompt (~4 of its 5 ms on the 2-core dev machine; see
/// docs/performance.md). The number of patterns that compiled.
pub fn warm_up() -> usize {
    patterns::compile() + usize::from(keys::compile())
}

impl Redactor {
    /// A redactor for the workspace at `root`: the shapes, the values of
    /// every dotenv file under it (any depth and size, hidden and gitignored
    /// files included, symlinked ones by their target; see [`env`]) and the
    /// values Fettle holds as secret ([`crate::secrets::store`]).
    pub fn from_workspace(root: &Path) -> Redactor {
        Self::for_sources(Some(root), Vec::new())
    }

    /// Like [`from_workspace`](Self::from_workspace) (without a workspace
    /// when `root` is `None`), plus `extra` dotenv values (from open
    /// buffers of secret files, say).
    pub fn for_sources(root: Option<&Path>, extra: Vec<String>) -> Redactor {
        Self::build(Self::sources(root, extra))
    }

    /// The literal values [`for_sources`](Self::for_sources) would look for.
    pub fn sources(root: Option<&Path>, extra: Vec<String>) -> Vec<String> {
        // Fettle's keys first: the first values get every transform
        // matched when a workspace has more than the automaton takes.
        let mut values: Vec<String> = crate::secrets::store::values()
            .into_iter()
            .map(|v| v.trim().to_owned())
            .filter(|v| env::worth_redacting(v))
            .collect();
        values.extend(extra);
        let workspace = root.map(env::workspace_values).unwrap_or_default();
        let dotenv = workspace.len();
        values.extend(workspace);
        tracing::debug!(
            dotenv,
            values = values.len(),
            "redactor: secret values collected"
        );
        values
    }

    /// Whether this redactor looks for exactly the literal `values` (as
    /// [`sources`](Self::sources) gives them), so that one built for them
    /// would redact the same.
    pub fn knows_exactly(&self, mut values: Vec<String>) -> bool {
        normalize(&mut values);
        values == self.known
    }

    /// A redactor for these literal values (plus the shapes). Values that
    /// are too short or trivially common are dropped (see [`env`]).
    pub fn with_values(values: Vec<String>) -> Redactor {
        let values = values
            .into_iter()
            .flat_map(|v| {
                v.lines()
                    .map(str::trim)
                    .filter(|l| env::worth_redacting(l))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        Self::build(values)
    }

    /// A redactor for `values` (as [`sources`](Self::sources) gives them).
    pub fn build(mut values: Vec<String>) -> Redactor {
        // In the order given (see `sources`), before sorting.
        let forms = transforms::Forms::build(&values);
        normalize(&mut values);
        let value_count = values.len();
        let prefixes = fragments::Prefixes::build(&values);
        let decoded_values = if values.is_empty() {
            None
        } else {
            let alternation: Vec<String> = values.iter().map(|v| regex::escape(v)).collect();
            regex::bytes::RegexBuilder::new(&alternation.join("|"))
                .unicode(false)
                .size_limit(256 << 20)
                .build()
                .map_err(|err| tracing::error!("redactor: decoded-value matcher: {err}"))
                .ok()
        };
        Redactor {
            values: literal_sets(&values),
            forms,
            prefixes,
            window: parking_lot::Mutex::new(fragments::Window::default()),
            decoded_values,
            value_count,
            known: values,
            redactions: AtomicUsize::new(0),
        }
    }

    /// How many literal values this redactor looks for.
    pub fn value_count(&self) -> usize {
        self.value_count
    }

    /// Secrets replaced so far, over every call.
    pub fn redactions(&self) -> usize {
        self.redactions.load(Ordering::Relaxed)
    }

    /// `text` with every secret replaced; borrowed when there was none.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redact_with(text, None)
    }

    /// [`redact`](Self::redact) for one text of a sequence (the messages of
    /// an agent task, in order): a value read in pieces across the texts
    /// (`head -c 40 .env`, then `tail -c +41 .env`) is redacted where it
    /// continues (see [`fragments`]).
    pub fn redact_in_sequence<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut window = self.window.lock();
        self.redact_with(text, Some(&mut window))
    }

    fn redact_with<'a>(
        &self,
        text: &'a str,
        window: Option<&mut fragments::Window>,
    ) -> Cow<'a, str> {
        let mut spans: Vec<patterns::Span> = Vec::new();
        let literal = |sets: &[Regex], label, rank, spans: &mut Vec<patterns::Span>| {
            for re in sets {
                spans.extend(re.find_iter(text).map(|m| patterns::Span {
                    range: m.range(),
                    label,
                    rank,
                }));
            }
        };
        literal(&self.values, None, 0, &mut spans);
        if let Some(forms) = &self.forms {
            spans.extend(forms.find(text).into_iter().map(|(range, form)| {
                let (label, rank) = match form {
                    transforms::Form::Plain => (None, 0),
                    transforms::Form::Encoded => (Some("encoded-secret"), 1),
                };
                patterns::Span { range, label, rank }
            }));
        }
        spans.extend(
            self.prefixes
                .find(text, window)
                .into_iter()
                .map(|range| patterns::Span {
                    range,
                    label: None,
                    rank: 2,
                }),
        );
        patterns::find(text, &mut spans);
        let tagged = |ranges: Vec<std::ops::Range<usize>>, label, rank| {
            ranges.into_iter().map(move |range| patterns::Span {
                range,
                label: Some(label),
                rank,
            })
        };
        spans.extend(tagged(keys::find(text), "private-key", 100));
        spans.extend(tagged(
            decoded::find(text, self.decoded_values.as_ref()),
            "encoded-secret",
            101,
        ));
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        // Earliest first; at one start the longest, then the first detector.
        spans.sort_by(|a, b| {
            a.range
                .start
                .cmp(&b.range.start)
                .then(b.range.end.cmp(&a.range.end))
                .then(a.rank.cmp(&b.rank))
        });
        let mut out = String::with_capacity(text.len());
        let mut done = 0;
        let mut count = 0;
        for span in &spans {
            if span.range.start < done {
                // Overlaps one already replaced: extend that replacement.
                done = done.max(span.range.end);
                continue;
            }
            out.push_str(&text[done..span.range.start]);
            match span.label {
                Some(label) => {
                    out.push_str("[REDACTED:");
                    out.push_str(label);
                    out.push(']');
                }
                None => out.push_str("[REDACTED]"),
            }
            done = span.range.end;
            count += 1;
        }
        out.push_str(&text[done..]);
        self.redactions.fetch_add(count, Ordering::Relaxed);
        Cow::Owned(out)
    }
}

/// Literal alternations, [`VALUES_PER_REGEX`] literals each.
/// Longest first (a value that contains another is replaced whole), then
/// in order; no duplicates.
fn normalize(values: &mut Vec<String>) {
    values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    values.dedup();
}

fn literal_sets(literals: &[String]) -> Vec<Regex> {
    literals
        .chunks(VALUES_PER_REGEX)
        .filter_map(|chunk| {
            let alternation: Vec<String> = chunk.iter().map(|v| regex::escape(v)).collect();
            let built = RegexBuilder::new(&alternation.join("|"))
                .size_limit(64 << 20)
                .build();
            match built {
                Ok(re) => Some(re),
                Err(err) => {
                    // Only a size limit can fail an escaped alternation.
                    tracing::error!("redactor: dropping {} values: {err}", chunk.len());
                    None
                }
            }
        })
        .collect()
}

impl Default for Redactor {
    /// The shapes only, no workspace values.
    fn default() -> Self {
        Self::build(Vec::new())
    }
}

impl std::fmt::Debug for Redactor {
    // Never prints the values themselves.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("values", &self.value_count)
            .field("redactions", &self.redactions())
            .finish()
    }
}
