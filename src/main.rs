// See `fettle::allocator`: jemalloc, for arenas that can be purged one at a time.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: fettle::allocator::Global = fettle::allocator::Global {};

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
