//! Parsing with reused, thread-local tree-sitter parsers.
use std::cell::RefCell;

use ropey::Rope;
use tree_sitter::{Parser, Tree};

use super::Language;

thread_local! {
    // `Parser` is not `Sync` and is costly to create, so each thread keeps one
    // per language, created lazily.
    static PARSERS: RefCell<Vec<Option<Parser>>> = const { RefCell::new(Vec::new()) };
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
///
/// For an incremental parse the caller must already have applied
/// `old.edit(..)` for every change since `old` was produced.
pub fn parse_rope(lang: Language, text: &Rope, old: Option<&Tree>) -> Option<Tree> {
    let len = text.len_bytes();
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
    with_parser(lang, |parser| parser.parse(text, old))
}
