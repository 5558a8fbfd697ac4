//! `wasi:io/streams` for component packs: wasmtime's streams over the
//! resource table, with every write entering the sandbox like any host
//! call (counted, charged fuel per byte, its size checked). Stdout and
//! stderr writes pay for the bytes the host captures; a granted
//! directory's files pay the same. Everything else is passed through.

use crate::sandbox::{Loop, Sandbox};
use wasmtime::component::{HasData, Resource, ResourceTable};
use wasmtime_wasi_io::bindings::wasi::io::streams::{self, HostInputStream, HostOutputStream};
use wasmtime_wasi_io::poll::DynPollable;
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream, StreamError, StreamResult};

/// The interface name host calls of this module are counted under.
const IFACE: &str = "wasi:io/streams";

/// The resource table's streams plus the sandbox they enter.
pub(crate) struct Streams<'a> {
    pub table: &'a mut ResourceTable,
    pub sb: &'a mut Sandbox,
}

/// [`HasData`] for [`Streams`].
pub(crate) struct HasStreams;

impl HasData for HasStreams {
    type Data<'a> = Streams<'a>;
}

impl Streams<'_> {
    /// Enters a write of `bytes` bytes.
    fn enter(&mut self, bytes: usize) -> StreamResult<()> {
        self.sb
            .enter(IFACE, None, bytes, Loop::Outside)
            .map_err(StreamError::Trap)
    }

    /// Enters a write of `len` host-made bytes (zeroes).
    fn enter_len(&mut self, len: u64) -> StreamResult<()> {
        self.enter(usize::try_from(len).unwrap_or(usize::MAX))
    }

    /// Charges the bytes a splice moved.
    fn moved(&mut self, n: u64) -> u64 {
        self.sb.charge(usize::try_from(n).unwrap_or(usize::MAX));
        n
    }
}

impl streams::Host for Streams<'_> {
    fn convert_stream_error(&mut self, err: StreamError) -> wasmtime::Result<streams::StreamError> {
        streams::Host::convert_stream_error(self.table, err)
    }
}

impl HostOutputStream for Streams<'_> {
    async fn drop(&mut self, stream: Resource<DynOutputStream>) -> wasmtime::Result<()> {
        HostOutputStream::drop(self.table, stream).await
    }

    fn check_write(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<u64> {
        self.table.check_write(stream)
    }

    fn write(&mut self, stream: Resource<DynOutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        self.enter(bytes.len())?;
        self.table.write(stream, bytes)
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynOutputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        HostOutputStream::subscribe(self.table, stream)
    }

    async fn blocking_write_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        self.enter(bytes.len())?;
        self.table.blocking_write_and_flush(stream, bytes).await
    }

    async fn blocking_write_zeroes_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        self.enter_len(len)?;
        self.table
            .blocking_write_zeroes_and_flush(stream, len)
            .await
    }

    fn write_zeroes(&mut self, stream: Resource<DynOutputStream>, len: u64) -> StreamResult<()> {
        self.enter_len(len)?;
        self.table.write_zeroes(stream, len)
    }

    fn flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        self.table.flush(stream)
    }

    async fn blocking_flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        self.table.blocking_flush(stream).await
    }

    fn splice(
        &mut self,
        dest: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        self.enter(0)?;
        let n = self.table.splice(dest, src, len)?;
        Ok(self.moved(n))
    }

    async fn blocking_splice(
        &mut self,
        dest: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        self.enter(0)?;
        let n = self.table.blocking_splice(dest, src, len).await?;
        Ok(self.moved(n))
    }
}

impl HostInputStream for Streams<'_> {
    async fn drop(&mut self, stream: Resource<DynInputStream>) -> wasmtime::Result<()> {
        HostInputStream::drop(self.table, stream).await
    }

    fn read(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<Vec<u8>> {
        self.table.read(stream, len)
    }

    async fn blocking_read(
        &mut self,
        stream: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<Vec<u8>> {
        self.table.blocking_read(stream, len).await
    }

    fn skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        self.table.skip(stream, len)
    }

    async fn blocking_skip(
        &mut self,
        stream: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        self.table.blocking_skip(stream, len).await
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynInputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        HostInputStream::subscribe(self.table, stream)
    }
}
