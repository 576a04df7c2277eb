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
pub(crate) mod tests {
    use super::PositionEncoding::{Utf16, Utf32, Utf8};
    use super::*;

    const fn p(line: u32, character: u32) -> Position {
        Position { line, character }
    }

    #[test]
    fn negotiate() {
        use PositionEncodingKind as K;
        let cases: &[(Option<&[K]>, PositionEncoding)] = &[
            (None, Utf16),
            (Some(&[]), Utf16),
            (Some(&[K::UTF16]), Utf16),
            (Some(&[K::UTF16, K::UTF8]), Utf8),
            (Some(&[K::UTF32, K::UTF16]), Utf32),
            (Some(&[K::UTF32, K::UTF8]), Utf8),
            (Some(&[K::new("latin-1")]), Utf16),
        ];
        for (offered, want) in cases {
            assert_eq!(PositionEncoding::negotiate(*offered), *want, "{offered:?}");
        }
        for enc in PositionEncoding::ALL {
            assert_eq!(PositionEncoding::negotiate(Some(&[enc.to_lsp()])), enc);
        }
    }

    /// `(text, position, [byte for utf-8, utf-16, utf-32])`.
    type OffsetCase = (&'static str, Position, [usize; 3]);

    // 😀 = 4 UTF-8 bytes / 2 UTF-16 units; 日 = 3 / 1; é as e + U+0301 = 1+2 / 2.
    const OFFSET_CASES: &[OffsetCase] = &[
        // ASCII
        ("hello\nworld", p(0, 0), [0, 0, 0]),
        ("hello\nworld", p(0, 3), [3, 3, 3]),
        ("hello\nworld", p(1, 2), [8, 8, 8]),
        // end of line, character past the end of the line
        ("hello\nworld", p(0, 5), [5, 5, 5]),
        ("hello\nworld", p(0, 99), [5, 5, 5]),
        ("hello\nworld", p(0, u32::MAX), [5, 5, 5]),
        // last line without newline: end of doc
        ("hello\nworld", p(1, 5), [11, 11, 11]),
        ("hello\nworld", p(1, 6), [11, 11, 11]),
        // line past the end
        ("hello\nworld", p(2, 0), [11, 11, 11]),
        ("hello\nworld", p(u32::MAX, u32::MAX), [11, 11, 11]),
        // trailing newline: an empty last line
        ("ab\n", p(1, 0), [3, 3, 3]),
        ("ab\n", p(1, 4), [3, 3, 3]),
        ("ab\n", p(2, 0), [3, 3, 3]),
        // empty document
        ("", p(0, 0), [0, 0, 0]),
        ("", p(0, 7), [0, 0, 0]),
        ("", p(3, 1), [0, 0, 0]),
        // astral plane
        ("a😀b", p(0, 1), [1, 1, 1]),
        ("a😀b", p(0, 5), [5, 6, 6]),
        ("a😀b", p(0, 3), [1, 5, 6]),
        ("a😀b", p(0, 2), [1, 1, 5]),
        ("a😀b\nx", p(0, 9), [6, 6, 6]),
        ("😀😀\n", p(0, 4), [4, 8, 8]),
        // CJK
        ("日本語", p(0, 1), [0, 3, 3]),
        ("日本語", p(0, 3), [3, 9, 9]),
        ("日本語", p(0, 4), [3, 9, 9]),
        ("日本語", p(0, 6), [6, 9, 9]),
        // combining mark: two code points, each addressable
        ("e\u{301}x", p(0, 1), [1, 1, 1]),
        ("e\u{301}x", p(0, 2), [1, 3, 3]),
        ("e\u{301}x", p(0, 3), [3, 4, 4]),
        // CRLF: the terminator is not part of the line
        ("ab\r\ncd", p(0, 2), [2, 2, 2]),
        ("ab\r\ncd", p(0, 3), [2, 2, 2]),
        ("ab\r\ncd", p(1, 0), [4, 4, 4]),
        ("ab\r\ncd", p(1, 1), [5, 5, 5]),
        ("ab\r\n", p(1, 0), [4, 4, 4]),
        // lone CR is a line break
        ("ab\rcd", p(0, 5), [2, 2, 2]),
        ("ab\rcd", p(1, 1), [4, 4, 4]),
        ("\r", p(1, 0), [1, 1, 1]),
        // mixed line endings
        ("a\nb\r\nc\rd", p(1, 1), [3, 3, 3]),
        ("a\nb\r\nc\rd", p(2, 0), [5, 5, 5]),
        ("a\nb\r\nc\rd", p(2, 9), [6, 6, 6]),
        ("a\nb\r\nc\rd", p(3, 1), [8, 8, 8]),
        ("a\nb\r\nc\rd", p(4, 0), [8, 8, 8]),
        // \n\r is two breaks: LF, then lone CR
        ("a\n\rb", p(1, 0), [2, 2, 2]),
        ("a\n\rb", p(2, 1), [4, 4, 4]),
        ("😀\r\n日", p(1, 1), [6, 9, 9]),
    ];

    #[test]
    fn offset_of_table() {
        for &(text, pos, want) in OFFSET_CASES {
            let rope = Rope::from_str(text);
            let index = LineIndex::new(text);
            for (enc, want) in PositionEncoding::ALL.into_iter().zip(want) {
                assert_eq!(
                    offset_of(&rope, pos, enc),
                    want,
                    "rope {text:?} {pos:?} {enc:?}"
                );
                assert_eq!(
                    index.offset(pos, enc),
                    want,
                    "index {text:?} {pos:?} {enc:?}"
                );
            }
        }
    }

    /// `(text, byte, [position for utf-8, utf-16, utf-32])`.
    type PositionCase = (&'static str, usize, [Position; 3]);

    const POSITION_CASES: &[PositionCase] = &[
        ("hello\nworld", 0, [p(0, 0), p(0, 0), p(0, 0)]),
        ("hello\nworld", 5, [p(0, 5), p(0, 5), p(0, 5)]),
        ("hello\nworld", 6, [p(1, 0), p(1, 0), p(1, 0)]),
        ("hello\nworld", 11, [p(1, 5), p(1, 5), p(1, 5)]),
        // past the end clamps to the end
        ("hello\nworld", 500, [p(1, 5), p(1, 5), p(1, 5)]),
        ("", 0, [p(0, 0), p(0, 0), p(0, 0)]),
        ("", 3, [p(0, 0), p(0, 0), p(0, 0)]),
        ("ab\n", 3, [p(1, 0), p(1, 0), p(1, 0)]),
        // astral: inside the char rounds down
        ("a😀b", 5, [p(0, 5), p(0, 3), p(0, 2)]),
        ("a😀b", 3, [p(0, 1), p(0, 1), p(0, 1)]),
        ("a😀b", 6, [p(0, 6), p(0, 4), p(0, 3)]),
        ("日本語", 4, [p(0, 3), p(0, 1), p(0, 1)]),
        ("日本語", 9, [p(0, 9), p(0, 3), p(0, 3)]),
        ("e\u{301}x", 3, [p(0, 3), p(0, 2), p(0, 2)]),
        // CRLF: the \r and the middle of the \r\n are the end of the line
        ("ab\r\ncd", 2, [p(0, 2), p(0, 2), p(0, 2)]),
        ("ab\r\ncd", 3, [p(0, 2), p(0, 2), p(0, 2)]),
        ("ab\r\ncd", 4, [p(1, 0), p(1, 0), p(1, 0)]),
        ("ab\rcd", 3, [p(1, 0), p(1, 0), p(1, 0)]),
        ("a\nb\r\nc\rd", 7, [p(3, 0), p(3, 0), p(3, 0)]),
        ("😀\r\n日", 9, [p(1, 3), p(1, 1), p(1, 1)]),
    ];

    #[test]
    fn position_of_table() {
        for &(text, byte, want) in POSITION_CASES {
            let rope = Rope::from_str(text);
            let index = LineIndex::new(text);
            for (enc, want) in PositionEncoding::ALL.into_iter().zip(want) {
                assert_eq!(
                    position_of(&rope, byte, enc),
                    want,
                    "rope {text:?} {byte} {enc:?}"
                );
                assert_eq!(
                    index.position(byte, enc),
                    want,
                    "index {text:?} {byte} {enc:?}"
                );
                assert_eq!(point_of(&rope, byte).to_position(enc), want);
            }
        }
    }

    const ROUND_TRIP_TEXTS: &[&str] = &[
        "",
        "x",
        "hello\nworld\n",
        "a😀b\r\n日本語\re\u{301}\n\n\r\r\n😀",
        "\r\n\r\n",
        "\n\r",
        "fn main() {\r\n    println!(\"😀 日本\");\r}\n",
    ];

    /// Every valid position round-trips, and every char-boundary offset
    /// round-trips except the inside of a `\r\n` (it maps to before the `\r`).
    #[test]
    fn round_trips() {
        for text in ROUND_TRIP_TEXTS {
            let rope = Rope::from_str(text);
            let index = LineIndex::new(text);
            for enc in PositionEncoding::ALL {
                for (byte, _) in text.char_indices().chain([(text.len(), ' ')]) {
                    let pos = position_of(&rope, byte, enc);
                    let inside_crlf =
                        text[..byte].ends_with('\r') && text[byte..].starts_with('\n');
                    let want = if inside_crlf { byte - 1 } else { byte };
                    assert_eq!(offset_of(&rope, pos, enc), want, "{text:?} {byte} {enc:?}");
                    assert_eq!(index.point(byte), point_of(&rope, byte));
                    assert_eq!(offset_of(&rope, pos, enc), index.offset(pos, enc));
                }
                // Valid positions: every unit boundary of every line.
                for (line, content) in lsp_lines(text).into_iter().enumerate() {
                    let mut col = 0;
                    for c in content.chars().chain(['\0']) {
                        let pos = p(line as u32, col as u32);
                        assert_eq!(position_of(&rope, offset_of(&rope, pos, enc), enc), pos);
                        col += enc.len_char(c);
                    }
                }
            }
        }
    }

    /// Line contents without terminators, split from first principles.
    fn lsp_lines(text: &str) -> Vec<&str> {
        let mut lines = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find(['\n', '\r']) {
            lines.push(&rest[..i]);
            let len = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
            rest = &rest[i + len..];
        }
        lines.push(rest);
        lines
    }

    #[test]
    fn ranges() {
        let rope = Rope::from_str("a😀b\r\ncd");
        let fwd = Range::new(p(0, 1), p(1, 1));
        let rev = Range::new(p(1, 1), p(0, 1));
        for enc in PositionEncoding::ALL {
            assert_eq!(range_to_bytes(&rope, fwd, enc), 1..9);
            assert_eq!(range_to_bytes(&rope, rev, enc), 1..9);
            assert_eq!(range_of(&rope, 1..9, enc), fwd);
            #[allow(clippy::reversed_empty_ranges)] // the point of the test
            let reversed = 9..1;
            assert_eq!(range_of(&rope, reversed, enc), fwd);
        }
        // Past the end on both sides: an empty range at the end.
        let past = Range::new(p(5, 0), p(9, 9));
        assert_eq!(range_to_bytes(&rope, past, Utf16), 10..10);
        // Inside the emoji on both sides rounds down to its start.
        assert_eq!(
            range_to_bytes(&rope, Range::new(p(0, 2), p(0, 2)), Utf16),
            1..1
        );
        assert_eq!(
            range_to_bytes(&rope, Range::new(p(0, 2), p(0, 4)), Utf8),
            1..1
        );
    }

    #[test]
    fn text_point() {
        let tp = TextPoint {
            line: 2,
            utf8: 7,
            utf16: 4,
            utf32: 3,
        };
        assert_eq!(tp.to_position(Utf8), p(2, 7));
        assert_eq!(tp.to_position(Utf16), p(2, 4));
        assert_eq!(tp.to_position(Utf32), p(2, 3));
        let index = LineIndex::new("x\n a😀b");
        assert_eq!(
            index.point(8),
            TextPoint {
                line: 1,
                utf8: 6,
                utf16: 4,
                utf32: 3
            }
        );
        assert_eq!(index.line_count(), 2);
        assert_eq!(LineIndex::new("").line_count(), 1);
        assert_eq!(LineIndex::new("a\r\n").line_count(), 2);
    }

    /// Reference: row = `\n`s before, column = bytes since the last `\n`.
    pub(crate) fn ts_point_naive(text: &str, byte: usize) -> Point {
        let before = &text.as_bytes()[..byte];
        let row = before.iter().filter(|&&b| b == b'\n').count();
        let col = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(byte, |i| byte - i - 1);
        Point::new(row, col)
    }

    #[test]
    fn ts_points() {
        for text in ROUND_TRIP_TEXTS.iter().chain(&["a\rb\r\nc\r\rd\n"]) {
            let rope = Rope::from_str(text);
            let lone = count_lone_cr(text.bytes(), None) > 0;
            for byte in 0..=text.len() {
                assert_eq!(
                    ts_point(&rope, byte, true),
                    ts_point_naive(text, byte),
                    "{text:?} {byte}"
                );
                if !lone {
                    assert_eq!(ts_point(&rope, byte, false), ts_point_naive(text, byte));
                }
            }
        }
        assert_eq!(ts_point_advance(Point::new(3, 4), b"ab"), Point::new(3, 6));
        assert_eq!(
            ts_point_advance(Point::new(3, 4), b"a\r\nbc\rd"),
            Point::new(4, 4)
        );
    }

    #[test]
    fn lone_crs() {
        let cases: &[(&str, Option<u8>, usize)] = &[
            ("", None, 0),
            ("\r", None, 1),
            ("\r", Some(b'\n'), 0),
            ("\r", Some(b'x'), 1),
            ("\r\n", None, 0),
            ("a\r\r\nb\r", None, 2),
            ("\n\r", Some(b'\n'), 0),
        ];
        for &(text, next, want) in cases {
            assert_eq!(count_lone_cr(text.bytes(), next), want, "{text:?} {next:?}");
        }
    }
}
