//! The typed configuration: every key, its type and its default.
//!
//! `docs/configuration.md` documents each key; keep the two in step.
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use super::check::CheckConfig;

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
pub struct ModelConfig {
    /// Required for every model except the built-in one, whose default layer sets it.
    pub provider: Provider,
    /// Weights file; only for `provider = "local"`. May start with `~/`.
    #[serde(default)]
    pub path: Option<String>,
    /// `resolve()` fills in the provider's default when unset (not for `local`).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The model name sent to the server.
    #[serde(default)]
    pub model: Option<String>,
    /// The NAME of the environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub fim_template: FimTemplate,
    #[serde(default = "default_model_max_tokens")]
    pub max_tokens: u32,
    #[serde(default = "default_temperature")]
    pub temperature: f64,
    /// Time to the first byte of the answer (headers, or the first streamed
    /// token for the local model), in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Time to establish the TCP/TLS connection, in milliseconds.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Whole-request limit including streaming, in milliseconds.
    #[serde(default = "default_total_timeout_ms")]
    pub total_timeout_ms: u64,
    /// Retries on 429, 5xx and connection errors, before any output arrived.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Local model only: context window in tokens (the KV cache size).
    #[serde(default = "default_context_tokens")]
    pub context_tokens: u32,
    /// Local model only: inference threads; 0 means one per CPU core.
    #[serde(default)]
    pub threads: u32,
    /// Local model only: when its weights are the default model's and
    /// missing, `fettle serve` and `fettle fix` install them (verified)
    /// instead of only saying how.
    #[serde(default = "default_true")]
    pub auto_fetch: bool,
    /// Merged into every request body.
    #[serde(default)]
    pub extra_body: serde_json::Map<String, serde_json::Value>,
}

fn default_model_max_tokens() -> u32 {
    128
}
fn default_temperature() -> f64 {
    0.2
}
fn default_timeout_ms() -> u64 {
    5000
}
fn default_connect_timeout_ms() -> u64 {
    2000
}
fn default_total_timeout_ms() -> u64 {
    120_000
}
fn default_max_retries() -> u32 {
    2
}
fn default_context_tokens() -> u32 {
    4096
}
fn default_true() -> bool {
    true
}

impl ModelConfig {
    /// A model of `provider` with every other field at its default.
    pub fn new(provider: Provider) -> Self {
        Self {
            provider,
            path: None,
            base_url: None,
            model: None,
            api_key_env: None,
            fim_template: FimTemplate::Auto,
            max_tokens: default_model_max_tokens(),
            temperature: default_temperature(),
            timeout_ms: default_timeout_ms(),
            connect_timeout_ms: default_connect_timeout_ms(),
            total_timeout_ms: default_total_timeout_ms(),
            max_retries: default_max_retries(),
            context_tokens: default_context_tokens(),
            threads: 0,
            auto_fetch: true,
            extra_body: serde_json::Map::new(),
        }
    }
    pub fn builtin_local() -> Self {
        Self {
            path: Some(DEFAULT_LOCAL_MODEL_PATH.to_string()),
            // As every embedded model's (see `config::resolve`).
            total_timeout_ms: CODER_TOTAL_TIMEOUT_MS,
            ..Self::new(Provider::Local)
        }
    }
    /// A built-in coder model, installed by `fettle model fetch NAME` next
    /// to the default one. Never fetched on first use: it is hundreds of MB
    /// to a GB, which a user asks for.
    pub fn builtin_coder(file: &str) -> Self {
        let dir = DEFAULT_LOCAL_MODEL_PATH
            .rsplit_once('/')
            .map_or("~/.cache/fettle/models", |(dir, _)| dir);
        Self {
            path: Some(format!("{dir}/{file}")),
            auto_fetch: false,
            // The agent's first message shows the failing code and tests
            // (3–5k tokens); the KV cache of 8k is ~230 MB for the 1.5B.
            context_tokens: CODER_CONTEXT_TOKENS,
            // An agent turn prefills a few thousand tokens at ~20 a second
            // on a laptop CPU: minutes, not the default two. The task has
            // its own budget (`agent.timeout_s`).
            total_timeout_ms: CODER_TOTAL_TIMEOUT_MS,
            ..Self::new(Provider::Local)
        }
    }
    /// `base_url` or, when unset, the provider's default (`None` for `local`).
    pub fn effective_base_url(&self) -> Option<&str> {
        self.base_url
            .as_deref()
            .or(self.provider.default_base_url())
    }
    /// `path` with a leading `~/` expanded against `$HOME`.
    pub fn expanded_path(&self) -> Option<PathBuf> {
        self.path.as_deref().map(expand_home)
    }
}

/// Expands a leading `~/` (or a lone `~`) to `$HOME`; other paths are returned as is.
pub fn expand_home(path: &str) -> PathBuf {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    match (path.strip_prefix('~'), home) {
        (Some(""), Some(home)) => PathBuf::from(home),
        (Some(rest), Some(home)) if rest.starts_with('/') => {
            PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(path),
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentConfig {
    pub model: String,
    /// Empty means auto-detect.
    pub test_command: String,
    pub max_iterations: u32,
    pub max_tool_calls: u32,
    pub max_tokens: u64,
    pub timeout_s: u64,
    /// Policy for commands other than the test command.
    pub commands: CommandPolicy,
    /// Limit for one run of the test command; its whole process group is killed after it.
    pub test_timeout_s: u64,
    /// Limit for one `run_command`.
    pub command_timeout_s: u64,
    /// Environment variables passed to tests and commands although their
    /// names look secret (contain KEY, TOKEN, SECRET or PASSWORD).
    pub allow_env: Vec<String>,
    /// Address-space limit for tests and commands, in MiB; 0: no limit.
    pub memory_limit_mb: u64,
    /// How tests and commands are sandboxed: `auto` (the strongest the
    /// system supports), `workspace` (require it) or `off`.
    pub sandbox: SandboxMode,
    /// More directories sandboxed commands may write to.
    pub sandbox_writable: Vec<String>,
    /// Whether sandboxed tests and commands may use the network.
    pub sandbox_network: bool,
    /// Workspace-relative paths (a trailing `/` for a directory) that file
    /// tools refuse to write and commands see read-only, beyond the
    /// built-in ones (`.git/`, `fettle.toml`, `.fettle/`, the test command's
    /// script).
    pub protected_paths: Vec<String>,
    /// Whether file tools may read or write a regular file with more than
    /// one hard link (its other name may be outside the workspace).
    pub allow_hardlinks: bool,
    /// What the agent does when a file it needs to change is open in the
    /// editor with unsaved changes.
    pub unsaved_buffers: UnsavedBuffers,
    /// The prompt the model gets: `compact` (made for a small model:
    /// short, three tools, each attempt afresh), `full`, or `auto`
    /// (compact for a `local` model).
    pub prompt: AgentPrompt,
    /// Candidate fixes drafted per attempt, each verified in its own copy
    /// of the workspace, the best applied; 1: a single line of attempts.
    pub candidates: u32,
    /// With candidates: before the model's, try small mechanical changes
    /// to the suspected functions (an operator, a literal, two arguments,
    /// a name), each tested in a copy; the first that passes is applied.
    pub mutants: bool,
    /// Before a task reports success, a reviewer reads the change, the
    /// goal and the test results and may reject it (one more round).
    pub review: bool,
    /// The reviewer's model; empty: the agent's own.
    pub review_model: String,
    /// When the tests fail before any change, bisect the git history for
    /// the commit that broke them.
    pub bisect: bool,
    /// Before changing code for a goal, write tests for it that fail, then
    /// make them pass.
    pub tests_first: bool,
    /// Plan first: a short numbered plan before the first attempt, revised
    /// after a failed one.
    pub plan: bool,
    /// Ask the user to approve the plan before any change.
    pub plan_approval: bool,
    /// When Python tests fail before any change, run them once more
    /// recording the functions each test runs, to rank where the fault is.
    pub coverage: bool,
}
impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            model: BUILTIN_MODEL.to_string(),
            test_command: String::new(),
            max_iterations: 8,
            max_tool_calls: 60,
            max_tokens: 200_000,
            timeout_s: 900,
            commands: CommandPolicy::Ask,
            test_timeout_s: 600,
            command_timeout_s: 120,
            allow_env: Vec::new(),
            memory_limit_mb: 8192,
            sandbox: SandboxMode::Auto,
            sandbox_writable: Vec::new(),
            sandbox_network: false,
            protected_paths: Vec::new(),
            allow_hardlinks: false,
            unsaved_buffers: UnsavedBuffers::Ask,
            prompt: AgentPrompt::Auto,
            candidates: 1,
            mutants: true,
            review: false,
            review_model: String::new(),
            bisect: false,
            tests_first: false,
            plan: false,
            plan_approval: false,
            coverage: true,
        }
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
