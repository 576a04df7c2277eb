//! Finding a syntax error's fault by trying small repairs (see `errors.rs`).
use tree_sitter::{InputEdit, Language, Node, Parser, Point, Tree};

use super::{count_errors, describe, first_error_from, is_quote, missing, next_start};
use crate::syntax::SyntaxError;

/// Larger files get the errors as the tree shows them: each trial reparses
/// (about 2 ms per trial for 16 KiB of Python, see docs/performance.md).
const MAX_REPAIR_BYTES: usize = 64 << 10;
/// Reparses per call, all errors together; bounds the work on a file full
/// of errors (each is an incremental parse: ~0.1 ms on a small file).
const MAX_TRIALS: usize = 400;
/// Bytes reparsed per call, all trials together: a trial costs about the
/// file's size (error recovery defeats most incremental reuse), so big
/// files get fewer trials. Work, not wall time, is the bound, so the same
/// text always gets the same messages (about 130 ms for 16 KiB of Python
/// with ten faults in a release build; see docs/performance.md). Errors not
/// reached within it get the tree's own messages.
const MAX_REPARSED_BYTES: usize = 1 << 20;
/// Insertion points tried per error: after the token before it and after
/// each of its first tokens.
const MAX_POSITIONS: usize = 48;
/// Tokens whose absence is the usual mistake, most likely first (ties go to
/// the earlier one). Quotes are tried separately, at line ends.
const CANDIDATES: &[&str] = &[
    ":", ",", ";", ")", "]", "}", "end", "then", "do", "=>", "{", "in",
];

/// A repair that made things better: insert `text` at `at`, or delete
/// `at..at + deleted`.
struct Fix {
    at: usize,
    text: String,
    deleted: usize,
    /// Errors left from the error's start on.
    score: usize,
    /// Only blanks follow `at` on its line.
    line_end: bool,
    /// The closing quote of this string was missing (`at` is its line end).
    string_start: Option<usize>,
    tree: Tree,
    repaired: String,
}

/// An applied fix, to map positions in the repaired text back.
struct Edit {
    at: usize,
    inserted: usize,
    deleted: usize,
}

pub(super) struct Repairer {
    parser: Parser,
    language: Language,
    text: String,
    tree: Tree,
    edits: Vec<Edit>,
    trials: usize,
    reparsed_bytes: usize,
    budget_logged: bool,
}

impl Repairer {
    /// `None` when the file is too big for repairs, or the grammar cannot
    /// be loaded into a parser.
    pub(super) fn new(tree: &Tree, text: &str) -> Option<Self> {
        if text.len() > MAX_REPAIR_BYTES {
            return None;
        }
        let language: Language = (*tree.language()).clone();
        let mut parser = Parser::new();
        parser.set_language(&language).ok()?;
        Some(Self {
            parser,
            language,
            text: text.to_owned(),
            tree: tree.clone(),
            edits: Vec::new(),
            trials: 0,
            reparsed_bytes: 0,
            budget_logged: false,
        })
    }

    pub(super) fn run(mut self, max: usize) -> Vec<SyntaxError> {
        let mut out = Vec::new();
        // A block left open, by indentation: tree-sitter notices it only at
        // the next item or the end of the file, often after a parse that
        // makes no sense. Closing it where the indentation says is the
        // repair, when that removes errors.
        let tree = self.tree.clone();
        if let Some((opener, closer, at)) =
            super::brackets::dedent_culprit(tree.root_node(), &self.text)
        {
            let now = count_errors(tree.root_node(), usize::MAX);
            if let Some(fix) = self.try_edit(at, closer, 0, now) {
                if fix.score < now {
                    out.push(SyntaxError {
                        range: opener.byte_range(),
                        message: format!("unclosed \"{}\"", opener.kind()),
                    });
                    self.apply(fix);
                }
            }
        }
        let mut from = 0;
        while out.len() < max {
            let tree = self.tree.clone();
            let Some(node) = first_error_from(tree.root_node(), from) else {
                break;
            };
            let fix = if node.is_error() {
                self.best_fix(node)
            } else {
                None
            };
            match fix {
                Some(fix) => {
                    out.push(self.report(&fix));
                    from = fix.at + fix.text.len();
                    self.apply(fix);
                }
                None => {
                    let error = if node.is_missing() {
                        missing(node, &self.text)
                    } else {
                        describe(node, &self.text)
                    };
                    out.push(self.map(error));
                    from = next_start(node);
                }
            }
        }
        // The unclosed block (reported first) may lie after other errors.
        out.sort_by_key(|e| e.range.start);
        out.truncate(max);
        out
    }

    fn apply(&mut self, fix: Fix) {
        self.edits.push(Edit {
            at: fix.at,
            inserted: fix.text.len(),
            deleted: fix.deleted,
        });
        self.text = fix.repaired;
        self.tree = fix.tree;
    }

    /// The repair near `error` that leaves the fewest errors from its start
    /// on (fewer than now), insertions before deletions, earliest first.
    fn best_fix(&mut self, error: Node) -> Option<Fix> {
        let now = count_errors(self.tree.root_node(), usize::MAX);
        let mut best: Option<Fix> = None;
        // Fewest errors left; then an insertion over a deletion; then at a
        // line's end (where `:` and closers go missing: `g(x, 1` is better
        // closed after `1` than after `x`); then the earliest.
        let rank = |fix: &Fix| (fix.score, fix.deleted > 0, !fix.line_end);
        let better = |fix: &Fix, best: &Option<Fix>| match best {
            None => fix.score < now,
            Some(b) => rank(fix) < rank(b),
        };
        for (at, state) in insertion_points(error, &self.text) {
            let line_end = self.text[at..].starts_with(['\n', '\r']) || at == self.text.len();
            let mut tokens: Vec<(String, Option<usize>)> = CANDIDATES
                .iter()
                .filter(|t| self.may_follow(state, t))
                .map(|t| (spaced(&self.text, at, t), None))
                .collect();
            if line_end {
                if let Some((quote, opened)) = open_quote(&self.text, error, at) {
                    tokens.push((quote, Some(opened)));
                }
            }
            // `"hello;` lost its quote before the `;`: close it there too.
            let before_semicolon = line_end && self.text[..at].ends_with(';');
            let tries = tokens.into_iter().flat_map(|(token, string_start)| {
                let earlier = (string_start.is_some() && before_semicolon)
                    .then(|| (at - 1, token.clone(), string_start));
                std::iter::once((at, token, string_start)).chain(earlier)
            });
            for (at, token, string_start) in tries.collect::<Vec<_>>() {
                let Some(mut fix) = self.try_edit(at, &token, 0, now) else {
                    return best;
                };
                fix.string_start = string_start;
                if better(&fix, &best) {
                    best = Some(fix);
                }
                // Nothing ranks higher than an insertion at a line's end
                // that leaves no error, and ties go to the earlier one.
                if best.as_ref().is_some_and(|b| rank(b) == (0, false, false)) {
                    return best;
                }
            }
        }
        // A stray token: deleting it is the repair.
        let stray = error.byte_range();
        let one_token = error.child_count() <= 1 && !self.text[stray.clone()].contains('\n');
        if one_token && !stray.is_empty() {
            if let Some(fix) = self.try_edit(stray.start, "", stray.len(), now) {
                if better(&fix, &best) {
                    best = Some(fix);
                }
            }
        }
        best
    }

    /// Whether `token` can come next in parse state `state` (when known).
    fn may_follow(&self, state: Option<u16>, token: &str) -> bool {
        let Some(state) = state else { return true };
        self.language
            .lookahead_iterator(state)
            .is_none_or(|mut it| it.iter_names().any(|name| name == token))
    }

    /// Reparses with one edit; `None` once the trial budget is spent.
    fn try_edit(&mut self, at: usize, insert: &str, deleted: usize, cap: usize) -> Option<Fix> {
        if self.trials >= MAX_TRIALS || self.reparsed_bytes >= MAX_REPARSED_BYTES {
            if !self.budget_logged {
                self.budget_logged = true;
                tracing::debug!(
                    trials = self.trials,
                    bytes = self.reparsed_bytes,
                    "syntax error repairs stopped at their budget"
                );
            }
            return None;
        }
        self.trials += 1;
        self.reparsed_bytes += self.text.len();
        let mut repaired = String::with_capacity(self.text.len() + insert.len());
        repaired.push_str(&self.text[..at]);
        repaired.push_str(insert);
        repaired.push_str(&self.text[at + deleted..]);
        let mut old = self.tree.clone();
        old.edit(&InputEdit {
            start_byte: at,
            old_end_byte: at + deleted,
            new_end_byte: at + insert.len(),
            start_position: point(&self.text, at),
            old_end_position: point(&self.text, at + deleted),
            new_end_position: point(&repaired, at + insert.len()),
        });
        let tree = self.parser.parse(&repaired, Some(&old))?;
        // Only "fewer than now" matters: stop counting there.
        let score = count_errors(tree.root_node(), cap);
        Some(Fix {
            at,
            text: insert.to_owned(),
            deleted,
            score,
            line_end: ends_line(&self.text, at + deleted),
            string_start: None,
            tree,
            repaired,
        })
    }

    fn report(&self, fix: &Fix) -> SyntaxError {
        let error = if fix.deleted > 0 {
            let stray = &self.text[fix.at..fix.at + fix.deleted];
            SyntaxError {
                range: fix.at..fix.at + fix.deleted,
                message: format!("unexpected \"{}\"", super::snippet(stray)),
            }
        } else if let Some(opened) = fix.string_start {
            SyntaxError {
                range: opened..fix.at,
                message: "unterminated string".to_owned(),
            }
        } else {
            SyntaxError {
                range: fix.at..fix.at,
                message: format!("expected \"{}\"", fix.text.trim_start()),
            }
        };
        self.map(error)
    }

    /// An error found in the repaired text, in the caller's text.
    fn map(&self, error: SyntaxError) -> SyntaxError {
        let start = self.original_offset(error.range.start);
        let end = self.original_offset(error.range.end).max(start);
        SyntaxError {
            range: start..end,
            message: error.message,
        }
    }

    fn original_offset(&self, mut at: usize) -> usize {
        for edit in self.edits.iter().rev() {
            if edit.inserted > 0 {
                if at >= edit.at + edit.inserted {
                    at -= edit.inserted;
                } else if at > edit.at {
                    at = edit.at;
                }
            } else if at >= edit.at {
                at += edit.deleted;
            }
        }
        at
    }
}

/// Where a missing token may go: after the token before the ERROR, and after
/// each of the ERROR's first tokens, with the parse state there when the
/// tree knows it.
fn insertion_points(error: Node, text: &str) -> Vec<(usize, Option<u16>)> {
    let mut points = Vec::new();
    if let Some(prev) = previous_leaf(error) {
        points.push((prev.end_byte(), known_state(prev)));
    }
    let mut cursor = error.walk();
    'walk: loop {
        let node = cursor.node();
        if node.child_count() == 0 {
            if !node.is_extra() && !node.is_missing() {
                points.push((node.end_byte(), known_state(node)));
                // A string opened here may be missing its closing quote
                // at the end of the line.
                if node.kind() == "string_start" || is_quote(node.kind()) {
                    let at = node.end_byte();
                    let end = text[at..].find(['\n', '\r']).map_or(text.len(), |i| at + i);
                    points.push((end, None));
                }
                if points.len() >= MAX_POSITIONS {
                    break;
                }
            }
        } else if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() || cursor.node() == error {
                break 'walk;
            }
        }
    }
    points.sort_by_key(|p| p.0);
    points.dedup_by_key(|p| p.0);
    points
}

/// The state after `leaf`, unless it was lexed during error recovery (0) or
/// is unknown (`u16::MAX`).
fn known_state(leaf: Node) -> Option<u16> {
    let state = leaf.next_parse_state();
    (state != 0 && state != u16::MAX && leaf.parse_state() != 0).then_some(state)
}

/// The last non-extra leaf before `node`.
fn previous_leaf(node: Node) -> Option<Node> {
    let mut current = node;
    loop {
        if let Some(prev) = current.prev_sibling() {
            let mut leaf = prev;
            while let Some(last) = leaf.child(leaf.child_count().saturating_sub(1)) {
                leaf = last;
            }
            if leaf.is_extra() || leaf.is_missing() || leaf.end_byte() == leaf.start_byte() {
                current = leaf;
                continue;
            }
            return Some(leaf);
        }
        current = current.parent()?;
    }
}

/// The token as inserted: a keyword gets a space before it.
fn spaced(text: &str, at: usize, token: &str) -> String {
    let word = token.chars().all(|c| c.is_ascii_alphabetic());
    let glued = text[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ')');
    if word && glued {
        format!(" {token}")
    } else {
        token.to_owned()
    }
}

/// The quote that opens an unterminated string on the line ending at
/// `line_end`, and where it is: the ERROR's first token when it is a quote,
/// else the last quote of the line (any string before it is closed).
fn open_quote(text: &str, error: Node, line_end: usize) -> Option<(String, usize)> {
    let line_start = text[..line_end].rfind(['\n', '\r']).map_or(0, |i| i + 1);
    let first = super::first_leaf(error);
    let leaf = text.get(first.byte_range()).unwrap_or("");
    if first.start_byte() >= line_start && (first.kind() == "string_start" || is_quote(leaf)) {
        // Python's `f"`, `r'''`: the quote is what follows the prefix.
        let quote = leaf.trim_start_matches(|c: char| c.is_ascii_alphabetic());
        return (!quote.is_empty()).then(|| (quote.to_owned(), first.start_byte()));
    }
    let line = &text[line_start..line_end];
    let (i, c) = line
        .char_indices()
        .rev()
        .find(|(_, c)| is_quote(&c.to_string()))?;
    Some((c.to_string(), line_start + i))
}

/// Tree-sitter's point for a byte offset (rows by `\n`, as tree-sitter
/// counts them; only fed back to tree-sitter).
fn point(text: &str, at: usize) -> Point {
    let head = &text.as_bytes()[..at.min(text.len())];
    let row = head.iter().filter(|&&b| b == b'\n').count();
    let column = head.iter().rev().take_while(|&&b| b != b'\n').count();
    Point { row, column }
}

/// Whether only blanks follow `at` on its line.
fn ends_line(text: &str, at: usize) -> bool {
    text[at..]
        .split(['\n', '\r'])
        .next()
        .is_none_or(|rest| rest.trim().is_empty())
}
