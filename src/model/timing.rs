//! When a model request went out and when its answer began, for callers
//! that break their latency down (completion's `fettle/stats`). The marks
//! are kept per request in a task-local: [`recorded`] scopes a future, the
//! HTTP layer marks into whatever scope is polling it; outside one, marking
//! costs nothing.
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

/// The HTTP milestones of one model request (the first attempt's send;
/// the headers of the answer that was used).
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpMarks {
    /// The request was built and handed to the HTTP client.
    pub sent: Option<Instant>,
    /// The response's status and headers arrived.
    pub headers: Option<Instant>,
}

pub type SharedMarks = Arc<Mutex<HttpMarks>>;

tokio::task_local! {
    static MARKS: SharedMarks;
}

/// Runs `fut` with its model requests' milestones recorded into `marks`.
pub async fn recorded<F: Future>(marks: SharedMarks, fut: F) -> F::Output {
    MARKS.scope(marks, fut).await
}

pub(crate) fn mark_sent() {
    let _ = MARKS.try_with(|m| {
        m.lock().sent.get_or_insert_with(Instant::now);
    });
}

pub(crate) fn mark_headers() {
    let _ = MARKS.try_with(|m| m.lock().headers = Some(Instant::now()));
}
