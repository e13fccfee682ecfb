use kevo_backend::{BackendName, CompileDiagnostics, FaultKind};
use serde::{Deserialize, Serialize};

/// How a candidate fared. A failing candidate is data, never an `Err`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// The proposer's response held no kernel source.
    NoCode { reason: String },
    /// The compiler rejected the source, or a required entry point is missing.
    CompileError {
        message: String,
        diagnostics: CompileDiagnostics,
    },
    /// A launch failed or the device faulted at `size`.
    RuntimeError {
        size: Option<String>,
        fault: Option<FaultKind>,
        message: String,
    },
    /// The candidate ran past its wall-clock limit.
    Timeout { size: Option<String>, limit_s: f64 },
    /// The output at `size` failed the check; later sizes were not run.
    WrongResult {
        size: String,
        metric: String,
        #[serde(with = "crate::json_f64")]
        value: f64,
        tolerance: Option<f64>,
    },
    /// Every size passed its checks, but `size` ran faster than the
    /// hardware allows (see `reason`): the kernel is not doing the work it
    /// claims. Never promoted and never a winner; `score` is what it would
    /// have scored, kept for the record.
    Suspicious {
        size: String,
        reason: String,
        #[serde(with = "crate::json_f64")]
        score: f64,
    },
    /// Every size passed; `score` is the geometric mean of the fractions.
    Correct {
        #[serde(with = "crate::json_f64")]
        score: f64,
    },
}

impl Outcome {
    pub fn is_correct(&self) -> bool {
        matches!(self, Outcome::Correct { .. })
    }

    /// The score, defined only for correct candidates (the hard gate).
    pub fn score(&self) -> Option<f64> {
        match self {
            Outcome::Correct { score } => Some(*score),
            _ => None,
        }
    }

    /// Short machine-friendly name.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::NoCode { .. } => "no_code",
            Outcome::CompileError { .. } => "compile_error",
            Outcome::RuntimeError { .. } => "runtime_error",
            Outcome::Timeout { .. } => "timeout",
            Outcome::WrongResult { .. } => "wrong_result",
            Outcome::Suspicious { .. } => "suspicious",
            Outcome::Correct { .. } => "correct",
        }
    }

    /// One line for people.
    /// Why a failed candidate failed, in full where one line cannot say
    /// it: the compiler's log (at most `max_lines` lines) for a compile
    /// error, the one-line summary otherwise; None for a correct one.
    pub fn failure_detail(&self, max_lines: usize) -> Option<String> {
        match self {
            Outcome::Correct { .. } => None,
            Outcome::CompileError { diagnostics, .. } if !diagnostics.log.trim().is_empty() => {
                let lines: Vec<&str> = diagnostics.log.trim_end().lines().collect();
                let mut text = lines[..lines.len().min(max_lines)].join("\n");
                if lines.len() > max_lines {
                    text.push_str(&format!("\n... ({} more lines)", lines.len() - max_lines));
                }
                Some(text)
            }
            other => Some(other.summary()),
        }
    }

    pub fn summary(&self) -> String {
        match self {
            Outcome::NoCode { reason } => format!("no code: {reason}"),
            Outcome::CompileError { message, .. } => format!("compile error: {message}"),
            Outcome::RuntimeError {
                size,
                fault,
                message,
            } => {
                let at = size
                    .as_ref()
                    .map(|s| format!(" at size {s}"))
                    .unwrap_or_default();
                match fault {
                    Some(f) => format!("runtime error{at} ({f}): {message}"),
                    None => format!("runtime error{at}: {message}"),
                }
            }
            Outcome::Timeout { size, limit_s } => {
                let at = size
                    .as_ref()
                    .map(|s| format!(" at size {s}"))
                    .unwrap_or_default();
                format!("timeout{at} after {limit_s:.1} s")
            }
            Outcome::WrongResult {
                size,
                metric,
                value,
                tolerance,
            } => match tolerance {
                Some(t) => {
                    format!("wrong result at size {size}: {metric}={value:.3e} (tolerance {t:.3e})")
                }
                None => format!("wrong result at size {size}: {metric}={value:.3e}"),
            },
            Outcome::Suspicious {
                size,
                reason,
                score,
            } => format!(
                "suspicious at size {size}: {reason} (not scored; it would have scored {score:.4})"
            ),
            Outcome::Correct { score } => format!("correct, score {score:.4}"),
        }
    }
}

/// Device-clock times of the timed runs of one size, in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeStats {
    #[serde(with = "crate::json_f64")]
    pub median_s: f64,
    #[serde(with = "crate::json_f64")]
    pub min_s: f64,
    #[serde(with = "crate::json_f64")]
    pub max_s: f64,
    /// First and third quartiles (linear interpolation between order
    /// statistics); absent in evaluations stored before they were recorded.
    #[serde(default = "nan", with = "crate::json_f64")]
    pub q1_s: f64,
    #[serde(default = "nan", with = "crate::json_f64")]
    pub q3_s: f64,
    /// Robust spread: (q3 - q1) / median. Unlike min-max it ignores the one
    /// run a clock boost or another process spoiled.
    #[serde(default = "nan", with = "crate::json_f64")]
    pub spread: f64,
    pub samples_s: Vec<f64>,
}

fn nan() -> f64 {
    f64::NAN
}

/// The `q`-quantile of sorted `v` by linear interpolation (type 7).
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let h = (v.len() - 1) as f64 * q;
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

impl TimeStats {
    pub fn from_samples(samples: Vec<f64>) -> Self {
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median_s = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            sorted[n / 2]
        } else {
            0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
        };
        let (q1_s, q3_s) = (quantile(&sorted, 0.25), quantile(&sorted, 0.75));
        TimeStats {
            median_s,
            min_s: sorted.first().copied().unwrap_or(f64::NAN),
            max_s: sorted.last().copied().unwrap_or(f64::NAN),
            q1_s,
            q3_s,
            spread: (q3_s - q1_s) / median_s,
            samples_s: samples,
        }
    }
}

/// Result of one size that ran to its check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    pub label: String,
    pub correct: bool,
    pub metric: String,
    #[serde(with = "crate::json_f64")]
    pub error: f64,
    pub tolerance: Option<f64>,
    pub time: TimeStats,
    /// Untimed warm-up runs before the timed ones (drawn at random).
    #[serde(default)]
    pub warmups: u32,
    /// Bytes or FLOPs of one run (the task's work model).
    #[serde(with = "crate::json_f64")]
    pub work: f64,
    /// work / median / 1e9, in `unit`.
    #[serde(with = "crate::json_f64")]
    pub achieved: f64,
    #[serde(with = "crate::json_f64")]
    pub ceiling: f64,
    /// achieved / ceiling, not clamped: cache-resident sizes may exceed 1.
    #[serde(with = "crate::json_f64")]
    pub fraction: f64,
    /// "GB/s" or "GFLOPS".
    pub unit: String,
    pub work_note: String,
    /// Why this size's figure is physically implausible, when it is (see
    /// `kevo_eval::suspicion`): such a candidate is `Outcome::Suspicious`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspicious: Option<String>,
    /// Bytes of every buffer one run touches (0 in evaluations stored
    /// before kevo recorded it).
    #[serde(default)]
    pub working_set_bytes: u64,
    /// Where that working set lives in the measured memory hierarchy and
    /// the fraction of that level's ceiling; None without a measured
    /// hierarchy. The score stays the DRAM/FP32 `fraction`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<crate::placement::LevelFraction>,
}

impl SizeResult {
    /// The ceiling the score divides by: "FP32" for compute-bound tasks,
    /// "DRAM" for bandwidth-bound ones.
    pub fn peak_name(&self) -> &'static str {
        if self.unit == kevo_tasks::CeilingKind::Fp32.unit() {
            "FP32"
        } else {
            "DRAM"
        }
    }

    /// The level fraction where it says more than the score's fraction: a
    /// bandwidth-bound size whose data lives in a cache.
    pub fn cache_level(&self) -> Option<&crate::placement::LevelFraction> {
        self.level
            .as_ref()
            .filter(|l| self.peak_name() == "DRAM" && !l.placement.is_dram())
    }

    /// The size against its ceilings, every fraction with its level's
    /// label and unit: "476% of DRAM 19 GB/s, 52% of L2 170 GB/s
    /// (cache-resident: 768.0 KiB in the 1.0 MiB L2)".
    pub fn roofline_text(&self) -> String {
        let mut text = format!(
            "{:.1}% of {} {} {}",
            self.fraction * 100.0,
            self.peak_name(),
            rate(self.ceiling),
            self.unit
        );
        if let Some(l) = self.cache_level() {
            text.push_str(&format!(
                ", {:.1}% of {} {} {}",
                l.fraction * 100.0,
                l.placement.level,
                rate(l.ceiling),
                self.unit
            ));
        }
        if let Some(l) = &self.level {
            text.push_str(&format!(" ({})", l.placement.describe()));
        }
        text
    }
}

/// A rate with three significant figures at most: 19.3, 170, 3350.
fn rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Where the wall time of one evaluation went, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WallTimes {
    #[serde(with = "crate::json_f64")]
    pub compile_s: f64,
    /// Generating inputs (cached across candidates).
    #[serde(with = "crate::json_f64")]
    pub inputs_s: f64,
    /// CPU references (cached per task, size and input seed).
    #[serde(with = "crate::json_f64")]
    pub reference_s: f64,
    /// Allocation, resets, timed and verification runs, downloads.
    #[serde(with = "crate::json_f64")]
    pub device_s: f64,
    /// Comparing outputs with the reference.
    #[serde(with = "crate::json_f64")]
    pub check_s: f64,
    #[serde(with = "crate::json_f64")]
    pub total_s: f64,
}

impl WallTimes {
    /// Whatever the named phases do not account for.
    pub fn other_s(&self) -> f64 {
        (self.total_s
            - self.compile_s
            - self.inputs_s
            - self.reference_s
            - self.device_s
            - self.check_s)
            .max(0.0)
    }
}

/// What one compiled entry point takes of the device, as its runtime
/// reports it (registers, spills, shared memory, block limit): what a
/// profiler, an analyst or a prompt needs to explain a kernel's speed.
/// Fields the runtime does not report are `None` (OpenCL has no register
/// count).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    /// The entry point's name, as the task names it.
    pub name: String,
    #[serde(flatten)]
    pub info: kevo_backend::KernelInfo,
    /// Achievable occupancy at the block its first launch used (CUDA's
    /// occupancy calculator; None elsewhere, and in evaluations stored
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occupancy: Option<kevo_backend::Occupancy>,
}

impl KernelResources {
    /// The compiler facts the runtime reported, as one line: "demo_step:
    /// 32 registers, no spills, 4096 B static shared, occupancy 75% (6
    /// blocks of 256 threads per SM), runs as sm_90"; None when it
    /// reported none. What the proposer, the analyst and `kevo eval` show.
    pub fn facts_line(&self) -> Option<String> {
        let info = &self.info;
        let mut parts = Vec::new();
        if let Some(r) = info.registers_per_thread {
            parts.push(format!("{r} registers"));
        }
        // CUDA's local memory is register spills; OpenCL's private memory
        // is the kernel's own arrays.
        let cuda = info.registers_per_thread.is_some();
        match info.local_bytes_per_thread {
            Some(0) if cuda => parts.push("no spills".into()),
            Some(b) if b > 0 && cuda => {
                parts.push(format!("{b} B local memory per thread (spills)"))
            }
            Some(b) if b > 0 => parts.push(format!("{b} B private memory per work-item")),
            _ => {}
        }
        match info.static_shared_bytes.filter(|b| *b > 0) {
            Some(b) if cuda => parts.push(format!("{b} B static shared")),
            Some(b) => parts.push(format!("{b} B __local memory")),
            None => {}
        }
        if !cuda && let Some(m) = info.preferred_multiple.filter(|m| *m > 1) {
            parts.push(format!("work-group size best a multiple of {m}"));
        }
        if let Some(o) = self.occupancy {
            parts.push(format!(
                "occupancy {:.0}% ({} blocks of {} threads per SM)",
                o.fraction() * 100.0,
                o.active_blocks_per_sm,
                o.block_threads
            ));
        }
        match (info.sass_arch, info.ptx_arch) {
            (Some(sass), Some(ptx)) if ptx != sass => {
                parts.push(format!("runs as sm_{sass} (from compute_{ptx} PTX)"))
            }
            (Some(sass), _) => parts.push(format!("runs as sm_{sass}")),
            _ => {}
        }
        (!parts.is_empty()).then(|| format!("{}: {}", self.name, parts.join(", ")))
    }
}

/// Everything known about one evaluation of one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub task: String,
    pub device: String,
    pub backend: BackendName,
    pub outcome: Outcome,
    /// The sizes that ran, in order, up to and including a failing one.
    pub sizes: Vec<SizeResult>,
    pub wall: WallTimes,
    /// The candidate's entry points, in the task's order, once compiled
    /// (empty when it did not compile; absent in evaluations stored
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<KernelResources>,
    /// The SHA-256 of the source evaluated, as its [`crate::Candidate`]
    /// named it: the caller checks the answer is for the kernel it sent
    /// (absent in evaluations stored before it was recorded, and in those
    /// made in process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_sha: Option<String>,
}

impl Evaluation {
    /// An evaluation that ran no size (no code, a rejected source, a
    /// failed start, a crash): its outcome and the time it took.
    pub fn without_sizes(
        task: &str,
        device: &str,
        backend: BackendName,
        outcome: Outcome,
        wall: WallTimes,
    ) -> Self {
        Evaluation {
            task: task.to_string(),
            device: device.to_string(),
            backend,
            outcome,
            sizes: Vec::new(),
            wall,
            kernels: Vec::new(),
            source_sha: None,
        }
    }

    /// Sizes flagged as implausibly fast, with the reason.
    pub fn suspicious(&self) -> impl Iterator<Item = (&str, &str)> {
        self.sizes
            .iter()
            .filter_map(|s| s.suspicious.as_deref().map(|why| (s.label.as_str(), why)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiler_facts_read_as_one_line_per_entry_point() {
        let k = KernelResources {
            name: "demo_step".into(),
            info: kevo_backend::KernelInfo {
                max_threads_per_block: 1024,
                registers_per_thread: Some(32),
                static_shared_bytes: Some(4096),
                local_bytes_per_thread: Some(0),
                ..Default::default()
            },
            occupancy: Some(kevo_backend::Occupancy {
                block_threads: 256,
                active_blocks_per_sm: 6,
                max_threads_per_sm: 2048,
            }),
        };
        assert_eq!(
            k.facts_line().unwrap(),
            "demo_step: 32 registers, no spills, 4096 B static shared, occupancy 75% (6 blocks of 256 threads per SM)"
        );
        // The architecture, and the PTX's when the driver compiled it
        // for a newer device.
        let mut arch = k.clone();
        arch.info.ptx_arch = Some(90);
        arch.info.sass_arch = Some(90);
        assert!(arch.facts_line().unwrap().ends_with(", runs as sm_90"));
        arch.info.ptx_arch = Some(80);
        assert!(
            arch.facts_line()
                .unwrap()
                .ends_with(", runs as sm_90 (from compute_80 PTX)")
        );
        let opencl = KernelResources {
            name: "k".into(),
            info: kevo_backend::KernelInfo::default(),
            occupancy: None,
        };
        assert_eq!(opencl.facts_line(), None, "nothing reported, no line");
        // OpenCL's kernel work-group info in its own words.
        let opencl = KernelResources {
            info: kevo_backend::KernelInfo {
                preferred_multiple: Some(8),
                static_shared_bytes: Some(4096),
                local_bytes_per_thread: Some(64),
                ..Default::default()
            },
            ..opencl
        };
        assert_eq!(
            opencl.facts_line().unwrap(),
            "k: 64 B private memory per work-item, 4096 B __local memory, work-group size best a multiple of 8"
        );
    }

    #[test]
    fn evaluations_stored_before_kernel_resources_still_load() {
        let old = r#"{"task":"saxpy","device":"d","backend":"opencl",
            "outcome":{"status":"correct","score":0.5},"sizes":[],
            "wall":{"compile_s":0,"inputs_s":0,"reference_s":0,"device_s":0,"check_s":0,"total_s":1}}"#;
        let e: Evaluation = serde_json::from_str(old).unwrap();
        assert!(e.kernels.is_empty());
        assert_eq!(e.backend, BackendName::Opencl);
        let unknown = old.replace(r#""backend":"opencl""#, r#""backend":"fake""#);
        let err = serde_json::from_str::<Evaluation>(&unknown).unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown backend `fake` (known backends: opencl, cuda, triton)"),
            "{err}"
        );
        let with = Evaluation {
            kernels: vec![KernelResources {
                name: "saxpy".into(),
                info: kevo_backend::KernelInfo {
                    max_threads_per_block: 1024,
                    registers_per_thread: Some(32),
                    static_shared_bytes: Some(4096),
                    local_bytes_per_thread: Some(8),
                    ..Default::default()
                },
                occupancy: Some(kevo_backend::Occupancy {
                    block_threads: 256,
                    active_blocks_per_sm: 6,
                    max_threads_per_sm: 2048,
                }),
            }],
            ..e
        };
        let json = serde_json::to_string(&with).unwrap();
        assert_eq!(serde_json::from_str::<Evaluation>(&json).unwrap(), with);
        assert_eq!(with.kernels[0].occupancy.unwrap().fraction(), 0.75);
    }
}
