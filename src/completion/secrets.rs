//! Secrets and completion: secret files never feed the prompt (see
//! [`super::context`]), and every prompt passes through a [`Redactor`]
//! that knows the workspace's dotenv values, the values typed into open
//! secret buffers and Fettle's own keys ([`crate::secrets`]).
//!
//! The redactor is cached: rebuilding it walks the workspace for dotenv
//! files, so it is rebuilt only when the root, Fettle's key store or the
//! open secret buffers' values change, or after [`MAX_AGE`] (longer when
//! the walk is slow: [`AGE_PER_WALK`]; a `.env`
//! edited on disk is picked up within that).
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::FimRequest;
use crate::secrets::Redactor;

/// How long a redactor's view of the dotenv files on disk is trusted.
pub const MAX_AGE: Duration = Duration::from_secs(10);

/// A redactor this old is rebuilt in the background, ahead of
/// [`MAX_AGE`]: a completion never waits for the walk (every 10 s, one
/// completion in ~30 of a steady user did, the p99 of the idle round trip).
const REFRESH_AHEAD: Duration = Duration::from_secs(7);

/// The walk for dotenv files covers the whole workspace (any depth,
/// `node_modules` included): in a huge tree it takes long, so a redactor
/// whose walk took `w` is trusted for at least `w` × this (a 0.5 s walk
/// every 10 s would be 5% of a core, forever).
const AGE_PER_WALK: u32 = 40;

struct Cached {
    root: Option<PathBuf>,
    generation: u64,
    extra: Vec<String>,
    built: Instant,
    /// How long collecting its values took (see [`AGE_PER_WALK`]).
    walk: Duration,
    redactor: Arc<Redactor>,
    /// A rebuild ahead of time is under way.
    refreshing: bool,
}

/// The completion redactor, rebuilt when what it knows goes stale.
#[derive(Default)]
pub struct RedactorCache {
    inner: Mutex<Option<Cached>>,
}

impl RedactorCache {
    /// The redactor for `root`, given the dotenv values of the open secret
    /// buffers (`extra`). May walk the workspace: call it off the async
    /// runtime.
    pub fn get(&self, root: Option<&Path>, extra: Vec<String>) -> Arc<Redactor> {
        let (extra, cached) = self.lookup(root, extra);
        if let Some(redactor) = cached {
            return redactor;
        }
        self.rebuild(root, extra)
    }

    /// Builds (outside the lock: lookups from the async runtime must not
    /// wait for a walk) and remembers a redactor. When the cached one
    /// already looks for exactly the values found, it is kept (its age
    /// reset): prompts built ahead with it stay current.
    fn rebuild(&self, root: Option<&Path>, extra: Vec<String>) -> Arc<Redactor> {
        let generation = crate::secrets::store::generation();
        let started = Instant::now();
        let values = Redactor::sources(root, extra.clone());
        let walk = started.elapsed();
        let current = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_ref()
            .filter(|c| c.root.as_deref() == root)
            .map(|c| Arc::clone(&c.redactor));
        let redactor = match current {
            Some(current) if current.knows_exactly(values.clone()) => current,
            _ => Arc::new(Redactor::build(values)),
        };
        *self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Cached {
            root: root.map(Path::to_path_buf),
            generation,
            extra,
            built: Instant::now(),
            walk,
            redactor: Arc::clone(&redactor),
            refreshing: false,
        });
        redactor
    }
}

impl RedactorCache {
    /// The cached redactor if it is still good (never builds one, never
    /// walks): with `extra` sorted and deduplicated.
    fn lookup(
        &self,
        root: Option<&Path>,
        mut extra: Vec<String>,
    ) -> (Vec<String>, Option<Arc<Redactor>>) {
        extra.sort();
        extra.dedup();
        let generation = crate::secrets::store::generation();
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let cached = inner
            .as_ref()
            .filter(|c| {
                c.root.as_deref() == root
                    && c.generation == generation
                    && c.extra == extra
                    && c.built.elapsed() < MAX_AGE.max(c.walk * AGE_PER_WALK)
            })
            .map(|c| Arc::clone(&c.redactor));
        (extra, cached)
    }

    /// [`RedactorCache::for_buffers`] if that needs no walk: for the
    /// async runtime.
    /// One close to its age limit is rebuilt on the background thread
    /// meanwhile.
    pub fn cached_for_buffers(
        self: &Arc<Self>,
        root: Option<&Path>,
        secret_buffers: &[ropey::Rope],
    ) -> Option<Arc<Redactor>> {
        let (extra, cached) = self.lookup(root, secret_values(secret_buffers));
        let cached = cached?;
        let due = {
            let mut inner = self
                .inner
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            inner
                .as_mut()
                .filter(|c| {
                    let ahead = REFRESH_AHEAD.max(c.walk * (AGE_PER_WALK * 7 / 10));
                    !c.refreshing && c.built.elapsed() >= ahead
                })
                .map(|c| c.refreshing = true)
                .is_some()
        };
        if due {
            // On the background thread: waking it never preempts this
            // request (see `background::lower_thread_priority`). Waking a
            // thread of normal priority for it (a blocking-pool thread,
            // or the background thread before it ran as a batch thread)
            // took this request's core: 0.9-2.8 ms, one request in ~30.
            let cache = Arc::clone(self);
            let root = root.map(Path::to_path_buf);
            let queued = crate::background::spawn(move || {
                cache.rebuild(root.as_deref(), extra);
            });
            if !queued {
                self.finish_refresh();
            }
        }
        Some(cached)
    }

    /// Lets a later lookup ask for a refresh again.
    fn finish_refresh(&self) {
        if let Some(cached) = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_mut()
        {
            cached.refreshing = false;
        }
    }

    /// [`RedactorCache::get`] knowing the dotenv values typed into the
    /// open secret buffers `secret_buffers` (they may not be on disk yet).
    /// May walk the workspace: call it off the async runtime.
    pub fn for_buffers(
        &self,
        root: Option<&Path>,
        secret_buffers: &[ropey::Rope],
    ) -> Arc<Redactor> {
        self.get(root, secret_values(secret_buffers))
    }
}

fn secret_values(secret_buffers: &[ropey::Rope]) -> Vec<String> {
    secret_buffers
        .iter()
        .flat_map(|rope| crate::secrets::env_secret_values(&rope.to_string()))
        .collect()
}

/// Redacts every text of `request` the model sees; returns how many parts
/// changed.
pub fn redact_request(redactor: &Redactor, request: &mut FimRequest) -> usize {
    let mut changed = 0;
    let mut redact = |text: &mut String| {
        if let std::borrow::Cow::Owned(clean) = redactor.redact(text) {
            *text = clean;
            changed += 1;
        }
    };
    redact(&mut request.prefix);
    redact(&mut request.suffix);
    for snippet in &mut request.snippets {
        redact(&mut snippet.text);
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache whose redactor for `root` knows the one value of its `.env`,
    /// and that redactor.
    fn cache_knowing_first_token(root: &Path) -> (Arc<RedactorCache>, Arc<Redactor>) {
        std::fs::write(root.join(".env"), "FIRST_TOKEN=alpha-4f9c2e7b1d\n").unwrap();
        let cache = Arc::new(RedactorCache::default());
        let first = cache.get(Some(root), Vec::new());
        (cache, first)
    }

    /// A redactor near its age limit is still served, and rebuilt in the
    /// background: a dotenv value written meanwhile is redacted once the
    /// rebuild lands, without a completion ever waiting for the walk.
    #[test]
    fn an_aging_redactor_is_rebuilt_ahead_in_the_background() {
        let _generation = crate::secrets::store::TEST_GENERATION.lock();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (cache, first) = cache_knowing_first_token(root);
        assert!(!first
            .redact("x alpha-4f9c2e7b1d")
            .contains("alpha-4f9c2e7b1d"));

        std::fs::write(
            root.join(".env"),
            "FIRST_TOKEN=alpha-4f9c2e7b1d\nSECOND_TOKEN=omega-8b3d5a1c6e\n",
        )
        .unwrap();
        // Not yet due: the same redactor, nothing rebuilt.
        let same = cache.cached_for_buffers(Some(root), &[]).unwrap();
        assert!(Arc::ptr_eq(&same, &first));
        // Due: still served at once, rebuilt meanwhile.
        let aged = Instant::now() - REFRESH_AHEAD - Duration::from_millis(10);
        cache.inner.lock().unwrap().as_mut().unwrap().built = aged;
        let served = cache.cached_for_buffers(Some(root), &[]).unwrap();
        assert!(Arc::ptr_eq(&served, &first));
        let deadline = Instant::now() + Duration::from_secs(10);
        let rebuilt = loop {
            let current = cache.cached_for_buffers(Some(root), &[]).unwrap();
            if !Arc::ptr_eq(&current, &first) {
                break current;
            }
            assert!(Instant::now() < deadline, "never rebuilt");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(!rebuilt
            .redact("y omega-8b3d5a1c6e")
            .contains("omega-8b3d5a1c6e"));
        assert!(!cache.inner.lock().unwrap().as_ref().unwrap().refreshing);
    }

    /// A refresh that finds the same values keeps the redactor (a prompt
    /// built ahead with it is still current) and resets its age; one that
    /// finds a new value replaces it.
    #[test]
    fn a_refresh_that_finds_nothing_new_keeps_the_redactor() {
        let _generation = crate::secrets::store::TEST_GENERATION.lock();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (cache, first) = cache_knowing_first_token(root);
        let aged = Instant::now() - MAX_AGE;
        cache.inner.lock().unwrap().as_mut().unwrap().built = aged;
        let again = cache.get(Some(root), Vec::new());
        assert!(
            Arc::ptr_eq(&again, &first),
            "rebuilt though nothing changed"
        );
        assert!(cache.inner.lock().unwrap().as_ref().unwrap().built > aged);

        cache.inner.lock().unwrap().as_mut().unwrap().built = aged;
        std::fs::write(
            root.join(".env"),
            "FIRST_TOKEN=alpha-4f9c2e7b1d\nSECOND=omega-8b3d5a1c6e\n",
        )
        .unwrap();
        let changed = cache.get(Some(root), Vec::new());
        assert!(!Arc::ptr_eq(&changed, &first));
        assert!(!changed
            .redact("y omega-8b3d5a1c6e")
            .contains("omega-8b3d5a1c6e"));
        // A value typed into an open secret buffer is a change too.
        let with_buffer = cache.get(Some(root), vec!["typed-9c1e5b7a3f".to_owned()]);
        assert!(!Arc::ptr_eq(&with_buffer, &changed));
        assert!(!with_buffer
            .redact("z typed-9c1e5b7a3f")
            .contains("typed-9c1e5b7a3f"));
    }
}
