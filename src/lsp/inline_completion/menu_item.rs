//! `textDocument/completion` for clients without inline completion
//! (`completion.as_completion_item`): the inline suggestion as a menu item.
//!
//! Clients apply a menu item in their own ways, and Neovim 0.11's built-in
//! completion is the strictest: it inserts `textEdit.newText` whole only
//! for a snippet item; of a plain-text item with an edit it keeps the first
//! word (`0 <= i.quantity …` became `0`). So when the client supports
//! snippets the item is a snippet whose text is escaped (no placeholder),
//! which snippet clients insert whole, several lines included. Its edit
//! starts where the word being typed starts (clients filter the menu by
//! that word, and Neovim replaces it) and ends at the cursor; its later
//! lines are indented relative to the cursor line (`insertTextMode`
//! adjustIndentation), which is how snippet clients, Neovim included,
//! indent them. Without snippet support the item is plain text.
use std::sync::Arc;

use ropey::Rope;
use tower_lsp::jsonrpc::Result;
use tower_lsp::lsp_types::{
    CompletionItem, CompletionItemKind, CompletionParams, CompletionResponse, CompletionTextEdit,
    Documentation, InsertTextFormat, InsertTextMode, Range, TextEdit,
};

use super::{inline_completion, InlineCompletionItem, InlineCompletionParams};
use crate::lsp::state::State;
use crate::position::{self, PositionEncoding};

pub async fn as_completion_items(
    state: &Arc<State>,
    params: CompletionParams,
) -> Result<Option<CompletionResponse>> {
    if !state.config().completion.as_completion_item {
        return Ok(None);
    }
    let position = params.text_document_position;
    // The text the suggestion is computed for (a result for a text that
    // changed meanwhile is discarded by `inline_completion`).
    let snapshot = state.snapshot(&position.text_document.uri);
    let inline = InlineCompletionParams {
        text_document: position.text_document,
        position: position.position,
        context: None,
    };
    let Some(list) = inline_completion(state, inline).await? else {
        return Ok(None);
    };
    let Some(snapshot) = snapshot else {
        return Ok(None);
    };
    let snippets = snippet_support(state);
    let encoding = state.encoding();
    let items = list
        .items
        .into_iter()
        .map(|item| menu_item(&snapshot.rope, encoding, snippets, item))
        .collect();
    Ok(Some(CompletionResponse::Array(items)))
}

fn snippet_support(state: &State) -> bool {
    state
        .capabilities()
        .and_then(|c| c.text_document.as_ref())
        .and_then(|t| t.completion.as_ref())
        .and_then(|c| c.completion_item.as_ref())
        .and_then(|i| i.snippet_support)
        .unwrap_or(false)
}

/// The menu item for one inline item, whose range is on one line and starts
/// at the cursor (no selected menu item in a `completion` request).
fn menu_item(
    rope: &Rope,
    encoding: PositionEncoding,
    snippets: bool,
    item: InlineCompletionItem,
) -> CompletionItem {
    let cursor = position::offset_of(rope, item.range.start, encoding);
    let mut end = position::offset_of(rope, item.range.end, encoding).max(cursor);
    let line_start = rope.line_to_byte(rope.byte_to_line(cursor));
    let line = rope.line(rope.byte_to_line(cursor)).to_string();
    let line = line.trim_end_matches(['\n', '\r']);
    let (at, mut until) = (cursor - line_start, (end - line_start).min(line.len()));
    // The word being typed: the edit replaces it with itself + suggestion.
    let word_start = line[..at]
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphanumeric() || *c == '_')
        .last()
        .map_or(at, |(i, _)| i);
    let mut suggestion = item.insert_text.as_str();
    // Closers after the cursor that the suggestion re-types: leave them in
    // place and drop them from the text, so that the edit ends at the
    // cursor (Neovim ignores where an edit ends).
    if until > at {
        if let Some(kept) = suggestion.strip_suffix(&line[at..until]) {
            suggestion = kept;
            until = at;
            end = cursor;
        }
    }
    let text = format!("{}{suggestion}", &line[word_start..at]);
    let rest = format!("{}{}", &line[..word_start], &line[until..]);
    let indent = &rest[..rest.len() - rest.trim_start_matches([' ', '\t']).len()];
    let (text, new_text, format, mode) = if snippets {
        let text = relative_to(indent, &text);
        let escaped = escape_snippet(&text);
        (
            text,
            escaped,
            InsertTextFormat::SNIPPET,
            InsertTextMode::ADJUST_INDENTATION,
        )
    } else {
        (
            text.clone(),
            text,
            InsertTextFormat::PLAIN_TEXT,
            InsertTextMode::AS_IS,
        )
    };
    // The whole first line: Neovim shows it while the item is selected (and
    // inserts only it when nothing runs on accept), and filters by it.
    let first_line = text.split('\n').next().unwrap_or("").trim_end();
    let label = if first_line.trim().is_empty() {
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
    } else {
        first_line
    }
    .to_string();
    CompletionItem {
        filter_text: Some(label.clone()),
        label,
        kind: Some(CompletionItemKind::TEXT),
        detail: Some("fettle".to_string()),
        // The menu shows one line: the popup shows all of them.
        documentation: text
            .contains('\n')
            .then(|| Documentation::String(text.clone())),
        sort_text: Some("0".to_string()),
        insert_text_format: Some(format),
        insert_text_mode: Some(mode),
        text_edit: Some(CompletionTextEdit::Edit(TextEdit {
            range: Range {
                start: position::position_of(rope, line_start + word_start, encoding),
                end: position::position_of(rope, end, encoding),
            },
            new_text,
        })),
        command: Some(item.command),
        ..CompletionItem::default()
    }
}

/// `text`'s later lines relative to `indent` (the cursor line's). A line
/// indented less cannot be expressed that way: the text ends before it.
fn relative_to(indent: &str, text: &str) -> String {
    let mut lines = text.split('\n');
    let mut out = lines.next().unwrap_or("").to_string();
    for line in lines {
        if let Some(relative) = line.strip_prefix(indent) {
            out.push('\n');
            out.push_str(relative);
        } else if line.trim().is_empty() {
            out.push('\n');
        } else {
            break;
        }
    }
    let kept = out.trim_end_matches('\n').len();
    out.truncate(kept);
    out
}

/// Snippet syntax for literal text: `$`, `}` and `\` escaped.
fn escape_snippet(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '$' | '}' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_lines_become_relative_to_the_cursor_line() {
        assert_eq!(
            relative_to("    ", "if x:\n        y()\n\n    z()"),
            "if x:\n    y()\n\nz()"
        );
        // A line left of the cursor line's indentation ends the text.
        assert_eq!(relative_to("    ", "a\n    b\nc\n    d"), "a\nb");
        assert_eq!(relative_to("", "a\n  b"), "a\n  b");
    }

    #[test]
    fn snippet_text_is_escaped() {
        assert_eq!(escape_snippet(r"${a} \n $0"), r"\${a\} \\n \$0");
    }
}
