//! stdin and stdout without tokio's blocking pool.
//!
//! `tokio::io::stdin()`/`stdout()` do every read and write on the blocking
//! pool: two thread hand-offs per message each way, on every keystroke's
//! request. Editors connect language servers through pipes or socket pairs
//! (libuv, which Neovim and VS Code use, makes socket pairs); both can be
//! made non-blocking and watched by the runtime's reactor, so a message
//! wakes the reading task directly and a frame is written by the writing
//! task itself. Anything the reactor cannot watch (a regular file, a
//! terminal on some systems) falls back to tokio's own.
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub type Input = Pin<Box<dyn AsyncRead + Send>>;
pub type Output = Pin<Box<dyn AsyncWrite + Send>>;

pub fn stdin() -> Input {
    match watched(io::stdin().as_fd().try_clone_to_owned()) {
        Ok(fd) => Box::pin(Watched(fd)),
        Err(err) => fallback("stdin", &err, tokio::io::stdin()),
    }
}

pub fn stdout() -> Output {
    match watched(io::stdout().as_fd().try_clone_to_owned()) {
        Ok(fd) => Box::pin(Watched(fd)),
        Err(err) => fallback("stdout", &err, tokio::io::stdout()),
    }
}

/// tokio's own stream for `name`, when the reactor cannot watch it.
fn fallback<S: Send + 'static>(name: &str, err: &io::Error, stream: S) -> Pin<Box<S>> {
    tracing::debug!(%err, "{name} through the blocking pool");
    Box::pin(stream)
}

/// `fd` (a duplicate of a standard stream) made non-blocking and registered
/// with the reactor; on failure the stream is left blocking as it was.
fn watched(fd: io::Result<OwnedFd>) -> io::Result<AsyncFd<OwnedFd>> {
    let fd = fd?;
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function owns.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; only the O_NONBLOCK bit changes.
    if unsafe { libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: an `OwnedFd` is open and keeps its descriptor until dropped,
    // which only the `AsyncFd` can do.
    unsafe { AsyncFd::register(fd) }.map_err(|refused| {
        // The reactor refused it (a regular file): blocking again, as the
        // fallback expects. The duplicate shares the open file with the
        // standard stream, so this restores that too.
        // SAFETY: as above.
        unsafe { libc::fcntl(raw, libc::F_SETFL, flags) };
        refused.into()
    })
}

struct Watched(AsyncFd<OwnedFd>);

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            // SAFETY: `read` only writes into the unfilled part (never
            // de-initialises), and what it wrote is marked filled below.
            let unfilled = unsafe { buf.unfilled_mut() };
            let result = guard.try_io(|fd| {
                // SAFETY: reads at most `unfilled.len()` bytes into it.
                let n = unsafe {
                    libc::read(fd.as_raw_fd(), unfilled.as_mut_ptr().cast(), unfilled.len())
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match result {
                Ok(Ok(n)) => {
                    // SAFETY: `read` initialised these `n` bytes.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(err)) => return Poll::Ready(Err(err)),
                // Not ready after all: the readiness was cleared, wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.0.poll_write_ready(cx))?;
            let result = guard.try_io(|fd| {
                // SAFETY: writes from `data`, a valid buffer of its length.
                let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match result {
                Ok(done) => return Poll::Ready(done),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(())) // unbuffered
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
