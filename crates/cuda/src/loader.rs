//! Finding and initialising the CUDA driver and NVRTC at run time.
//!
//! cudarc loads `libcuda` and `libnvrtc` lazily and panics when a library or
//! a symbol is missing. Everything here runs before the first real cudarc
//! call: it checks that both libraries can be opened, that every entry point
//! this backend uses exists (an old driver lacks e.g. `cuEventElapsedTime_v2`,
//! new in CUDA 12.8), and runs `cuInit`, all inside `catch_unwind`, so a
//! machine without CUDA gets `BackendError::Unavailable` with a reason
//! instead of a panic.

use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::driver::sys as cu;
use cudarc::nvrtc::sys as nv;
use kevo_backend::{BackendError, BackendName};

pub(crate) const BACKEND: BackendName = BackendName::Cuda;

pub(crate) fn unavailable(reason: impl Into<String>) -> BackendError {
    BackendError::Unavailable {
        backend: BACKEND,
        reason: reason.into(),
    }
}

/// Driver entry points called by this crate, by their exported names.
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuDevicePrimaryCtxReset_v2",
    "cuCtxSetCurrent",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventDestroy_v2",
    "cuEventElapsedTime_v2",
    "cuModuleLoadDataEx",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuFuncGetParamInfo",
    "cuLaunchKernel",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemsetD8Async",
    "cuGraphInstantiateWithFlags",
    "cuGraphUpload",
    "cuGraphLaunch",
    "cuGraphDestroy",
    "cuGraphExecDestroy",
];

/// NVRTC entry points called by this crate.
const NVRTC_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcGetNumSupportedArchs",
    "nvrtcGetSupportedArchs",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcDestroyProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcGetPTXSize",
    "nvrtcGetPTX",
    "nvrtcGetErrorString",
];

/// What NVRTC reported when it was loaded.
#[derive(Debug, Clone)]
pub(crate) struct Nvrtc {
    /// (major, minor), e.g. (13, 0).
    pub version: (i32, i32),
    /// Real architectures NVRTC can emit a CUBIN for, as `major * 10 + minor`.
    pub supported_archs: Vec<i32>,
}

/// Run `f`, turning a panic inside cudarc into an error message.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(format!("{what} failed: {msg}"))
        }
    }
}

/// Load libcuda, check its entry points and run `cuInit` (once per process).
pub(crate) fn driver() -> Result<(), BackendError> {
    static DRIVER: OnceLock<Result<(), String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| guarded("initialising the CUDA driver", init_driver))
        .clone()
        .map_err(unavailable)
}

/// Load NVRTC and ask which architectures it supports (once per process).
pub(crate) fn nvrtc() -> Result<&'static Nvrtc, BackendError> {
    static NVRTC: OnceLock<Result<Nvrtc, String>> = OnceLock::new();
    NVRTC
        .get_or_init(|| guarded("loading NVRTC", init_nvrtc))
        .as_ref()
        .map_err(|e| unavailable(e.clone()))
}

pub(crate) fn missing_symbols(lib: &libloading::Library, names: &[&str]) -> Vec<String> {
    names
        .iter()
        // SAFETY: only the presence of the symbol is checked; it is not called.
        .filter(|n| unsafe { lib.get::<unsafe extern "C" fn()>(n.as_bytes()) }.is_err())
        .map(|n| n.to_string())
        .collect()
}

/// CUDA version the driver supports, e.g. 13000 for 13.0.
pub(crate) fn driver_version() -> Result<c_int, cu::CUresult> {
    let mut v: c_int = 0;
    // SAFETY: writes one int; needs no cuInit.
    let r = unsafe { cu::cuDriverGetVersion(&mut v) };
    if r == cu::CUresult::CUDA_SUCCESS {
        Ok(v)
    } else {
        Err(r)
    }
}

pub(crate) fn format_cuda_version(v: c_int) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

fn init_driver() -> Result<(), String> {
    // SAFETY: opening a system library; cudarc does the same on first use.
    if !unsafe { cu::is_culib_present() } {
        return Err(
            "the NVIDIA driver library (libcuda.so.1) could not be loaded: this machine has no \
             NVIDIA driver, or it is not on the loader path. Install the driver (R580 or newer \
             for CUDA 13) or add the directory holding libcuda.so.1 to LD_LIBRARY_PATH"
                .into(),
        );
    }
    // SAFETY: the library is present (checked above), so culib() does not panic.
    let lib = unsafe { cu::culib() };
    let missing = missing_symbols(lib, DRIVER_SYMBOLS);
    if !missing.is_empty() {
        let version = driver_version()
            .map(format_cuda_version)
            .unwrap_or_else(|_| "unknown".into());
        return Err(format!(
            "the NVIDIA driver (CUDA {version}) is too old for this build, which uses the \
             CUDA 13 driver API: missing {}. Install driver R580 or newer",
            missing.join(", ")
        ));
    }
    // SAFETY: cuInit may be called any number of times.
    let r = unsafe { cu::cuInit(0) };
    match r {
        cu::CUresult::CUDA_SUCCESS => Ok(()),
        cu::CUresult::CUDA_ERROR_NO_DEVICE => Err(format!(
            "the NVIDIA driver is installed but reports no CUDA device (CUDA_ERROR_NO_DEVICE){}",
            match std::env::var("CUDA_VISIBLE_DEVICES") {
                Ok(v) => format!("; CUDA_VISIBLE_DEVICES is set to {v:?}"),
                Err(_) => String::new(),
            }
        )),
        cu::CUresult::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | cu::CUresult::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => Err(format!(
            "cuInit failed with {r:?}: the kernel-mode NVIDIA driver is older than the \
                 user-mode library; reboot after a driver update or reinstall the driver"
        )),
        _ => Err(format!(
            "cuInit failed with {r:?}; check `nvidia-smi` and that /dev/nvidia* is accessible"
        )),
    }
}

/// Directories where a CUDA toolkit keeps its libraries, for when NVRTC is
/// not on the loader path (a toolkit in /usr/local/cuda without an
/// ld.so.conf entry is the common case).
pub(crate) fn toolkit_lib_dirs() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = [
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_ROOT",
        "CUDA_TOOLKIT_ROOT_DIR",
    ]
    .iter()
    .filter_map(std::env::var_os)
    .map(PathBuf::from)
    .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    if let Ok(entries) = std::fs::read_dir("/usr/local") {
        let mut versioned: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("cuda-"))
            })
            .collect();
        // Newest first: "cuda-13.0" sorts after "cuda-12.8".
        versioned.sort();
        versioned.reverse();
        roots.extend(versioned);
    }
    let mut dirs = Vec::new();
    for root in roots {
        for sub in [
            "lib64",
            "lib",
            "targets/x86_64-linux/lib",
            "targets/sbsa-linux/lib",
        ] {
            let d = root.join(sub);
            if d.is_dir() && !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    }
    dirs
}

/// The include directory of the toolkit, if one is installed: passed to
/// NVRTC so candidates can `#include <cuda_fp16.h>`, `<mma.h>` and friends
/// that NVRTC does not bundle.
pub(crate) fn toolkit_include_dir() -> Option<PathBuf> {
    toolkit_lib_dirs()
        .into_iter()
        .filter_map(|lib| {
            // lib64 -> ../include; targets/<t>/lib -> targets/<t>/include
            let parent = lib.parent()?;
            let inc = parent.join("include");
            inc.join("cuda_runtime.h").is_file().then_some(inc)
        })
        .next()
}

/// Preference order of NVRTC file names: the soname cudarc looks up first.
fn nvrtc_file_rank(name: &str) -> Option<u32> {
    if name == "libnvrtc.so.13" {
        Some(0)
    } else if name.starts_with("libnvrtc.so.13") {
        Some(1)
    } else if name == "libnvrtc.so" {
        Some(2)
    } else if name.starts_with("libnvrtc.so.") {
        Some(3)
    } else {
        None
    }
}

pub(crate) fn find_in(dir: &Path, rank: impl Fn(&str) -> Option<u32>) -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            rank(&name).map(|r| (r, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().next().map(|(_, p)| p)
}

/// Open NVRTC (and its builtins library) by full path from a toolkit
/// directory and keep it open for the life of the process. The dynamic
/// loader then resolves cudarc's later `dlopen("libnvrtc.so.13")` to the
/// already loaded object through its soname, and NVRTC's own
/// `dlopen("libnvrtc-builtins.so.13.x")` likewise.
fn preload_nvrtc_from_toolkit() -> Option<PathBuf> {
    for dir in toolkit_lib_dirs() {
        let Some(path) = find_in(&dir, nvrtc_file_rank) else {
            continue;
        };
        if let Some(builtins) =
            find_in(&dir, |n| n.starts_with("libnvrtc-builtins.so").then_some(0))
        {
            // SAFETY: loading a vendor library with no initialisers of concern.
            if let Ok(lib) = unsafe { libloading::Library::new(&builtins) } {
                std::mem::forget(lib);
            }
        }
        // SAFETY: as above.
        if let Ok(lib) = unsafe { libloading::Library::new(&path) } {
            std::mem::forget(lib);
            return Some(path);
        }
    }
    None
}

fn nvrtc_check(r: nv::nvrtcResult, what: &str) -> Result<(), String> {
    if r == nv::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {r:?}"))
    }
}

fn init_nvrtc() -> Result<Nvrtc, String> {
    // SAFETY: opening a system library.
    if !unsafe { nv::is_culib_present() } && preload_nvrtc_from_toolkit().is_none() {
        return Err(
            "NVRTC (libnvrtc.so.13) could not be loaded: install the CUDA 13 runtime compiler \
             (e.g. `apt-get install cuda-nvrtc-13-0`) and put its directory (usually \
             /usr/local/cuda/lib64) on LD_LIBRARY_PATH, or set CUDA_HOME to the toolkit"
                .into(),
        );
    }
    // SAFETY: present (checked or preloaded above), so culib() does not panic.
    let lib = unsafe { nv::culib() };
    let missing = missing_symbols(lib, NVRTC_SYMBOLS);
    if !missing.is_empty() {
        return Err(format!(
            "the NVRTC library found is too old: missing {}",
            missing.join(", ")
        ));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    nvrtc_check(
        unsafe { nv::nvrtcVersion(&mut major, &mut minor) },
        "nvrtcVersion",
    )?;
    let mut n: c_int = 0;
    // SAFETY: plain out-parameter.
    nvrtc_check(
        unsafe { nv::nvrtcGetNumSupportedArchs(&mut n) },
        "nvrtcGetNumSupportedArchs",
    )?;
    let mut supported_archs = vec![0 as c_int; n.max(0) as usize];
    if n > 0 {
        // SAFETY: the buffer holds exactly the count NVRTC reported.
        nvrtc_check(
            unsafe { nv::nvrtcGetSupportedArchs(supported_archs.as_mut_ptr()) },
            "nvrtcGetSupportedArchs",
        )?;
    }
    Ok(Nvrtc {
        version: (major, minor),
        supported_archs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvrtc_soname_is_preferred() {
        let mut names = [
            "libnvrtc.so",
            "libnvrtc.so.13.0.48",
            "libnvrtc.so.13",
            "libnvrtc-builtins.so.13.0",
            "libnvrtc.so.12",
        ];
        names.sort_by_key(|n| nvrtc_file_rank(n).unwrap_or(99));
        assert_eq!(names[0], "libnvrtc.so.13");
        assert_eq!(names[1], "libnvrtc.so.13.0.48");
        assert_eq!(nvrtc_file_rank("libnvrtc-builtins.so.13.0"), None);
    }

    #[test]
    fn cuda_versions_are_formatted() {
        assert_eq!(format_cuda_version(13000), "13.0");
        assert_eq!(format_cuda_version(12080), "12.8");
    }
}
