//! A write timeout for client connections: a peer that stops reading cannot
//! hold a connection (and what is queued for it) open. The clock starts
//! when a write cannot make progress and is reset by any write that does;
//! when it runs out the write fails, hyper drops the connection, and
//! everything queued for it is freed.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner` with writes that fail after `timeout` without progress.
pub(crate) struct WriteTimeout<T> {
    inner: T,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteTimeout<T> {
    pub(crate) fn new(inner: T, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// Maps a pending write to a timeout error once the clock ran out.
    fn watch<R>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        match r {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let timeout = self.timeout;
                let sleep = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                ready!(sleep.as_mut().poll(cx));
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the client did not read for {} ms: connection dropped",
                        timeout.as_millis()
                    ),
                )))
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::AsyncWriteExt as _;

    #[tokio::test]
    async fn a_reader_that_stops_fails_the_write_and_one_that_reads_does_not() {
        // A 64-byte pipe nobody reads: the second write cannot progress.
        let (a, mut b) = tokio::io::duplex(64);
        let mut w = WriteTimeout::new(a, Duration::from_millis(50));
        w.write_all(&[0; 64]).await.unwrap();
        let e = w.write_all(&[0; 64]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        // Reading frees room: the clock restarts with each write.
        let (a, mut b2) = tokio::io::duplex(64);
        let mut w = WriteTimeout::new(a, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            let mut sink = vec![0u8; 4096];
            let mut n = 0;
            while n < 4096 {
                n += tokio::io::AsyncReadExt::read(&mut b2, &mut sink)
                    .await
                    .unwrap();
            }
        });
        w.write_all(&[1; 4096]).await.unwrap();
        reader.await.unwrap();
        drop(b.shutdown().await);
    }
}
