//! Code in the model's words as an edit: a model that answers with the
//! corrected function in a fenced block, instead of calling `edit`, has
//! still said what to change (small local models do this most of the time;
//! Aider's "whole" format is the same idea). Each definition in the block
//! replaces the workspace's definition of the same name; new definitions in
//! the block go in front of the first one replaced. The result is an
//! ordinary search/replace edit, so every check an `edit` call gets (paths,
//! protected files, syntax guard, undo) applies unchanged.

use std::ops::Range;
use std::path::Path;

use super::imports;
use crate::syntax::{parse_str, tags, Definition, Language, SymbolKind};

/// One fenced block of an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedBlock {
    /// The info string's first word (`python`), if any.
    pub language: Option<String>,
    /// A file name the block was labelled with (in the info string or the
    /// line before the fence), if any.
    pub file_hint: Option<String>,
    pub code: String,
}

/// The closed fenced blocks of `text`, in order. An unclosed block (an
/// answer cut off by its token limit) is left out: half a function is not
/// an edit.
pub fn fenced_blocks(text: &str) -> Vec<FencedBlock> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some((fence, info)) = opening_fence(lines[i]) else {
            i += 1;
            continue;
        };
        let close = (i + 1..lines.len()).find(|&j| closes(lines[j], fence));
        let Some(close) = close else { break };
        out.push(block_of(&lines, i, info, close));
        i = close + 1;
    }
    out
}

/// The block an answer leaves open at its end — cut off by its token
/// limit — with its complete lines only (the line the cut fell in is
/// dropped). `None` when every block closes. Used for a new test file
/// while writing tests first: the 1.5B repeated asserts until its limit,
/// and the tests it had written before were lost.
pub fn unclosed_block(text: &str) -> Option<FencedBlock> {
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some((fence, info)) = opening_fence(lines[i]) else {
            i += 1;
            continue;
        };
        match (i + 1..lines.len()).find(|&j| closes(lines[j], fence)) {
            Some(close) => i = close + 1,
            None => {
                // A text ending in a newline ends with a complete line.
                let end = match text.ends_with('\n') {
                    true => lines.len(),
                    false => lines.len() - 1,
                };
                return Some(block_of(&lines, i, info, end.max(i + 1)));
            }
        }
    }
    None
}

/// The longest beginning of `code`, cut at a line, that parses as
/// `language` without a syntax error and still defines something: what an
/// answer cut off mid-statement had complete. `None` when no such
/// beginning exists.
pub fn complete_beginning(language: Language, code: &str) -> Option<String> {
    let lines: Vec<&str> = code.lines().collect();
    // Each try parses the whole beginning again: a bound on the work for
    // a long answer (a cut statement is rarely more than a few lines).
    const MAX_LINES_DROPPED: usize = 40;
    for keep in (lines.len().saturating_sub(MAX_LINES_DROPPED)..=lines.len()).rev() {
        let text = lines[..keep].join("\n");
        if text.trim().is_empty() {
            return None;
        }
        // A parser may take `def f():` at the end for a function with an
        // empty body; the language does not.
        if ends_open(&text) {
            continue;
        }
        // `None`: it does not parse yet; a beginning that parses and
        // defines nothing will not define more when shorter.
        if let Some(definitions) = outer_definitions(language, &text) {
            return (!definitions.is_empty()).then(|| format!("{}\n", text.trim_end()));
        }
    }
    None
}

/// Whether the last line of `text` leaves something open: a block, a
/// bracket, an expression or a line continued.
fn ends_open(text: &str) -> bool {
    let last = text
        .lines()
        .rev()
        .map(str::trim_end)
        .find(|l| !l.trim().is_empty());
    last.is_some_and(|l| l.ends_with([':', '{', '(', '[', ',', '\\', '=', '+', '-', '*', '/']))
}

/// The block whose opening fence is line `open` (`info` after it) and
/// whose code runs up to line `end` (excluded).
fn block_of(lines: &[&str], open: usize, info: &str, end: usize) -> FencedBlock {
    let mut words = info.split_whitespace();
    let language = words
        .next()
        .map(|w| w.trim_matches(|c: char| c == '{' || c == '}' || c == '.'))
        .filter(|w| !w.is_empty() && !looks_like_file(w))
        .map(str::to_owned);
    let previous = lines[..open].iter().rev().find(|l| !l.trim().is_empty());
    let file_hint = file_name_in(info).or_else(|| previous.and_then(|l| file_name_in(l)));
    FencedBlock {
        language,
        file_hint,
        code: lines[open + 1..end].join("\n"),
    }
}

/// A line that opens a fence: its fence (three or more backticks or
/// tildes) and the info string after it.
fn opening_fence(line: &str) -> Option<(&str, &str)> {
    let trimmed = line.trim_start();
    let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = trimmed.chars().take_while(|c| *c == marker).count();
    if len < 3 {
        return None;
    }
    let (fence, info) = trimmed.split_at(len);
    // A backtick fence's info string has no backticks (CommonMark).
    if marker == '`' && info.contains('`') {
        return None;
    }
    Some((fence, info.trim()))
}

fn closes(line: &str, fence: &str) -> bool {
    let trimmed = line.trim();
    let marker = fence.chars().next().unwrap_or('`');
    trimmed.len() >= fence.len() && trimmed.chars().all(|c| c == marker)
}

fn looks_like_file(word: &str) -> bool {
    let word = word.trim_end_matches(':');
    word.contains('/')
        || Path::new(word)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| Language::from_path(Path::new(&format!("x.{e}"))).is_some())
}

/// The last word of `line` that looks like a source file's name
/// (`**src/gcd.py**:` → `src/gcd.py`).
fn file_name_in(line: &str) -> Option<String> {
    line.split(|c: char| c.is_whitespace() || "`*\"'(),:;[]<>".contains(c))
        .rfind(|w| !w.is_empty() && looks_like_file(w))
        .map(|w| w.trim_start_matches("./").to_owned())
}

/// A workspace file the block may be meant for.
pub struct Candidate<'a> {
    /// As the tools name it: relative to the workspace root.
    pub path: &'a str,
    pub language: Language,
    pub text: &'a str,
}

/// A search/replace edit made from a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockEdit {
    pub path: String,
    pub search: String,
    pub replace: String,
    /// The definitions it replaces or adds, for the messages.
    pub names: Vec<String>,
}

/// Why a block gave no edit, for the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoEdit {
    /// No definition (function, class …) in the block.
    NoDefinitions,
    /// The block does not parse as the language of any file it could be for.
    SyntaxErrors(String),
    /// No file defines any of the block's definitions.
    NoMatch(Vec<String>),
    /// The block repeats the code as it is.
    Unchanged(Vec<String>),
}

impl std::fmt::Display for NoEdit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoEdit::NoDefinitions => write!(
                f,
                "it holds no whole function or class to put in place of the existing one"
            ),
            NoEdit::SyntaxErrors(language) => write!(f, "it does not parse as {language}"),
            NoEdit::NoMatch(names) => {
                write!(f, "no file in the workspace defines {}", names.join(", "))
            }
            NoEdit::Unchanged(names) => write!(
                f,
                "{} in it {} the same as in the file",
                names.join(", "),
                if names.len() == 1 { "is" } else { "are" }
            ),
        }
    }
}

/// The names the block defines at its top level, parsed as `language` or,
/// without one, as the first language it parses in.
pub fn defined_names(block: &FencedBlock) -> Vec<String> {
    let languages: Vec<Language> = match block.language.as_deref().and_then(language_of_tag) {
        Some(language) => vec![language],
        None => match block
            .file_hint
            .as_deref()
            .and_then(|h| Language::from_path(Path::new(h)))
        {
            Some(language) => vec![language],
            None => Language::ALL.to_vec(),
        },
    };
    for language in languages {
        if let Some(defs) = outer_definitions(language, &block.code) {
            if !defs.is_empty() {
                return defs.into_iter().map(|d| d.name).collect();
            }
        }
    }
    Vec::new()
}

fn language_of_tag(tag: &str) -> Option<Language> {
    Language::from_language_id(tag).or_else(|| Language::from_path(Path::new(&format!("x.{tag}"))))
}

/// The edits that put the block's definitions in place in the one
/// candidate that defines most of them (the file hint breaks ties).
pub fn plan(block: &FencedBlock, candidates: &[Candidate<'_>]) -> Result<Vec<BlockEdit>, NoEdit> {
    let tagged = block.language.as_deref().and_then(language_of_tag);
    let mut best: Option<(usize, bool, Vec<BlockEdit>)> = None;
    let mut why = NoEdit::NoDefinitions;
    for candidate in candidates {
        if tagged.is_some_and(|l| !same_family(l, candidate.language)) {
            continue;
        }
        let Some(block_defs) = outer_definitions(candidate.language, &block.code) else {
            why = NoEdit::SyntaxErrors(candidate.language.name().to_owned());
            continue;
        };
        if block_defs.is_empty() {
            continue;
        }
        let hinted = block
            .file_hint
            .as_deref()
            .is_some_and(|h| candidate.path == h || candidate.path.ends_with(&format!("/{h}")));
        match plan_in(block, &block_defs, candidate) {
            Ok((matched, edits)) => {
                let better = best
                    .as_ref()
                    .is_none_or(|(m, h, _)| (matched, hinted) > (*m, *h));
                if better {
                    best = Some((matched, hinted, edits));
                }
            }
            Err(reason) => {
                // The most telling reason: a file that has the definitions
                // but unchanged beats one that has none of them.
                if !matches!(why, NoEdit::Unchanged(_)) {
                    why = reason;
                }
            }
        }
    }
    best.map(|(_, _, edits)| edits).ok_or(why)
}

fn same_family(a: Language, b: Language) -> bool {
    let family = |l: Language| match l {
        Language::TypeScript | Language::Tsx | Language::JavaScript => Language::TypeScript,
        Language::C | Language::Cpp => Language::Cpp,
        other => other,
    };
    family(a) == family(b)
}

/// The edits for one file and how many of the block's definitions it has.
fn plan_in(
    block: &FencedBlock,
    block_defs: &[Definition],
    candidate: &Candidate<'_>,
) -> Result<(usize, Vec<BlockEdit>), NoEdit> {
    let Some(tree) = parse_str(candidate.language, candidate.text, None) else {
        return Err(NoEdit::NoMatch(names(block_defs)));
    };
    let file_defs = tags(candidate.language, &tree, candidate.text).definitions;
    let mut edits: Vec<BlockEdit> = Vec::new();
    let mut unchanged = Vec::new();
    let mut new_defs: Vec<&Definition> = Vec::new();
    let mut matched = 0;
    for def in block_defs {
        let mut same: Vec<&Definition> = file_defs
            .iter()
            .filter(|f| f.name == def.name && compatible(f.kind, def.kind))
            .collect();
        if same.len() > 1 {
            // Several with that name (overloads, a method in two classes):
            // only an outermost one is unambiguous.
            same.retain(|f| is_outermost(f, &file_defs));
        }
        let [target] = same.as_slice() else {
            new_defs.push(def);
            continue;
        };
        matched += 1;
        let old_lines = whole_lines(candidate.text, &target.range);
        let search = &candidate.text[old_lines.clone()];
        let indent = indentation(search);
        let replace = reindent(&block.code[whole_lines(&block.code, &def.range)], indent);
        if replace == search {
            unchanged.push(def.name.clone());
            continue;
        }
        edits.push(BlockEdit {
            path: candidate.path.to_owned(),
            search: search.to_owned(),
            replace,
            names: vec![def.name.clone()],
        });
    }
    if matched == 0 {
        return Err(NoEdit::NoMatch(names(block_defs)));
    }
    if edits.is_empty() {
        return Err(NoEdit::Unchanged(unchanged));
    }
    // New helpers the fix needs go in front of the first replaced
    // definition, when that one is at the top level of its file.
    if let Some(first) = edits
        .first_mut()
        .filter(|e| indentation(&e.search).is_empty())
    {
        let gap = match candidate.language {
            Language::Python => "\n\n\n",
            _ => "\n\n",
        };
        for def in new_defs.iter().rev() {
            let code = reindent(&block.code[whole_lines(&block.code, &def.range)], "");
            first.replace = format!("{code}{gap}{}", first.replace);
            first.names.insert(0, def.name.clone());
        }
    }
    if let Some(imports) = imports::missing(candidate.language, &block.code, candidate.text) {
        imports::add(&mut edits, imports, candidate);
    }
    Ok((matched, edits))
}

fn names(defs: &[Definition]) -> Vec<String> {
    defs.iter().map(|d| d.name.clone()).collect()
}

fn compatible(a: SymbolKind, b: SymbolKind) -> bool {
    let callable = |k| {
        matches!(
            k,
            SymbolKind::Function | SymbolKind::Method | SymbolKind::Constructor
        )
    };
    a == b || (callable(a) && callable(b))
}

/// Definitions the block holds that are whole items (functions, types),
/// outermost only; `None` when the code does not parse cleanly as `language`.
fn outer_definitions(language: Language, code: &str) -> Option<Vec<Definition>> {
    let tree = parse_str(language, code, None)?;
    if tree.root_node().has_error() {
        return None;
    }
    let all: Vec<Definition> = tags(language, &tree, code)
        .definitions
        .into_iter()
        .filter(|d| {
            matches!(
                d.kind,
                SymbolKind::Class
                    | SymbolKind::Struct
                    | SymbolKind::Enum
                    | SymbolKind::Interface
                    | SymbolKind::Trait
                    | SymbolKind::Impl
                    | SymbolKind::Function
                    | SymbolKind::Method
                    | SymbolKind::Constructor
                    | SymbolKind::Module
                    | SymbolKind::Namespace
            )
        })
        .collect();
    let mut outer: Vec<Definition> = all
        .iter()
        .filter(|d| is_outermost(d, &all))
        .cloned()
        .collect();
    outer.sort_by_key(|d| d.range.start);
    outer.dedup_by(|a, b| a.range == b.range);
    Some(outer)
}

fn is_outermost(def: &Definition, all: &[Definition]) -> bool {
    !all.iter().any(|o| {
        o.range != def.range && o.range.start <= def.range.start && def.range.end <= o.range.end
    })
}

/// `range` widened to whole lines, without the last line's line break.
pub(super) fn whole_lines(text: &str, range: &Range<usize>) -> Range<usize> {
    let start = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
    let end = text[range.end..]
        .find('\n')
        .map_or(text.len(), |i| range.end + i);
    let end = if text[..end].ends_with('\r') {
        end - 1
    } else {
        end
    };
    start..end
}

pub(super) fn indentation(text: &str) -> &str {
    let first = text.lines().next().unwrap_or("");
    &first[..first.len() - first.trim_start().len()]
}

/// `code` moved so that its first line starts at `indent`; lines that sit
/// less deep than the first (a closing brace written flush) keep their
/// relative place as far as it goes.
fn reindent(code: &str, indent: &str) -> String {
    let own = indentation(code).to_owned();
    code.lines()
        .map(|line| {
            if line.trim().is_empty() {
                String::new()
            } else if let Some(rest) = line.strip_prefix(own.as_str()) {
                format!("{indent}{rest}")
            } else {
                format!("{indent}{}", line.trim_start())
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GCD: &str = "def gcd(a, b):\n    if b == 0:\n        return a\n    else:\n        return gcd(a % b, b)\n\n\n\"\"\"\nDocs.\n\"\"\"\n";

    fn candidate<'a>(path: &'a str, text: &'a str) -> Candidate<'a> {
        Candidate {
            path,
            language: Language::from_path(Path::new(path)).unwrap(),
            text,
        }
    }

    fn apply(text: &str, edits: &[BlockEdit]) -> String {
        let mut out = text.to_owned();
        for e in edits {
            assert_eq!(out.matches(&e.search).count(), 1, "{e:?}");
            out = out.replacen(&e.search, &e.replace, 1);
        }
        out
    }

    const BFS: &str = "from collections import deque as Queue\n\ndef bfs(start, goal):\n    queue = Queue()\n    queue.append(start)\n    while True:\n        node = queue.popleft()\n        if node is goal:\n            return True\n";

    #[test]
    fn an_import_the_fix_needs_goes_after_the_file_s_imports() {
        let answer = "```python\nfrom collections import deque\n\ndef bfs(start, goal):\n    queue = deque()\n    queue.append(start)\n    while queue:\n        node = queue.popleft()\n        if node is goal:\n            return True\n    return False\n```";
        let blocks = fenced_blocks(answer);
        let edits = plan(&blocks[0], &[candidate("bfs.py", BFS)]).unwrap();
        assert_eq!(edits.len(), 2, "{edits:?}");
        assert_eq!(
            apply(BFS, &edits),
            "from collections import deque as Queue\nfrom collections import deque\n\ndef bfs(start, goal):\n    queue = deque()\n    queue.append(start)\n    while queue:\n        node = queue.popleft()\n        if node is goal:\n            return True\n    return False\n"
        );
    }

    #[test]
    fn the_tools_quoted_as_an_import_are_not_added() {
        // The 1.5B's levenshtein fix came with `from tools import …`: the
        // module would not import, and the fix was lost.
        let answer = "```python\nfrom tools import read_file, search, edit\nfrom collections import deque\n\ndef bfs(start, goal):\n    queue = deque()\n    queue.append(start)\n    while queue:\n        node = queue.popleft()\n        if node is goal:\n            return True\n    return False\n```";
        let blocks = fenced_blocks(answer);
        let edits = plan(&blocks[0], &[candidate("bfs.py", BFS)]).unwrap();
        let fixed = apply(BFS, &edits);
        assert!(!fixed.contains("from tools"), "{fixed}");
        assert!(fixed.contains("from collections import deque\n"), "{fixed}");
        // One name may be the project's own.
        let answer = "```python\nfrom text import search\n\ndef bfs(start, goal):\n    return search(start, goal)\n```";
        let edits = plan(&fenced_blocks(answer)[0], &[candidate("bfs.py", BFS)]).unwrap();
        assert!(apply(BFS, &edits).contains("from text import search\n"));
    }

    #[test]
    fn imports_the_file_has_are_not_added_again() {
        let answer = "```python\nfrom collections  import deque as Queue\n\ndef bfs(start, goal):\n    queue = Queue()\n    queue.append(start)\n    while queue:\n        node = queue.popleft()\n        if node is goal:\n            return True\n```";
        let blocks = fenced_blocks(answer);
        let edits = plan(&blocks[0], &[candidate("bfs.py", BFS)]).unwrap();
        assert_eq!(edits.len(), 1, "{edits:?}");
        assert_eq!(apply(BFS, &edits), BFS.replace("while True", "while queue"));
    }

    #[test]
    fn in_a_file_without_imports_the_import_goes_in_front_of_the_function() {
        let file = "def area(r):\n    return 3 * r * r\n";
        let answer = "```python\nimport math\n\ndef area(r):\n    return math.pi * r * r\n```";
        let blocks = fenced_blocks(answer);
        let edits = plan(&blocks[0], &[candidate("area.py", file)]).unwrap();
        assert_eq!(
            apply(file, &edits),
            "import math\n\ndef area(r):\n    return math.pi * r * r\n"
        );
        let rust = "use std::fmt;\n\nfn twice(x: u32) -> u32 {\n    x + x\n}\n";
        let answer =
            "```rust\nuse std::ops::Mul;\n\nfn twice(x: u32) -> u32 {\n    x.mul(2)\n}\n```";
        let edits = plan(&fenced_blocks(answer)[0], &[candidate("lib.rs", rust)]).unwrap();
        assert_eq!(
            apply(rust, &edits),
            "use std::fmt;\nuse std::ops::Mul;\n\nfn twice(x: u32) -> u32 {\n    x.mul(2)\n}\n"
        );
    }

    #[test]
    fn a_corrected_function_in_prose_replaces_the_file_s_function() {
        let answer = "The recursion has its arguments swapped. Here is the fix:\n\n```python\ndef gcd(a, b):\n    if b == 0:\n        return a\n    else:\n        return gcd(b, a % b)\n```\n\nThis works because…";
        let blocks = fenced_blocks(answer);
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].language.as_deref(), Some("python"));
        assert_eq!(defined_names(&blocks[0]), vec!["gcd"]);
        let edits = plan(&blocks[0], &[candidate("gcd.py", GCD)]).unwrap();
        let fixed = apply(GCD, &edits);
        assert_eq!(fixed, GCD.replace("gcd(a % b, b)", "gcd(b, a % b)"));
    }

    #[test]
    fn a_method_is_reindented_into_its_class_and_a_new_helper_goes_first() {
        let file = "import math\n\nclass Shape:\n    def area(self):\n        return 1.0\n\n    def name(self):\n        return 'shape'\n";
        let answer = "```\ndef area(self):\n    return math.pi\n```";
        let blocks = fenced_blocks(answer);
        let edits = plan(&blocks[0], &[candidate("shape.py", file)]).unwrap();
        assert_eq!(
            apply(file, &edits),
            file.replace("return 1.0", "return math.pi")
        );

        let top = "def f(x):\n    return x\n\n\ndef g():\n    return f(1)\n";
        let answer =
            "```py\ndef helper(x):\n    return x + 1\n\ndef f(x):\n    return helper(x)\n```";
        let edits = plan(&fenced_blocks(answer)[0], &[candidate("m.py", top)]).unwrap();
        assert_eq!(edits[0].names, vec!["helper", "f"]);
        assert_eq!(
            apply(top, &edits),
            "def helper(x):\n    return x + 1\n\n\ndef f(x):\n    return helper(x)\n\n\ndef g():\n    return f(1)\n"
        );
    }

    #[test]
    fn rust_functions_and_the_file_that_defines_them() {
        let lib = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\npub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
        let other = "fn main() {}\n";
        let answer = "Fix in **src/lib.rs**:\n```rust\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n```";
        let block = &fenced_blocks(answer)[0];
        assert_eq!(block.file_hint.as_deref(), Some("src/lib.rs"));
        let edits = plan(
            block,
            &[
                candidate("src/main.rs", other),
                candidate("src/lib.rs", lib),
            ],
        )
        .unwrap();
        assert_eq!(edits.len(), 1);
        assert_eq!(edits[0].path, "src/lib.rs");
        assert_eq!(apply(lib, &edits), lib.replacen("a - b", "a + b", 1));
    }

    #[test]
    fn blocks_that_are_not_edits_say_why() {
        let gcd = [candidate("gcd.py", GCD)];
        // The same code again.
        let same = "```python\ndef gcd(a, b):\n    if b == 0:\n        return a\n    else:\n        return gcd(a % b, b)\n```";
        assert_eq!(
            plan(&fenced_blocks(same)[0], &gcd),
            Err(NoEdit::Unchanged(vec!["gcd".into()]))
        );
        // A call, not a definition.
        let call = "```python\nprint(gcd(35, 21))\n```";
        assert_eq!(
            plan(&fenced_blocks(call)[0], &gcd),
            Err(NoEdit::NoDefinitions)
        );
        // Broken code is never put in place.
        let broken = "```python\ndef gcd(a, b:\n    return a\n```";
        assert!(matches!(
            plan(&fenced_blocks(broken)[0], &gcd),
            Err(NoEdit::SyntaxErrors(_))
        ));
        // A definition nobody has.
        let other = "```python\ndef lcm(a, b):\n    return a * b\n```";
        assert_eq!(
            plan(&fenced_blocks(other)[0], &gcd),
            Err(NoEdit::NoMatch(vec!["lcm".into()]))
        );
        // Another language than the file's.
        let rust = "```rust\nfn gcd(a: u32, b: u32) -> u32 { a }\n```";
        assert_eq!(
            plan(&fenced_blocks(rust)[0], &gcd),
            Err(NoEdit::NoDefinitions)
        );
        // Cut off before its closing fence: half a function is no edit.
        assert!(fenced_blocks("```python\ndef gcd(a, b):\n    return").is_empty());
    }

    #[test]
    fn an_answer_cut_inside_its_block_keeps_the_complete_tests() {
        // As the 1.5B answered: asserts repeated until the token limit.
        let answer = "Here are the tests:\n```python\n# tests/test_gcd.py\nfrom gcd import gcd\n\ndef test_small():\n    assert gcd(35, 21) == 7\n\ndef test_more():\n    assert gcd(13, 13) == 13\n    assert gcd(1";
        let block = unclosed_block(answer).expect("the open block");
        assert_eq!(block.language.as_deref(), Some("python"));
        assert!(block.code.ends_with("== 13"), "{:?}", block.code);
        let code = complete_beginning(Language::Python, &block.code).expect("complete part");
        assert!(
            code.contains("def test_more():\n    assert gcd(13, 13) == 13\n"),
            "{code}"
        );
        // Cut right after a `def` line: the function without a body goes.
        let cut = "```python\ndef test_a():\n    assert f(1) == 2\n\ndef test_b():\n";
        let code = complete_beginning(Language::Python, &unclosed_block(cut).unwrap().code);
        assert_eq!(
            code.as_deref(),
            Some("def test_a():\n    assert f(1) == 2\n")
        );
        // A closed block is not cut; nothing complete is nothing.
        assert_eq!(unclosed_block("```python\ndef f(): pass\n```\n"), None);
        assert_eq!(unclosed_block("no code at all"), None);
        assert_eq!(complete_beginning(Language::Python, "def test_a(:"), None);
        assert_eq!(
            complete_beginning(Language::Python, "x = 1\nprint(x)"),
            None
        );
        // After a closed block, the open one is the cut one.
        let two = "```\nexample\n```\n```python\ndef test_c():\n    pass\n";
        assert_eq!(unclosed_block(two).unwrap().code, "def test_c():\n    pass");
    }

    #[test]
    fn fences_and_hints() {
        let text = "x\n~~~~ python gcd.py\ndef f(): pass\n```\nstill inside\n~~~~\n`inline` ```not a fence\n````\na\n````";
        let blocks = fenced_blocks(text);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].code, "def f(): pass\n```\nstill inside");
        assert_eq!(blocks[0].file_hint.as_deref(), Some("gcd.py"));
        assert_eq!(blocks[1].code, "a");
        assert_eq!(blocks[1].language, None);
        let crlf = "```python\r\ndef f():\r\n    pass\r\n```\r\n";
        assert_eq!(fenced_blocks(crlf)[0].code, "def f():\n    pass");
    }
}
