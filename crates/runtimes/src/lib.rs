//! The runtimes kevo was built with: the one place that knows which backends
//! exist, which dialect each compiles, how to list their devices and how to
//! open one. Each backend sits behind a Cargo feature of the same name
//! (`cuda`, `opencl`, both on by default); asking for one that was left out
//! is an error that names the feature.

use kevo_backend::{Backend, BackendError, BackendName, DeviceInfo, DeviceSelector, Dialect};
use serde::{Deserialize, Serialize};

pub mod fixed_times;
pub mod testing;

/// A backend a run can ask for: `Auto`, or one of the concrete
/// [`BackendName`]s, whose names it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// CUDA if a CUDA device is present, else OpenCL.
    Auto,
    Opencl,
    Cuda,
    /// Triton candidates on a CUDA device: compiled by Triton's own
    /// compiler through a helper, loaded and launched by the CUDA backend.
    Triton,
}

impl BackendKind {
    /// Every concrete backend, in the order `auto` tries them (last first).
    /// Triton is not among them: it is a language on the CUDA backend,
    /// asked for by name, never picked by `auto`.
    pub const CONCRETE: [BackendKind; 2] = [BackendKind::Opencl, BackendKind::Cuda];

    /// The concrete backend asked for; `None` for `Auto`, which is only
    /// known once a device is open (`DeviceInfo::backend`).
    pub fn concrete(self) -> Option<BackendName> {
        match self {
            BackendKind::Auto => None,
            BackendKind::Opencl => Some(BackendName::Opencl),
            BackendKind::Cuda => Some(BackendName::Cuda),
            BackendKind::Triton => Some(BackendName::Triton),
        }
    }

    /// The name used on the command line and in configs: "auto" or the
    /// concrete backend's name (as in `DeviceInfo::backend`).
    pub fn name(self) -> &'static str {
        self.concrete().map_or("auto", BackendName::name)
    }

    /// The dialect a concrete backend compiles; `None` for `Auto`, which
    /// is only known once a device is open (`DeviceInfo::dialect`).
    pub fn dialect(self) -> Option<Dialect> {
        self.concrete().map(BackendName::dialect)
    }

    /// Whether this build contains the backend (`Auto` is always there).
    pub fn compiled_in(self) -> bool {
        match self.concrete() {
            None => true,
            Some(BackendName::Opencl) => cfg!(feature = "opencl"),
            Some(BackendName::Cuda) => cfg!(feature = "cuda"),
            Some(BackendName::Triton) => cfg!(feature = "triton"),
        }
    }
}

impl From<BackendName> for BackendKind {
    fn from(backend: BackendName) -> Self {
        match backend {
            BackendName::Opencl => BackendKind::Opencl,
            BackendName::Cuda => BackendKind::Cuda,
            BackendName::Triton => BackendKind::Triton,
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

impl std::str::FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(BackendKind::Auto);
        }
        s.parse::<BackendName>()
            .map(BackendKind::from)
            .map_err(|_| {
                format!(
                    "unknown backend `{s}` (expected auto, {})",
                    BackendName::known()
                )
            })
    }
}

/// By name, as on the command line: configs and stored runs hold it so.
impl Serialize for BackendKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for BackendKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = BackendKind;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "a backend name (auto, {})", BackendName::known())
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<BackendKind, E> {
                s.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// How to open a backend: settings that belong to the runtime, not to one
/// evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    /// Replay each size's launch sequence as one CUDA graph (CUDA only).
    pub cuda_graph: bool,
    /// Flush the L2 cache before every timed run (CUDA only).
    pub flush_l2: bool,
    /// The interpreter with Triton installed (Triton only); `None` is
    /// `kevo_triton::default_python()`.
    pub triton_python: Option<String>,
    /// Where the Triton helper may write (the worker's scratch directory);
    /// `None` is a directory under the system's temporary directory.
    pub scratch: Option<std::path::PathBuf>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            cuda_graph: true,
            flush_l2: false,
            triton_python: None,
            scratch: None,
        }
    }
}

/// The error for a backend this build does not contain.
#[cfg(any(
    not(feature = "cuda"),
    not(feature = "opencl"),
    not(feature = "triton")
))]
fn not_built(backend: BackendName) -> BackendError {
    BackendError::Unavailable {
        backend,
        reason: format!(
            "kevo was built without the {backend} backend (Cargo feature `{backend}`); rebuild with `--features {backend}`"
        ),
    }
}

/// Opens a device of `kind`. `Auto` tries CUDA first and falls back to
/// OpenCL; when neither opens, the OpenCL error is returned (the CUDA one
/// is usually just "no driver"). With `KEVO_FIXED_DEVICE_TIMES=1` the
/// device's clock is replaced by a fixed one ([`fixed_times`]): kevo's
/// golden test, never a measurement.
pub fn open(
    kind: BackendKind,
    selector: &DeviceSelector,
    options: OpenOptions,
) -> Result<Box<dyn Backend>, BackendError> {
    let backend = open_real(kind, selector, options)?;
    Ok(if fixed_times::fixed_times_requested() {
        Box::new(fixed_times::FixedTimes::new(backend))
    } else {
        backend
    })
}

/// [`open`] without the fixed-time clock.
fn open_real(
    kind: BackendKind,
    selector: &DeviceSelector,
    options: OpenOptions,
) -> Result<Box<dyn Backend>, BackendError> {
    match kind {
        BackendKind::Opencl => open_opencl(selector),
        BackendKind::Cuda => open_cuda(selector, &options),
        BackendKind::Triton => open_triton(selector, &options),
        BackendKind::Auto => match open_cuda(selector, &options) {
            Ok(b) => Ok(b),
            Err(_) => open_opencl(selector),
        },
    }
}

#[cfg(feature = "triton")]
fn open_triton(
    selector: &DeviceSelector,
    options: &OpenOptions,
) -> Result<Box<dyn Backend>, BackendError> {
    let cuda = open_cuda(selector, options).map_err(|e| BackendError::Unavailable {
        backend: BackendName::Triton,
        reason: format!("Triton kernels run on a CUDA device, and none opened: {e}"),
    })?;
    let python = options
        .triton_python
        .clone()
        .unwrap_or_else(kevo_triton::default_python);
    let scratch = options.scratch.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("kevo-triton-{}", std::process::id()))
    });
    let config = kevo_triton::HelperConfig::new(&python, &scratch.join("triton"));
    Ok(Box::new(kevo_triton::TritonBackend::new(cuda, config)?))
}

#[cfg(not(feature = "triton"))]
fn open_triton(_: &DeviceSelector, _: &OpenOptions) -> Result<Box<dyn Backend>, BackendError> {
    Err(not_built(BackendName::Triton))
}

#[cfg(feature = "opencl")]
fn open_opencl(selector: &DeviceSelector) -> Result<Box<dyn Backend>, BackendError> {
    Ok(Box::new(kevo_opencl::OpenClBackend::open(selector)?))
}

#[cfg(not(feature = "opencl"))]
fn open_opencl(_: &DeviceSelector) -> Result<Box<dyn Backend>, BackendError> {
    Err(not_built(BackendName::Opencl))
}

#[cfg(feature = "cuda")]
fn open_cuda(
    selector: &DeviceSelector,
    options: &OpenOptions,
) -> Result<Box<dyn Backend>, BackendError> {
    let mut backend = kevo_cuda::CudaBackend::open(selector)?;
    backend.set_use_graph(options.cuda_graph);
    backend.set_flush_l2(options.flush_l2);
    Ok(Box::new(backend))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_: &DeviceSelector, _: &OpenOptions) -> Result<Box<dyn Backend>, BackendError> {
    Err(not_built(BackendName::Cuda))
}

/// Devices of one backend, each with the selector that opens it, or the
/// reason the backend has none.
pub type DeviceList = Result<Vec<(DeviceSelector, DeviceInfo)>, String>;

/// Every device of every backend this build knows, with the reason a
/// backend has none (including "built without").
pub fn list() -> Vec<(BackendKind, DeviceList)> {
    BackendKind::CONCRETE
        .into_iter()
        .map(|kind| (kind, list_of(kind)))
        .collect()
}

fn list_of(kind: BackendKind) -> DeviceList {
    match kind {
        BackendKind::Auto => Ok(Vec::new()),
        BackendKind::Opencl => list_opencl(),
        BackendKind::Cuda | BackendKind::Triton => list_cuda(),
    }
}

#[cfg(feature = "opencl")]
fn list_opencl() -> DeviceList {
    let devices = kevo_opencl::list_devices().map_err(|e| e.to_string())?;
    Ok(devices
        .into_iter()
        .map(|e| {
            let selector = DeviceSelector {
                platform: Some(e.platform_index.to_string()),
                device: Some(e.device_index.to_string()),
            };
            (selector, e.info)
        })
        .collect())
}

#[cfg(not(feature = "opencl"))]
fn list_opencl() -> DeviceList {
    Err(not_built(BackendName::Opencl).to_string())
}

#[cfg(feature = "cuda")]
fn list_cuda() -> DeviceList {
    let devices = kevo_cuda::list_devices().map_err(|e| e.to_string())?;
    Ok(devices
        .into_iter()
        .map(|e| {
            let selector = DeviceSelector {
                platform: None,
                device: Some(e.device_index.to_string()),
            };
            (selector, e.info)
        })
        .collect())
}

#[cfg(not(feature = "cuda"))]
fn list_cuda() -> DeviceList {
    Err(not_built(BackendName::Cuda).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for kind in [
            BackendKind::Auto,
            BackendKind::Opencl,
            BackendKind::Cuda,
            BackendKind::Triton,
        ] {
            assert_eq!(kind.name().parse::<BackendKind>(), Ok(kind));
            // Configs and stored runs use the serde name: it must be the CLI name.
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
        }
        let err = "metal".parse::<BackendKind>().unwrap_err();
        assert_eq!(
            err,
            "unknown backend `metal` (expected auto, opencl, cuda, triton)"
        );
        let err = serde_json::from_str::<BackendKind>("\"metal\"").unwrap_err();
        assert!(
            err.to_string()
                .contains(&"metal".parse::<BackendKind>().unwrap_err()),
            "{err}"
        );
    }

    #[test]
    fn concrete_kinds_are_the_backend_names() {
        assert_eq!(BackendKind::Auto.concrete(), None);
        for backend in BackendName::ALL {
            let kind = BackendKind::from(backend);
            assert_eq!(kind.concrete(), Some(backend));
            assert_eq!(kind.name(), backend.name());
            assert_eq!(kind.dialect(), Some(backend.dialect()));
        }
    }

    #[test]
    fn concrete_backends_know_their_dialect() {
        assert_eq!(BackendKind::Cuda.dialect(), Some(Dialect::Cuda));
        assert_eq!(BackendKind::Opencl.dialect(), Some(Dialect::OpenCl));
        assert_eq!(BackendKind::Auto.dialect(), None);
    }

    #[test]
    fn every_concrete_backend_is_listed_with_devices_or_a_reason() {
        let listed = list();
        let kinds: Vec<_> = listed.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, BackendKind::CONCRETE.to_vec());
        for (kind, devices) in listed {
            if let Ok(devices) = &devices {
                for (_, info) in devices {
                    assert_eq!(Some(info.dialect), kind.dialect(), "{}", info.name);
                    assert_eq!(Some(info.backend), kind.concrete());
                }
            }
            if !kind.compiled_in() {
                let reason = devices.unwrap_err();
                assert!(reason.contains("Cargo feature"), "{reason}");
            }
        }
    }
}
