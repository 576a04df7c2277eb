//! The memory allocator, and an arena of its own for background work.
//!
//! The binary allocates through jemalloc (`main.rs` installs [`Global`]).
//! Two needs pull against each other: memory a big background job frees
//! (re-tagging a 10,000-line file allocates and frees megabytes) must go
//! back to the system, or the server's resident memory creeps up edit after
//! edit; and memory a completion request frees must *not*, or the next
//! request, a keystroke later, page-faults it all back in. glibc can only
//! trim every arena at once (`malloc_trim`), which did the first and broke
//! the second: after each background job the next completion's allocations
//! faulted (on an idle server its prompt-building stage went from 0.43 to
//! 0.6 ms p50, and finding the names to look up from 63 to ~500 µs p90).
//! jemalloc's arenas can be purged one at a time: the background thread
//! gets its own ([`PrivateArena`]), purged after each job; the other
//! threads' arenas return memory only after it has been unused for seconds
//! (jemalloc's decay), so what a request frees is still there for the next.

/// The allocator `main.rs` installs.
#[cfg(not(target_env = "msvc"))]
pub type Global = tikv_jemallocator::Jemalloc;

/// Makes tree-sitter (C code, which calls `malloc` directly) allocate
/// through jemalloc too: its trees and parse stacks are the server's
/// biggest allocations, and the background thread's reparses must land in
/// that thread's arena to be purged with it.
///
/// # Safety
/// Call before anything from tree-sitter is created (first in `main`): an
/// object allocated by one allocator and freed by the other corrupts both.
pub unsafe fn route_tree_sitter() {
    #[cfg(not(target_env = "msvc"))]
    // SAFETY: jemalloc's C entry points have the signatures tree-sitter
    // asks for; the caller guarantees nothing of tree-sitter exists yet.
    unsafe {
        tree_sitter::set_allocator(
            Some(tikv_jemalloc_sys::malloc),
            Some(tikv_jemalloc_sys::calloc),
            Some(tikv_jemalloc_sys::realloc),
            Some(tikv_jemalloc_sys::free),
        );
    }
}

/// A jemalloc arena only the thread that created it allocates from.
pub struct PrivateArena {
    #[cfg(not(target_env = "msvc"))]
    purge_command: std::ffi::CString,
}

impl PrivateArena {
    /// Creates an arena and makes the calling thread allocate from it;
    /// `None` (logged) when jemalloc refuses, and the thread keeps its
    /// arena.
    pub fn bind_current_thread() -> Option<PrivateArena> {
        #[cfg(not(target_env = "msvc"))]
        {
            use tikv_jemalloc_ctl::raw;
            // SAFETY: `arenas.create` reads an unsigned (the new arena's
            // index) and `thread.arena` writes one, as these types say.
            let bound = unsafe {
                raw::read::<u32>(b"arenas.create\0")
                    .and_then(|index| raw::write::<u32>(b"thread.arena\0", index).map(|()| index))
            };
            match bound {
                Ok(index) => {
                    let purge_command =
                        std::ffi::CString::new(format!("arena.{index}.purge")).ok()?;
                    Some(PrivateArena { purge_command })
                }
                Err(err) => {
                    tracing::debug!(%err, "no arena of its own for this thread");
                    None
                }
            }
        }
        #[cfg(target_env = "msvc")]
        None
    }

    /// Hands the arena's unused pages back to the system, after moving
    /// what this thread's cache holds back into it. Only touches this
    /// arena: the other threads' free memory stays mapped.
    pub fn purge(&self) {
        #[cfg(not(target_env = "msvc"))]
        {
            use std::ptr::null_mut;
            // SAFETY: both are jemalloc's "void" controls: called with no
            // input and no output, as here; the names are NUL-terminated.
            let results = unsafe {
                [
                    tikv_jemalloc_sys::mallctl(
                        c"thread.tcache.flush".as_ptr(),
                        null_mut(),
                        null_mut(),
                        null_mut(),
                        0,
                    ),
                    tikv_jemalloc_sys::mallctl(
                        self.purge_command.as_ptr(),
                        null_mut(),
                        null_mut(),
                        null_mut(),
                        0,
                    ),
                ]
            };
            if results.iter().any(|&code| code != 0) {
                tracing::debug!(?results, "purging the background arena failed");
            }
        }
    }
}

/// Most memory freed but still mapped (jemalloc's dirty and muzzy pages,
/// over all arenas) that the server keeps: past it, every arena is purged.
/// Typing frees a few megabytes at most, which stays for the next
/// keystroke; a huge document (its JSON, rope and tree) frees tens to
/// hundreds, which jemalloc's 10-second decay kept resident: in the
/// hostile-client soak, ~200 MB of the server's 300-390 MB
/// (docs/performance.md).
pub const MAX_FREED_BYTES: usize = 48 << 20;
/// How often [`spawn_freed_memory_cap`]'s thread looks.
const FREED_CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Starts the thread that keeps freed memory under [`MAX_FREED_BYTES`]
/// (the language server's; a CLI run is short). Each look costs a few
/// microseconds (jemalloc's page counters).
pub fn spawn_freed_memory_cap() {
    let spawned = std::thread::Builder::new()
        .name("fettle-heap-cap".to_owned())
        .spawn(|| loop {
            std::thread::sleep(FREED_CHECK_EVERY);
            if let Some(pages) = heap_pages() {
                if pages.dirty + pages.muzzy > MAX_FREED_BYTES {
                    purge_all();
                }
            }
        });
    if let Err(err) = spawned {
        tracing::warn!(%err, "no thread to hand freed memory back; the allocator's decay will");
    }
}

/// Hands every arena's unused pages back to the system.
pub fn purge_all() {
    #[cfg(not(target_env = "msvc"))]
    {
        // 4096 is MALLCTL_ARENAS_ALL.
        // SAFETY: a "void" control: called with no input and no output;
        // the name is NUL-terminated.
        let result = unsafe {
            tikv_jemalloc_sys::mallctl(
                c"arena.4096.purge".as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        if result != 0 {
            tracing::debug!(result, "purging all arenas failed");
        }
    }
}

/// Where the heap's memory is, in bytes, over all arenas: what is
/// allocated (whole pages in use), and what is free but still mapped
/// (dirty: not yet handed back; muzzy: handed back lazily, still counted
/// in the resident set until the kernel takes it). For `fettle/stats`.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeapPages {
    pub active: usize,
    pub dirty: usize,
    pub muzzy: usize,
}

/// The heap's pages now; `None` where jemalloc is not the allocator or
/// does not answer. Page counts need no `stats` build of jemalloc (which
/// would count every allocation).
pub fn heap_pages() -> Option<HeapPages> {
    #[cfg(not(target_env = "msvc"))]
    {
        use tikv_jemalloc_ctl::raw;
        // 4096 is jemalloc's MALLCTL_ARENAS_ALL: the sum over all arenas.
        // SAFETY: `epoch` takes a u64 (refreshing what is read next); the
        // others read a size_t each, as their types say.
        unsafe {
            raw::write::<u64>(b"epoch\0", 1).ok()?;
            let page = raw::read::<usize>(b"arenas.page\0").ok()?;
            let pages = |name: &[u8]| raw::read::<usize>(name).ok().map(|n| n * page);
            Some(HeapPages {
                active: pages(b"stats.arenas.4096.pactive\0")?,
                dirty: pages(b"stats.arenas.4096.pdirty\0")?,
                muzzy: pages(b"stats.arenas.4096.pmuzzy\0")?,
            })
        }
    }
    #[cfg(target_env = "msvc")]
    None
}

#[cfg(all(test, not(target_env = "msvc")))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use tikv_jemalloc_ctl::raw;

    /// The two tests one at a time: one counts the whole process's pages,
    /// the other allocates and frees 8 MB.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Dirty pages (freed, still mapped) of `arena`, fresh.
    fn dirty_pages(arena: u32) -> Result<usize, tikv_jemalloc_ctl::Error> {
        // SAFETY: `epoch` takes a u64 (refreshing the statistics);
        // `stats.arenas.<i>.pdirty` reads a size_t.
        unsafe {
            raw::write::<u64>(b"epoch\0", 1)?;
            let name = format!("stats.arenas.{arena}.pdirty\0");
            raw::read::<usize>(name.as_bytes())
        }
    }

    /// Binds the calling thread to an arena of its own, allocates and
    /// frees 8 MB there; the arena's index.
    fn churn() -> (PrivateArena, u32) {
        let arena = PrivateArena::bind_current_thread().expect("an arena");
        // SAFETY: reads an unsigned.
        let index = unsafe { raw::read::<u32>(b"thread.arena\0") }.expect("thread.arena");
        let blocks: Vec<_> = (0..32)
            // SAFETY: jemalloc's malloc; each block freed below.
            .map(|_| unsafe { tikv_jemalloc_sys::malloc(256 * 1024) })
            .collect();
        for block in blocks {
            assert!(!block.is_null());
            // SAFETY: allocated above by the same allocator, freed once.
            unsafe { tikv_jemalloc_sys::free(block) };
        }
        (arena, index)
    }

    #[test]
    fn heap_pages_count_what_is_allocated_and_what_was_freed() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        // A thread and arena of its own (the other test churns too).
        std::thread::spawn(|| {
            let _arena = PrivateArena::bind_current_thread().expect("an arena");
            let before = heap_pages().expect("jemalloc answers");
            // SAFETY: jemalloc's malloc; the block is freed below.
            let block = unsafe { tikv_jemalloc_sys::malloc(16 << 20) };
            assert!(!block.is_null());
            let during = heap_pages().expect("jemalloc answers");
            // The counts are the whole process's: the other tests' threads
            // allocate and free meanwhile (a 1 MB margin was missed by
            // 12 KB in a CI run), hence 4 MB.
            assert!(
                during.active >= before.active + (12 << 20),
                "{before:?} → {during:?} with 16 MB allocated"
            );
            // SAFETY: allocated above by the same allocator, freed once.
            unsafe { tikv_jemalloc_sys::free(block) };
            let after = heap_pages().expect("jemalloc answers");
            assert!(
                after.active + (12 << 20) <= during.active,
                "{during:?} → {after:?} with 16 MB freed"
            );
        })
        .join()
        .expect("the test thread");
    }

    #[test]
    fn the_background_arena_is_purged_and_the_others_are_not() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        // Threads of their own: binding changes the calling thread's arena.
        // The neighbour stays alive (holding its arena) until the end.
        let (tell, neighbour) = std::sync::mpsc::channel();
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let neighbour_thread = std::thread::spawn(move || {
            let (_arena, index) = churn();
            tell.send(index).expect("send");
            let _ = finished.recv();
        });
        let neighbour = neighbour.recv().expect("the neighbour's arena");
        std::thread::spawn(move || {
            let (arena, index) = churn();
            let before = dirty_pages(index).unwrap();
            let neighbour_before = dirty_pages(neighbour).unwrap();
            assert!(
                before > 0 && neighbour_before > 0,
                "{before} {neighbour_before}"
            );
            arena.purge();
            assert_eq!(
                dirty_pages(index).unwrap(),
                0,
                "{before} dirty pages before"
            );
            assert_eq!(
                dirty_pages(neighbour).unwrap(),
                neighbour_before,
                "another arena was purged"
            );
        })
        .join()
        .expect("the test thread");
        done.send(()).expect("send");
        neighbour_thread.join().expect("the neighbour");
    }

    #[test]
    fn purge_all_hands_back_every_arenas_freed_pages() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let (tell, churned) = std::sync::mpsc::channel();
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let finished = std::sync::Arc::new(std::sync::Mutex::new(finished));
        // Two threads, each with freed pages in an arena of its own.
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let tell = tell.clone();
                let finished = finished.clone();
                std::thread::spawn(move || {
                    let (_arena, index) = churn();
                    tell.send(index).expect("send");
                    let _ = finished.lock().unwrap_or_else(|e| e.into_inner()).recv();
                })
            })
            .collect();
        let arenas: Vec<u32> = (0..2).map(|_| churned.recv().expect("an arena")).collect();
        for &arena in &arenas {
            assert!(
                dirty_pages(arena).unwrap() > 0,
                "arena {arena} has no freed pages"
            );
        }
        purge_all();
        for &arena in &arenas {
            assert_eq!(
                dirty_pages(arena).unwrap(),
                0,
                "arena {arena} kept its freed pages"
            );
        }
        drop(done);
        for thread in threads {
            thread.join().expect("a churning thread");
        }
    }
}
