//! The lines most like a search text that matched nowhere, so the model can
//! see what the file really says.
use std::time::Duration;

use similar::TextDiff;

use super::matching::{normalize_punctuation, Line};
use super::numbered;

/// Windows scored precisely after the cheap pre-ranking.
const REFINE: usize = 8;
/// Below this similarity (0..1) the "closest" lines would only mislead.
const MIN_RATIO: f32 = 0.6;
/// Bound on one precise comparison; a huge window gets an approximate score.
const DIFF_TIMEOUT: Duration = Duration::from_millis(50);

/// The 1-based first line and the numbered text of the window of
/// `search.len()` file lines most similar to `search`, if any is similar
/// enough.
pub(super) fn closest(file: &[Line<'_>], search: &[&str]) -> Option<(usize, String)> {
    if file.is_empty() || search.is_empty() {
        return None;
    }
    let k = search.len().min(file.len());
    let search_norm: Vec<String> = search.iter().map(|l| norm(l)).collect();
    let file_norm: Vec<String> = file.iter().map(|l| norm(l.text)).collect();

    // A cheap line-by-line score over every window, then the precise
    // character diff on the best few: the diff on every window of a big
    // file would take seconds.
    let mut ranked: Vec<(f32, usize)> = (0..=file.len() - k)
        .map(|i| {
            let score: f32 = file_norm[i..i + k]
                .iter()
                .zip(&search_norm)
                .map(|(a, b)| quick_similarity(a, b))
                .sum();
            (score, i)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.truncate(REFINE);

    let wanted = search_norm.join("\n");
    let (ratio, best) = ranked
        .iter()
        .map(|&(_, i)| {
            let window = file_norm[i..i + k].join("\n");
            let ratio = TextDiff::configure()
                .timeout(DIFF_TIMEOUT)
                .diff_chars(wanted.as_str(), window.as_str())
                .ratio();
            (ratio, i)
        })
        .fold(
            (f32::MIN, 0),
            |acc, cur| if cur.0 > acc.0 { cur } else { acc },
        );
    if ratio < MIN_RATIO {
        return None;
    }
    let lines: Vec<&str> = file[best..best + k].iter().map(|l| l.text).collect();
    Some((best + 1, numbered(&lines, best + 1)))
}

/// What lines are compared by: indentation, trailing space and
/// typographic punctuation are what the ladder already forgave.
fn norm(line: &str) -> String {
    normalize_punctuation(line).trim().to_owned()
}

/// Shared prefix and suffix over the longer length: 1 for equal lines, 0
/// for unrelated ones, cheap.
fn quick_similarity(a: &str, b: &str) -> f32 {
    if a == b {
        return 1.0;
    }
    let longest = a.len().max(b.len());
    if longest == 0 {
        return 1.0;
    }
    let prefix = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let suffix = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let shared = (prefix + suffix).min(a.len().min(b.len()));
    shared as f32 / longest as f32
}
