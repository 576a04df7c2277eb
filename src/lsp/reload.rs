//! Configuration files changing under a running server: a workspace
//! `fettle.toml`, the user's `config.toml` and the trust store. A save in
//! the editor (`didSave`), a watched-file event, or — for clients that do
//! not watch files for us (Neovim on Linux) — our own `notify` watcher
//! schedules a reload; bursts are merged (editors write a file in several
//! steps, and a save may come with a watcher event). The reload goes
//! through the same trust gate and the same lock as start-up
//! (`settings::install`), and ends in one message: what changed, or the
//! error (the previous configuration then stays in force).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use parking_lot::Mutex;
use serde_json::Value;
use tower_lsp::lsp_types::{MessageType, Url};

use super::settings;
use super::state::State;
use crate::config::{Config, Source};

/// Long enough to merge an editor's write-rename-chmod and a save with its
/// watcher event; short enough to feel immediate.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// At most this many changed keys are named in the message.
const MAX_NAMED: usize = 8;

#[derive(Default)]
pub struct ConfigWatch {
    /// Bumped by every trigger; a scheduled reload runs only if it is still
    /// the latest when its debounce ends.
    generation: AtomicU64,
    /// Files that triggered the pending reload.
    pending: Mutex<BTreeSet<PathBuf>>,
    /// Our own watcher, for clients that do not offer file watching.
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
}

/// The configuration files of this session.
fn config_files(state: &State) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = state
        .roots
        .read()
        .iter()
        .map(|root| crate::config::workspace_config_path(root))
        .collect();
    files.extend(crate::config::user_config_path());
    files.extend(state.file_layers.lock().trust_store_path());
    files
}

pub fn is_config_file(state: &State, path: &Path) -> bool {
    config_files(state).iter().any(|file| file == path)
}

/// `didSave`: a saved configuration file is reloaded.
pub fn file_saved(state: &Arc<State>, uri: &Url) {
    if let Ok(path) = uri.to_file_path() {
        if is_config_file(state, &path) {
            schedule(state, path);
        }
    }
}

/// Schedules a reload after [`DEBOUNCE`]; later triggers push it back.
pub fn schedule(state: &Arc<State>, path: PathBuf) {
    state.config_watch.pending.lock().insert(path);
    let generation = state.config_watch.generation.fetch_add(1, Ordering::SeqCst) + 1;
    let state = state.clone();
    tokio::spawn(async move {
        tokio::time::sleep(DEBOUNCE).await;
        if state.config_watch.generation.load(Ordering::SeqCst) == generation {
            reload(&state).await;
        }
    });
}

async fn reload(state: &Arc<State>) {
    let files = std::mem::take(&mut *state.config_watch.pending.lock());
    let names = files
        .iter()
        .map(|f| display(f))
        .collect::<Vec<_>>()
        .join(", ");
    let roots = state.roots.read().clone();
    let (layers_before, errors) = {
        let mut layers = state.file_layers.lock();
        let before = file_layer_values(&layers);
        let errors = layers.reload_files(&roots);
        (before, errors)
    };
    let layers_changed = file_layer_values(&state.file_layers.lock()) != layers_before;
    if !errors.is_empty() {
        // A file that does not parse keeps its previous contents.
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        settings::show_invalid(state, &text.join("; ")).await;
    }
    let installed = match settings::install(state) {
        Ok(installed) => installed,
        Err(err) => {
            settings::show_invalid(state, &err.to_string()).await;
            return;
        }
    };
    let changes = diff(&installed.before, &installed.resolved.config);
    let ignored: Vec<&str> = installed
        .resolved
        .ignored
        .iter()
        .map(|k| k.key.as_str())
        .collect();
    tracing::info!(files = %names, changes = changes.len(), "configuration files reloaded");
    // A reload that found nothing new (our own write of the trust store, a
    // `touch`, the save that follows a watcher event already handled) is
    // not worth a message.
    let worth_saying = errors.is_empty() && (layers_changed || !changes.is_empty());
    if worth_saying {
        let mut text = format!("fettle: {names} reloaded: ");
        if changes.is_empty() {
            text.push_str("no setting changed");
        } else {
            text.push_str(
                &changes
                    .iter()
                    .take(MAX_NAMED)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            if changes.len() > MAX_NAMED {
                text.push_str(&format!(" and {} more", changes.len() - MAX_NAMED));
            }
        }
        if !ignored.is_empty() {
            text.push_str(&format!(
                "; ignored until you trust this workspace: {}",
                ignored.join(", ")
            ));
        }
        if !installed.resolved.warnings.is_empty() {
            text.push_str(&format!("; {}", installed.resolved.warnings.join("; ")));
        }
        state.client.show_message(MessageType::INFO, text).await;
    }
    settings::after_install(state, &installed).await;
}

fn file_layer_values(layers: &crate::config::ConfigLayers) -> Vec<(Source, Value)> {
    layers
        .iter()
        .filter(|(source, _)| source.file().is_some())
        .map(|(s, v)| (s.clone(), v.clone()))
        .collect()
}

/// A path as the user knows it: `fettle.toml` for a workspace file, `~/…`
/// under the home directory.
fn display(path: &Path) -> String {
    if path.file_name().is_some_and(|n| n == "fettle.toml") {
        return "fettle.toml".to_owned();
    }
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        if let Ok(rest) = path.strip_prefix(home) {
            return format!("~/{}", rest.display());
        }
    }
    path.display().to_string()
}

/// `key old → new` for every setting that differs.
pub fn diff(before: &Config, after: &Config) -> Vec<String> {
    let (Ok(before), Ok(after)) = (serde_json::to_value(before), serde_json::to_value(after))
    else {
        return Vec::new();
    };
    let (mut old, mut new) = (Vec::new(), Vec::new());
    flatten(&before, String::new(), &mut old);
    flatten(&after, String::new(), &mut new);
    let old: std::collections::BTreeMap<_, _> = old.into_iter().collect();
    let new: std::collections::BTreeMap<_, _> = new.into_iter().collect();
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter()
        .filter_map(|key| {
            let (a, b) = (old.get(key), new.get(key));
            // A key absent on one side and null on the other is unset on
            // both: `(unset) → (unset)` says nothing.
            let unset = |v: Option<&Value>| matches!(v, None | Some(Value::Null));
            if a == b || (unset(a) && unset(b)) {
                return None;
            }
            // Request bodies may carry anything: name the key, not the value.
            if key.contains(".extra_body") {
                return Some(format!("{key} changed"));
            }
            Some(format!("{key} {} → {}", shown(a), shown(b)))
        })
        .collect()
}

fn flatten(value: &Value, prefix: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(fields) if !fields.is_empty() => {
            for (key, value) in fields {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(value, path, out);
            }
        }
        _ => out.push((prefix, value.clone())),
    }
}

fn shown(value: Option<&Value>) -> String {
    let text = match value {
        None | Some(Value::Null) => "(unset)".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    if text.chars().count() > 40 {
        let cut: String = text.chars().take(37).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// Watches the configuration files ourselves (their directories, so that
/// an editor's write-by-rename is seen), for clients that do not offer
/// `workspace/didChangeWatchedFiles`. Calling it again re-aims the watch
/// (new workspace folders).
pub fn start_watching(state: &Arc<State>) {
    let weak: Weak<State> = Arc::downgrade(state);
    let runtime = tokio::runtime::Handle::current();
    let handler = move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if matches!(event.kind, notify::EventKind::Access(_)) {
            return;
        }
        let Some(state) = weak.upgrade() else { return };
        let files = config_files(&state);
        for path in event.paths {
            if files.contains(&path) {
                let state = state.clone();
                // `schedule` spawns on the runtime; this is notify's thread.
                runtime.spawn(async move { schedule(&state, path) });
            }
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(watcher) => watcher,
        Err(err) => {
            tracing::warn!(%err, "cannot watch the configuration files; changes apply on save or restart");
            return;
        }
    };
    let dirs: BTreeSet<PathBuf> = config_files(state)
        .iter()
        .filter_map(|file| file.parent().map(Path::to_path_buf))
        .collect();
    for dir in dirs {
        // A directory that does not exist yet (no user config) is skipped.
        if let Err(err) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
            tracing::debug!(dir = %dir.display(), %err, "not watching");
        }
    }
    *state.config_watch.watcher.lock() = Some(watcher);
}

/// Re-aims our watcher after the workspace folders changed (if we watch).
pub fn rewatch(state: &Arc<State>) {
    if state.config_watch.watcher.lock().is_some() {
        start_watching(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_names_each_changed_key_with_both_values() {
        let before = Config::default();
        let mut after = Config::default();
        after.completion.model = "fast".to_owned();
        after.diagnostics.enabled = false;
        let changes = diff(&before, &after);
        assert_eq!(
            changes,
            vec![
                "completion.model local → fast".to_owned(),
                "diagnostics.enabled true → false".to_owned()
            ]
        );
        assert!(diff(&before, &before).is_empty());
    }

    #[test]
    fn diff_says_nothing_of_keys_unset_before_and_after() {
        let before = Config::default();
        let mut after = Config::default();
        let mut model = crate::config::ModelConfig::new(crate::config::Provider::OpenAi);
        model.model = Some("gpt".to_owned());
        after.models.insert("remote".to_owned(), model);
        let changes = diff(&before, &after);
        assert!(
            changes.iter().all(|c| !c.contains("(unset) → (unset)")),
            "{changes:#?}"
        );
        assert!(
            changes
                .iter()
                .any(|c| c == "models.remote.model (unset) → gpt"),
            "{changes:#?}"
        );
    }
}
