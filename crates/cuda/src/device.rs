//! The device: finding and opening it, its properties, and [`CudaBackend`],
//! the state every other module of the backend works on.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int};
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cudarc::driver::sys::{self as cu, CUdevice_attribute as DevAttr};
use kevo_backend::{BackendError, DeviceDetails, DeviceInfo, DeviceSelector, Dialect, HandleTable};

use crate::compile::{self, Target};
use crate::context::{LOST, Live, epoch_slot, lost_reason};
use crate::error::{Op, ok, to_error};
use crate::loader::{self, BACKEND, unavailable};
use crate::memory::BufferEntry;
use crate::module::{KernelEntry, ModuleEntry};
use crate::timing::CudaOptions;
use crate::vendor;

/// One device as `kevo devices` lists it.
#[derive(Debug, Clone)]
pub struct DeviceEntry {
    /// CUDA ordinal, as `CUDA_VISIBLE_DEVICES` renumbers them.
    pub device_index: usize,
    pub info: DeviceInfo,
}

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
    pub(crate) info: DeviceInfo,
    pub(crate) ordinal: c_int,
    pub(crate) device: cu::CUdevice,
    pub(crate) target: Target,
    pub(crate) include_dir: Option<String>,
    pub(crate) nvrtc_version: (i32, i32),
    pub(crate) l2_bytes: usize,
    pub(crate) shared_optin: u32,
    pub(crate) options: CudaOptions,
    pub(crate) live: Option<Live>,
    /// Whether this backend holds a reference on the primary context.
    pub(crate) retained: bool,
    pub(crate) epoch: u64,
    pub(crate) modules: HandleTable<ModuleEntry>,
    pub(crate) kernels: HandleTable<KernelEntry>,
    pub(crate) buffers: HandleTable<BufferEntry>,
    pub(crate) graphs: HashMap<Vec<u64>, cu::CUgraphExec>,
    pub(crate) flush: Option<BufferEntry>,
    pub(crate) flush_value: u8,
    pub(crate) last_log: String,
    pub(crate) last_compile_time: Duration,
    pub(crate) resets: u64,
    /// cuFFT plans and the cuBLAS handle, bound to the stream.
    pub(crate) vendor: vendor::VendorState,
}

// SAFETY: the raw handles are plain driver object references, valid from any
// thread once the context is current; every method makes the context current
// on the calling thread before using them, and `&mut self` keeps calls from
// overlapping.
unsafe impl Send for CudaBackend {}

/// One attribute of `dev`, as the driver reports it.
pub(crate) fn device_attr(dev: cu::CUdevice, attr: DevAttr) -> Result<i32, BackendError> {
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
        backend: BACKEND,
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
        details: gpu_details(dev),
    })
}

/// The warp and the register file of a multiprocessor: what occupancy and
/// a kernel's register budget are reasoned from. A failed query leaves
/// its fact out rather than failing the device.
fn gpu_details(dev: cu::CUdevice) -> DeviceDetails {
    let attr = |a| device_attr(dev, a).ok().and_then(|v| u32::try_from(v).ok());
    DeviceDetails {
        warp_size: attr(DevAttr::CU_DEVICE_ATTRIBUTE_WARP_SIZE),
        registers_per_sm: attr(DevAttr::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR),
        max_threads_per_sm: attr(DevAttr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
        ..DeviceDetails::default()
    }
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

    /// Find the device, check that NVRTC can compile for it and take its
    /// primary context.
    fn open_device(selector: &DeviceSelector, options: CudaOptions) -> Result<Self, BackendError> {
        loader::driver()?;
        let nvrtc = loader::nvrtc()?;
        let (ordinal, device) = pick_device(selector)?;
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

    /// L2 cache size in bytes, as the driver reports it.
    pub fn l2_bytes(&self) -> usize {
        self.l2_bytes
    }
}

/// The first device `selector` matches, as its ordinal and handle; when
/// none does, the error lists every device, so the selector is easy to fix.
fn pick_device(selector: &DeviceSelector) -> Result<(c_int, cu::CUdevice), BackendError> {
    let count = device_count()?;
    let mut names = Vec::new();
    let mut pick = None;
    for i in 0..count {
        let dev = device_get(i)?;
        let name = device_name(dev)?;
        if pick.is_none() && DeviceSelector::matches(selector.device.as_deref(), i as usize, &name)
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
    Ok((ordinal, device))
}

#[cfg(test)]
mod tests {
    use kevo_backend::Backend;

    use super::*;

    #[test]
    fn unavailable_cuda_is_reported_not_panicked() {
        // On a machine with CUDA this opens the device; without, it must be
        // an Unavailable error with a reason, never a panic.
        match CudaBackend::open(&DeviceSelector::default()) {
            Ok(b) => assert_eq!(b.info().backend, BACKEND),
            Err(BackendError::Unavailable { backend, reason }) => {
                assert_eq!(backend, BACKEND);
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
