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
    /// Text changed since `tree` was last parsed (see
    /// [`Document::apply_changes_deferred`]).
    needs_reparse: bool,
    /// Bumped by every applied change; identifies the text a snapshot saw.
    revision: u64,
    /// Incremental reparses since `tree` was last parsed from scratch (see
    /// [`Document::wants_fresh_parse`]).
    incremental_parses: u32,
    /// While there is no tree (the first parse, or one after a full
    /// replacement, is running elsewhere): the edits since, each with the
    /// revision it was applied to, so that a tree parsed from an older
    /// revision can be caught up ([`Document::install_tree`]).
    missed: MissedEdits,
}

/// The edits a tree parsed elsewhere has not seen.
#[derive(Clone, Debug, Default)]
struct MissedEdits {
    /// The log holds every edit from this revision on (while there is no
    /// tree); trees parsed from an older text cannot be caught up.
    since: u64,
    edits: Vec<(u64, InputEdit)>,
}

impl MissedEdits {
    /// An empty log, complete from revision `since` on.
    fn from(since: u64) -> Self {
        MissedEdits {
            since,
            edits: Vec::new(),
        }
    }
}

/// Edits kept for a tree being parsed elsewhere; past this many, a tree
/// parsed from before them is dropped (a fresh parse costs less than
/// catching up, and the log stays small).
const MISSED_EDITS_MAX: usize = 1024;

/// After this many incremental reparses a tree is worth parsing again from
/// scratch, once the user pauses. Each incremental reparse frees the nodes
/// it replaced and allocates new ones elsewhere: after 1,000 typed lines in
/// a 10,000-line file the tree's ~9 MB of nodes were spread over ~4 MB more
/// pages than a fresh parse of the same text needs (half-empty pages the
/// allocator cannot hand back), ~9 MB more after 6,000. A fresh parse of
/// that file took 37 ms (with a build running alongside), on a background
/// thread.
const FRESH_PARSE_AFTER: u32 = 64;

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
        let mut document = Self::new_unparsed(uri, language_id, version, text);
        document.reparse();
        document
    }

    /// A document whose first parse is left for later ([`reparse`](Self::reparse)
    /// or [`install_tree`](Self::install_tree)): a full parse of a big file takes
    /// far longer than a `didOpen` handler should.
    pub fn new_unparsed(uri: Url, language_id: String, version: i32, text: &str) -> Self {
        let language = Language::detect(Some(&language_id), uri.to_file_path().ok().as_deref());
        Self {
            uri,
            version,
            language_id,
            language,
            rope: Rope::from_str(text),
            tree: None,
            lone_crs: count_lone_cr_str(text),
            needs_reparse: language.is_some(),
            revision: 0,
            incremental_parses: 0,
            missed: MissedEdits::default(),
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
        self.apply_changes_deferred(version, changes, enc)?;
        self.reparse();
        Ok(())
    }

    /// [`apply_changes`](Self::apply_changes) without the reparse: the text
    /// is current and `tree` has been `edit`ed (its byte ranges outside the
    /// changes are right) but not reparsed until [`reparse`](Self::reparse).
    /// For a server that debounces parsing: tree-sitter's incremental
    /// reparse grows with the number of top-level items (milliseconds on a
    /// 1 MB file), the text sync itself takes microseconds. After a full
    /// replacement `tree` is `None` until the reparse.
    pub fn apply_changes_deferred(
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
        self.needs_reparse |= !changes.is_empty();
        self.revision += 1;
        self.version = version;
        Ok(())
    }

    /// Replaces the whole text; the tree is dropped (the next reparse is a
    /// full one, an old tree would be no help).
    fn replace_all(&mut self, text: &str) {
        self.rope = Rope::from_str(text);
        self.tree = None;
        self.lone_crs = count_lone_cr_str(text);
        // No tree of an earlier text is any help now.
        self.missed = MissedEdits::from(self.revision + 1);
    }

    /// Replaces `bytes` (char boundaries, `start <= end <= len`) with `text`,
    /// and tells the tree (without reparsing it).
    fn replace_bytes(&mut self, bytes: ByteRange<usize>, text: &str) {
        let ByteRange { start, end } = bytes;
        if start == end && text.is_empty() {
            return;
        }
        // Plain text is never parsed: no tree to tell, nothing to catch up.
        let edit = self
            .language
            .is_some()
            .then(|| self.input_edit(start, end, text));
        self.update_lone_crs(start, end, text);
        let char_start = self.rope.byte_to_char(start);
        let char_end = self.rope.byte_to_char(end);
        self.rope.remove(char_start..char_end);
        self.rope.insert(char_start, text);
        let Some(edit) = edit else { return };
        match self.tree.as_mut() {
            Some(tree) => tree.edit(&edit),
            None if self.missed.edits.len() < MISSED_EDITS_MAX => {
                self.missed.edits.push((self.revision, edit));
            }
            None => self.missed = MissedEdits::from(self.revision + 1),
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

    /// Brings `tree` up to date with the text, incrementally when there is
    /// an edited tree; a no-op when nothing changed since the last parse or
    /// there is no grammar.
    pub fn reparse(&mut self) {
        if !self.needs_reparse {
            return;
        }
        self.needs_reparse = false;
        if let Some(lang) = self.language {
            let parsed = crate::syntax::parse_rope(lang, &self.rope, self.tree.as_ref());
            self.set_parsed_tree(parsed);
        }
    }

    /// Keeps a tree parsed from the current text, incrementally from `tree`
    /// when there is one (an edited old tree) and from scratch otherwise.
    fn set_parsed_tree(&mut self, parsed: Option<Tree>) {
        self.incremental_parses = match self.tree {
            Some(_) => self.incremental_parses.saturating_add(1),
            None => 0,
        };
        self.tree = parsed;
        // Edits are logged only while there is no tree: from here on.
        self.missed = MissedEdits::from(self.revision);
    }

    /// Identifies the current text: changes whenever a change is applied
    /// (versions alone can repeat with misbehaving clients).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Installs a tree parsed elsewhere (off the notification path) from the
    /// text at `revision`; true if it is the current text's. When changes
    /// arrived since, an edited tree of ours (it has seen their
    /// `InputEdit`s) is kept; but with no tree at all (the parse was the
    /// first, and edits kept coming while it ran), the parsed one is caught
    /// up with the edits it missed and kept for the next reparse, which is
    /// then incremental: else every edit during a full parse longer than
    /// the pause between edits threw it away, and the next analysis parsed
    /// from scratch again (the benchmark's first 16 completions after
    /// opening a 10,000-line file had no prompt built ahead).
    pub fn install_tree(&mut self, revision: u64, tree: Option<Tree>) -> bool {
        if revision == self.revision && self.needs_reparse {
            self.set_parsed_tree(tree);
            self.needs_reparse = false;
            return true;
        }
        let catch_up =
            self.tree.is_none() && revision < self.revision && revision >= self.missed.since;
        if let (true, Some(mut tree)) = (catch_up, tree) {
            for (_, edit) in self.missed.edits.iter().filter(|(r, _)| *r >= revision) {
                tree.edit(edit);
            }
            self.set_parsed_tree(Some(tree));
            // Still behind the text: the next reparse brings it up to date.
            self.needs_reparse = true;
        }
        false
    }

    /// Whether the tree has been reparsed incrementally often enough that a
    /// parse from scratch would give its memory back (see
    /// [`FRESH_PARSE_AFTER`]).
    pub fn wants_fresh_parse(&self) -> bool {
        self.language.is_some() && self.incremental_parses >= FRESH_PARSE_AFTER
    }

    /// Installs a tree parsed from scratch (no old tree) from the text at
    /// `revision`, in place of the current one, which is returned: dropping
    /// a big tree frees tens of thousands of nodes, better done off the
    /// caller's lock. Refused (`Err` gives `tree` back) when a change
    /// arrived since: the current tree has seen its `InputEdit`, `tree` has
    /// not.
    pub fn install_fresh_tree(
        &mut self,
        revision: u64,
        tree: Option<Tree>,
    ) -> Result<Option<Tree>, Option<Tree>> {
        if revision != self.revision || tree.is_none() {
            return Err(tree);
        }
        self.needs_reparse = false;
        self.incremental_parses = 0;
        Ok(std::mem::replace(&mut self.tree, tree))
    }

    /// Whether the text changed since `tree` was parsed (only after
    /// [`apply_changes_deferred`](Self::apply_changes_deferred)).
    pub fn needs_reparse(&self) -> bool {
        self.needs_reparse
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
mod tests;
