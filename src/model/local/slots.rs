//! Several cached prompts at once: one KV sequence per document.
//!
//! The engine's KV cache (unified: the sequences share its cells) holds up
//! to [`MAX_SEQUENCES`] prompts, each in its own llama.cpp sequence and
//! keyed by what it is for (a completion's file path, or the chat lane).
//! The one in use is *active*; the others are *parked* with their tokens,
//! so that going back to a file finds its prompt still evaluated. A
//! switch to a key nobody holds takes a free sequence, else the least
//! recently used one; and when a prompt needs more cells than are free,
//! parked sequences are evicted, least recently used first. This module
//! is bookkeeping only: the engine clears the sequences it is told to.

/// Sequences kept at once (the active one included): the chat lane, the
/// warm-up lane and four files.
pub(crate) const MAX_SEQUENCES: usize = 6;

/// One sequence's cached prompt.
#[derive(Debug)]
pub(crate) struct Cached<T> {
    pub seq: i32,
    pub key: String,
    /// Exactly the tokens whose KV entries are in `seq`, in order.
    pub tokens: Vec<T>,
    /// The body of the completion prompt `tokens` came from (see `fit.rs`).
    pub body: Option<String>,
    used: u64,
}

impl<T> Cached<T> {
    pub fn new(seq: i32, key: &str) -> Self {
        Self {
            seq,
            key: key.to_owned(),
            tokens: Vec::new(),
            body: None,
            used: 0,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Parked<T> {
    slots: Vec<Cached<T>>,
    clock: u64,
}

impl<T> Default for Parked<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Parked<T> {
    pub fn new() -> Self {
        Self {
            slots: Vec::new(),
            clock: 0,
        }
    }

    /// Makes `key` active: parks `active` (unless it is for `key`) and
    /// returns the sequence for `key` — its cached prompt when parked, else
    /// an empty one — and the sequences the engine must clear (reused).
    pub fn switch(&mut self, active: Cached<T>, key: &str) -> (Cached<T>, Vec<i32>) {
        self.clock += 1;
        if active.key == key {
            return (
                Cached {
                    used: self.clock,
                    ..active
                },
                Vec::new(),
            );
        }
        let mut active = active;
        active.used = self.clock;
        self.slots.push(active);
        if let Some(i) = self.slots.iter().position(|s| s.key == key) {
            let mut found = self.slots.swap_remove(i);
            found.used = self.clock;
            return (found, Vec::new());
        }
        let taken: Vec<i32> = self.slots.iter().map(|s| s.seq).collect();
        if let Some(seq) = (0..MAX_SEQUENCES as i32).find(|s| !taken.contains(s)) {
            let mut fresh = Cached::new(seq, key);
            fresh.used = self.clock;
            return (fresh, Vec::new());
        }
        // All in use: the least recently used one is given to `key`.
        let evicted = self.slots.swap_remove(self.least_recent());
        let mut fresh = Cached::new(evicted.seq, key);
        fresh.used = self.clock;
        (fresh, vec![evicted.seq])
    }

    /// Evicts parked sequences, least recently used first, until `need`
    /// more cells fit in `n_ctx` besides the active `active_len`. Returns
    /// the sequences to clear.
    pub fn make_room(&mut self, need: usize, active_len: usize, n_ctx: usize) -> Vec<i32> {
        let mut cleared = Vec::new();
        loop {
            let parked: usize = self.slots.iter().map(|s| s.tokens.len()).sum();
            if parked + active_len + need <= n_ctx || self.slots.is_empty() {
                return cleared;
            }
            cleared.push(self.slots.swap_remove(self.least_recent()).seq);
        }
    }

    /// The parked slot used longest ago (callers check there is one).
    fn least_recent(&self) -> usize {
        self.slots
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| s.used)
            .map_or(0, |(i, _)| i)
    }

    /// The parked sequence for `key`, if any.
    pub fn find(&self, key: &str) -> Option<&Cached<T>> {
        self.slots.iter().find(|s| s.key == key)
    }

    /// Forgets the parked sequence for `key`; returns it for the engine to
    /// clear.
    pub fn remove(&mut self, key: &str) -> Option<i32> {
        let i = self.slots.iter().position(|s| s.key == key)?;
        Some(self.slots.swap_remove(i).seq)
    }

    /// Forgets every parked sequence (after the whole cache was cleared).
    pub fn clear(&mut self) {
        self.slots.clear();
    }

    #[cfg(test)]
    fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.slots.iter().map(|s| s.key.as_str()).collect();
        keys.sort_unstable();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_tokens(seq: i32, key: &str, n: usize) -> Cached<u8> {
        let mut c = Cached::new(seq, key);
        c.tokens = vec![0; n];
        c
    }

    #[test]
    fn going_back_to_a_file_finds_its_tokens() {
        let mut parked = Parked::new();
        let (b, cleared) = parked.switch(with_tokens(0, "a.rs", 100), "b.rs");
        assert_eq!((b.seq, b.tokens.len(), cleared), (1, 0, vec![]));
        let (a, cleared) = parked.switch(with_tokens(b.seq, "b.rs", 50), "a.rs");
        assert_eq!((a.seq, a.tokens.len(), cleared), (0, 100, vec![]));
        assert_eq!(parked.keys(), ["b.rs"]);
    }

    #[test]
    fn a_parked_sequence_is_found_and_removed_by_key() {
        let mut parked = Parked::new();
        let (_b, _) = parked.switch(with_tokens(0, "a.rs", 7), "b.rs");
        assert_eq!(
            parked.find("a.rs").map(|a| (a.seq, a.tokens.len())),
            Some((0, 7))
        );
        assert!(
            parked.find("b.rs").is_none(),
            "the active one is not parked"
        );
        assert_eq!(parked.remove("a.rs"), Some(0));
        assert_eq!(parked.remove("a.rs"), None);
        assert!(parked.keys().is_empty());
    }

    #[test]
    fn the_same_key_stays_active() {
        let mut parked = Parked::new();
        let (a, cleared) = parked.switch(with_tokens(0, "a.rs", 10), "a.rs");
        assert_eq!((a.seq, a.tokens.len(), cleared), (0, 10, vec![]));
        assert!(parked.keys().is_empty());
    }

    #[test]
    fn one_file_too_many_takes_the_least_recently_used_sequence() {
        let mut parked = Parked::new();
        let mut active = with_tokens(0, "f0", 10);
        for i in 1..MAX_SEQUENCES {
            let (next, _) = parked.switch(active, &format!("f{i}"));
            active = next;
            active.tokens = vec![0; 10];
        }
        // f0 was used longest ago.
        let (last, cleared) = parked.switch(active, "last");
        assert_eq!((last.seq, cleared), (0, vec![0]));
        let kept: Vec<String> = (1..MAX_SEQUENCES).map(|i| format!("f{i}")).collect();
        assert_eq!(parked.keys(), kept);
    }

    #[test]
    fn room_is_made_by_evicting_the_least_recently_used() {
        let mut parked = Parked::new();
        let (b, _) = parked.switch(with_tokens(0, "a", 1000), "b");
        let mut b = b;
        b.tokens = vec![0; 1000];
        let (c, _) = parked.switch(b, "c");
        // Parked: a (1000, older), b (1000). c needs 2500 of 4096 with 0 active.
        let cleared = parked.make_room(2500, 0, 4096);
        assert_eq!(cleared, vec![0], "a goes first");
        assert_eq!(parked.keys(), ["b"]);
        assert_eq!(c.seq, 2);
        assert!(parked.make_room(5000, 0, 4096).len() == 1 && parked.keys().is_empty());
    }
}
