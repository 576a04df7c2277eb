//! The model's tools: narrow schemas, observations shaped for a model
//! (delimited data, head+tail truncation, "no output" said out loud).

use std::path::{Path, PathBuf};

use serde_json::json;

use super::explain::StopCause;
use super::Task;
use crate::agent::edit::FileOp;
use crate::agent::output;
use crate::agent::redact::is_secret_path;
use crate::agent::repo_map::{repo_map, Focus};
use crate::agent::search::{search_with_options, SearchArgs, SearchOptions};
use crate::agent::types::EventKind;
use crate::model::{Message, ToolCall};

/// Lines `read_file` shows when no range is asked for.
const READ_WINDOW: usize = 200;
/// Observations longer than this are cut (head and tail kept).
const MAX_OBSERVATION_BYTES: usize = 10 * 1024;
/// The largest file `read_file` reads (a window of it is shown).
const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;
const MAX_OBSERVATION_LINES: usize = 256;
const REPO_MAP_TOKENS: usize = 1500;
/// Most checker diagnostics one `diagnostics` call returns.
const MAX_DIAGNOSTICS: usize = 60;

mod commands;
mod schema;

use commands::file_uri;
pub use schema::{compact_definitions, definitions};
use schema::{parse, EditParams, NameParams, ReadParams, RepoMapParams, SearchParams, WriteParams};

/// `1│ text` lines from `start` to `end` (1-based, inclusive).
pub fn numbered(lines: &[&str], start: usize, end: usize) -> String {
    let width = end.max(1).to_string().len();
    let mut out = String::new();
    for (i, line) in lines
        .iter()
        .enumerate()
        .take(end)
        .skip(start.saturating_sub(1))
    {
        out.push_str(&format!("{:>width$}│ {line}\n", i + 1));
    }
    out
}

impl Task {
    /// Runs one turn's tool calls. File edits of the turn are validated
    /// together and written all-or-nothing (at the position of the first
    /// one); the other tools run in order.
    pub(super) async fn run_tools(
        &mut self,
        calls: &[ToolCall],
    ) -> Result<Vec<Message>, StopCause> {
        let mut results: Vec<Option<String>> = vec![None; calls.len()];
        let mut budget_left = self
            .spec
            .budget
            .max_tool_calls
            .saturating_sub(self.tool_calls) as usize;
        let mut file_ops: Vec<(usize, FileOp)> = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            if budget_left == 0 {
                results[i] = Some("Not run: the task's tool-call budget is spent.".to_owned());
                continue;
            }
            budget_left -= 1;
            self.tool_calls += 1;
            self.event(
                EventKind::ToolCall,
                format!(
                    "{} {}",
                    call.name,
                    crate::model::shorten_for_display(&call.arguments.to_string(), 200)
                ),
                json!({ "id": call.id, "name": call.name, "arguments": call.arguments }),
            );
            match call.name.as_str() {
                "edit" | "write_file" => match self.file_op(call) {
                    Ok(op) => file_ops.push((i, op)),
                    Err(err) => results[i] = Some(err),
                },
                _ => {
                    if self.cancel.is_cancelled() {
                        return Err(StopCause::Cancelled);
                    }
                    results[i] = Some(self.run_tool(call).await?);
                }
            }
        }
        if !file_ops.is_empty() {
            let ops: Vec<FileOp> = file_ops.iter().map(|(_, op)| op.clone()).collect();
            // Only the step's files: a huge file a command wrote is not
            // read again for every edit.
            let before = self.files.capture_paths(ops.iter().map(FileOp::path));
            let reports = self.files.apply_step(&ops).await;
            for report in reports {
                let Some((call_index, _)) = file_ops.get(report.index) else {
                    continue;
                };
                results[*call_index] = Some(match report.result {
                    Ok(done) => done,
                    Err(why) => format!("Not applied: {why}"),
                });
            }
            self.report_edits(&before);
        }
        let mut messages = Vec::with_capacity(calls.len());
        for (call, result) in calls.iter().zip(results) {
            let text = result.unwrap_or_else(|| "Not run.".to_owned());
            let shaped = output::head_tail(&text, MAX_OBSERVATION_BYTES, MAX_OBSERVATION_LINES);
            self.event(
                EventKind::ToolResult,
                crate::model::shorten_for_display(&shaped, 400),
                json!({ "id": call.id, "name": call.name }),
            );
            messages.push(Message::tool_result(
                call.id.clone(),
                self.boundary.data("tool_output", &call.name, &shaped),
            ));
        }
        Ok(messages)
    }

    /// An `edit` event per file the step changed, with its diff (`before`
    /// holds every file of the step).
    fn report_edits(&mut self, before: &super::files::TreeBytes) {
        for (path, old) in before {
            let new = self.files.bytes(path);
            if *old == new {
                continue;
            }
            self.dirty = true;
            self.edits_in_attempt += 1;
            let rel = self.files.paths.relative(path);
            let diff = super::diff::unified(&rel, old.as_deref(), new.as_deref());
            if let Some((number, _)) = self.candidate.filter(|_| self.files.is_staging()) {
                // Held in memory: nothing in the editor or on disk changed.
                self.event(
                    EventKind::Status,
                    format!("Candidate {number} changes {rel} (not applied yet)"),
                    json!({ "candidate": number, "path": rel, "diff": diff }),
                );
                continue;
            }
            self.event(
                EventKind::Edit,
                format!("Edited {rel}"),
                json!({ "path": rel, "uri": file_uri(path), "diff": diff }),
            );
        }
    }

    fn file_op(&self, call: &ToolCall) -> Result<FileOp, String> {
        match call.name.as_str() {
            "edit" => {
                let p: EditParams = parse(call)?;
                let path = self.writable(&p.path)?;
                Ok(FileOp::Edit {
                    path,
                    search: p.search,
                    replace: p.replace,
                })
            }
            _ => {
                let p: WriteParams = parse(call)?;
                let path = self.writable(&p.path)?;
                Ok(FileOp::Write {
                    path,
                    content: p.content,
                })
            }
        }
    }

    fn writable(&self, rel: &str) -> Result<PathBuf, String> {
        let path = self
            .files
            .paths
            .resolve_for_write(rel)
            .map_err(|e| e.to_string())?;
        if is_secret_path(&path) {
            return Err(format!(
                "{rel} holds secrets; Fettle does not let the model write it"
            ));
        }
        Ok(path)
    }

    fn readable(&self, rel: &str) -> Result<PathBuf, String> {
        let path = self.files.paths.resolve(rel).map_err(|e| e.to_string())?;
        if is_secret_path(&path) {
            return Err(format!(
                "{rel} holds secrets; its contents are never sent to the model"
            ));
        }
        Ok(path)
    }

    async fn run_tool(&mut self, call: &ToolCall) -> Result<String, StopCause> {
        // Reads see the buffers as the user sees them: let typing whose
        // changes are still on their way arrive first.
        if matches!(call.name.as_str(), "read_file" | "search" | "diagnostics") {
            let path = call.arguments["path"]
                .as_str()
                .and_then(|rel| self.files.paths.resolve(rel).ok());
            let paths: Vec<PathBuf> = path.into_iter().collect();
            self.host.settle(&paths).await;
        }
        if self.files.is_staging()
            && matches!(
                call.name.as_str(),
                "run_tests" | "run_command" | "diagnostics"
            )
        {
            return Ok(format!(
                "`{}` does not run while candidate fixes are drafted: make your edits and end your turn; each candidate is tested in its own copy of the workspace.",
                call.name
            ));
        }
        let result = match call.name.as_str() {
            "search" => self.tool_search(call),
            "repo_map" => self.tool_repo_map(call),
            "find_symbol" => self.tool_find_symbol(call),
            "read_file" => self.tool_read(call),
            "run_tests" => return self.tool_run_tests(call).await,
            "run_command" => return self.tool_run_command(call).await,
            "diagnostics" => return self.tool_diagnostics(call).await,
            other => Err(format!(
                "unknown tool `{other}`; the tools are: search, repo_map, find_symbol, read_file, edit, write_file, run_tests, run_command, diagnostics"
            )),
        };
        Ok(result.unwrap_or_else(|err| format!("Error: {err}")))
    }

    fn tool_search(&self, call: &ToolCall) -> Result<String, String> {
        let p: SearchParams = parse(call)?;
        let path = match &p.path {
            Some(rel) if !rel.is_empty() && rel != "." => Some(self.readable(rel)?),
            _ => None,
        };
        let args = SearchArgs {
            pattern: p.pattern,
            regex: p.regex,
            path,
            max_results: p.max_results.unwrap_or(50).clamp(1, 200),
        };
        // Open buffers are searched as the user sees them, not as saved.
        let host = &self.host;
        let options = SearchOptions {
            allow_hardlinks: self.spec.allow_hardlinks,
        };
        search_with_options(
            self.files.root(),
            &args,
            &|p: &Path| host.buffer(p),
            options,
        )
        .map(|r| r.render())
        .map_err(|e| e.to_string())
    }

    fn tool_repo_map(&self, call: &ToolCall) -> Result<String, String> {
        let p: RepoMapParams = parse(call)?;
        // No focus given: the task's failure (what its tests' output and
        // the goal point at), not a map of nothing in particular.
        if p.focus.is_empty() {
            return Ok(repo_map(
                &self.index,
                self.files.root(),
                &self.failure_focus,
                REPO_MAP_TOKENS,
            ));
        }
        let mut focus = Focus {
            paths: Vec::new(),
            identifiers: Vec::new(),
        };
        for item in p.focus {
            match self.files.paths.resolve(&item) {
                Ok(path) if path.exists() => focus.paths.push(path),
                _ => focus.identifiers.push(item),
            }
        }
        Ok(repo_map(
            &self.index,
            self.files.root(),
            &focus,
            REPO_MAP_TOKENS,
        ))
    }

    fn tool_find_symbol(&self, call: &ToolCall) -> Result<String, String> {
        let p: NameParams = parse(call)?;
        let mut found = self.index.definitions(&p.name);
        let exact = !found.is_empty();
        if !exact {
            found = self.index.search(&p.name, 10);
        }
        if found.is_empty() {
            return Ok(format!(
                "no definition of `{}` in the index; try `search`",
                p.name
            ));
        }
        let mut out = String::new();
        if !exact {
            out.push_str(&format!(
                "no exact definition of `{}`; closest names:\n",
                p.name
            ));
        }
        for sym in found.iter().take(20) {
            let rel = self.files.paths.relative(&sym.path);
            let detail = sym.detail.as_deref().unwrap_or(&sym.name);
            out.push_str(&format!(
                "{rel}:{}: {:?} {}\n",
                sym.selection.0.line + 1,
                sym.kind,
                detail
            ));
        }
        Ok(out)
    }

    fn tool_read(&self, call: &ToolCall) -> Result<String, String> {
        let p: ReadParams = parse(call)?;
        let path = self.readable(&p.path)?;
        if path.is_dir() {
            return Err(format!(
                "{} is a directory; use `search` or `repo_map` to find files",
                p.path
            ));
        }
        // A file a command wrote may be a gigabyte: not read whole for a
        // window of 200 lines (an open buffer is already in memory).
        if let Some(len) = self.files.disk_len(&path) {
            if len > MAX_READ_BYTES && self.host.buffer(&path).is_none() {
                return Err(format!(
                    "{} is {len} bytes; read_file reads files up to {MAX_READ_BYTES} bytes: look into it with run_command (e.g. `head -c 4000 {}`, `grep -n PATTERN {}`)",
                    p.path, p.path, p.path
                ));
            }
        }
        let text = self
            .files
            .read(&path)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{} does not exist", p.path))?;
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len();
        if total == 0 {
            return Ok(format!("{} is empty", p.path));
        }
        let start = p.start_line.unwrap_or(1).clamp(1, total);
        let end = p
            .end_line
            .unwrap_or(start + READ_WINDOW - 1)
            .clamp(start, total)
            .min(start + 2 * READ_WINDOW - 1);
        let mut out = numbered(&lines, start, end);
        if start > 1 || end < total {
            out.push_str(&format!(
                "[lines {start}-{end} of {total}; ask for start_line/end_line to see more]\n"
            ));
        }
        Ok(out)
    }
}
