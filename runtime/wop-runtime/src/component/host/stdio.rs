//! WASI stdout and stderr, captured into the invocation's bounded log
//! (lines cut and counted there, like `log` lines).

use wop_core::events::LogStream;
use wop_core::logbuf::{SharedLog, with_log};

/// One captured stream (stdout or stderr).
#[derive(Clone)]
pub(crate) struct CapturedStdio {
    pub stream: LogStream,
    pub log: SharedLog,
}

/// Permit size for one write (a bounded host allocation per call).
const STDIO_PERMIT: usize = 64 << 10;

impl wasmtime_wasi::cli::IsTerminal for CapturedStdio {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for CapturedStdio {
    fn p2_stream(&self) -> Box<dyn wasmtime_wasi::p2::OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for CapturedStdio {
    async fn ready(&mut self) {}
}

impl wasmtime_wasi::p2::OutputStream for CapturedStdio {
    fn write(&mut self, bytes: bytes::Bytes) -> wasmtime_wasi::p2::StreamResult<()> {
        with_log(&self.log, |l| l.write(self.stream, &bytes));
        Ok(())
    }
    fn flush(&mut self) -> wasmtime_wasi::p2::StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> wasmtime_wasi::p2::StreamResult<usize> {
        Ok(STDIO_PERMIT)
    }
}

impl tokio::io::AsyncWrite for CapturedStdio {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        with_log(&self.log, |l| l.write(self.stream, buf));
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
