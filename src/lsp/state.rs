//! Everything the handlers share. Handlers get an `Arc<State>`; nothing here
//! is held across an `.await` except the `Arc` itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use dashmap::DashMap;
use parking_lot::{Mutex, RwLock};
use ropey::Rope;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tower_lsp::lsp_types::{ClientCapabilities, Url};
use tower_lsp::Client;
use tree_sitter::Tree;

use super::index_queue::IndexQueue;
use super::open_document::OpenDocument;
use crate::completion::{Buffer, DocumentState, Engine, OpenBuffers};
use crate::config::{Config, ConfigLayers, Source};
use crate::index::{IndexSettings, WorkspaceIndex};
use crate::model::Models;
use crate::position::PositionEncoding;
use crate::syntax::Language;

pub struct State {
    pub client: Client,
    /// Every open document, with all that is kept about it.
    pub documents: DashMap<Url, OpenDocument>,
    encoding: OnceLock<PositionEncoding>,
    capabilities: OnceLock<ClientCapabilities>,
    pub roots: RwLock<Vec<PathBuf>>,
    /// Layers read from the user and workspace files.
    pub file_layers: Mutex<ConfigLayers>,
    /// Layers sent by the client (initializationOptions, workspace/configuration).
    pub client_layers: Mutex<BTreeMap<Source, serde_json::Value>>,
    config: RwLock<Arc<Config>>,
    /// The configured models, rebuilt when `[models]` changes.
    models: RwLock<Arc<Models>>,
    /// The last model problem shown to the user, so it is not repeated on
    /// every configuration change.
    pub model_notice: Mutex<String>,
    /// Untrusted workspace files (path, content hash) the user was already
    /// asked about: one question per file content per session.
    pub trust_notices: Mutex<BTreeSet<(PathBuf, String)>>,
    index: RwLock<Arc<WorkspaceIndex>>,
    /// Set on shutdown, and when a new indexing run replaces an old one.
    pub index_cancel: Mutex<CancellationToken>,
    progress_tokens: AtomicU64,
    initialized: AtomicBool,
    /// Index writes from handlers, applied in arrival order.
    pub index_updates: IndexQueue,
    /// Inline completion (its per-document part is in each `OpenDocument`).
    pub completion: Arc<Engine>,
    /// The running agent task.
    pub agent: super::agent::AgentState,
    /// Rewrites (`fettle.rewrite`) in flight, and their statistics.
    pub rewrite: super::rewrite::RewriteState,
    /// Reloading the configuration files when they change.
    pub config_watch: super::reload::ConfigWatch,
    /// The pending warm-up of the embedded model (see `inline_completion::warm`).
    pub warm: super::inline_completion::warm::WarmTimer,
    /// Published diagnostics by kind, and the on-save checker runs.
    pub checks: super::checks::ChecksState,
    /// Model files this server installed or tried to (`model_fetch`).
    pub model_fetches: Mutex<std::collections::HashSet<PathBuf>>,
}

/// A consistent copy of an open document, taken under the map's guard and
/// used after the guard is released (ropes and trees are cheap to clone).
#[derive(Clone)]
pub struct Snapshot {
    pub uri: Url,
    pub version: i32,
    pub language: Option<Language>,
    pub rope: Rope,
    /// Up to date with `rope` unless `needs_reparse` (then only `edit`ed).
    pub tree: Option<Tree>,
    pub revision: u64,
    pub needs_reparse: bool,
}

impl Snapshot {
    pub(super) fn of(doc: &crate::document::Document) -> Self {
        Self {
            uri: doc.uri.clone(),
            version: doc.version,
            language: doc.language,
            rope: doc.rope.clone(),
            tree: doc.tree.clone(),
            revision: doc.revision(),
            needs_reparse: doc.needs_reparse(),
        }
    }
}

impl State {
    pub fn new(client: Client, index_updates: IndexQueue) -> Self {
        let config = Config::default();
        Self {
            client,
            documents: DashMap::new(),
            encoding: OnceLock::new(),
            capabilities: OnceLock::new(),
            roots: RwLock::new(Vec::new()),
            file_layers: Mutex::new(ConfigLayers::default().with_installed_defaults()),
            client_layers: Mutex::new(BTreeMap::new()),
            index: RwLock::new(Arc::new(WorkspaceIndex::new(IndexSettings::from_config(
                &config.index,
            )))),
            models: RwLock::new(Arc::new(Models::from_config(&config))),
            model_notice: Mutex::new(String::new()),
            trust_notices: Mutex::new(BTreeSet::new()),
            config: RwLock::new(Arc::new(config)),
            index_cancel: Mutex::new(CancellationToken::new()),
            progress_tokens: AtomicU64::new(0),
            initialized: AtomicBool::new(false),
            index_updates,
            completion: Default::default(),
            agent: Default::default(),
            rewrite: Default::default(),
            config_watch: Default::default(),
            warm: Default::default(),
            checks: Default::default(),
            model_fetches: Default::default(),
        }
    }

    /// The negotiated encoding; UTF-16 until `initialize` says otherwise.
    pub fn encoding(&self) -> PositionEncoding {
        self.encoding.get().copied().unwrap_or_default()
    }

    pub fn set_session(&self, encoding: PositionEncoding, capabilities: ClientCapabilities) {
        // `initialize` runs once per process (tower-lsp rejects a second one), so these are set once.
        let _ = self.encoding.set(encoding);
        let _ = self.capabilities.set(capabilities);
    }

    pub fn capabilities(&self) -> Option<&ClientCapabilities> {
        self.capabilities.get()
    }

    pub fn config(&self) -> Arc<Config> {
        self.config.read().clone()
    }

    pub fn set_config(&self, config: Config) {
        if self.config.read().models != config.models {
            *self.models.write() = Arc::new(Models::from_config(&config));
        }
        *self.config.write() = Arc::new(config);
    }

    /// The configured models (cheap to clone out; remote clients and the
    /// embedded model's engine are shared across rebuilds).
    pub fn models(&self) -> Arc<Models> {
        self.models.read().clone()
    }

    pub fn index(&self) -> Arc<WorkspaceIndex> {
        self.index.read().clone()
    }

    pub fn replace_index(&self, index: WorkspaceIndex) -> Arc<WorkspaceIndex> {
        let index = Arc::new(index);
        *self.index.write() = index.clone();
        index
    }

    pub fn snapshot(&self, uri: &Url) -> Option<Snapshot> {
        Some(Snapshot::of(&self.documents.get(uri)?.document))
    }

    /// A snapshot whose tree matches its text: reparses on the blocking pool
    /// when edits came in since the last parse (parsing is kept out of
    /// `didChange`, where it would cost milliseconds per keystroke on big
    /// files), and shares the result with the document when still current.
    pub async fn parsed_snapshot(&self, uri: &Url) -> Option<Snapshot> {
        self.parse_snapshot(uri, false).await
    }

    /// [`State::parsed_snapshot`] for a parse nobody waits for (a document
    /// just opened): on the low-priority background thread, where it does
    /// not compete with a completion's work for the two cores (a
    /// 10,000-line file's first parse takes ~50 ms).
    pub async fn parsed_snapshot_in_background(&self, uri: &Url) -> Option<Snapshot> {
        self.parse_snapshot(uri, true).await
    }

    async fn parse_snapshot(&self, uri: &Url, in_background: bool) -> Option<Snapshot> {
        let current = self.snapshot(uri)?;
        if !current.needs_reparse {
            return Some(current);
        }
        // One parse of a document runs at a time (two of a big file at once
        // doubled the peak memory). The lock is held only while a parse
        // runs: a background parse takes it on the background thread when
        // its turn comes, so a request is never held up by that queue.
        let lock = self.documents.get(uri)?.parse_lock.clone();
        let (mut snapshot, parsed, _parsing) = if in_background {
            let mut snapshot = current;
            let (language, rope, old) = (
                snapshot.language,
                snapshot.rope.clone(),
                snapshot.tree.take(),
            );
            let (parsed, guard) = crate::background::run(move || {
                let guard = lock.blocking_lock_owned();
                let parsed =
                    language.and_then(|lang| crate::syntax::parse_rope(lang, &rope, old.as_ref()));
                (parsed, guard)
            })
            .await?;
            (snapshot, parsed, guard)
        } else {
            drop(current);
            let guard = lock.lock_owned().await;
            // Whoever waited takes the tree the other parse installed when
            // the text is still the same.
            let mut snapshot = self.snapshot(uri)?;
            if !snapshot.needs_reparse {
                return Some(snapshot);
            }
            let (language, rope, old) = (
                snapshot.language,
                snapshot.rope.clone(),
                snapshot.tree.take(),
            );
            let parsed = tokio::task::spawn_blocking(move || {
                language.and_then(|lang| crate::syntax::parse_rope(lang, &rope, old.as_ref()))
            })
            .await
            .ok()?;
            (snapshot, parsed, guard)
        };
        if let Some(mut open) = self.documents.get_mut(uri) {
            open.document
                .install_tree(snapshot.revision, parsed.clone());
        }
        snapshot.tree = parsed;
        snapshot.needs_reparse = false;
        Some(snapshot)
    }

    /// A snapshot, a receiver of the document's later changes (taken
    /// together: nothing can change between them), and completion's state
    /// for the document.
    pub fn watched_snapshot(
        &self,
        uri: &Url,
    ) -> Option<(Snapshot, watch::Receiver<u64>, Arc<DocumentState>)> {
        let open = self.documents.get(uri)?;
        Some((
            Snapshot::of(&open.document),
            open.watch_revision(),
            open.completion.clone(),
        ))
    }

    /// When the document last changed.
    pub fn last_change(&self, uri: &Url) -> Option<Instant> {
        Some(self.documents.get(uri)?.last_change)
    }

    /// The document's text (a copy: for the agent, not the keystroke path).
    pub fn text(&self, uri: &Url) -> Option<String> {
        let rope = self.documents.get(uri)?.document.rope.clone();
        Some(rope.to_string())
    }

    pub fn mark_initialized(&self) {
        self.initialized.store(true, Ordering::SeqCst);
    }

    /// True once the client sent `initialized`: from then on the server may start background work.
    pub fn initialized(&self) -> bool {
        self.initialized.load(Ordering::SeqCst)
    }

    pub fn next_progress_token(&self) -> String {
        format!(
            "fettle/{}",
            self.progress_tokens.fetch_add(1, Ordering::Relaxed)
        )
    }
}

impl OpenBuffers for State {
    fn open_buffers(&self) -> Vec<Buffer> {
        self.documents
            .iter()
            .map(|open| Buffer {
                uri: open.document.uri.clone(),
                language: open.document.language,
                rope: open.document.rope.clone(),
                revision: open.document.revision(),
                state: open.completion.clone(),
            })
            .collect()
    }
}
