//! [`WriteTimeout`]: a connection's socket that fails a write which makes
//! no progress for a bounded time.
//!
//! Why: a client that pipelines requests and never reads its responses
//! fills its receive window and the server's send buffer, and then every
//! write of hyper's returns `Pending` forever. hyper has no write timeout,
//! and its header timeout does not run while a response is being written,
//! so such a connection held its slot (and kernel memory for its buffers)
//! for as long as the client liked; 1,024 of them held every slot.
//!
//! How: the timer is armed when a write returns `Pending` and disarmed by
//! any write that makes progress, so a slow reader that does read is never
//! cut off, only one that stops. A write that returns `Ready` (every write
//! of a client that reads) costs one branch; the timer is allocated on the
//! connection's first `Pending` write only.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{sleep, Instant, Sleep};

/// `io` whose writes fail with [`io::ErrorKind::TimedOut`] after
/// `timeout` without progress.
#[derive(Debug)]
pub struct WriteTimeout<IO> {
    io: IO,
    timeout: Duration,
    /// The deadline of the write that is waiting, when one is; the boxed
    /// `Sleep` is kept and reset, so a connection allocates it once.
    timer: Option<Pin<Box<Sleep>>>,
    armed: bool,
}

impl<IO> WriteTimeout<IO> {
    /// Wraps `io`.
    pub fn new(io: IO, timeout: Duration) -> Self {
        WriteTimeout {
            io,
            timeout,
            timer: None,
            armed: false,
        }
    }

    /// What a write returned, seen by the timer: progress (or an error)
    /// disarms it; `Pending` arms it if it is not running yet, and fails
    /// the write once it has fired.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.armed = false;
            return polled;
        }
        if !self.armed {
            let deadline = Instant::now() + self.timeout;
            match &mut self.timer {
                Some(timer) => timer.as_mut().reset(deadline),
                None => self.timer = Some(Box::pin(sleep(self.timeout))),
            }
            self.armed = true;
        }
        // Polling the timer registers the task's waker with it, so the
        // connection is woken when it fires even if the socket never is.
        let fired = self
            .timer
            .as_mut()
            .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
        if fired {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no write progress within the write timeout",
            )));
        }
        Poll::Pending
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for WriteTimeout<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    // Flushing and shutting down a TCP socket never wait for the peer:
    // passed through, so that they cannot disarm a running timer.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    // Paused time (tokio's test-util): the runtime's clock moves only when
    // every task waits, straight to the next timer. The timeout and the
    // reader's pauses are then compared as durations, never as how fast
    // this machine runs them: the verdicts hold on a loaded one.

    #[tokio::test(start_paused = true)]
    async fn a_stuck_write_fails_after_the_timeout() {
        // A pipe whose reader never reads: writes stall once its buffer is full.
        let (client, server) = tokio::io::duplex(64);
        let timeout = Duration::from_millis(300);
        let mut io = WriteTimeout::new(server, timeout);
        io.write_all(&[0; 64]).await.unwrap();
        let started = Instant::now();
        let err = io.write_all(&[0; 1]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        // Exactly the timeout on the paused clock (its timer's resolution
        // is a millisecond): not sooner, and not only at some later timer.
        let waited = started.elapsed();
        assert!(
            waited >= timeout && waited <= timeout + Duration::from_millis(1),
            "{waited:?}"
        );
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_reads_is_not_cut_off() {
        let (mut client, server) = tokio::io::duplex(16);
        let timeout = Duration::from_millis(400);
        let mut io = WriteTimeout::new(server, timeout);
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0; 16];
            // Ten reads, 150 ms apart: 1.5 s in all, far longer than the
            // timeout, but each wait is well within it.
            while got < 160 {
                sleep(Duration::from_millis(150)).await;
                got += client.read(&mut buf).await.unwrap();
            }
        });
        let started = Instant::now();
        io.write_all(&[0; 160]).await.unwrap();
        // The write did wait on the reader (nine pauses of 150 ms before
        // its last bytes fit), far past one timeout: a timer that progress
        // did not disarm would have fired.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(9 * 150), "{took:?}");
        assert!(took > 3 * timeout, "{took:?}");
        reader.await.unwrap();
    }
}
