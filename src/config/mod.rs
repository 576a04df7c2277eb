//! STUB — being written by helper C. The signatures are the contract.
//! Knows nothing about LSP: JSON/TOML values in, a typed `Config` out.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct Config {
    pub index: IndexConfig,
    pub diagnostics: DiagnosticsConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexConfig {
    pub enabled: bool,
    pub max_file_bytes: u64,
    pub exclude: Vec<String>,
}
impl Default for IndexConfig {
    fn default() -> Self {
        Self { enabled: true, max_file_bytes: 1 << 20, exclude: Vec::new() }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiagnosticsConfig {
    pub enabled: bool,
    pub debounce_ms: u64,
}
impl Default for DiagnosticsConfig {
    fn default() -> Self {
        Self { enabled: true, debounce_ms: 150 }
    }
}

/// Where a configuration value came from, lowest priority first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Default,
    UserFile(PathBuf),
    WorkspaceFile(PathBuf),
    InitializationOptions,
    WorkspaceConfiguration,
}

/// An invalid value, with the full key path (`models.fast.provider: unknown provider "opnai"`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

/// The raw layers, one per source. Replacing a layer and re-resolving is how
/// configuration changes at run time.
#[derive(Clone, Debug, Default)]
pub struct ConfigLayers {
    layers: BTreeMap<Source, serde_json::Value>,
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
    pub fn load_files(_roots: &[PathBuf]) -> (Self, Vec<ConfigError>) {
        (Self::default(), Vec::new())
    }
    pub fn set(&mut self, source: Source, value: serde_json::Value) {
        self.layers.insert(source, value);
    }
    pub fn resolve(&self) -> Result<Resolved, ConfigError> {
        Ok(Resolved { config: Config::default(), provenance: BTreeMap::new(), warnings: Vec::new() })
    }
}

pub fn user_config_path() -> Option<PathBuf> {
    None
}
pub fn workspace_config_path(root: &Path) -> PathBuf {
    root.join("fettle.toml")
}

impl Resolved {
    /// `key = value    # source` lines, for `fettle doctor`.
    pub fn render(&self) -> String {
        String::new()
    }
}
