//! Opening a backend by name: the one place that knows which runtimes exist.

use kevo_backend::{Backend, BackendError, DeviceInfo, DeviceSelector};
use serde::{Deserialize, Serialize};

use crate::protocol::TimingOptions;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// CUDA if a CUDA device is present, else OpenCL.
    Auto,
    Opencl,
    Cuda,
}

impl std::str::FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BackendKind::Auto),
            "opencl" => Ok(BackendKind::Opencl),
            "cuda" => Ok(BackendKind::Cuda),
            other => Err(format!(
                "unknown backend `{other}` (expected auto, opencl or cuda)"
            )),
        }
    }
}

pub fn open(
    kind: BackendKind,
    selector: &DeviceSelector,
    timing: TimingOptions,
) -> Result<Box<dyn Backend>, BackendError> {
    match kind {
        BackendKind::Opencl => Ok(Box::new(kevo_opencl::OpenClBackend::open(selector)?)),
        BackendKind::Cuda => open_cuda(selector, timing),
        BackendKind::Auto => match open_cuda(selector, timing) {
            Ok(b) => Ok(b),
            Err(_) => Ok(Box::new(kevo_opencl::OpenClBackend::open(selector)?)),
        },
    }
}

fn open_cuda(
    selector: &DeviceSelector,
    timing: TimingOptions,
) -> Result<Box<dyn Backend>, BackendError> {
    let mut backend = kevo_cuda::CudaBackend::open(selector)?;
    backend.set_use_graph(timing.cuda_graph);
    backend.set_flush_l2(timing.flush_l2);
    Ok(Box::new(backend))
}

/// Devices of one backend, each with the selector that opens it, or the
/// reason the backend has none.
pub type DeviceList = Result<Vec<(DeviceSelector, DeviceInfo)>, String>;

/// Every device of every backend.
pub fn list() -> Vec<(BackendKind, DeviceList)> {
    let opencl = kevo_opencl::list_devices()
        .map(|v| {
            v.into_iter()
                .map(|e| {
                    let sel = DeviceSelector {
                        platform: Some(e.platform_index.to_string()),
                        device: Some(e.device_index.to_string()),
                    };
                    (sel, e.info)
                })
                .collect()
        })
        .map_err(|e| e.to_string());
    let cuda = kevo_cuda::list_devices()
        .map(|v| {
            v.into_iter()
                .map(|e| {
                    let sel = DeviceSelector {
                        platform: None,
                        device: Some(e.device_index.to_string()),
                    };
                    (sel, e.info)
                })
                .collect()
        })
        .map_err(|e| e.to_string());
    vec![(BackendKind::Opencl, opencl), (BackendKind::Cuda, cuda)]
}
