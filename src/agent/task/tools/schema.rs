//! The tools' narrow schemas (full, and compact for a small model) and
//! their arguments as the model sends them.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::model::{ToolCall, ToolDef};

pub fn definitions() -> Vec<ToolDef> {
    fn def(name: &str, description: &str, parameters: Value) -> ToolDef {
        ToolDef {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
        }
    }
    let path = json!({ "type": "string", "description": "relative to the workspace root" });
    vec![
        def("search", "Search the workspace's files (respects .gitignore). Literal text unless regex is true; case-insensitive when the pattern is all lowercase. Returns `path:line: text` lines.", json!({
            "type": "object",
            "properties": {
                "pattern": { "type": "string" },
                "regex": { "type": "boolean" },
                "path": { "type": "string", "description": "a file or directory to search in, relative to the workspace root" },
                "max_results": { "type": "integer", "minimum": 1, "maximum": 200 }
            },
            "required": ["pattern"]
        })),
        def("repo_map", "A ranked outline of the workspace's files and definitions, most relevant to the focus first.", json!({
            "type": "object",
            "properties": { "focus": { "type": "array", "items": { "type": "string" }, "description": "paths or identifiers to center the map on; none: the task's failure" } }
        })),
        def("find_symbol", "Where a function, type, class or other symbol is defined: path, line, kind, signature.", json!({
            "type": "object",
            "properties": { "name": { "type": "string" } },
            "required": ["name"]
        })),
        def("read_file", "Read a file with 1-based line numbers (a window of lines; ask for more with start_line/end_line).", json!({
            "type": "object",
            "properties": {
                "path": path,
                "start_line": { "type": "integer", "minimum": 1 },
                "end_line": { "type": "integer", "minimum": 1 }
            },
            "required": ["path"]
        })),
        def("edit", "Replace the lines `search` with `replace` in one file. `search` must match the file's lines exactly once (copy them from read_file, without line numbers; include context to make it unique). All edits of one turn are applied together or not at all.", json!({
            "type": "object",
            "properties": { "path": path, "search": { "type": "string" }, "replace": { "type": "string" } },
            "required": ["path", "search", "replace"]
        })),
        def("write_file", "Create a file, or replace a whole file.", json!({
            "type": "object",
            "properties": { "path": path, "content": { "type": "string" } },
            "required": ["path", "content"]
        })),
        def("run_tests", "Run the workspace's test command now. Returns the exit code, pass/fail counts and the head and tail of the output.", json!({
            "type": "object",
            "properties": { "filter": { "type": "string", "description": "only tests whose names match" } }
        })),
        def("run_command", "Run a shell command in the workspace root (subject to the user's command policy).", json!({
            "type": "object",
            "properties": { "command": { "type": "string" } },
            "required": ["command"]
        })),
        def("diagnostics", "Current errors and warnings: syntax errors of the files changed so far (or of `path`), and what the project's checkers (compiler, type checker, linter) report, grouped by file with the code line.", json!({
            "type": "object",
            "properties": { "path": path }
        })),
    ]
}

/// The tools offered to a small local model: each schema it reads costs
/// prefill time on every turn, and fewer choices are fewer wrong ones. The
/// others still work when called.
pub fn compact_definitions() -> Vec<ToolDef> {
    const OFFERED: &[&str] = &["search", "read_file", "edit"];
    let mut tools: Vec<ToolDef> = definitions()
        .into_iter()
        .filter(|t| OFFERED.contains(&t.name.as_str()))
        .collect();
    for tool in &mut tools {
        tool.description = match tool.name.as_str() {
            "search" => "Find text in the workspace's files; returns `path:line: text` lines.",
            "read_file" => "Read a file, with line numbers.",
            _ => "Replace the exact lines `search` (copied from the file, without line numbers) with `replace`.",
        }
        .to_owned();
        if let Some(props) = tool.parameters["properties"].as_object_mut() {
            props.retain(|k, _| {
                matches!(
                    k.as_str(),
                    "pattern" | "path" | "search" | "replace" | "start_line" | "end_line"
                )
            });
            for value in props.values_mut() {
                if let Some(v) = value.as_object_mut() {
                    v.remove("description");
                }
            }
        }
    }
    tools
}

#[derive(Deserialize)]
pub(super) struct SearchParams {
    pub(super) pattern: String,
    #[serde(default)]
    pub(super) regex: bool,
    pub(super) path: Option<String>,
    pub(super) max_results: Option<usize>,
}
#[derive(Deserialize)]
pub(super) struct RepoMapParams {
    #[serde(default)]
    pub(super) focus: Vec<String>,
}
#[derive(Deserialize)]
pub(super) struct NameParams {
    pub(super) name: String,
}
#[derive(Deserialize)]
pub(super) struct ReadParams {
    pub(super) path: String,
    pub(super) start_line: Option<usize>,
    pub(super) end_line: Option<usize>,
}
#[derive(Deserialize)]
pub(super) struct EditParams {
    pub(super) path: String,
    pub(super) search: String,
    pub(super) replace: String,
}
#[derive(Deserialize)]
pub(super) struct WriteParams {
    pub(super) path: String,
    pub(super) content: String,
}
#[derive(Deserialize)]
pub(super) struct TestParams {
    pub(super) filter: Option<String>,
}
#[derive(Deserialize)]
pub(super) struct CommandParams {
    pub(super) command: String,
}
#[derive(Deserialize)]
pub(super) struct PathParams {
    pub(super) path: Option<String>,
}

pub(super) fn parse<T: for<'de> Deserialize<'de>>(call: &ToolCall) -> Result<T, String> {
    let args = if call.arguments.is_null() {
        json!({})
    } else {
        call.arguments.clone()
    };
    serde_json::from_value(args)
        .map_err(|err| format!("invalid arguments for `{}`: {err}", call.name))
}
