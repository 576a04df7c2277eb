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
mod tests;
