//! The typed configuration: every key, its type and its default.
//!
//! `docs/configuration.md` documents each key; keep the two in step.
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub use super::check::CheckConfig;

mod agent;
mod model;

pub use agent::AgentConfig;
pub use model::{expand_home, ModelConfig};

/// Name of the model that always exists and that features use by default.
pub const BUILTIN_MODEL: &str = "local";
/// Where the built-in `local` model's weights are looked for.
pub const DEFAULT_LOCAL_MODEL_PATH: &str = "~/.cache/fettle/models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The whole configuration. Sections missing from the input take their
/// defaults, so any subset of keys deserializes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub index: IndexConfig,
    pub diagnostics: DiagnosticsConfig,
    pub log: LogConfig,
    /// Named models; features refer to them by name. `resolve()` guarantees
    /// that [`BUILTIN_MODEL`] is present.
    pub models: BTreeMap<String, ModelConfig>,
    pub completion: CompletionConfig,
    pub edit: EditConfig,
    pub agent: AgentConfig,
    pub check: CheckConfig,
}

/// The coder models `fettle model fetch NAME` installs, known by name
/// without any configuration: `agent.model = "qwen2.5-coder-1.5b"` is
/// enough once the file is there.
pub const CODER_MODELS: &[(&str, &str)] = &[
    ("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4.gguf"),
    (
        "qwen2.5-coder-1.5b",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    ),
];
/// The built-in coder models' context window (they are trained for 32k).
pub const CODER_CONTEXT_TOKENS: u32 = 8192;
/// The built-in coder models' limit on one request.
pub const CODER_TOTAL_TIMEOUT_MS: u64 = 600_000;
/// What the edit and agent models default to when its file is installed:
/// the smallest model measured to run the repair loop (`docs/models.md`).
pub const DEFAULT_CODER_MODEL: &str = "qwen2.5-coder-1.5b";
/// What ghost text defaults to when its file is installed: the model the
/// completion-quality benchmark found best within the latency targets
/// (`docs/performance.md`).
pub const DEFAULT_COMPLETION_CODER: &str = "qwen2.5-coder-0.5b";

impl Default for Config {
    fn default() -> Self {
        let mut models = BTreeMap::new();
        models.insert(BUILTIN_MODEL.to_string(), ModelConfig::builtin_local());
        for (name, file) in CODER_MODELS {
            models.insert(name.to_string(), ModelConfig::builtin_coder(file));
        }
        Self {
            index: IndexConfig::default(),
            diagnostics: DiagnosticsConfig::default(),
            log: LogConfig::default(),
            models,
            completion: CompletionConfig::default(),
            edit: EditConfig::default(),
            agent: AgentConfig::default(),
            check: CheckConfig::default(),
        }
    }
}

impl Config {
    pub fn model(&self, name: &str) -> Option<&ModelConfig> {
        self.models.get(name)
    }
    /// The model inline completion uses (`completion.model`).
    pub fn completion_model(&self) -> Option<&ModelConfig> {
        self.model(&self.completion.model)
    }
    /// The model code actions use (`edit.model`).
    pub fn edit_model(&self) -> Option<&ModelConfig> {
        self.model(&self.edit.model)
    }
    /// The model the agent uses (`agent.model`).
    pub fn agent_model(&self) -> Option<&ModelConfig> {
        self.model(&self.agent.model)
    }
    /// The features (`completion`, `edit`, `agent`) that use the model `name`.
    pub fn features_using(&self, name: &str) -> Vec<&'static str> {
        [
            ("completion", &self.completion.model),
            ("edit", &self.edit.model),
            ("agent", &self.agent.model),
        ]
        .into_iter()
        .filter(|(_, model)| model.as_str() == name)
        .map(|(feature, _)| feature)
        .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IndexConfig {
    pub enabled: bool,
    /// Files larger than this are not indexed.
    pub max_file_bytes: u64,
    /// Extra glob patterns to skip, on top of `.gitignore`.
    pub exclude: Vec<String>,
}
impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_file_bytes: 1 << 20,
            exclude: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiagnosticsConfig {
    /// Syntax diagnostics.
    pub enabled: bool,
    pub debounce_ms: u64,
}
impl Default for DiagnosticsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            debounce_ms: 150,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LogConfig {
    /// A `tracing` filter directive; the `FETTLE_LOG` variable overrides it.
    /// Warnings by default: editors record a server's stderr as errors
    /// (Neovim's `lsp.log` marks every line `[ERROR]`).
    pub level: String,
}
impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "warn".to_string(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompletionConfig {
    pub enabled: bool,
    pub model: String,
    /// Server-side debounce; clients usually debounce too.
    pub debounce_ms: u64,
    /// Limit on one completion's model request, retries and streaming
    /// included (0: none, only the model's own limits).
    pub deadline_ms: u64,
    pub max_prompt_tokens: u32,
    /// Local models: the most time a completion may spend evaluating the
    /// part of its prompt the KV cache does not hold (0: no limit).
    pub latency_target_ms: u64,
    /// Local models: after this long with no keystroke, completion request
    /// or cursor report (`fettle/cursor`), the prompt at the cursor is
    /// evaluated ahead of the next request (0: never).
    pub warm_after_ms: u64,
    pub multiline: Multiline,
    /// Also offer the suggestion as a `textDocument/completion` item, for
    /// clients without inline completion. Read at `initialize`.
    pub as_completion_item: bool,
}
impl Default for CompletionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            model: BUILTIN_MODEL.to_string(),
            debounce_ms: 0,
            deadline_ms: 3000,
            max_prompt_tokens: 1024,
            latency_target_ms: 400,
            warm_after_ms: 250,
            multiline: Multiline::Auto,
            as_completion_item: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EditConfig {
    pub model: String,
    /// Presets offered as code actions on a selection.
    pub actions: Vec<EditAction>,
    /// When Fettle's code actions are listed: on every request, only when
    /// the user asked (not on the editor's automatic lightbulb requests),
    /// or never.
    pub code_actions: CodeActionsMode,
    /// Ask before applying a rewrite (`ask`) or apply it at once (`never`).
    pub confirm: ConfirmMode,
    /// Upper bound on the rewrite prompt, in tokens (a local model's
    /// context window bounds it further).
    pub max_prompt_tokens: u32,
}
impl Default for EditConfig {
    fn default() -> Self {
        Self {
            model: BUILTIN_MODEL.to_string(),
            actions: EditAction::defaults(),
            code_actions: CodeActionsMode::Invoked,
            confirm: ConfirmMode::Never,
            max_prompt_tokens: 6000,
        }
    }
}

/// A code-action preset: its title (shown as `Fettle: <title>`) and the
/// instruction the model gets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditAction {
    pub title: String,
    pub instruction: String,
}

impl EditAction {
    pub fn defaults() -> Vec<EditAction> {
        [
            (
                "Add documentation",
                "Add documentation comments (docstrings or doc comments, in this language's usual style) to the definitions in this code. Do not change the code itself.",
            ),
            (
                "Simplify",
                "Simplify this code: make it shorter and clearer without changing what it does.",
            ),
            (
                "Add type annotations",
                "Add type annotations to this code where the language supports them. Do not change what it does.",
            ),
            (
                "Handle errors",
                "Make this code handle its error cases (failed calls, missing values, bad input) in this language's usual way.",
            ),
        ]
        .into_iter()
        .map(|(title, instruction)| EditAction {
            title: title.to_owned(),
            instruction: instruction.to_owned(),
        })
        .collect()
    }
}

/// A string-valued enum whose errors name the key's kind and list the valid
/// values (`unknown provider "opnai"; expected one of local, openai, ...`),
/// which serde's derive cannot phrase.
macro_rules! keyword_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal, default = $default:ident,
     { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $(#[doc = $text] $variant,)+
        }
        impl $name {
            /// Every value, in documentation order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            fn choices() -> String {
                Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
            }
        }
        impl Default for $name {
            fn default() -> Self { $name::$default }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => {
                        let names: Vec<&str> = Self::ALL.iter().map(|v| v.as_str()).collect();
                        let hint = super::text::did_you_mean(s, names.iter().copied())
                            .map(|m| format!("; did you mean \"{m}\"?"))
                            .unwrap_or_default();
                        Err(format!(
                            "unknown {} {:?}; expected one of {}{hint}",
                            $what, s, Self::choices()
                        ))
                    }
                }
            }
        }
        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "a {} name (one of {})", $what, $name::choices())
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        v.parse().map_err(E::custom)
                    }
                }
                d.deserialize_str(V)
            }
        }
    };
}

keyword_enum!(
    /// Which kind of server a model talks to.
    Provider, "provider", default = Local, {
        Local => "local",
        OpenAi => "openai",
        Anthropic => "anthropic",
        Ollama => "ollama",
        Mistral => "mistral",
        LlamaCpp => "llamacpp",
    }
);

impl Provider {
    /// The endpoint used when a model sets no `base_url`.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Provider::Local => None,
            Provider::OpenAi => Some("https://api.openai.com/v1"),
            Provider::Anthropic => Some("https://api.anthropic.com"),
            Provider::Ollama => Some("http://127.0.0.1:11434"),
            Provider::Mistral => Some("https://codestral.mistral.ai/v1"),
            Provider::LlamaCpp => Some("http://127.0.0.1:8080"),
        }
    }
    /// Whether the server cannot pick a model by itself, so `model` must be set.
    /// llama.cpp serves the one model it was started with.
    pub fn requires_model_name(self) -> bool {
        matches!(
            self,
            Provider::OpenAi | Provider::Anthropic | Provider::Ollama | Provider::Mistral
        )
    }
}

keyword_enum!(
    /// How a fill-in-the-middle prompt is laid out.
    FimTemplate, "FIM template", default = Auto, {
        Auto => "auto",
        StarCoder => "starcoder",
        CodeLlama => "codellama",
        DeepSeek => "deepseek",
        Qwen => "qwen",
        Codestral => "codestral",
        CodeGemma => "codegemma",
        Granite => "granite",
        Chat => "chat",
        Suffix => "suffix",
        None => "none",
    }
);

keyword_enum!(
    /// Whether inline completions may span several lines.
    Multiline, "multiline mode", default = Auto, {
        Auto => "auto",
        Always => "always",
        Never => "never",
    }
);

keyword_enum!(
    /// Whether the agent may run commands other than the test command.
    CommandPolicy, "command policy", default = Ask, {
        Ask => "ask",
        Auto => "auto",
        Never => "never",
    }
);

keyword_enum!(
    /// A file the agent must change is open with unsaved changes: ask the
    /// user, save the buffer first, or leave the file alone.
    UnsavedBuffers, "unsaved-buffers policy", default = Ask, {
        Ask => "ask",
        Save => "save",
        Skip => "skip",
    }
);

keyword_enum!(
    /// Which prompt the agent's model gets (see `AgentConfig::prompt`).
    AgentPrompt, "agent prompt", default = Auto, {
        Auto => "auto",
        Compact => "compact",
        Full => "full",
    }
);

keyword_enum!(
    /// How the agent's tests and commands are sandboxed: the strongest the
    /// system supports (`auto`), required (`workspace`), or not (`off`).
    SandboxMode, "sandbox mode", default = Auto, {
        Auto => "auto",
        Off => "off",
        Workspace => "workspace",
    }
);

keyword_enum!(
    /// When code actions are listed: `always`, `invoked` (not on the
    /// editor's automatic requests) or `never`.
    CodeActionsMode, "code-actions mode", default = Invoked, {
        Always => "always",
        Invoked => "invoked",
        Never => "never",
    }
);

keyword_enum!(
    /// Whether a rewrite asks before it is applied.
    ConfirmMode, "confirm mode", default = Never, {
        Never => "never",
        Ask => "ask",
    }
);

keyword_enum!(
    /// The output format of a checker command: `auto` (from the command),
    /// a tool's own (`rustc` JSON, `ruff` JSON, `pyflakes`, `py_compile`,
    /// `tsc`, `node`, `go`) or the generic `file:line:col: severity: message`.
    CheckFormat, "checker output format", default = Auto, {
        Auto => "auto",
        Rustc => "rustc",
        Ruff => "ruff",
        Pyflakes => "pyflakes",
        PyCompile => "py_compile",
        Tsc => "tsc",
        Node => "node",
        Go => "go",
        Gcc => "gcc",
    }
);
