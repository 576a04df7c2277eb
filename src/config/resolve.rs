//! Merging the layers and turning the result into a typed, validated `Config`.
use std::collections::BTreeMap;

use serde_json::Value;

use super::gate;
use super::schema::{
    Config, Provider, BUILTIN_MODEL, CODER_TOTAL_TIMEOUT_MS, DEFAULT_CODER_MODEL,
    DEFAULT_COMPLETION_CODER,
};
use super::text::{did_you_mean, humanize, join_path, lookup, Seg};
use super::validate::{validate, Finding};
use super::{ConfigError, Resolved, Source};

/// A layer as it takes part in a merge: nulls removed, root known to be a table.
pub(crate) struct Layer<'a> {
    pub(crate) source: &'a Source,
    pub(crate) value: Value,
}

pub(crate) fn resolve(
    layers: &[(Source, Value)],
    untrusted: gate::Untrusted<'_>,
    installed_defaults: bool,
) -> Result<Resolved, Vec<ConfigError>> {
    let default_source = Source::Default;
    let mut stack = vec![Layer {
        source: &default_source,
        value: defaults_json(),
    }];
    for (source, value) in layers {
        match value {
            // A client with nothing to say sends null; that is an empty layer.
            Value::Null => continue,
            Value::Object(_) => {}
            other => {
                return Err(vec![ConfigError {
                    path: source.to_string(),
                    message: format!("expected a table of settings, found {}", describe(other)),
                }])
            }
        }
        let mut segs = Vec::new();
        stack.push(Layer {
            source,
            value: strip_nulls(value, &mut segs),
        });
    }
    // Before the merge: what an untrusted workspace file may not set never takes part.
    let ignored = gate::apply(&mut stack, untrusted);
    let mut merged = Value::Object(serde_json::Map::new());
    for layer in &stack {
        merge(&mut merged, &layer.value);
    }
    let origin = |segs: &[Seg]| origin_of(&stack, segs);
    let with_origin = |segs: &[Seg], message: String| match origin(segs) {
        Source::Default => message,
        source => format!("{message} (from {source})"),
    };

    let mut unknown = Vec::new();
    let mut on_ignored = |path: serde_ignored::Path| unknown.push(ignored_segs(&path));
    let de = serde_ignored::Deserializer::new(merged.clone(), &mut on_ignored);
    let mut config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
        let (segs, message) = deserialize_error(&e);
        vec![ConfigError {
            path: join_path(&segs),
            message: with_origin(&segs, message),
        }]
    })?;

    fill_default_base_urls(&mut config);
    let is_default = |segs: &[Seg]| origin(segs) == Source::Default;
    // Set by a layer itself, not inherited from a table a layer set.
    let set_exactly = |segs: &[Seg]| {
        stack
            .iter()
            .any(|l| l.source != &default_source && lookup(&l.value, segs).is_some())
    };
    fill_local_total_timeouts(&mut config, &set_exactly);
    if installed_defaults {
        prefer_installed_coder(&mut config, &is_default);
    }
    let findings = validate(&config, &is_default);
    if !findings.errors.is_empty() {
        let mut errors = findings.errors;
        errors.sort_by_key(|f| join_path(&f.segs));
        return Err(errors
            .into_iter()
            .map(|Finding { segs, message }| ConfigError {
                path: join_path(&segs),
                message: with_origin(&segs, message),
            })
            .collect());
    }

    let mut warnings: Vec<String> = unknown
        .iter()
        .map(|segs| {
            let message = unknown_key_message(segs, &merged);
            format!("{}: {}", join_path(segs), with_origin(segs, message))
        })
        .collect();
    warnings.extend(findings.warnings.into_iter().map(|f| {
        format!(
            "{}: {}",
            join_path(&f.segs),
            with_origin(&f.segs, f.message)
        )
    }));

    let provenance = provenance(&stack, &config);
    Ok(Resolved {
        config,
        provenance,
        warnings,
        ignored,
    })
}

/// The edit and agent models, where nothing set them, are the default
/// coder model when its file is installed (the built-in `local` model is
/// too small to run the repair loop or rewrite a function).
fn prefer_installed_coder(config: &mut Config, is_default: &dyn Fn(&[Seg]) -> bool) {
    let installed = |name: &str| {
        config
            .models
            .get(name)
            .filter(|m| m.provider == Provider::Local)
            .and_then(|m| m.expanded_path())
            .is_some_and(|p| p.is_file())
    };
    let key = |section: &str| [Seg::Key(section.to_owned()), Seg::Key("model".to_owned())];
    // A user who points the built-in model at a file of their choosing
    // meant it for the features that use it.
    let local_customized = !is_default(&[
        Seg::Key("models".to_owned()),
        Seg::Key(BUILTIN_MODEL.to_owned()),
        Seg::Key("path".to_owned()),
    ]);
    if local_customized {
        return;
    }
    if installed(DEFAULT_CODER_MODEL) {
        if is_default(&key("edit")) {
            config.edit.model = DEFAULT_CODER_MODEL.to_owned();
        }
        if is_default(&key("agent")) {
            config.agent.model = DEFAULT_CODER_MODEL.to_owned();
        }
    }
    if installed(DEFAULT_COMPLETION_CODER) && is_default(&key("completion")) {
        config.completion.model = DEFAULT_COMPLETION_CODER.to_owned();
    }
}

/// Each leaf of the resolved config → the highest layer that sets it.
fn provenance(stack: &[Layer<'_>], config: &Config) -> BTreeMap<String, Source> {
    let resolved_json = serde_json::to_value(config).unwrap_or(Value::Null);
    leaves(&resolved_json)
        .into_iter()
        .map(|segs| {
            let source = stack
                .iter()
                .rev()
                .find(|layer| lookup(&layer.value, &segs).is_some())
                .map_or(Source::Default, |layer| layer.source.clone());
            (join_path(&segs), source)
        })
        .collect()
}

/// The built-in defaults as a layer.
fn defaults_json() -> Value {
    let value = serde_json::to_value(Config::default()).unwrap_or(Value::Null);
    strip_nulls(&value, &mut Vec::new())
}

/// Objects merge key by key; anything else replaces what was there.
pub(crate) fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, over) => *base = over.clone(),
    }
}

/// Drops null members: JSON clients (VS Code among them) send null for
/// "not set", which must leave the lower layers' value alone. `extra_body`
/// is opaque, so nulls inside it are kept for the server to see.
fn strip_nulls(value: &Value, segs: &mut Vec<Seg>) -> Value {
    match value {
        Value::Object(map) if !is_extra_body(segs) => {
            let mut out = serde_json::Map::new();
            for (key, v) in map.iter().filter(|(_, v)| !v.is_null()) {
                segs.push(Seg::Key(key.clone()));
                out.insert(key.clone(), strip_nulls(v, segs));
                segs.pop();
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn is_extra_body(segs: &[Seg]) -> bool {
    matches!(segs, [Seg::Key(m), Seg::Key(_), Seg::Key(e)] if m == "models" && e == "extra_body")
}

/// The highest layer that sets `segs`, or failing that its nearest parent.
fn origin_of(stack: &[Layer<'_>], segs: &[Seg]) -> Source {
    (1..=segs.len())
        .rev()
        .find_map(|len| {
            stack
                .iter()
                .rev()
                .find(|l| lookup(&l.value, &segs[..len]).is_some())
        })
        .map_or(Source::Default, |l| l.source.clone())
}

/// Full paths of the leaves: scalars, arrays and each `extra_body` as a whole.
pub(crate) fn leaves(value: &Value) -> Vec<Vec<Seg>> {
    fn walk(value: &Value, segs: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
        match value {
            Value::Null => {}
            Value::Object(map) if !is_extra_body(segs) => {
                for (key, v) in map {
                    segs.push(Seg::Key(key.clone()));
                    walk(v, segs, out);
                    segs.pop();
                }
            }
            _ => out.push(segs.clone()),
        }
    }
    let mut out = Vec::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

/// An embedded model's turn is limited by the task's own budget, not the
/// two minutes fit for a server: an agent turn prefills thousands of
/// tokens on a CPU (a user's own 1.5B GGUF ran out of 120 s on its first
/// plan turn). Only where no layer set the limit.
fn fill_local_total_timeouts(config: &mut Config, set_exactly: &dyn Fn(&[Seg]) -> bool) {
    for (name, model) in &mut config.models {
        let key = [
            Seg::Key("models".to_owned()),
            Seg::Key(name.clone()),
            Seg::Key("total_timeout_ms".to_owned()),
        ];
        if model.provider == Provider::Local && !set_exactly(&key) {
            model.total_timeout_ms = model.total_timeout_ms.max(CODER_TOTAL_TIMEOUT_MS);
        }
    }
}

fn fill_default_base_urls(config: &mut Config) {
    for model in config.models.values_mut() {
        if model.base_url.is_none() {
            model.base_url = model.provider.default_base_url().map(str::to_string);
        }
    }
}

fn deserialize_error(e: &serde_path_to_error::Error<serde_json::Error>) -> (Vec<Seg>, String) {
    let mut segs: Vec<Seg> = e
        .path()
        .iter()
        .filter_map(|seg| match seg {
            serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
            serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
            serde_path_to_error::Segment::Enum { variant } => Some(Seg::Key(variant.clone())),
            serde_path_to_error::Segment::Unknown => None,
        })
        .collect();
    let inner = e.inner().to_string();
    // `provider` is the one required key; point at it rather than at its model.
    if inner == "missing field `provider`" {
        segs.push(Seg::Key("provider".to_string()));
        let choices: Vec<&str> = Provider::ALL.iter().map(|p| p.as_str()).collect();
        let message = format!(
            "missing; every model needs a provider (one of {})",
            choices.join(", ")
        );
        return (segs, message);
    }
    (segs, humanize(&inner))
}

fn ignored_segs(path: &serde_ignored::Path<'_>) -> Vec<Seg> {
    let mut segs = match path {
        serde_ignored::Path::Root => return Vec::new(),
        serde_ignored::Path::Seq { parent, .. }
        | serde_ignored::Path::Map { parent, .. }
        | serde_ignored::Path::Some { parent }
        | serde_ignored::Path::NewtypeStruct { parent }
        | serde_ignored::Path::NewtypeVariant { parent } => ignored_segs(parent),
    };
    match path {
        serde_ignored::Path::Seq { index, .. } => segs.push(Seg::Index(*index)),
        serde_ignored::Path::Map { key, .. } => segs.push(Seg::Key(key.clone())),
        _ => {}
    }
    segs
}

/// `unknown key`, plus a hint when the mistake is recognisable.
fn unknown_key_message(segs: &[Seg], merged: &Value) -> String {
    let Some((Seg::Key(last), parent)) = segs.split_last() else {
        return "unknown key".to_string();
    };
    let in_model = matches!(parent, [Seg::Key(m), Seg::Key(_)] if m == "models");
    if in_model && last == "api_key" {
        return "unknown key; fettle never reads an API key from configuration: put the key in an \
                environment variable and set `api_key_env` to that variable's name"
            .to_string();
    }
    if parent.is_empty()
        && lookup(merged, segs)
            .and_then(|v| v.get("provider"))
            .is_some()
    {
        return format!("unknown key; models are defined under `models`, e.g. [models.{last}]");
    }
    // A model's keys are known from the built-in one.
    let known_parent = if in_model {
        vec![
            Seg::Key("models".to_string()),
            Seg::Key(BUILTIN_MODEL.to_string()),
        ]
    } else {
        parent.to_vec()
    };
    let known = serde_json::to_value(Config::default()).unwrap_or(Value::Null);
    let candidates = lookup(&known, &known_parent).and_then(Value::as_object);
    match candidates.and_then(|keys| did_you_mean(last, keys.keys().map(String::as_str))) {
        Some(key) => format!("unknown key; did you mean `{key}`?"),
        None => "unknown key".to_string(),
    }
}

/// A short description of a JSON value for messages (never a long dump).
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        // Not echoed: whatever was pasted here is not worth the risk of printing.
        Value::String(_) => "a string".to_string(),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "a table".to_string(),
    }
}
