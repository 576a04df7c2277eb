//! Fitting a completion prompt to a latency target on a local model.
//!
//! On a CPU the time to the first token is the time to evaluate the prompt
//! tokens the KV cache does not hold yet (~250 tokens/s for SmolLM2-135M on
//! two cores): a cold 1000-token prompt costs 4 s, the same prompt with all
//! but the last keystroke cached costs 10 ms. So a request may add at most
//! `cap` new tokens (the latency target times the measured prefill speed);
//! the rest must come from the cache.
//!
//! A completion prompt is a head (snippets, a path label), the body (the
//! window of the file before the cursor) and a tail (a FIM marker, if
//! any). Only the body's start may move, and only to a line start. The
//! choice, most context first:
//! - the whole prompt, when it adds no more than `cap`;
//! - the body from where the cached one started (moving up in the same
//!   region, or a little down, reuses nearly everything), or the earliest
//!   line start that adds no more than `cap` — whichever keeps more text;
//! - without the head, when the head alone would take half the budget
//!   (its snippets changed with the position);
//! - at worst the last line.
//!
//! Token counts of the candidates are estimated line by line (tokenizing
//! each line alone); the engine tokenizes the chosen prompt exactly.
use std::ops::Range;

/// The prompt chosen for the request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Fitted<T> {
    pub text: String,
    /// `text`'s tokens, when they were computed exactly on the way (the
    /// whole prompt, or the cached start), so the engine need not again.
    pub tokens: Option<Vec<T>>,
    /// The body as used (what a later request's cached start is found by).
    pub body: String,
    /// Estimated tokens the KV cache does not hold.
    pub new_tokens: usize,
}

/// `text[body]` is the trimmable window; `cached` the tokens in the KV
/// cache and `cached_body` the body they were made from (if the cache holds
/// a completion prompt); `tokenize(s, first)` tokenizes `s` (with the BOS
/// token when `first`); `count(s)` counts `s`'s tokens without the BOS
/// (the engine remembers line counts across keystrokes).
pub(crate) fn fit<T: PartialEq>(
    text: &str,
    body: Range<usize>,
    cached: &[T],
    cached_body: Option<&str>,
    tokenize: &dyn Fn(&str, bool) -> Vec<T>,
    count: &dyn Fn(&str) -> usize,
    cap: usize,
) -> Fitted<T> {
    let whole = tokenize(text, true);
    let new_whole = whole.len() - common_prefix(cached, &whole);
    let (head, window, tail) = (&text[..body.start], &text[body.clone()], &text[body.end..]);
    if new_whole <= cap {
        return Fitted {
            text: text.to_owned(),
            tokens: Some(whole),
            body: window.to_owned(),
            new_tokens: new_whole,
        };
    }
    let head_tokens = tokenize(head, true);
    let head_new = head_tokens.len() - common_prefix(cached, &head_tokens);
    // A head whose snippets changed costs as much as the code around the
    // cursor and helps less: drop it when it would take half the budget.
    let head = if head_new > cap / 2 { "" } else { head };
    let head_new = if head.is_empty() { 0 } else { head_new };
    let tail_tokens = count(tail);

    let starts = line_starts(window);
    // Tokens of each line (from one start to the next), then suffix sums.
    let mut suffix = vec![0usize; starts.len() + 1];
    for (i, &start) in starts.iter().enumerate().rev() {
        let end = starts.get(i + 1).copied().unwrap_or(window.len());
        suffix[i] = suffix[i + 1] + count(&window[start..end]);
    }
    // The earliest start that fits from cold (the last line at worst).
    let budget = cap.saturating_sub(head_new + tail_tokens);
    let cold = (0..starts.len())
        .find(|&i| suffix[i] <= budget)
        .unwrap_or(starts.len().saturating_sub(1));
    let cold_new = head_new + suffix[cold] + tail_tokens;

    // Where the cached body started, if it is a line start of this window
    // and the cache still holds that body's beginning.
    let warm = cached_body.and_then(|old| {
        let first = old.split_inclusive('\n').next().filter(|l| l.len() > 1)?;
        // A common first line (`}`) may occur more than once: the start
        // whose text goes on like the cached body is the one.
        let i = (0..starts.len())
            .filter(|&i| window[starts[i]..].starts_with(first))
            .max_by_key(|&i| common_prefix(&window.as_bytes()[starts[i]..], old.as_bytes()))?;
        let candidate = format!("{head}{}{tail}", &window[starts[i]..]);
        let tokens = tokenize(&candidate, true);
        let new = tokens.len() - common_prefix(cached, &tokens);
        Some((i, new, candidate, tokens))
    });
    let warm_wins = |(i, new, ..): &(usize, usize, String, Vec<T>)| {
        // More context and cheap enough; or the cold choice does not fit
        // at all and this one is cheaper.
        (*new <= cap && *i <= cold) || (cold_new > cap && *new < cold_new)
    };
    match warm.filter(warm_wins) {
        Some((i, new, text, tokens)) => Fitted {
            text,
            tokens: Some(tokens),
            body: window[starts[i]..].to_owned(),
            new_tokens: new,
        },
        None => {
            let start = starts.get(cold).copied().unwrap_or(0);
            Fitted {
                text: format!("{head}{}{tail}", &window[start..]),
                tokens: None,
                body: window[start..].to_owned(),
                new_tokens: cold_new,
            }
        }
    }
}

/// Byte offsets where the lines of `window` start (the first always).
fn line_starts(window: &str) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(
        window
            .match_indices('\n')
            .map(|(i, _)| i + 1)
            .filter(|&i| i < window.len()),
    );
    starts
}

fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per character (BOS: `^`): counts are easy to reason about.
    fn chars(s: &str, first: bool) -> Vec<char> {
        let mut out = Vec::new();
        if first {
            out.push('^');
        }
        out.extend(s.chars());
        out
    }

    const WINDOW: &str = "aaaa\nbbbb\ncccc\ndddd\nee";

    fn fit_with(
        cached: &str,
        cached_body: Option<&str>,
        text: &str,
        body: Range<usize>,
        cap: usize,
    ) -> Fitted<char> {
        let cached = chars(cached, true);
        let fitted = fit(
            text,
            body,
            &cached,
            cached_body,
            &chars,
            &|s| s.chars().count(),
            cap,
        );
        // Tokens handed back are exactly the chosen text's.
        if let Some(tokens) = &fitted.tokens {
            assert_eq!(*tokens, chars(&fitted.text, true));
        }
        fitted
    }

    #[test]
    fn a_prompt_that_fits_is_kept_whole() {
        let text = format!("H:{WINDOW}");
        let fitted = fit_with("", None, &text, 2..text.len(), 100);
        assert_eq!(fitted.text, text);
        // The cache holds the BOS token only.
        assert_eq!(fitted.new_tokens, text.len());
    }

    #[test]
    fn a_cold_prompt_keeps_the_lines_nearest_the_cursor() {
        let text = format!("H:{WINDOW}");
        // Head 3 tokens (with BOS): 12 left for the window, "dddd\nee" is 7,
        // "cccc\ndddd\nee" 12.
        let fitted = fit_with("", None, &text, 2..text.len(), 15);
        assert_eq!(fitted.text, "H:cccc\ndddd\nee");
        assert_eq!(fitted.body, "cccc\ndddd\nee");
        assert!(fitted.new_tokens <= 15);
    }

    #[test]
    fn moving_up_in_the_cached_region_reuses_the_cache() {
        // The cache holds the window from "aaaa" down to "eeee" and more;
        // the cursor moved up to after "cc": from "aaaa" nearly all is cached.
        let old_body = "aaaa\nbbbb\ncccc\ndddd\neeee\nffff";
        let cached = format!("H:{old_body}");
        let text = "H:zzzz\naaaa\nbbbb\ncc";
        let fitted = fit_with(&cached, Some(old_body), text, 2..text.len(), 5);
        assert_eq!(fitted.text, "H:aaaa\nbbbb\ncc");
        // (The engine evaluates the last token again for its logits.)
        assert_eq!(fitted.new_tokens, 0);
    }

    #[test]
    fn moving_down_a_little_costs_only_the_gap() {
        let old_body = "aaaa\nbbbb\ncc";
        let cached = format!("H:{old_body}");
        let text = "H:zzzz\naaaa\nbbbb\ncccc\nddd";
        let fitted = fit_with(&cached, Some(old_body), text, 2..text.len(), 10);
        assert_eq!(fitted.text, "H:aaaa\nbbbb\ncccc\nddd");
        // "cc\nddd" after the shared "aaaa\nbbbb\ncc".
        assert_eq!(fitted.new_tokens, 6);
    }

    #[test]
    fn a_changed_head_is_dropped_when_it_would_take_half_the_budget() {
        let cached = "OLDHEAD:aaaa";
        let text = format!("NEWHEAD:{WINDOW}");
        let fitted = fit_with(cached, None, &text, 8..text.len(), 12);
        assert_eq!(fitted.text, "cccc\ndddd\nee");
        assert!(fitted.new_tokens <= 12, "{fitted:?}");
    }

    #[test]
    fn the_tail_stays_and_counts() {
        let text = format!("<S>{WINDOW}<M>");
        let body = 3..3 + WINDOW.len();
        let fitted = fit_with("", None, &text, body, 15);
        assert!(fitted.text.ends_with("ee<M>"), "{fitted:?}");
        assert!(fitted.text.starts_with("<S>"), "{fitted:?}");
        assert!(fitted.new_tokens <= 15, "{fitted:?}");
    }

    #[test]
    fn a_repeated_first_line_finds_the_cached_start() {
        // The cached body starts with "}\n", which occurs twice.
        let old_body = "}\nbbbb\ncc";
        let cached = format!("H:{old_body}");
        let text = "H:}\naaaa\n}\nbbbb\ncccc";
        let fitted = fit_with(&cached, Some(old_body), text, 2..text.len(), 6);
        assert_eq!(fitted.text, "H:}\nbbbb\ncccc");
        assert_eq!(fitted.new_tokens, 2);
    }

    #[test]
    fn at_worst_the_last_line_is_kept() {
        let text = format!("H:{WINDOW}");
        let fitted = fit_with("", None, &text, 2..text.len(), 1);
        assert_eq!(fitted.body, "ee");
    }
}
