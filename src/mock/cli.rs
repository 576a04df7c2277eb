//! `fettle mock-model`: the mock server as a process, for manual testing
//! and for tests that drive the `fettle` binary.
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;

use super::script::Script;
use super::server::{MockServer, Observer, RecordedRequest};

/// Serves the JSON script at `script` on 127.0.0.1:`port` (0: a free port),
/// hands the server's URL to `listening` once it accepts connections (the
/// `cli` module prints it: only `cli` writes to stdout), appends each request
/// as one JSON line to `record` when given, and runs until the process is
/// interrupted (ctrl-c, SIGTERM).
pub async fn run_cli(
    script: &Path,
    port: u16,
    record: Option<&Path>,
    listening: impl FnOnce(&str) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let script = Script::from_file(script)?;
    let observer = match record {
        Some(path) => Some(recorder(path)?),
        None => None,
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let server = MockServer::start_with(script, addr, observer)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    listening(&server.url())?;
    tracing::info!(url = %server.url(), "mock model server running");
    // Serve until the process is interrupted. The crate does not enable
    // tokio's signal handling; the default action of SIGINT and SIGTERM ends
    // the process, and every record line is flushed as it is written, so
    // nothing is lost.
    std::future::pending::<()>().await;
    drop(server);
    Ok(())
}

/// An observer appending each request as a JSON line to `path`.
fn recorder(path: &Path) -> anyhow::Result<Observer> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open the record file {}", path.display()))?;
    let file = Mutex::new(file);
    let shown = path.display().to_string();
    Ok(Arc::new(move |request: &RecordedRequest| {
        let line = match serde_json::to_string(request) {
            Ok(line) => line,
            Err(e) => {
                tracing::warn!(error = %e, "mock: cannot serialise a request");
                return;
            }
        };
        let mut file = file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(e) = writeln!(file, "{line}").and_then(|()| file.flush()) {
            tracing::warn!(file = %shown, error = %e, "mock: cannot record a request");
        }
    }))
}
