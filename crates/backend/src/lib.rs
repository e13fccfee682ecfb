//! The backend trait that every GPU runtime implements (OpenCL, CUDA, later Metal).
//!
//! The trait speaks in handles (`ModuleId`, `KernelId`, `BufferId`) rather than
//! borrowed objects: the evaluator holds one backend for a whole session, a
//! backend may have to rebuild its context after a sticky device fault, and
//! handles keep the trait object-safe so the CLI can pick a backend at run time.

mod details;
mod forward;
mod handles;
pub mod ranges;
mod types;
mod vendor;

pub mod conformance;

pub use details::{DeviceDetails, Simd, mhz_from_cpuinfo, simd_from_cpuinfo};
pub use handles::HandleTable;
pub use types::*;
pub use vendor::{VendorError, VendorKind, VendorLibrary, VendorOp};

/// Alignment of view offsets: 4 KiB satisfies OpenCL's sub-buffer base
/// alignment on every device seen (128 B to 4 KiB) and CUDA's 256 B.
pub const VIEW_ALIGN: usize = 4096;

/// A GPU runtime that can compile kernel source, move data and time launches.
///
/// A method added here also goes into [`forward_backend!`]'s table, or
/// every wrapper silently answers it with the default.
pub trait Backend {
    /// Which source language this backend compiles.
    fn dialect(&self) -> Dialect {
        self.info().dialect
    }

    /// Name, vendor, compute units and memory of the device in use.
    fn info(&self) -> &DeviceInfo;

    /// Compile `source` into a module. A compiler rejection is
    /// `BackendError::Compile` with the log and the parsed diagnostics.
    fn compile(&mut self, source: &str, options: &CompileOptions)
    -> Result<ModuleId, BackendError>;

    /// Compile `source` for a task whose entry points are `entry_points`.
    /// A compiler that specializes each function for its typed signature
    /// (Triton) needs them; the others compile the source as it is.
    fn compile_entry_points(
        &mut self,
        source: &str,
        options: &CompileOptions,
        entry_points: &[EntryPoint],
    ) -> Result<ModuleId, BackendError> {
        let _ = entry_points;
        self.compile(source, options)
    }

    /// Load a binary for this device that another compiler produced
    /// (Triton's cubin). Its module-scope state is inspected as a compiled
    /// module's is. The default cannot.
    fn load_binary(&mut self, image: &[u8]) -> Result<ModuleId, BackendError> {
        let _ = image;
        Err(BackendError::Runtime(format!(
            "the {} backend cannot load binaries",
            self.info().backend
        )))
    }

    /// Look up an entry point of a compiled module.
    fn kernel(&mut self, module: ModuleId, name: &str) -> Result<KernelId, BackendError>;

    /// Resource usage and launch limits of a kernel, as the runtime reports them.
    fn kernel_info(&self, kernel: KernelId) -> Result<KernelInfo, BackendError>;

    /// The achievable occupancy of `kernel` in blocks of `block_threads`
    /// with `dynamic_shared_bytes` of dynamic shared memory; `None` where
    /// the runtime has no occupancy calculator (OpenCL).
    fn occupancy(
        &self,
        _kernel: KernelId,
        _block_threads: u32,
        _dynamic_shared_bytes: u64,
    ) -> Result<Option<Occupancy>, BackendError> {
        Ok(None)
    }

    /// Drop a module and every kernel taken from it.
    fn release_module(&mut self, module: ModuleId);

    /// What the compiled module holds besides code: writable module-scope
    /// state survives from one launch to the next, so the evaluator refuses
    /// it. The default knows nothing (`None` fields).
    fn module_info(&self, module: ModuleId) -> Result<ModuleInfo, BackendError> {
        let _ = module;
        Ok(ModuleInfo::default())
    }

    /// Put every writable module-scope variable of `module` back to the
    /// value it was loaded with, so no state survives from one run to the
    /// next. The evaluator calls it before every run.
    fn reset_module_state(&mut self, module: ModuleId) -> Result<(), BackendError> {
        let _ = module;
        Ok(())
    }

    /// Allocate `bytes` of device memory (contents unspecified).
    fn alloc(&mut self, bytes: usize) -> Result<BufferId, BackendError>;

    /// Free a buffer. Freeing an unknown handle is a no-op.
    fn free(&mut self, buffer: BufferId);

    /// Copy `data` to the start of `buffer` (blocking).
    fn upload(&mut self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError>;

    /// Copy the first `out.len()` bytes of `buffer` into `out` (blocking).
    fn download(&mut self, buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError>;

    /// A handle to `bytes` bytes of `parent` starting at `offset`, usable
    /// wherever a buffer is. The evaluator puts guard regions around every
    /// buffer this way and hands the kernel only the middle. `offset` must be
    /// a multiple of [`VIEW_ALIGN`]. Freeing a view leaves its parent alone.
    fn view(
        &mut self,
        parent: BufferId,
        offset: usize,
        bytes: usize,
    ) -> Result<BufferId, BackendError> {
        let _ = (parent, offset, bytes);
        Err(BackendError::Runtime(
            "this backend has no buffer views".into(),
        ))
    }

    /// Whether a kernel given a view addresses its parent's memory directly,
    /// so writes past the view's end land in the parent. True for CUDA
    /// (a view is a pointer into the allocation); PoCL backs OpenCL
    /// sub-buffers with memory of their own, so OpenCL says false.
    fn views_alias(&self) -> bool {
        false
    }

    /// Copy `out.len()` bytes starting at `offset` of `buffer` into `out`.
    fn download_range(
        &mut self,
        buffer: BufferId,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        let mut all = vec![0u8; offset + out.len()];
        self.download(buffer, &mut all)?;
        out.copy_from_slice(&all[offset..]);
        Ok(())
    }

    /// Copy `bytes` bytes from the start of `src` to the start of `dst` on the
    /// device. The evaluator restores every buffer from a pristine device copy
    /// before each run: a host upload of saxpy's 512 MiB at 64M would cost
    /// ~50 ms per run over PCIe, a device copy well under 1 ms.
    fn copy_buffer(
        &mut self,
        src: BufferId,
        dst: BufferId,
        bytes: usize,
    ) -> Result<(), BackendError> {
        let mut tmp = vec![0u8; bytes];
        self.download(src, &mut tmp)?;
        self.upload(dst, &tmp)
    }

    /// Set the first `bytes` bytes of `buffer` to `value` on the device.
    fn fill_buffer(
        &mut self,
        buffer: BufferId,
        value: u8,
        bytes: usize,
    ) -> Result<(), BackendError> {
        self.upload(buffer, &vec![value; bytes])
    }

    /// True once a device fault has left this backend unusable for the rest
    /// of the process (CUDA after an illegal address: the driver refuses
    /// every later call until the process exits). Whoever owns the process
    /// must then replace it.
    fn is_poisoned(&self) -> bool {
        false
    }

    /// Stop any helper process the backend started while it opened (the
    /// Triton compiler), so the next one starts under the confinement the
    /// worker put in force since: a process started earlier keeps none of
    /// a seccomp filter installed after it.
    fn restart_helpers(&mut self) {}

    /// Run a sequence of launches in order, each seeing the previous one's
    /// writes, wait for completion and return the device-clock time from the
    /// start of the first launch to the end of the last one.
    fn run_timed(&mut self, launches: &[Launch]) -> Result<DeviceTime, BackendError>;

    /// The vendor library that does `kind` of job on this device
    /// ("cuFFT"), loading it if need be: `VendorError::Missing` when it is
    /// not installed, `Unsupported` when this backend has none (the
    /// default).
    fn vendor_library(&mut self, kind: VendorKind) -> Result<VendorLibrary, VendorError> {
        Err(VendorError::Unsupported {
            backend: self.info().backend,
            kind,
        })
    }

    /// Run `op` once through its vendor library, waiting for it, and return
    /// its device-clock time measured as [`Backend::run_timed`] measures a
    /// launch sequence (same stream, same L2 flush and graph replay), so
    /// the two times compare. Plans and handles are made on first use and
    /// kept until [`Backend::release_vendor`].
    fn run_vendor(&mut self, op: &VendorOp) -> Result<DeviceTime, VendorError> {
        Err(VendorError::Unsupported {
            backend: self.info().backend,
            kind: op.kind(),
        })
    }

    /// Free what the vendor libraries hold (cuFFT plans own a workspace as
    /// large as the cube), so candidates evaluated next get the memory.
    fn release_vendor(&mut self) {}
}

impl<B: Backend + ?Sized> Backend for Box<B> {
    crate::forward_backend!(**self);
}

/// A device with every field empty or minimal, on `backend`: for test
/// backends that need a `DeviceInfo` to return.
#[cfg(test)]
pub(crate) fn test_device_info(backend: BackendName) -> DeviceInfo {
    DeviceInfo {
        backend,
        dialect: Dialect::Cuda,
        platform: String::new(),
        name: String::new(),
        vendor: String::new(),
        compute_units: 1,
        global_mem_bytes: 0,
        max_work_group_size: 1,
        local_mem_bytes: 0,
        clock_mhz: 0,
        arch: String::new(),
        driver_version: String::new(),
        is_cpu: false,
        cache_bytes: 0,
        integrated: false,
        details: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend whose every overridable method answers differently from
    /// the trait's default, to catch a method the `Box` impl does not
    /// forward (it would fall back to the default silently).
    struct Answers(DeviceInfo);

    fn info() -> DeviceInfo {
        test_device_info(BackendName::Cuda)
    }

    impl Backend for Answers {
        fn info(&self) -> &DeviceInfo {
            &self.0
        }
        fn compile(&mut self, _: &str, _: &CompileOptions) -> Result<ModuleId, BackendError> {
            Ok(ModuleId(1))
        }
        fn compile_entry_points(
            &mut self,
            _: &str,
            _: &CompileOptions,
            _: &[EntryPoint],
        ) -> Result<ModuleId, BackendError> {
            Ok(ModuleId(5))
        }
        fn load_binary(&mut self, _: &[u8]) -> Result<ModuleId, BackendError> {
            Ok(ModuleId(6))
        }
        fn kernel(&mut self, _: ModuleId, _: &str) -> Result<KernelId, BackendError> {
            Ok(KernelId(2))
        }
        fn kernel_info(&self, _: KernelId) -> Result<KernelInfo, BackendError> {
            Ok(KernelInfo::default())
        }
        fn release_module(&mut self, _: ModuleId) {}
        fn module_info(&self, _: ModuleId) -> Result<ModuleInfo, BackendError> {
            Ok(ModuleInfo {
                reset_global_bytes: 3,
                ..ModuleInfo::default()
            })
        }
        fn reset_module_state(&mut self, _: ModuleId) -> Result<(), BackendError> {
            Err(BackendError::Runtime("reset".into()))
        }
        fn alloc(&mut self, _: usize) -> Result<BufferId, BackendError> {
            Ok(BufferId(3))
        }
        fn free(&mut self, _: BufferId) {}
        fn upload(&mut self, _: BufferId, _: &[u8]) -> Result<(), BackendError> {
            Ok(())
        }
        fn download(&mut self, _: BufferId, out: &mut [u8]) -> Result<(), BackendError> {
            out.fill(1);
            Ok(())
        }
        fn view(&mut self, _: BufferId, _: usize, _: usize) -> Result<BufferId, BackendError> {
            Ok(BufferId(4))
        }
        fn views_alias(&self) -> bool {
            true
        }
        fn download_range(
            &mut self,
            _: BufferId,
            _: usize,
            out: &mut [u8],
        ) -> Result<(), BackendError> {
            out.fill(2);
            Ok(())
        }
        fn copy_buffer(&mut self, _: BufferId, _: BufferId, _: usize) -> Result<(), BackendError> {
            Err(BackendError::Runtime("copy".into()))
        }
        fn fill_buffer(&mut self, _: BufferId, _: u8, _: usize) -> Result<(), BackendError> {
            Err(BackendError::Runtime("fill".into()))
        }
        fn is_poisoned(&self) -> bool {
            true
        }
        fn run_timed(&mut self, _: &[Launch]) -> Result<DeviceTime, BackendError> {
            Ok(DeviceTime(1.0))
        }
        fn vendor_library(&mut self, _: VendorKind) -> Result<VendorLibrary, VendorError> {
            Ok(VendorLibrary {
                name: "answers-lib".into(),
                version: "1.0".into(),
            })
        }
        fn run_vendor(&mut self, _: &VendorOp) -> Result<DeviceTime, VendorError> {
            Ok(DeviceTime(2.0))
        }
    }

    #[test]
    fn a_boxed_backend_forwards_every_method() {
        let mut b: Box<dyn Backend> = Box::new(Answers(info()));
        assert_eq!(b.dialect(), Dialect::Cuda);
        let options = CompileOptions::default();
        assert_eq!(
            b.compile_entry_points("", &options, &[]).unwrap(),
            ModuleId(5)
        );
        assert_eq!(b.load_binary(&[]).unwrap(), ModuleId(6));
        assert_eq!(b.module_info(ModuleId(1)).unwrap().reset_global_bytes, 3);
        assert!(b.reset_module_state(ModuleId(1)).is_err());
        // Views are how the evaluator guards both ends of a buffer on CUDA.
        assert_eq!(b.view(BufferId(3), 0, 4).unwrap(), BufferId(4));
        assert!(b.views_alias());
        let mut out = [0u8; 2];
        b.download_range(BufferId(3), 1, &mut out).unwrap();
        assert_eq!(out, [2, 2]);
        assert!(b.copy_buffer(BufferId(3), BufferId(4), 1).is_err());
        assert!(b.fill_buffer(BufferId(3), 0, 1).is_err());
        assert!(b.is_poisoned());
        assert_eq!(
            b.vendor_library(VendorKind::Saxpy).unwrap().name,
            "answers-lib"
        );
        let op = VendorOp::Saxpy {
            n: 1,
            alpha: 1.0,
            x: BufferId(1),
            y: BufferId(2),
        };
        assert_eq!(b.run_vendor(&op).unwrap(), DeviceTime(2.0));
    }

    /// A backend that overrides nothing vendor-related.
    struct Plain(DeviceInfo);

    impl Backend for Plain {
        fn info(&self) -> &DeviceInfo {
            &self.0
        }
        fn compile(&mut self, _: &str, _: &CompileOptions) -> Result<ModuleId, BackendError> {
            unimplemented!()
        }
        fn kernel(&mut self, _: ModuleId, _: &str) -> Result<KernelId, BackendError> {
            unimplemented!()
        }
        fn kernel_info(&self, _: KernelId) -> Result<KernelInfo, BackendError> {
            unimplemented!()
        }
        fn release_module(&mut self, _: ModuleId) {}
        fn alloc(&mut self, _: usize) -> Result<BufferId, BackendError> {
            unimplemented!()
        }
        fn free(&mut self, _: BufferId) {}
        fn upload(&mut self, _: BufferId, _: &[u8]) -> Result<(), BackendError> {
            unimplemented!()
        }
        fn download(&mut self, _: BufferId, _: &mut [u8]) -> Result<(), BackendError> {
            unimplemented!()
        }
        fn run_timed(&mut self, _: &[Launch]) -> Result<DeviceTime, BackendError> {
            unimplemented!()
        }
    }

    #[test]
    fn a_backend_without_libraries_says_so_by_default() {
        let mut b = Plain(DeviceInfo {
            // Not `info()`'s backend: the error names this device's own.
            backend: BackendName::Opencl,
            ..info()
        });
        let e = b.vendor_library(VendorKind::Fft3dC2c).unwrap_err();
        assert!(
            matches!(&e, VendorError::Unsupported { backend, kind: VendorKind::Fft3dC2c } if *backend == BackendName::Opencl),
            "{e:?}"
        );
        let op = VendorOp::Fft3dC2c {
            n: 8,
            repeats: 1,
            buffers: [BufferId(1), BufferId(2)],
        };
        assert!(matches!(
            b.run_vendor(&op),
            Err(VendorError::Unsupported { .. })
        ));
    }
}
