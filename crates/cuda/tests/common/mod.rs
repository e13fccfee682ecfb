//! Opening the device for the integration tests.

use kevo_backend::DeviceSelector;
use kevo_cuda::{CudaBackend, CudaOptions};

/// The first CUDA device, or `None` (with the reason printed) on a machine
/// without CUDA, CI included. With `KEVO_REQUIRE_CUDA` set, a missing device
/// fails the test instead, so a GPU run cannot pass by skipping.
pub fn open(options: CudaOptions) -> Option<CudaBackend> {
    match CudaBackend::open_with_options(&DeviceSelector::default(), options) {
        Ok(b) => Some(b),
        Err(e) if std::env::var_os("KEVO_REQUIRE_CUDA").is_none() => {
            eprintln!("skipping CUDA test: {e}");
            None
        }
        Err(e) => panic!("KEVO_REQUIRE_CUDA is set but CUDA is unusable: {e}"),
    }
}
