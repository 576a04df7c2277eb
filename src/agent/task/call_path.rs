//! The functions the failing tests call, transitively, by name: the static
//! route to a bug the failure does not name — a helper two calls below an
//! assertion in a test file, which no traceback shows. Calls are read
//! from each function's text (`name(`, `.name(`) and resolved through the
//! index's definitions (a name defined in more than a few places is too
//! ambiguous to follow), breadth first from each failing test's own
//! functions; a function scores 1/depth for each failing test that reaches
//! it, so the helper all the failures share comes first, then the nearer.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, LazyLock};

use regex::Regex;

use super::approaches::is_function;
use super::check::Verification;
use super::Task;
use crate::agent::verify::is_test_file;
use crate::index::IndexedSymbol;

/// Calls followed below a failing test.
const MAX_DEPTH: u32 = 3;
/// Functions looked at in all (the walk stays in milliseconds).
const MAX_VISITED: usize = 200;
/// A called name defined in more places than this is not followed.
const MAX_DEFINERS: usize = 4;
/// Failing tests the walk starts from.
const MAX_START_TESTS: usize = 8;
/// Definitions of one failing test's name taken as its function.
const MAX_TEST_DEFINITIONS: usize = 3;

/// `from a.b import c, d` (1: the module, 2: the names) or `import a.b,
/// c as d` (3).
static IMPORT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?m)^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+([^\n#]+)|import[ \t]+([\w. \t,]+))",
    )
    .map_err(|err| tracing::error!("call path: import pattern: {err}"))
    .ok()
});

static CALL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    // `name(`, and Rust's `name::<T, _>(`.
    Regex::new(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:::<[^()]*>)?\s*\(")
        .map_err(|err| tracing::error!("call path: call pattern: {err}"))
        .ok()
});

/// A function on a failing test's call path.
#[derive(Clone, Debug)]
pub(super) struct Called {
    pub symbol: IndexedSymbol,
    /// Calls from the failing test: 1 for a function the test calls itself.
    pub depth: u32,
    /// The function that calls it (the test, at depth 1).
    pub caller: Arc<str>,
}

impl Task {
    /// The functions the baseline's failing tests call, most likely first:
    /// by how many failing tests reach them, each counting 1/depth (a
    /// helper every failing test reaches outranks the many functions one
    /// test touches), then by depth; code only (test files' helpers are
    /// not where the fix goes).
    pub(super) fn call_path(&self, baseline: &Verification) -> Vec<Called> {
        let Some(report) = baseline.report.as_ref() else {
            return Vec::new();
        };
        let mut found: HashMap<(Arc<Path>, u32), (Called, f64)> = HashMap::new();
        let mut order: Vec<(Arc<Path>, u32)> = Vec::new();
        for test in report.failing_tests.iter().take(MAX_START_TESTS) {
            for called in self.walk_from(&self.test_functions(test)) {
                let key = key(&called.symbol);
                let weight = 1.0 / f64::from(called.depth);
                match found.get_mut(&key) {
                    Some((best, score)) => {
                        *score += weight;
                        if called.depth < best.depth {
                            *best = called;
                        }
                    }
                    None => {
                        order.push(key.clone());
                        found.insert(key, (called, weight));
                    }
                }
            }
        }
        let mut ranked: Vec<(Called, f64)> = order.iter().filter_map(|k| found.remove(k)).collect();
        // Stable: first found first among equals.
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.depth.cmp(&b.0.depth)));
        ranked.into_iter().map(|(called, _)| called).collect()
    }

    /// Breadth first from `starts` (one failing test's functions).
    fn walk_from(&self, starts: &[IndexedSymbol]) -> Vec<Called> {
        let mut seen: HashSet<(Arc<Path>, u32)> = HashSet::new();
        let mut queue: VecDeque<(IndexedSymbol, u32, Arc<str>)> = VecDeque::new();
        for start in starts {
            if seen.insert(key(start)) {
                queue.push_back((start.clone(), 0, start.name.clone()));
            }
        }
        let mut out = Vec::new();
        while let Some((symbol, depth, caller)) = queue.pop_front() {
            if depth > 0 {
                out.push(Called {
                    symbol: symbol.clone(),
                    depth,
                    caller,
                });
            }
            if depth == MAX_DEPTH || seen.len() >= MAX_VISITED {
                continue;
            }
            let Some(body) = self.body_of(&symbol) else {
                continue;
            };
            let visible = self.visible_from(&symbol.path);
            for name in called_names(&body) {
                for d in self.resolve_call(&name, &symbol.path, visible.as_ref()) {
                    if !seen.insert(key(&d)) {
                        continue;
                    }
                    queue.push_back((d, depth + 1, symbol.name.clone()));
                }
            }
        }
        out
    }

    /// The function(s) a failing test's id names: `tests/test_x.py::Case::
    /// test_y[param]`, `module::tests::name`, `TestName` — by its last
    /// part, in the file the id names when it names one, else in test files.
    fn test_functions(&self, id: &str) -> Vec<IndexedSymbol> {
        let mut parts: Vec<&str> = id.split("::").collect();
        let Some(last) = parts.pop() else {
            return Vec::new();
        };
        // `test_y[1-2]`, `test_y (side=2)`: parameters and subtests.
        let name = last.split(['[', ' ', '(']).next().unwrap_or(last).trim();
        if name.is_empty() {
            return Vec::new();
        }
        let root = self.files.root();
        let file = parts
            .first()
            .filter(|p| p.contains('.') && !p.contains(' '))
            .map(|p| root.join(p));
        let definitions: Vec<IndexedSymbol> = self
            .index
            .definitions(name)
            .into_iter()
            .filter(|d| is_function(d.kind))
            .collect();
        let in_file: Vec<IndexedSymbol> = definitions
            .iter()
            .filter(|d| file.as_deref().is_some_and(|f| *d.path == *f))
            .cloned()
            .collect();
        let chosen = match in_file.is_empty() {
            false => in_file,
            // Rust's unit tests live in the code's files.
            true => definitions
                .into_iter()
                .filter(|d| self.in_tests(&d.path) || self.is_test_function(d))
                .collect(),
        };
        chosen.into_iter().take(MAX_TEST_DEFINITIONS).collect()
    }

    /// The workspace functions a call of `name` in `caller` may reach: a
    /// method name like `to_text` or `append` is defined all over a
    /// project, so where the caller's imports are known (Python) only the
    /// definitions in its own file and the modules it imports count —
    /// else a name defined once; elsewhere, a name defined in a few places.
    fn resolve_call(
        &self,
        name: &str,
        caller: &Path,
        visible: Option<&HashSet<std::path::PathBuf>>,
    ) -> Vec<IndexedSymbol> {
        let definitions: Vec<IndexedSymbol> = self
            .index
            .definitions(name)
            .into_iter()
            .filter(|d| is_function(d.kind) && !self.in_tests(&d.path) && !in_test_module(d))
            .collect();
        let Some(visible) = visible else {
            return match definitions.len() > MAX_DEFINERS {
                true => Vec::new(),
                false => definitions,
            };
        };
        let near: Vec<IndexedSymbol> = definitions
            .iter()
            .filter(|d| *d.path == *caller || visible.contains(&*d.path))
            .cloned()
            .collect();
        match (near.is_empty(), definitions.len()) {
            (false, _) => near.into_iter().take(MAX_DEFINERS).collect(),
            (true, 1) => definitions,
            (true, _) => Vec::new(),
        }
    }

    /// The workspace files a Python file imports (`import a.b`, `from a.b
    /// import c`, `from .x import y`, `from . import m`), as
    /// `a/b.py` or `a/b/__init__.py` under the root or `src/`; `None` for
    /// other languages (their imports are not read).
    fn visible_from(&self, path: &Path) -> Option<HashSet<std::path::PathBuf>> {
        if path.extension().and_then(|e| e.to_str()) != Some("py") {
            return None;
        }
        let text = self.files.text(path)?;
        let root = self.files.root();
        let here = path.parent().unwrap_or(root);
        let mut out = HashSet::new();
        let Some(re) = IMPORT.as_ref() else {
            return Some(out);
        };
        for c in re.captures_iter(&text) {
            let (module, names) = match (c.get(1), c.get(2), c.get(3)) {
                (Some(from), Some(names), _) => (from.as_str(), names.as_str()),
                (_, _, Some(modules)) => (modules.as_str(), ""),
                _ => continue,
            };
            for module in module
                .split(',')
                .map(|m| m.split_whitespace().next().unwrap_or(""))
            {
                let dots = module.len() - module.trim_start_matches('.').len();
                let rest = module.trim_start_matches('.').replace('.', "/");
                let bases: Vec<std::path::PathBuf> = match dots {
                    0 => vec![root.to_path_buf(), root.join("src")],
                    k => vec![here.ancestors().nth(k - 1).unwrap_or(root).to_path_buf()],
                };
                for base in bases {
                    let at = if rest.is_empty() {
                        base.clone()
                    } else {
                        base.join(&rest)
                    };
                    out.insert(at.with_extension("py"));
                    out.insert(at.join("__init__.py"));
                    // `from pkg import mod`: the names may be modules.
                    for name in names
                        .split(',')
                        .map(|n| n.split_whitespace().next().unwrap_or(""))
                    {
                        let name = name.trim_matches(|c: char| c == '(' || c == ')');
                        if !name.is_empty() && name != "*" {
                            out.insert(at.join(format!("{name}.py")));
                        }
                    }
                }
            }
        }
        Some(out)
    }

    /// The lines of `symbol`'s definition, as the task sees the file now.
    fn body_of(&self, symbol: &IndexedSymbol) -> Option<String> {
        let text = self.files.text(&symbol.path)?;
        let first = symbol.range.0.line as usize;
        let last = symbol.range.1.line as usize;
        let body: Vec<&str> = text
            .lines()
            .skip(first)
            .take(last.saturating_sub(first) + 1)
            .collect();
        Some(body.join("\n"))
    }

    fn in_tests(&self, path: &Path) -> bool {
        is_test_file(&self.files.paths.relative(path))
    }
}

/// The names called in `body`, each once, in order.
fn called_names(body: &str) -> Vec<String> {
    let Some(re) = CALL.as_ref() else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    re.captures_iter(body)
        .map(|c| c[1].to_owned())
        .filter(|name| !KEYWORDS.contains(&name.as_str()) && seen.insert(name.clone()))
        .collect()
}

/// Words before a `(` that are not calls of the workspace's functions.
const KEYWORDS: &[&str] = &[
    "if", "elif", "while", "for", "return", "and", "or", "not", "in", "assert", "def", "fn",
    "function", "print", "len", "range", "super", "self", "match", "switch", "catch", "typeof",
    "sizeof", "lambda", "yield", "await",
];

fn key(symbol: &IndexedSymbol) -> (Arc<Path>, u32) {
    (symbol.path.clone(), symbol.range.0.line)
}

/// A function in a `mod tests` (Rust's unit tests, beside the code): not
/// where a call from the code goes.
pub(super) fn in_test_module(symbol: &IndexedSymbol) -> bool {
    symbol
        .container
        .as_deref()
        .is_some_and(|c| c == "tests" || c == "test")
}

#[cfg(test)]
mod tests {
    use super::called_names;

    #[test]
    fn calls_are_read_once_each_in_order_without_keywords() {
        let body = "def test_total():\n    if check(x):\n        assert total(prices(3), 2) == self.fmt (total(1))\n";
        assert_eq!(
            called_names(body),
            ["test_total", "check", "total", "prices", "fmt"]
        );
        // Rust's turbofish: the walk stopped at `parse_float::<F, _, _>(`.
        let body = "fn check() {\n    assert!(expected == parse::parse_float::<F, _, _>(i, f), \"x\");\n    let v = Vec::<u8>::with_capacity(3);\n}";
        assert_eq!(
            called_names(body),
            ["check", "parse_float", "with_capacity"]
        );
    }
}
