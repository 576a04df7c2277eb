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
    let began = Instant::now();
    let deadline = began + scaled(ANSWER_WITHIN);
    let uri = params.text_document.uri;
    let snapshot = match open_snapshot(state, &uri).await {
        Some(snapshot) => snapshot,
        None => read_from_disk(&uri, state.index().settings().max_file_bytes).await?,
    };
    let snapshot_ms = began.elapsed().as_millis();
    let encoding = state.encoding();
    let hierarchical = state
        .capabilities()
        .and_then(|caps| caps.text_document.as_ref())
        .and_then(|td| td.document_symbol.as_ref())
        .and_then(|ds| ds.hierarchical_document_symbol_support)
        .unwrap_or(false);
    let response = tokio::task::spawn_blocking(move || {
        let nodes = symbol_nodes(&snapshot, deadline);
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
    tracing::debug!(
        %uri,
        snapshot_ms,
        total_ms = began.elapsed().as_millis(),
        "documentSymbol computed"
    );
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

/// An outline is answered within this, from the tree when it is ready in
/// time ([`TREE_WAIT`]) and tagged in time, else line by line
/// ([`line_outline`]): under load (a huge document opened and edited
/// while others are parsed) a 0.5 MB file's tree outline took 1.2-1.9 s.
/// What follows takes time too: the response, up to 1 MB of JSON, is built
/// on the async worker (~75 ms; ~150 ms for the 10,000 symbols once
/// allowed), so the whole answer stays under a second on a busy core.
const ANSWER_WITHIN: Duration = Duration::from_millis(650);
/// The longest wait for the document's parse, of [`ANSWER_WITHIN`]. The
/// parse goes on after it, and its tree serves the next request. Long
/// enough for a fresh parse of 0.5 MB of dense code on an idle machine
/// (~0.3 s; 0.25 s gave its first outline line by line, without the
/// assignments a tree outline lists).
const TREE_WAIT: Duration = Duration::from_millis(450);

/// `limit` for this build: an unoptimised one (the test suite's) parses and
/// tags 10-30 times slower, and deadlines set for release timings would
/// make its outlines depend on the machine's load.
fn scaled(limit: Duration) -> Duration {
    if cfg!(debug_assertions) {
        limit * 20
    } else {
        limit
    }
}

/// The open document `uri`, with a tree for its text if its parse ends
/// within [`TREE_WAIT`]; else as it is (the outline is then line-based).
/// `None` when it is not open.
async fn open_snapshot(state: &Arc<State>, uri: &Url) -> Option<Snapshot> {
    let current = state.snapshot(uri)?;
    if !current.needs_reparse
        || current.language.is_none()
        || syntax::too_big_to_parse(current.rope.len_bytes())
    {
        return Some(current);
    }
    // Its own task: the parse ends (and installs its tree) even when this
    // request stops waiting for it.
    let parse = tokio::spawn({
        let (state, uri) = (Arc::clone(state), uri.clone());
        async move { state.parsed_snapshot(&uri).await }
    });
    match tokio::time::timeout(scaled(TREE_WAIT), parse).await {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(err)) => {
            tracing::error!(%uri, %err, "parsing for documentSymbol failed");
            Some(current)
        }
        Err(_) => Some(current),
    }
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
/// An outline of more is unreadable, and each costs ~210 bytes of JSON
/// and ~15 µs to build it on the async worker: this keeps the worst
/// response to ~1 MB. (It was 10,000: 2.1 MB and ~150 ms, answers late
/// behind each other in the soak, docs/performance.md.)
const MAX_DOCUMENT_SYMBOLS: usize = 5_000;
/// Above this size only top-level items are outlined: nesting is not worth
/// matching inside every function body of a huge (usually generated) file.
const TOP_LEVEL_ONLY_ABOVE_BYTES: usize = 2 << 20;
/// Longest symbol name sent, in chars (a name is one token, but a bad one
/// can be a megabyte).
const MAX_NAME_CHARS: usize = 200;

/// The document's outline, bounded in count, time (tagging stops at
/// `deadline`, and the outline is then line-based) and size (see the
/// constants above). Anything cut is logged with the reason.
fn symbol_nodes(snapshot: &Snapshot, deadline: Instant) -> Vec<SymbolNode> {
    let Some(language) = snapshot.language else {
        return Vec::new();
    };
    let len = snapshot.rope.len_bytes();
    if syntax::too_big_to_parse(len) {
        return line_outline(snapshot, "over the parse limit");
    }
    let Some(tree) = snapshot.tree.as_ref().filter(|_| !snapshot.needs_reparse) else {
        return line_outline(snapshot, "its parse did not end in time");
    };
    let text = snapshot.rope.to_string();
    let top_level_only = text.len() > TOP_LEVEL_ONLY_ABOVE_BYTES;
    let started = Instant::now();
    let budget = TagBudget {
        // Duplicates (one name matched by several patterns) are merged
        // after collection: leave room for them.
        max_definitions: MAX_DOCUMENT_SYMBOLS * 2,
        deadline: Some(deadline),
        top_level_only,
    };
    let (tags, cut) = syntax::tags_within(language, tree, &text, &budget);
    if matches!(cut, Some(TagsCut::Time)) {
        // A complete flat outline rather than the first part of a tree.
        return line_outline(snapshot, "tagging did not end in time");
    }
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
            Some(TagsCut::Time) | None => "complete".to_owned(),
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

/// The outline of a document too big to parse, or whose tree was not
/// ready in time (`why`): definitions found line by line (flat, at most
/// [`MAX_DOCUMENT_SYMBOLS`]).
fn line_outline(snapshot: &Snapshot, why: &str) -> Vec<SymbolNode> {
    let started = Instant::now();
    let nodes: Vec<SymbolNode> = syntax::line_outline(&snapshot.rope, MAX_DOCUMENT_SYMBOLS)
        .into_iter()
        .map(|definition| SymbolNode {
            definition,
            children: Vec::new(),
        })
        .collect();
    tracing::debug!(
        "documentSymbol for {} ({} bytes, {why}; parse limit {} bytes): line-based \
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const SOURCE: &str =
        "class A:\n    def m(self):\n        return 1\n\ndef f(x):\n    return x\n";

    fn snapshot(tree_matches_text: bool) -> Snapshot {
        let tree = syntax::parse_str(Language::Python, SOURCE, None);
        Snapshot {
            uri: Url::parse("file:///w/a.py").unwrap(),
            version: 1,
            language: Some(Language::Python),
            rope: Rope::from_str(SOURCE),
            tree,
            revision: 1,
            needs_reparse: !tree_matches_text,
        }
    }

    /// (name, number of children) of each top-level symbol.
    fn shape(nodes: &[SymbolNode]) -> Vec<(String, usize)> {
        nodes
            .iter()
            .map(|n| (n.definition.name.clone(), n.children.len()))
            .collect()
    }

    #[test]
    fn a_tree_in_time_gives_the_nested_outline() {
        let later = Instant::now() + Duration::from_secs(60);
        assert_eq!(
            shape(&symbol_nodes(&snapshot(true), later)),
            [("A".to_owned(), 1), ("f".to_owned(), 0)]
        );
    }

    #[test]
    fn past_the_deadline_the_outline_is_line_based_and_complete() {
        let flat = [
            ("A".to_owned(), 0),
            ("m".to_owned(), 0),
            ("f".to_owned(), 0),
        ];
        // Tagging stops at once: not a cut tree, every definition flat.
        assert_eq!(shape(&symbol_nodes(&snapshot(true), Instant::now())), flat);
        // A tree behind the text (its parse did not end in time) is not used.
        let later = Instant::now() + Duration::from_secs(60);
        assert_eq!(shape(&symbol_nodes(&snapshot(false), later)), flat);
    }
}
