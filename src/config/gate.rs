//! Keys an untrusted workspace `fettle.toml` may not set.
//!
//! A repository's `fettle.toml` was written by whoever wrote the repository.
//! Keys that could send the user's API key elsewhere, spend it, or loosen
//! what the agent's commands may do are honoured only from the user's own
//! file and the editor's settings (`initializationOptions`,
//! `workspace/configuration`), or from a workspace file the user trusted
//! (`trust.rs`). Otherwise they are dropped from the workspace layer before
//! the merge and listed in [`super::Resolved::ignored`] with the reason.
//! Values that only tighten (e.g. `agent.commands = "never"`) are honoured:
//! they cannot hurt the user, and a project may well want them.
//! `docs/trust/workspace-config.md` documents the table; keep the two in step.
use std::path::PathBuf;

use serde_json::Value;

use super::resolve::{merge, Layer};
use super::Source;

/// A workspace key Fettle ignored, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredKey {
    /// Full key path, e.g. `models.evil.base_url`.
    pub key: String,
    /// The workspace file that set it.
    pub file: PathBuf,
    /// SHA-256 of that file's content as read (empty when the layer did not
    /// come from a file read, e.g. in tests); trusting records this hash.
    pub sha256: String,
    pub reason: &'static str,
}

/// When a gated key in an untrusted workspace file is ignored.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    /// Always.
    Always,
    /// When the model uses an API key (`api_key_env` set by any layer,
    /// the workspace's own included).
    WhenKeyed,
    /// When a trusted layer gives the model an API key.
    WhenKeyedByTrusted,
    /// Unless the value is no looser than the one below it (defaults, the
    /// user's file, earlier workspace files): `allowed(workspace, below)`.
    Tighten(fn(&Value, Option<&Value>) -> bool),
    /// Never ignored: the workspace's entries are added to the ones below
    /// (a list the workspace may extend but not shorten).
    Union,
}

/// One gated key: `models.*.x` applies to every model.
#[derive(Clone, Copy, Debug)]
pub struct Gated {
    pub key: &'static str,
    pub rule: Rule,
    pub reason: &'static str,
}

/// The gated keys. Not gated, on purpose: `agent.test_command` and
/// `check.commands` (the workspace already decides what its tests and
/// checkers run: `pytest` runs its `conftest.py`, `cargo check` its
/// `build.rs`; both run in the sandbox), budgets and timeouts (they bound time and tokens, they
/// open nothing), which model a feature uses (`agent.model`; a keyed
/// model's endpoint is gated), `models.*.path` (a local weights file),
/// `models.*.model`.
pub const GATED: &[Gated] = &[
    Gated {
        key: "models.*.api_key_env",
        rule: Rule::Always,
        reason: "names the environment variable whose value is sent as the API key; a workspace \
                 could send one of your keys to a server it chooses",
    },
    Gated {
        key: "models.*.base_url",
        rule: Rule::WhenKeyed,
        reason: "the server that receives this model's API key",
    },
    Gated {
        key: "models.*.provider",
        rule: Rule::WhenKeyedByTrusted,
        reason: "changes the default server (and the header) this model's API key is sent to",
    },
    Gated {
        key: "models.*.extra_body",
        rule: Rule::WhenKeyed,
        reason: "merged into every request billed to your API key (it can change the model or \
                 the number of completions)",
    },
    Gated {
        key: "agent.commands",
        rule: Rule::Tighten(commands_no_looser),
        reason: "lets the agent run commands without asking you (a workspace may only make \
                 this stricter)",
    },
    Gated {
        key: "agent.sandbox",
        rule: Rule::Tighten(sandbox_no_looser),
        reason: "turns the command sandbox off or weakens it (a workspace may only make this \
                 stricter)",
    },
    Gated {
        key: "agent.sandbox_writable",
        rule: Rule::Tighten(subset),
        reason: "lets sandboxed commands write more directories (a workspace may only remove \
                 entries)",
    },
    Gated {
        key: "agent.sandbox_network",
        rule: Rule::Tighten(is_false),
        reason: "gives sandboxed commands the network (a workspace may only set false)",
    },
    Gated {
        key: "agent.allow_env",
        rule: Rule::Tighten(subset),
        reason: "passes secret-looking environment variables to commands (a workspace may only \
                 remove entries)",
    },
    Gated {
        key: "agent.allow_hardlinks",
        rule: Rule::Tighten(is_false),
        reason: "lets file tools follow hard links to files outside the workspace (a workspace \
                 may only set false)",
    },
    Gated {
        key: "agent.memory_limit_mb",
        rule: Rule::Tighten(limit_no_higher),
        reason: "raises or removes the memory limit of commands (a workspace may only lower it)",
    },
    Gated {
        key: "agent.unsaved_buffers",
        rule: Rule::Tighten(buffers_no_looser),
        reason: "writes your unsaved editor text to disk without asking (a workspace may not \
                 choose \"save\")",
    },
    Gated {
        key: "edit.actions",
        rule: Rule::Always,
        reason: "code-action presets: a title shown in your editor and a different instruction \
                 sent to the model (a workspace could label an edit it did not describe)",
    },
    Gated {
        key: "edit.confirm",
        rule: Rule::Tighten(confirm_no_looser),
        reason: "applies rewrites without showing them first (a workspace may only choose \
                 \"ask\")",
    },
    Gated {
        key: "check.on_save",
        rule: Rule::Tighten(is_false),
        reason: "runs the project's checker (and so its build scripts and linter plugins) each \
                 time you save, without being asked (a workspace may only set false)",
    },
    Gated {
        key: "agent.protected_paths",
        rule: Rule::Union,
        reason: "a workspace may add protected paths but not remove yours",
    },
];

/// Trust of one layer: `None` for trusted layers (everything but
/// untrusted workspace files), else the file's hash.
pub(crate) type Untrusted<'a> = &'a dyn Fn(&Source) -> Option<String>;

/// Drops the gated keys of untrusted workspace layers from `stack` (in
/// place) and returns them. Runs before the merge.
pub(crate) fn apply(stack: &mut [Layer<'_>], untrusted: Untrusted<'_>) -> Vec<IgnoredKey> {
    let mut everything = Value::Object(serde_json::Map::new());
    for layer in stack.iter() {
        merge(&mut everything, &layer.value);
    }
    let keyed_by_trusted = |model: &str| {
        stack.iter().any(|l| {
            untrusted(l.source).is_none()
                && has_key(
                    l.value
                        .pointer(&format!("/models/{}/api_key_env", escape(model))),
                )
        })
    };
    let keyed_by_any = |model: &str| {
        has_key(everything.pointer(&format!("/models/{}/api_key_env", escape(model))))
    };
    let mut decisions = Vec::new();
    let mut below = Value::Object(serde_json::Map::new());
    for (at, layer) in stack.iter().enumerate() {
        let hash = untrusted(layer.source);
        if let (Some(sha256), Some(file)) = (hash, layer.source.file()) {
            for gated in GATED {
                for (pointer, key) in concrete(gated.key, &layer.value) {
                    let Some(value) = layer.value.pointer(&pointer) else {
                        continue;
                    };
                    let model = key.split('.').nth(1).unwrap_or_default();
                    let action = match gated.rule {
                        Rule::Always => Action::Drop,
                        Rule::WhenKeyed if keyed_by_any(model) => Action::Drop,
                        Rule::WhenKeyedByTrusted if keyed_by_trusted(model) => Action::Drop,
                        Rule::Tighten(allowed) if !allowed(value, below.pointer(&pointer)) => {
                            Action::Drop
                        }
                        Rule::Union => Action::Replace(union(value, below.pointer(&pointer))),
                        _ => continue,
                    };
                    let ignored = matches!(action, Action::Drop).then(|| IgnoredKey {
                        key,
                        file: file.to_path_buf(),
                        sha256: sha256.clone(),
                        reason: gated.reason,
                    });
                    decisions.push((at, pointer, action, ignored));
                }
            }
        }
        // Decisions for this layer change what the next layers compare with.
        let mut value = layer.value.clone();
        for (_, pointer, action, _) in decisions.iter().filter(|d| d.0 == at) {
            act(&mut value, pointer, action);
        }
        merge(&mut below, &value);
    }
    let mut ignored = Vec::new();
    for (at, pointer, action, key) in decisions {
        act(&mut stack[at].value, &pointer, &action);
        ignored.extend(key);
    }
    ignored
}

enum Action {
    Drop,
    Replace(Value),
}

fn act(value: &mut Value, pointer: &str, action: &Action) {
    match action {
        Action::Drop => remove(value, pointer),
        Action::Replace(new) => {
            if let Some(slot) = value.pointer_mut(pointer) {
                *slot = new.clone();
            }
        }
    }
}

/// Removes the member at a two- or three-segment pointer.
fn remove(value: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    if let Some(Value::Object(map)) = value.pointer_mut(parent) {
        map.remove(&unescape(last));
    }
}

/// The JSON pointers and dotted key paths `pattern` names in `value`.
fn concrete(pattern: &str, value: &Value) -> Vec<(String, String)> {
    match pattern.split('.').collect::<Vec<_>>().as_slice() {
        ["models", "*", key] => value
            .get("models")
            .and_then(Value::as_object)
            .map(|models| {
                models
                    .iter()
                    .filter(|(_, m)| m.get(*key).is_some())
                    .map(|(name, _)| {
                        (
                            format!("/models/{}/{key}", escape(name)),
                            super::text::join_path(&super::text::keys(&["models", name, key])),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        [section, key] if value.get(*section).and_then(|s| s.get(*key)).is_some() => {
            vec![(format!("/{section}/{key}"), format!("{section}.{key}"))]
        }
        _ => Vec::new(),
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn unescape(key: &str) -> String {
    key.replace("~1", "/").replace("~0", "~")
}

fn has_key(value: Option<&Value>) -> bool {
    value.and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

fn commands_no_looser(value: &Value, below: Option<&Value>) -> bool {
    // Unknown values rank loosest: an invalid value is ignored, not honoured.
    let rank = |v: Option<&Value>| match v.and_then(Value::as_str) {
        Some("never") => 0,
        Some("ask") | None => 1,
        _ => 2,
    };
    rank(Some(value)) <= rank(below)
}

fn sandbox_no_looser(value: &Value, below: Option<&Value>) -> bool {
    // By name, so that modes added later rank between off and workspace.
    let rank = |v: Option<&Value>| match v.and_then(Value::as_str) {
        Some("workspace") => 2,
        Some("off") | None => 0,
        Some(_) => 1,
    };
    let known = value.as_str().is_some();
    known && rank(Some(value)) >= rank(below)
}

fn subset(value: &Value, below: Option<&Value>) -> bool {
    let below = below.and_then(Value::as_array);
    value.as_array().is_some_and(|items| {
        items
            .iter()
            .all(|item| below.is_some_and(|b| b.contains(item)))
    })
}

fn is_false(value: &Value, _below: Option<&Value>) -> bool {
    value == &Value::Bool(false)
}

fn limit_no_higher(value: &Value, below: Option<&Value>) -> bool {
    let below = below.and_then(Value::as_u64).unwrap_or(0);
    value
        .as_u64()
        .is_some_and(|v| v > 0 && (below == 0 || v <= below))
}

fn buffers_no_looser(value: &Value, below: Option<&Value>) -> bool {
    value.as_str() != Some("save") || below.and_then(Value::as_str) == Some("save")
}

fn union(value: &Value, below: Option<&Value>) -> Value {
    let mut out: Vec<Value> = below.and_then(Value::as_array).cloned().unwrap_or_default();
    match value.as_array() {
        Some(items) => {
            for item in items {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            Value::Array(out)
        }
        // Not a list: left as is for validation to report.
        None => value.clone(),
    }
}

/// One untrusted workspace file and the keys of it Fettle ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UntrustedFile<'a> {
    pub file: PathBuf,
    /// SHA-256 of the content the keys were read from: what trusting records.
    pub sha256: String,
    pub keys: Vec<&'a IgnoredKey>,
}

impl UntrustedFile<'_> {
    /// The workspace root the file belongs to.
    pub fn root(&self) -> &std::path::Path {
        super::workspace_root_of(&self.file)
    }

    /// The one-line notice, the same in the editor and the terminal.
    pub fn notice(&self) -> String {
        let names: Vec<&str> = self.keys.iter().map(|k| k.key.as_str()).collect();
        format!(
            "{} sets {}: keys that could send your API keys elsewhere or loosen the sandbox. \
             Fettle ignores them until you trust this workspace.",
            self.file.display(),
            names.join(", ")
        )
    }
}

/// The ignored keys grouped by file, in the order they were found.
pub fn by_file(ignored: &[IgnoredKey]) -> Vec<UntrustedFile<'_>> {
    let mut out: Vec<UntrustedFile<'_>> = Vec::new();
    for key in ignored {
        match out.iter_mut().find(|f| f.file == key.file) {
            Some(f) => f.keys.push(key),
            None => out.push(UntrustedFile {
                file: key.file.clone(),
                sha256: key.sha256.clone(),
                keys: vec![key],
            }),
        }
    }
    out
}

fn confirm_no_looser(value: &Value, _below: Option<&Value>) -> bool {
    value.as_str() == Some("ask")
}
