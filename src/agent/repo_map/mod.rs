//! The repo map: the workspace's most relevant definitions, one signature
//! a line, packed into a token budget — Aider's repo map on our index.
//!
//! Files are ranked by PageRank over the reference graph, personalized to
//! the [`Focus`] (the paths and identifiers a goal or a failing test
//! mentions); see [`rank`]. A definition scores the rank that flows to it
//! along the references to its name, plus a small share of its file's rank
//! (so a top file's unreferenced entry points still show), plus its file's
//! whole rank when the focus names it. The top
//! definitions are shown grouped by file, files in rank order:
//!
//! ```text
//! src/config.rs:
//!    4│ pub struct Config
//!    8│ impl Config
//!    9│   pub fn load(path: &str) -> Config
//! ```
//!
//! How many definitions fit is found by binary search on the rendered
//! text's [`estimate`]; files none of whose definitions made it are left
//! out whole (and counted in a last line).
mod focus;
mod rank;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::index::{IndexedSymbol, WorkspaceIndex};
use crate::model::tokens::estimate;
use crate::syntax::SymbolKind;

use rank::Graph;

/// What the map is personalized to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Focus {
    /// Absolute paths of workspace files.
    pub paths: Vec<PathBuf>,
    /// Names the index defines.
    pub identifiers: Vec<String>,
}

impl Focus {
    /// The workspace files (`path`, `path:line`, relative or absolute,
    /// diff `a/` `b/` paths, or a unique suffix of an indexed path) and
    /// the defined identifiers (at most a few definers each, no stop words)
    /// that `text` mentions, in order of first mention.
    pub fn from_text(text: &str, root: &Path, index: &WorkspaceIndex) -> Focus {
        focus::from_text(text, root, index)
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty() && self.identifiers.is_empty()
    }
}

/// Every indexed file with its rank (summing to 1), best first; ties by path.
pub fn rank_files(index: &WorkspaceIndex, focus: &Focus) -> Vec<(PathBuf, f64)> {
    let graph = Graph::build(index, focus);
    graph
        .ranked_files()
        .into_iter()
        .map(|i| (graph.files[i].to_path_buf(), graph.rank[i]))
        .collect()
}

/// Share of its file's rank every top-level definition scores on top of
/// what flows to it (nested ones get half).
const FILE_SHARE: f64 = 0.05;
/// Rough floor on the tokens one map line costs; bounds the candidates.
const MIN_LINE_TOKENS: usize = 3;

/// The map of the workspace, at most `budget_tokens` by [`estimate`]
/// (empty when not even one definition fits). Milliseconds on a large
/// workspace: on the server's async worker it hands the worker on first
/// ([`crate::runtime::blocking`]).
pub fn repo_map(
    index: &WorkspaceIndex,
    root: &Path,
    focus: &Focus,
    budget_tokens: usize,
) -> String {
    crate::runtime::blocking(|| repo_map_here(index, root, focus, budget_tokens))
}

fn repo_map_here(
    index: &WorkspaceIndex,
    root: &Path,
    focus: &Focus,
    budget_tokens: usize,
) -> String {
    let graph = Graph::build(index, focus);
    if graph.files.is_empty() {
        let note = "(repo map: no source files are indexed)";
        return if estimate(note) <= budget_tokens {
            note.to_owned()
        } else {
            String::new()
        };
    }
    let map = Candidates::collect(index, root, &graph, focus, budget_tokens);
    // Largest prefix of the ranked definitions whose rendering fits.
    let (mut lo, mut hi) = (0, map.ranked.len());
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if estimate(&map.render(mid)) <= budget_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    map.render(lo)
}

struct FileEntry {
    display: String,
    symbols: Vec<IndexedSymbol>,
    /// Enclosing symbol of each, by index into `symbols`.
    parent: Vec<Option<usize>>,
    depth: Vec<usize>,
}

struct Candidates {
    /// In map order (rank, then path).
    files: Vec<FileEntry>,
    /// (file, symbol) best first.
    ranked: Vec<(usize, usize)>,
}

impl Candidates {
    fn collect(
        index: &WorkspaceIndex,
        root: &Path,
        graph: &Graph,
        focus: &Focus,
        budget_tokens: usize,
    ) -> Candidates {
        let limit = budget_tokens / MIN_LINE_TOKENS + 1;
        let flow = graph.definition_flow();
        let focused: HashSet<&str> = focus.identifiers.iter().map(String::as_str).collect();
        let mut files = Vec::new();
        let mut scored: Vec<(f64, usize, usize)> = Vec::new();
        for file in graph.ranked_files() {
            let path = &graph.files[file];
            let symbols = index.file_symbols(path);
            let (parent, depth) = nesting(&symbols);
            let at = files.len();
            // A name's flow is shared by its definitions in the file (four
            // `type Future` in one file are not each worth the whole).
            let mut same_name: HashMap<&str, usize> = HashMap::new();
            for s in &symbols {
                *same_name.entry(&s.name).or_insert(0) += 1;
            }
            for (i, s) in symbols.iter().enumerate() {
                let own = if depth[i] == 0 {
                    FILE_SHARE
                } else {
                    FILE_SHARE / 2.0
                };
                let flowed = flow.get(&(file, s.name.clone())).copied().unwrap_or(0.0)
                    / same_name.get(&*s.name).copied().unwrap_or(1) as f64;
                // A name the goal mentions is shown even if little uses it.
                let named = if focused.contains(&*s.name) {
                    graph.rank[file]
                } else {
                    0.0
                };
                scored.push((flowed + named + own * graph.rank[file], at, i));
            }
            files.push(FileEntry {
                display: crate::agent::paths::relative_to(root, path),
                symbols,
                parent,
                depth,
            });
        }
        // Ties: earlier file in map order, then document order.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        let ranked = balance(
            &files,
            scored.into_iter().map(|(_, f, s)| (f, s)),
            budget_tokens,
        );
        Candidates {
            files,
            ranked: ranked.into_iter().take(limit).collect(),
        }
    }

    /// The map of the top `k` definitions, with their enclosing items for
    /// context.
    fn render(&self, k: usize) -> String {
        let mut chosen: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &(file, sym) in &self.ranked[..k.min(self.ranked.len())] {
            let entry = chosen.entry(file).or_default();
            let mut at = Some(sym);
            while let Some(i) = at {
                entry.push(i);
                at = self.files[file].parent[i];
            }
        }
        let mut out = String::new();
        for (&file, syms) in chosen.iter_mut() {
            let entry = &self.files[file];
            syms.sort_unstable();
            syms.dedup();
            out.push_str(&entry.display);
            out.push_str(":\n");
            for &i in syms.iter() {
                let s = &entry.symbols[i];
                let indent = "  ".repeat(entry.depth[i]);
                out.push_str(&format!(
                    "{:>4}│ {indent}{}\n",
                    s.selection.0.line + 1,
                    signature(s)
                ));
            }
        }
        let left = self.files.len() - chosen.len();
        if !chosen.is_empty() && left > 0 {
            out.push_str(&format!("(… {left} more files not shown)\n"));
        }
        out
    }
}

/// The share of the budget one file's lines may take before every other
/// file's candidates had their turn: a file of 59 tests once filled the
/// whole map. Test files get less: their definitions are rarely the fix.
const FILE_BUDGET_SHARE: f64 = 1.0 / 3.0;
const TEST_FILE_BUDGET_SHARE: f64 = 1.0 / 6.0;

/// `ranked` reordered in rounds: in round `r` a file shows what fits in
/// `r + 1` of its shares, so a file's lines past its share come after every
/// other file's within theirs (rank order inside a round), and a test
/// file's lines past its share after all the code's: a big file is still
/// shown when the budget is left over, never instead of another file's
/// definitions.
fn balance(
    files: &[FileEntry],
    ranked: impl Iterator<Item = (usize, usize)>,
    budget_tokens: usize,
) -> Vec<(usize, usize)> {
    let is_test: Vec<bool> = files
        .iter()
        .map(|f| crate::agent::verify::is_test_file(&f.display))
        .collect();
    let share = |file: usize| {
        let fraction = match is_test[file] {
            true => TEST_FILE_BUDGET_SHARE,
            false => FILE_BUDGET_SHARE,
        };
        ((budget_tokens as f64 * fraction) as usize).max(1)
    };
    let mut used: HashMap<usize, usize> = HashMap::new();
    let mut rounds: Vec<((bool, usize), (usize, usize))> = ranked
        .map(|(file, sym)| {
            let spent = used.entry(file).or_insert(0);
            let round = *spent / share(file);
            *spent += estimate(&signature(&files[file].symbols[sym])) + 2;
            ((round > 0 && is_test[file], round), (file, sym))
        })
        .collect();
    // Stable: rank order within a round.
    rounds.sort_by_key(|&(round, _)| round);
    rounds.into_iter().map(|(_, entry)| entry).collect()
}

/// Each symbol's enclosing symbol and depth; `symbols` is in document
/// order, enclosing before enclosed.
fn nesting(symbols: &[IndexedSymbol]) -> (Vec<Option<usize>>, Vec<usize>) {
    let mut parent = Vec::with_capacity(symbols.len());
    let mut depth = Vec::with_capacity(symbols.len());
    let mut stack: Vec<usize> = Vec::new();
    for (i, s) in symbols.iter().enumerate() {
        while let Some(&top) = stack.last() {
            let outer = &symbols[top].range;
            if outer.0 <= s.range.0 && s.range.1 <= outer.1 {
                break;
            }
            stack.pop();
        }
        parent.push(stack.last().copied());
        depth.push(stack.len());
        stack.push(i);
    }
    (parent, depth)
}

fn signature(s: &IndexedSymbol) -> String {
    match &s.detail {
        Some(d) => d.to_string(),
        None => format!("{} {}", kind_word(s.kind), s.name),
    }
}

fn kind_word(kind: SymbolKind) -> &'static str {
    match kind {
        SymbolKind::Module => "mod",
        SymbolKind::Namespace => "namespace",
        SymbolKind::Class => "class",
        SymbolKind::Struct => "struct",
        SymbolKind::Enum => "enum",
        SymbolKind::Interface => "interface",
        SymbolKind::Trait => "trait",
        SymbolKind::Impl => "impl",
        SymbolKind::Function | SymbolKind::Method => "fn",
        SymbolKind::Constructor => "constructor",
        SymbolKind::Field => "field",
        SymbolKind::Property => "property",
        SymbolKind::EnumMember => "variant",
        SymbolKind::Constant => "const",
        SymbolKind::Variable => "var",
        SymbolKind::TypeAlias => "type",
        SymbolKind::Macro => "macro",
    }
}
