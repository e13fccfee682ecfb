//! Device buffers and views of them: allocation, copies to, from and
//! between buffers, and fills. Every call checks its sizes before the
//! driver sees them.

use std::ffi::c_void;

use cudarc::driver::sys as cu;
use kevo_backend::ranges::{
    Access, check_access, check_alloc, check_copy, check_distinct, check_view,
};
use kevo_backend::{BackendError, BufferId};

use crate::device::CudaBackend;
use crate::error::{Op, ok};

/// A device allocation, or a view into one.
pub(crate) struct BufferEntry {
    pub(crate) ptr: cu::CUdeviceptr,
    pub(crate) bytes: usize,
    /// For a view, the buffer whose memory it addresses.
    pub(crate) parent: Option<u64>,
}

impl CudaBackend {
    /// The entry of a live buffer, or the typed error for a stale handle.
    pub(crate) fn buffer(&self, id: BufferId) -> Result<&BufferEntry, BackendError> {
        self.buffers.get(id.0)
    }

    /// `Backend::alloc`: plain device memory of `bytes` bytes.
    pub(crate) fn allocate(&mut self, bytes: usize) -> Result<BufferId, BackendError> {
        check_alloc(bytes)?;
        self.activate()?;
        let mut ptr: cu::CUdeviceptr = 0;
        // SAFETY: out-parameter, context current. Plain device memory: managed
        // memory would add page-migration faults to the timings.
        if let Err(r) = ok(unsafe { cu::cuMemAlloc_v2(&mut ptr, bytes) }) {
            return Err(self.fail(r, Op::Alloc(bytes), &format!("allocating {bytes} bytes")));
        }
        let id = self.buffers.insert(BufferEntry {
            ptr,
            bytes,
            parent: None,
        });
        Ok(BufferId(id))
    }

    /// `Backend::view`: a buffer addressing part of another's memory.
    pub(crate) fn make_view(
        &mut self,
        parent: BufferId,
        offset: usize,
        bytes: usize,
    ) -> Result<BufferId, BackendError> {
        self.activate()?;
        let p = self.buffer(parent)?;
        check_view(offset, bytes, p.bytes)?;
        // A view of a view addresses the same allocation.
        let entry = BufferEntry {
            ptr: p.ptr + offset as u64,
            bytes,
            parent: Some(p.parent.unwrap_or(parent.0)),
        };
        let id = self.buffers.insert(entry);
        Ok(BufferId(id))
    }

    /// `Backend::free`: free an allocation (and forget its views and the
    /// graphs that point at it), or forget a view.
    pub(crate) fn release_buffer(&mut self, buffer: BufferId) {
        let usable = self.activate().is_ok();
        let Some(entry) = self.buffers.remove(buffer.0) else {
            return;
        };
        if entry.parent.is_some() {
            // A view owns no memory.
            return;
        }
        // Views of a freed allocation would address freed memory.
        self.buffers.retain(|b| b.parent != Some(buffer.0));
        if usable {
            // Graphs captured with this buffer point at freed memory.
            self.destroy_graphs();
            // SAFETY: allocation of the current context, freed once.
            unsafe { cu::cuMemFree_v2(entry.ptr) };
        }
    }

    /// `Backend::upload`: copy `data` to the start of `buffer`.
    pub(crate) fn copy_in(&mut self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError> {
        self.activate()?;
        let entry = self.buffer(buffer)?;
        if !check_access(Access::Upload, data.len(), entry.bytes)? {
            return Ok(());
        }
        let dst = entry.ptr;
        // SAFETY: the destination holds at least data.len() bytes; the
        // source is a live slice.
        let r = unsafe { cu::cuMemcpyHtoD_v2(dst, data.as_ptr().cast::<c_void>(), data.len()) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "copying to the device"))
    }

    /// `Backend::download`: copy the start of `buffer` into `out`.
    pub(crate) fn copy_out(
        &mut self,
        buffer: BufferId,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        self.activate()?;
        let entry = self.buffer(buffer)?;
        if !check_access(Access::Download { offset: 0 }, out.len(), entry.bytes)? {
            return Ok(());
        }
        let src = entry.ptr;
        // SAFETY: the source holds at least out.len() bytes; the destination
        // is a live mutable slice.
        let r = unsafe { cu::cuMemcpyDtoH_v2(out.as_mut_ptr().cast::<c_void>(), src, out.len()) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "copying from the device"))
    }

    /// `Backend::download_range`: copy `out.len()` bytes at `offset` of
    /// `buffer` into `out`.
    pub(crate) fn copy_out_range(
        &mut self,
        buffer: BufferId,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        self.activate()?;
        let entry = self.buffer(buffer)?;
        if !check_access(Access::Download { offset }, out.len(), entry.bytes)? {
            return Ok(());
        }
        let src = entry.ptr + offset as u64;
        // SAFETY: the range lies inside the allocation; the destination is a
        // live mutable slice.
        let r = unsafe { cu::cuMemcpyDtoH_v2(out.as_mut_ptr().cast::<c_void>(), src, out.len()) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "copying from the device"))
    }

    /// `Backend::copy_buffer`: copy `bytes` bytes between two distinct
    /// buffers on the device, and wait for it.
    pub(crate) fn copy_between(
        &mut self,
        src: BufferId,
        dst: BufferId,
        bytes: usize,
    ) -> Result<(), BackendError> {
        let live = self.activate()?;
        check_distinct(src, dst)?;
        let (s, d) = (self.buffer(src)?, self.buffer(dst)?);
        if !check_copy(bytes, s.bytes, d.bytes)? {
            return Ok(());
        }
        let (sp, dp) = (s.ptr, d.ptr);
        // SAFETY: distinct allocations of at least `bytes` bytes.
        let r = unsafe { cu::cuMemcpyDtoDAsync_v2(dp, sp, bytes, live.stream) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "copying between buffers"))?;
        self.sync(live.stream, "copying between buffers")
    }

    /// `Backend::fill_buffer`: set the first `bytes` bytes of `buffer` to
    /// `value`, and wait for it.
    pub(crate) fn fill(
        &mut self,
        buffer: BufferId,
        value: u8,
        bytes: usize,
    ) -> Result<(), BackendError> {
        let live = self.activate()?;
        let entry = self.buffer(buffer)?;
        if !check_access(Access::Fill, bytes, entry.bytes)? {
            return Ok(());
        }
        let ptr = entry.ptr;
        // SAFETY: the allocation holds at least `bytes` bytes.
        let r = unsafe { cu::cuMemsetD8Async(ptr, value, bytes, live.stream) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "filling a buffer"))?;
        self.sync(live.stream, "filling a buffer")
    }
}
