//! The script a [`MockServer`](super::MockServer) follows: an ordered list of
//! scripted responses, each optionally guarded by a [`Matcher`], carrying the
//! answer (text, tool calls, usage) and optionally a [`Fault`] to inject.
//!
//! Scripts are built in code ([`Script::new`]) or read from JSON
//! ([`Script::from_json`], [`Script::from_file`]); the JSON shape is
//! documented in `docs/mock-model-server.md`.
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An ordered list of scripted responses.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(default)]
    pub responses: Vec<ScriptedResponse>,
}

impl Script {
    pub fn new(responses: Vec<ScriptedResponse>) -> Self {
        Self { responses }
    }

    /// Parses `{"responses": [...]}`. Unknown fields are rejected, and the
    /// error names the path of the bad field (`responses[1].fault: ...`).
    pub fn from_json(text: &str) -> anyhow::Result<Self> {
        let mut de = serde_json::Deserializer::from_str(text);
        let script: Script = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path.is_empty() || path == "." {
                anyhow::anyhow!("invalid mock script: {inner}")
            } else {
                anyhow::anyhow!("invalid mock script at {path}: {inner}")
            }
        })?;
        de.end()
            .map_err(|e| anyhow::anyhow!("invalid mock script: {e}"))?;
        Ok(script)
    }

    /// Reads and parses a JSON script file.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read mock script {}", path.display()))?;
        Self::from_json(&text).with_context(|| format!("in mock script {}", path.display()))
    }
}

/// One answer the server gives to a matching request.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScriptedResponse {
    /// Which requests this answers; `None` matches any request.
    pub when: Option<Matcher>,
    /// The answer text (may be empty).
    pub text: String,
    /// Explicit stream pieces. Default: `text` split at word boundaries,
    /// keeping the whitespace (see [`split_words`]).
    pub chunks: Option<Vec<String>>,
    pub tool_calls: Vec<MockToolCall>,
    /// Provider-native stop reason, overriding the format's natural one.
    pub stop_reason: Option<String>,
    /// Token counts; default [`MockUsage::default`].
    pub usage: Option<MockUsage>,
    /// Wait this long before sending the response headers.
    pub delay_ms: u64,
    /// Wait this long between streamed chunks.
    pub chunk_delay_ms: u64,
    /// Streamed answers: before the first chunk, send this many keep-alive
    /// frames (an SSE comment `: keep-alive`, an empty NDJSON line), ...
    pub keepalives: u32,
    /// ... this far apart (a server that trickles, but says nothing).
    pub keepalive_ms: u64,
    pub fault: Option<Fault>,
    /// Not consumed: answers every matching request.
    pub repeat: bool,
}

impl ScriptedResponse {
    /// A plain text answer matching any request.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// The pieces a streamed answer sends: `chunks` when given, else `text`
    /// split at word boundaries.
    pub fn stream_pieces(&self) -> Vec<String> {
        match &self.chunks {
            Some(chunks) => chunks.clone(),
            None => split_words(&self.text),
        }
    }

    /// The text of a non-streamed answer: `text`, or the chunks joined when
    /// `text` is empty and `chunks` are given.
    pub fn whole_text(&self) -> String {
        match &self.chunks {
            Some(chunks) if self.text.is_empty() => chunks.concat(),
            _ => self.text.clone(),
        }
    }

    /// The token counts to report.
    pub fn usage_or_default(&self) -> MockUsage {
        self.usage.unwrap_or_default()
    }
}

/// Which requests a scripted response answers. Every given condition must hold.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Matcher {
    /// The exact request path, e.g. `/v1/messages`.
    pub path: Option<String>,
    /// A substring of the raw request body.
    pub contains: Option<String>,
}

impl Matcher {
    pub fn matches(&self, path: &str, raw_body: &str) -> bool {
        self.path.as_deref().is_none_or(|p| p == path)
            && self
                .contains
                .as_deref()
                .is_none_or(|c| raw_body.contains(c))
    }
}

/// A tool call the mock model makes.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MockToolCall {
    /// The call id; default generated (`call_<request>_<index>` for OpenAI,
    /// `toolu_mock_<request>_<index>` for Anthropic, none for Ollama).
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    /// The arguments; default `{}`.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// When set, sent verbatim as the arguments string (to inject invalid
    /// JSON). For Ollama, whose arguments are an object, a raw string that
    /// is valid JSON is sent as that JSON, an invalid one as a JSON string.
    #[serde(default)]
    pub arguments_raw: Option<String>,
}

impl MockToolCall {
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: None,
            name: name.into(),
            arguments,
            arguments_raw: None,
        }
    }

    /// The arguments as the JSON text OpenAI and Anthropic carry.
    pub fn arguments_text(&self) -> String {
        match &self.arguments_raw {
            Some(raw) => raw.clone(),
            None => self.arguments.to_string(),
        }
    }

    /// The arguments as a JSON value (Ollama, Anthropic's non-streamed
    /// `input`): the raw string parsed when it is JSON, else that string.
    pub fn arguments_value(&self) -> Value {
        match &self.arguments_raw {
            Some(raw) => serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone())),
            None => self.arguments.clone(),
        }
    }
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Token counts reported in the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MockUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Default for MockUsage {
    /// 10 input tokens, 5 output tokens.
    fn default() -> Self {
        Self {
            input_tokens: 10,
            output_tokens: 5,
        }
    }
}

/// A failure to inject instead of (or into) the answer.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", from = "FaultSpec")]
pub enum Fault {
    /// Answer with this HTTP status, an optional `Retry-After` header, and
    /// `body` verbatim or else an error JSON in the format's style.
    Status {
        status: u16,
        #[serde(default)]
        retry_after: Option<String>,
        #[serde(default)]
        body: Option<String>,
    },
    /// Send the headers and `after_chunks` content chunks (half of a
    /// non-streamed body), then drop the connection mid-body.
    Disconnect {
        #[serde(default)]
        after_chunks: usize,
    },
    /// Send `after_chunks` content chunks (half of a non-streamed body),
    /// then end the body cleanly without the format's terminal marker.
    Truncate {
        #[serde(default)]
        after_chunks: usize,
    },
    /// The body (or the first stream chunk's data) is not valid JSON.
    MalformedJson,
    /// Stream an event the format does not define (non-streamed: a JSON
    /// body of unknown shape).
    UnknownEvent,
    /// Accept the request and never answer.
    Hang,
}

/// How a [`Fault`] is read: the same as the enum, but serde ignores unknown
/// fields next to the tag of a unit variant, so those variants are empty
/// structs here to make `{"kind": "hang", "after": 1}` an error.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum FaultSpec {
    Status {
        status: u16,
        #[serde(default)]
        retry_after: Option<String>,
        #[serde(default)]
        body: Option<String>,
    },
    Disconnect {
        #[serde(default)]
        after_chunks: usize,
    },
    Truncate {
        #[serde(default)]
        after_chunks: usize,
    },
    MalformedJson {},
    UnknownEvent {},
    Hang {},
}

impl From<FaultSpec> for Fault {
    fn from(spec: FaultSpec) -> Self {
        match spec {
            FaultSpec::Status {
                status,
                retry_after,
                body,
            } => Fault::Status {
                status,
                retry_after,
                body,
            },
            FaultSpec::Disconnect { after_chunks } => Fault::Disconnect { after_chunks },
            FaultSpec::Truncate { after_chunks } => Fault::Truncate { after_chunks },
            FaultSpec::MalformedJson {} => Fault::MalformedJson,
            FaultSpec::UnknownEvent {} => Fault::UnknownEvent,
            FaultSpec::Hang {} => Fault::Hang,
        }
    }
}

/// Splits text into stream pieces at word boundaries, keeping all
/// whitespace: each piece is a run of whitespace followed by a run of
/// non-whitespace (trailing whitespace is a piece of its own). The pieces
/// concatenate to `text`; an empty text has no pieces.
pub fn split_words(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for c in text.chars() {
        if c.is_whitespace() && in_word {
            pieces.push(std::mem::take(&mut current));
            in_word = false;
        } else if !c.is_whitespace() {
            in_word = true;
        }
        current.push(c);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Splits a tool call's argument text into (up to) three pieces at char
/// boundaries, as providers stream them. Empty text has no pieces.
pub fn split_arguments(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let parts = chars.len().min(3);
    let size = chars.len().div_ceil(parts);
    chars
        .chunks(size)
        .map(|c| c.iter().collect::<String>())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_whitespace() {
        assert_eq!(
            split_words("Hello, world!  How\nare"),
            ["Hello,", " world!", "  How", "\nare"]
        );
        assert_eq!(split_words(" lead trail "), [" lead", " trail", " "]);
        assert!(split_words("").is_empty());
    }

    #[test]
    fn arguments_split_in_pieces() {
        let args = r#"{"path":"src/main.rs"}"#;
        let pieces = split_arguments(args);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), args);
        assert_eq!(split_arguments("{}"), ["{", "}"]);
        assert!(split_arguments("").is_empty());
    }

    #[test]
    fn unknown_field_is_named() {
        let err = Script::from_json(r#"{"responses":[{"txt":"hi"}]}"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("txt") && err.contains("responses[0]"), "{err}");
    }

    #[test]
    fn fault_fields_are_checked() {
        let err = |text: &str| {
            Script::from_json(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let e = err(r#"{"responses":[{"fault":{"kind":"hang","after":1}}]}"#);
        assert!(e.contains("after"), "{e}");
        let e = err(r#"{"responses":[{"fault":{"kind":"truncate","after_chunk":1}}]}"#);
        assert!(e.contains("after_chunk"), "{e}");
        let e = err(r#"{"responses":[{"tool_calls":[{"name":"x","args":{}}]}]}"#);
        assert!(e.contains("args") && e.contains("tool_calls[0]"), "{e}");
        let e = err(r#"{"responses":[]} trailing"#);
        assert!(e.contains("trailing"), "{e}");
        let ok = Script::from_json(r#"{"responses":[{"fault":{"kind":"hang"}}]}"#);
        assert!(matches!(
            ok.ok().and_then(|s| s.responses[0].fault.clone()),
            Some(Fault::Hang)
        ));
        let back = serde_json::to_value(Fault::MalformedJson).ok();
        assert_eq!(back, Some(serde_json::json!({"kind": "malformed_json"})));
    }
}
