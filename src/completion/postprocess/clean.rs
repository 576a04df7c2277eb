//! Removes chat noise around code: `<think>` blocks, a preamble line, markdown fences.

use std::borrow::Cow;

use super::brackets::prefix_state;

pub(super) struct Cleaned<'a> {
    pub(super) text: Cow<'a, str>,
    /// A fence or a preamble was removed: the output came from a chat model,
    /// which tends to re-type the cursor line's indentation and prefix.
    pub(super) wrapped: bool,
    pub(super) fence_seen: bool,
}

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

pub(super) fn clean<'a>(raw: &'a str, prefix: &str) -> Cleaned<'a> {
    let mut text: Cow<'a, str> = if raw.contains('\r') {
        Cow::Owned(raw.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(raw)
    };
    let mut stripped_think = false;
    if text.contains(THINK_OPEN) || text.contains(THINK_CLOSE) {
        text = Cow::Owned(strip_think(&text));
        stripped_think = true;
    }
    let mut wrapped = false;
    let mut fence_seen = false;
    let mut start = 0usize;
    if stripped_think {
        start = skip_blank_lines(&text, 0);
    }
    // A fence opened on the cursor line is the user's own markdown, not noise.
    let user_fence = prefix.trim_start().starts_with("```");
    // In a comment or a string, prose is what the user is writing.
    let in_prose = {
        let p = prefix.trim_start();
        ["//", "#", "--", "/*", "*"]
            .iter()
            .any(|m| p.starts_with(m))
            || prefix_state(prefix).1.is_some()
    };
    let (first, after_first) = line_at(&text, start);
    if let (false, Some(next)) = (in_prose, after_first) {
        let next = skip_blank_lines(&text, next);
        let (next_line, _) = line_at(&text, next);
        if next < text.len() && is_preamble(first, is_fence_open(next_line)) {
            start = next;
            wrapped = true;
        }
    }
    let mut end = text.len();
    if !user_fence {
        let (first, after_first) = line_at(&text, start);
        let mut opened = false;
        if is_fence_open(first) {
            fence_seen = true;
            wrapped = true;
            opened = true;
            start = after_first.unwrap_or(text.len());
        }
        // A closing fence ends the code; what follows is explanation.
        let mut pos = start;
        while pos < text.len() {
            let (line, next) = line_at(&text, pos);
            if line.trim() == "```"
                && (opened || text[next.unwrap_or(text.len())..].trim().is_empty())
            {
                fence_seen = true;
                wrapped = true;
                end = pos;
                break;
            }
            match next {
                Some(n) => pos = n,
                None => break,
            }
        }
    }
    // Our label for a snippet of another file (`# Path: area.py`): a model
    // that writes one has started another file (seen with Qwen2.5-Coder).
    if !prefix.contains("Path:") {
        let mut pos = start;
        while pos < end {
            let (line, next) = line_at(&text, pos);
            if is_path_label(line) {
                end = pos;
                break;
            }
            match next {
                Some(n) => pos = n,
                None => break,
            }
        }
    }
    let text = match text {
        Cow::Borrowed(s) => Cow::Borrowed(&s[start..end]),
        Cow::Owned(s) => Cow::Owned(s[start..end].to_string()),
    };
    Cleaned {
        text,
        wrapped,
        fence_seen,
    }
}

/// A line like the prompt's snippet labels (`crate::model::fim::snippet_header`):
/// a comment opener, `Path: ` and one path.
fn is_path_label(line: &str) -> bool {
    let line = line.trim();
    let Some(rest) = ["//", "#", "--", ";", "%", "<!--", "/*", "(*", "REM", "\""]
        .iter()
        .find_map(|open| line.strip_prefix(open))
    else {
        return false;
    };
    let Some(path) = rest.trim_start().strip_prefix("Path: ") else {
        return false;
    };
    let path = path.trim_end_matches(['-', '>', '*', ')', ' ']);
    !path.is_empty() && !path.contains(char::is_whitespace)
}

/// Removes `<think>…</think>` blocks; a close with no open drops everything before
/// it, an open with no close drops everything after it.
fn strip_think(s: &str) -> String {
    let mut rest = s;
    if let Some(c) = rest.find(THINK_CLOSE) {
        let opened_before = rest.find(THINK_OPEN).is_some_and(|o| o < c);
        if !opened_before {
            rest = &rest[c + THINK_CLOSE.len()..];
        }
    }
    let mut out = String::with_capacity(rest.len());
    loop {
        match rest.find(THINK_OPEN) {
            None => {
                out.push_str(rest);
                break;
            }
            Some(o) => {
                out.push_str(&rest[..o]);
                match rest[o..].find(THINK_CLOSE) {
                    Some(c) => rest = &rest[o + c + THINK_CLOSE.len()..],
                    None => break,
                }
            }
        }
    }
    out
}

/// The line starting at `pos` (without its newline) and where the next one starts.
fn line_at(s: &str, pos: usize) -> (&str, Option<usize>) {
    let rest = &s[pos.min(s.len())..];
    match rest.find('\n') {
        Some(nl) => (&rest[..nl], Some(pos + nl + 1)),
        None => (rest, None),
    }
}

fn skip_blank_lines(s: &str, mut pos: usize) -> usize {
    loop {
        match line_at(s, pos) {
            (line, Some(next)) if line.trim().is_empty() => pos = next,
            _ => return pos,
        }
    }
}

fn is_fence_open(line: &str) -> bool {
    let t = line.trim();
    t.strip_prefix("```").is_some_and(|lang| {
        lang.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '#' | '.' | '_'))
    })
}

const PREAMBLES: &[&str] = &[
    "here is",
    "here's",
    "here are",
    "sure",
    "certainly",
    "of course",
    "okay",
    "below is",
    "the completed",
    "the completion",
    "this completes",
];

/// A first line that is prose introducing code. Conservative: a known opening
/// phrase, or (only when a fence follows) a capitalised sentence ending in ':';
/// any code punctuation disqualifies it.
fn is_preamble(line: &str, fence_follows: bool) -> bool {
    let t = line.trim();
    if t.is_empty() || t.chars().any(|c| "(){}[];=<>\"`|&$#@\\/".contains(c)) {
        return false;
    }
    let lower = t.to_ascii_lowercase();
    let known = PREAMBLES.iter().any(|p| {
        lower.starts_with(p)
            && !lower[p.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
    });
    if known {
        return true;
    }
    fence_follows
        && t.ends_with(':')
        && t.split_whitespace().count() >= 3
        && t.starts_with(|c: char| c.is_ascii_uppercase())
}
