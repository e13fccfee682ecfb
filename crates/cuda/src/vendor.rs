//! cuFFT and cuBLAS as vendor baselines: loaded at run time like the driver
//! and NVRTC, so kevo builds and runs without them, and a missing library
//! is `VendorError::Missing` saying which, never cudarc's panic.
//!
//! Both libraries sit on the CUDA runtime, which adopts the context that is
//! current on the calling thread: the backend's primary context, so they
//! work on the backend's buffers and stream.

use std::ffi::c_int;
use std::sync::OnceLock;

use cudarc::cublas::sys as blas;
use cudarc::cufft::sys as fft;
use cudarc::driver::sys as cu;
use kevo_backend::{VendorError, VendorKind, VendorLibrary, VendorOp};

use crate::loader::{find_in, guarded, missing_symbols, toolkit_lib_dirs};

pub(crate) const CUFFT: &str = "cuFFT";
pub(crate) const CUBLAS: &str = "cuBLAS";

/// cuFFT entry points this module calls.
const CUFFT_SYMBOLS: &[&str] = &[
    "cufftPlan3d",
    "cufftSetStream",
    "cufftExecC2C",
    "cufftDestroy",
    "cufftGetProperty",
];

/// cuBLAS entry points this module calls.
const CUBLAS_SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasSaxpy_v2",
    "cublasGetProperty",
];

/// `CUFFT_FORWARD`: the sign of the exponent, -1, as the task's DFT has it.
const CUFFT_FORWARD: c_int = -1;

/// The library that does `kind` of job on CUDA.
pub(crate) fn library_for(kind: VendorKind) -> &'static str {
    match kind {
        VendorKind::Fft3dC2c => CUFFT,
        VendorKind::Saxpy => CUBLAS,
    }
}

/// Preference order of a library's file names in a toolkit directory: the
/// soname (`libcufft.so.12`) first, then a fully versioned file, then the
/// development link. `libcufftw.so` is another library and never matches.
pub(crate) fn library_file_rank(stem: &str, name: &str) -> Option<u32> {
    let rest = name.strip_prefix(stem)?.strip_prefix(".so")?;
    if rest.is_empty() {
        return Some(2);
    }
    let version = rest.strip_prefix('.')?;
    if version.chars().all(|c| c.is_ascii_digit()) && !version.is_empty() {
        Some(0)
    } else if version.chars().all(|c| c.is_ascii_digit() || c == '.') {
        Some(1)
    } else {
        None
    }
}

/// Open `stems` (dependencies first) by full path from the first toolkit
/// directory that has them all, and keep them open for the process: the
/// dynamic loader then answers cudarc's later `dlopen("libcufft.so.12")`
/// with the loaded object through its soname, as for NVRTC.
fn preload_from_toolkit(stems: &[&str]) -> Option<std::path::PathBuf> {
    for dir in toolkit_lib_dirs() {
        let files: Option<Vec<_>> = stems
            .iter()
            .map(|stem| find_in(&dir, |n| library_file_rank(stem, n)))
            .collect();
        let Some(files) = files else { continue };
        let mut opened = Vec::new();
        for f in &files {
            // SAFETY: loading a vendor library with no initialisers of concern.
            match unsafe { libloading::Library::new(f) } {
                Ok(lib) => opened.push(lib),
                Err(_) => break,
            }
        }
        if opened.len() == files.len() {
            opened.into_iter().for_each(std::mem::forget);
            return files.last().cloned();
        }
    }
    None
}

/// Load `library` once per process: on the loader path, else from a
/// toolkit directory; check its entry points and ask its version, all
/// guarded against cudarc's panics.
pub(crate) fn load(library: &'static str) -> Result<&'static VendorLibrary, VendorError> {
    static CUFFT_LIB: OnceLock<Result<VendorLibrary, String>> = OnceLock::new();
    static CUBLAS_LIB: OnceLock<Result<VendorLibrary, String>> = OnceLock::new();
    let (slot, init): (_, fn() -> Result<VendorLibrary, String>) = match library {
        CUFFT => (&CUFFT_LIB, init_cufft),
        _ => (&CUBLAS_LIB, init_cublas),
    };
    slot.get_or_init(|| guarded(&format!("loading {library}"), init))
        .as_ref()
        .map_err(|reason| VendorError::Missing {
            library,
            reason: reason.clone(),
        })
}

fn not_found(library: &str, soname: &str) -> String {
    format!(
        "{library} ({soname}) could not be loaded: install the CUDA toolkit's {library} and put \
         its directory (usually /usr/local/cuda/lib64) on LD_LIBRARY_PATH, or set CUDA_HOME to \
         the toolkit"
    )
}

fn version(
    library: &str,
    get: impl Fn(fft::libraryPropertyType, &mut c_int) -> bool,
) -> Result<VendorLibrary, String> {
    let mut parts = Vec::new();
    for p in [
        fft::libraryPropertyType::MAJOR_VERSION,
        fft::libraryPropertyType::MINOR_VERSION,
        fft::libraryPropertyType::PATCH_LEVEL,
    ] {
        let mut v = 0;
        if !get(p, &mut v) {
            return Err(format!("{library} would not say its version ({p:?})"));
        }
        parts.push(v.to_string());
    }
    Ok(VendorLibrary {
        name: library.to_string(),
        version: parts.join("."),
    })
}

fn init_cufft() -> Result<VendorLibrary, String> {
    // SAFETY: opening a system library.
    if !unsafe { fft::is_culib_present() } && preload_from_toolkit(&["libcufft"]).is_none() {
        return Err(not_found(CUFFT, "libcufft.so"));
    }
    // SAFETY: present (checked or preloaded above), so culib() does not panic.
    let missing = missing_symbols(unsafe { fft::culib() }, CUFFT_SYMBOLS);
    if !missing.is_empty() {
        return Err(format!(
            "the cuFFT found is too old: missing {}",
            missing.join(", ")
        ));
    }
    version(CUFFT, |p, v| {
        // SAFETY: out-parameter; the symbol exists (checked above).
        unsafe { fft::cufftGetProperty(p, v) == fft::cufftResult::CUFFT_SUCCESS }
    })
}

fn init_cublas() -> Result<VendorLibrary, String> {
    // cuBLAS needs cuBLASLt: preload that first when cuBLAS is not on the path.
    // SAFETY: opening a system library.
    if !unsafe { blas::is_culib_present() }
        && preload_from_toolkit(&["libcublasLt", "libcublas"]).is_none()
    {
        return Err(not_found(CUBLAS, "libcublas.so"));
    }
    // SAFETY: present (checked or preloaded above), so culib() does not panic.
    let missing = missing_symbols(unsafe { blas::culib() }, CUBLAS_SYMBOLS);
    if !missing.is_empty() {
        return Err(format!(
            "the cuBLAS found is too old: missing {}",
            missing.join(", ")
        ));
    }
    version(CUBLAS, |p, v| {
        let p = match p {
            fft::libraryPropertyType::MAJOR_VERSION => blas::libraryPropertyType::MAJOR_VERSION,
            fft::libraryPropertyType::MINOR_VERSION => blas::libraryPropertyType::MINOR_VERSION,
            fft::libraryPropertyType::PATCH_LEVEL => blas::libraryPropertyType::PATCH_LEVEL,
        };
        // SAFETY: out-parameter; the symbol exists (checked above).
        unsafe { blas::cublasGetProperty(p, v) == blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS }
    })
}

fn fft_failed(what: &str, r: fft::cufftResult) -> VendorError {
    VendorError::Failed {
        library: CUFFT,
        message: format!("{what} failed: {r:?}"),
    }
}

fn blas_failed(what: &str, r: blas::cublasStatus_t) -> VendorError {
    VendorError::Failed {
        library: CUBLAS,
        message: format!("{what} failed: {r:?}"),
    }
}

/// An op with its buffers resolved to device pointers and their sizes.
pub(crate) type Resolved = VendorOp<(cu::CUdeviceptr, usize)>;

/// Check that every buffer of `op` holds what the op reads and writes.
pub(crate) fn check_extent(op: &Resolved) -> Result<(), VendorError> {
    let (library, need, what) = match *op {
        VendorOp::Fft3dC2c { n, .. } => (CUFFT, 8 * u64::from(n).pow(3), "the cube"),
        VendorOp::Saxpy { n, .. } => (CUBLAS, 4 * n, "the vectors"),
    };
    if let VendorOp::Saxpy { n, .. } = *op
        && n > i32::MAX as u64
    {
        return Err(VendorError::Failed {
            library,
            message: format!("cublasSaxpy takes at most {} elements, not {n}", i32::MAX),
        });
    }
    for &(_, bytes) in op.buffers() {
        if (bytes as u64) < need {
            return Err(VendorError::Failed {
                library,
                message: format!("a {bytes}-byte buffer cannot hold {what} ({need} bytes)"),
            });
        }
    }
    Ok(())
}

/// Plans and handles, made on first use and bound to the backend's stream.
#[derive(Default)]
pub(crate) struct VendorState {
    /// cuFFT 3-D C2C plans by cube edge.
    fft_plans: Vec<(u32, fft::cufftHandle)>,
    blas: Option<blas::cublasHandle_t>,
}

impl VendorState {
    /// Make what `op` needs (a cuFFT plan: its workspace is allocated
    /// here, never in a timed or captured region).
    ///
    /// # Safety
    /// The backend's context must be current and `stream` one of its streams.
    pub(crate) unsafe fn prepare(
        &mut self,
        op: &Resolved,
        stream: cu::CUstream,
    ) -> Result<(), VendorError> {
        match *op {
            VendorOp::Fft3dC2c { n, .. } => {
                if self.fft_plans.iter().any(|(m, _)| *m == n) {
                    return Ok(());
                }
                let edge = c_int::try_from(n).map_err(|_| VendorError::Failed {
                    library: CUFFT,
                    message: format!("a cube edge of {n} is too large"),
                })?;
                let mut plan: fft::cufftHandle = 0;
                // SAFETY: out-parameter; the library is loaded.
                let r = unsafe {
                    fft::cufftPlan3d(&mut plan, edge, edge, edge, fft::cufftType::CUFFT_C2C)
                };
                if r != fft::cufftResult::CUFFT_SUCCESS {
                    return Err(fft_failed(&format!("cufftPlan3d({n}, {n}, {n}, C2C)"), r));
                }
                // SAFETY: a fresh plan; the driver's and the runtime's stream
                // handles are the same object.
                let r = unsafe { fft::cufftSetStream(plan, stream.cast()) };
                if r != fft::cufftResult::CUFFT_SUCCESS {
                    // SAFETY: the plan made above, destroyed once.
                    unsafe { fft::cufftDestroy(plan) };
                    return Err(fft_failed("cufftSetStream", r));
                }
                self.fft_plans.push((n, plan));
                Ok(())
            }
            VendorOp::Saxpy { .. } => {
                if self.blas.is_some() {
                    return Ok(());
                }
                let mut handle = std::ptr::null_mut();
                // SAFETY: out-parameter; the library is loaded.
                let r = unsafe { blas::cublasCreate_v2(&mut handle) };
                if r != blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                    return Err(blas_failed("cublasCreate", r));
                }
                // SAFETY: the fresh handle, a live stream.
                let r = unsafe { blas::cublasSetStream_v2(handle, stream.cast()) };
                if r != blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                    // SAFETY: the handle made above, destroyed once.
                    unsafe { blas::cublasDestroy_v2(handle) };
                    return Err(blas_failed("cublasSetStream", r));
                }
                self.blas = Some(handle);
                Ok(())
            }
        }
    }

    /// Queue `op` on the stream its plan or handle is bound to.
    ///
    /// # Safety
    /// [`VendorState::prepare`] succeeded for `op` in the current context,
    /// and the pointers are live allocations that [`check_extent`] accepted.
    pub(crate) unsafe fn enqueue(&self, op: &Resolved) -> Result<(), VendorError> {
        match *op {
            VendorOp::Fft3dC2c {
                n,
                repeats,
                buffers,
            } => {
                let plan = self
                    .fft_plans
                    .iter()
                    .find(|(m, _)| *m == n)
                    .map(|(_, p)| *p)
                    .ok_or_else(|| {
                        fft_failed("finding the plan", fft::cufftResult::CUFFT_INVALID_PLAN)
                    })?;
                for t in 0..repeats as usize {
                    let (src, dst) = (buffers[t % 2].0, buffers[(t + 1) % 2].0);
                    // SAFETY: per the caller: both cubes are n³ complex values.
                    let r = unsafe {
                        fft::cufftExecC2C(
                            plan,
                            src as *mut fft::cufftComplex,
                            dst as *mut fft::cufftComplex,
                            CUFFT_FORWARD,
                        )
                    };
                    if r != fft::cufftResult::CUFFT_SUCCESS {
                        return Err(fft_failed("cufftExecC2C", r));
                    }
                }
                Ok(())
            }
            VendorOp::Saxpy { n, alpha, x, y } => {
                let handle = self.blas.ok_or_else(|| {
                    blas_failed(
                        "finding the handle",
                        blas::cublasStatus_t::CUBLAS_STATUS_NOT_INITIALIZED,
                    )
                })?;
                // SAFETY: per the caller: x and y hold n floats; alpha is read
                // from the host before the call returns.
                let r = unsafe {
                    blas::cublasSaxpy_v2(
                        handle,
                        n as c_int,
                        &alpha,
                        x.0 as *const f32,
                        1,
                        y.0 as *mut f32,
                        1,
                    )
                };
                if r != blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                    return Err(blas_failed("cublasSaxpy", r));
                }
                Ok(())
            }
        }
    }

    /// Destroy every plan and handle.
    ///
    /// # Safety
    /// The context they were made in must be alive and current.
    pub(crate) unsafe fn release(&mut self) {
        for (_, plan) in self.fft_plans.drain(..) {
            // SAFETY: per the caller; each plan is destroyed once.
            unsafe { fft::cufftDestroy(plan) };
        }
        if let Some(h) = self.blas.take() {
            // SAFETY: per the caller; destroyed once.
            unsafe { blas::cublasDestroy_v2(h) };
        }
    }

    /// Drop every plan and handle without calling the libraries: their
    /// context is gone (a reset after a fault).
    pub(crate) fn forget(&mut self) {
        self.fft_plans.clear();
        self.blas = None;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.fft_plans.is_empty() && self.blas.is_none()
    }
}

/// Key of an op in the backend's graph cache: a leading 0, which no
/// launch sequence's key has (kernel ids start at 1), then everything the
/// captured graph bakes in.
pub(crate) fn graph_key(op: &Resolved) -> Vec<u64> {
    match *op {
        VendorOp::Fft3dC2c {
            n,
            repeats,
            buffers,
        } => vec![
            0,
            1,
            u64::from(n),
            u64::from(repeats),
            buffers[0].0,
            buffers[1].0,
        ],
        VendorOp::Saxpy { n, alpha, x, y } => {
            vec![0, 2, n, u64::from(alpha.to_bits()), x.0, y.0]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_files_are_ranked_by_soname() {
        assert_eq!(library_file_rank("libcufft", "libcufft.so.12"), Some(0));
        assert_eq!(
            library_file_rank("libcufft", "libcufft.so.12.0.0.61"),
            Some(1)
        );
        assert_eq!(library_file_rank("libcufft", "libcufft.so"), Some(2));
        assert_eq!(library_file_rank("libcufft", "libcufftw.so.12"), None);
        assert_eq!(library_file_rank("libcufft", "libcufft_static.a"), None);
        assert_eq!(library_file_rank("libcublas", "libcublasLt.so.13"), None);
        assert_eq!(
            library_file_rank("libcublasLt", "libcublasLt.so.13"),
            Some(0)
        );
    }

    #[test]
    fn extents_are_checked_before_any_library_call() {
        let fft = VendorOp::Fft3dC2c {
            n: 8,
            repeats: 1,
            buffers: [(1, 4096), (2, 4095)],
        };
        let e = check_extent(&fft).unwrap_err();
        assert!(e.to_string().contains("4095-byte buffer"), "{e}");
        let saxpy = VendorOp::Saxpy {
            n: 1 << 40,
            alpha: 1.0,
            x: (1, 1 << 42),
            y: (2, 1 << 42),
        };
        assert!(
            check_extent(&saxpy)
                .unwrap_err()
                .to_string()
                .contains("at most")
        );
        let ok = VendorOp::Saxpy {
            n: 16,
            alpha: 1.0,
            x: (1, 64),
            y: (2, 64),
        };
        assert!(check_extent(&ok).is_ok());
        assert_ne!(
            graph_key(&ok),
            graph_key(&VendorOp::Saxpy {
                n: 16,
                alpha: 2.0,
                x: (1, 64),
                y: (2, 64),
            })
        );
        assert_eq!(graph_key(&ok)[0], 0);
        assert_eq!(library_for(VendorKind::Fft3dC2c), "cuFFT");
        assert_eq!(library_for(VendorKind::Saxpy), "cuBLAS");
    }

    #[test]
    fn a_missing_library_is_an_error_not_a_panic() {
        // Without CUDA (CI) both are missing; on a GPU machine they may load.
        for library in [CUFFT, CUBLAS] {
            match load(library) {
                Ok(l) => assert_eq!(l.name, library),
                Err(VendorError::Missing { library: l, reason }) => {
                    assert_eq!(l, library);
                    assert!(!reason.is_empty());
                }
                Err(e) => panic!("{e:?}"),
            }
        }
    }
}
