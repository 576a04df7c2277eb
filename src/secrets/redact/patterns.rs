//! Secrets recognised by their shape: private key blocks, token formats,
//! credentials in headers and URLs, and assignments to secret-looking keys.
//!
//! Every pattern is compiled once. Word boundaries are ASCII (`(?-u:\b)`):
//! Unicode ones keep the regex crate off its fast engines on any text with
//! a non-ASCII character (a 256 KiB output took ~80 ms instead of ~7 ms);
//! a token next to a non-ASCII letter is only redacted more readily. The assignment rule is the one that can
//! misfire on ordinary code (`let token = next_token();`), so its value
//! must look like a literal secret: see [`literal_secret`].
use std::ops::Range;
use std::sync::LazyLock;

use regex::{Regex, RegexSet};

/// A stretch of text to replace.
pub(super) struct Span {
    pub range: Range<usize>,
    /// `[REDACTED:<label>]`, or plain `[REDACTED]` when `None`.
    pub label: Option<&'static str>,
    /// Which detector, to break ties between equal spans deterministically.
    pub rank: usize,
}

struct Shape {
    label: &'static str,
    re: Regex,
    /// Its index in [`SHAPES`] (and in [`ANY`]).
    pattern: usize,
    /// The capture group replaced (0: the whole match).
    group: usize,
    /// An extra check on the replaced text.
    check: fn(&str) -> bool,
}

fn any(_: &str) -> bool {
    true
}

/// Random-looking: a digit and a letter (keeps kebab-case words and prose out).
fn mixed(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit()) && s.bytes().any(|b| b.is_ascii_alphabetic())
}

fn not_placeholder(s: &str) -> bool {
    !placeholder(s)
}

/// (label, pattern, group replaced, check on the replaced text).
type ShapeSpec = (&'static str, &'static str, usize, fn(&str) -> bool);

const SHAPES: &[ShapeSpec] = &[
    (
        "private-key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        0,
        any,
    ),
    (
        "anthropic-key",
        r"(?-u:\b)sk-ant-[A-Za-z0-9_\-]{20,}",
        0,
        any,
    ),
    (
        "openai-key",
        r"(?-u:\b)sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        0,
        mixed,
    ),
    (
        "github-token",
        r"(?-u:\b)(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}",
        0,
        any,
    ),
    (
        "github-token",
        r"(?-u:\b)github_pat_[A-Za-z0-9_]{30,}",
        0,
        any,
    ),
    ("gitlab-token", r"(?-u:\b)glpat-[A-Za-z0-9_\-]{20,}", 0, any),
    (
        "aws-access-key",
        r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?-u:\b)",
        0,
        any,
    ),
    (
        "slack-token",
        r"(?-u:\b)xox[abprse]-[A-Za-z0-9\-]{10,}",
        0,
        any,
    ),
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+",
        0,
        any,
    ),
    ("google-api-key", r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}", 0, any),
    (
        "google-client-secret",
        r"(?-u:\b)GOCSPX-[0-9A-Za-z_\-]{20,}",
        0,
        any,
    ),
    (
        "stripe-key",
        r"(?-u:\b)(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
        0,
        any,
    ),
    ("huggingface-token", r"(?-u:\b)hf_[A-Za-z0-9]{30,}", 0, any),
    ("npm-token", r"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)", 0, any),
    (
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
        0,
        any,
    ),
    (
        "bearer-token",
        r"(?i)(?-u:\b)bearer\s+([A-Za-z0-9\-._~+/]{16,}=*)",
        1,
        mixed,
    ),
    (
        "basic-auth",
        r#"(?i)(?-u:\b)authorization["']?\s*[:=]\s*["']?basic\s+([A-Za-z0-9+/]{8,}={0,2})"#,
        1,
        any,
    ),
    (
        "password",
        r#"(?-u:\b)[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@'"]+:([^\s/@'"]+)@"#,
        1,
        not_placeholder,
    ),
];

static COMPILED: LazyLock<Vec<Shape>> = LazyLock::new(|| {
    SHAPES
        .iter()
        .enumerate()
        .filter_map(
            |(index, &(label, pattern, group, check))| match Regex::new(pattern) {
                Ok(re) => Some(Shape {
                    label,
                    re,
                    pattern: index,
                    group,
                    check,
                }),
                Err(err) => {
                    // Covered by the tests; never silently weaker in production.
                    tracing::error!("redactor: pattern {label} does not compile: {err}");
                    None
                }
            },
        )
        .collect()
});

/// `key = value`, `key: value`, `"key": "value"`, `key := value`,
/// `key => value` where the key names a secret.
const ASSIGNMENT_PATTERN: &str = r#"(?i)(?P<key>[A-Za-z0-9_.\-]*(?:passw(?:or)?d|passphrase|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credentials?|auth[_\-]?key|_auth(?-u:\b))[A-Za-z0-9_.\-]*)["']?[ \t]*(?::=|=>|:|=)[ \t]*(?:"(?P<dq>[^"\r\n]*)"|'(?P<sq>[^'\r\n]*)'|(?P<uv>[^\s"'`,;()\[\]{}<>&|]+))"#;
static ASSIGNMENT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(ASSIGNMENT_PATTERN)
        .map_err(|err| tracing::error!("redactor: assignment pattern does not compile: {err}"))
        .ok()
});

/// Every shape's pattern and then the assignment's, as one set: one pass
/// over the text says which of them match at all (in a completion prompt
/// usually none), and only those are searched again for their captures.
/// Searching each pattern with captures was 40% of building a completion's
/// prompt (docs/performance.md). `None` if the set does not compile (the
/// patterns do, one by one): then every pattern is searched.
static ANY: LazyLock<Option<RegexSet>> = LazyLock::new(|| {
    let patterns = SHAPES.iter().map(|&(_, pattern, _, _)| pattern);
    RegexSet::new(patterns.chain(std::iter::once(ASSIGNMENT_PATTERN)))
        .map_err(|err| tracing::error!("redactor: the set of patterns does not compile: {err}"))
        .ok()
});

/// Compiles every pattern now (each is compiled on first use); the number
/// that compiled.
pub(super) fn compile() -> usize {
    COMPILED.len() + usize::from(ASSIGNMENT.is_some()) + usize::from(ANY.is_some())
}

/// Adds every shape and secret assignment found in `text` to `spans`.
pub(super) fn find(text: &str, spans: &mut Vec<Span>) {
    let matched = ANY.as_ref().map(|set| set.matches(text));
    // By pattern: SHAPES' order, then the assignment.
    let may_match = |pattern: usize| matched.as_ref().is_none_or(|m| m.matched(pattern));
    for (rank, shape) in COMPILED.iter().enumerate() {
        if !may_match(shape.pattern) {
            continue;
        }
        for caps in shape.re.captures_iter(text) {
            let Some(m) = caps.get(shape.group) else {
                continue;
            };
            if (shape.check)(m.as_str()) {
                spans.push(Span {
                    range: m.range(),
                    label: Some(shape.label),
                    rank: rank + 1,
                });
            }
        }
    }
    let Some(assignment) = ASSIGNMENT.as_ref() else {
        return;
    };
    if !may_match(SHAPES.len()) {
        return;
    }
    let rank = COMPILED.len() + 1;
    for caps in assignment.captures_iter(text) {
        let key = caps.name("key").map_or("", |k| k.as_str());
        if !key_is_secret(key) {
            continue;
        }
        let (value, quoted) = match (caps.name("dq"), caps.name("sq"), caps.name("uv")) {
            (Some(v), _, _) | (_, Some(v), _) => (v, true),
            // `tokens::estimate`: a path, not `key: value`.
            (_, _, Some(v)) if v.as_str().starts_with(':') => continue,
            (_, _, Some(v)) => (v, false),
            _ => continue,
        };
        if literal_secret(value.as_str(), quoted) {
            spans.push(Span {
                range: value.range(),
                label: None,
                rank,
            });
        }
    }
}

/// Keys that contain a secret word but name something else.
fn key_is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    const NOT_SECRET: &[&str] = &["tokeniz", "token_count", "tokens_", "_tokens"];
    const DESCRIBES: &[&str] = &[
        "_file",
        "_path",
        "_dir",
        "_url",
        "_uri",
        "_endpoint",
        "_name",
        "_type",
        "_env",
        "_var",
        "_header",
        "_count",
        "_len",
        "_length",
        "_size",
        "_limit",
        "_id",
    ];
    !NOT_SECRET.iter().any(|w| key.contains(w))
        && !DESCRIBES
            .iter()
            .any(|s| key.ends_with(s) || key.ends_with(&s.replace('_', "-")))
}

/// Whether an assigned value looks like a literal secret rather than code,
/// a placeholder, a name or a path.
fn literal_secret(value: &str, quoted: bool) -> bool {
    let len = value.chars().count();
    if len < 8 || value.chars().any(char::is_whitespace) || placeholder(value) {
        return false;
    }
    if value.starts_with('/')
        || value.starts_with("./")
        || value.starts_with("../")
        || value.starts_with("~/")
        || (value.contains("://") && !value.contains('@'))
    {
        return false;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    // An environment variable's name (`GITHUB_TOKEN`), not its value.
    if value.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
        || (value.contains('_')
            && value
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'))
    {
        return false;
    }
    let has_digit = value.bytes().any(|b| b.is_ascii_digit());
    let has_lower = value.bytes().any(|b| b.is_ascii_lowercase());
    let has_upper = value.bytes().any(|b| b.is_ascii_uppercase());
    if quoted {
        // Digits or symbols: a secret. Letters alone are usually a name
        // (`"refresh_token"`, `"Authorization"`), unless long and unbroken
        // (a passphrase).
        let letters = value
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b"_-.".contains(&b));
        return !letters || (len >= 16 && value.bytes().all(|b| b.is_ascii_alphabetic()));
    }
    // Unquoted values are usually code: `next_token`, `self.token`,
    // `Token::new`, `Token`.
    let value = value.replace("::", ".");
    let has_symbol = value
        .bytes()
        .any(|b| !b.is_ascii_alphanumeric() && !b"_-.".contains(&b));
    let identifier_path = value.split('.').all(|part| {
        part.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    }) && (value.contains('.') || value.contains('_') || !has_digit);
    !identifier_path && (has_digit || has_symbol || (len >= 16 && has_lower && has_upper))
}

/// Stand-ins for a secret: `<your-key>`, `${VAR}`, `{{ secrets.X }}`,
/// `%(pw)s`, `os.environ[...]`, `changeme`, `xxxxxxxx`, `********`.
fn placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    const MARKERS: &[&str] = &[
        "${",
        "{{",
        "%(",
        "{}",
        "environ",
        "getenv",
        "process.env",
        "env(",
        "env[",
        "env::var",
        "redacted",
        "changeme",
        "change_me",
        "change-me",
        "placeholder",
        "replace_me",
        "replace-me",
        "example",
        "dummy",
        "your_",
        "your-",
        "xxxx",
        "****",
        "....",
    ];
    if (value.starts_with('<') && value.ends_with('>')) || value.starts_with('$') {
        return true;
    }
    if MARKERS.iter().any(|m| lower.contains(m)) {
        return true;
    }
    let mut chars = value.chars();
    chars.next().is_some_and(|first| chars.all(|c| c == first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warm_up_compiles_every_pattern() {
        // Each shape, the assignment, and the set of them all.
        assert_eq!(compile(), SHAPES.len() + 2);
        assert_eq!(super::super::warm_up(), SHAPES.len() + 3);
    }
}
