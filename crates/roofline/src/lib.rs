//! Roofline ceilings: the peak FP32 throughput and DRAM bandwidth a task's
//! achieved figure is divided by.
//!
//! GPUs in the datasheet table use the vendor's numbers (as Metal-Sci does
//! for Apple chips). Devices not in the table, such as PoCL on a CPU, get
//! ceilings measured by two micro-benchmarks (a streaming copy and an FMA
//! loop), cached per device so the measurement runs once.

pub mod bench;
pub mod envelope;
pub mod hierarchy;
pub mod levels;

pub use bench::{Bound, measure, method, remeasure};
pub use hierarchy::{Hierarchy, Level, Placement, Spread, SweepPoint, human_bytes};
pub use levels::{Extras, LaunchOverhead};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kevo_backend::{Backend, BackendError, DeviceInfo, Dialect};
use kevo_tasks::CeilingKind;
use serde::{Deserialize, Serialize};

/// One datasheet row. `patterns` must all occur (case-insensitively) in the
/// device name; rows are tried in order, most specific first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableEntry {
    pub name: &'static str,
    pub patterns: &'static [&'static str],
    /// Peak FP32 without tensor cores, GFLOPS.
    pub fp32_gflops: f64,
    /// Peak DRAM bandwidth, GB/s.
    pub bandwidth_gbs: f64,
}

/// Vendor datasheet figures. NVIDIA: FP32 is the non-tensor-core CUDA-core
/// peak at boost clock. Apple: the figures Metal-Sci used (spec section 0.4).
pub const TABLE: &[TableEntry] = &[
    TableEntry {
        name: "NVIDIA H200 NVL",
        patterns: &["h200", "nvl"],
        fp32_gflops: 60_000.0,
        bandwidth_gbs: 4_800.0,
    },
    TableEntry {
        name: "NVIDIA H200 SXM",
        patterns: &["h200"],
        fp32_gflops: 67_000.0,
        bandwidth_gbs: 4_800.0,
    },
    TableEntry {
        name: "NVIDIA H100 NVL",
        patterns: &["h100", "nvl"],
        fp32_gflops: 60_000.0,
        bandwidth_gbs: 3_900.0,
    },
    TableEntry {
        name: "NVIDIA H100 PCIe",
        patterns: &["h100", "pcie"],
        fp32_gflops: 51_000.0,
        bandwidth_gbs: 2_000.0,
    },
    TableEntry {
        name: "NVIDIA H100 SXM",
        patterns: &["h100"],
        fp32_gflops: 67_000.0,
        bandwidth_gbs: 3_350.0,
    },
    TableEntry {
        name: "NVIDIA A100 PCIe 80GB",
        patterns: &["a100", "pcie", "80gb"],
        fp32_gflops: 19_500.0,
        bandwidth_gbs: 1_935.0,
    },
    TableEntry {
        name: "NVIDIA A100 SXM 80GB",
        patterns: &["a100", "80gb"],
        fp32_gflops: 19_500.0,
        bandwidth_gbs: 2_039.0,
    },
    TableEntry {
        name: "NVIDIA A100 40GB",
        patterns: &["a100"],
        fp32_gflops: 19_500.0,
        bandwidth_gbs: 1_555.0,
    },
    TableEntry {
        name: "NVIDIA L40S",
        patterns: &["l40s"],
        fp32_gflops: 91_600.0,
        bandwidth_gbs: 864.0,
    },
    TableEntry {
        name: "NVIDIA L4",
        patterns: &["nvidia l4"],
        fp32_gflops: 30_300.0,
        bandwidth_gbs: 300.0,
    },
    TableEntry {
        name: "NVIDIA GeForce RTX 4090",
        patterns: &["rtx 4090"],
        fp32_gflops: 82_600.0,
        bandwidth_gbs: 1_008.0,
    },
    TableEntry {
        name: "Apple M1 Ultra",
        patterns: &["apple m1 ultra"],
        fp32_gflops: 21_000.0,
        bandwidth_gbs: 800.0,
    },
    TableEntry {
        name: "Apple M1 Max",
        patterns: &["apple m1 max"],
        fp32_gflops: 7_800.0,
        bandwidth_gbs: 400.0,
    },
    TableEntry {
        name: "Apple M1 Pro",
        patterns: &["apple m1 pro"],
        fp32_gflops: 4_500.0,
        bandwidth_gbs: 200.0,
    },
    TableEntry {
        name: "Apple M1",
        patterns: &["apple m1"],
        fp32_gflops: 2_600.0,
        bandwidth_gbs: 68.0,
    },
    TableEntry {
        name: "Apple M2 Ultra",
        patterns: &["apple m2 ultra"],
        fp32_gflops: 27_200.0,
        bandwidth_gbs: 800.0,
    },
    TableEntry {
        name: "Apple M2 Max",
        patterns: &["apple m2 max"],
        fp32_gflops: 13_600.0,
        bandwidth_gbs: 400.0,
    },
    TableEntry {
        name: "Apple M2 Pro",
        patterns: &["apple m2 pro"],
        fp32_gflops: 6_800.0,
        bandwidth_gbs: 200.0,
    },
    TableEntry {
        name: "Apple M2",
        patterns: &["apple m2"],
        fp32_gflops: 3_600.0,
        bandwidth_gbs: 100.0,
    },
    TableEntry {
        name: "Apple M3 Max",
        patterns: &["apple m3 max"],
        fp32_gflops: 14_200.0,
        bandwidth_gbs: 300.0,
    },
    TableEntry {
        name: "Apple M3 Pro",
        patterns: &["apple m3 pro"],
        fp32_gflops: 7_400.0,
        bandwidth_gbs: 150.0,
    },
    TableEntry {
        name: "Apple M3",
        patterns: &["apple m3"],
        fp32_gflops: 4_100.0,
        bandwidth_gbs: 100.0,
    },
    TableEntry {
        name: "Apple M4 Max",
        patterns: &["apple m4 max"],
        fp32_gflops: 18_000.0,
        bandwidth_gbs: 546.0,
    },
    TableEntry {
        name: "Apple M4 Pro",
        patterns: &["apple m4 pro"],
        fp32_gflops: 9_200.0,
        bandwidth_gbs: 273.0,
    },
    TableEntry {
        name: "Apple M4",
        patterns: &["apple m4"],
        fp32_gflops: 4_600.0,
        bandwidth_gbs: 120.0,
    },
];

/// The datasheet row for a device name, if any.
pub fn lookup(device_name: &str) -> Option<&'static TableEntry> {
    let name = device_name.to_lowercase();
    TABLE
        .iter()
        .find(|e| e.patterns.iter().all(|p| name.contains(p)))
}

/// Where a ceiling came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CeilingSource {
    Datasheet {
        entry: String,
    },
    Measured {
        measured_unix: u64,
        cached: bool,
    },
    /// Given by the user (`--ceilings`): for a MIG slice, a power-capped or
    /// clock-locked GPU, where neither the datasheet nor a short measurement
    /// is the ceiling the kernel actually runs under.
    Declared,
}

impl std::fmt::Display for CeilingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CeilingSource::Datasheet { entry } => write!(f, "datasheet ({entry})"),
            CeilingSource::Measured { cached: true, .. } => f.write_str("measured (cached)"),
            CeilingSource::Measured { cached: false, .. } => f.write_str("measured now"),
            CeilingSource::Declared => f.write_str("declared"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    pub bandwidth_gbs: f64,
    pub fp32_gflops: f64,
    pub source: CeilingSource,
    /// The measured memory hierarchy (always measured, whatever the source
    /// of the two ceilings above); None where it could not be measured or
    /// the ceilings were declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hierarchy: Option<Hierarchy>,
    /// The measured cost of an empty launch; None where it was not
    /// measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_overhead: Option<LaunchOverhead>,
}

impl Ceilings {
    /// The peak a task of this kind is scored against: the one place where
    /// a task's ceiling kind meets a device's ceilings.
    pub fn for_kind(&self, kind: CeilingKind) -> f64 {
        match kind {
            CeilingKind::Bandwidth => self.bandwidth_gbs,
            CeilingKind::Fp32 => self.fp32_gflops,
        }
    }
}

/// Results of the two micro-benchmarks on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Median copy bandwidth (read + write bytes / time), GB/s.
    pub copy_gbs: f64,
    pub copy_gbs_min: f64,
    pub copy_gbs_max: f64,
    /// Median FMA throughput, GFLOPS.
    pub fma_gflops: f64,
    pub fma_gflops_min: f64,
    pub fma_gflops_max: f64,
    /// Bytes copied per run.
    pub copy_bytes: u64,
    /// When the latest measurement of the envelope ran.
    pub measured_unix: u64,
    /// How many measurements this envelope holds (1 in caches written
    /// before ceilings became envelopes).
    #[serde(default = "one")]
    pub runs: u32,
    /// When the first of them ran (0 where not recorded).
    #[serde(default)]
    pub first_unix: u64,
    /// The hierarchy sweep, shared-memory bandwidth, FP64 and FP16; None in
    /// measurements cached before kevo measured them (which are then
    /// measured again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extras: Option<Extras>,
}

fn one() -> u32 {
    1
}

impl Measurement {
    /// A measurement (or envelope) from its two ceilings' spreads.
    pub fn from_spreads(
        copy: Spread,
        fma: Spread,
        copy_bytes: u64,
        (first_unix, measured_unix, runs): (u64, u64, u32),
        extras: Option<Extras>,
    ) -> Measurement {
        Measurement {
            copy_gbs: copy.median,
            copy_gbs_min: copy.min,
            copy_gbs_max: copy.max,
            fma_gflops: fma.median,
            fma_gflops_min: fma.min,
            fma_gflops_max: fma.max,
            copy_bytes,
            measured_unix,
            runs,
            first_unix,
            extras,
        }
    }

    /// The DRAM copy bandwidth with its spread.
    pub fn copy_spread(&self) -> Spread {
        Spread {
            median: self.copy_gbs,
            min: self.copy_gbs_min,
            max: self.copy_gbs_max,
        }
    }

    /// The FP32 FMA peak with its spread.
    pub fn fma_spread(&self) -> Spread {
        Spread {
            median: self.fma_gflops,
            min: self.fma_gflops_min,
            max: self.fma_gflops_max,
        }
    }

    /// Whether this measurement has everything the current kevo measures.
    pub fn is_complete(&self) -> bool {
        self.extras
            .as_ref()
            .is_some_and(|x| x.launch_overhead.is_some())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RooflineError {
    #[error("micro-benchmark failed: {0}")]
    Backend(#[from] BackendError),
    #[error("no micro-benchmark kernels for {0}")]
    NoKernels(Dialect),
    #[error("ceiling cache {path}: {message}")]
    Cache { path: PathBuf, message: String },
}

/// Cache key of a device: measurements are only reused on the same backend,
/// platform, device and driver.
pub fn cache_key(info: &DeviceInfo) -> String {
    format!(
        "{}|{}|{}|{}",
        info.backend, info.platform, info.name, info.driver_version
    )
}

/// Measured ceilings stored as JSON, one entry per device.
#[derive(Debug, Clone)]
pub struct CeilingCache {
    path: PathBuf,
}

impl CeilingCache {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        CeilingCache { path: path.into() }
    }

    /// `$KEVO_CACHE_DIR/ceilings.json`, else `$XDG_CACHE_HOME/kevo/…`, else
    /// `~/.cache/kevo/…`, else a folder in the system temp directory.
    pub fn default_location() -> Self {
        CeilingCache::new(kevo_tasks::cache_dir().join("ceilings.json"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn cache_err(&self, message: impl ToString) -> RooflineError {
        RooflineError::Cache {
            path: self.path.clone(),
            message: message.to_string(),
        }
    }

    fn load_all(&self) -> Result<BTreeMap<String, Measurement>, RooflineError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| self.cache_err(e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(self.cache_err(e)),
        }
    }

    /// Every cached measurement, by [`cache_key`].
    pub fn get_all(&self) -> Result<BTreeMap<String, Measurement>, RooflineError> {
        self.load_all()
    }

    pub fn get(&self, info: &DeviceInfo) -> Result<Option<Measurement>, RooflineError> {
        Ok(self.load_all()?.remove(&cache_key(info)))
    }

    /// Add a measurement to the device's envelope (a ceiling only rises:
    /// see [`envelope`]); written to a temporary file and renamed so a
    /// crash never leaves a torn cache. Returns the envelope stored.
    pub fn put(&self, info: &DeviceInfo, m: &Measurement) -> Result<Measurement, RooflineError> {
        // A corrupt cache is replaced rather than blocking every later run.
        let mut all = self.load_all().unwrap_or_default();
        let key = cache_key(info);
        let merged = match all.remove(&key) {
            Some(old) => envelope::merge(&old, m, info.is_cpu),
            None => m.clone(),
        };
        all.insert(key, merged.clone());
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| self.cache_err(e))?;
        }
        let tmp = self
            .path
            .with_extension(format!("json.tmp{}", std::process::id()));
        let text = serde_json::to_string_pretty(&all).map_err(|e| self.cache_err(e))?;
        std::fs::write(&tmp, text).map_err(|e| self.cache_err(e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| self.cache_err(e))?;
        Ok(merged)
    }
}

/// Measured ceilings for the device, from the cache or by measuring now.
pub fn measured(
    backend: &mut dyn Backend,
    cache: &CeilingCache,
) -> Result<(Measurement, bool), RooflineError> {
    let info = backend.info().clone();
    if let Ok(Some(m)) = cache.get(&info)
        && m.is_complete()
    {
        return Ok((m, true));
    }
    let m = measure(backend)?;
    // Failing to write the cache costs a re-measurement later, nothing more.
    let m = cache.put(&info, &m).unwrap_or(m);
    Ok((m, false))
}

/// Measure the device again and add the result to its cached envelope
/// (`kevo devices --remeasure`): the envelope only rises, so a measurement
/// made on a busy machine cannot lower a ceiling. Returns the new
/// measurement and the envelope now stored.
pub fn remeasure_into(
    backend: &mut dyn Backend,
    cache: &CeilingCache,
) -> Result<(Measurement, Measurement), RooflineError> {
    let m = measure(backend)?;
    let stored = cache.put(backend.info(), &m)?;
    Ok((m, stored))
}

/// The ceilings a score is computed against: the datasheet row when the
/// device has one, measured ceilings otherwise. The memory hierarchy is
/// measured either way (once per device and driver, then cached).
pub fn ceilings(
    backend: &mut dyn Backend,
    cache: &CeilingCache,
) -> Result<Ceilings, RooflineError> {
    let known = cache
        .get(backend.info())
        .ok()
        .flatten()
        .filter(Measurement::is_complete);
    let (ceilings, fresh) = ceilings_with(backend, known)?;
    if let Some(m) = fresh {
        // Failing to write the cache costs a re-measurement later, nothing more.
        let _ = cache.put(backend.info(), &m);
    }
    Ok(ceilings)
}

/// As [`ceilings`], with the cached measurement (if any) given rather than
/// read: for a process that may not read kevo's cache. Returns the
/// measurement too when it was made now, for the caller to cache.
pub fn ceilings_with(
    backend: &mut dyn Backend,
    known: Option<Measurement>,
) -> Result<(Ceilings, Option<Measurement>), RooflineError> {
    let datasheet = lookup(&backend.info().name);
    let (m, cached) = match known.filter(Measurement::is_complete) {
        Some(m) => (Some(m), true),
        None => match measure(backend) {
            Ok(m) => (Some(m), false),
            // A datasheet device is scored without the measurement; it
            // only loses its measured hierarchy.
            Err(_) if datasheet.is_some() => (None, false),
            Err(e) => return Err(e),
        },
    };
    let hierarchy = m
        .as_ref()
        .and_then(|m| m.extras.as_ref())
        .map(|x| x.hierarchy.clone());
    let launch_overhead = m
        .as_ref()
        .and_then(|m| m.extras.as_ref())
        .and_then(|x| x.launch_overhead.clone()?.ok());
    let ceilings = match (datasheet, &m) {
        (Some(entry), _) => Ceilings {
            bandwidth_gbs: entry.bandwidth_gbs,
            fp32_gflops: entry.fp32_gflops,
            source: CeilingSource::Datasheet {
                entry: entry.name.to_string(),
            },
            hierarchy,
            launch_overhead,
        },
        (None, Some(m)) => Ceilings {
            bandwidth_gbs: m.copy_gbs,
            fp32_gflops: m.fma_gflops,
            source: CeilingSource::Measured {
                measured_unix: m.measured_unix,
                cached,
            },
            hierarchy,
            launch_overhead,
        },
        (None, None) => unreachable!("a failed measurement without a datasheet row returned above"),
    };
    Ok((ceilings, if cached { None } else { m }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lookup_prefers_the_specific_row() {
        assert_eq!(
            lookup("NVIDIA H100 80GB HBM3").unwrap().name,
            "NVIDIA H100 SXM"
        );
        assert_eq!(lookup("NVIDIA H100 PCIe").unwrap().name, "NVIDIA H100 PCIe");
        assert_eq!(lookup("NVIDIA H100 NVL").unwrap().name, "NVIDIA H100 NVL");
        assert_eq!(lookup("NVIDIA H200").unwrap().bandwidth_gbs, 4_800.0);
        assert_eq!(
            lookup("NVIDIA A100-SXM4-80GB").unwrap().name,
            "NVIDIA A100 SXM 80GB"
        );
        assert_eq!(
            lookup("NVIDIA A100 80GB PCIe").unwrap().name,
            "NVIDIA A100 PCIe 80GB"
        );
        assert_eq!(
            lookup("NVIDIA A100-PCIE-40GB").unwrap().name,
            "NVIDIA A100 40GB"
        );
        assert_eq!(lookup("NVIDIA L4").unwrap().name, "NVIDIA L4");
        assert_eq!(lookup("NVIDIA L40S").unwrap().name, "NVIDIA L40S");
        assert_eq!(
            lookup("NVIDIA GeForce RTX 4090").unwrap().fp32_gflops,
            82_600.0
        );
        assert_eq!(lookup("Apple M1 Pro").unwrap().bandwidth_gbs, 200.0);
        assert_eq!(lookup("Apple M1").unwrap().bandwidth_gbs, 68.0);
        assert!(lookup("pthread-skylake-avx512-AMD EPYC").is_none());
    }

    fn info(name: &str) -> DeviceInfo {
        DeviceInfo {
            backend: kevo_backend::BackendName::Opencl,
            dialect: Dialect::OpenCl,
            platform: "p".into(),
            name: name.into(),
            vendor: "v".into(),
            compute_units: 1,
            global_mem_bytes: 1,
            max_work_group_size: 1,
            local_mem_bytes: 1,
            clock_mhz: 1,
            arch: String::new(),
            driver_version: "1".into(),
            is_cpu: true,
            cache_bytes: 0,
            integrated: false,
            details: Default::default(),
        }
    }

    #[test]
    fn cache_round_trips_per_device_and_survives_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CeilingCache::new(dir.path().join("sub/ceilings.json"));
        let m = Measurement {
            copy_gbs: 10.0,
            copy_gbs_min: 9.0,
            copy_gbs_max: 11.0,
            fma_gflops: 100.0,
            fma_gflops_min: 90.0,
            fma_gflops_max: 110.0,
            copy_bytes: 1,
            measured_unix: 5,
            runs: 1,
            first_unix: 5,
            extras: None,
        };
        assert_eq!(cache.get(&info("a")).unwrap(), None);
        cache.put(&info("a"), &m).unwrap();
        assert_eq!(cache.get(&info("a")).unwrap(), Some(m.clone()));
        assert_eq!(cache.get(&info("b")).unwrap(), None);
        std::fs::write(cache.path(), "{ not json").unwrap();
        assert!(matches!(
            cache.get(&info("a")),
            Err(RooflineError::Cache { .. })
        ));
        cache.put(&info("b"), &m).unwrap();
        assert_eq!(cache.get(&info("b")).unwrap(), Some(m));
    }
}
