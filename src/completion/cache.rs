//! Recent completions, for typing through a suggestion without asking the
//! model again: when the user types characters that the shown suggestion
//! starts with, the rest of it is still the answer.
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

/// Most entries kept; the oldest is evicted first.
const CAPACITY: usize = 256;
/// Bytes of text before the cursor line, and after the cursor, that identify
/// the context. Hashing the whole of a large file on every keystroke would
/// cost more than the lookup saves; an edit further away than this rarely
/// changes what the model would say at the cursor. (Lengths are hashed too.)
const WINDOW: usize = 8 << 10;

/// Where a completion was computed: the document, the text before the
/// cursor's line, the cursor line up to the cursor, and everything after the
/// cursor. Typing at the cursor changes only `line_prefix`. The hashes
/// come first, so that comparing (the derived `==`, and [`CompletionCache`]
/// looking through its 256 entries) reads the strings behind their
/// pointers only for an entry at the same place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub head: u64,
    pub tail: u64,
    pub document: String,
    pub line_prefix: String,
}

impl Key {
    /// `text` split at `cursor` (a byte offset on a char boundary).
    pub fn new(document: &str, text: &str, cursor: usize) -> Self {
        let cursor = cursor.min(text.len());
        let line_start = text[..cursor].rfind('\n').map_or(0, |i| i + 1);
        let head_from = floor_char_boundary(text, line_start.saturating_sub(WINDOW));
        let tail_to = ceil_char_boundary(text, (cursor + WINDOW).min(text.len()));
        Self {
            document: document.to_string(),
            head: hash_of(&(line_start, &text[head_from..line_start])),
            line_prefix: text[line_start..cursor].to_string(),
            tail: hash_of(&(text.len() - cursor, &text[cursor..tail_to])),
        }
    }
}

impl Key {
    /// Whether `self` is `earlier` plus characters typed at the cursor.
    pub fn extends(&self, earlier: &Key) -> bool {
        self.head == earlier.head
            && self.tail == earlier.tail
            && self.document == earlier.document
            && self.line_prefix.starts_with(earlier.line_prefix.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cached {
    pub text: String,
    /// Bytes after the cursor the completion replaces (closers it re-types).
    pub replace_suffix_bytes: usize,
}

#[derive(Default)]
pub struct CompletionCache {
    entries: VecDeque<(Key, Cached)>,
}

impl CompletionCache {
    pub fn insert(&mut self, key: Key, value: Cached) {
        self.entries.retain(|(k, _)| *k != key);
        if self.entries.len() == CAPACITY {
            self.entries.pop_back();
        }
        self.entries.push_front((key, value));
    }

    /// The completion for `key`: an exact entry, or one computed a few
    /// characters earlier on this line whose text starts with what was typed
    /// since (the rest of it is returned). Empty remainders are misses.
    pub fn get(&mut self, key: &Key) -> Option<Cached> {
        let found = self.entries.iter().position(|(k, v)| {
            k.head == key.head
                && k.tail == key.tail
                && k.document == key.document
                && key
                    .line_prefix
                    .strip_prefix(k.line_prefix.as_str())
                    .is_some_and(|typed| v.text.starts_with(typed) && v.text.len() > typed.len())
        })?;
        let (k, v) = self.entries.remove(found)?;
        let typed = key.line_prefix.len() - k.line_prefix.len();
        let rest = Cached {
            text: v.text[typed..].to_string(),
            replace_suffix_bytes: v.replace_suffix_bytes,
        };
        // Keep the original (typing may go back) and the remainder at the front.
        self.entries.push_front((k, v));
        if typed > 0 {
            self.insert(key.clone(), rest.clone());
        }
        Some(rest)
    }

    /// Forgets everything about `document` (closed).
    pub fn forget(&mut self, document: &str) {
        self.entries.retain(|(k, _)| k.document != document);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

fn ceil_char_boundary(s: &str, mut at: usize) -> usize {
    while at < s.len() && !s.is_char_boundary(at) {
        at += 1;
    }
    at
}

fn floor_char_boundary(s: &str, mut at: usize) -> usize {
    while at > 0 && !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(text: &str) -> Cached {
        Cached {
            text: text.to_string(),
            replace_suffix_bytes: 0,
        }
    }

    #[test]
    fn typing_through_returns_the_rest_and_a_diverging_keystroke_misses() {
        let mut cache = CompletionCache::default();
        let doc = "fn main() {\n    let x = \n}\n";
        let cursor = doc.find("= ").unwrap() + 2;
        cache.insert(Key::new("a", doc, cursor), cached("compute(1, 2);"));

        let typed = doc.replacen("= ", "= comp", 1);
        let got = cache.get(&Key::new("a", &typed, cursor + 4)).unwrap();
        assert_eq!(got.text, "ute(1, 2);");

        let other = doc.replacen("= ", "= x", 1);
        assert_eq!(cache.get(&Key::new("a", &other, cursor + 1)), None);
        // Another document, or a changed suffix: no hit.
        assert_eq!(cache.get(&Key::new("b", &typed, cursor + 4)), None);
        let changed_tail = typed.replace("}\n", "}\n// more\n");
        assert_eq!(cache.get(&Key::new("a", &changed_tail, cursor + 4)), None);
    }

    #[test]
    fn typing_the_whole_suggestion_is_a_miss_and_non_ascii_is_fine() {
        let mut cache = CompletionCache::default();
        let doc = "s = \"😀\" + \n";
        let cursor = doc.find("+ ").unwrap() + 2;
        cache.insert(Key::new("a", doc, cursor), cached("名前"));
        let typed = doc.replacen("+ ", "+ 名", 1);
        assert_eq!(
            cache
                .get(&Key::new("a", &typed, cursor + "名".len()))
                .unwrap()
                .text,
            "前"
        );
        let done = doc.replacen("+ ", "+ 名前", 1);
        assert_eq!(
            cache.get(&Key::new("a", &done, cursor + "名前".len())),
            None
        );
    }

    #[test]
    fn capacity_evicts_the_oldest() {
        let mut cache = CompletionCache::default();
        for i in 0..CAPACITY + 10 {
            let doc = format!("line {i}\n");
            cache.insert(Key::new("a", &doc, doc.len()), cached("x = 1"));
        }
        assert_eq!(cache.len(), CAPACITY);
        let first = "line 0\n";
        assert_eq!(cache.get(&Key::new("a", first, first.len())), None);
    }
}
