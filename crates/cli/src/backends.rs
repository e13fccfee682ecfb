//! Opening a backend by name: the one place the CLI knows which runtimes exist.

use anyhow::{Result, bail};
use kevo_backend::{Backend, DeviceInfo, DeviceSelector};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// CUDA if a CUDA device is present, else OpenCL.
    Auto,
    Opencl,
    Cuda,
}

pub fn open(kind: BackendKind, selector: &DeviceSelector) -> Result<Box<dyn Backend>> {
    match kind {
        BackendKind::Opencl => Ok(Box::new(kevo_opencl::OpenClBackend::open(selector)?)),
        BackendKind::Cuda => open_cuda(selector),
        BackendKind::Auto => match open_cuda(selector) {
            Ok(b) => Ok(b),
            Err(_) => Ok(Box::new(kevo_opencl::OpenClBackend::open(selector)?)),
        },
    }
}

fn open_cuda(_selector: &DeviceSelector) -> Result<Box<dyn Backend>> {
    bail!("cuda is not available: this build of kevo has no CUDA backend")
}

/// Every device of every backend, or the reason a backend has none.
pub fn list() -> Vec<(&'static str, Result<Vec<(String, DeviceInfo)>, String>)> {
    let opencl = kevo_opencl::list_devices()
        .map(|v| {
            v.into_iter()
                .map(|e| (format!("{}:{}", e.platform_index, e.device_index), e.info))
                .collect()
        })
        .map_err(|e| e.to_string());
    vec![
        ("opencl", opencl),
        (
            "cuda",
            Err("this build of kevo has no CUDA backend".to_string()),
        ),
    ]
}
