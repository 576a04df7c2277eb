//! Logging goes to stderr through `tracing`: stdout is the LSP stream.
//! The level comes from `FETTLE_LOG` (a tracing filter) or, failing that,
//! from the `log.level` configuration key, which can change at run time.

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

type Handle = reload::Handle<EnvFilter, Registry>;

static RELOAD: OnceLock<Handle> = OnceLock::new();

/// Installs the stderr logger; later calls do nothing.
pub fn init(default_level: &str) {
    let from_env = std::env::var("FETTLE_LOG").ok();
    let filter = from_env
        .as_deref()
        .and_then(|directive| EnvFilter::try_new(directive).ok())
        .unwrap_or_else(|| EnvFilter::new(default_level));
    let (filter, handle) = reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false);
    if tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init()
        .is_ok()
        && from_env.is_none()
    {
        // Only a level that did not come from FETTLE_LOG may be changed by configuration.
        let _ = RELOAD.set(handle);
    }
    std::panic::set_hook(Box::new(|info| {
        let detail = panic_message(info.payload());
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        tracing::error!(%location, "panic: {detail}");
    }));
}

/// Applies `log.level` from configuration, unless `FETTLE_LOG` is set.
pub fn set_level(directive: &str) {
    let Some(handle) = RELOAD.get() else { return };
    match EnvFilter::try_new(directive) {
        Ok(filter) => {
            if let Err(err) = handle.reload(filter) {
                tracing::warn!(%err, "could not change the log level");
            }
        }
        Err(err) => {
            tracing::warn!(%directive, %err, "log.level is not a valid filter; keeping the current one")
        }
    }
}

/// The text a panic carries (`panic!("…")` payloads are `&str` or `String`).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}
