//! Nothing secret reaches a model: which files the agent never reads, and
//! the [`Redactor`] every piece of workspace text passes through on its way
//! into a prompt (file reads, search hits, command output).
//!
//! What counts as secret, and the decisions behind it:
//!
//! * **Secret files** ([`is_secret_path`]): dotenv files (`.env`, `.env.*`,
//!   `*.env`, `.envrc`), key material (`*.pem`, `*.key`, `*.p12`, `*.pfx`,
//!   `*.jks`, `*.keystore`, `*.ppk`, `id_rsa*`, `id_dsa*`, `id_ecdsa*`,
//!   `id_ed25519*`) and credential stores (`credentials.json`,
//!   `client_secret*.json`, `.netrc`, `.git-credentials`, `.pgpass`,
//!   `.pypirc`, `*.tfstate`). Templates (`.env.example`, `.env.sample`,
//!   `.env.template`, `.env.dist`, `.env.defaults`) are *not* secret: they
//!   document which variables exist, which helps a repair, and their
//!   values are placeholders, so they are neither hidden nor harvested.
//!   `.npmrc` is not a secret file either (it mostly holds registry
//!   settings a build fix may need); its `_authToken=` lines are caught by
//!   the secret-looking-key rule below.
//! * **Workspace `.env` values** ([`Redactor::from_workspace`]): every value
//!   of every secret dotenv file, wherever it appears, except values that
//!   are trivially common (see [`env`]) — redacting `true` or `3000`
//!   everywhere would blind the model to the code without protecting
//!   anything.
//! * **Shapes** ([`patterns`]): PEM private key blocks, well-known API token
//!   formats, JWTs, `Bearer`/`Basic` credentials, passwords in URLs, and the
//!   value of an assignment whose key looks secret (`api_key = "…"`).
//!
//! Replacements read `[REDACTED]` (dotenv values, secret assignments) or
//! `[REDACTED:<kind>]` (recognised shapes), so the model knows something
//! was there and does not try to "fix" it.
pub(super) mod env;
mod patterns;

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
    value_count: usize,
    redactions: AtomicUsize,
}

impl Redactor {
    /// A redactor for the workspace at `root`: the shapes, plus the values
    /// of every dotenv file under it (hidden and gitignored files included,
    /// depth ≤ 4, not inside `node_modules`, `target` or `.git`).
    pub fn from_workspace(root: &Path) -> Redactor {
        let values = env::workspace_values(root);
        tracing::debug!(values = values.len(), "redactor: dotenv values collected");
        Self::build(values)
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

    fn build(mut values: Vec<String>) -> Redactor {
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        let value_count = values.len();
        let values = values
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
            .collect();
        Redactor {
            values,
            value_count,
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
        let mut spans: Vec<patterns::Span> = Vec::new();
        for re in &self.values {
            spans.extend(re.find_iter(text).map(|m| patterns::Span {
                range: m.range(),
                label: None,
                rank: 0,
            }));
        }
        patterns::find(text, &mut spans);
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
