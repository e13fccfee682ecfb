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
//!
//! The backend is split by concern: `device` (finding and opening a device,
//! and the [`CudaBackend`] state), `context` (the primary context and its
//! recovery after a fault), `module` (compiled modules and their kernels),
//! `memory` (buffers and views), `launch` (checking and queueing launches
//! and vendor ops), `timing` (timed regions: events, graphs, the L2 flush)
//! and `backend` (kevo's `Backend` trait, each call handed to one of them).

mod backend;
mod compile;
mod context;
mod device;
mod error;
mod launch;
mod loader;
mod memory;
mod module;
mod timing;
mod vendor;

pub use device::{CudaBackend, DeviceEntry, list_devices};
pub use timing::CudaOptions;
