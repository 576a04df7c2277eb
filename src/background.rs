//! Work nobody is waiting for — the syntax diagnostics and index update
//! after an edit, the index's queued updates — on one thread of its own at
//! a lower CPU priority. On the blocking pool it would compete as an equal
//! with a completion's own work and, with two cores, could take both: a
//! request arriving while a big file is re-indexed waited behind it. Here
//! it never takes more than one core and gives way to whatever the user is
//! waiting for. Jobs run one at a time, in the order given, and none
//! starts while a completion is being answered ([`Busy`]).
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// How long after it was queued a job may be held back by [`Busy`]: a
/// completion from a fast model is answered within a few milliseconds;
/// one that takes longer (a slow or local model) does not hold back the
/// work behind it for more than this.
const MOST_HELD_BACK: Duration = Duration::from_millis(10);

/// Completions being answered now.
static BUSY: Mutex<usize> = Mutex::new(0);
/// Told when the last of them is answered.
static QUIET: Condvar = Condvar::new();

/// Held while the user waits for an answer (a completion request, from its
/// arrival to its answer written): no background job starts meanwhile,
/// for up to [`MOST_HELD_BACK`] after it was queued. Lowering the
/// thread's priority was not enough: a job queued by a request itself (the
/// redactor's refresh every 7 s, ~3 ms of walking the workspace) started
/// on the core the request's task was about to wake on, and the request
/// waited for it — the slowest request of a round, 1.6 ms late (a
/// scheduler trace, docs/performance.md).
pub struct Busy(());

impl Busy {
    pub fn begin() -> Busy {
        *BUSY.lock() += 1;
        Busy(())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut busy = BUSY.lock();
        *busy = busy.saturating_sub(1);
        if *busy == 0 {
            QUIET.notify_all();
        }
    }
}

/// Waits until nothing is [`Busy`], or until `deadline`.
fn wait_for_quiet(deadline: Instant) {
    let mut busy = BUSY.lock();
    while *busy > 0 {
        if QUIET.wait_until(&mut busy, deadline).timed_out() {
            return;
        }
    }
}

/// Runs `job` on the background thread; `None` if it panicked (logged) or
/// the thread could not be started.
pub async fn run<T, F>(job: F) -> Option<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(job());
    });
    if !submit(job) {
        return None;
    }
    rx.await.ok()
}

/// Queues `job` on the background thread without waiting for it; false
/// if the thread could not be started.
pub fn spawn(job: impl FnOnce() + Send + 'static) -> bool {
    submit(Box::new(job))
}

fn submit(job: Job) -> bool {
    static QUEUE: OnceLock<Option<mpsc::Sender<(Job, Instant)>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<(Job, Instant)>();
        let started = std::thread::Builder::new()
            .name("fettle-background".to_owned())
            .spawn(move || {
                lower_thread_priority("background");
                let arena = crate::allocator::PrivateArena::bind_current_thread();
                for (job, queued) in rx {
                    wait_for_quiet(queued + MOST_HELD_BACK);
                    // A panicking job is logged (the panic hook) and drops
                    // its answer; the thread goes on with the next.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    // Re-tagging a big file allocates and frees megabytes:
                    // handed back at once, from this thread's arena only.
                    if let Some(arena) = &arena {
                        arena.purge();
                    }
                }
            });
        match started {
            Ok(_) => Some(tx),
            Err(err) => {
                tracing::error!(%err, "could not start the background thread");
                None
            }
        }
    });
    match queue {
        Some(tx) => tx.send((job, Instant::now())).is_ok(),
        None => false,
    }
}

/// Lowers the calling thread's CPU priority: nice 10, and the batch
/// policy, under which waking up never preempts a running thread. At nice
/// 10 alone, queueing a job from a completion request (the redactor's
/// refresh) woke this thread onto the request's core, where it ran first:
/// the request lost 1-2.8 ms (one in ~30 after a pause). Batch threads wait
/// for the request to yield or for the scheduler's tick, and keep their
/// share of the CPU under load (the idle policy would starve them while a
/// build runs). On Linux both are per thread and inherited by the threads
/// it creates; raising them back needs a privilege, so only threads of
/// their own call this.
pub fn lower_thread_priority(what: &str) {
    let batch = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads the parameter struct, gettid and
    // setpriority only integers; they change the calling thread's
    // scheduling attributes (pid 0 and the tid: this thread), nothing else.
    let results = unsafe {
        [
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &batch),
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10),
        ]
    };
    if results.iter().any(|&r| r != 0) {
        tracing::debug!(%what, ?results, error = %std::io::Error::last_os_error(), "could not lower a thread's priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_in_order_at_a_lower_priority_and_survive_panics() {
        let scheduling = run(|| {
            // SAFETY: read the calling thread's nice value and policy.
            unsafe {
                (
                    libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t),
                    libc::sched_getscheduler(0),
                )
            }
        })
        .await;
        assert!(
            scheduling.is_some_and(|(nice, policy)| nice >= 10 && policy == libc::SCHED_BATCH),
            "{scheduling:?}"
        );
        let panicked: Option<()> = run(|| panic!("a broken job")).await;
        assert_eq!(panicked, None);
        let order: Vec<_> = futures::future::join_all((0..5).map(|i| run(move || i))).await;
        assert_eq!(order, (0..5).map(Some).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn no_job_starts_while_a_completion_is_answered() {
        let busy = Busy::begin();
        let queued = Instant::now();
        let started = tokio::spawn(run(Instant::now));
        tokio::time::sleep(Duration::from_millis(5)).await;
        let answered = Instant::now();
        drop(busy);
        let ran = started.await.ok().flatten().expect("the job ran");
        // Held back until the answer (on a loaded machine, perhaps until
        // the limit).
        assert!(
            ran >= answered || ran >= queued + MOST_HELD_BACK,
            "ran {:?} before the answer",
            answered - ran
        );
    }

    #[tokio::test]
    async fn a_long_answer_holds_a_job_back_for_a_moment_only() {
        let busy = Busy::begin();
        // Still busy when it runs: it was held back at most MOST_HELD_BACK
        // (a timeout, not a hang, if it waited for the answer).
        let ran_while_busy =
            tokio::time::timeout(Duration::from_secs(10), run(|| *BUSY.lock() > 0))
                .await
                .expect("held back until the answer");
        assert_eq!(ran_while_busy, Some(true));
        drop(busy);
    }
}
