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

/// A prepared query plus scratch buffers, reused across candidates so
/// scoring does not allocate per name.
pub(crate) struct Matcher {
    query: Vec<char>,
    folded: Vec<char>,
    mask: u64,
    name: Vec<char>,
    name_folded: Vec<char>,
    bonus: Vec<i32>,
    prev: Vec<i32>,
    prev_run: Vec<i32>,
    cur: Vec<i32>,
    cur_run: Vec<i32>,
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
        Some(Self {
            query,
            folded,
            mask,
            name: Vec::new(),
            name_folded: Vec::new(),
            bonus: Vec::new(),
            prev: Vec::new(),
            prev_run: Vec::new(),
            cur: Vec::new(),
            cur_run: Vec::new(),
        })
    }

    pub(crate) fn mask(&self) -> u64 {
        self.mask
    }

    /// Scores `name`, or `None` if the query is not a subsequence of it.
    pub(crate) fn score(&mut self, name: &str) -> Option<Score> {
        self.name.clear();
        self.name_folded.clear();
        self.name.extend(name.chars());
        self.name_folded.extend(self.name.iter().map(|&c| fold(c)));
        if !is_subsequence(&self.folded, &self.name_folded) {
            return None;
        }
        let n = self.name.len();
        let m = self.folded.len();
        let tier = if self.name_folded.starts_with(&self.folded) {
            match n == m {
                true if self.name == self.query => 4,
                true => 3,
                false => 2,
            }
        } else {
            1
        };
        let points = self.points().unwrap_or(0);
        Some(Score { tier, points })
    }

    /// The DP: `cur[i]` is the best score with the current query char
    /// matched at name position `i`; `cur_run[i]` is the boundary bonus of
    /// the contiguous run that position belongs to.
    fn points(&mut self) -> Option<i32> {
        let n = self.name.len().min(MAX_SCORED_CHARS);
        self.bonus.clear();
        self.bonus
            .extend((0..n).map(|i| boundary_bonus(&self.name, i)));
        for row in [
            &mut self.prev,
            &mut self.prev_run,
            &mut self.cur,
            &mut self.cur_run,
        ] {
            row.clear();
            row.resize(n, NEG);
        }
        for (j, &qc) in self.folded.iter().enumerate() {
            let mut gap_best = NEG;
            for i in 0..n {
                if i >= 2 {
                    gap_best = (gap_best - GAP_EXTEND).max(self.prev[i - 2] - GAP_START);
                }
                if self.name_folded[i] != qc {
                    self.cur[i] = NEG;
                    self.cur_run[i] = 0;
                    continue;
                }
                // Smart case: only a capital typed on purpose asks for case.
                let qc_orig = self.query[j];
                let case = qc_orig.is_uppercase() && self.name[i] == qc_orig;
                let base = MATCH + if case { CASE_MATCH } else { 0 };
                let bonus = self.bonus[i];
                if j == 0 {
                    let leading = (i as i32).min(MAX_LEADING_PENALTY);
                    self.cur[i] = base + bonus - leading;
                    self.cur_run[i] = bonus;
                    continue;
                }
                let mut best = NEG;
                let mut run = 0;
                if i >= 1 && self.prev[i - 1] > NEG {
                    let run_bonus = self.prev_run[i - 1];
                    best = self.prev[i - 1] + bonus.max(run_bonus).max(BONUS_CONSECUTIVE);
                    run = run_bonus;
                }
                if gap_best > NEG && gap_best + bonus > best {
                    best = gap_best + bonus;
                    run = bonus;
                }
                self.cur[i] = if best > NEG { base + best } else { NEG };
                self.cur_run[i] = run;
            }
            std::mem::swap(&mut self.prev, &mut self.cur);
            std::mem::swap(&mut self.prev_run, &mut self.cur_run);
        }
        self.prev.iter().copied().filter(|&s| s > NEG).max()
    }
}

fn is_subsequence(needle: &[char], hay: &[char]) -> bool {
    let mut it = hay.iter();
    needle.iter().all(|c| it.any(|h| h == c))
}

fn boundary_bonus(name: &[char], i: usize) -> i32 {
    let cur = name[i];
    if i == 0 {
        return BONUS_START;
    }
    let prev = name[i - 1];
    if !cur.is_alphanumeric() {
        return 0;
    }
    if !prev.is_alphanumeric() {
        return BONUS_BOUNDARY;
    }
    if prev.is_lowercase() && cur.is_uppercase() {
        return BONUS_BOUNDARY;
    }
    // The last capital of an acronym starts a word: `HTTPServer` → `S`.
    let next_lower = name.get(i + 1).is_some_and(|c| c.is_lowercase());
    if prev.is_uppercase() && cur.is_uppercase() && next_lower {
        return BONUS_BOUNDARY;
    }
    if cur.is_ascii_digit() && !prev.is_ascii_digit() {
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
        Matcher::new(q).and_then(|mut m| m.score(name))
    }

    fn ranked<'a>(q: &str, names: &[&'a str]) -> Vec<&'a str> {
        let Some(mut m) = Matcher::new(q) else {
            return Vec::new();
        };
        let mut hits: Vec<(Score, &str)> = names
            .iter()
            .filter_map(|n| m.score(n).map(|s| (s, *n)))
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
