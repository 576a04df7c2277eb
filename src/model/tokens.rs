//! Token estimates and prompt budgets.
//!
//! [`estimate`] approximates how many tokens a byte-level BPE tokenizer of
//! the GPT-2/StarCoder kind (the embedded SmolLM2's, StarCoder2's) makes of a
//! piece of code, in one pass over the bytes and without allocating; it runs
//! on every keystroke. [`TokenCounter`] lets a real tokenizer stand in for it.
//! The budget helpers cut a prompt's parts to a token budget, counting line
//! by line so each byte is counted once.
use crate::model::Snippet;

// Calibration. Costs are in thousandths of a token and follow the
// pre-tokenizer those vocabularies share (GPT-2's split, with every digit on
// its own): a run of ASCII letters, a run of punctuation, a run of
// whitespace and each digit are pieces that BPE then merges within. A single
// space before a word or punctuation joins it for free; a newline and the
// indentation after it make one token. Fitted against SmolLM2's tokenizer
// (the embedded model's GGUF vocabulary) on 4 KB windows of Rust, Python,
// JavaScript and C: the mean error per language is within ±7%, every
// window within ±23%. StarCoder2's vocabulary makes ~8% fewer tokens, so
// there the estimate errs high. Recalibrate here.

/// A run of ASCII letters: the first token.
pub const WORD_BASE_MILLI: usize = 1000;
/// Letters a word gets before it costs more than [`WORD_BASE_MILLI`].
pub const WORD_FREE_LETTERS: usize = 3;
/// Each further letter of a word (common words are one token; rarer and
/// longer ones split).
pub const WORD_LETTER_MILLI: usize = 130;
/// Each lower-to-upper case change inside a word (`camelCase` splits there).
pub const CASE_HUMP_MILLI: usize = 900;
/// A lone punctuation byte (`_` included: it splits `snake_case`).
pub const PUNCT_MILLI: usize = 1000;
/// A run of two punctuation bytes (`::`, `->`, `()` are often one token).
pub const PUNCT_PAIR_MILLI: usize = 1200;
/// Each punctuation byte after the second in a run.
pub const PUNCT_EXTRA_MILLI: usize = 550;
/// Each decimal digit (the pre-tokenizer splits digits one by one).
pub const DIGIT_MILLI: usize = 1000;
/// A whitespace piece: a newline with the following indentation, a run of
/// spaces. A run of two or more ending in a newline or tab makes two.
pub const WHITESPACE_MILLI: usize = 1000;
/// Spaces one whitespace token covers in a run of spaces only.
pub const SPACES_PER_TOKEN: usize = 16;
/// Each non-ASCII character.
pub const NON_ASCII_CHAR_MILLI: usize = 1000;

/// No tokenizer Fettle meets puts more bytes than this in one token (the
/// longest entries of code models' vocabularies are runs of spaces, `=` or
/// `-`, well under it), so a text of `n` bytes is at least
/// [`at_least`]`(n)` tokens, whatever the vocabulary.
pub const MAX_BYTES_PER_TOKEN: usize = 128;

/// A lower bound on the tokens of a text of `bytes` bytes, known without
/// looking at it: a text that cannot fit a budget is refused before it is
/// tokenized (a real tokenizer took 10 s and 1.2 GB for 5 MB).
pub fn at_least(bytes: usize) -> usize {
    bytes / MAX_BYTES_PER_TOKEN
}

/// Calibrated estimate of the tokens in `text` for a typical code model's
/// BPE tokenizer (see the constants above). Zero only for empty text.
///
/// Subadditive over lines: the estimate of a text is never more than the
/// sum of the estimates of its lines (pieces never span a newline, and
/// splitting a whitespace run never makes fewer pieces).
pub fn estimate(text: &str) -> usize {
    let bytes = text.as_bytes();
    let n = bytes.len();
    let mut milli = 0usize;
    let mut i = 0;
    while i < n {
        let b = bytes[i];
        let start = i;
        if b.is_ascii_alphabetic() {
            let mut humps = 0;
            let mut prev_lower = false;
            while i < n && bytes[i].is_ascii_alphabetic() {
                let upper = bytes[i].is_ascii_uppercase();
                if upper && prev_lower {
                    humps += 1;
                }
                prev_lower = !upper;
                i += 1;
            }
            let len = i - start;
            milli += WORD_BASE_MILLI
                + humps * CASE_HUMP_MILLI
                + len.saturating_sub(WORD_FREE_LETTERS) * WORD_LETTER_MILLI;
        } else if b.is_ascii_digit() {
            while i < n && bytes[i].is_ascii_digit() {
                i += 1;
            }
            milli += (i - start) * DIGIT_MILLI;
        } else if is_space(b) {
            let mut spaces_only = true;
            while i < n && is_space(bytes[i]) {
                spaces_only &= bytes[i] == b' ';
                i += 1;
            }
            let len = i - start;
            let last = bytes[i - 1];
            let before_text = i < n;
            // A single space before text joins the next piece.
            if !(len == 1 && last == b' ' && before_text) {
                // A run of two or more ending in a newline or tab splits
                // before its last byte when text follows; counted at the
                // text's end too, which keeps line-by-line counts an upper
                // bound.
                let mut pieces = 1;
                if len >= 2 && last != b' ' {
                    pieces += 1;
                }
                if spaces_only {
                    pieces += (len - 1) / SPACES_PER_TOKEN;
                }
                milli += pieces * WHITESPACE_MILLI;
            }
        } else if b.is_ascii() {
            while i < n && is_punct(bytes[i]) {
                i += 1;
            }
            let len = i - start;
            milli += match len {
                1 => PUNCT_MILLI,
                _ => PUNCT_PAIR_MILLI + (len - 2) * PUNCT_EXTRA_MILLI,
            };
        } else {
            let mut chars = 0;
            while i < n && !bytes[i].is_ascii() {
                // Count lead bytes, not continuation bytes (0b10xx_xxxx).
                if bytes[i] & 0xC0 != 0x80 {
                    chars += 1;
                }
                i += 1;
            }
            milli += chars * NON_ASCII_CHAR_MILLI;
        }
    }
    // Rounded up, so that counting a text line by line never gives less
    // than counting it whole (the budget helpers rely on it).
    milli.div_ceil(1000)
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn is_punct(b: u8) -> bool {
    b.is_ascii() && !b.is_ascii_alphanumeric() && !is_space(b)
}

/// Something that counts tokens: the [`Estimator`], or a real tokenizer
/// (any `Fn(&str) -> usize` closure is one).
pub trait TokenCounter {
    fn count(&self, text: &str) -> usize;
}

/// The calibrated [`estimate`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Estimator;

impl TokenCounter for Estimator {
    fn count(&self, text: &str) -> usize {
        estimate(text)
    }
}

impl<F: Fn(&str) -> usize> TokenCounter for F {
    fn count(&self, text: &str) -> usize {
        self(text)
    }
}

/// Token budgets for a FIM prompt's parts, from [`split_budget`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PromptBudget {
    pub prefix: usize,
    pub suffix: usize,
    pub snippets: usize,
}

/// Most of the total the suffix gets before the others are served, in percent.
pub const SUFFIX_SHARE_PERCENT: usize = 25;
/// Most of the total the snippets get before the others are served, in percent.
pub const SNIPPETS_SHARE_PERCENT: usize = 30;

/// Splits `total` tokens between the prefix, the suffix and the snippets,
/// given how many tokens each has (`*_tokens`). Reserving room for the
/// template's own tokens and for the answer is the caller's job: `total` is
/// what is left for the three parts.
///
/// Policy: the prefix matters most, then the suffix, then the snippets.
/// First each part gets what it needs up to its share: the suffix at most
/// [`SUFFIX_SHARE_PERCENT`] of `total`, the snippets at most
/// [`SNIPPETS_SHARE_PERCENT`], the prefix the rest. Then what a part leaves
/// unused goes to the parts still short of what they need, the prefix
/// first, then the suffix, then the snippets. No part gets more than it
/// needs, and the three never add up to more than `total`.
pub fn split_budget(
    total: usize,
    prefix_tokens: usize,
    suffix_tokens: usize,
    snippet_tokens: usize,
) -> PromptBudget {
    let share = |percent: usize| total / 100 * percent + total % 100 * percent / 100;
    let suffix_cap = share(SUFFIX_SHARE_PERCENT);
    let snippets_cap = share(SNIPPETS_SHARE_PERCENT);
    let prefix_cap = total - suffix_cap - snippets_cap;
    let mut budget = PromptBudget {
        prefix: prefix_tokens.min(prefix_cap),
        suffix: suffix_tokens.min(suffix_cap),
        snippets: snippet_tokens.min(snippets_cap),
    };
    let mut left = total - budget.prefix - budget.suffix - budget.snippets;
    for (granted, needed) in [
        (&mut budget.prefix, prefix_tokens),
        (&mut budget.suffix, suffix_tokens),
        (&mut budget.snippets, snippet_tokens),
    ] {
        let more = needed.saturating_sub(*granted).min(left);
        *granted += more;
        left -= more;
    }
    budget
}

/// The end of `prefix` that fits in `budget` tokens: whole lines, counted
/// one by one from the cursor back, so the result starts at a line start
/// unless even the cursor's line does not fit, in which case it is the end
/// of that line that does. Empty when `budget` is 0.
///
/// Each line is counted once (a binary search over the cursor's line in the
/// overlong case): linear in the length of `prefix`. Lines are counted apart,
/// which for BPE may count a token or so more per line than the whole text
/// makes; the result errs on the short side.
pub fn take_prefix_tail<'a>(prefix: &'a str, budget: usize, counter: &dyn TokenCounter) -> &'a str {
    let mut start = prefix.len();
    let mut used = 0;
    for line in prefix.split_inclusive('\n').rev() {
        let cost = counter.count(line);
        if used + cost > budget {
            if start == prefix.len() {
                // The cursor's line alone is over budget: keep its end.
                return longest_fitting_tail(line, budget, counter);
            }
            break;
        }
        used += cost;
        start -= line.len();
    }
    &prefix[start..]
}

/// The start of `suffix` that fits in `budget` tokens: whole lines (each
/// with its newline) from the cursor on, so the result ends at a line end
/// unless even the rest of the cursor's line does not fit, in which case it
/// is the start of that line that does. Linear, like [`take_prefix_tail`].
pub fn take_suffix_head<'a>(suffix: &'a str, budget: usize, counter: &dyn TokenCounter) -> &'a str {
    let head = head_lines(suffix, budget, counter);
    if head.is_empty() {
        if let Some(first) = suffix.split_inclusive('\n').next() {
            return longest_fitting_head(first, budget, counter);
        }
    }
    head
}

/// Tokens a snippet costs on top of its text: its path label (the path is
/// counted too) and the blank line after it.
pub const SNIPPET_OVERHEAD_TOKENS: usize = 6;

/// The snippets that fit in `budget` tokens, in order: whole snippets while
/// they fit, then the first one that does not, cut to its leading whole
/// lines when at least one fits. Each snippet costs its text, its path and
/// [`SNIPPET_OVERHEAD_TOKENS`]. Linear in the snippets' length.
pub fn take_snippets(
    snippets: &[Snippet],
    budget: usize,
    counter: &dyn TokenCounter,
) -> Vec<Snippet> {
    let mut out = Vec::new();
    let mut left = budget;
    for snippet in snippets {
        let overhead = SNIPPET_OVERHEAD_TOKENS + counter.count(&snippet.path);
        let Some(room) = left.checked_sub(overhead) else {
            break;
        };
        let text = head_lines(&snippet.text, room, counter);
        if text.len() == snippet.text.len() {
            left = room - counter.count(text);
            out.push(snippet.clone());
            continue;
        }
        if !text.is_empty() {
            out.push(Snippet {
                path: snippet.path.clone(),
                text: text.to_string(),
            });
        }
        break;
    }
    out
}

/// The leading whole lines of `text` that fit in `budget`.
fn head_lines<'a>(text: &'a str, budget: usize, counter: &dyn TokenCounter) -> &'a str {
    let mut end = 0;
    let mut used = 0;
    for line in text.split_inclusive('\n') {
        let cost = counter.count(line);
        if used + cost > budget {
            break;
        }
        used += cost;
        end += line.len();
    }
    &text[..end]
}

/// The longest tail of `line` (starting on a char boundary) that fits.
fn longest_fitting_tail<'a>(line: &'a str, budget: usize, counter: &dyn TokenCounter) -> &'a str {
    let starts: Vec<usize> = line.char_indices().map(|(i, _)| i).collect();
    // Find the smallest start index whose tail fits; tails shrink as the
    // start grows, so "fits" is monotone.
    let (mut lo, mut hi) = (0, starts.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if counter.count(&line[starts[mid]..]) <= budget {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    match starts.get(lo) {
        Some(&start) => &line[start..],
        None => &line[line.len()..],
    }
}

/// The longest head of `line` (ending on a char boundary) that fits.
fn longest_fitting_head<'a>(line: &'a str, budget: usize, counter: &dyn TokenCounter) -> &'a str {
    let ends: Vec<usize> = line.char_indices().map(|(i, c)| i + c.len_utf8()).collect();
    // Find how many chars fit: the largest count whose head fits.
    let (mut lo, mut hi) = (0, ends.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if counter.count(&line[..ends[mid - 1]]) <= budget {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    match lo {
        0 => &line[..0],
        k => &line[..ends[k - 1]],
    }
}
