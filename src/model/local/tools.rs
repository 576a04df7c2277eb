//! Tool calling for the embedded model, which has no native tool API: the
//! tools are described in the system prompt and the model answers with
//! `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (the
//! convention Hermes/Qwen-style instruct models are trained on), which are
//! parsed out of the streamed text.
use serde_json::Value;

use crate::model::error::shorten;
use crate::model::{ModelError, ToolCall, ToolDef};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// The system-prompt section that lists `tools`, worded as Qwen2.5's own
/// chat template words it (the Hermes convention its tool calls were
/// trained on: signatures in `<tools>`, calls in `<tool_call>`).
pub(crate) fn describe(tools: &[ToolDef]) -> String {
    let mut out = String::from(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    );
    for t in tools {
        let signature = serde_json::json!({
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        });
        out.push('\n');
        out.push_str(&signature.to_string());
    }
    out.push_str("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>");
    out
}

/// How an assistant turn with tool calls is written back into the prompt.
pub(crate) fn render_calls(calls: &[ToolCall]) -> String {
    calls
        .iter()
        .map(|c| {
            let call = serde_json::json!({"name": c.name, "arguments": c.arguments});
            format!("{OPEN}\n{call}\n{CLOSE}")
        })
        .collect()
}

/// What the parser found in a piece of streamed text.
#[derive(Debug, PartialEq)]
pub(crate) enum Parsed {
    Text(String),
    Call(ToolCall),
}

/// Splits streamed text into plain text and tool calls. Text that might be
/// the start of `<tool_call>` is held back until it is clear.
pub(crate) struct ToolCallParser {
    model: String,
    buf: String,
    in_call: bool,
    calls: usize,
}

impl ToolCallParser {
    pub fn new(model: &str) -> Self {
        Self {
            model: model.to_string(),
            buf: String::new(),
            in_call: false,
            calls: 0,
        }
    }

    pub fn push(&mut self, text: &str) -> Result<Vec<Parsed>, ModelError> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        loop {
            if self.in_call {
                let Some(end) = self.buf.find(CLOSE) else {
                    break;
                };
                let body = self.buf[..end].to_string();
                self.buf.drain(..end + CLOSE.len());
                self.in_call = false;
                out.push(Parsed::Call(self.parse(&body)?));
            } else if let Some(start) = self.buf.find(OPEN) {
                if start > 0 {
                    out.push(Parsed::Text(self.buf[..start].to_string()));
                }
                self.buf.drain(..start + OPEN.len());
                self.in_call = true;
            } else {
                let keep = partial_open_len(&self.buf);
                let emit = self.buf.len() - keep;
                if emit > 0 {
                    out.push(Parsed::Text(self.buf[..emit].to_string()));
                    self.buf.drain(..emit);
                }
                break;
            }
        }
        Ok(out)
    }

    /// The end of the stream: an unfinished call is an error, held-back
    /// text is released.
    pub fn finish(&mut self) -> Result<Option<Parsed>, ModelError> {
        let rest = std::mem::take(&mut self.buf);
        if self.in_call {
            // A model that stops right after the JSON often omits the closer.
            return self.parse(&rest).map(|c| Some(Parsed::Call(c)));
        }
        Ok((!rest.is_empty()).then_some(Parsed::Text(rest)))
    }

    fn parse(&mut self, body: &str) -> Result<ToolCall, ModelError> {
        let bad = |reason: String| ModelError::BadToolArguments {
            model: self.model.clone(),
            tool: "(unknown)".to_string(),
            reason,
            arguments: shorten(body.trim(), 200),
        };
        let value: Value = serde_json::from_str(body.trim()).map_err(|e| bad(e.to_string()))?;
        let name = value
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no \"name\"".to_string()))?
            .to_string();
        let arguments = match value.get("arguments") {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(Value::String(s)) => {
                serde_json::from_str(s).map_err(|e| ModelError::BadToolArguments {
                    model: self.model.clone(),
                    tool: name.clone(),
                    reason: e.to_string(),
                    arguments: shorten(s, 200),
                })?
            }
            Some(v) => v.clone(),
        };
        self.calls += 1;
        Ok(ToolCall {
            id: format!("call_{}", self.calls),
            name,
            arguments,
        })
    }
}

/// Length of the longest suffix of `buf` that is a proper prefix of `<tool_call>`.
fn partial_open_len(buf: &str) -> usize {
    (1..OPEN.len().min(buf.len() + 1))
        .rev()
        .find(|&n| buf.is_char_boundary(buf.len() - n) && OPEN.starts_with(&buf[buf.len() - n..]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all(pieces: &[&str]) -> Result<Vec<Parsed>, ModelError> {
        let mut p = ToolCallParser::new("local");
        let mut out = Vec::new();
        for piece in pieces {
            out.extend(p.push(piece)?);
        }
        out.extend(p.finish()?);
        Ok(out)
    }

    #[test]
    fn text_and_calls_split_across_pieces() {
        let got = all(&[
            "Let me look. <tool",
            "_call>{\"name\": \"read_file\", ",
            "\"arguments\": {\"path\": \"a.rs\"}}</tool_call>",
        ])
        .unwrap();
        assert_eq!(
            got,
            vec![
                Parsed::Text("Let me look. ".into()),
                Parsed::Call(ToolCall {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "a.rs"})
                }),
            ]
        );
    }

    #[test]
    fn a_lone_angle_bracket_is_text() {
        assert_eq!(
            all(&["a <", "b"]).unwrap(),
            vec![Parsed::Text("a ".into()), Parsed::Text("<b".into())]
        );
    }

    #[test]
    fn invalid_arguments_are_an_error() {
        let err =
            all(&["<tool_call>{\"name\": \"x\", \"arguments\": {oops}}</tool_call>"]).unwrap_err();
        assert!(matches!(err, ModelError::BadToolArguments { .. }), "{err}");
    }

    #[test]
    fn unclosed_call_at_the_end_is_parsed() {
        let got = all(&["<tool_call>{\"name\": \"run_tests\"}"]).unwrap();
        assert_eq!(
            got,
            vec![Parsed::Call(ToolCall {
                id: "call_1".into(),
                name: "run_tests".into(),
                arguments: json!({})
            })]
        );
    }
}
