//! Property tests of `fettle::position` against a reference written from the
//! LSP spec: split the text into lines at `\n`, `\r\n` and lone `\r`, walk
//! each line's chars counting code units, clamp.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the report

use fettle::position::{
    offset_of, point_of, position_of, range_of, range_to_bytes, LineIndex, PositionEncoding,
};
use proptest::prelude::*;
use ropey::Rope;
use tower_lsp::lsp_types::{Position, Range};

use crate::reference;
use reference::{ref_lines, ref_offset, ref_position};

const POOL: &[&str] = &[
    "a",
    "xyz",
    "fn f() {}",
    "😀",
    "日本",
    "e\u{301}",
    "\u{10FFFF}",
    "é",
    " ",
    "\t",
    "\r\n",
    "\r",
    "\n",
    "\n\r",
];

fn text_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(POOL), 0..24).prop_map(|parts| parts.concat())
}

fn enc_strategy() -> impl Strategy<Value = PositionEncoding> {
    prop::sample::select(PositionEncoding::ALL.to_vec())
}

/// Mostly small coordinates (so they hit real lines), sometimes huge.
fn coord() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..24, 1 => Just(u32::MAX), 1 => any::<u32>()]
}

fn pos_strategy() -> impl Strategy<Value = Position> {
    (coord(), coord()).prop_map(|(l, c)| Position::new(l % 1000, c))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn offset_of_matches_reference(text in text_strategy(), pos in pos_strategy(), enc in enc_strategy()) {
        let rope = Rope::from_str(&text);
        let want = ref_offset(&text, pos, enc);
        prop_assert_eq!(offset_of(&rope, pos, enc), want);
        prop_assert_eq!(LineIndex::new(&text).offset(pos, enc), want);
    }

    #[test]
    fn position_of_matches_reference(text in text_strategy(), byte in 0usize..200, enc in enc_strategy()) {
        let rope = Rope::from_str(&text);
        let want = ref_position(&text, byte, enc);
        prop_assert_eq!(position_of(&rope, byte, enc), want);
        prop_assert_eq!(point_of(&rope, byte).to_position(enc), want);
        prop_assert_eq!(LineIndex::new(&text).point(byte), point_of(&rope, byte));
    }

    #[test]
    fn valid_positions_round_trip(text in text_strategy(), pick in any::<prop::sample::Index>(), enc in enc_strategy()) {
        // A valid position: a char boundary of some line, as a position.
        let boundaries: Vec<usize> = ref_lines(&text)
            .into_iter()
            .flat_map(|(s, e)| text[s..e].char_indices().map(move |(i, _)| s + i).chain([e]))
            .collect();
        let byte = boundaries[pick.index(boundaries.len())];
        let rope = Rope::from_str(&text);
        let pos = position_of(&rope, byte, enc);
        prop_assert_eq!(offset_of(&rope, pos, enc), byte);
        prop_assert_eq!(position_of(&rope, offset_of(&rope, pos, enc), enc), pos);
    }

    #[test]
    fn ranges_are_ordered(text in text_strategy(), a in pos_strategy(), b in pos_strategy(), enc in enc_strategy()) {
        let rope = Rope::from_str(&text);
        let bytes = range_to_bytes(&rope, Range::new(a, b), enc);
        let (x, y) = (ref_offset(&text, a, enc), ref_offset(&text, b, enc));
        prop_assert_eq!(bytes.clone(), x.min(y)..x.max(y));
        let back = range_of(&rope, bytes.clone(), enc);
        prop_assert!(back.start <= back.end);
        prop_assert_eq!(range_to_bytes(&rope, back, enc), bytes);
    }
}
