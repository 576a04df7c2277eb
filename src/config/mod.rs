//! Configuration: one object, the same from every source.
//!
//! Knows nothing about LSP: JSON/TOML values in, a typed [`Config`] out.
//! Sources, lowest priority first: built-in defaults, the user file, each
//! workspace `fettle.toml`, `initializationOptions`, `workspace/configuration`.
//! `docs/configuration.md` is the user-facing description; keep it in step.
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod files;
mod render;
mod resolve;
mod schema;
mod text;
mod validate;

pub use files::{parse_toml, read_toml_file, user_config_path, workspace_config_path};
pub use schema::{
    expand_home, AgentConfig, CommandPolicy, CompletionConfig, Config, DiagnosticsConfig,
    EditConfig, FimTemplate, IndexConfig, LogConfig, ModelConfig, Multiline, Provider, SandboxMode,
    UnsavedBuffers, BUILTIN_MODEL, DEFAULT_LOCAL_MODEL_PATH,
};

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
}

#[derive(Clone, Debug)]
pub struct Resolved {
    pub config: Config,
    /// Full key path of every leaf → the source that set it.
    pub provenance: BTreeMap<String, Source>,
    /// Unknown keys and other non-fatal findings, as full key paths with a message.
    pub warnings: Vec<String>,
}

impl ConfigLayers {
    /// Reads the user file and the workspace files of `roots` (missing files are fine).
    /// With several roots, a later root's `fettle.toml` overrides an earlier one's.
    /// A file that cannot be read or parsed is left out and reported.
    pub fn load_files(roots: &[PathBuf]) -> (Self, Vec<ConfigError>) {
        Self::load_files_from(user_config_path().as_deref(), roots)
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
        for source in user.into_iter().chain(workspace) {
            let Some(path) = source.file() else { continue };
            match read_toml_file(path) {
                Ok(Some(value)) => fresh.push((source, value)),
                Ok(None) => {}
                Err(e) => {
                    errors.push(e);
                    if let Some(old) = self.get(&source) {
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
        errors
    }

    /// Re-reads the file behind a `UserFile`/`WorkspaceFile` source: a
    /// missing file removes the layer; an unreadable or invalid one leaves
    /// the layer as it was and returns the error. Other sources: no-op.
    pub fn reload_file(&mut self, source: &Source) -> Result<(), ConfigError> {
        let Some(path) = source.file() else {
            return Ok(());
        };
        match read_toml_file(path)? {
            Some(value) => self.set(source.clone(), value),
            None => {
                self.remove(source);
            }
        }
        Ok(())
    }

    /// Sets (or replaces) one source's layer. A JSON `null` member means
    /// "not set here": the lower layers' value stays.
    pub fn set(&mut self, source: Source, value: serde_json::Value) {
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
        resolve::resolve(&self.layers)
    }
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
            })
    }
}

impl Resolved {
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
