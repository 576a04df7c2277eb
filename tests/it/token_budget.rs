//! Token estimates and prompt budgets (`fettle::model::tokens`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fettle::model::tokens::{
    estimate, split_budget, take_prefix_tail, take_snippets, take_suffix_head, Estimator,
    PromptBudget, TokenCounter, SNIPPET_OVERHEAD_TOKENS,
};
use fettle::model::Snippet;
use proptest::prelude::*;

// Samples with their token counts under SmolLM2's tokenizer (the embedded
// model's), counted with the GGUF's own vocabulary and merges.
const RUST_SAMPLE: &str = r#"use std::collections::HashMap;

/// A tiny in-memory cache with a fixed capacity.
pub struct LruCache<K, V> {
    capacity: usize,
    entries: HashMap<K, (V, u64)>,
    clock: u64,
}

impl<K: std::hash::Hash + Eq + Clone, V> LruCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self { capacity, entries: HashMap::new(), clock: 0 }
    }

    pub fn get(&mut self, key: &K) -> Option<&V> {
        self.clock += 1;
        let now = self.clock;
        match self.entries.get_mut(key) {
            Some((value, used)) => {
                *used = now;
                Some(value)
            }
            None => None,
        }
    }

    pub fn insert(&mut self, key: K, value: V) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        self.clock += 1;
        self.entries.insert(key, (value, self.clock));
    }
}
"#;
const RUST_TOKENS: usize = 353;

const PYTHON_SAMPLE: &str = r#"import json
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class Order:
    order_id: int
    customer: str
    items: list[tuple[str, int, float]] = field(default_factory=list)
    coupon: Optional[str] = None

    def total(self) -> float:
        """Sum of the line items, with the coupon applied."""
        subtotal = sum(qty * price for _, qty, price in self.items)
        if self.coupon == "HALF":
            return round(subtotal * 0.5, 2)
        return round(subtotal, 2)


def load_orders(path: str) -> list[Order]:
    with open(path, encoding="utf-8") as handle:
        raw = json.load(handle)
    orders = []
    for entry in raw.get("orders", []):
        items = [(i["sku"], int(i["qty"]), float(i["price"])) for i in entry["items"]]
        orders.append(Order(entry["id"], entry["customer"], items, entry.get("coupon")))
    return orders


if __name__ == "__main__":
    for order in load_orders("orders.json"):
        print(f"{order.order_id:>6} {order.customer:<20} {order.total():10.2f}")
"#;
const PYTHON_TOKENS: usize = 320;

const JS_SAMPLE: &str = r#"'use strict';

const DEFAULT_TIMEOUT_MS = 5000;

class TaskQueue {
  constructor(concurrency = 2) {
    this.concurrency = concurrency;
    this.running = 0;
    this.pending = [];
  }

  push(task, { timeoutMs = DEFAULT_TIMEOUT_MS } = {}) {
    return new Promise((resolve, reject) => {
      this.pending.push({ task, timeoutMs, resolve, reject });
      this.next();
    });
  }

  next() {
    while (this.running < this.concurrency && this.pending.length > 0) {
      const { task, timeoutMs, resolve, reject } = this.pending.shift();
      this.running += 1;
      const timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
      Promise.resolve()
        .then(task)
        .then(resolve, reject)
        .finally(() => {
          clearTimeout(timer);
          this.running -= 1;
          this.next();
        });
    }
  }
}

module.exports = { TaskQueue };
"#;
const JS_TOKENS: usize = 270;

fn within(estimated: usize, real: usize, tolerance: f64) -> bool {
    let error = (estimated as f64 - real as f64).abs() / real as f64;
    error <= tolerance
}

#[test]
fn estimate_is_within_25_percent_on_code_samples() {
    for (name, text, real) in [
        ("rust", RUST_SAMPLE, RUST_TOKENS),
        ("python", PYTHON_SAMPLE, PYTHON_TOKENS),
        ("javascript", JS_SAMPLE, JS_TOKENS),
    ] {
        let estimated = estimate(text);
        assert!(
            within(estimated, real, 0.25),
            "{name}: estimated {estimated}, SmolLM2 counts {real}"
        );
    }
}

#[test]
fn estimate_of_small_pieces() {
    assert_eq!(estimate(""), 0);
    assert_eq!(estimate("x"), 1);
    assert_eq!(estimate(" "), 1);
    // Each digit is its own token for these tokenizers.
    assert_eq!(estimate("12345"), 5);
    // A newline and its indentation are one token; the space before a word
    // joins the word.
    assert_eq!(estimate("\n        x"), 2);
    assert_eq!(estimate("a b c"), 3);
    // `::` and `->` are one token each, about.
    assert!(estimate("a::b") <= 4);
    // camelCase splits at its humps.
    assert!(estimate("parseHttpRequestHeader") > estimate("parse"));
    // Non-ASCII: about a token per character, never zero.
    assert_eq!(estimate("日本語"), 3);
    assert!(estimate("é") >= 1);
}

#[test]
fn estimate_handles_every_byte_class_without_panicking() {
    let text = "fn ünïcödé() -> Résult<(), 🦀> { let x = 0x1F; /* ok */ }\r\n\t\u{b}\u{c}";
    let n = estimate(text);
    assert!(n > 10 && n < text.len(), "{n}");
}

#[test]
fn counters_are_interchangeable() {
    assert_eq!(Estimator.count(RUST_SAMPLE), estimate(RUST_SAMPLE));
    let by_bytes = |s: &str| s.len();
    let counter: &dyn TokenCounter = &by_bytes;
    assert_eq!(counter.count("four"), 4);
    assert_eq!(take_suffix_head("ab\ncd\n", 3, &by_bytes), "ab\n");
}

#[test]
fn split_budget_caps_shares_when_everything_is_long() {
    assert_eq!(
        split_budget(1000, 10_000, 10_000, 10_000),
        PromptBudget {
            prefix: 450,
            suffix: 250,
            snippets: 300
        }
    );
}

#[test]
fn split_budget_flows_unused_shares_prefix_first() {
    // Short suffix, no snippets: the prefix takes the rest.
    assert_eq!(
        split_budget(1000, 10_000, 10, 0),
        PromptBudget {
            prefix: 990,
            suffix: 10,
            snippets: 0
        }
    );
    // Short prefix: the suffix is served before the snippets.
    assert_eq!(
        split_budget(1000, 100, 10_000, 10_000),
        PromptBudget {
            prefix: 100,
            suffix: 600,
            snippets: 300
        }
    );
    // Short prefix and suffix: the snippets get what is left.
    assert_eq!(
        split_budget(1000, 100, 50, 10_000),
        PromptBudget {
            prefix: 100,
            suffix: 50,
            snippets: 850
        }
    );
    // Everything fits: everyone gets what they need.
    assert_eq!(
        split_budget(1000, 300, 200, 100),
        PromptBudget {
            prefix: 300,
            suffix: 200,
            snippets: 100
        }
    );
}

#[test]
fn split_budget_of_nothing() {
    assert_eq!(split_budget(0, 100, 100, 100), PromptBudget::default());
    assert_eq!(split_budget(100, 0, 0, 0), PromptBudget::default());
    assert_eq!(split_budget(1, 5, 5, 5).prefix, 1);
    let huge = split_budget(usize::MAX, usize::MAX, usize::MAX, usize::MAX);
    assert_eq!(huge.prefix + huge.suffix + huge.snippets, usize::MAX);
}

#[test]
fn prefix_tail_keeps_whole_lines_from_the_cursor_back() {
    let prefix = "use std::io;\n\nfn main() {\n    let x = 1;\n    let y = ";
    assert_eq!(take_prefix_tail(prefix, 10_000, &Estimator), prefix);
    let tail = take_prefix_tail(prefix, 12, &Estimator);
    assert!(prefix.ends_with(tail));
    assert!(tail.len() < prefix.len());
    assert!(
        prefix[..prefix.len() - tail.len()].ends_with('\n'),
        "{tail:?} does not start a line"
    );
    assert!(Estimator.count(tail) <= 12);
    assert_eq!(take_prefix_tail(prefix, 0, &Estimator), "");
    assert_eq!(take_prefix_tail("", 10, &Estimator), "");
}

#[test]
fn prefix_tail_cuts_an_overlong_cursor_line() {
    let long_line = "let total = ".to_string() + &"alpha + beta + gamma + ".repeat(40);
    let prefix = format!("fn f() {{\n{long_line}");
    let tail = take_prefix_tail(&prefix, 20, &Estimator);
    assert!(!tail.is_empty());
    assert!(long_line.ends_with(tail));
    assert!(Estimator.count(tail) <= 20);
    // A character counter shows it is the longest such tail.
    let chars = |s: &str| s.chars().count();
    assert_eq!(take_prefix_tail("abc\ndéfghi", 4, &chars), "fghi");
}

#[test]
fn suffix_head_keeps_whole_lines_from_the_cursor_on() {
    let suffix = ");\n    println!(\"{x}\");\n}\n\nfn other() {}\n";
    assert_eq!(take_suffix_head(suffix, 10_000, &Estimator), suffix);
    let head = take_suffix_head(suffix, 10, &Estimator);
    assert!(suffix.starts_with(head));
    assert!(head.ends_with('\n'), "{head:?} does not end a line");
    assert!(Estimator.count(head) <= 10);
    assert_eq!(take_suffix_head(suffix, 0, &Estimator), "");
    assert_eq!(take_suffix_head("", 10, &Estimator), "");
}

#[test]
fn suffix_head_cuts_an_overlong_first_line() {
    let chars = |s: &str| s.chars().count();
    assert_eq!(take_suffix_head("abcdéfgh\nij\n", 5, &chars), "abcdé");
    let long = "x + ".repeat(200) + "\nnext\n";
    let head = take_suffix_head(&long, 15, &Estimator);
    assert!(!head.is_empty() && !head.contains('\n'));
    assert!(Estimator.count(head) <= 15);
}

fn snippet(path: &str, text: &str) -> Snippet {
    Snippet {
        path: path.into(),
        text: text.into(),
    }
}

fn cost(snippets: &[Snippet], counter: &dyn TokenCounter) -> usize {
    snippets
        .iter()
        .map(|s| SNIPPET_OVERHEAD_TOKENS + counter.count(&s.path) + counter.count(&s.text))
        .sum()
}

#[test]
fn snippets_fit_in_order_and_the_last_is_cut_by_lines() {
    let by_bytes = |s: &str| s.len();
    let snippets = vec![
        snippet("a.rs", "fn a() {}\n"),
        snippet("b.rs", "fn b1() {}\nfn b2() {}\nfn b3() {}\n"),
        snippet("c.rs", "fn c() {}\n"),
    ];
    // Everything fits.
    assert_eq!(take_snippets(&snippets, 1000, &by_bytes), snippets);
    // a whole (6 + 4 + 10 = 20), then b cut to its first two lines
    // (6 + 4 + 22 = 32); c is never reached.
    let taken = take_snippets(&snippets, 52, &by_bytes);
    assert_eq!(
        taken,
        vec![
            snippet("a.rs", "fn a() {}\n"),
            snippet("b.rs", "fn b1() {}\nfn b2() {}\n"),
        ]
    );
    assert!(cost(&taken, &by_bytes) <= 52);
    // Not even b's first line fits after a: only a.
    assert_eq!(take_snippets(&snippets, 25, &by_bytes), &snippets[..1]);
    // Not even the label fits.
    assert!(take_snippets(&snippets, 5, &by_bytes).is_empty());
    assert!(take_snippets(&[], 100, &by_bytes).is_empty());
}

#[test]
fn budget_helpers_count_each_line_once() {
    use std::cell::Cell;
    let counted = Cell::new(0usize);
    let counting = |s: &str| {
        counted.set(counted.get() + s.len());
        estimate(s)
    };
    let text = "    let value = compute(alpha, beta);\n".repeat(5000);
    let tail = take_prefix_tail(&text, 20_000, &counting);
    assert!(!tail.is_empty());
    assert!(
        counted.get() <= text.len(),
        "counted {} bytes",
        counted.get()
    );
    counted.set(0);
    let head = take_suffix_head(&text, 20_000, &counting);
    assert!(!head.is_empty());
    assert!(
        counted.get() <= text.len(),
        "counted {} bytes",
        counted.get()
    );
    counted.set(0);
    let snippets = vec![snippet("big.rs", &text); 3];
    let taken = take_snippets(&snippets, 50_000, &counting);
    assert!(!taken.is_empty());
    assert!(
        counted.get() <= 4 * text.len(),
        "counted {} bytes",
        counted.get()
    );
}

fn code_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-zA-Z0-9_ (){};:.,=+\\-<>\"'\n\t é日]{0,300}").unwrap()
}

proptest! {
    #[test]
    fn estimate_is_subadditive_over_lines(text in code_text()) {
        let whole = estimate(&text);
        let by_lines: usize = text.split_inclusive('\n').map(estimate).sum();
        prop_assert!(whole <= by_lines, "whole {} > by lines {}", whole, by_lines);
        prop_assert_eq!(whole == 0, text.is_empty());
    }

    #[test]
    fn split_budget_never_exceeds_total_or_needs(
        total in 0usize..5000,
        prefix in 0usize..5000,
        suffix in 0usize..5000,
        snippets in 0usize..5000,
    ) {
        let b = split_budget(total, prefix, suffix, snippets);
        prop_assert!(b.prefix + b.suffix + b.snippets <= total);
        prop_assert!(b.prefix <= prefix && b.suffix <= suffix && b.snippets <= snippets);
        // Nothing is left unused while a part is still short.
        let short = b.prefix < prefix || b.suffix < suffix || b.snippets < snippets;
        if short {
            prop_assert_eq!(b.prefix + b.suffix + b.snippets, total);
        }
        // The prefix gets at least its share, or all it needs.
        let prefix_share = total - total * 25 / 100 - total * 30 / 100;
        prop_assert!(b.prefix >= prefix.min(prefix_share));
    }

    #[test]
    fn prefix_tail_fits_and_is_a_tail(text in code_text(), budget in 0usize..120) {
        let tail = take_prefix_tail(&text, budget, &Estimator);
        prop_assert!(text.ends_with(tail));
        prop_assert!(Estimator.count(tail) <= budget);
        // When the lines fit, all of it is kept.
        let by_lines: usize = text.split_inclusive('\n').map(estimate).sum();
        if by_lines <= budget {
            prop_assert_eq!(tail, text.as_str());
        }
    }

    #[test]
    fn suffix_head_fits_and_is_a_head(text in code_text(), budget in 0usize..120) {
        let head = take_suffix_head(&text, budget, &Estimator);
        prop_assert!(text.starts_with(head));
        prop_assert!(Estimator.count(head) <= budget);
        let cut_mid_line = !head.is_empty() && !head.ends_with('\n') && head.len() < text.len();
        if cut_mid_line {
            // Only the first line may be cut inside.
            prop_assert!(!head.contains('\n'));
        }
    }

    #[test]
    fn snippets_fit_the_budget(
        texts in proptest::collection::vec(code_text(), 0..5),
        budget in 0usize..300,
    ) {
        let snippets: Vec<Snippet> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| snippet(&format!("src/s{i}.rs"), t))
            .collect();
        let taken = take_snippets(&snippets, budget, &Estimator);
        prop_assert!(cost(&taken, &Estimator) <= budget);
        prop_assert!(taken.len() <= snippets.len());
        for (i, t) in taken.iter().enumerate() {
            prop_assert_eq!(&t.path, &snippets[i].path);
            prop_assert!(snippets[i].text.starts_with(&t.text));
            if i + 1 < taken.len() {
                prop_assert_eq!(&t.text, &snippets[i].text);
            }
        }
    }
}
