//! Parsing with reused, thread-local tree-sitter parsers.
use std::cell::RefCell;
use std::sync::OnceLock;

use ropey::Rope;
use tree_sitter::{Parser, Tree};

use super::Language;

thread_local! {
    // `Parser` is not `Sync` and is costly to create, so each thread keeps one
    // per language, created lazily.
    static PARSERS: RefCell<Vec<Option<Parser>>> = const { RefCell::new(Vec::new()) };
}

/// Largest text tree-sitter is run on (bytes); bigger documents get no tree
/// (no syntax diagnostics, a line-based outline: [`super::line_outline`]).
/// A tree costs far more memory than its text: measured peaks of the
/// server for a documentSymbol on a Python file of `x = 1` lines (release
/// build, `docs/performance.md`) grow ~200 bytes per byte parsed (10 MB:
/// 2.0 GB, 20 MB: 3.8 GB and 47 s); at 1 MB it stays near 200 MB.
/// Hand-written source files are far below this; generated ones (bundles,
/// amalgamations, data tables) are what goes over.
pub const MAX_PARSE_BYTES: usize = 1 << 20;

/// [`MAX_PARSE_BYTES`], or `FETTLE_MAX_PARSE_BYTES` when set to a number
/// (to measure the cost of parsing bigger files, or to lower the bound on
/// a small machine). Read once.
pub fn max_parse_bytes() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let from_env = std::env::var("FETTLE_MAX_PARSE_BYTES").ok();
        match from_env.as_deref().map(|v| v.trim().parse::<usize>()) {
            Some(Ok(limit)) => limit,
            Some(Err(err)) => {
                tracing::warn!(
                    "FETTLE_MAX_PARSE_BYTES={:?} is not a number of bytes ({err}); using {}",
                    from_env.unwrap_or_default(),
                    MAX_PARSE_BYTES
                );
                MAX_PARSE_BYTES
            }
            None => MAX_PARSE_BYTES,
        }
    })
}

/// Whether a text of `len` bytes is over the parse limit (never parsed).
pub fn too_big_to_parse(len: usize) -> bool {
    len > max_parse_bytes()
}

fn new_parser(lang: Language) -> Option<Parser> {
    let mut parser = Parser::new();
    match parser.set_language(&lang.ts_language()) {
        Ok(()) => Some(parser),
        Err(err) => {
            tracing::error!("tree-sitter grammar for {} rejected: {err}", lang.name());
            None
        }
    }
}

/// Runs `f` with this thread's parser for `lang`.
fn with_parser<R>(lang: Language, f: impl FnOnce(&mut Parser) -> Option<R>) -> Option<R> {
    PARSERS.with(|cell| {
        // A re-entrant call (impossible today) would find the table borrowed;
        // fall back to a throwaway parser rather than panic.
        let Ok(mut parsers) = cell.try_borrow_mut() else {
            return new_parser(lang).and_then(|mut p| f(&mut p));
        };
        if parsers.len() < Language::ALL.len() {
            parsers.resize_with(Language::ALL.len(), || None);
        }
        let slot = parsers.get_mut(lang.index())?;
        if slot.is_none() {
            *slot = new_parser(lang);
        }
        let parser = slot.as_mut()?;
        let result = f(parser);
        if result.is_none() {
            // A failed parse can leave the parser mid-document; the next
            // parse must start clean.
            parser.reset();
        }
        result
    })
}

/// Parses a rope, feeding tree-sitter its chunks directly (no `String` copy).
/// `None` when the grammar fails or the text is over the parse limit
/// ([`too_big_to_parse`]): every caller copes with having no tree.
///
/// For an incremental parse the caller must already have applied
/// `old.edit(..)` for every change since `old` was produced.
pub fn parse_rope(lang: Language, text: &Rope, old: Option<&Tree>) -> Option<Tree> {
    let len = text.len_bytes();
    if too_big_to_parse(len) {
        return None;
    }
    let mut read = |byte: usize, _pos: tree_sitter::Point| -> &[u8] {
        if byte >= len {
            return &[];
        }
        let (chunk, chunk_start, _, _) = text.chunk_at_byte(byte);
        chunk
            .as_bytes()
            .get(byte - chunk_start..)
            .unwrap_or_default()
    };
    with_parser(lang, |parser| {
        parser.parse_with_options(&mut read, old, None)
    })
}

/// Parses a string. See [`parse_rope`] for the meaning of `old`.
pub fn parse_str(lang: Language, text: &str, old: Option<&Tree>) -> Option<Tree> {
    if too_big_to_parse(text.len()) {
        return None;
    }
    with_parser(lang, |parser| parser.parse(text, old))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_over_the_limit_is_parsed() {
        let limit = max_parse_bytes();
        let line = "x = 1\n";
        let under = line.repeat(limit / line.len());
        assert!(parse_str(Language::Python, &under, None).is_some());
        let over = format!("{under}{line}");
        assert!(too_big_to_parse(over.len()));
        assert!(parse_str(Language::Python, &over, None).is_none());
        assert!(parse_rope(Language::Python, &Rope::from_str(&over), None).is_none());
    }
}
