//! Secrets and completion: secret files never feed the prompt (see
//! [`super::context`]), and every prompt passes through a [`Redactor`]
//! that knows the workspace's dotenv values, the values typed into open
//! secret buffers and Fettle's own keys ([`crate::secrets`]).
//!
//! The redactor is cached: rebuilding it walks the workspace for dotenv
//! files, so it is rebuilt only when the root, Fettle's key store or the
//! open secret buffers' values change, or after [`MAX_AGE`] (a `.env`
//! edited on disk is picked up within that).
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::FimRequest;
use crate::secrets::Redactor;

/// How long a redactor's view of the dotenv files on disk is trusted.
pub const MAX_AGE: Duration = Duration::from_secs(10);

struct Cached {
    root: Option<PathBuf>,
    generation: u64,
    extra: Vec<String>,
    built: Instant,
    redactor: Arc<Redactor>,
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
        let generation = crate::secrets::store::generation();
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let redactor = Arc::new(Redactor::for_sources(root, extra.clone()));
        *inner = Some(Cached {
            root: root.map(Path::to_path_buf),
            generation,
            extra,
            built: Instant::now(),
            redactor: Arc::clone(&redactor),
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
                    && c.built.elapsed() < MAX_AGE
            })
            .map(|c| Arc::clone(&c.redactor));
        (extra, cached)
    }

    /// [`RedactorCache::for_buffers`] if that needs no walk: for the
    /// async runtime.
    pub fn cached_for_buffers(
        &self,
        root: Option<&Path>,
        secret_buffers: &[ropey::Rope],
    ) -> Option<Arc<Redactor>> {
        self.lookup(root, secret_values(secret_buffers)).1
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
