//! A reference model of LSP positions, written from the spec, simple and
//! slow on purpose: the property tests check `fettle::position` and
//! `fettle::document` against it.

use fettle::position::PositionEncoding;
use tower_lsp::lsp_types::{Position, TextDocumentContentChangeEvent};

/// `(start, content_end)` byte offsets of each LSP line (`\n`, `\r\n`, `\r`).
pub fn ref_lines(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        let len = match (bytes[i], bytes.get(i + 1)) {
            (b'\r', Some(b'\n')) => 2,
            (b'\r' | b'\n', _) => 1,
            _ => 0,
        };
        if len == 0 {
            i += 1;
        } else {
            lines.push((start, i));
            i += len;
            start = i;
        }
    }
    lines.push((start, bytes.len()));
    lines
}

pub fn units(c: char, enc: PositionEncoding) -> usize {
    match enc {
        PositionEncoding::Utf8 => c.len_utf8(),
        PositionEncoding::Utf16 => c.len_utf16(),
        PositionEncoding::Utf32 => 1,
    }
}

/// Byte offset of `pos`: past the last line = end of text; past the end of
/// a line = end of its content; inside a char = that char's start.
pub fn ref_offset(text: &str, pos: Position, enc: PositionEncoding) -> usize {
    let Some(&(start, end)) = ref_lines(text).get(pos.line as usize) else {
        return text.len();
    };
    let mut col = 0;
    for (i, c) in text[start..end].char_indices() {
        if col + units(c, enc) > pos.character as usize {
            return start + i;
        }
        col += units(c, enc);
    }
    end
}

/// Position of `byte` (clamped to the text, rounded down to a char start;
/// a byte inside a line break means the end of that line).
pub fn ref_position(text: &str, byte: usize, enc: PositionEncoding) -> Position {
    let mut byte = byte.min(text.len());
    while !text.is_char_boundary(byte) {
        byte -= 1;
    }
    let lines = ref_lines(text);
    // The last line starting at or before the byte.
    let line = lines.iter().rposition(|&(s, _)| s <= byte).unwrap_or(0);
    let (start, end) = lines[line];
    let col: usize = text[start..byte.min(end)]
        .chars()
        .map(|c| units(c, enc))
        .sum();
    Position::new(line as u32, col as u32)
}

/// Applies one change the way the spec describes.
pub fn ref_apply(
    text: &mut String,
    change: &TextDocumentContentChangeEvent,
    enc: PositionEncoding,
) {
    match change.range {
        Some(range) => {
            let a = ref_offset(text, range.start, enc);
            let b = ref_offset(text, range.end, enc);
            text.replace_range(a.min(b)..a.max(b), &change.text);
        }
        None => change.text.clone_into(text),
    }
}
