//! CUDA backend: the driver API and NVRTC through cudarc, both loaded at run
//! time, so kevo builds and runs on machines without CUDA (the backend then
//! reports itself unavailable with the reason).
//!
//! Candidates are CUDA C++ with `extern "C" __global__` entry points, compiled
//! by NVRTC into a CUBIN for the device's own architecture (`sm_90a` on an
//! H100) and launched with `cuLaunchKernel` on a private stream, timed with a
//! pair of CUDA events around the launches. cuFFT and cuBLAS, also loaded at
//! run time, run the vendor baselines of fft3d and saxpy on the same stream,
//! timed by the same code (`vendor` module).

mod compile;
mod error;
mod loader;
mod vendor;

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cudarc::driver::sys::{
    self as cu, CUdevice_attribute as DevAttr, CUfunction_attribute as FuncAttr, CUresult,
};
use kevo_backend::{
    Backend, BackendError, BufferId, CompileDiagnostics, CompileOptions, DeviceInfo,
    DeviceSelector, DeviceTime, Dialect, HandleTable, KernelArg, KernelId, KernelInfo, Launch,
    ModuleId, ModuleInfo, Occupancy, VendorError, VendorKind, VendorLibrary, VendorOp,
};

use crate::compile::{Image, Target};
use crate::error::{Op, is_sticky, to_error};
use crate::loader::{BACKEND, unavailable};

/// One device as `kevo devices` lists it.
#[derive(Debug, Clone)]
pub struct DeviceEntry {
    /// CUDA ordinal, as `CUDA_VISIBLE_DEVICES` renumbers them.
    pub device_index: usize,
    pub info: DeviceInfo,
}

/// How [`CudaBackend::run_timed`] runs and times a launch sequence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CudaOptions {
    /// Capture each distinct launch sequence into a CUDA graph once and
    /// replay it. A sequence of many microsecond-scale launches is bounded by
    /// launch overhead: on an H100, 100 launches of a 64K-element increment
    /// took 408 us as stream launches and 119 us replayed as one graph. The
    /// capture, instantiation and upload happen outside the timed region.
    pub use_graph: bool,
    /// Before each timed sequence, overwrite a scratch buffer of twice the
    /// L2 size (2 x 50 MiB on an H100, ~40 us of memset at 3 TB/s) so the
    /// sequence starts with a cold L2: otherwise a kernel whose working set
    /// fits in L2 is timed on data the previous repetition left there. The
    /// flush is queued before the start event and is not timed.
    pub flush_l2: bool,
}

/// Per-device epoch of the primary context: bumped by every reset, so a
/// backend whose context was reset by another backend of the same process
/// (they share the device's primary context) notices that its handles are
/// gone instead of using them in the new context.
static EPOCHS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

fn epoch_slot(ordinal: c_int) -> &'static AtomicU64 {
    &EPOCHS[(ordinal.max(0) as usize).min(EPOCHS.len() - 1)]
}

/// Per-device reason why CUDA is lost for the rest of the process, set when
/// a sticky fault could not be recovered from (see [`CudaBackend`]).
static LOST: [OnceLock<String>; 64] = [const { OnceLock::new() }; 64];

fn lost_slot(ordinal: c_int) -> &'static OnceLock<String> {
    &LOST[(ordinal.max(0) as usize).min(LOST.len() - 1)]
}

fn lost_reason(ordinal: c_int) -> Option<&'static String> {
    lost_slot(ordinal).get()
}

/// Largest number of parameters probed with `cuFuncGetParamInfo`: CUDA
/// kernels take at most 32764 bytes of parameters, a real entry point far
/// fewer; a kernel beyond this is reported as having an unknown count.
const MAX_PARAMS: usize = 4096;

/// Graph executables kept per backend. Each holds its kernel nodes' argument
/// copies; an evaluator times one sequence many times then moves on, so a
/// small cache is enough and bounds device memory held by stale graphs.
const MAX_GRAPHS: usize = 32;

/// Default dynamic shared memory limit of a kernel: above it the kernel must
/// opt in with `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

/// Context-level objects; all die with the context.
#[derive(Debug, Clone, Copy)]
struct Live {
    ctx: cu::CUcontext,
    stream: cu::CUstream,
    start: cu::CUevent,
    end: cu::CUevent,
}

struct ModuleEntry {
    module: cu::CUmodule,
    log: String,
    /// See [`ModuleInfo::writable_global_bytes`].
    writable_global_bytes: Option<u64>,
    /// Writable module-scope variables: device address and initial bytes,
    /// written back before every run.
    globals: Vec<(cu::CUdeviceptr, Vec<u8>)>,
    /// Variables the driver would not give an address for.
    unresettable_names: Vec<String>,
}

#[derive(Debug, Clone)]
struct KernelEntry {
    module: u64,
    name: String,
    function: cu::CUfunction,
    /// Byte size of each parameter, when the driver reports them.
    params: Option<Vec<usize>>,
    max_threads: u32,
    static_shared: u32,
    /// Current `MAX_DYNAMIC_SHARED_SIZE_BYTES` of the function.
    dynamic_shared_limit: u32,
}

struct BufferEntry {
    ptr: cu::CUdeviceptr,
    bytes: usize,
    /// For a view, the buffer whose memory it addresses.
    parent: Option<u64>,
}

/// One launch checked and with its arguments packed for `cuLaunchKernel`.
struct Prepared {
    function: cu::CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    /// One 8-byte slot per parameter; a 4-byte parameter is read from the
    /// low (little-endian) half.
    params: Vec<u64>,
    name: String,
}

/// Why queueing the work of a timed region failed.
enum QueueError {
    /// `cuLaunchKernel` of the named kernel.
    Launch(CUresult, String),
    /// Another driver call, described in full.
    Driver(CUresult, String),
    /// A vendor library call.
    Library(VendorError),
}

/// What a timed region runs, queued on the given stream: a launch sequence
/// or a vendor library's op. Queued directly, or once into a graph.
type Work<'a> = &'a dyn Fn(cu::CUstream) -> Result<(), QueueError>;

/// A CUDA device: its primary context, one stream and a pair of timing events.
///
/// # Faults
///
/// A kernel that faults (illegal or misaligned address, illegal instruction,
/// trap, hardware stack error, timeout) leaves its CUDA context permanently
/// broken: every later call in it returns the same error. The fault is
/// returned as `BackendError::Fault` with the CUDA error name in its message
/// (`CUDA_ERROR_ILLEGAL_ADDRESS`), and the backend then tries to recover by
/// resetting the device's primary context (`cuDevicePrimaryCtxReset`, what
/// `cudaDeviceReset` does). A successful reset destroys every module, kernel
/// and buffer of the context: their handles then give
/// `BackendError::InvalidHandle`, and the caller re-uploads its inputs.
///
/// NVIDIA documents these errors as needing a new process, and that is what
/// the driver enforces in practice: on an H100 with the CUDA 13.0 driver,
/// after an illegal or misaligned address both `cuDevicePrimaryCtxRetain`
/// after a reset (with or without releasing the reference first) and a brand
/// new `cuCtxCreate` fail with the same error. When the reset fails the
/// device is marked lost for the process: every later call of every backend
/// on it, and `open`, return `BackendError::Unavailable` saying to restart
/// ([`is_lost`](Self::is_lost) tells without a call). Candidates that may
/// fault are therefore evaluated in a worker process that is restarted after
/// a fault; the GPU itself is unaffected and other processes keep working.
///
/// The primary context is shared by every backend on the same device in the
/// process; after one of them resets it the others notice on their next call
/// and lose their handles the same way. A reset while another thread is
/// using the device fails that thread's work, so evaluate candidates on one
/// device from one thread.
pub struct CudaBackend {
    info: DeviceInfo,
    ordinal: c_int,
    device: cu::CUdevice,
    target: Target,
    include_dir: Option<String>,
    nvrtc_version: (i32, i32),
    l2_bytes: usize,
    shared_optin: u32,
    options: CudaOptions,
    live: Option<Live>,
    /// Whether this backend holds a reference on the primary context.
    retained: bool,
    epoch: u64,
    modules: HandleTable<ModuleEntry>,
    kernels: HandleTable<KernelEntry>,
    buffers: HandleTable<BufferEntry>,
    graphs: HashMap<Vec<u64>, cu::CUgraphExec>,
    flush: Option<BufferEntry>,
    flush_value: u8,
    last_log: String,
    last_compile_time: Duration,
    resets: u64,
    /// cuFFT plans and the cuBLAS handle, bound to the stream.
    vendor: vendor::VendorState,
}

// SAFETY: the raw handles are plain driver object references, valid from any
// thread once the context is current; every method makes the context current
// on the calling thread before using them, and `&mut self` keeps calls from
// overlapping.
unsafe impl Send for CudaBackend {}

fn ok(r: CUresult) -> Result<(), CUresult> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(r)
    }
}

fn device_attr(dev: cu::CUdevice, attr: DevAttr) -> Result<i32, BackendError> {
    let mut v: c_int = 0;
    // SAFETY: valid device from cuDeviceGet, out-parameter.
    ok(unsafe { cu::cuDeviceGetAttribute(&mut v, attr, dev) })
        .map_err(|r| to_error(r, Op::Other, &format!("querying {attr:?}")))?;
    Ok(v)
}

fn device_count() -> Result<c_int, BackendError> {
    let mut n: c_int = 0;
    // SAFETY: out-parameter; cuInit ran in loader::driver.
    ok(unsafe { cu::cuDeviceGetCount(&mut n) })
        .map_err(|r| to_error(r, Op::Other, "counting CUDA devices"))?;
    Ok(n)
}

fn device_get(ordinal: c_int) -> Result<cu::CUdevice, BackendError> {
    let mut dev: cu::CUdevice = 0;
    // SAFETY: out-parameter; the ordinal is below cuDeviceGetCount.
    ok(unsafe { cu::cuDeviceGet(&mut dev, ordinal) })
        .map_err(|r| to_error(r, Op::Other, &format!("opening CUDA device {ordinal}")))?;
    Ok(dev)
}

fn device_name(dev: cu::CUdevice) -> Result<String, BackendError> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL included.
    ok(unsafe { cu::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as c_int, dev) })
        .map_err(|r| to_error(r, Op::Other, "querying the device name"))?;
    // SAFETY: NUL-terminated by the driver within the buffer.
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .trim()
        .to_string())
}

fn device_info(dev: cu::CUdevice) -> Result<DeviceInfo, BackendError> {
    let mut total = 0usize;
    // SAFETY: out-parameter.
    ok(unsafe { cu::cuDeviceTotalMem_v2(&mut total, dev) })
        .map_err(|r| to_error(r, Op::Other, "querying device memory"))?;
    let major = device_attr(dev, DevAttr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = device_attr(dev, DevAttr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let driver = loader::driver_version()
        .map(loader::format_cuda_version)
        .unwrap_or_default();
    Ok(DeviceInfo {
        backend: BACKEND.into(),
        dialect: Dialect::Cuda,
        platform: "NVIDIA CUDA".into(),
        name: device_name(dev)?,
        vendor: "NVIDIA".into(),
        compute_units: device_attr(dev, DevAttr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
        global_mem_bytes: total as u64,
        max_work_group_size: device_attr(dev, DevAttr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?
            as u64,
        local_mem_bytes: device_attr(
            dev,
            DevAttr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )? as u64,
        // kHz; the peak (boost) clock.
        clock_mhz: (device_attr(dev, DevAttr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? / 1000) as u32,
        arch: format!("sm_{major}{minor}"),
        driver_version: driver,
        is_cpu: false,
        cache_bytes: device_attr(dev, DevAttr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
        integrated: device_attr(dev, DevAttr::CU_DEVICE_ATTRIBUTE_INTEGRATED)? != 0,
    })
}

/// Every CUDA device visible to this process.
pub fn list_devices() -> Result<Vec<DeviceEntry>, BackendError> {
    loader::driver()?;
    (0..device_count()?)
        .map(|i| {
            Ok(DeviceEntry {
                device_index: i as usize,
                info: device_info(device_get(i)?)?,
            })
        })
        .collect()
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

/// Key of a launch sequence in the graph cache: everything a captured graph
/// bakes in (functions, geometry, argument values).
fn sequence_key(launches: &[Launch]) -> Vec<u64> {
    let mut key = Vec::with_capacity(launches.len() * 16);
    for l in launches {
        key.push(l.kernel.0);
        key.extend(l.global);
        key.extend(l.local.map(u64::from));
        key.push(u64::from(l.dynamic_shared_bytes));
        key.push(l.args.len() as u64);
        for a in &l.args {
            key.push(match *a {
                KernelArg::Buffer(b) => b.0,
                KernelArg::U32(v) => (1 << 32) | u64::from(v),
                KernelArg::I32(v) => (2 << 32) | u64::from(v as u32),
                KernelArg::F32(v) => (3 << 32) | u64::from(v.to_bits()),
            });
            if let KernelArg::Buffer(_) = a {
                // Tag after the id so a buffer id cannot equal a tagged scalar.
                key.push(u64::MAX);
            }
        }
    }
    key
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

fn func_attr(f: cu::CUfunction, attr: FuncAttr) -> Result<i32, CUresult> {
    let mut v: c_int = 0;
    // SAFETY: valid function handle, out-parameter.
    ok(unsafe { cu::cuFuncGetAttribute(&mut v, attr, f) })?;
    Ok(v)
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
    /// Open the device chosen by `selector.device` (an index or a
    /// case-insensitive name substring; the first device without one). CUDA
    /// has no platforms: `selector.platform` is ignored.
    pub fn open(selector: &DeviceSelector) -> Result<Self, BackendError> {
        Self::open_with_options(selector, CudaOptions::default())
    }

    /// [`open`](Self::open) with run options.
    pub fn open_with_options(
        selector: &DeviceSelector,
        options: CudaOptions,
    ) -> Result<Self, BackendError> {
        match Self::open_device(selector, options) {
            // After an unrecoverable fault even device queries may fail with
            // the fault's error; say why instead.
            Err(BackendError::Fault { .. } | BackendError::Runtime(_))
                if let Some(reason) = LOST.iter().find_map(OnceLock::get) =>
            {
                Err(unavailable(reason.clone()))
            }
            other => other,
        }
    }

    fn open_device(selector: &DeviceSelector, options: CudaOptions) -> Result<Self, BackendError> {
        loader::driver()?;
        let nvrtc = loader::nvrtc()?;
        let count = device_count()?;
        let mut names = Vec::new();
        let mut pick = None;
        for i in 0..count {
            let dev = device_get(i)?;
            let name = device_name(dev)?;
            if pick.is_none()
                && DeviceSelector::matches(selector.device.as_deref(), i as usize, &name)
            {
                pick = Some((i, dev));
            }
            names.push(format!("[{i}] {name}"));
        }
        let Some((ordinal, device)) = pick else {
            return Err(BackendError::DeviceNotFound(format!(
                "no CUDA device matches {:?}; available: {}",
                selector.device.as_deref().unwrap_or("*"),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        };
        if let Some(reason) = lost_reason(ordinal) {
            return Err(unavailable(reason.clone()));
        }
        let info = device_info(device)?;
        let major = device_attr(
            device,
            DevAttr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        )?;
        let minor = device_attr(
            device,
            DevAttr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        )?;
        let target = compile::target_for(major, minor, &nvrtc.supported_archs).map_err(|e| {
            unavailable(format!(
                "{e}; install an NVRTC at least as new as the device ({})",
                info.name
            ))
        })?;
        let l2_bytes =
            device_attr(device, DevAttr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?.max(0) as usize;
        let shared_optin = info.local_mem_bytes as u32;
        let mut backend = CudaBackend {
            info,
            ordinal,
            device,
            target,
            include_dir: loader::toolkit_include_dir().map(|p| p.display().to_string()),
            nvrtc_version: nvrtc.version,
            l2_bytes,
            shared_optin,
            options,
            live: None,
            retained: false,
            epoch: epoch_slot(ordinal).load(Ordering::SeqCst),
            modules: HandleTable::new("module"),
            kernels: HandleTable::new("kernel"),
            buffers: HandleTable::new("buffer"),
            graphs: HashMap::new(),
            flush: None,
            flush_value: 0,
            last_log: String::new(),
            last_compile_time: Duration::ZERO,
            resets: 0,
            vendor: vendor::VendorState::default(),
        };
        backend.activate()?;
        Ok(backend)
    }

    /// The run options in force.
    pub fn options(&self) -> CudaOptions {
        self.options
    }

    /// Replace the run options; applies from the next `run_timed`.
    pub fn set_options(&mut self, options: CudaOptions) {
        self.options = options;
    }

    /// See [`CudaOptions::use_graph`].
    pub fn set_use_graph(&mut self, on: bool) {
        self.options.use_graph = on;
    }

    /// See [`CudaOptions::flush_l2`].
    pub fn set_flush_l2(&mut self, on: bool) {
        self.options.flush_l2 = on;
    }

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

    /// L2 cache size in bytes, as the driver reports it.
    pub fn l2_bytes(&self) -> usize {
        self.l2_bytes
    }

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
    fn stale(&self) -> bool {
        epoch_slot(self.ordinal).load(Ordering::SeqCst) != self.epoch
    }

    /// Make this backend's context current on the calling thread, first
    /// catching up with a reset done by another backend of the process.
    fn activate(&mut self) -> Result<Live, BackendError> {
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
    fn fail(&mut self, r: CUresult, op: Op, what: &str) -> BackendError {
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
            use CUresult::*;
            return Err(match r {
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
            });
        }
        let (globals, writable_global_bytes, unresettable_names) = match image.module_state() {
            Some(state) => {
                let mut globals = Vec::new();
                let mut unresettable = state.unresettable;
                let mut names = Vec::new();
                for g in state.resettable {
                    let (mut ptr, mut bytes) = (0, 0usize);
                    let name = CString::new(g.name.clone()).ok();
                    // SAFETY: out-parameters; the module was loaded above.
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
        };
        let id = self.modules.insert(ModuleEntry {
            module,
            log,
            writable_global_bytes,
            globals,
            unresettable_names,
        });
        Ok(ModuleId(id))
    }

    fn buffer(&self, id: BufferId) -> Result<&BufferEntry, BackendError> {
        self.buffers.get(id.0)
    }

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
            if let Ok(k) = self.kernels.get_mut(l.kernel.0) {
                k.dynamic_shared_limit = shared;
            }
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

    fn destroy_graphs(&mut self) {
        for (_, exec) in self.graphs.drain() {
            // SAFETY: created by cuGraphInstantiate in this context.
            unsafe { cu::cuGraphExecDestroy(exec) };
        }
    }

    /// The graph executable of some work (a launch sequence, a vendor
    /// op), captured on first use under `key`.
    fn graph_for(
        &mut self,
        key: Vec<u64>,
        stream: cu::CUstream,
        work: Work<'_>,
    ) -> Result<cu::CUgraphExec, VendorError> {
        if let Some(&exec) = self.graphs.get(&key) {
            return Ok(exec);
        }
        if self.graphs.len() >= MAX_GRAPHS {
            self.destroy_graphs();
        }
        // Thread-local capture: other threads may allocate meanwhile.
        // SAFETY: live stream of the current context.
        let r = unsafe {
            cu::cuStreamBeginCapture_v2(
                stream,
                cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        };
        if let Err(r) = ok(r) {
            return Err(self.fail(r, Op::Other, "starting a graph capture").into());
        }
        let failed = work(stream).err();
        let mut graph = ptr::null_mut();
        // SAFETY: ends the capture begun above, on every path.
        let ended = ok(unsafe { cu::cuStreamEndCapture(stream, &mut graph) });
        if let Some(e) = failed {
            if !graph.is_null() {
                // SAFETY: the graph the capture returned.
                unsafe { cu::cuGraphDestroy(graph) };
            }
            return Err(self.queue_failure(e, true));
        }
        if let Err(r) = ended {
            return Err(self
                .fail(r, Op::Launch, "capturing the launch sequence")
                .into());
        }
        let mut exec = ptr::null_mut();
        // SAFETY: graph from the capture; destroyed once instantiated.
        let r = unsafe {
            let r = cu::cuGraphInstantiateWithFlags(&mut exec, graph, 0);
            cu::cuGraphDestroy(graph);
            r
        };
        if let Err(r) = ok(r) {
            return Err(self.fail(r, Op::Launch, "instantiating the graph").into());
        }
        // Upload now so the first timed replay does not pay for it.
        // SAFETY: fresh executable, live stream.
        if let Err(r) = ok(unsafe { cu::cuGraphUpload(exec, stream) }) {
            // SAFETY: the executable created above.
            unsafe { cu::cuGraphExecDestroy(exec) };
            return Err(self.fail(r, Op::Launch, "uploading the graph").into());
        }
        self.graphs.insert(key, exec);
        Ok(exec)
    }

    /// The typed error for a failure to queue work, `capturing` it into a
    /// graph or running it.
    fn queue_failure(&mut self, e: QueueError, capturing: bool) -> VendorError {
        let (r, what) = match e {
            QueueError::Library(e) => return e,
            QueueError::Launch(r, name) if capturing => {
                (r, format!("capturing `{name}` into a graph"))
            }
            QueueError::Launch(r, name) => (r, format!("launching `{name}`")),
            QueueError::Driver(r, what) => (r, what),
        };
        self.fail(r, Op::Launch, &what).into()
    }

    /// Run `work` between the start and end events on the stream (replayed
    /// as a graph captured under `key` when graphs are on, after the L2
    /// flush when that is on) and return the device time between them:
    /// kernels and vendor libraries are timed by this one code.
    fn timed(
        &mut self,
        live: Live,
        key: Vec<u64>,
        names: &str,
        work: Work<'_>,
    ) -> Result<DeviceTime, VendorError> {
        // Capture before queueing the flush: a capture starts on an idle stream.
        let graph = if self.options.use_graph {
            Some(self.graph_for(key, live.stream, work)?)
        } else {
            None
        };
        if self.options.flush_l2 {
            self.flush_l2(live.stream)?;
        }
        // SAFETY: events, stream and graph belong to the current context;
        // `work` queues on that stream only.
        let queued = unsafe {
            (|| -> Result<(), QueueError> {
                ok(cu::cuEventRecord(live.start, live.stream))
                    .map_err(|r| QueueError::Driver(r, "recording the start event".to_string()))?;
                match graph {
                    Some(exec) => ok(cu::cuGraphLaunch(exec, live.stream)).map_err(|r| {
                        QueueError::Driver(r, format!("launching the graph of {names}"))
                    })?,
                    None => work(live.stream)?,
                }
                ok(cu::cuEventRecord(live.end, live.stream))
                    .map_err(|r| QueueError::Driver(r, "recording the end event".to_string()))
            })()
        };
        // A fault of an earlier launch takes precedence over a later
        // launch's rejection: it is what broke the sequence.
        self.sync(live.stream, &format!("running {names}"))?;
        if let Err(e) = queued {
            return Err(self.queue_failure(e, false));
        }
        let mut ms = 0f32;
        // SAFETY: both events were recorded on the stream just synchronised.
        let r = unsafe { cu::cuEventElapsedTime_v2(&mut ms, live.start, live.end) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "reading the event timer"))?;
        Ok(DeviceTime(f64::from(ms) * 1e-3))
    }

    /// Queue the L2 flush on `stream` (see [`CudaOptions::flush_l2`]).
    fn flush_l2(&mut self, stream: cu::CUstream) -> Result<(), BackendError> {
        if self.l2_bytes == 0 {
            return Ok(());
        }
        if self.flush.is_none() {
            let bytes = 2 * self.l2_bytes;
            let mut ptr: cu::CUdeviceptr = 0;
            // SAFETY: out-parameter, context current.
            if let Err(r) = ok(unsafe { cu::cuMemAlloc_v2(&mut ptr, bytes) }) {
                return Err(self.fail(r, Op::Alloc(bytes), "allocating the L2 flush buffer"));
            }
            self.flush = Some(BufferEntry {
                ptr,
                bytes,
                parent: None,
            });
        }
        let Some(BufferEntry { ptr, bytes, .. }) = self.flush else {
            return Ok(());
        };
        // A new value each time, so no run finds the lines already holding it.
        self.flush_value = self.flush_value.wrapping_add(1);
        // SAFETY: the scratch buffer is `bytes` long and lives in this context.
        let r = unsafe { cu::cuMemsetD8Async(ptr, self.flush_value, bytes, stream) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "flushing the L2 cache"))
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

    /// Wait for `stream`; a fault of a kernel surfaces here.
    fn sync(&mut self, stream: cu::CUstream, what: &str) -> Result<(), BackendError> {
        // SAFETY: live stream.
        let r = unsafe { cu::cuStreamSynchronize(stream) };
        ok(r).map_err(|r| self.fail(r, Op::Other, what))
    }
}

impl Backend for CudaBackend {
    fn is_poisoned(&self) -> bool {
        self.is_lost()
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn compile(
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

    fn load_binary(&mut self, image: &[u8]) -> Result<ModuleId, BackendError> {
        self.activate()?;
        self.last_log.clear();
        self.load_image(Image::Cubin(image.to_vec()), String::new())
    }

    fn kernel(&mut self, module: ModuleId, name: &str) -> Result<KernelId, BackendError> {
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

    fn kernel_info(&self, kernel: KernelId) -> Result<KernelInfo, BackendError> {
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
    fn occupancy(
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

    fn module_info(&self, module: ModuleId) -> Result<ModuleInfo, BackendError> {
        let entry = self.modules.get(module.0)?;
        Ok(ModuleInfo {
            writable_global_bytes: entry.writable_global_bytes,
            reset_global_bytes: entry.globals.iter().map(|g| g.1.len() as u64).sum(),
            unresettable_names: entry.unresettable_names.clone(),
        })
    }

    fn reset_module_state(&mut self, module: ModuleId) -> Result<(), BackendError> {
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

    fn release_module(&mut self, module: ModuleId) {
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

    fn alloc(&mut self, bytes: usize) -> Result<BufferId, BackendError> {
        if bytes == 0 {
            return Err(BackendError::Runtime(
                "cannot allocate a zero-byte buffer".into(),
            ));
        }
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

    fn view(
        &mut self,
        parent: BufferId,
        offset: usize,
        bytes: usize,
    ) -> Result<BufferId, BackendError> {
        self.activate()?;
        let p = self.buffer(parent)?;
        if bytes == 0
            || offset.checked_add(bytes).is_none_or(|end| end > p.bytes)
            || !offset.is_multiple_of(kevo_backend::VIEW_ALIGN)
        {
            return Err(BackendError::Runtime(format!(
                "view of {bytes} bytes at {offset} in a {}-byte buffer (offsets must be \
                 multiples of {})",
                p.bytes,
                kevo_backend::VIEW_ALIGN
            )));
        }
        // A view of a view addresses the same allocation.
        let entry = BufferEntry {
            ptr: p.ptr + offset as u64,
            bytes,
            parent: Some(p.parent.unwrap_or(parent.0)),
        };
        let id = self.buffers.insert(entry);
        Ok(BufferId(id))
    }

    fn free(&mut self, buffer: BufferId) {
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

    fn upload(&mut self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError> {
        self.activate()?;
        let entry = self.buffer(buffer)?;
        if data.len() > entry.bytes {
            return Err(BackendError::Runtime(format!(
                "upload of {} bytes into a {}-byte buffer",
                data.len(),
                entry.bytes
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        let dst = entry.ptr;
        // SAFETY: the destination holds at least data.len() bytes; the
        // source is a live slice.
        let r = unsafe { cu::cuMemcpyHtoD_v2(dst, data.as_ptr().cast::<c_void>(), data.len()) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "copying to the device"))
    }

    fn download(&mut self, buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError> {
        self.activate()?;
        let entry = self.buffer(buffer)?;
        if out.len() > entry.bytes {
            return Err(BackendError::Runtime(format!(
                "download of {} bytes from a {}-byte buffer",
                out.len(),
                entry.bytes
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        let src = entry.ptr;
        // SAFETY: the source holds at least out.len() bytes; the destination
        // is a live mutable slice.
        let r = unsafe { cu::cuMemcpyDtoH_v2(out.as_mut_ptr().cast::<c_void>(), src, out.len()) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "copying from the device"))
    }

    fn views_alias(&self) -> bool {
        true
    }

    fn download_range(
        &mut self,
        buffer: BufferId,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        self.activate()?;
        let entry = self.buffer(buffer)?;
        if offset
            .checked_add(out.len())
            .is_none_or(|end| end > entry.bytes)
        {
            return Err(BackendError::Runtime(format!(
                "download of {} bytes at {offset} from a {}-byte buffer",
                out.len(),
                entry.bytes
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        let src = entry.ptr + offset as u64;
        // SAFETY: the range lies inside the allocation; the destination is a
        // live mutable slice.
        let r = unsafe { cu::cuMemcpyDtoH_v2(out.as_mut_ptr().cast::<c_void>(), src, out.len()) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "copying from the device"))
    }

    fn copy_buffer(
        &mut self,
        src: BufferId,
        dst: BufferId,
        bytes: usize,
    ) -> Result<(), BackendError> {
        let live = self.activate()?;
        if src == dst {
            return Err(BackendError::Runtime("copy of a buffer onto itself".into()));
        }
        let (s, d) = (self.buffer(src)?, self.buffer(dst)?);
        if bytes > s.bytes.min(d.bytes) {
            return Err(BackendError::Runtime(format!(
                "copy of {bytes} bytes between buffers of {} and {} bytes",
                s.bytes, d.bytes
            )));
        }
        if bytes == 0 {
            return Ok(());
        }
        let (sp, dp) = (s.ptr, d.ptr);
        // SAFETY: distinct allocations of at least `bytes` bytes.
        let r = unsafe { cu::cuMemcpyDtoDAsync_v2(dp, sp, bytes, live.stream) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "copying between buffers"))?;
        self.sync(live.stream, "copying between buffers")
    }

    fn fill_buffer(
        &mut self,
        buffer: BufferId,
        value: u8,
        bytes: usize,
    ) -> Result<(), BackendError> {
        let live = self.activate()?;
        let entry = self.buffer(buffer)?;
        if bytes > entry.bytes {
            return Err(BackendError::Runtime(format!(
                "fill of {bytes} bytes of a {}-byte buffer",
                entry.bytes
            )));
        }
        if bytes == 0 {
            return Ok(());
        }
        let ptr = entry.ptr;
        // SAFETY: the allocation holds at least `bytes` bytes.
        let r = unsafe { cu::cuMemsetD8Async(ptr, value, bytes, live.stream) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "filling a buffer"))?;
        self.sync(live.stream, "filling a buffer")
    }

    fn run_timed(&mut self, launches: &[Launch]) -> Result<DeviceTime, BackendError> {
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

    fn vendor_library(&mut self, kind: VendorKind) -> Result<VendorLibrary, VendorError> {
        vendor::load(vendor::library_for(kind)).cloned()
    }

    fn run_vendor(&mut self, op: &VendorOp) -> Result<DeviceTime, VendorError> {
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

    fn release_vendor(&mut self) {
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

    #[test]
    fn sequence_keys_distinguish_arguments() {
        let l = |args| Launch {
            kernel: KernelId(1),
            global: [256, 1, 1],
            local: [64, 1, 1],
            dynamic_shared_bytes: 0,
            args,
        };
        let a = sequence_key(&[l(vec![KernelArg::U32(5)])]);
        let b = sequence_key(&[l(vec![KernelArg::I32(5)])]);
        let c = sequence_key(&[l(vec![KernelArg::Buffer(BufferId(5))])]);
        let d = sequence_key(&[l(vec![KernelArg::U32(5)])]);
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, d);
        assert_ne!(a, sequence_key(&[l(vec![KernelArg::U32(5)]), l(vec![])]));
    }

    #[test]
    fn unavailable_cuda_is_reported_not_panicked() {
        // On a machine with CUDA this opens the device; without, it must be
        // an Unavailable error with a reason, never a panic.
        match CudaBackend::open(&DeviceSelector::default()) {
            Ok(b) => assert_eq!(b.info().backend, "cuda"),
            Err(BackendError::Unavailable { backend, reason }) => {
                assert_eq!(backend, "cuda");
                assert!(!reason.is_empty());
                eprintln!("CUDA unavailable here: {reason}");
            }
            Err(e) => eprintln!("CUDA device not usable: {e}"),
        }
        match list_devices() {
            Ok(d) => eprintln!("{} CUDA device(s)", d.len()),
            Err(e) => assert!(matches!(e, BackendError::Unavailable { .. }), "{e:?}"),
        }
    }
}
