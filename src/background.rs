//! Work nobody is waiting for — the syntax diagnostics and index update
//! after an edit, the index's queued updates — on one thread of its own at
//! a lower CPU priority. On the blocking pool it would compete as an equal
//! with a completion's own work and, with two cores, could take both: a
//! request arriving while a big file is re-indexed waited behind it. Here
//! it never takes more than one core and gives way to whatever the user is
//! waiting for. Jobs run one at a time, in the order given.
use std::sync::mpsc;
use std::sync::OnceLock;

use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

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

fn submit(job: Job) -> bool {
    static QUEUE: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new()
            .name("fettle-background".to_owned())
            .spawn(move || {
                lower_thread_priority("background");
                for job in rx {
                    // A panicking job is logged (the panic hook) and drops
                    // its answer; the thread goes on with the next.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    release_freed_memory();
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
        Some(tx) => tx.send(job).is_ok(),
        None => false,
    }
}

/// Hands memory the jobs freed back to the system. Re-tagging a big file
/// allocates and frees megabytes; glibc keeps freed memory in this thread's
/// arena, and over a thousand edits the server's resident memory grew by
/// 14 MB that nothing used. Trimming costs little next to such a job, on a
/// thread nobody waits for.
fn release_freed_memory() {
    if std::env::var_os("FETTLE_EXP_NO_TRIM").is_some() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Lowers the calling thread's CPU priority (nice 10). On Linux the nice
/// value is per thread and inherited by the threads it creates. Raising it
/// back needs a privilege, so only threads of their own call this.
pub fn lower_thread_priority(what: &str) {
    // SAFETY: gettid and setpriority only read their integer arguments and
    // change the calling thread's scheduling attribute; no memory is shared.
    let result = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10)
    };
    if result != 0 {
        tracing::debug!(%what, error = %std::io::Error::last_os_error(), "could not lower a thread's priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_in_order_at_a_lower_priority_and_survive_panics() {
        let nice = run(|| {
            // SAFETY: reads the calling thread's nice value.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
        })
        .await;
        assert!(nice.is_some_and(|n| n >= 10), "{nice:?}");
        let panicked: Option<()> = run(|| panic!("a broken job")).await;
        assert_eq!(panicked, None);
        let order: Vec<_> = futures::future::join_all((0..5).map(|i| run(move || i))).await;
        assert_eq!(order, (0..5).map(Some).collect::<Vec<_>>());
    }
}
