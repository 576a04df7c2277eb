//! The document store's unit: one open buffer, kept in sync with the editor
//! by incremental `didChange`s, with its tree-sitter tree reparsed
//! incrementally after each notification.
use std::ops::Range as ByteRange;
use std::path::PathBuf;

use ropey::Rope;
use tower_lsp::lsp_types::{Position, Range, TextDocumentContentChangeEvent, Url};
use tree_sitter::{InputEdit, Tree};

use crate::position::{self, PositionEncoding};
use crate::syntax::Language;

/// An open document: the editor's buffer, not the file on disk.
#[derive(Clone, Debug)]
pub struct Document {
    pub uri: Url,
    pub version: i32,
    pub language_id: String,
    /// `None` = no grammar: plain text everywhere.
    pub language: Option<Language>,
    pub rope: Rope,
    pub tree: Option<Tree>,
    /// Number of `\r` not followed by `\n`. While it is 0, ropey's lines are
    /// tree-sitter's rows and `InputEdit` points cost O(log n); kept up to date
    /// by [`Document::apply_changes`] (edit `rope` directly and it goes stale,
    /// which only makes the tree's row/column wrong — nothing reads them).
    lone_crs: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChangeError {
    #[error("stale change: version {got} is older than the stored version {stored}")]
    StaleVersion { got: i32, stored: i32 },
}

fn count_lone_cr_str(text: &str) -> usize {
    position::count_lone_cr(text.bytes(), None)
}

impl Document {
    pub fn new(uri: Url, language_id: String, version: i32, text: &str) -> Self {
        let language = Language::detect(Some(&language_id), uri.to_file_path().ok().as_deref());
        let rope = Rope::from_str(text);
        let tree = language.and_then(|lang| crate::syntax::parse_rope(lang, &rope, None));
        Self {
            uri,
            version,
            language_id,
            language,
            rope,
            tree,
            lone_crs: count_lone_cr_str(text),
        }
    }

    /// Applies one `didChange` notification: the changes in order, each
    /// against the result of the previous one, then one incremental reparse.
    /// A stale version changes nothing.
    pub fn apply_changes(
        &mut self,
        version: i32,
        changes: &[TextDocumentContentChangeEvent],
        enc: PositionEncoding,
    ) -> Result<(), ChangeError> {
        if version < self.version {
            return Err(ChangeError::StaleVersion {
                got: version,
                stored: self.version,
            });
        }
        for change in changes {
            match change.range {
                Some(range) => {
                    let bytes = position::range_to_bytes(&self.rope, range, enc);
                    self.replace_bytes(bytes, &change.text);
                }
                None => self.replace_all(&change.text),
            }
        }
        if !changes.is_empty() {
            self.reparse();
        }
        self.version = version;
        Ok(())
    }

    /// Replaces the whole text; the tree is dropped (the next reparse is a
    /// full one, an old tree would be no help).
    fn replace_all(&mut self, text: &str) {
        self.rope = Rope::from_str(text);
        self.tree = None;
        self.lone_crs = count_lone_cr_str(text);
    }

    /// Replaces `bytes` (char boundaries, `start <= end <= len`) with `text`,
    /// and tells the tree (without reparsing it).
    fn replace_bytes(&mut self, bytes: ByteRange<usize>, text: &str) {
        let ByteRange { start, end } = bytes;
        if start == end && text.is_empty() {
            return;
        }
        let edit = self
            .tree
            .is_some()
            .then(|| self.input_edit(start, end, text));
        self.update_lone_crs(start, end, text);
        let char_start = self.rope.byte_to_char(start);
        let char_end = self.rope.byte_to_char(end);
        self.rope.remove(char_start..char_end);
        self.rope.insert(char_start, text);
        if let (Some(tree), Some(edit)) = (self.tree.as_mut(), edit) {
            tree.edit(&edit);
        }
    }

    /// The `InputEdit` for replacing `start..end` of the current text.
    fn input_edit(&self, start: usize, end: usize, text: &str) -> InputEdit {
        let lone_cr = self.lone_crs > 0;
        let start_position = position::ts_point(&self.rope, start, lone_cr);
        let old_end_position = if lone_cr {
            // Continue from the start rather than scan the prefix again.
            let removed = self
                .rope
                .bytes_at(start)
                .take(end - start)
                .collect::<Vec<u8>>();
            position::ts_point_advance(start_position, &removed)
        } else {
            position::ts_point(&self.rope, end, false)
        };
        InputEdit {
            start_byte: start,
            old_end_byte: end,
            new_end_byte: start + text.len(),
            start_position,
            old_end_position,
            new_end_position: position::ts_point_advance(start_position, text.as_bytes()),
        }
    }

    /// Updates `lone_crs` for replacing `start..end` with `text`, before the
    /// rope changes. Only CRs inside the replaced bytes, and a CR just before
    /// them (whose next byte changes), can change status.
    fn update_lone_crs(&mut self, start: usize, end: usize, text: &str) {
        let cr_before = start > 0 && self.rope.byte(start - 1) == b'\r';
        let from = if cr_before { start - 1 } else { start };
        let next = self.rope.get_byte(end);
        let old = position::count_lone_cr(self.rope.bytes_at(from).take(end - from), next);
        let prefix: &[u8] = if cr_before { b"\r" } else { b"" };
        let new = position::count_lone_cr(prefix.iter().chain(text.as_bytes()).copied(), next);
        self.lone_crs = (self.lone_crs + new).saturating_sub(old);
    }

    /// Reparses (incrementally when there is an edited tree); with no
    /// grammar, stays plain text.
    fn reparse(&mut self) {
        if let Some(lang) = self.language {
            self.tree = crate::syntax::parse_rope(lang, &self.rope, self.tree.as_ref());
        }
    }

    /// The whole text (a copy; prefer `rope` on hot paths).
    pub fn text(&self) -> String {
        self.rope.to_string()
    }

    /// The text of a byte range (clamped to the document and rounded down to
    /// char boundaries).
    pub fn slice(&self, bytes: ByteRange<usize>) -> String {
        let start = position::floor_char_boundary(&self.rope, bytes.start.min(bytes.end));
        let end = position::floor_char_boundary(&self.rope, bytes.start.max(bytes.end));
        self.rope.byte_slice(start..end).to_string()
    }

    /// The file behind a `file:` URI.
    pub fn path(&self) -> Option<PathBuf> {
        self.uri.to_file_path().ok()
    }

    pub fn len_bytes(&self) -> usize {
        self.rope.len_bytes()
    }

    pub fn offset_of(&self, pos: Position, enc: PositionEncoding) -> usize {
        position::offset_of(&self.rope, pos, enc)
    }

    pub fn position_of(&self, byte: usize, enc: PositionEncoding) -> Position {
        position::position_of(&self.rope, byte, enc)
    }

    pub fn range_to_bytes(&self, range: Range, enc: PositionEncoding) -> ByteRange<usize> {
        position::range_to_bytes(&self.rope, range, enc)
    }

    pub fn range_of(&self, bytes: ByteRange<usize>, enc: PositionEncoding) -> Range {
        position::range_of(&self.rope, bytes, enc)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in tests a panic is the failure report
mod tests {
    use super::*;

    fn doc(text: &str) -> Document {
        let uri = Url::parse("file:///tmp/notes.txt").unwrap();
        Document::new(uri, "plaintext".into(), 1, text)
    }

    fn change(
        range: Option<((u32, u32), (u32, u32))>,
        text: &str,
    ) -> TextDocumentContentChangeEvent {
        TextDocumentContentChangeEvent {
            range: range.map(|((l1, c1), (l2, c2))| {
                Range::new(Position::new(l1, c1), Position::new(l2, c2))
            }),
            range_length: None,
            text: text.into(),
        }
    }

    #[test]
    fn changes_apply_in_order() {
        let mut d = doc("hello 😀 world");
        let changes = [
            change(Some(((0, 6), (0, 8))), "🙂🙂"), // utf-16: the emoji
            change(Some(((0, 0), (0, 5))), "bye"),
            change(Some(((0, 99), (0, 99))), "\r\n!"),
        ];
        d.apply_changes(2, &changes, PositionEncoding::Utf16)
            .unwrap();
        assert_eq!(d.text(), "bye 🙂🙂 world\r\n!");
        assert_eq!(d.version, 2);
        d.apply_changes(3, &[change(None, "new")], PositionEncoding::Utf8)
            .unwrap();
        assert_eq!(d.text(), "new");
    }

    #[test]
    fn stale_version_changes_nothing() {
        let mut d = doc("abc");
        d.apply_changes(5, &[], PositionEncoding::Utf16).unwrap();
        let err = d.apply_changes(4, &[change(None, "x")], PositionEncoding::Utf16);
        assert_eq!(err, Err(ChangeError::StaleVersion { got: 4, stored: 5 }));
        assert_eq!((d.text().as_str(), d.version), ("abc", 5));
    }

    #[test]
    fn lone_cr_count_tracks_edits() {
        let mut d = doc("a\rb\r\nc");
        assert_eq!(d.lone_crs, 1);
        let steps: &[(((u32, u32), (u32, u32)), &str)] = &[
            (((1, 0), (1, 0)), "\n"), // "a\r\nb..." joins the lone CR
            (((0, 1), (1, 0)), "\r"), // replaces "\r\n" with "\r"
            (((0, 1), (0, 1)), "\r"), // "a\r\rb"
            (((2, 1), (2, 1)), "\r"), // "a\r\rb\r\r\nc"
        ];
        for &(range, text) in steps {
            d.apply_changes(1, &[change(Some(range), text)], PositionEncoding::Utf8)
                .unwrap();
            assert_eq!(d.lone_crs, count_lone_cr_str(&d.text()), "{:?}", d.text());
        }
    }
}
