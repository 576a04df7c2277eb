//! Key paths, "did you mean" hints and readable rewrites of serde's messages.
use serde_json::Value;

/// One step of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// `models.fast.provider`, `index.exclude[2]`; keys that are not bare TOML
/// keys are quoted so a model named `a.b` cannot be mistaken for two keys.
pub(crate) fn join_path(segs: &[Seg]) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                if is_bare_key(key) {
                    out.push_str(key);
                } else {
                    out.push_str(&format!("{key:?}"));
                }
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

pub(crate) fn keys(path: &[&str]) -> Vec<Seg> {
    path.iter().map(|k| Seg::Key((*k).to_string())).collect()
}

pub(crate) fn is_bare_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The value at `segs` inside `value`, if every step exists.
pub(crate) fn lookup<'a>(value: &'a Value, segs: &[Seg]) -> Option<&'a Value> {
    segs.iter().try_fold(value, |v, seg| match (seg, v) {
        (Seg::Key(k), Value::Object(map)) => map.get(k),
        (Seg::Index(i), Value::Array(items)) => items.get(*i),
        _ => None,
    })
}

/// The candidate closest to `input`, if it is close enough to be a likely typo.
pub(crate) fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let input = input.to_lowercase();
    let limit = input.chars().count().div_ceil(3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&input, &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Optimal-string-alignment distance: like Levenshtein, but a swap of two
/// neighbours counts once, the commonest typo (`fats` for `fast`).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

/// Rewrites serde's `invalid type: string "x", expected u32` into
/// `expected an integer, found a string "x"`; other messages pass through.
pub(crate) fn humanize(msg: &str) -> String {
    if let Some(field) = msg
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        return format!("missing required key `{field}`");
    }
    let (kind, rest) = if let Some(rest) = msg.strip_prefix("invalid type: ") {
        (Kind::Type, rest)
    } else if let Some(rest) = msg.strip_prefix("invalid value: ") {
        (Kind::Value, rest)
    } else {
        return msg.to_string();
    };
    let Some(split) = rest.rfind(", expected ") else {
        return msg.to_string();
    };
    let (found, expected) = (&rest[..split], &rest[split + ", expected ".len()..]);
    let expected = match (kind, expected) {
        (Kind::Value, "u32" | "u64") if found.starts_with("integer `-") => {
            "a non-negative integer".to_string()
        }
        (Kind::Value, "u32") => format!("an integer no larger than {}", u32::MAX),
        (Kind::Value, "u64") => format!("an integer no larger than {}", u64::MAX),
        _ => expected_phrase(expected),
    };
    let found = match kind {
        Kind::Type => found_phrase(found),
        // An out-of-range number reads best bare: `found -1`.
        Kind::Value => found_phrase(found)
            .trim_start_matches("the integer ")
            .trim_start_matches("the number ")
            .to_string(),
    };
    format!("expected {expected}, found {found}")
}

#[derive(Clone, Copy)]
enum Kind {
    Type,
    Value,
}

fn expected_phrase(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize" => {
            "an integer".to_string()
        }
        "f32" | "f64" => "a number".to_string(),
        "a boolean" => "a boolean (true or false)".to_string(),
        "a sequence" => "an array".to_string(),
        "a map" => "a table".to_string(),
        e if e.starts_with("struct ") => "a table".to_string(),
        e => e.to_string(),
    }
}

fn found_phrase(found: &str) -> String {
    let ticked = |prefix: &str| {
        found
            .strip_prefix(prefix)
            .map(|v| v.trim_start_matches('`').trim_end_matches('`').to_string())
    };
    if found.starts_with("string ") {
        format!("a {found}")
    } else if let Some(v) = ticked("integer ") {
        format!("the integer {v}")
    } else if let Some(v) = ticked("floating point ") {
        format!("the number {v}")
    } else if let Some(v) = ticked("boolean ") {
        format!("the boolean {v}")
    } else {
        match found {
            "sequence" => "an array".to_string(),
            "map" => "a table".to_string(),
            "unit value" => "null".to_string(),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn humanizes_serde_messages() {
        let cases = [
            (
                r#"invalid type: string "lots", expected u32"#,
                r#"expected an integer, found a string "lots""#,
            ),
            (
                "invalid value: integer `-1`, expected u64",
                "expected a non-negative integer, found -1",
            ),
            (
                "invalid value: integer `5000000000`, expected u32",
                "expected an integer no larger than 4294967295, found 5000000000",
            ),
            (
                "invalid type: floating point `1.5`, expected u64",
                "expected an integer, found the number 1.5",
            ),
            (
                "invalid type: map, expected a string",
                "expected a string, found a table",
            ),
            (
                "invalid type: integer `3`, expected struct IndexConfig",
                "expected a table, found the integer 3",
            ),
            (
                "invalid type: string \"yes\", expected a boolean",
                "expected a boolean (true or false), found a string \"yes\"",
            ),
            (
                "missing field `provider`",
                "missing required key `provider`",
            ),
            ("something else", "something else"),
        ];
        for (input, want) in cases {
            assert_eq!(humanize(input), want, "for {input}");
        }
    }

    #[test]
    fn suggests_close_names() {
        assert_eq!(
            did_you_mean("opnai", ["local", "openai", "ollama"]),
            Some("openai")
        );
        assert_eq!(did_you_mean("fats", ["fast", "local"]), Some("fast"));
        assert_eq!(did_you_mean("OpenAI", ["openai"]), Some("openai"));
        assert_eq!(did_you_mean("zzzzzz", ["openai"]), None);
    }

    #[test]
    fn quotes_keys_that_are_not_bare() {
        let segs = vec![
            Seg::Key("models".into()),
            Seg::Key("a.b".into()),
            Seg::Index(2),
        ];
        assert_eq!(join_path(&segs), r#"models."a.b"[2]"#);
    }
}
