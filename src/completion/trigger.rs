//! When to ask the model for an inline completion, and how much to ask for.
//!
//! Pure and cheap: it runs on every keystroke, looks at the cursor line, a
//! few neighbouring lines and the ancestors of the cursor's tree-sitter node,
//! and never parses.
//!
//! The rules, in order:
//! 1. Skip in the middle of a word, and when the rest of the line holds more
//!    than closers and trailing punctuation (see [`suffix_allows_completion`]).
//! 2. Comments and strings are completed like code (completing a comment is
//!    useful); they only stop a `{` or `:` inside them from counting as a
//!    block opener when a tree is given.
//! 3. [`Multiline::Auto`] completes several lines when the cursor follows a
//!    block opener at the end of its line, or sits on the blank line of an
//!    empty block body; otherwise one line. `Always` and `Never` force it.
//! 4. A multi-line completion is bounded: [`BLOCK_BODY_LINES`] for a block
//!    body, [`OTHER_LINES`] elsewhere, never more than [`MAX_LINES`], and stop
//!    sequences that match the line closing the enclosing block.
mod tree;

use tree_sitter::Tree;

use crate::config::Multiline;
use crate::syntax::Language;
use tree::{in_comment_or_string, tree_empty_block, TreeAnswer};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Don't ask the model; the reason goes to the log.
    Skip(&'static str),
    Complete {
        multiline: bool,
        /// Most lines a multi-line completion may span; 1 when single-line.
        max_lines: usize,
        /// Stop sequences for this position, beyond the caller's own (a
        /// single-line completion stops at `'\n'`, so it gets none).
        stop: Vec<String>,
    },
}

/// Lines for the body of a block that the cursor has just opened.
pub const BLOCK_BODY_LINES: usize = 20;
/// Lines for a forced multi-line completion that does not start a block.
pub const OTHER_LINES: usize = 10;
/// Hard cap on any completion.
pub const MAX_LINES: usize = 30;

/// How far the line scans may look back or ahead, so that a huge run of
/// blank or deeper lines cannot make a keystroke cost O(document).
const SCAN_BYTES: usize = 8 * 1024;

/// Decides whether to complete at `cursor` (a byte offset on a char boundary
/// of `text`) and how much. `tree` must match `text`; without it only
/// indentation heuristics are used (nothing is parsed here).
pub fn decide(
    text: &str,
    cursor: usize,
    language: Option<Language>,
    tree: Option<&Tree>,
    mode: Multiline,
) -> Decision {
    if cursor > text.len() || !text.is_char_boundary(cursor) {
        return Decision::Skip("cursor outside the document");
    }
    let line_start = text[..cursor].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[cursor..].find('\n').map_or(text.len(), |i| cursor + i);
    let before = &text[line_start..cursor];
    // A CRLF line's '\r' is part of the line break, not text after the cursor.
    let after = text[cursor..line_end]
        .strip_suffix('\r')
        .unwrap_or(&text[cursor..line_end]);

    let prev_is_word = before.chars().next_back().is_some_and(is_word_char);
    let next_is_word = after.chars().next().is_some_and(is_word_char);
    if prev_is_word && next_is_word {
        return Decision::Skip("middle of a word");
    }
    if !suffix_allows_completion(after) {
        return Decision::Skip("text after the cursor");
    }

    let single = Decision::Complete {
        multiline: false,
        max_lines: 1,
        stop: Vec::new(),
    };
    if mode == Multiline::Never {
        return single;
    }
    let lang = language;
    // Only a tree for a known language can be read with the kind tables.
    let tree = tree.filter(|_| lang.is_some());
    let pos = Position {
        text,
        cursor,
        line_start,
        line_end,
        before,
        lang,
        tree,
    };

    if let Some(block) = block_start(&pos) {
        return block.into_decision();
    }
    match mode {
        Multiline::Always => Decision::Complete {
            multiline: true,
            max_lines: OTHER_LINES.min(MAX_LINES),
            stop: enclosing_scope_stop(&pos),
        },
        _ => single,
    }
}

/// Rule 1: whether the rest of the line after the cursor leaves room for a
/// completion. Same as `^\s*[)>}\]"'`]*\s*[:{;,]?\s*$`, by hand: the three
/// character classes are disjoint, so one greedy pass is exact.
pub fn suffix_allows_completion(after: &str) -> bool {
    let mut chars = after.chars().peekable();
    while chars.next_if(|c| c.is_whitespace()).is_some() {}
    while chars
        .next_if(|c| matches!(c, ')' | '>' | '}' | ']' | '"' | '\'' | '`'))
        .is_some()
    {}
    while chars.next_if(|c| c.is_whitespace()).is_some() {}
    chars.next_if(|c| matches!(c, ':' | '{' | ';' | ','));
    while chars.next_if(|c| c.is_whitespace()).is_some() {}
    chars.next().is_none()
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

struct Position<'a> {
    text: &'a str,
    cursor: usize,
    line_start: usize,
    line_end: usize,
    /// The cursor line up to the cursor.
    before: &'a str,
    lang: Option<Language>,
    tree: Option<&'a Tree>,
}

/// What closes a block, which decides its stop sequences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Closer {
    Char(char),
    /// Python: the block ends where the indentation drops; the next
    /// definition at the outer level is the cheap, exact-enough signal.
    Dedent,
    /// Lua `end` (or `until` after `repeat`).
    Word(&'static str),
    /// Nothing reliable (an empty document).
    None,
}

/// A multi-line completion starting a block body.
struct BlockStart<'a> {
    closer: Closer,
    /// Indentation of the line that opened the block.
    outer: &'a str,
}

impl BlockStart<'_> {
    fn into_decision(self) -> Decision {
        Decision::Complete {
            multiline: true,
            max_lines: BLOCK_BODY_LINES.min(MAX_LINES),
            stop: stops(self.closer, self.outer),
        }
    }
}

fn stops(closer: Closer, outer: &str) -> Vec<String> {
    match closer {
        Closer::Char(c) => vec![format!("\n{outer}{c}")],
        Closer::Dedent => vec![format!("\n{outer}def "), format!("\n{outer}class ")],
        Closer::Word(w) => vec![format!("\n{outer}{w}")],
        Closer::None => Vec::new(),
    }
}

/// The closer of the language's ordinary blocks.
fn default_closer(lang: Option<Language>) -> Closer {
    match lang {
        Some(Language::Python) => Closer::Dedent,
        Some(Language::Lua) => Closer::Word("end"),
        _ => Closer::Char('}'),
    }
}

/// Rule 3 for `Auto` (and the better bound for `Always`): (a) the cursor line
/// ends with a block opener, or (b) the cursor is on the blank line of an
/// empty block body, or the document is blank.
fn block_start<'a>(pos: &Position<'a>) -> Option<BlockStart<'a>> {
    // (a) Rule 1 already left only closers after the cursor.
    if let Some(closer) = line_opener(pos.before, pos.lang) {
        let opener_at = pos.line_start + pos.before.trim_end().len() - 1;
        if !in_comment_or_string(pos, opener_at) {
            return Some(BlockStart {
                closer,
                outer: indentation(pos.before),
            });
        }
        return None;
    }
    let line = &pos.text[pos.line_start..pos.line_end];
    if !line.trim().is_empty() {
        return None;
    }
    // A blank document: whatever comes is a new file's worth of code.
    if pos.text.trim().is_empty() {
        return Some(BlockStart {
            closer: Closer::None,
            outer: "",
        });
    }
    // (b) Python blocks are their indentation, which the heuristic reads
    // exactly; tree-sitter gives an empty body zero width, so the tree would
    // not help there.
    if let (Some(tree), Some(lang)) = (pos.tree, pos.lang) {
        if lang != Language::Python {
            match tree_empty_block(pos, tree, lang) {
                TreeAnswer::Empty(outer) => {
                    let closer = prev_nonblank_line(pos)
                        .and_then(|(_, l)| line_opener(l, pos.lang))
                        .unwrap_or_else(|| default_closer(pos.lang));
                    return Some(BlockStart { closer, outer });
                }
                TreeAnswer::NotEmpty => return None,
                TreeAnswer::Unknown => {}
            }
        }
    }
    heuristic_empty_block(pos)
}

/// (b) without a tree: the previous non-blank line ends with an opener and
/// the next non-blank line (if any) is not indented deeper than it, i.e.
/// the body holds nothing but the cursor's blank line(s).
fn heuristic_empty_block<'a>(pos: &Position<'a>) -> Option<BlockStart<'a>> {
    let (prev_start, prev) = prev_nonblank_line(pos)?;
    let closer = line_opener(prev, pos.lang)?;
    let opener_at = prev_start + prev.trim_end().len() - 1;
    if in_comment_or_string(pos, opener_at) {
        return None;
    }
    let outer = indentation(prev);
    if let Some(next) = next_nonblank_line(pos) {
        if indent_width(indentation(next)) > indent_width(outer) {
            return None;
        }
    }
    Some(BlockStart { closer, outer })
}

/// The nearest non-blank line above the cursor line: (start byte, line
/// without its line break).
fn prev_nonblank_line<'a>(pos: &Position<'a>) -> Option<(usize, &'a str)> {
    let floor = pos.line_start.saturating_sub(SCAN_BYTES);
    let mut end = pos.line_start.checked_sub(1)?; // the '\n' ending it
    loop {
        if end < floor {
            return None;
        }
        let start = pos.text[..end].rfind('\n').map_or(0, |i| i + 1);
        let line = &pos.text[start..end];
        if !line.trim().is_empty() {
            return Some((start, line));
        }
        end = start.checked_sub(1)?;
    }
}

/// The nearest non-blank line below the cursor line.
fn next_nonblank_line<'a>(pos: &Position<'a>) -> Option<&'a str> {
    let ceiling = pos.line_end.saturating_add(SCAN_BYTES);
    let mut start = pos.line_end + 1;
    while start <= pos.text.len() && start <= ceiling {
        let end = pos.text[start..]
            .find('\n')
            .map_or(pos.text.len(), |i| start + i);
        let line = &pos.text[start..end];
        if !line.trim().is_empty() {
            return Some(line);
        }
        start = end + 1;
    }
    None
}

/// Whether `line` (a whole line, or a line up to the cursor) ends with
/// something that opens a block, and what would close it.
fn line_opener(line: &str, lang: Option<Language>) -> Option<Closer> {
    let trimmed = line.trim();
    match trimmed.chars().next_back()? {
        '{' => return Some(Closer::Char('}')),
        '(' => return Some(Closer::Char(')')),
        '[' => return Some(Closer::Char(']')),
        _ => {}
    }
    match lang {
        Some(Language::Python) => python_opener(trimmed),
        Some(Language::Lua) => lua_opener(trimmed),
        _ => None,
    }
}

/// `if x:`, `def f():`, `else:` ... (not a dict entry or a slice).
fn python_opener(trimmed: &str) -> Option<Closer> {
    if !trimmed.ends_with(':') {
        return None;
    }
    const KEYWORDS: &[&str] = &[
        "def", "class", "if", "elif", "else", "for", "while", "with", "try", "except", "finally",
        "match", "case",
    ];
    let stmt = trimmed.strip_prefix("async").map_or(trimmed, |rest| {
        if rest.starts_with(char::is_whitespace) {
            rest.trim_start()
        } else {
            trimmed
        }
    });
    let word_end = stmt.find(|c: char| !is_word_char(c)).unwrap_or(stmt.len());
    KEYWORDS
        .contains(&&stmt[..word_end])
        .then_some(Closer::Dedent)
}

/// `... then`, `... do`, `else`, `repeat`, `function name(params)`.
fn lua_opener(trimmed: &str) -> Option<Closer> {
    let last_word_start = trimmed
        .char_indices()
        .rev()
        .take_while(|&(_, c)| is_word_char(c))
        .last()
        .map(|(i, _)| i);
    if let Some(start) = last_word_start {
        return match &trimmed[start..] {
            "then" | "do" | "else" => Some(Closer::Word("end")),
            "repeat" => Some(Closer::Word("until")),
            _ => None,
        };
    }
    // `function f(a, b)` / `local g = function(x)`: the last `function`
    // keyword, an optional name, then one parameter list ending the line.
    let rest = trimmed.strip_suffix(')')?;
    let kw = last_word(rest, "function")?;
    let after_kw = rest[kw + "function".len()..].trim_start();
    let name_end = after_kw
        .find(|c: char| !(is_word_char(c) || c == '.' || c == ':'))
        .unwrap_or(after_kw.len());
    let params = after_kw[name_end..].trim_start().strip_prefix('(')?;
    (!params.contains(['(', ')'])).then_some(Closer::Word("end"))
}

/// Byte offset of the last occurrence of `word` in `s` as a whole word.
fn last_word(s: &str, word: &str) -> Option<usize> {
    let mut end = s.len();
    while let Some(i) = s[..end].rfind(word) {
        let before_ok = !s[..i].chars().next_back().is_some_and(is_word_char);
        let after_ok = !s[i + word.len()..].chars().next().is_some_and(is_word_char);
        if before_ok && after_ok {
            return Some(i);
        }
        end = i;
    }
    None
}

/// Leading spaces and tabs.
fn indentation(line: &str) -> &str {
    let n = line.len() - line.trim_start_matches([' ', '\t']).len();
    &line[..n]
}

/// Columns, with a tab as 4: only compared, never shown.
fn indent_width(indent: &str) -> usize {
    indent.chars().map(|c| if c == '\t' { 4 } else { 1 }).sum()
}

/// For `Always` away from a block start: stop where the enclosing block
/// closes, i.e. at the indentation of the nearest line above that is
/// indented less than the cursor line. At top level there is nothing to
/// close, so no stop (a `}` there ends a new item the model is writing).
fn enclosing_scope_stop(pos: &Position<'_>) -> Vec<String> {
    let line = &pos.text[pos.line_start..pos.line_end];
    let own = if line.trim().is_empty() {
        indentation(pos.before)
    } else {
        indentation(line)
    };
    let width = indent_width(own);
    if width == 0 {
        return Vec::new();
    }
    let floor = pos.line_start.saturating_sub(SCAN_BYTES);
    let mut end = match pos.line_start.checked_sub(1) {
        Some(e) => e,
        None => return Vec::new(),
    };
    while end >= floor {
        let start = pos.text[..end].rfind('\n').map_or(0, |i| i + 1);
        let l = &pos.text[start..end];
        if !l.trim().is_empty() && indent_width(indentation(l)) < width {
            return stops(default_closer(pos.lang), indentation(l));
        }
        match start.checked_sub(1) {
            Some(e) => end = e,
            None => break,
        }
    }
    Vec::new()
}
