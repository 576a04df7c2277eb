//! `textDocument/documentSymbol` (from the buffer's tree, or line by line
//! for a document too big to parse) and
//! `workspace/symbol` (from the workspace index).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ropey::Rope;
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::{
    DocumentSymbol, DocumentSymbolParams, DocumentSymbolResponse, Location, Range,
    SymbolInformation, SymbolKind as LspSymbolKind, Url, WorkspaceSymbolParams,
};

use super::state::{Snapshot, State};
use crate::index::IndexedSymbol;
use crate::position::{self, PositionEncoding};
use crate::syntax::{self, Language, SymbolKind, SymbolNode, TagBudget, TagsCut};

/// How many matches `workspace/symbol` returns; clients show a short list anyway.
const WORKSPACE_SYMBOL_LIMIT: usize = 128;

pub async fn document_symbol(
    state: &Arc<State>,
    params: DocumentSymbolParams,
) -> Result<Option<DocumentSymbolResponse>> {
    let uri = params.text_document.uri;
    let snapshot = match state.parsed_snapshot(&uri).await {
        Some(snapshot) => snapshot,
        None => read_from_disk(&uri, state.index().settings().max_file_bytes).await?,
    };
    let encoding = state.encoding();
    let hierarchical = state
        .capabilities()
        .and_then(|caps| caps.text_document.as_ref())
        .and_then(|td| td.document_symbol.as_ref())
        .and_then(|ds| ds.hierarchical_document_symbol_support)
        .unwrap_or(false);
    let response = tokio::task::spawn_blocking(move || {
        let nodes = symbol_nodes(&snapshot);
        if hierarchical {
            DocumentSymbolResponse::Nested(
                nodes
                    .iter()
                    .map(|n| to_document_symbol(n, &snapshot.rope, encoding))
                    .collect(),
            )
        } else {
            let mut flat = Vec::new();
            flatten(&nodes, None, &snapshot, encoding, &mut flat);
            DocumentSymbolResponse::Flat(flat)
        }
    })
    .await
    .map_err(|err| internal(format!("documentSymbol failed: {err}")))?;
    Ok(Some(response))
}

pub async fn workspace_symbol(
    state: &Arc<State>,
    params: WorkspaceSymbolParams,
) -> Result<Option<Vec<SymbolInformation>>> {
    let index = state.index();
    let encoding = state.encoding();
    let query = params.query;
    let symbols = tokio::task::spawn_blocking(move || index.search(&query, WORKSPACE_SYMBOL_LIMIT))
        .await
        .map_err(|err| internal(format!("workspace/symbol failed: {err}")))?;
    Ok(Some(
        symbols
            .iter()
            .filter_map(|symbol| to_symbol_information(symbol, encoding))
            .collect(),
    ))
}

/// A closed file can still be asked for its symbols: read it from disk.
///
/// Regular files only, at most `max_bytes` (the index's `max_file_bytes`:
/// what the workspace index would read too). A URI may name `/dev/zero`, a
/// FIFO or `/dev/stdin`: those are refused at once, never read.
async fn read_from_disk(uri: &Url, max_bytes: u64) -> Result<Snapshot> {
    let path = uri.to_file_path().map_err(|()| {
        Error::invalid_params(format!(
            "unknown document {uri}: it is not open and is not a file URI"
        ))
    })?;
    let uri = uri.clone();
    // Reading and parsing up to `max_bytes` is blocking work.
    tokio::task::spawn_blocking(move || {
        let text = crate::fsread::read_regular_to_string(&path, max_bytes).map_err(|err| {
            let hint = match err {
                crate::fsread::ReadError::TooLarge { .. } => {
                    " (open it in the editor, or raise index.max_file_bytes)"
                }
                _ => "",
            };
            Error::invalid_params(format!(
                "unknown document {uri}: it is not open and could not be read: {err}{hint}"
            ))
        })?;
        let language = Language::from_path(&path);
        let tree = language.and_then(|lang| syntax::parse_str(lang, &text, None));
        Ok(Snapshot {
            uri,
            version: 0,
            language,
            rope: Rope::from_str(&text),
            tree,
            revision: 0,
            needs_reparse: false,
        })
    })
    .await
    .map_err(|err| internal(format!("documentSymbol failed: {err}")))?
}

/// Most symbols in one `documentSymbol` response (nested ones included).
/// An outline of more is unreadable, and each costs ~250 bytes of JSON: this
/// keeps the worst response to a few MB.
const MAX_DOCUMENT_SYMBOLS: usize = 10_000;
/// Above this size only top-level items are outlined: nesting is not worth
/// matching inside every function body of a huge (usually generated) file.
const TOP_LEVEL_ONLY_ABOVE_BYTES: usize = 2 << 20;
/// The tag query for one request stops after this long.
const SYMBOLS_TIME_BUDGET: Duration = Duration::from_secs(2);
/// Longest symbol name sent, in chars (a name is one token, but a bad one
/// can be a megabyte).
const MAX_NAME_CHARS: usize = 200;

/// The document's outline, bounded in count, time and size (see the
/// constants above). Anything cut is logged with the reason.
fn symbol_nodes(snapshot: &Snapshot) -> Vec<SymbolNode> {
    let Some(language) = snapshot.language else {
        return Vec::new();
    };
    let len = snapshot.rope.len_bytes();
    if syntax::too_big_to_parse(len) {
        return line_outline(snapshot);
    }
    let Some(tree) = &snapshot.tree else {
        return Vec::new();
    };
    let text = snapshot.rope.to_string();
    let top_level_only = text.len() > TOP_LEVEL_ONLY_ABOVE_BYTES;
    let started = Instant::now();
    let budget = TagBudget {
        // Duplicates (one name matched by several patterns) are merged
        // after collection: leave room for them.
        max_definitions: MAX_DOCUMENT_SYMBOLS * 2,
        deadline: Some(started + SYMBOLS_TIME_BUDGET),
        top_level_only,
    };
    let (tags, cut) = syntax::tags_within(language, tree, &text, &budget);
    let mut nodes = syntax::symbol_tree(tags.definitions);
    let total: usize = nodes.iter().map(count_nodes).sum();
    let flattened = top_level_only || total > MAX_DOCUMENT_SYMBOLS;
    if flattened {
        for node in &mut nodes {
            node.children = Vec::new();
        }
    }
    let top_level = nodes.len();
    nodes.truncate(MAX_DOCUMENT_SYMBOLS);
    if cut.is_some() || flattened {
        let why = match cut {
            Some(TagsCut::Count) => format!("stopped after {} definitions", budget.max_definitions),
            Some(TagsCut::Time) => format!(
                "stopped after {} ms (the time budget)",
                SYMBOLS_TIME_BUDGET.as_millis()
            ),
            None => "complete".to_owned(),
        };
        tracing::warn!(
            "documentSymbol for {} ({} bytes): outline limited — {why}; {} of {top_level} \
             top-level symbols sent{} (limit {MAX_DOCUMENT_SYMBOLS} symbols, top level only \
             above {TOP_LEVEL_ONLY_ABOVE_BYTES} bytes), {} ms",
            snapshot.uri,
            text.len(),
            nodes.len(),
            if flattened {
                ", nested symbols left out"
            } else {
                ""
            },
            started.elapsed().as_millis(),
        );
    }
    nodes
}

/// The outline of a document too big to parse: definitions found line by
/// line (flat, at most [`MAX_DOCUMENT_SYMBOLS`]).
fn line_outline(snapshot: &Snapshot) -> Vec<SymbolNode> {
    let started = Instant::now();
    let nodes: Vec<SymbolNode> = syntax::line_outline(&snapshot.rope, MAX_DOCUMENT_SYMBOLS)
        .into_iter()
        .map(|definition| SymbolNode {
            definition,
            children: Vec::new(),
        })
        .collect();
    tracing::debug!(
        "documentSymbol for {} ({} bytes, over the parse limit of {} bytes): line-based \
         outline, {} symbols, {} ms",
        snapshot.uri,
        snapshot.rope.len_bytes(),
        syntax::max_parse_bytes(),
        nodes.len(),
        started.elapsed().as_millis()
    );
    nodes
}

fn count_nodes(node: &SymbolNode) -> usize {
    1 + node.children.iter().map(count_nodes).sum::<usize>()
}

/// The name as sent: cut to [`MAX_NAME_CHARS`], with `…` when cut.
fn display_name(name: &str) -> String {
    match name.char_indices().nth(MAX_NAME_CHARS) {
        Some((idx, _)) => format!("{}…", &name[..idx]),
        None => name.to_owned(),
    }
}

#[allow(deprecated)] // `deprecated` is a required field of the struct, superseded by `tags`.
fn to_document_symbol(
    node: &SymbolNode,
    rope: &Rope,
    encoding: PositionEncoding,
) -> DocumentSymbol {
    let def = &node.definition;
    DocumentSymbol {
        name: display_name(&def.name),
        detail: def.detail.clone(),
        kind: lsp_kind(def.kind),
        tags: None,
        deprecated: None,
        range: position::range_of(rope, def.range.clone(), encoding),
        selection_range: position::range_of(rope, def.name_range.clone(), encoding),
        children: (!node.children.is_empty()).then(|| {
            node.children
                .iter()
                .map(|c| to_document_symbol(c, rope, encoding))
                .collect()
        }),
    }
}

#[allow(deprecated)]
fn flatten(
    nodes: &[SymbolNode],
    container: Option<&str>,
    snapshot: &Snapshot,
    encoding: PositionEncoding,
    out: &mut Vec<SymbolInformation>,
) {
    for node in nodes {
        let def = &node.definition;
        out.push(SymbolInformation {
            name: display_name(&def.name),
            kind: lsp_kind(def.kind),
            tags: None,
            deprecated: None,
            location: Location {
                uri: snapshot.uri.clone(),
                range: position::range_of(&snapshot.rope, def.range.clone(), encoding),
            },
            container_name: container.map(display_name),
        });
        flatten(&node.children, Some(&def.name), snapshot, encoding, out);
    }
}

#[allow(deprecated)]
fn to_symbol_information(
    symbol: &IndexedSymbol,
    encoding: PositionEncoding,
) -> Option<SymbolInformation> {
    let uri = Url::from_file_path(&*symbol.path).ok()?;
    Some(SymbolInformation {
        name: display_name(&symbol.name),
        kind: lsp_kind(symbol.kind),
        tags: None,
        deprecated: None,
        location: Location {
            uri,
            range: Range {
                start: symbol.selection.0.to_position(encoding),
                end: symbol.selection.1.to_position(encoding),
            },
        },
        container_name: symbol.container.as_deref().map(display_name),
    })
}

pub fn lsp_kind(kind: SymbolKind) -> LspSymbolKind {
    match kind {
        SymbolKind::Module => LspSymbolKind::MODULE,
        SymbolKind::Namespace => LspSymbolKind::NAMESPACE,
        SymbolKind::Class => LspSymbolKind::CLASS,
        SymbolKind::Struct => LspSymbolKind::STRUCT,
        SymbolKind::Enum => LspSymbolKind::ENUM,
        SymbolKind::Interface | SymbolKind::Trait => LspSymbolKind::INTERFACE,
        // LSP has no "impl block"; an object-like container reads best in outlines.
        SymbolKind::Impl => LspSymbolKind::OBJECT,
        SymbolKind::Function | SymbolKind::Macro => LspSymbolKind::FUNCTION,
        SymbolKind::Method => LspSymbolKind::METHOD,
        SymbolKind::Constructor => LspSymbolKind::CONSTRUCTOR,
        SymbolKind::Field => LspSymbolKind::FIELD,
        SymbolKind::Property => LspSymbolKind::PROPERTY,
        SymbolKind::EnumMember => LspSymbolKind::ENUM_MEMBER,
        SymbolKind::Constant => LspSymbolKind::CONSTANT,
        SymbolKind::Variable => LspSymbolKind::VARIABLE,
        SymbolKind::TypeAlias => LspSymbolKind::TYPE_PARAMETER,
    }
}

fn internal(message: String) -> Error {
    tracing::error!(%message);
    Error {
        code: tower_lsp::jsonrpc::ErrorCode::InternalError,
        message: message.into(),
        data: None,
    }
}
