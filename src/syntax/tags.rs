//! Definitions and references from our tag queries (`queries/<lang>/tags.scm`).
//!
//! Query conventions (those of tree-sitter's `tags.scm`): the whole item is
//! captured as `@definition.<kind>` or `@reference.<kind>`, its name as
//! `@name`. When several patterns define the same name node, the pattern that
//! comes first in the file wins, so specific patterns (a `fn` inside an
//! `impl` is a method) go before general ones.
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::OnceLock;
use std::time::Instant;

use tree_sitter::{
    Node, Query, QueryCursor, QueryCursorOptions, QueryCursorState, StreamingIterator, Tree,
};

use super::{Definition, Language, Reference, SymbolKind, Tags};

mod adjust;
mod detail;

/// What a capture index means, precomputed per query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Name,
    Definition(SymbolKind),
    Reference,
    /// Helper captures used only by predicates.
    Other,
}

struct TagQuery {
    query: Query,
    roles: Vec<Role>,
}

fn query_source(lang: Language) -> &'static str {
    match lang {
        Language::Rust => include_str!("queries/rust/tags.scm"),
        Language::Python => include_str!("queries/python/tags.scm"),
        // Order matters: earlier patterns win, so language-specific ones
        // come before the shared ecma ones.
        Language::JavaScript => concat!(
            include_str!("queries/javascript/tags.scm"),
            include_str!("queries/ecma/tags.scm"),
            include_str!("queries/jsx/tags.scm"),
        ),
        Language::TypeScript => concat!(
            include_str!("queries/typescript/tags.scm"),
            include_str!("queries/ecma/tags.scm"),
        ),
        // TSX is TypeScript plus JSX.
        Language::Tsx => concat!(
            include_str!("queries/typescript/tags.scm"),
            include_str!("queries/ecma/tags.scm"),
            include_str!("queries/jsx/tags.scm"),
        ),
        Language::Go => include_str!("queries/go/tags.scm"),
        Language::C => include_str!("queries/c/tags.scm"),
        // C++'s grammar extends C's, so the C patterns apply too.
        Language::Cpp => concat!(
            include_str!("queries/cpp/tags.scm"),
            include_str!("queries/c/tags.scm"),
        ),
        Language::Java => include_str!("queries/java/tags.scm"),
        Language::Lua => include_str!("queries/lua/tags.scm"),
    }
}

fn kind_from_capture(suffix: &str) -> Option<SymbolKind> {
    Some(match suffix {
        "module" => SymbolKind::Module,
        "namespace" => SymbolKind::Namespace,
        "class" => SymbolKind::Class,
        "struct" => SymbolKind::Struct,
        "enum" => SymbolKind::Enum,
        "interface" => SymbolKind::Interface,
        "trait" => SymbolKind::Trait,
        "impl" => SymbolKind::Impl,
        "function" => SymbolKind::Function,
        "method" => SymbolKind::Method,
        "constructor" => SymbolKind::Constructor,
        "field" => SymbolKind::Field,
        "property" => SymbolKind::Property,
        "enum_member" => SymbolKind::EnumMember,
        "constant" => SymbolKind::Constant,
        "variable" => SymbolKind::Variable,
        "type" => SymbolKind::TypeAlias,
        "macro" => SymbolKind::Macro,
        _ => return None,
    })
}

/// Compiles and checks one language's query. Errors are returned, not
/// panicked on, so that a bad query degrades to "no tags".
fn compile(lang: Language) -> Result<TagQuery, String> {
    compile_source(lang, query_source(lang))
}

fn compile_source(lang: Language, source: &str) -> Result<TagQuery, String> {
    let query = Query::new(&lang.ts_language(), source)
        .map_err(|e| format!("tags query for {} is invalid: {e}", lang.name()))?;
    let mut roles = Vec::new();
    for name in query.capture_names() {
        let role =
            if *name == "name" {
                Role::Name
            } else if let Some(kind) = name.strip_prefix("definition.") {
                Role::Definition(kind_from_capture(kind).ok_or_else(|| {
                    format!("tags query for {}: unknown kind @{name}", lang.name())
                })?)
            } else if name.starts_with("reference.") {
                Role::Reference
            } else {
                Role::Other
            };
        roles.push(role);
    }
    Ok(TagQuery { query, roles })
}

/// The compiled query for `lang`, compiled on first use, once per process.
/// Per language, because compiling a query costs up to ~100 ms: a Rust-only
/// workspace should not pay for C++.
fn tag_query(lang: Language) -> Option<&'static TagQuery> {
    static QUERIES: [OnceLock<Option<TagQuery>>; Language::ALL.len()] =
        [const { OnceLock::new() }; Language::ALL.len()];
    QUERIES
        .get(lang.index())?
        .get_or_init(|| match compile(lang) {
            Ok(q) => Some(q),
            Err(e) => {
                tracing::error!("{e}");
                None
            }
        })
        .as_ref()
}

/// Checks that every language's query compiles; for tests and start-up logs.
pub fn check_queries() -> Result<(), String> {
    let errors: Vec<String> = Language::ALL
        .iter()
        .filter_map(|&lang| compile(lang).err())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// A definition before dedup: which pattern produced it decides priority.
/// The detail is computed only for the winners.
struct Candidate<'tree> {
    pattern: usize,
    item: Node<'tree>,
    def: Definition,
}

/// Runs the tag query for `lang` over `tree` (parsed from `text`).
pub fn tags(lang: Language, tree: &Tree, text: &str) -> Tags {
    collect(lang, tree, text, &TagBudget::UNLIMITED).0
}

/// What one run of the tag query may spend: a request on a huge document
/// (a generated file of a million assignments) must not build millions of
/// symbols, nor run for seconds.
#[derive(Clone, Copy, Debug)]
pub struct TagBudget {
    /// Most definitions collected (before duplicates are merged); the query
    /// stops at the first match past it.
    pub max_definitions: usize,
    /// The query stops here, even between matches.
    pub deadline: Option<Instant>,
    /// Only items that start near the top of the tree (enough for top-level
    /// outlines): skips the matching inside function bodies.
    pub top_level_only: bool,
}

impl TagBudget {
    pub const UNLIMITED: TagBudget = TagBudget {
        max_definitions: usize::MAX,
        deadline: None,
        top_level_only: false,
    };
}

/// Why a bounded tag run stopped before the end of the document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagsCut {
    /// `max_definitions` reached.
    Count,
    /// `deadline` passed.
    Time,
}

/// [`tags`] within a budget: definitions and references found before the
/// budget ran out (those of the document's start), and why it stopped.
pub fn tags_within(
    lang: Language,
    tree: &Tree,
    text: &str,
    budget: &TagBudget,
) -> (Tags, Option<TagsCut>) {
    collect(lang, tree, text, budget)
}

/// Deepest start of a pattern in top-level mode: a top-level item may sit
/// under two wrappers (`export` + declaration, `var ( … )` lists).
const TOP_LEVEL_START_DEPTH: u32 = 3;

fn collect(lang: Language, tree: &Tree, text: &str, budget: &TagBudget) -> (Tags, Option<TagsCut>) {
    let Some(tq) = tag_query(lang) else {
        return (Tags::default(), None);
    };
    let src = text.as_bytes();
    let mut cursor = QueryCursor::new();
    if budget.top_level_only {
        cursor.set_max_start_depth(Some(TOP_LEVEL_START_DEPTH));
    }
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut references: Vec<Reference> = Vec::new();
    let mut cut = None;
    let deadline = budget.deadline;
    // Tree-sitter calls this while it walks between matches, so a long
    // stretch without any match is cut too. `true` stops the query.
    let mut past_deadline = |_: &QueryCursorState| deadline.is_some_and(|d| Instant::now() >= d);
    let options = QueryCursorOptions::new().progress_callback(&mut past_deadline);

    let mut matches = cursor.matches_with_options(&tq.query, tree.root_node(), src, options);
    while let Some(m) = matches.next() {
        if candidates.len() >= budget.max_definitions {
            cut = Some(TagsCut::Count);
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            cut = Some(TagsCut::Time);
            break;
        }
        let mut name: Option<Node> = None;
        let mut item: Option<(Node, Role)> = None;
        for cap in m.captures {
            match tq.roles.get(cap.index as usize) {
                Some(Role::Name) => name = Some(cap.node),
                Some(role @ (Role::Definition(_) | Role::Reference)) => {
                    item = Some((cap.node, *role))
                }
                _ => {}
            }
        }
        let (Some(name), Some((item, role))) = (name, item) else {
            continue;
        };
        let Some(name_text) = node_text(name, text) else {
            continue;
        };
        match role {
            Role::Definition(kind) => {
                let mut def = Definition {
                    name: name_text.to_owned(),
                    kind,
                    range: item.byte_range(),
                    name_range: name.byte_range(),
                    detail: None,
                };
                adjust::adjust(lang, &mut def, item, name, text);
                if def.name.is_empty() {
                    continue;
                }
                // The name must lie inside the item (LSP's selectionRange
                // rule); queries guarantee it, but widen rather than trust.
                def.range = cover(&def.range, &def.name_range);
                // Some items (C's `#define`) own their trailing newline.
                def.range.end =
                    trim_end(src, def.range.start.max(def.name_range.end), def.range.end);
                candidates.push(Candidate {
                    pattern: m.pattern_index,
                    item,
                    def,
                });
            }
            Role::Reference if !name_text.is_empty() => {
                references.push(Reference {
                    name: name_text.to_owned(),
                    range: name.byte_range(),
                });
            }
            _ => {}
        }
    }
    drop(matches);
    // The progress callback ends the iteration without saying why.
    if cut.is_none() && deadline.is_some_and(|d| Instant::now() >= d) {
        cut = Some(TagsCut::Time);
    }

    let definitions = dedup_definitions(candidates, |c| {
        c.def.detail = detail::detail(lang, c.item, text);
    });
    // A definition's own name is not a reference to it (`type_identifier`
    // patterns would otherwise catch `struct Foo`'s `Foo`).
    let def_names: HashSet<(usize, usize)> = definitions
        .iter()
        .map(|d| (d.name_range.start, d.name_range.end))
        .collect();
    references.retain(|r| !def_names.contains(&(r.range.start, r.range.end)));
    references.sort_by_key(|r| (r.range.start, r.range.end));
    references.dedup_by(|a, b| a.range == b.range);
    (
        Tags {
            definitions,
            references,
        },
        cut,
    )
}

/// One definition per name node: the earliest pattern wins; output sorted by
/// position (start, then outermost first).
fn dedup_definitions(
    candidates: Vec<Candidate>,
    mut finish: impl FnMut(&mut Candidate),
) -> Vec<Definition> {
    let mut best: HashMap<(usize, usize), Candidate> = HashMap::new();
    for c in candidates {
        let key = (c.def.name_range.start, c.def.name_range.end);
        match best.get(&key) {
            Some(prev) if prev.pattern <= c.pattern => {}
            _ => {
                best.insert(key, c);
            }
        }
    }
    let mut defs: Vec<Definition> = best
        .into_values()
        .map(|mut c| {
            finish(&mut c);
            c.def
        })
        .collect();
    defs.sort_by(|a, b| {
        (
            a.range.start,
            std::cmp::Reverse(a.range.end),
            a.name_range.start,
        )
            .cmp(&(
                b.range.start,
                std::cmp::Reverse(b.range.end),
                b.name_range.start,
            ))
    });
    defs
}

/// Moves `end` back over trailing whitespace, not before `floor`.
fn trim_end(src: &[u8], floor: usize, mut end: usize) -> usize {
    while end > floor && src.get(end - 1).is_some_and(|b| b.is_ascii_whitespace()) {
        end -= 1;
    }
    end
}

fn cover(a: &Range<usize>, b: &Range<usize>) -> Range<usize> {
    a.start.min(b.start)..a.end.max(b.end)
}

pub(super) fn node_text<'a>(node: Node, text: &'a str) -> Option<&'a str> {
    text.get(node.byte_range())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_queries_are_errors_not_panics() {
        let bad = compile_source(Language::Rust, "(no_such_node) @name");
        assert!(bad.is_err());
        let unknown_kind = compile_source(
            Language::Rust,
            "(function_item name: (identifier) @name) @definition.gizmo",
        );
        assert!(unknown_kind.err().is_some_and(|e| e.contains("gizmo")));
    }

    #[test]
    fn every_query_compiles() {
        if let Err(e) = check_queries() {
            panic!("{e}");
        }
    }
}
