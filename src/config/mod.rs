//! Configuration: one object, the same from every source.
//!
//! Knows nothing about LSP: JSON/TOML values in, a typed [`Config`] out.
//! Sources, lowest priority first: built-in defaults, the user file, each
//! workspace `fettle.toml`, `initializationOptions`, `workspace/configuration`.
//! `docs/configuration.md` is the user-facing description; keep it in step.
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod check;
mod files;
mod gate;
mod render;
mod resolve;
mod schema;
mod text;
pub mod trust;
mod validate;

pub use check::CHECK_LANGUAGES;
pub use files::{parse_toml, read_toml_file, user_config_path, workspace_config_path};
pub use gate::{IgnoredKey, Rule, UntrustedFile, GATED};
pub use schema::{
    expand_home, AgentConfig, AgentPrompt, CheckConfig, CheckFormat, CodeActionsMode,
    CommandPolicy, CompletionConfig, Config, ConfirmMode, DiagnosticsConfig, EditAction,
    EditConfig, FimTemplate, IndexConfig, LogConfig, ModelConfig, Multiline, Provider, SandboxMode,
    UnsavedBuffers, BUILTIN_MODEL, CODER_MODELS, DEFAULT_CODER_MODEL, DEFAULT_LOCAL_MODEL_PATH,
};

/// The most candidate fixes per attempt (`agent.candidates`): each is a
/// model answer, a copy of the workspace and a test run.
pub const MAX_CANDIDATES: u32 = 8;

/// Where a configuration value came from, lowest priority first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Default,
    UserFile(PathBuf),
    WorkspaceFile(PathBuf),
    InitializationOptions,
    WorkspaceConfiguration,
}

impl Source {
    /// Priority class; several workspace files share one and keep the order
    /// they were added in.
    fn rank(&self) -> u8 {
        match self {
            Source::Default => 0,
            Source::UserFile(_) => 1,
            Source::WorkspaceFile(_) => 2,
            Source::InitializationOptions => 3,
            Source::WorkspaceConfiguration => 4,
        }
    }
    /// The file behind this source, if it is one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Source::UserFile(p) | Source::WorkspaceFile(p) => Some(p),
            _ => None,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::UserFile(p) => write!(f, "user file {}", p.display()),
            Source::WorkspaceFile(p) => write!(f, "workspace file {}", p.display()),
            Source::InitializationOptions => f.write_str("initializationOptions"),
            Source::WorkspaceConfiguration => f.write_str("workspace/configuration"),
        }
    }
}

/// An invalid value, with the full key path (`models.fast.provider: unknown provider "opnai"`).
/// When a layer above the defaults set the value, the message ends with
/// `(from <source>)`. For TOML syntax errors `path` is `file:line:column`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

/// The raw layers, one per source. Replacing a layer and re-resolving is how
/// configuration changes at run time; a failed resolve changes nothing, so
/// the caller keeps its last good [`Resolved`].
#[derive(Clone, Debug, Default)]
pub struct ConfigLayers {
    /// Sorted by priority; within one priority (several workspace files),
    /// by the order they were first set, later overriding earlier.
    layers: Vec<(Source, serde_json::Value)>,
    /// For each workspace file read: the SHA-256 of its content and
    /// whether the user trusts that content. A workspace layer without an
    /// entry (set directly) is untrusted.
    file_trust: BTreeMap<Source, FileTrust>,
    /// Where trust is recorded; `None`: [`trust::trust_store_path`].
    trust_store: Option<PathBuf>,
    /// Whether models installed on this machine choose defaults (the
    /// edit and agent models, see `resolve::prefer_installed_coder`): on
    /// for the server and the CLI, off for layers built in code, whose
    /// result must not depend on the machine.
    installed_defaults: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FileTrust {
    sha256: String,
    trusted: bool,
}

#[derive(Clone, Debug)]
pub struct Resolved {
    pub config: Config,
    /// Full key path of every leaf → the source that set it.
    pub provenance: BTreeMap<String, Source>,
    /// Unknown keys and other non-fatal findings, as full key paths with a message.
    pub warnings: Vec<String>,
    /// Keys an untrusted workspace file set and Fettle ignored (see `gate.rs`).
    pub ignored: Vec<IgnoredKey>,
}

impl ConfigLayers {
    /// Reads the user file and the workspace files of `roots` (missing files are fine).
    /// With several roots, a later root's `fettle.toml` overrides an earlier one's.
    /// A file that cannot be read or parsed is left out and reported.
    pub fn load_files(roots: &[PathBuf]) -> (Self, Vec<ConfigError>) {
        let (layers, errors) = Self::load_files_from(user_config_path().as_deref(), roots);
        (layers.with_installed_defaults(), errors)
    }

    /// Lets the models installed on this machine choose defaults (see
    /// the field).
    pub fn with_installed_defaults(mut self) -> Self {
        self.installed_defaults = true;
        self
    }

    /// [`Self::load_files`] with an explicit user file (`None`: no user file).
    pub fn load_files_from(
        user_file: Option<&Path>,
        roots: &[PathBuf],
    ) -> (Self, Vec<ConfigError>) {
        let mut layers = Self::default();
        let errors = layers.reload_files_from(user_file, roots);
        (layers, errors)
    }

    /// Re-reads every file layer in place, for a file change or new
    /// workspace folders; client layers are untouched. Files that are gone,
    /// or whose root is no longer listed, drop out; a file that now fails to
    /// read or parse keeps its previous layer (the last valid contents stay
    /// in force) and is reported.
    pub fn reload_files(&mut self, roots: &[PathBuf]) -> Vec<ConfigError> {
        self.reload_files_from(user_config_path().as_deref(), roots)
    }

    /// [`Self::reload_files`] with an explicit user file (`None`: no user file).
    pub fn reload_files_from(
        &mut self,
        user_file: Option<&Path>,
        roots: &[PathBuf],
    ) -> Vec<ConfigError> {
        let user = user_file.map(|p| Source::UserFile(p.to_path_buf()));
        let workspace = roots
            .iter()
            .map(|root| Source::WorkspaceFile(workspace_config_path(root)));
        let mut errors = Vec::new();
        let mut fresh = Vec::new();
        let store = self.load_trust_store(&mut errors);
        let mut file_trust = BTreeMap::new();
        for source in user.into_iter().chain(workspace) {
            let Some(path) = source.file() else { continue };
            match read_toml_file_hashed(path) {
                Ok(Some((value, sha256))) => {
                    if matches!(source, Source::WorkspaceFile(_)) {
                        file_trust.insert(source.clone(), trust_of(&store, path, sha256));
                    }
                    fresh.push((source, value));
                }
                Ok(None) => {}
                Err(e) => {
                    errors.push(e);
                    if let Some(old) = self.get(&source) {
                        if let Some(trust) = self.file_trust.get(&source) {
                            file_trust.insert(source.clone(), trust.clone());
                        }
                        fresh.push((source.clone(), old.clone()));
                    }
                }
            }
        }
        // Rebuilt rather than patched so the roots' current order decides.
        self.layers.retain(|(s, _)| s.file().is_none());
        for (source, value) in fresh {
            self.set(source, value);
        }
        self.file_trust = file_trust;
        errors
    }

    /// Where trust is recorded: `$XDG_CONFIG_HOME/fettle/trusted.toml`
    /// unless [`Self::set_trust_store`] chose another file.
    pub fn trust_store_path(&self) -> Option<PathBuf> {
        self.trust_store.clone().or_else(trust::trust_store_path)
    }

    /// Uses `path` as the trust store (tests, or an explicit location);
    /// takes effect at the next file (re)load.
    pub fn set_trust_store(&mut self, path: PathBuf) {
        self.trust_store = Some(path);
    }

    fn load_trust_store(&self, errors: &mut Vec<ConfigError>) -> trust::TrustStore {
        let Some(path) = self.trust_store_path() else {
            return trust::TrustStore::default();
        };
        trust::TrustStore::load(&path).unwrap_or_else(|e| {
            errors.push(ConfigError {
                path: path.display().to_string(),
                message: format!("{e}; no workspace is trusted until it is fixed"),
            });
            trust::TrustStore::default()
        })
    }

    /// Re-reads the file behind a `UserFile`/`WorkspaceFile` source: a
    /// missing file removes the layer; an unreadable or invalid one leaves
    /// the layer as it was and returns the error. Other sources: no-op.
    pub fn reload_file(&mut self, source: &Source) -> Result<(), ConfigError> {
        let Some(path) = source.file() else {
            return Ok(());
        };
        match read_toml_file_hashed(path)? {
            Some((value, sha256)) => {
                self.set(source.clone(), value);
                if matches!(source, Source::WorkspaceFile(_)) {
                    let store = self.load_trust_store(&mut Vec::new());
                    let trust = trust_of(&store, path, sha256);
                    self.file_trust.insert(source.clone(), trust);
                }
            }
            None => {
                self.remove(source);
            }
        }
        Ok(())
    }

    /// Sets (or replaces) one source's layer. A JSON `null` member means
    /// "not set here": the lower layers' value stays.
    /// A workspace layer set this way is untrusted (its content was not
    /// checked against the trust store).
    pub fn set(&mut self, source: Source, value: serde_json::Value) {
        self.file_trust.remove(&source);
        if let Some(slot) = self.layers.iter_mut().find(|(s, _)| *s == source) {
            slot.1 = value;
            return;
        }
        let at = self
            .layers
            .iter()
            .position(|(s, _)| s.rank() > source.rank())
            .unwrap_or(self.layers.len());
        self.layers.insert(at, (source, value));
    }

    pub fn get(&self, source: &Source) -> Option<&serde_json::Value> {
        self.layers
            .iter()
            .find(|(s, _)| s == source)
            .map(|(_, v)| v)
    }

    pub fn remove(&mut self, source: &Source) -> Option<serde_json::Value> {
        self.file_trust.remove(source);
        let at = self.layers.iter().position(|(s, _)| s == source)?;
        Some(self.layers.remove(at).1)
    }

    /// The layers in priority order, lowest first (built-in defaults not included).
    pub fn iter(&self) -> impl Iterator<Item = (&Source, &serde_json::Value)> {
        self.layers.iter().map(|(s, v)| (s, v))
    }

    /// Merges the layers over the defaults and validates the result; the
    /// first error if there are any (see [`Self::resolve_all`]).
    pub fn resolve(&self) -> Result<Resolved, ConfigError> {
        self.resolve_all().map_err(|mut errors| {
            // resolve_all never returns an empty list; the fallback is for the type checker.
            if errors.is_empty() {
                ConfigError {
                    path: String::new(),
                    message: "invalid configuration".to_string(),
                }
            } else {
                errors.swap_remove(0)
            }
        })
    }

    /// Like [`Self::resolve`], but reports every validation error at once
    /// (a type error still stops at the first, as deserialization does).
    pub fn resolve_all(&self) -> Result<Resolved, Vec<ConfigError>> {
        let untrusted = |source: &Source| match source {
            Source::WorkspaceFile(_) => match self.file_trust.get(source) {
                Some(t) if t.trusted => None,
                Some(t) => Some(t.sha256.clone()),
                None => Some(String::new()),
            },
            _ => None,
        };
        resolve::resolve(&self.layers, &untrusted, self.installed_defaults)
    }

    /// Treats a workspace layer as trusted whatever its content (content
    /// vetted by other means, e.g. a test's fixture); the next file reload
    /// decides again from the trust store.
    pub fn trust_layer(&mut self, source: &Source) {
        self.file_trust.insert(
            source.clone(),
            FileTrust {
                sha256: String::new(),
                trusted: true,
            },
        );
    }

    /// The SHA-256 of a workspace file's content as last read, and whether
    /// that content is trusted (`None`: not read from a file).
    pub fn workspace_trust(&self, file: &Path) -> Option<(String, bool)> {
        self.file_trust
            .get(&Source::WorkspaceFile(file.to_path_buf()))
            .map(|t| (t.sha256.clone(), t.trusted))
    }
}

/// Reads a TOML file and hashes its bytes (the hash trust is recorded under).
fn read_toml_file_hashed(path: &Path) -> Result<Option<(serde_json::Value, String)>, ConfigError> {
    // Regular files only, capped: a cloned repository's `fettle.toml` may be
    // a FIFO (an open that never returns) or a symlink to `/dev/zero`.
    let bytes = match crate::fsread::read_regular(path, crate::fsread::CONFIG_MAX_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(files::read_error(&e)),
    };
    let sha256 = trust::sha256_hex(&bytes);
    let text = String::from_utf8(bytes).map_err(|_| ConfigError {
        path: path.display().to_string(),
        message: "cannot read: not UTF-8 text".to_string(),
    })?;
    Ok(Some((parse_toml(&text, path)?, sha256)))
}

/// The workspace root a `fettle.toml` belongs to.
pub fn workspace_root_of(file: &Path) -> &Path {
    file.parent().unwrap_or(file)
}

fn trust_of(store: &trust::TrustStore, file: &Path, sha256: String) -> FileTrust {
    let trusted = store.is_trusted(workspace_root_of(file), &sha256);
    FileTrust { sha256, trusted }
}

impl Default for Resolved {
    /// The built-in defaults, all from [`Source::Default`]: what is in force
    /// before any source has been read.
    fn default() -> Self {
        ConfigLayers::default()
            .resolve()
            .unwrap_or_else(|_| Resolved {
                config: Config::default(),
                provenance: BTreeMap::new(),
                warnings: Vec::new(),
                ignored: Vec::new(),
            })
    }
}

impl Resolved {
    /// The untrusted workspace files whose keys were ignored, with those keys.
    pub fn untrusted_files(&self) -> Vec<UntrustedFile<'_>> {
        gate::by_file(&self.ignored)
    }

    /// `key = value    # source` lines, for `fettle doctor`.
    pub fn render(&self) -> String {
        self.render_with(&|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
    }

    /// [`Self::render`] with `is_set(variable)` deciding whether an API key
    /// variable counts as set (tests, or a client's environment).
    pub fn render_with(&self, is_set: &dyn Fn(&str) -> bool) -> String {
        render::render(self, is_set)
    }
}
