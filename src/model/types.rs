//! The requests a model answers and the events it streams back. Provider-
//! neutral: each provider maps these to and from its own wire format.
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ModelError;

/// Code from another file, offered to the model as context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snippet {
    /// Workspace-relative path, shown to the model as the snippet's label.
    pub path: String,
    pub text: String,
}

/// Sampling options shared by both capabilities. `None` means "the model's
/// configured value".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenOptions {
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    /// Extra stop sequences, on top of those the FIM template brings.
    pub stop: Vec<String>,
    /// For a local model: at most this long to evaluate what its KV cache
    /// does not hold of the prompt (the window before the cursor is
    /// shortened to fit). Remote models ignore it.
    pub latency_target: Option<std::time::Duration>,
}

/// A fill-in-the-middle request: complete the text between `prefix` and
/// `suffix` of the file at `path`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FimRequest {
    pub prefix: String,
    pub suffix: String,
    pub snippets: Vec<Snippet>,
    /// Workspace-relative path of the file being completed, if known.
    pub path: Option<String>,
    /// Name of the repository (the workspace folder), for repo-level templates.
    pub repo_name: Option<String>,
    pub options: GenOptions,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    /// The result of a tool call, answering the assistant's call `tool_call_id`.
    Tool,
}

impl Role {
    /// The role's name on the OpenAI and Ollama wires (and in serde).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id (generated when the provider has none, as Ollama).
    pub id: String,
    pub name: String,
    /// Parsed JSON arguments; always an object for well-behaved models.
    pub arguments: Value,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// Calls the assistant made in this turn (assistant messages only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `Role::Tool`: which call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }
    /// The result of the call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            ..Self::plain(Role::Tool, content)
        }
    }
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool the model may call: a name, what it does, and a JSON Schema for
/// its arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    pub options: GenOptions,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished on its own (end of turn, end of text).
    EndTurn,
    /// `max_tokens` was reached.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model wants its tool calls answered.
    ToolUse,
    /// Anything else the provider reported, kept for the log.
    Other,
}

/// Token counts for one request, as the provider reported them (or as the
/// local model counted them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// What a chat stream yields. A well-formed stream ends with exactly one
/// `Stop`; `Usage` comes before it when the provider reports usage.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatEvent {
    TextDelta(String),
    /// A complete tool call; arguments already parsed (a call whose
    /// arguments are not JSON is an error, not an event).
    ToolCall(ToolCall),
    Usage(Usage),
    Stop(StopReason),
}

/// The text of a fill-in-the-middle answer, piece by piece. Dropping the
/// stream cancels the request.
pub type TextStream = BoxStream<'static, Result<String, ModelError>>;
/// A chat answer, event by event. Dropping the stream cancels the request.
pub type ChatStream = BoxStream<'static, Result<ChatEvent, ModelError>>;
