//! A line-based outline for documents too big to parse
//! ([`super::too_big_to_parse`]): lines that start, at low indentation,
//! with a definition keyword (`def`, `class`, `fn`, `struct`, `impl`,
//! `function`, `func`, …). No tree, no nesting; time and memory linear in
//! the text with a small constant (each line's start is looked at, never
//! the rest of a long line).
use ropey::Rope;

use super::{Definition, SymbolKind};

/// Deepest indentation (columns, a tab counts 4) of a line the outline
/// looks at: top-level items and the methods one level in.
const MAX_INDENT: usize = 4;
/// Bytes of a line's start examined; the rest of a long line is skipped.
const LINE_PREFIX_BYTES: usize = 256;
/// Longest `detail` (the line, trimmed), in chars.
const MAX_DETAIL_CHARS: usize = 120;

/// Modifiers skipped before the keyword.
const MODIFIERS: &[&str] = &[
    "pub",
    "pub(crate)",
    "pub(super)",
    "pub(self)",
    "async",
    "unsafe",
    "extern",
    "const",
    "export",
    "default",
    "declare",
    "abstract",
    "public",
    "private",
    "protected",
    "static",
    "final",
    "local",
    "inline",
    "template",
];

/// Keyword → kind of the item it introduces.
const KEYWORDS: &[(&str, SymbolKind)] = &[
    ("def", SymbolKind::Function),
    ("class", SymbolKind::Class),
    ("fn", SymbolKind::Function),
    ("struct", SymbolKind::Struct),
    ("enum", SymbolKind::Enum),
    ("trait", SymbolKind::Trait),
    ("impl", SymbolKind::Impl),
    ("mod", SymbolKind::Module),
    ("macro_rules!", SymbolKind::Macro),
    ("type", SymbolKind::TypeAlias),
    ("interface", SymbolKind::Interface),
    ("namespace", SymbolKind::Namespace),
    ("function", SymbolKind::Function),
    ("function*", SymbolKind::Function),
    ("func", SymbolKind::Function),
];

/// At most `max` definitions found line by line, in document order (byte
/// ranges into `rope`: the line, and the name in it).
pub fn line_outline(rope: &Rope, max: usize) -> Vec<Definition> {
    outline(rope.chunks(), max)
}

/// [`line_outline`] of a string.
pub fn line_outline_str(text: &str, max: usize) -> Vec<Definition> {
    outline(std::iter::once(text), max)
}

/// Scans the text's chunks for line starts (`memchr` for the newlines; a
/// line is copied only up to [`LINE_PREFIX_BYTES`]).
fn outline<'a>(chunks: impl Iterator<Item = &'a str>, max: usize) -> Vec<Definition> {
    let mut out = Vec::new();
    // The current line's first bytes, and where it starts.
    let mut prefix: Vec<u8> = Vec::with_capacity(LINE_PREFIX_BYTES);
    let mut line_start = 0usize;
    let mut offset = 0usize;
    let finish = |prefix: &mut Vec<u8>, line_start: usize, out: &mut Vec<Definition>| {
        if out.len() < max {
            if let Some(def) = outline_line(whole_chars(prefix), line_start) {
                out.push(def);
            }
        }
        prefix.clear();
    };
    for chunk in chunks {
        let bytes = chunk.as_bytes();
        let mut from = 0;
        while from < bytes.len() {
            if out.len() >= max {
                return out;
            }
            let newline = memchr::memchr(b'\n', &bytes[from..]);
            let end = newline.map_or(bytes.len(), |i| from + i);
            let room = LINE_PREFIX_BYTES.saturating_sub(prefix.len());
            prefix.extend_from_slice(&bytes[from..end.min(from + room)]);
            match newline {
                Some(_) => {
                    finish(&mut prefix, line_start, &mut out);
                    line_start = offset + end + 1;
                    from = end + 1;
                }
                None => from = end,
            }
        }
        offset += bytes.len();
    }
    if !prefix.is_empty() {
        finish(&mut prefix, line_start, &mut out);
    }
    out
}

/// The longest valid UTF-8 start of `bytes` (a prefix cut mid-char), up
/// to a `\r`.
fn whole_chars(bytes: &[u8]) -> &str {
    let bytes = match bytes.iter().position(|&b| b == b'\r') {
        Some(cr) => &bytes[..cr],
        None => bytes,
    };
    match std::str::from_utf8(bytes) {
        Ok(text) => text,
        // Valid up to the cut: chunks are `str`s, only the prefix's end can split a char.
        Err(err) => std::str::from_utf8(&bytes[..err.valid_up_to()]).unwrap_or_default(),
    }
}

/// The definition a line (its first bytes) starts, if any; `at` is the
/// line's byte offset in the document.
fn outline_line(line: &str, at: usize) -> Option<Definition> {
    let mut indent = 0;
    for ch in line.chars() {
        match ch {
            ' ' => indent += 1,
            '\t' => indent += 4,
            _ => break,
        }
        if indent > MAX_INDENT {
            return None;
        }
    }
    let body = line.trim_start();
    // Every keyword and modifier starts so: most lines end here.
    if !body.starts_with(|c: char| c.is_ascii_lowercase()) {
        return None;
    }
    let mut rest = body;
    let mut kind = None;
    // Modifiers, then the keyword: `pub(crate) async fn`, `export default function`.
    while let Some((word, after)) = split_word(rest) {
        if let Some((_, k)) = KEYWORDS.iter().find(|(kw, _)| *kw == word) {
            kind = Some(*k);
            rest = after;
            break;
        }
        if !MODIFIERS.contains(&word) {
            return None;
        }
        rest = after;
    }
    let mut kind = kind?;
    let rest_trimmed = rest.trim_start();
    let (name, name_offset) = if kind == SymbolKind::Impl {
        // `impl<T> Trait for Type {`: the header is the name.
        let header = rest_trimmed.split(['{', ';']).next().unwrap_or_default();
        let header = header.split(" where").next().unwrap_or_default().trim_end();
        (header, 0)
    } else {
        // Go's `func (r *T) Name(` is a method named after the receiver.
        let (receiver, after_receiver) = match rest_trimmed.strip_prefix('(') {
            Some(inner) if kind == SymbolKind::Function => {
                let close = inner.find(')')?;
                (true, inner.get(close + 1..)?.trim_start())
            }
            _ => (false, rest_trimmed),
        };
        if receiver {
            kind = SymbolKind::Method;
        }
        let end = after_receiver
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '$' | '.' | ':')))
            .unwrap_or(after_receiver.len());
        let name = after_receiver[..end].trim_end_matches([':', '.']);
        let offset = rest_trimmed.len() - after_receiver.len();
        (name, offset)
    };
    if name.is_empty() {
        return None;
    }
    if indent > 0 && matches!(kind, SymbolKind::Function) {
        kind = SymbolKind::Method;
    }
    let name_start = at + (line.len() - rest_trimmed.len()) + name_offset;
    let detail: String = body.trim_end().chars().take(MAX_DETAIL_CHARS).collect();
    Some(Definition {
        name: name.to_owned(),
        kind,
        range: at + (line.len() - body.len())..at + line.trim_end().len(),
        name_range: name_start..name_start + name.len(),
        detail: Some(detail),
    })
}

/// The first word of `s` (after whitespace) and what follows it.
fn split_word(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    if s.is_empty() {
        return None;
    }
    let end = s
        .find(|c: char| c.is_whitespace() || c == '<' || (c == '(' && !s.starts_with("pub(")))
        .unwrap_or(s.len());
    // `pub(crate)` is one word; `fn(` is not a definition keyword followed by a name.
    let end = if s.starts_with("pub(") {
        s.find(')').map_or(end, |i| i + 1)
    } else {
        end
    };
    Some((&s[..end], &s[end..]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in tests a panic is the failure report
mod tests {
    use super::*;

    fn outline(text: &str) -> Vec<(String, SymbolKind, String)> {
        let rope = Rope::from_str(text);
        line_outline(&rope, 100)
            .into_iter()
            .map(|d| {
                assert!(d.range.start <= d.name_range.start && d.name_range.end <= d.range.end);
                let name = rope.byte_slice(d.name_range.clone()).to_string();
                assert_eq!(name, d.name, "name range");
                (d.name, d.kind, rope.byte_slice(d.range).to_string())
            })
            .collect()
    }

    #[test]
    fn finds_definitions_by_keyword() {
        let text = "import os\nclass Foo(Base):\n    def bar(self):\n        def inner(): pass\n\
                    async def main():\n    x = 1\n";
        let got = outline(text);
        let names: Vec<_> = got.iter().map(|(n, k, _)| (n.as_str(), *k)).collect();
        assert_eq!(
            names,
            [
                ("Foo", SymbolKind::Class),
                ("bar", SymbolKind::Method),
                ("main", SymbolKind::Function)
            ]
        );
        assert_eq!(got[1].2, "def bar(self):");
    }

    #[test]
    fn rust_go_js_lua() {
        let text = "pub(crate) async fn run<T>(x: T) {}\nimpl<T> Display for W<T> where T: X {\n\
                    pub struct S;\nmacro_rules! m {\nfunc (r *T) Get() int {\nfunc Top() {}\n\
                    export default function* gen() {}\nlocal function M.f() end\n\
                    \t\t\tfn deep() {}\nlet f = function() {};\nfn (x) {}\n";
        let names: Vec<_> = outline(text).into_iter().map(|(n, k, _)| (n, k)).collect();
        let expected = [
            ("run", SymbolKind::Function),
            ("<T> Display for W<T>", SymbolKind::Impl),
            ("S", SymbolKind::Struct),
            ("m", SymbolKind::Macro),
            ("Get", SymbolKind::Method),
            ("Top", SymbolKind::Function),
            ("gen", SymbolKind::Function),
            ("M.f", SymbolKind::Function),
        ];
        let expected: Vec<_> = expected.iter().map(|(n, k)| (n.to_string(), *k)).collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn bounded_count_and_long_lines() {
        let mut text = String::from("def first(): pass\n");
        text.push_str(&"x".repeat(1 << 20));
        text.push_str("\n😀\ndef after_long(): pass\n");
        text.push_str(&"def f(): pass\n".repeat(50));
        let rope = Rope::from_str(&text);
        let defs = line_outline(&rope, 10);
        assert_eq!(defs, line_outline_str(&text, 10));
        assert_eq!(defs.len(), 10);
        assert_eq!(defs[0].name, "first");
        assert_eq!(defs[1].name, "after_long");
        let at = text.find("def after_long").unwrap();
        assert_eq!(defs[1].range.start, at);
        assert_eq!(defs[1].name_range.start, at + 4);
    }
}
