//! Launches: every launch of a sequence checked against its kernel's
//! limits, with its arguments packed for `cuLaunchKernel`, before any is
//! queued; the sequence then runs in a timed region (`timing`), as do
//! vendor library ops.

use std::ffi::{c_int, c_void};
use std::ptr;

use cudarc::driver::sys::{self as cu, CUfunction_attribute as FuncAttr, CUresult};
use kevo_backend::{
    BackendError, BufferId, DeviceTime, KernelArg, KernelId, Launch, VendorError, VendorOp,
};

use crate::device::CudaBackend;
use crate::error::{Op, ok};
use crate::module::KernelEntry;
use crate::timing::{QueueError, sequence_key};
use crate::vendor;

/// One launch checked and with its arguments packed for `cuLaunchKernel`.
pub(crate) struct Prepared {
    pub(crate) function: cu::CUfunction,
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) shared: u32,
    /// One 8-byte slot per parameter; a 4-byte parameter is read from the
    /// low (little-endian) half.
    pub(crate) params: Vec<u64>,
    pub(crate) name: String,
}

/// Pack `args` for a kernel whose parameters have the byte sizes `params`
/// (when known). Buffers need an 8-byte pointer parameter, floats a 4-byte
/// one; integers fill 4-byte parameters or are zero/sign-extended into
/// 8-byte ones (`size_t n`), so a `u32` never leaves half a parameter
/// uninitialised.
fn pack_args(
    kernel: &str,
    params: Option<&[usize]>,
    args: &[KernelArg],
    buffer_ptr: impl Fn(BufferId) -> Result<u64, BackendError>,
) -> Result<Vec<u64>, BackendError> {
    if let Some(p) = params
        && p.len() != args.len()
    {
        return Err(BackendError::InvalidLaunch(format!(
            "kernel `{kernel}` takes {} arguments, the launch passes {}",
            p.len(),
            args.len()
        )));
    }
    args.iter()
        .enumerate()
        .map(|(i, arg)| {
            let size = params.map(|p| p[i]);
            let (value, fits) = match *arg {
                KernelArg::Buffer(b) => (buffer_ptr(b)?, size.is_none_or(|s| s == 8)),
                KernelArg::U32(v) => (u64::from(v), size.is_none_or(|s| s == 4 || s == 8)),
                KernelArg::I32(v) => (i64::from(v) as u64, size.is_none_or(|s| s == 4 || s == 8)),
                KernelArg::F32(v) => (u64::from(v.to_bits()), size.is_none_or(|s| s == 4)),
            };
            if !fits {
                return Err(BackendError::InvalidLaunch(format!(
                    "kernel `{kernel}` argument {i} is {arg:?}, but that parameter is {} bytes",
                    size.unwrap_or(0)
                )));
            }
            Ok(value)
        })
        .collect()
}

/// # Safety
/// `p.function` must be a live function of the current context and `stream`
/// a live stream of it.
unsafe fn launch(p: &Prepared, stream: cu::CUstream) -> Result<(), CUresult> {
    let mut ptrs: Vec<*mut c_void> = p
        .params
        .iter()
        .map(|v| ptr::from_ref(v).cast_mut().cast::<c_void>())
        .collect();
    let params = if ptrs.is_empty() {
        ptr::null_mut()
    } else {
        ptrs.as_mut_ptr()
    };
    // SAFETY: per the caller; the parameter slots outlive the call, and the
    // driver copies them before returning.
    ok(unsafe {
        cu::cuLaunchKernel(
            p.function,
            p.grid[0],
            p.grid[1],
            p.grid[2],
            p.block[0],
            p.block[1],
            p.block[2],
            p.shared,
            stream,
            params,
            ptr::null_mut(),
        )
    })
}

impl CudaBackend {
    /// Check launch `l` against its kernel's limits and pack its arguments,
    /// opting the function into more dynamic shared memory where it asks.
    fn prepare(&mut self, l: &Launch) -> Result<Prepared, BackendError> {
        let entry = self.kernels.get(l.kernel.0)?.clone();
        l.validate()?;
        let grid = l.grid();
        let limits = [i32::MAX as u64, 65535, 65535];
        if (0..3).any(|d| grid[d] > limits[d]) {
            return Err(BackendError::InvalidLaunch(format!(
                "grid {grid:?} of kernel `{}` exceeds the CUDA limits {limits:?}",
                entry.name
            )));
        }
        let threads: u64 = l.local.iter().map(|&x| u64::from(x)).product();
        if threads > u64::from(entry.max_threads) {
            return Err(BackendError::InvalidLaunch(format!(
                "block {:?} has {threads} threads; kernel `{}` can run at most {} per block",
                l.local, entry.name, entry.max_threads
            )));
        }
        let shared = l.dynamic_shared_bytes;
        if u64::from(entry.static_shared) + u64::from(shared) > u64::from(self.shared_optin) {
            return Err(BackendError::InvalidLaunch(format!(
                "kernel `{}` asks for {} bytes of static and {shared} bytes of dynamic shared \
                 memory; a block can have at most {}",
                entry.name, entry.static_shared, self.shared_optin
            )));
        }
        let params = pack_args(&entry.name, entry.params.as_deref(), &l.args, |b| {
            self.buffer(b).map(|e| e.ptr)
        })?;
        if shared > entry.dynamic_shared_limit {
            self.allow_dynamic_shared(l.kernel, &entry, shared)?;
        }
        Ok(Prepared {
            function: entry.function,
            grid: grid.map(|g| g as u32),
            block: l.local,
            shared,
            params,
            name: entry.name,
        })
    }

    /// Raise `kernel`'s dynamic shared memory limit to `shared` bytes (the
    /// opt-in a launch above the default needs) and remember the new limit.
    fn allow_dynamic_shared(
        &mut self,
        kernel: KernelId,
        entry: &KernelEntry,
        shared: u32,
    ) -> Result<(), BackendError> {
        // SAFETY: live function of the current context.
        let r = unsafe {
            cu::cuFuncSetAttribute(
                entry.function,
                FuncAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared as c_int,
            )
        };
        if let Err(r) = ok(r) {
            return Err(self.fail(
                r,
                Op::Launch,
                &format!(
                    "allowing {shared} bytes of dynamic shared memory for `{}`",
                    entry.name
                ),
            ));
        }
        if let Ok(k) = self.kernels.get_mut(kernel.0) {
            k.dynamic_shared_limit = shared;
        }
        Ok(())
    }

    /// Names of the kernels of a sequence, for messages.
    fn sequence_names(prepared: &[Prepared]) -> String {
        let mut names: Vec<&str> = Vec::new();
        for p in prepared {
            if !names.contains(&p.name.as_str()) {
                names.push(&p.name);
            }
        }
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `Backend::run_timed`: check every launch, then run the sequence in
    /// one timed region.
    pub(crate) fn run_sequence(&mut self, launches: &[Launch]) -> Result<DeviceTime, BackendError> {
        if launches.is_empty() {
            return Ok(DeviceTime(0.0));
        }
        let live = self.activate()?;
        // Check every launch before queueing any, so a malformed one leaves
        // nothing half-run on the stream.
        let prepared = launches
            .iter()
            .map(|l| self.prepare(l))
            .collect::<Result<Vec<_>, _>>()?;
        let names = Self::sequence_names(&prepared);
        let work = |stream| {
            for p in &prepared {
                // SAFETY: live functions of the current context (validated
                // by prepare); `timed` passes a live stream of it.
                unsafe { launch(p, stream) }.map_err(|r| QueueError::Launch(r, p.name.clone()))?;
            }
            Ok(())
        };
        self.timed(live, sequence_key(launches), &names, &work)
            .map_err(|e| match e {
                VendorError::Backend(e) => e,
                other => BackendError::Runtime(other.to_string()),
            })
    }

    /// `Backend::run_vendor`: resolve the op's buffers, make the library's
    /// plan, then run the op in a timed region like a launch sequence.
    pub(crate) fn run_vendor_op(&mut self, op: &VendorOp) -> Result<DeviceTime, VendorError> {
        let library = vendor::library_for(op.kind());
        vendor::load(library)?;
        let live = self.activate()?;
        let mut missing = None;
        let resolved = op.map(|b| match self.buffer(b) {
            Ok(e) => (e.ptr, e.bytes),
            Err(e) => {
                missing.get_or_insert(e);
                (0, 0)
            }
        });
        if let Some(e) = missing {
            return Err(e.into());
        }
        vendor::check_extent(&resolved)?;
        // SAFETY: the context is current and the stream is its own.
        unsafe { self.vendor.prepare(&resolved, live.stream) }?;
        // Out of `self` while `timed` borrows it; back unless a reset
        // after a fault made its plans worthless.
        let state = std::mem::take(&mut self.vendor);
        let work = |_stream| {
            // SAFETY: prepared above for this op; extents checked; the
            // plans are bound to the stream `timed` queues on.
            unsafe { state.enqueue(&resolved) }.map_err(QueueError::Library)
        };
        let epoch = self.epoch;
        let timed = self.timed(live, vendor::graph_key(&resolved), library, &work);
        if self.epoch == epoch && self.live.is_some() {
            self.vendor = state;
        } else {
            let mut state = state;
            state.forget();
        }
        timed
    }

    /// `Backend::release_vendor`: destroy the plans and handles (and the
    /// graphs that use their workspaces) while the context is usable.
    pub(crate) fn release_vendor_state(&mut self) {
        if self.vendor.is_empty() {
            return;
        }
        if self.activate().is_ok() {
            // Captured graphs use the plans' workspaces.
            self.destroy_graphs();
            // SAFETY: the plans were made in this context, which is current.
            unsafe { self.vendor.release() };
        } else {
            self.vendor.forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_buffers(b: BufferId) -> Result<u64, BackendError> {
        Ok(0x7f00_0000_0000 + b.0)
    }

    #[test]
    fn arguments_are_packed_to_the_parameter_sizes() {
        let args = [
            KernelArg::Buffer(BufferId(3)),
            KernelArg::U32(0xDEAD_BEEF),
            KernelArg::I32(-2),
            KernelArg::I32(-2),
            KernelArg::F32(1.5),
        ];
        let packed = pack_args("k", Some(&[8, 4, 4, 8, 4]), &args, no_buffers).unwrap();
        assert_eq!(packed[0], 0x7f00_0000_0003);
        assert_eq!(packed[1], 0xDEAD_BEEF);
        // The low 4 bytes are the i32; an 8-byte parameter gets it sign-extended.
        assert_eq!(packed[2] as u32, (-2i32) as u32);
        assert_eq!(packed[3] as i64, -2);
        assert_eq!(packed[4] as u32, 1.5f32.to_bits());
    }

    #[test]
    fn argument_count_and_size_mismatches_are_invalid_launches() {
        let two = [KernelArg::Buffer(BufferId(1)), KernelArg::U32(4)];
        assert!(matches!(
            pack_args("increment", Some(&[8, 4]), &two[..1], no_buffers),
            Err(BackendError::InvalidLaunch(m)) if m.contains("takes 2 arguments")
        ));
        assert!(matches!(
            pack_args(
                "k",
                Some(&[2, 4]),
                &[KernelArg::U32(1), KernelArg::U32(2)],
                no_buffers
            ),
            Err(BackendError::InvalidLaunch(_))
        ));
        assert!(matches!(
            pack_args("k", Some(&[8]), &[KernelArg::F32(1.0)], no_buffers),
            Err(BackendError::InvalidLaunch(_))
        ));
        // Unknown parameter sizes: anything goes.
        assert_eq!(pack_args("k", None, &two, no_buffers).unwrap().len(), 2);
    }

    #[test]
    fn freed_buffers_in_arguments_are_reported() {
        let gone = |b: BufferId| -> Result<u64, BackendError> {
            Err(BackendError::InvalidHandle {
                what: "buffer",
                id: b.0,
            })
        };
        assert!(matches!(
            pack_args("k", Some(&[8]), &[KernelArg::Buffer(BufferId(9))], gone),
            Err(BackendError::InvalidHandle { id: 9, .. })
        ));
    }
}
