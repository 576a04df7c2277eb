//! `fettle doctor`'s view of the resolved configuration: one aligned
//! `key = value  # source` line per leaf, with secrets kept out.
use serde_json::Value;

use super::resolve::leaves;
use super::text::{is_bare_key, join_path, lookup, Seg};
use super::validate::redact_url;
use super::{Resolved, Source};

/// Lines longer than this are not used to align the comments, so one long
/// `extra_body` does not push every comment off screen.
const MAX_ALIGN: usize = 60;

pub(crate) fn render(resolved: &Resolved, is_set: &dyn Fn(&str) -> bool) -> String {
    let json = serde_json::to_value(&resolved.config).unwrap_or(Value::Null);
    let mut rows: Vec<(String, String)> = leaves(&json)
        .into_iter()
        .filter_map(|segs| {
            let value = lookup(&json, &segs)?;
            let key = join_path(&segs);
            let source = resolved
                .provenance
                .get(&key)
                .cloned()
                .unwrap_or(Source::Default);
            let (shown, comment) = describe_leaf(&segs, value, &source, &json, is_set);
            Some((format!("{key} = {shown}"), comment))
        })
        .collect();
    rows.sort();
    let width = rows
        .iter()
        .map(|(left, _)| left.chars().count())
        .filter(|w| *w <= MAX_ALIGN)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (left, comment) in rows {
        let pad = width.saturating_sub(left.chars().count());
        out.push_str(&format!("{left}{}  # {comment}\n", " ".repeat(pad)));
    }
    out
}

/// The value as shown and the comment after it.
fn describe_leaf(
    segs: &[Seg],
    value: &Value,
    source: &Source,
    json: &Value,
    is_set: &dyn Fn(&str) -> bool,
) -> (String, String) {
    let key = match segs.last() {
        Some(Seg::Key(k)) => k.as_str(),
        _ => "",
    };
    let in_model = matches!(segs, [Seg::Key(m), Seg::Key(_), Seg::Key(_)] if m == "models");
    let mut comment = source.to_string();
    if in_model && key == "api_key_env" {
        // Only the variable's name is configuration; its value is the secret.
        let state = value.as_str().is_some_and(is_set);
        comment.push_str(if state { " (set)" } else { " (not set)" });
        return (toml_value(value), comment);
    }
    if in_model && key == "base_url" {
        if *source == Source::Default {
            let provider = lookup(
                json,
                &[
                    segs[0].clone(),
                    segs[1].clone(),
                    Seg::Key("provider".into()),
                ],
            );
            if let Some(p) = provider.and_then(Value::as_str) {
                comment = format!("default for provider {p}");
            }
        }
        let shown = value.as_str().map_or_else(
            || toml_value(value),
            |u| toml_value(&Value::from(redact_url(u))),
        );
        return (shown, comment);
    }
    if in_model && key == "extra_body" {
        return (toml_value(&hide_secrets(value)), comment);
    }
    (toml_value(value), comment)
}

/// Replaces values under secret-sounding keys (`api_key`, `token`, ...).
fn hide_secrets(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let lower = k.to_ascii_lowercase();
                    let secret = ["key", "token", "secret", "password", "authorization"]
                        .iter()
                        .any(|word| lower.contains(word));
                    (
                        k.clone(),
                        if secret {
                            Value::from("<hidden>")
                        } else {
                            hide_secrets(v)
                        },
                    )
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(hide_secrets).collect()),
        other => other.clone(),
    }
}

/// TOML-looking text for a value (inline tables and arrays on one line).
fn toml_value(value: &Value) -> String {
    match value {
        // JSON string escapes are valid TOML basic-string escapes.
        Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
        Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(toml_value).collect::<Vec<_>>().join(", ")
            )
        }
        Value::Object(map) if map.is_empty() => "{}".to_string(),
        Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .map(|(k, v)| {
                    let k = if is_bare_key(k) {
                        k.clone()
                    } else {
                        serde_json::to_string(k).unwrap_or_default()
                    };
                    format!("{k} = {}", toml_value(v))
                })
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}
