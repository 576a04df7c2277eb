//! The LSP 3.18 inline completion types (lsp-types 0.94 predates them).
use serde::{Deserialize, Serialize};
use tower_lsp::lsp_types::{Command, Position, Range, TextDocumentIdentifier};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InlineCompletionParams {
    pub text_document: TextDocumentIdentifier,
    pub position: Position,
    #[serde(default)]
    pub context: Option<InlineCompletionContext>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InlineCompletionContext {
    /// 1 = Invoked, 2 = Automatic.
    #[serde(default = "automatic")]
    pub trigger_kind: u8,
    #[serde(default)]
    pub selected_completion_info: Option<SelectedCompletionInfo>,
}

fn automatic() -> u8 {
    2
}

#[derive(Debug, Deserialize)]
pub struct SelectedCompletionInfo {
    pub range: Range,
    pub text: String,
}

#[derive(Debug, Serialize)]
pub struct InlineCompletionList {
    pub items: Vec<InlineCompletionItem>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InlineCompletionItem {
    pub insert_text: String,
    pub range: Range,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_text: Option<String>,
    pub command: Command,
}
