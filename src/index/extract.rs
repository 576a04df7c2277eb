//! Turns one file's text into what the index keeps. Runs outside every
//! lock; the text and syntax tree are dropped as soon as this returns.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::position::{LineIndex, TextPoint};
use crate::syntax::{self, Definition, Language, SymbolKind, SymbolNode, TagBudget};

/// Most definitions kept for one file: a generated file of a million
/// assignments must not fill the index (each costs ~200 bytes) nor make
/// every re-index of its buffer slow.
const MAX_FILE_DEFINITIONS: usize = 20_000;
/// The tag query for one file stops after this long.
const FILE_TIME_BUDGET: Duration = Duration::from_secs(2);

pub(super) struct RawDef {
    pub name: String,
    pub kind: SymbolKind,
    pub container: Option<String>,
    pub detail: Option<String>,
    pub range: (TextPoint, TextPoint),
    pub selection: (TextPoint, TextPoint),
}

pub(super) struct FileData {
    pub language: Language,
    pub lines: u32,
    pub bytes: u64,
    /// In document order (start, then enclosing before enclosed).
    pub defs: Vec<RawDef>,
    /// Referenced names with counts, sorted by name, each once.
    pub refs: Vec<(String, u32)>,
}

impl FileData {
    pub(super) fn reference_count(&self) -> usize {
        self.refs.iter().map(|(_, c)| *c as usize).sum()
    }
}

pub(super) fn extract(language: Language, text: &str) -> FileData {
    let tree = syntax::parse_str(language, text, None);
    extract_parsed(language, tree.as_ref(), text)
}

/// [`extract`] with a tree the caller already has for `text` (an open
/// buffer's): saves a full parse per buffer update.
pub(super) fn extract_parsed(
    language: Language,
    tree: Option<&tree_sitter::Tree>,
    text: &str,
) -> FileData {
    let mut data = FileData {
        language,
        lines: count_lines(text),
        bytes: text.len() as u64,
        defs: Vec::new(),
        refs: Vec::new(),
    };
    if syntax::too_big_to_parse(text.len()) {
        // Never parsed (memory): the definitions a line-based outline finds.
        let lines = LineIndex::new(text);
        data.defs = syntax::line_outline_str(text, MAX_FILE_DEFINITIONS)
            .into_iter()
            .map(|d| RawDef {
                range: (lines.point(d.range.start), lines.point(d.range.end)),
                selection: (
                    lines.point(d.name_range.start),
                    lines.point(d.name_range.end),
                ),
                name: d.name,
                kind: d.kind,
                container: None,
                detail: d.detail,
            })
            .collect();
        return data;
    }
    let Some(tree) = tree else {
        return data;
    };
    let (tags, cut) = syntax::tags_within(
        language,
        tree,
        text,
        &TagBudget {
            max_definitions: MAX_FILE_DEFINITIONS,
            deadline: Some(Instant::now() + FILE_TIME_BUDGET),
            top_level_only: false,
        },
    );
    if let Some(cut) = cut {
        // The file stays indexed with what was found (its start): workspace
        // symbols and completion context keep working, within bounds.
        tracing::warn!(
            "index: {} bytes of {}: definitions cut ({cut:?}: limit {MAX_FILE_DEFINITIONS} \
             definitions, {} ms)",
            text.len(),
            language.name(),
            FILE_TIME_BUDGET.as_millis()
        );
    }
    let lines = LineIndex::new(text);
    let mut defs = Vec::with_capacity(tags.definitions.len());
    flatten(
        syntax::symbol_tree(tags.definitions),
        None,
        &lines,
        &mut defs,
    );
    defs.sort_by(|a, b| a.range.0.cmp(&b.range.0).then(b.range.1.cmp(&a.range.1)));
    data.defs = defs;

    let mut counts: HashMap<&str, u32> = HashMap::with_capacity(tags.references.len() / 2);
    for r in &tags.references {
        *counts.entry(r.name.as_str()).or_default() += 1;
    }
    let mut refs: Vec<(String, u32)> = counts.into_iter().map(|(n, c)| (n.to_owned(), c)).collect();
    refs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    data.refs = refs;
    data
}

/// Walks the symbol tree, recording each node's parent name as its
/// container.
fn flatten(
    nodes: Vec<SymbolNode>,
    container: Option<&str>,
    lines: &LineIndex<'_>,
    out: &mut Vec<RawDef>,
) {
    for node in nodes {
        let Definition {
            name,
            kind,
            range,
            name_range,
            detail,
        } = node.definition;
        out.push(RawDef {
            kind,
            container: container.map(str::to_owned),
            detail,
            range: (lines.point(range.start), lines.point(range.end)),
            selection: (lines.point(name_range.start), lines.point(name_range.end)),
            name,
        });
        if !node.children.is_empty() {
            let parent = out[out.len() - 1].name.clone();
            flatten(node.children, Some(&parent), lines, out);
        }
    }
}

/// Lines as an editor counts them: a trailing newline does not start one.
fn count_lines(text: &str) -> u32 {
    let newlines = text.bytes().filter(|&b| b == b'\n').count();
    let partial = usize::from(!text.is_empty() && !text.ends_with('\n'));
    (newlines + partial) as u32
}

#[cfg(test)]
mod tests {
    use super::count_lines;

    #[test]
    fn lines() {
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("a"), 1);
        assert_eq!(count_lines("a\n"), 1);
        assert_eq!(count_lines("a\nb"), 2);
        assert_eq!(count_lines("\n\n"), 2);
    }
}
