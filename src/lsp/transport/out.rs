//! The way out to the client: each frame is written whole, in the order it
//! was handed over, by whoever hands it over when nothing is queued before
//! it (a handler writes its own answer: no wake-up of another task, which
//! after a pause could be parked on the other core), else by the writer
//! task, which also finishes a frame stdout could not take at once.
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::timing::{self, Stage};
use super::Outgoing;

type Stdout = Pin<Box<dyn AsyncWrite + Send>>;

/// Where frames go. Cheap to clone.
#[derive(Clone)]
pub(super) struct Out(Arc<Shared>);

struct Shared {
    state: Mutex<State>,
    queue: mpsc::UnboundedSender<Outgoing>,
}

struct State {
    stdout: Stdout,
    /// Frames handed to the writer and not yet wholly written: while there
    /// are any, a new frame queues behind them.
    queued: usize,
    /// stdout failed, or the writer has finished: nothing more goes out.
    closed: bool,
}

/// Why a frame did not go out.
#[derive(Debug)]
pub(super) struct Closed;

impl Out {
    /// The way out through `stdout`, and the writer task's future (to be
    /// spawned): once `finish` is cancelled, it writes what is queued and
    /// ends, and no frame goes out after that.
    pub(super) fn new<O>(
        stdout: O,
        finish: CancellationToken,
    ) -> (Out, impl std::future::Future<Output = ()>)
    where
        O: AsyncWrite + Send + 'static,
    {
        let (queue, frames) = mpsc::unbounded_channel();
        let out = Out(Arc::new(Shared {
            state: Mutex::new(State {
                stdout: Box::pin(stdout),
                queued: 0,
                closed: false,
            }),
            queue,
        }));
        let writer = write_queued(Arc::clone(&out.0), frames, finish);
        (out, writer)
    }

    /// Writes `frame` now if nothing is queued before it and stdout takes
    /// it (a pipe or socket with room: the usual case); else queues what is
    /// left of it for the writer.
    pub(super) fn send(&self, mut frame: Outgoing) -> Result<(), Closed> {
        let mut state = self.0.state.lock();
        if state.closed {
            return Err(Closed);
        }
        if state.queued == 0 {
            // Nothing will wake this context: `Pending` only means "hand it
            // to the writer", whose own poll registers the real waker.
            let mut cx = Context::from_waker(futures::task::noop_waker_ref());
            match poll_frame(&mut state.stdout, &mut frame, &mut cx) {
                Poll::Ready(Ok(())) => {
                    written(&frame);
                    return Ok(());
                }
                Poll::Ready(Err(err)) => {
                    tracing::error!(%err, "stdout is closed; dropping output");
                    state.closed = true;
                    return Err(Closed);
                }
                Poll::Pending => {}
            }
        }
        // Under the lock, so the queue's order is the order of handing over.
        self.0.queue.send(frame).map_err(|_| Closed)?;
        state.queued += 1;
        Ok(())
    }
}

/// Polls what is left of `frame` out, then a flush.
fn poll_frame(
    stdout: &mut Stdout,
    frame: &mut Outgoing,
    cx: &mut Context<'_>,
) -> Poll<std::io::Result<()>> {
    while frame.start < frame.buf.len() {
        match stdout.as_mut().poll_write(cx, &frame.buf[frame.start..]) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
            Poll::Ready(Ok(n)) => frame.start += n,
            Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
            Poll::Pending => return Poll::Pending,
        }
    }
    stdout.as_mut().poll_flush(cx)
}

fn written(frame: &Outgoing) {
    if let Some(queued) = frame.queued {
        timing::record(Stage::Write, queued.elapsed());
    }
}

/// The writer: finishes the queued frames in order.
async fn write_queued(
    shared: Arc<Shared>,
    mut frames: mpsc::UnboundedReceiver<Outgoing>,
    finish: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            biased;
            frame = frames.recv() => frame,
            () = finish.cancelled(), if !frames.is_closed() => {
                // What is queued still goes out; nothing after it.
                shared.state.lock().closed = true;
                frames.close();
                continue;
            }
        };
        let Some(mut frame) = next else { return };
        // The lock is held for each poll, never across a wait.
        let result =
            std::future::poll_fn(|cx| poll_frame(&mut shared.state.lock().stdout, &mut frame, cx))
                .await;
        let mut state = shared.state.lock();
        state.queued -= 1;
        if let Err(err) = result {
            tracing::error!(%err, "stdout is closed; dropping output");
            state.closed = true;
            return;
        }
        drop(state);
        written(&frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn frame(n: usize, len: usize) -> Outgoing {
        let text = format!("[{n}:{}]", "x".repeat(len));
        Outgoing {
            buf: text.into_bytes(),
            start: 0,
            queued: None,
        }
    }

    /// A pipe with room for 64 bytes: the first frame goes out partly at
    /// once, the rest of it and every later frame through the writer, then
    /// (once the reader has drained everything) frames go out directly
    /// again; the client sees every frame whole and in order.
    #[tokio::test]
    async fn frames_stay_whole_and_in_order_when_stdout_is_full() {
        let (stdout, mut client) = tokio::io::duplex(64);
        let finish = CancellationToken::new();
        let (out, writer) = Out::new(stdout, finish.clone());
        let writer = tokio::spawn(writer);
        let mut expected = Vec::new();
        for n in 0..20 {
            let f = frame(n, 10 + n * 7);
            expected.extend_from_slice(&f.buf);
            out.send(f).expect("open");
        }
        assert!(
            out.0.state.lock().queued > 0,
            "the pipe was full: frames queued"
        );
        let mut seen = vec![0; expected.len()];
        client.read_exact(&mut seen).await.expect("all of it");
        assert_eq!(
            String::from_utf8_lossy(&seen),
            String::from_utf8_lossy(&expected)
        );

        // Drained: the next frame is written by the sender itself.
        while out.0.state.lock().queued > 0 {
            tokio::task::yield_now().await;
        }
        let f = frame(99, 5);
        let direct = f.buf.clone();
        out.send(f).expect("open");
        assert_eq!(out.0.state.lock().queued, 0, "written at once, not queued");
        let mut seen = vec![0; direct.len()];
        client
            .read_exact(&mut seen)
            .await
            .expect("the direct frame");
        assert_eq!(seen, direct);

        // After finish, nothing more goes out.
        finish.cancel();
        writer.await.expect("the writer ends");
        assert!(out.send(frame(100, 1)).is_err());
    }

    /// A client that went away: the send says so, and so do later ones.
    #[tokio::test]
    async fn a_closed_stdout_refuses_frames() {
        let (stdout, client) = tokio::io::duplex(64);
        drop(client);
        let (out, writer) = Out::new(stdout, CancellationToken::new());
        let _writer = tokio::spawn(writer);
        assert!(out.send(frame(1, 3)).is_err());
        assert!(out.send(frame(2, 3)).is_err());
    }
}
