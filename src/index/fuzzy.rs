//! Fuzzy matching of symbol names against a workspace-symbol query.
//!
//! A name matches when the query's characters appear in it in order,
//! ignoring case. Matches are ranked in tiers (exact > prefix > other), and
//! within a tier by a points score from a small dynamic program in the
//! spirit of fzf: characters at word boundaries (start, after `_`/`-`/`.`,
//! camelCase humps) earn a bonus, contiguous runs keep the bonus of the
//! run's first character, and gaps cost points.

use std::cmp::Ordering;

const MATCH: i32 = 16;
const BONUS_START: i32 = 12;
const BONUS_BOUNDARY: i32 = 10;
const BONUS_DIGIT: i32 = 4;
const BONUS_CONSECUTIVE: i32 = 6;
const CASE_MATCH: i32 = 1;
const GAP_START: i32 = 3;
const GAP_EXTEND: i32 = 1;
/// Leading unmatched characters cost a little so earlier matches win, but
/// capped so long prefixes (`get_`, `__`) are not punished much.
const MAX_LEADING_PENALTY: i32 = 3;
/// Longer names are scored on this prefix only (a match beyond it still
/// counts, with zero points); keeps the DP's work bounded.
const MAX_SCORED_CHARS: usize = 128;
const NEG: i32 = i32::MIN / 4;

/// How well a name matched; greater is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Score {
    /// 4 = identical, 3 = equal ignoring case, 2 = prefix ignoring case,
    /// 1 = subsequence.
    pub tier: u8,
    pub points: i32,
}

/// A bit per character class present in a (lowercased) string: a cheap,
/// conservative prefilter (every query bit must be present in the name).
pub(crate) fn char_mask(s: &str) -> u64 {
    let mut mask = 0u64;
    for c in s.chars() {
        mask |= char_bit(fold(c));
    }
    mask
}

fn char_bit(c: char) -> u64 {
    let bit = match c {
        'a'..='z' => c as u32 - 'a' as u32,
        '0'..='9' => 26 + (c as u32 - '0' as u32),
        '_' => 36,
        '$' => 37,
        '-' => 38,
        c if c.is_ascii() => 39,
        _ => 40,
    };
    1 << bit
}

/// Simple case folding: one char in, one char out (multi-char lowercase
/// mappings are rare in identifiers and keep their first char).
fn fold(c: char) -> char {
    if c.is_ascii() {
        c.to_ascii_lowercase()
    } else {
        c.to_lowercase().next().unwrap_or(c)
    }
}

/// What the DP runs on: bytes when name and query are ASCII (nearly
/// always; no decoding, cheap folding), chars otherwise.
trait Unit: Copy + Eq {
    fn fold(self) -> Self;
    fn is_upper(self) -> bool;
    fn is_lower(self) -> bool;
    fn is_alnum(self) -> bool;
    fn is_digit(self) -> bool;
}

impl Unit for u8 {
    fn fold(self) -> Self {
        self.to_ascii_lowercase()
    }
    fn is_upper(self) -> bool {
        self.is_ascii_uppercase()
    }
    fn is_lower(self) -> bool {
        self.is_ascii_lowercase()
    }
    fn is_alnum(self) -> bool {
        self.is_ascii_alphanumeric()
    }
    fn is_digit(self) -> bool {
        self.is_ascii_digit()
    }
}

impl Unit for char {
    fn fold(self) -> Self {
        fold(self)
    }
    fn is_upper(self) -> bool {
        self.is_uppercase()
    }
    fn is_lower(self) -> bool {
        self.is_lowercase()
    }
    fn is_alnum(self) -> bool {
        self.is_alphanumeric()
    }
    fn is_digit(self) -> bool {
        self.is_ascii_digit()
    }
}

/// A prepared query plus scratch buffers, reused across candidates so
/// scoring does not allocate per name.
pub(crate) struct Matcher {
    query: Vec<char>,
    folded: Vec<char>,
    /// `query` and `folded` as bytes, when the query is ASCII.
    ascii: Option<(Vec<u8>, Vec<u8>)>,
    mask: u64,
    /// A non-ASCII name, decoded.
    chars: Vec<char>,
    rows: Rows,
}

/// The DP's two rows, sparse: only positions where the query char occurs.
#[derive(Default)]
struct Rows {
    prev: Vec<Cell>,
    cur: Vec<Cell>,
}

#[derive(Clone, Copy)]
struct Cell {
    pos: usize,
    score: i32,
    /// Boundary bonus of the contiguous run this match ends.
    run: i32,
}

impl Matcher {
    /// `None` when the query has no characters besides whitespace.
    pub(crate) fn new(query: &str) -> Option<Self> {
        let query: Vec<char> = query.chars().filter(|c| !c.is_whitespace()).collect();
        if query.is_empty() {
            return None;
        }
        let folded: Vec<char> = query.iter().map(|&c| fold(c)).collect();
        let mask = folded.iter().fold(0, |m, &c| m | char_bit(c));
        let ascii = query.iter().all(char::is_ascii).then(|| {
            (
                query.iter().map(|&c| c as u8).collect(),
                folded.iter().map(|&c| c as u8).collect(),
            )
        });
        Some(Self {
            query,
            folded,
            ascii,
            mask,
            chars: Vec::new(),
            rows: Rows::default(),
        })
    }

    pub(crate) fn mask(&self) -> u64 {
        self.mask
    }

    /// Scores `name`, or `None` if the query is not a subsequence of it
    /// or its tier is below `floor` (a name that cannot make the cut is
    /// not worth the DP).
    pub(crate) fn score(&mut self, name: &str, floor: u8) -> Option<Score> {
        if let (Some((query, folded)), true) = (&self.ascii, name.is_ascii()) {
            return score_units(&mut self.rows, name.as_bytes(), query, folded, floor);
        }
        self.chars.clear();
        self.chars.extend(name.chars());
        score_units(
            &mut self.rows,
            &self.chars,
            &self.query,
            &self.folded,
            floor,
        )
    }
}

fn score_units<T: Unit>(
    rows: &mut Rows,
    name: &[T],
    query: &[T],
    folded: &[T],
    floor: u8,
) -> Option<Score> {
    let m = folded.len();
    let mut j = 0;
    for &c in name {
        if c.fold() == folded[j] {
            j += 1;
            if j == m {
                break;
            }
        }
    }
    if j < m {
        return None;
    }
    let prefix = name.iter().zip(folded).all(|(c, f)| c.fold() == *f);
    let tier = match (prefix, name.len() == m) {
        (true, true) if name == query => 4,
        (true, true) => 3,
        (true, false) => 2,
        (false, _) => 1,
    };
    if tier < floor {
        return None;
    }
    Some(Score {
        tier,
        points: rows.points(name, query, folded),
    })
}

impl Rows {
    /// Best points over all alignments of `query` in `name`. Per query
    /// char, each position where it occurs is extended either from the
    /// previous char's match right before it (a run, which keeps the
    /// bonus of the run's first char) or from an earlier one across a gap
    /// (affine penalty, tracked as a running max).
    fn points<T: Unit>(&mut self, name: &[T], query: &[T], folded: &[T]) -> i32 {
        let name = &name[..name.len().min(MAX_SCORED_CHARS)];
        self.prev.clear();
        for (j, (&qc, &q_orig)) in folded.iter().zip(query).enumerate() {
            // Smart case: only a capital typed on purpose asks for case.
            let wants_case = q_orig.is_upper();
            self.cur.clear();
            let mut k = 0;
            // max over previous cells at pos <= i - 2 of score + GAP_EXTEND * pos
            let mut gap_key = NEG;
            for (i, &c) in name.iter().enumerate().skip(j) {
                if c.fold() != qc {
                    continue;
                }
                let base = MATCH
                    + if wants_case && c == q_orig {
                        CASE_MATCH
                    } else {
                        0
                    };
                let bonus = boundary_bonus(name, i);
                if j == 0 {
                    let leading = (i as i32).min(MAX_LEADING_PENALTY);
                    self.cur.push(Cell {
                        pos: i,
                        score: base + bonus - leading,
                        run: bonus,
                    });
                    continue;
                }
                while let Some(p) = self.prev.get(k).filter(|p| p.pos + 2 <= i) {
                    gap_key = gap_key.max(p.score + GAP_EXTEND * p.pos as i32);
                    k += 1;
                }
                let (mut best, mut run) = (NEG, 0);
                if let Some(p) = self.prev.get(k).filter(|p| p.pos + 1 == i) {
                    best = p.score + bonus.max(p.run).max(BONUS_CONSECUTIVE);
                    run = p.run;
                }
                if gap_key > NEG {
                    let gap = gap_key - GAP_START - GAP_EXTEND * (i as i32 - 2) + bonus;
                    if gap > best {
                        (best, run) = (gap, bonus);
                    }
                }
                if best > NEG {
                    self.cur.push(Cell {
                        pos: i,
                        score: base + best,
                        run,
                    });
                }
            }
            std::mem::swap(&mut self.prev, &mut self.cur);
            if self.prev.is_empty() {
                // Matches only beyond the scored prefix of a very long name.
                return 0;
            }
        }
        self.prev.iter().map(|c| c.score).max().unwrap_or(0)
    }
}

fn boundary_bonus<T: Unit>(name: &[T], i: usize) -> i32 {
    let cur = name[i];
    if i == 0 {
        return BONUS_START;
    }
    let prev = name[i - 1];
    if !cur.is_alnum() {
        return 0;
    }
    if !prev.is_alnum() {
        return BONUS_BOUNDARY;
    }
    if prev.is_lower() && cur.is_upper() {
        return BONUS_BOUNDARY;
    }
    // The last capital of an acronym starts a word: `HTTPServer` → `S`.
    let next_lower = name.get(i + 1).is_some_and(|c| c.is_lower());
    if prev.is_upper() && cur.is_upper() && next_lower {
        return BONUS_BOUNDARY;
    }
    if cur.is_digit() && !prev.is_digit() {
        return BONUS_DIGIT;
    }
    0
}

/// Ranking order for matched names: better score first, then shorter,
/// then alphabetical (so results are deterministic).
pub(crate) fn rank(a: (Score, &str), b: (Score, &str)) -> Ordering {
    b.0.cmp(&a.0)
        .then_with(|| a.1.len().cmp(&b.1.len()))
        .then_with(|| a.1.cmp(b.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(q: &str, name: &str) -> Option<Score> {
        Matcher::new(q).and_then(|mut m| m.score(name, 0))
    }

    fn ranked<'a>(q: &str, names: &[&'a str]) -> Vec<&'a str> {
        let Some(mut m) = Matcher::new(q) else {
            return Vec::new();
        };
        let mut hits: Vec<(Score, &str)> = names
            .iter()
            .filter_map(|n| m.score(n, 0).map(|s| (s, *n)))
            .collect();
        hits.sort_by(|a, b| rank(*a, *b));
        hits.into_iter().map(|(_, n)| n).collect()
    }

    #[test]
    fn subsequence_ignoring_case() {
        assert!(score("wsi", "WorkspaceIndex").is_some());
        assert!(score("WSI", "workspace_index").is_some());
        assert!(score("xyz", "WorkspaceIndex").is_none());
        assert!(score("iw", "WorkspaceIndex").is_none());
        assert!(score("  ", "x").is_none());
    }

    #[test]
    fn tiers() {
        assert_eq!(score("parse", "parse").map(|s| s.tier), Some(4));
        assert_eq!(score("parse", "Parse").map(|s| s.tier), Some(3));
        assert_eq!(score("parse", "parse_str").map(|s| s.tier), Some(2));
        assert_eq!(score("parse", "do_parse").map(|s| s.tier), Some(1));
    }

    #[test]
    fn ranking() {
        let names = [
            "parse_str",
            "Parser",
            "parse",
            "reparse",
            "p_a_r_s_e",
            "apparse",
            "Parse",
        ];
        assert_eq!(
            ranked("parse", &names),
            [
                "parse",
                "Parse",
                "Parser",
                "parse_str",
                "p_a_r_s_e",
                "apparse",
                "reparse"
            ]
        );
        assert_eq!(ranked("Parse", &["parse", "Parse"]), ["Parse", "parse"]);
        // Word-boundary hits beat a contiguous run in the middle of a word.
        assert_eq!(
            ranked("gs", &["bugsy", "get_string", "GetString", "gas"]),
            ["GetString", "get_string", "gas", "bugsy"]
        );
        assert_eq!(
            ranked("hs", &["HTTPServer", "hashes"]),
            ["HTTPServer", "hashes"]
        );
        // A run at a boundary beats the same letters scattered mid-word.
        assert_eq!(
            ranked("bar", &["xbxaxr", "foo_bar", "abar"]),
            ["foo_bar", "abar", "xbxaxr"]
        );
    }

    #[test]
    fn masks_are_conservative() {
        let m = Matcher::new("Ab_9").map(|m| m.mask()).unwrap_or(0);
        assert_eq!(m & !char_mask("xxab_x9"), 0);
        assert_ne!(m & !char_mask("ab9"), 0);
        assert_eq!(char_mask("É") & !char_mask("é"), 0);
    }

    #[test]
    fn long_and_non_ascii_names() {
        let long = format!("{}needle", "x".repeat(300));
        assert!(score("needle", &long).is_some());
        assert!(score("öl", "Ölkanne").is_some());
    }
}
