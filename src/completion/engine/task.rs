//! The model request of a completion as a task: polled in place by the
//! request that started it, detached (and finished) when that request is
//! dropped, with when it reached each stage.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::completion::stats::{Stage, StageTimes};

/// A future polled in place by the request that started it which, if
/// dropped before it finishes, goes on as a task of its own.
pub(super) struct Detachable<F: Future + Send + 'static> {
    work: Option<Pin<Box<F>>>,
}

impl<F: Future + Send + 'static> Detachable<F>
where
    F::Output: Send,
{
    pub(super) fn new(work: F) -> Self {
        Detachable {
            work: Some(Box::pin(work)),
        }
    }
}

impl<F: Future + Send + 'static> Future for Detachable<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(work) = self.work.as_mut() else {
            return Poll::Pending; // Finished: never polled again by select.
        };
        let output = std::task::ready!(work.as_mut().poll(cx));
        self.work = None;
        Poll::Ready(output)
    }
}

impl<F: Future + Send + 'static> Drop for Detachable<F> {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else { return };
        // Outside a runtime (the process is ending) there is nobody to
        // finish it for.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                work.await;
            });
        }
    }
}

/// When the model request of an automatic request reached each point.
pub(super) struct TaskTimes {
    pub(super) polled: Instant,
    pub(super) http: crate::model::timing::SharedMarks,
    pub(super) streamed: Option<Instant>,
    pub(super) finished: Option<Instant>,
}

impl TaskTimes {
    pub(super) fn start() -> Self {
        TaskTimes {
            polled: Instant::now(),
            http: Default::default(),
            streamed: None,
            finished: None,
        }
    }

    /// The model's stages, `spawned` being when the task was spawned.
    pub(super) fn record(&self, spawned: Instant, stages: &mut StageTimes) {
        let http = *self.http.lock();
        stages.between(Stage::Spawn, Some(spawned), Some(self.polled));
        stages.between(Stage::Send, Some(self.polled), http.sent);
        stages.between(Stage::FirstByte, http.sent, http.headers);
        stages.between(Stage::Stream, http.headers, self.streamed);
        stages.between(Stage::Postprocess, self.streamed, self.finished);
        stages.between(Stage::Join, self.finished, Some(Instant::now()));
    }
}
