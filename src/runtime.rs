//! The language server's async runtime, and the rule for blocking work on it.
//!
//! One async worker runs every protocol task: the stdin reader, the
//! handlers, the model's HTTP streams, the stdout writer. A completion is a
//! chain of wake-ups (stdin readable → request parsed → HTTP request sent →
//! model's answer readable → answer written); with a second worker, each
//! task spawned or woken along the chain also wakes the idle worker to come
//! and steal, which on a small (virtual) machine costs a cross-core wake-up
//! (and, by our reading of the slowest requests' stages, not traced, can
//! move the request's task to the other core mid-request).
//! Measured on the 2-core bench machine, 200 ms after an edit, 4 rounds
//! each: two workers p50 1.16–1.36 ms, p99 2.57–3.10 ms; one worker p50
//! 1.08–1.15 ms, p99 1.58–1.96 ms (docs/performance.md, tenth pass).
//!
//! CPU work never runs on that worker: parses and analyses go to the
//! background thread or the blocking pool, and synchronous work that can take
//! more than a millisecond inside an async task (fsync'd writes, workspace
//! searches, the repo map) goes through [`blocking`], which hands the worker
//! to another thread for its duration, so a keystroke's completion never
//! waits behind an agent's write.
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

/// The runtime `fettle serve` runs on: one async worker (see the module
/// comment), plus tokio's blocking pool.
pub fn server() -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("fettle-async")
        .enable_all()
        .build()
}

/// Runs `f`, which may block (disk syncs, a walk of the workspace), without
/// holding up the other tasks: on a multi-threaded runtime's worker the
/// worker's queue moves to another thread while `f` runs; anywhere else
/// (a plain thread, the blocking pool, a current-thread runtime such as the
/// tests') `f` simply runs.
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// While one task blocks inside `blocking`, another task on the single
    /// worker still runs: the worker was handed on.
    #[test]
    fn a_blocking_section_does_not_hold_up_the_other_tasks() {
        let runtime = server().expect("a runtime");
        runtime.block_on(async {
            let (ran_tx, ran_rx) = mpsc::channel();
            let blocker = tokio::spawn(async move {
                blocking(|| {
                    // Held until the other task has run, or give up after 10 s.
                    ran_rx.recv_timeout(Duration::from_secs(10)).is_ok()
                })
            });
            // Let the blocker enter its section first.
            tokio::time::sleep(Duration::from_millis(50)).await;
            tokio::spawn(async move { ran_tx.send(()) })
                .await
                .expect("the other task ran")
                .expect("the blocker is waiting");
            assert!(
                blocker.await.expect("the blocker finished"),
                "the other task could not run while the blocker blocked"
            );
        });
    }

    /// On a current-thread runtime (where `block_in_place` would panic) and
    /// outside any runtime, `f` just runs.
    #[test]
    fn blocking_runs_anywhere() {
        assert_eq!(blocking(|| 1), 1);
        let current = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        assert_eq!(current.block_on(async { blocking(|| 2) }), 2);
    }
}
