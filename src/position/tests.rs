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
                let inside_crlf = text[..byte].ends_with('\r') && text[byte..].starts_with('\n');
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
