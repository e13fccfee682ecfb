//! The device's primary context: taking it and making it current, and
//! recovering from a sticky fault by resetting it, or marking the device
//! lost for the process when the driver refuses (see [`CudaBackend`] for
//! the fault model). Dropping a backend destroys what it made in the
//! context and releases its reference.

use std::ffi::c_int;
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::sys::{self as cu, CUresult};
use kevo_backend::BackendError;

use crate::device::CudaBackend;
use crate::error::{Op, is_sticky, ok, to_error};
use crate::loader::unavailable;

/// Per-device epoch of the primary context: bumped by every reset, so a
/// backend whose context was reset by another backend of the same process
/// (they share the device's primary context) notices that its handles are
/// gone instead of using them in the new context.
static EPOCHS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

/// The epoch counter of device `ordinal`.
pub(crate) fn epoch_slot(ordinal: c_int) -> &'static AtomicU64 {
    &EPOCHS[(ordinal.max(0) as usize).min(EPOCHS.len() - 1)]
}

/// Per-device reason why CUDA is lost for the rest of the process, set when
/// a sticky fault could not be recovered from (see [`CudaBackend`]).
pub(crate) static LOST: [OnceLock<String>; 64] = [const { OnceLock::new() }; 64];

fn lost_slot(ordinal: c_int) -> &'static OnceLock<String> {
    &LOST[(ordinal.max(0) as usize).min(LOST.len() - 1)]
}

/// Why device `ordinal` is lost for the process, if it is.
pub(crate) fn lost_reason(ordinal: c_int) -> Option<&'static String> {
    lost_slot(ordinal).get()
}

/// Context-level objects; all die with the context.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Live {
    pub(crate) ctx: cu::CUcontext,
    pub(crate) stream: cu::CUstream,
    pub(crate) start: cu::CUevent,
    pub(crate) end: cu::CUevent,
}

/// Append a note to the message of a typed error.
fn with_note(err: BackendError, note: &str) -> BackendError {
    match err {
        BackendError::Fault { kind, message } => BackendError::Fault {
            kind,
            message: format!("{message}; {note}"),
        },
        BackendError::InvalidLaunch(m) => BackendError::InvalidLaunch(format!("{m}; {note}")),
        BackendError::Runtime(m) => BackendError::Runtime(format!("{m}; {note}")),
        other => other,
    }
}

impl CudaBackend {
    /// How many times a device fault made this backend reset its context.
    pub fn context_resets(&self) -> u64 {
        self.resets
    }

    /// Whether a fault left this device unusable for the rest of the
    /// process; every call then returns `BackendError::Unavailable`.
    pub fn is_lost(&self) -> bool {
        lost_reason(self.ordinal).is_some()
    }

    /// Take a reference on the primary context (or, with `new_ref` false,
    /// just look it up, the reference being held already) and create the
    /// stream and events in it.
    fn acquire(&mut self, new_ref: bool) -> Result<Live, BackendError> {
        let mut ctx = ptr::null_mut();
        // SAFETY: valid device, out-parameter.
        ok(unsafe { cu::cuDevicePrimaryCtxRetain(&mut ctx, self.device) })
            .map_err(|r| to_error(r, Op::Other, "retaining the primary context"))?;
        if new_ref {
            self.retained = true;
        } else {
            // SAFETY: balances the retain just above.
            unsafe { cu::cuDevicePrimaryCtxRelease_v2(self.device) };
        }
        self.make_live(ctx)
    }

    /// Make `ctx` current and create the stream and events in it.
    fn make_live(&mut self, ctx: cu::CUcontext) -> Result<Live, BackendError> {
        // SAFETY: ctx was just returned by the driver.
        ok(unsafe { cu::cuCtxSetCurrent(ctx) })
            .map_err(|r| to_error(r, Op::Other, "making the context current"))?;
        let mut stream = ptr::null_mut();
        // SAFETY: out-parameter, context current. A blocking stream (not
        // CU_STREAM_NON_BLOCKING) so the synchronous copies, which run on
        // the legacy default stream, are ordered with its kernels.
        ok(unsafe {
            cu::cuStreamCreate(&mut stream, cu::CUstream_flags::CU_STREAM_DEFAULT as u32)
        })
        .map_err(|r| to_error(r, Op::Other, "creating a stream"))?;
        let mut events = [ptr::null_mut(); 2];
        for e in &mut events {
            // SAFETY: out-parameter; default flags keep timing enabled.
            ok(unsafe { cu::cuEventCreate(e, cu::CUevent_flags::CU_EVENT_DEFAULT as u32) })
                .map_err(|r| to_error(r, Op::Other, "creating an event"))?;
        }
        let live = Live {
            ctx,
            stream,
            start: events[0],
            end: events[1],
        };
        self.live = Some(live);
        Ok(live)
    }

    /// Drop every handle without calling the driver: used when the context
    /// they lived in is gone.
    fn forget_handles(&mut self) {
        self.modules.clear();
        self.kernels.clear();
        self.buffers.clear();
        self.graphs.clear();
        self.flush = None;
        self.vendor.forget();
        self.live = None;
    }

    /// Whether another backend reset the shared primary context since this
    /// one last used it.
    pub(crate) fn stale(&self) -> bool {
        epoch_slot(self.ordinal).load(Ordering::SeqCst) != self.epoch
    }

    /// Make this backend's context current on the calling thread, first
    /// catching up with a reset done by another backend of the process.
    pub(crate) fn activate(&mut self) -> Result<Live, BackendError> {
        if let Some(reason) = lost_reason(self.ordinal) {
            self.forget_handles();
            return Err(unavailable(reason.clone()));
        }
        if self.stale() {
            self.forget_handles();
            self.epoch = epoch_slot(self.ordinal).load(Ordering::SeqCst);
        }
        let live = match self.live {
            Some(live) => live,
            None => self.acquire(!self.retained)?,
        };
        // SAFETY: the context is alive (not stale).
        ok(unsafe { cu::cuCtxSetCurrent(live.ctx) })
            .map_err(|r| to_error(r, Op::Other, "making the context current"))?;
        Ok(live)
    }

    /// After a sticky fault: reset the primary context while holding the
    /// reference (what `cudaDeviceReset` does), look it up again and check
    /// that it takes real work (a 256-byte allocation and a stream sync).
    fn reset_context(&mut self) -> Result<(), BackendError> {
        self.forget_handles();
        self.epoch = epoch_slot(self.ordinal).fetch_add(1, Ordering::SeqCst) + 1;
        // SAFETY: detaches the broken context from this thread, then resets
        // the device's primary context; plain calls on a valid device.
        unsafe {
            cu::cuCtxSetCurrent(ptr::null_mut());
            ok(cu::cuDevicePrimaryCtxReset_v2(self.device))
                .map_err(|r| to_error(r, Op::Other, "resetting the primary context"))?;
        }
        let held = self.retained;
        let live = self.acquire(!held)?;
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: fresh context, current; the allocation is freed at once.
        unsafe {
            ok(cu::cuMemAlloc_v2(&mut p, 256))
                .and_then(|()| ok(cu::cuMemFree_v2(p)))
                .and_then(|()| ok(cu::cuStreamSynchronize(live.stream)))
        }
        .map_err(|r| to_error(r, Op::Other, "checking the reset context"))?;
        self.resets += 1;
        Ok(())
    }

    /// The typed error for failed call `what`. A sticky fault also resets
    /// the context; when the driver refuses that, the device is marked lost
    /// for the rest of the process (see the type's documentation).
    pub(crate) fn fail(&mut self, r: CUresult, op: Op, what: &str) -> BackendError {
        let err = to_error(r, op, what);
        if !is_sticky(r) {
            return err;
        }
        match self.reset_context() {
            Ok(()) => with_note(
                err,
                "the CUDA context was reset: every module, kernel and buffer of this backend is gone",
            ),
            Err(e) => {
                self.forget_handles();
                let reason = format!(
                    "a kernel fault ({r:?}) left device {} unusable in this process: the driver \
                     refuses a new context ({e}); CUDA works again only in a new process, so \
                     evaluate candidates in a worker process that is restarted after a fault",
                    self.ordinal
                );
                let _ = lost_slot(self.ordinal).set(reason);
                with_note(err, "CUDA cannot be used again in this process: restart it")
            }
        }
    }

    /// Wait for `stream`; a fault of a kernel surfaces here.
    pub(crate) fn sync(&mut self, stream: cu::CUstream, what: &str) -> Result<(), BackendError> {
        // SAFETY: live stream.
        let r = unsafe { cu::cuStreamSynchronize(stream) };
        ok(r).map_err(|r| self.fail(r, Op::Other, what))
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if let (Some(live), false) = (self.live, self.stale()) {
            // SAFETY: every handle belongs to this context and is destroyed
            // once; errors are ignored, nothing can be done about them here.
            unsafe {
                if ok(cu::cuCtxSetCurrent(live.ctx)).is_ok() {
                    cu::cuStreamSynchronize(live.stream);
                    for (_, exec) in self.graphs.drain() {
                        cu::cuGraphExecDestroy(exec);
                    }
                    self.vendor.release();
                    for b in self.buffers.drain() {
                        if b.parent.is_none() {
                            cu::cuMemFree_v2(b.ptr);
                        }
                    }
                    if let Some(b) = self.flush.take() {
                        cu::cuMemFree_v2(b.ptr);
                    }
                    for m in self.modules.drain() {
                        cu::cuModuleUnload(m.module);
                    }
                    cu::cuEventDestroy_v2(live.start);
                    cu::cuEventDestroy_v2(live.end);
                    cu::cuStreamDestroy_v2(live.stream);
                }
            }
        }
        if self.retained {
            // SAFETY: releases the reference this backend took.
            unsafe { cu::cuDevicePrimaryCtxRelease_v2(self.device) };
        }
    }
}
