// See `fettle::allocator`: jemalloc, for arenas that can be purged one at a time.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: fettle::allocator::Global = fettle::allocator::Global {};

/// jemalloc's options (its `malloc_conf`, under the prefix tikv-jemalloc
/// gives its symbols): one arena for all threads but the background one
/// (which creates its own). With one per CPU core and thread (8 here), the
/// threads that come and go on the blocking pool left memory in each:
/// resident memory grew by 13-14 MB over the benchmark's 1,000 completions,
/// 5.1-5.9 MB with one (runs of 2026-11-27, docs/performance.md).
#[cfg(not(target_env = "msvc"))]
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_OPTIONS: Option<&u8> = Some(&b"narenas:1\0"[0]);

fn main() {
    // SAFETY: first thing in the process: nothing of tree-sitter exists yet.
    #[cfg(not(target_env = "msvc"))]
    unsafe {
        fettle::allocator::route_tree_sitter();
    }
    // First, while the process has one thread: secrets out of the
    // environment (see `secrets::store`). `sandbox-exec` is the wrapper a
    // command runs under; it must pass on what it was given.
    if std::env::args_os()
        .nth(1)
        .is_none_or(|a| a != "sandbox-exec")
    {
        fettle::secrets::store::protect_process();
        fettle::model::local::idle_threads_sleep();
    }
    fettle::cli::exit(fettle::cli::main());
}
