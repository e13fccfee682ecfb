//! Compiled modules and their kernels: NVRTC compiles a candidate, the
//! driver loads the image, and each module's writable state and each
//! kernel's limits are recorded, so that state can be restored between
//! runs and launches checked before any is queued.

use std::ffi::{CString, c_int, c_void};
use std::ptr;
use std::time::{Duration, Instant};

use cudarc::driver::sys::{
    self as cu, CUdevice_attribute as DevAttr, CUfunction_attribute as FuncAttr, CUresult,
};
use kevo_backend::{
    BackendError, CompileDiagnostics, CompileOptions, KernelId, KernelInfo, ModuleId, ModuleInfo,
    Occupancy,
};

use crate::compile::{self, Image, ModuleState};
use crate::device::{CudaBackend, device_attr};
use crate::error::{self, Op, ok, to_error};

/// Largest number of parameters probed with `cuFuncGetParamInfo`: CUDA
/// kernels take at most 32764 bytes of parameters, a real entry point far
/// fewer; a kernel beyond this is reported as having an unknown count.
const MAX_PARAMS: usize = 4096;

/// Default dynamic shared memory limit of a kernel: above it the kernel must
/// opt in with `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

/// Writable module-scope variables of a module: device address and
/// initial bytes of each.
type Globals = Vec<(cu::CUdeviceptr, Vec<u8>)>;

/// A loaded module: the driver's handle, its compile log and the
/// module-scope state restored before every run.
pub(crate) struct ModuleEntry {
    pub(crate) module: cu::CUmodule,
    pub(crate) log: String,
    /// See [`ModuleInfo::writable_global_bytes`].
    pub(crate) writable_global_bytes: Option<u64>,
    /// Writable module-scope variables: device address and initial bytes,
    /// written back before every run.
    pub(crate) globals: Globals,
    /// Variables the driver would not give an address for.
    pub(crate) unresettable_names: Vec<String>,
}

/// A kernel of a loaded module, with the limits a launch is checked against.
#[derive(Debug, Clone)]
pub(crate) struct KernelEntry {
    pub(crate) module: u64,
    pub(crate) name: String,
    pub(crate) function: cu::CUfunction,
    /// Byte size of each parameter, when the driver reports them.
    pub(crate) params: Option<Vec<usize>>,
    pub(crate) max_threads: u32,
    pub(crate) static_shared: u32,
    /// Current `MAX_DYNAMIC_SHARED_SIZE_BYTES` of the function.
    pub(crate) dynamic_shared_limit: u32,
}

/// Byte sizes of `f`'s parameters, from `cuFuncGetParamInfo` (CUDA 12.4+),
/// which answers `CUDA_ERROR_INVALID_VALUE` for the first index past the end.
fn param_sizes(f: cu::CUfunction) -> Option<Vec<usize>> {
    let mut sizes = Vec::new();
    for i in 0..MAX_PARAMS {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: valid function handle, out-parameters.
        match unsafe { cu::cuFuncGetParamInfo(f, i, &mut offset, &mut size) } {
            CUresult::CUDA_SUCCESS => sizes.push(size),
            CUresult::CUDA_ERROR_INVALID_VALUE => return Some(sizes),
            _ => return None,
        }
    }
    None
}

/// One attribute of function `f`, as the driver reports it.
fn func_attr(f: cu::CUfunction, attr: FuncAttr) -> Result<i32, CUresult> {
    let mut v: c_int = 0;
    // SAFETY: valid function handle, out-parameter.
    ok(unsafe { cu::cuFuncGetAttribute(&mut v, attr, f) })?;
    Ok(v)
}

impl CudaBackend {
    /// NVRTC's log of the most recent `compile`, successful or not: warnings
    /// of a candidate that compiled are feedback too. Often empty.
    pub fn last_compile_log(&self) -> &str {
        &self.last_log
    }

    /// NVRTC's log of the compilation that produced `module`.
    pub fn compile_log(&self, module: ModuleId) -> Option<&str> {
        self.modules.get(module.0).ok().map(|m| m.log.as_str())
    }

    /// Wall time NVRTC spent in the most recent `compile`.
    pub fn last_compile_time(&self) -> Duration {
        self.last_compile_time
    }

    /// The architecture NVRTC compiles for (`--gpu-architecture`), e.g. "sm_90a".
    pub fn gpu_arch(&self) -> &str {
        self.target.arch()
    }

    /// NVRTC (major, minor) version.
    pub fn nvrtc_version(&self) -> (i32, i32) {
        self.nvrtc_version
    }

    /// `Backend::compile`: NVRTC compiles `source` for the device and the
    /// image is loaded; the log is kept either way, as feedback.
    pub(crate) fn compile_source(
        &mut self,
        source: &str,
        options: &CompileOptions,
    ) -> Result<ModuleId, BackendError> {
        self.activate()?;
        let flags = compile::flags(&self.target, options, self.include_dir.as_deref());
        let started = Instant::now();
        let compiled = compile::compile(source, &flags, &self.target);
        self.last_compile_time = started.elapsed();
        let (image, log) = match compiled {
            Ok(c) => c,
            Err(e) => {
                self.last_log = match &e {
                    BackendError::Compile(d) => d.log.clone(),
                    other => other.to_string(),
                };
                return Err(e);
            }
        };
        self.last_log = log.clone();
        self.load_image(image, log)
    }

    /// `Backend::load_binary`: a CUBIN some other compiler made, loaded as is.
    pub(crate) fn load_cubin(&mut self, image: &[u8]) -> Result<ModuleId, BackendError> {
        self.activate()?;
        self.last_log.clear();
        self.load_image(Image::Cubin(image.to_vec()), String::new())
    }

    /// `Backend::kernel`: look the entry point up and record its limits
    /// (threads per block, shared memory, parameter sizes).
    pub(crate) fn lookup_kernel(
        &mut self,
        module: ModuleId,
        name: &str,
    ) -> Result<KernelId, BackendError> {
        self.activate()?;
        let m = self.modules.get(module.0)?.module;
        let missing = || BackendError::MissingKernel { name: name.into() };
        let cname = CString::new(name).map_err(|_| missing())?;
        let mut function = ptr::null_mut();
        // SAFETY: live module, NUL-terminated name, out-parameter.
        match unsafe { cu::cuModuleGetFunction(&mut function, m, cname.as_ptr()) } {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_NOT_FOUND => return Err(missing()),
            r => return Err(self.fail(r, Op::Other, &format!("looking up kernel `{name}`"))),
        }
        let attrs = (|| {
            Ok::<_, CUresult>((
                func_attr(function, FuncAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
                func_attr(function, FuncAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
                func_attr(
                    function,
                    FuncAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                )?,
            ))
        })();
        let (max_threads, static_shared, dynamic_limit) = match attrs {
            Ok(a) => a,
            Err(r) => {
                return Err(self.fail(r, Op::Other, &format!("querying kernel `{name}`")));
            }
        };
        let entry = KernelEntry {
            module: module.0,
            name: name.into(),
            function,
            params: param_sizes(function),
            max_threads: max_threads.max(0) as u32,
            static_shared: static_shared.max(0) as u32,
            dynamic_shared_limit: if dynamic_limit > 0 {
                dynamic_limit as u32
            } else {
                DEFAULT_DYNAMIC_SHARED.saturating_sub(static_shared.max(0) as u32)
            },
        };
        let id = self.kernels.insert(entry);
        Ok(KernelId(id))
    }

    /// `Backend::kernel_info`: the kernel's resources as the driver reports
    /// them (registers, shared and local memory, PTX and SASS versions).
    pub(crate) fn query_kernel_info(&self, kernel: KernelId) -> Result<KernelInfo, BackendError> {
        let entry = self.kernels.get(kernel.0)?;
        // A reset by another backend freed the function.
        let (Some(live), false) = (self.live, self.stale()) else {
            return Err(BackendError::InvalidHandle {
                what: "kernel",
                id: kernel.0,
            });
        };
        // SAFETY: live context (same epoch).
        ok(unsafe { cu::cuCtxSetCurrent(live.ctx) })
            .map_err(|r| to_error(r, Op::Other, "making the context current"))?;
        let get = |attr| {
            func_attr(entry.function, attr)
                .map_err(|r| to_error(r, Op::Other, &format!("querying kernel `{}`", entry.name)))
        };
        Ok(KernelInfo {
            max_threads_per_block: get(FuncAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?.max(0)
                as u64,
            preferred_multiple: Some(32),
            registers_per_thread: Some(get(FuncAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?.max(0) as u32),
            static_shared_bytes: Some(
                get(FuncAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?.max(0) as u64
            ),
            local_bytes_per_thread: Some(
                get(FuncAttr::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?.max(0) as u64
            ),
            num_args: entry.params.as_ref().map(|p| p.len() as u32),
            ptx_arch: get(FuncAttr::CU_FUNC_ATTRIBUTE_PTX_VERSION)
                .ok()
                .and_then(|v| u32::try_from(v).ok()),
            sass_arch: get(FuncAttr::CU_FUNC_ATTRIBUTE_BINARY_VERSION)
                .ok()
                .and_then(|v| u32::try_from(v).ok()),
        })
    }

    /// The driver's occupancy calculator for this block size.
    pub(crate) fn driver_occupancy(
        &self,
        kernel: KernelId,
        block_threads: u32,
        dynamic_shared_bytes: u64,
    ) -> Result<Option<Occupancy>, BackendError> {
        let entry = self.kernels.get(kernel.0)?;
        let (Some(live), false) = (self.live, self.stale()) else {
            return Err(BackendError::InvalidHandle {
                what: "kernel",
                id: kernel.0,
            });
        };
        // SAFETY: live context (same epoch).
        ok(unsafe { cu::cuCtxSetCurrent(live.ctx) })
            .map_err(|r| to_error(r, Op::Other, "making the context current"))?;
        let mut blocks: c_int = 0;
        // SAFETY: a function of the live context, an out-parameter.
        ok(unsafe {
            cu::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks,
                entry.function,
                block_threads as c_int,
                dynamic_shared_bytes as usize,
            )
        })
        .map_err(|r| to_error(r, Op::Other, &format!("occupancy of `{}`", entry.name)))?;
        let max_threads = device_attr(
            self.device,
            DevAttr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
        )?;
        Ok(Some(Occupancy {
            block_threads,
            active_blocks_per_sm: blocks.max(0) as u32,
            max_threads_per_sm: max_threads.max(0) as u32,
        }))
    }

    /// `Backend::module_info`: how much writable module-scope state the
    /// module has and how much of it is restored between runs.
    pub(crate) fn describe_module(&self, module: ModuleId) -> Result<ModuleInfo, BackendError> {
        let entry = self.modules.get(module.0)?;
        Ok(ModuleInfo {
            writable_global_bytes: entry.writable_global_bytes,
            reset_global_bytes: entry.globals.iter().map(|g| g.1.len() as u64).sum(),
            unresettable_names: entry.unresettable_names.clone(),
        })
    }

    /// `Backend::reset_module_state`: write every writable module-scope
    /// variable's initial bytes back, so no run sees what the last one left.
    pub(crate) fn restore_module_globals(&mut self, module: ModuleId) -> Result<(), BackendError> {
        let live = self.activate()?;
        let entry = self.modules.get(module.0)?;
        if entry.globals.is_empty() {
            return Ok(());
        }
        let mut failed = None;
        for (ptr, initial) in &entry.globals {
            // SAFETY: the variable's address and size come from the driver;
            // `initial` has exactly that size.
            let r = unsafe {
                cu::cuMemcpyHtoDAsync_v2(
                    *ptr,
                    initial.as_ptr().cast::<c_void>(),
                    initial.len(),
                    live.stream,
                )
            };
            if let Err(r) = ok(r) {
                failed = Some(r);
                break;
            }
        }
        if let Some(r) = failed {
            return Err(self.fail(r, Op::Other, "restoring module variables"));
        }
        self.sync(live.stream, "restoring module variables")
    }

    /// `Backend::release_module`: forget the module and its kernels, and
    /// unload it (after the graphs that hold its functions) while the
    /// context is usable.
    pub(crate) fn unload_module(&mut self, module: ModuleId) {
        let usable = self.activate().is_ok();
        let Some(entry) = self.modules.remove(module.0) else {
            return;
        };
        self.kernels.retain(|k| k.module != module.0);
        if usable {
            // Graphs hold the module's functions.
            self.destroy_graphs();
            // SAFETY: live module of the current context, unloaded once.
            unsafe { cu::cuModuleUnload(entry.module) };
        }
    }

    /// Load a compiled image (NVRTC's or another compiler's) into the
    /// context and record its writable module-scope state.
    fn load_image(&mut self, image: Image, log: String) -> Result<ModuleId, BackendError> {
        let (bytes, kind) = match &image {
            Image::Cubin(b) => (b.as_slice(), "CUBIN"),
            Image::Ptx(b) => (b.as_slice(), "PTX"),
        };
        // The JIT error log says what is wrong with a PTX image (register or
        // shared memory over the limit after the driver's own compile).
        let mut jit_log = vec![0u8; 16 * 1024];
        let mut opts = [
            cu::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            cu::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values = [
            jit_log.as_mut_ptr().cast::<c_void>(),
            jit_log.len() as *mut c_void,
        ];
        let mut module = ptr::null_mut();
        // SAFETY: the image and the log buffer outlive the call; the option
        // values follow the driver's convention of integers cast to pointers.
        let r = unsafe {
            cu::cuModuleLoadDataEx(
                &mut module,
                bytes.as_ptr().cast::<c_void>(),
                opts.len() as u32,
                opts.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if let Err(r) = ok(r) {
            return Err(self.load_failure(r, kind, &jit_log));
        }
        let (globals, writable_global_bytes, unresettable_names) =
            module_globals(module, image.module_state());
        let id = self.modules.insert(ModuleEntry {
            module,
            log,
            writable_global_bytes,
            globals,
            unresettable_names,
        });
        Ok(ModuleId(id))
    }

    /// The typed error for an image the driver would not load: a bad image
    /// is the candidate's compile error, with the JIT log saying why; any
    /// other failure is the driver's.
    fn load_failure(&mut self, r: CUresult, kind: &str, jit_log: &[u8]) -> BackendError {
        use CUresult::*;
        match r {
            CUDA_ERROR_INVALID_PTX
            | CUDA_ERROR_UNSUPPORTED_PTX_VERSION
            | CUDA_ERROR_NO_BINARY_FOR_GPU
            | CUDA_ERROR_INVALID_IMAGE
            | CUDA_ERROR_INVALID_SOURCE
            | CUDA_ERROR_JIT_COMPILER_NOT_FOUND
            | CUDA_ERROR_SHARED_OBJECT_INIT_FAILED => {
                let end = jit_log
                    .iter()
                    .position(|&b| b == 0)
                    .unwrap_or(jit_log.len());
                let text = String::from_utf8_lossy(&jit_log[..end]);
                let log = format!(
                    "{text}\nloading the {kind} for {} failed: {}",
                    self.target.arch(),
                    error::describe(r)
                );
                self.last_log = log.clone();
                BackendError::Compile(CompileDiagnostics::from_log(log))
            }
            _ => self.fail(r, Op::Other, &format!("loading the {kind}")),
        }
    }
}

/// The writable module-scope variables of a loaded `module`, located by
/// name: those the driver gives an address of the right size for (address
/// and initial bytes, restored before every run), the bytes of writable
/// state in all when `state` is known, and the names of the rest.
fn module_globals(
    module: cu::CUmodule,
    state: Option<ModuleState>,
) -> (Globals, Option<u64>, Vec<String>) {
    match state {
        Some(state) => {
            let mut globals = Vec::new();
            let mut unresettable = state.unresettable;
            let mut names = Vec::new();
            for g in state.resettable {
                let (mut ptr, mut bytes) = (0, 0usize);
                let name = CString::new(g.name.clone()).ok();
                // SAFETY: out-parameters; `module` was just loaded by the caller.
                let found = name.is_some_and(|n| {
                    ok(unsafe {
                        cu::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, module, n.as_ptr())
                    })
                    .is_ok()
                });
                if found && bytes == g.initial.len() {
                    globals.push((ptr, g.initial));
                } else {
                    unresettable += g.initial.len().max(1) as u64;
                    names.push(g.name);
                }
            }
            (globals, Some(unresettable), names)
        }
        None => (Vec::new(), None, Vec::new()),
    }
}
