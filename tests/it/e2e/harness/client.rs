//! What the harness does as the client: typing into a buffer, applying
//! the server's workspace edits, saving, answering its requests.

use super::*;

impl Lsp {
    /// The user types `text` at the start of `line` of the open buffer `uri`.
    pub fn type_text(&mut self, uri: &str, line: u32, text: &str) {
        let (version, buffer) = self.buffers.get(uri).cloned().expect("buffer is open");
        let range = json!({ "start": { "line": line, "character": 0 }, "end": { "line": line, "character": 0 } });
        let new = apply_utf8_edit(&buffer, &range, text);
        self.buffers.insert(uri.to_owned(), (version + 1, new));
        self.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version + 1 },
                    "contentChanges": [ { "range": range, "text": text } ] }),
        );
    }

    /// Applies a `workspace/applyEdit` the way an editor does: every
    /// versioned document edit must match the buffer's version.
    fn apply_workspace_edit(&mut self, params: &Value) -> Value {
        if let Some((uri, line, text)) = self.type_before_next_apply.take() {
            self.type_text(&uri, line, &text);
        }
        let changes = params["edit"]["documentChanges"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for change in &changes {
            let uri = change["textDocument"]["uri"].as_str().unwrap_or("");
            let Some((version, _)) = self.buffers.get(uri) else {
                return json!({ "applied": false, "failureReason": format!("{uri} is not open") });
            };
            if change["textDocument"]["version"] != json!(version) {
                return json!({ "applied": false, "failureReason": format!("{uri} is at version {version}") });
            }
        }
        for change in &changes {
            let uri = change["textDocument"]["uri"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            let (version, mut text) = self.buffers[&uri].clone();
            let edits = change["edits"].as_array().cloned().unwrap_or_default();
            // All ranges refer to the text before the edit: apply the last first.
            let mut ordered = edits;
            ordered.sort_by_key(|e| {
                let at = |k: &str| e["range"]["start"][k].as_u64().unwrap_or(0);
                std::cmp::Reverse((at("line"), at("character")))
            });
            for edit in &ordered {
                text = apply_utf8_edit(
                    &text,
                    &edit["range"],
                    edit["newText"].as_str().unwrap_or(""),
                );
            }
            self.buffers.insert(uri.clone(), (version + 1, text));
            self.notify(
                "textDocument/didChange",
                json!({ "textDocument": { "uri": uri, "version": version + 1 },
                        "contentChanges": ordered.iter().map(|e| json!({ "range": e["range"], "text": e["newText"] })).collect::<Vec<_>>() }),
            );
        }
        json!({ "applied": true })
    }

    /// `fettle/saveDocuments`: writes the listed buffers to disk.
    fn save_buffers(&mut self, params: &Value) -> Value {
        let mut saved = Vec::new();
        let mut failed = Vec::new();
        for uri in params["uris"].as_array().cloned().unwrap_or_default() {
            let uri = uri.as_str().unwrap_or("").to_owned();
            let path = tower_lsp::lsp_types::Url::parse(&uri)
                .ok()
                .and_then(|u| u.to_file_path().ok());
            match (self.save_documents, self.buffers.get(&uri), path) {
                (true, Some((_, text)), Some(path)) => {
                    std::fs::write(path, text).unwrap();
                    saved.push(json!(uri));
                }
                _ => failed.push(json!({ "uri": uri, "message": "this editor cannot save" })),
            }
        }
        json!({ "saved": saved, "failed": failed })
    }

    pub(super) fn answer_server_request(&mut self, method: &str, params: &Value) -> Value {
        match method {
            "workspace/applyEdit" if self.apply_edits => self.apply_workspace_edit(params),
            "window/showMessageRequest" => match self.approvals.pop_front().flatten() {
                Some(title) => json!({ "title": title }),
                None => Value::Null,
            },
            "fettle/saveDocuments" => self.save_buffers(params),
            "workspace/configuration" => {
                let items = params["items"].as_array().map(Vec::len).unwrap_or(0);
                Value::Array(vec![self.configuration.clone(); items])
            }
            _ => Value::Null,
        }
    }
}
