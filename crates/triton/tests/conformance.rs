//! The backend conformance suite on the Triton backend. Its `compile`
//! takes CUDA C++ (kevo's own kernels are written in the device's native
//! language, `Dialect::native`), so the suite's CUDA kernels go through
//! the wrapper's module and kernel handles, launch translation, scratch
//! and forwarded buffers, as the evaluator's utility kernels do on a
//! Triton device. Skipped, with the reason printed, without a CUDA device
//! or a Python with Triton; under `KEVO_REQUIRE_TRITON=1`
//! (scripts/gpu-check) either one missing fails instead.

mod common;

use kevo_backend::{Backend, DeviceSelector};
use kevo_cuda::{CudaBackend, CudaOptions};
use kevo_triton::{HelperConfig, TritonBackend};

kevo_backend::conformance_suite!(open());

/// The Triton backend and its helper's directory, removed after it
/// (fields drop in order).
struct WithScratch {
    backend: TritonBackend,
    _scratch: tempfile::TempDir,
}

impl Backend for WithScratch {
    kevo_backend::forward_backend!(self.backend);
}

fn required() -> bool {
    std::env::var("KEVO_REQUIRE_TRITON").as_deref() == Ok("1")
}

/// `opened`, or None with the reason printed where Triton is optional.
fn or_skip<T, E: std::fmt::Display>(opened: Result<T, E>) -> Option<T> {
    match opened {
        Ok(value) => Some(value),
        Err(e) if !required() => {
            eprintln!("skipping Triton conformance: {e}");
            None
        }
        Err(e) => panic!("KEVO_REQUIRE_TRITON=1 but Triton is unusable: {e}"),
    }
}

/// A Triton backend on the first CUDA device, replaying launches as CUDA
/// graphs as `kevo` does by default.
fn open() -> Option<WithScratch> {
    let options = CudaOptions {
        use_graph: true,
        flush_l2: false,
    };
    let cuda = or_skip(CudaBackend::open_with_options(
        &DeviceSelector::default(),
        options,
    ))?;
    let python =
        or_skip(common::triton_python().ok_or("no python with triton (scripts/setup --triton)"))?;
    let scratch = tempfile::tempdir().unwrap();
    let config = HelperConfig::new(&python, scratch.path());
    let backend = or_skip(TritonBackend::new(Box::new(cuda), config))?;
    Some(WithScratch {
        backend,
        _scratch: scratch,
    })
}
