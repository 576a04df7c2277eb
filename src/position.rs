//! Every conversion between LSP positions and byte offsets in the project.
//!
//! LSP positions are `(line, character)` where lines end at `\n`, `\r\n` or a
//! lone `\r`, and `character` counts code units of the negotiated encoding.
//! Everything else in Fettle works in byte offsets; this module is the only
//! bridge. ropey is built with `cr_lines` only, so ropey's lines are exactly
//! LSP lines and the rope conversions here are O(log n).
//!
//! Clamping follows the spec: a line past the end means the end of the
//! document, a character past the end of a line means the end of that line
//! (before its terminator), and a column or byte inside a character rounds
//! down to that character's start.
//!
//! tree-sitter's `Point` is *not* an LSP position (its rows count only `\n`);
//! [`ts_point`] exists only to feed `InputEdit`s, nothing reads it back.
use std::ops::Range as ByteRange;

use ropey::Rope;
use tower_lsp::lsp_types::{Position, PositionEncodingKind, Range};
use tree_sitter::Point;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum PositionEncoding {
    Utf8,
    #[default]
    Utf16,
    Utf32,
}

impl PositionEncoding {
    pub const ALL: [PositionEncoding; 3] = [Self::Utf8, Self::Utf16, Self::Utf32];

    /// LSP 3.17: the client lists what it supports; utf-8 is cheapest for us
    /// (our offsets are bytes), utf-32 next, utf-16 is the mandatory fallback.
    pub fn negotiate(offered: Option<&[PositionEncodingKind]>) -> Self {
        let offered = offered.unwrap_or(&[]);
        if offered.contains(&PositionEncodingKind::UTF8) {
            Self::Utf8
        } else if offered.contains(&PositionEncodingKind::UTF32) {
            Self::Utf32
        } else {
            Self::Utf16
        }
    }

    pub fn to_lsp(self) -> PositionEncodingKind {
        match self {
            Self::Utf8 => PositionEncodingKind::UTF8,
            Self::Utf16 => PositionEncodingKind::UTF16,
            Self::Utf32 => PositionEncodingKind::UTF32,
        }
    }

    /// Code units of `c` in this encoding.
    pub fn len_char(self, c: char) -> usize {
        match self {
            Self::Utf8 => c.len_utf8(),
            Self::Utf16 => c.len_utf16(),
            Self::Utf32 => 1,
        }
    }

    /// Code units of `s` in this encoding.
    pub fn len_str(self, s: &str) -> usize {
        match self {
            Self::Utf8 => s.len(),
            _ if s.is_ascii() => s.len(),
            Self::Utf16 => s.chars().map(char::len_utf16).sum(),
            Self::Utf32 => s.chars().count(),
        }
    }
}

/// A point in a text with its column in every encoding, so positions can be
/// stored once (e.g. in the workspace index) and served in whatever encoding
/// a client negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash, PartialOrd, Ord)]
pub struct TextPoint {
    pub line: u32,
    pub utf8: u32,
    pub utf16: u32,
    pub utf32: u32,
}

impl TextPoint {
    pub fn column(self, enc: PositionEncoding) -> u32 {
        match enc {
            PositionEncoding::Utf8 => self.utf8,
            PositionEncoding::Utf16 => self.utf16,
            PositionEncoding::Utf32 => self.utf32,
        }
    }

    pub fn to_position(self, enc: PositionEncoding) -> Position {
        Position::new(self.line, self.column(enc))
    }
}

/// Positions are u32 on the wire; a file with more than 4G lines or columns
/// is not something an editor sends, so saturating is fine.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Byte length of the line terminator that ends just before `end` (0, 1 or 2).
fn terminator_len(last: Option<u8>, before_last: Option<u8>) -> usize {
    match (before_last, last) {
        (Some(b'\r'), Some(b'\n')) => 2,
        (_, Some(b'\n' | b'\r')) => 1,
        _ => 0,
    }
}

/// `(start, content_end)` bytes of LSP line `line` (must be `< len_lines`);
/// `content_end` is before the line terminator.
fn rope_line_bounds(rope: &Rope, line: usize) -> (usize, usize) {
    let start = rope.line_to_byte(line);
    let next = rope.line_to_byte(line + 1);
    let last = (next > start).then(|| rope.byte(next - 1));
    let before_last = (next >= start + 2).then(|| rope.byte(next - 2));
    (start, next - terminator_len(last, before_last))
}

/// Column of `byte` (a char boundary on the line starting at `start`).
fn rope_column(rope: &Rope, start: usize, byte: usize, enc: PositionEncoding) -> usize {
    match enc {
        PositionEncoding::Utf8 => byte - start,
        PositionEncoding::Utf16 => {
            rope.char_to_utf16_cu(rope.byte_to_char(byte))
                - rope.char_to_utf16_cu(rope.byte_to_char(start))
        }
        PositionEncoding::Utf32 => rope.byte_to_char(byte) - rope.byte_to_char(start),
    }
}

/// Clamps `byte` to the rope and rounds it down to a char boundary.
pub fn floor_char_boundary(rope: &Rope, byte: usize) -> usize {
    rope.char_to_byte(rope.byte_to_char(byte.min(rope.len_bytes())))
}

/// Byte offset of an LSP position, clamped as the spec says.
pub fn offset_of(rope: &Rope, pos: Position, enc: PositionEncoding) -> usize {
    let line = pos.line as usize;
    if line >= rope.len_lines() {
        return rope.len_bytes();
    }
    let (start, end) = rope_line_bounds(rope, line);
    let col = pos.character as usize;
    match enc {
        PositionEncoding::Utf8 => floor_char_boundary(rope, start.saturating_add(col).min(end)),
        PositionEncoding::Utf16 => {
            let first = rope.char_to_utf16_cu(rope.byte_to_char(start));
            let last = rope.char_to_utf16_cu(rope.byte_to_char(end));
            // utf16_cu_to_char rounds a unit inside a surrogate pair down.
            let unit = first.saturating_add(col).min(last);
            rope.char_to_byte(rope.utf16_cu_to_char(unit))
        }
        PositionEncoding::Utf32 => {
            let first = rope.byte_to_char(start);
            let last = rope.byte_to_char(end);
            rope.char_to_byte(first.saturating_add(col).min(last))
        }
    }
}

/// LSP position of a byte offset (clamped to the document, rounded down to
/// a char boundary; an offset inside a `\r\n` maps to the end of its line).
pub fn position_of(rope: &Rope, byte: usize, enc: PositionEncoding) -> Position {
    let byte = floor_char_boundary(rope, byte);
    let line = rope.byte_to_line(byte);
    let (start, end) = rope_line_bounds(rope, line);
    Position::new(
        to_u32(line),
        to_u32(rope_column(rope, start, byte.min(end), enc)),
    )
}

/// [`position_of`] in all three encodings at once.
pub fn point_of(rope: &Rope, byte: usize) -> TextPoint {
    let byte = floor_char_boundary(rope, byte);
    let line = rope.byte_to_line(byte);
    let (start, end) = rope_line_bounds(rope, line);
    let byte = byte.min(end);
    TextPoint {
        line: to_u32(line),
        utf8: to_u32(byte - start),
        utf16: to_u32(rope_column(rope, start, byte, PositionEncoding::Utf16)),
        utf32: to_u32(rope_column(rope, start, byte, PositionEncoding::Utf32)),
    }
}

/// Byte range of an LSP range; a reversed range is swapped, so `start <= end`.
pub fn range_to_bytes(rope: &Rope, range: Range, enc: PositionEncoding) -> ByteRange<usize> {
    let a = offset_of(rope, range.start, enc);
    let b = offset_of(rope, range.end, enc);
    a.min(b)..a.max(b)
}

/// LSP range of a byte range; a reversed range is swapped.
pub fn range_of(rope: &Rope, bytes: ByteRange<usize>, enc: PositionEncoding) -> Range {
    let (a, b) = (bytes.start.min(bytes.end), bytes.start.max(bytes.end));
    Range::new(position_of(rope, a, enc), position_of(rope, b, enc))
}

/// tree-sitter's `Point` for `byte` (which should be a char boundary):
/// row = number of `\n` before it, column = bytes since the last `\n`. Only
/// for `InputEdit`s; it is not an LSP position.
///
/// `lone_cr` says whether the rope may contain a `\r` not followed by `\n`.
/// When it does not (nearly always), ropey's lines coincide with `\n` lines
/// and this is O(log n); otherwise it scans the text before `byte`.
pub fn ts_point(rope: &Rope, byte: usize, lone_cr: bool) -> Point {
    let byte = byte.min(rope.len_bytes());
    if !lone_cr {
        let row = rope.byte_to_line(byte);
        return Point::new(row, byte - rope.line_to_byte(row));
    }
    let mut point = Point::new(0, 0);
    let mut seen = 0;
    for chunk in rope.chunks() {
        let take = chunk.len().min(byte - seen);
        point = ts_point_advance(point, &chunk.as_bytes()[..take]);
        seen += take;
        if seen == byte {
            break;
        }
    }
    point
}

/// The point reached from `point` after the text `bytes`, in tree-sitter's
/// terms (only `\n` starts a row; columns are bytes).
pub fn ts_point_advance(point: Point, bytes: &[u8]) -> Point {
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(last) => Point::new(
            point.row + bytes.iter().filter(|&&b| b == b'\n').count(),
            bytes.len() - last - 1,
        ),
        None => Point::new(point.row, point.column + bytes.len()),
    }
}

/// Number of `\r` not followed by `\n` in `bytes`, where `next` is the byte
/// after them (`None` at the end of the text).
pub fn count_lone_cr(bytes: impl IntoIterator<Item = u8>, next: Option<u8>) -> usize {
    let mut count = 0;
    let mut prev_cr = false;
    for b in bytes {
        if prev_cr && b != b'\n' {
            count += 1;
        }
        prev_cr = b == b'\r';
    }
    if prev_cr && next != Some(b'\n') {
        count += 1;
    }
    count
}

/// Line starts of a `&str`, for converting many byte offsets of one file
/// (e.g. every tag tree-sitter found) without a rope.
#[derive(Clone, Debug)]
pub struct LineIndex<'a> {
    text: &'a str,
    /// Byte offset where each LSP line starts; `starts[0] == 0`.
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        for (i, &b) in bytes.iter().enumerate() {
            let breaks = match b {
                b'\n' => true,
                // A `\r` followed by `\n` is broken by the `\n`.
                b'\r' => bytes.get(i + 1) != Some(&b'\n'),
                _ => false,
            };
            if breaks {
                starts.push(i + 1);
            }
        }
        Self { text, starts }
    }

    pub fn text(&self) -> &'a str {
        self.text
    }

    /// Number of LSP lines (a trailing terminator starts an empty last line).
    pub fn line_count(&self) -> usize {
        self.starts.len()
    }

    /// Byte offset where LSP line `line` (0-based) starts; the text's end
    /// past the last line.
    pub fn line_start(&self, line: usize) -> usize {
        self.starts.get(line).copied().unwrap_or(self.text.len())
    }

    /// `(start, content_end)` of `line < line_count()`.
    fn line_bounds(&self, line: usize) -> (usize, usize) {
        let start = self.starts[line];
        let next = self
            .starts
            .get(line + 1)
            .copied()
            .unwrap_or(self.text.len());
        let bytes = self.text.as_bytes();
        let last = (next > start).then(|| bytes[next - 1]);
        let before_last = (next >= start + 2).then(|| bytes[next - 2]);
        (start, next - terminator_len(last, before_last))
    }

    fn floor_char_boundary(&self, byte: usize) -> usize {
        let mut byte = byte.min(self.text.len());
        while !self.text.is_char_boundary(byte) {
            byte -= 1;
        }
        byte
    }

    /// The point of `byte`, clamped and rounded down like [`position_of`].
    pub fn point(&self, byte: usize) -> TextPoint {
        let byte = self.floor_char_boundary(byte);
        let line = self.starts.partition_point(|&s| s <= byte) - 1;
        let (start, end) = self.line_bounds(line);
        let prefix = &self.text[start..byte.min(end)];
        let utf8 = prefix.len();
        let (utf16, utf32) = if prefix.is_ascii() {
            (utf8, utf8)
        } else {
            prefix
                .chars()
                .fold((0, 0), |(u16s, u32s), c| (u16s + c.len_utf16(), u32s + 1))
        };
        TextPoint {
            line: to_u32(line),
            utf8: to_u32(utf8),
            utf16: to_u32(utf16),
            utf32: to_u32(utf32),
        }
    }

    pub fn position(&self, byte: usize, enc: PositionEncoding) -> Position {
        self.point(byte).to_position(enc)
    }

    pub fn range(&self, bytes: ByteRange<usize>, enc: PositionEncoding) -> Range {
        let (a, b) = (bytes.start.min(bytes.end), bytes.start.max(bytes.end));
        Range::new(self.position(a, enc), self.position(b, enc))
    }

    /// Byte offset of an LSP position, clamped like [`offset_of`].
    pub fn offset(&self, pos: Position, enc: PositionEncoding) -> usize {
        let line = pos.line as usize;
        if line >= self.starts.len() {
            return self.text.len();
        }
        let (start, end) = self.line_bounds(line);
        let col = pos.character as usize;
        if enc == PositionEncoding::Utf8 {
            return self.floor_char_boundary(start.saturating_add(col).min(end));
        }
        let mut units = 0;
        for (i, c) in self.text[start..end].char_indices() {
            units += enc.len_char(c);
            // A column inside this char (or at its start) rounds down to it.
            if units > col {
                return start + i;
            }
        }
        end
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in tests a panic is the failure report
pub(crate) mod tests;
