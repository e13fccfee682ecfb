//! Nsight Compute profiles of a candidate (CUDA, opt-in): the candidate is
//! evaluated once more at one size in a worker run under `ncu`, which
//! collects a fixed set of metrics for the first launches of the task's
//! kernels; the raw report is kept, and a compact summary (what the model
//! reads) is drawn from it: throughput as a share of peak for DRAM, L2 and
//! the SMs, achieved against theoretical occupancy, cache hit rates,
//! shared-memory bank conflicts, the top warp-stall reasons, and whether
//! the kernel is memory-, compute- or latency-bound. Profiling time is the
//! profile's own, never part of a score.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::{Worker, WorkerCommand, WorkerConfig};

/// The metrics `ncu --metrics` collects (about 30 replay passes per
/// kernel on an H100): the sections kevo summarises, no more.
pub const METRICS: &[&str] = &[
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio",
];

const STALL_PREFIX: &str = "smsp__average_warps_issue_stalled_";
const STALL_SUFFIX: &str = "_per_issue_active.ratio";

/// At or above this share of peak (%) a unit is the limit; below it on
/// every unit, the kernel waits on latency (Nsight Compute's own guidance
/// calls under 60% of peak a latency problem).
pub const BOUND_PCT: f64 = 60.0;

/// One kernel's metrics, over the launches profiled (percentages weighted
/// by each launch's duration, counts summed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    pub name: String,
    pub launches: u32,
    /// Summed over the profiled launches, as measured under the profiler.
    pub duration_us: f64,
    pub dram_pct: f64,
    pub l2_pct: f64,
    pub sm_pct: f64,
    /// The busiest memory unit (DRAM, L2, L1, shared) as a share of peak.
    pub memory_pct: f64,
    pub achieved_occupancy_pct: f64,
    pub theoretical_occupancy_pct: f64,
    pub l1_hit_pct: f64,
    pub l2_hit_pct: f64,
    pub shared_bank_conflicts: f64,
    /// Warp-stall reasons by average warps stalled per issued instruction,
    /// largest first (all of them; the summary shows three).
    pub stalls: Vec<(String, f64)>,
}

/// What limits a kernel, by its busiest unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    Memory,
    Compute,
    Latency,
}

impl Bound {
    pub fn of(memory_pct: f64, sm_pct: f64) -> Bound {
        if memory_pct.max(sm_pct) < BOUND_PCT {
            Bound::Latency
        } else if memory_pct >= sm_pct {
            Bound::Memory
        } else {
            Bound::Compute
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Bound::Memory => "memory-bound",
            Bound::Compute => "compute-bound",
            Bound::Latency => "latency-bound (no unit near its peak)",
        }
    }
}

/// A candidate's profile at one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub size: String,
    pub kernels: Vec<KernelProfile>,
    /// Of the kernel that took the most time.
    pub bound: Bound,
    /// The `.ncu-rep` file, for `ncu-ui`.
    pub report: Option<PathBuf>,
    /// Wall time of the profiled evaluation (not part of any score).
    pub profiling_s: f64,
}

impl Profile {
    /// A few lines the model reads: per kernel, where it stands against
    /// each unit's peak, occupancy, caches, conflicts and top stalls.
    pub fn summary(&self) -> String {
        let mut lines = vec![format!(
            "Nsight Compute profile at size {}: {}.",
            self.size,
            self.bound.describe()
        )];
        for k in &self.kernels {
            let stalls: Vec<String> = k
                .stalls
                .iter()
                .filter(|(_, v)| *v > 0.0)
                .take(3)
                .map(|(r, v)| format!("{r} {v:.1}"))
                .collect();
            lines.push(format!(
                "{} ({} launch{}, {:.1} us): DRAM {:.0}% of peak, L2 {:.0}%, busiest memory unit \
                 {:.0}%, SM {:.0}%; occupancy {:.0}% achieved of {:.0}% theoretical; hit rate L1 \
                 {:.0}%, L2 {:.0}%; {}; top stalls (warps per issued instruction): {}.",
                k.name,
                k.launches,
                if k.launches == 1 { "" } else { "es" },
                k.duration_us,
                k.dram_pct,
                k.l2_pct,
                k.memory_pct,
                k.sm_pct,
                k.achieved_occupancy_pct,
                k.theoretical_occupancy_pct,
                k.l1_hit_pct,
                k.l2_hit_pct,
                if k.shared_bank_conflicts > 0.0 {
                    format!(
                        "{:.0} shared-memory bank conflicts",
                        k.shared_bank_conflicts
                    )
                } else {
                    "no shared-memory bank conflicts".into()
                },
                if stalls.is_empty() {
                    "none".into()
                } else {
                    stalls.join(", ")
                }
            ));
        }
        lines.join("\n")
    }
}

/// `ncu --import REPORT --csv --page raw`: a header row of metric names, a
/// row of units, then one row per profiled launch. Numbers may carry
/// thousands separators.
pub fn parse_raw_csv(text: &str) -> Result<Vec<KernelProfile>, String> {
    let rows = csv_rows(text);
    let header = rows
        .iter()
        .position(|r| r.first().is_some_and(|c| c == "ID"))
        .ok_or("no header row (\"ID\", ...) in the report")?;
    let names = &rows[header];
    let column = |name: &str| names.iter().position(|n| n == name);
    let kernel_col = column("Kernel Name").ok_or("no \"Kernel Name\" column")?;
    let launches: Vec<&Vec<String>> = rows[header + 1..]
        .iter()
        .filter(|r| r.len() == names.len() && r.first().is_some_and(|id| id.parse::<u64>().is_ok()))
        .collect();
    if launches.is_empty() {
        return Err("the report holds no profiled launch".into());
    }
    let number = |row: &Vec<String>, name: &str| -> Option<f64> {
        column(name).and_then(|c| row[c].replace(',', "").parse::<f64>().ok())
    };
    // Durations come in the unit the row after the header names, which ncu
    // picks by magnitude (us for microseconds, ms for a slow kernel).
    let duration_unit = column("gpu__time_duration.sum")
        .and_then(|c| rows.get(header + 1).and_then(|units| units.get(c)))
        .map(String::as_str)
        .unwrap_or("us");
    let to_us = microseconds_per(duration_unit)
        .ok_or_else(|| format!("unknown unit `{duration_unit}` for gpu__time_duration.sum"))?;
    let mut by_kernel: BTreeMap<String, Vec<&Vec<String>>> = BTreeMap::new();
    for row in &launches {
        by_kernel
            .entry(row[kernel_col].clone())
            .or_default()
            .push(row);
    }
    let stall_columns: Vec<(String, &String)> = names
        .iter()
        .filter_map(|n| {
            let reason = n.strip_prefix(STALL_PREFIX)?.strip_suffix(STALL_SUFFIX)?;
            // "selected" is a warp issuing, not a stall.
            (reason != "selected").then(|| (reason.to_string(), n))
        })
        .collect();
    let mut kernels = Vec::new();
    for (name, rows) in by_kernel {
        let durations: Vec<f64> = rows
            .iter()
            .map(|r| number(r, "gpu__time_duration.sum").unwrap_or(0.0) * to_us)
            .collect();
        let total: f64 = durations.iter().sum();
        let weighted = |metric: &str| -> f64 {
            let (mut sum, mut weight) = (0.0, 0.0);
            for (r, d) in rows.iter().zip(&durations) {
                if let Some(v) = number(r, metric) {
                    let w = if total > 0.0 { *d } else { 1.0 };
                    sum += v * w;
                    weight += w;
                }
            }
            if weight > 0.0 { sum / weight } else { f64::NAN }
        };
        let summed = |metric: &str| -> f64 { rows.iter().filter_map(|r| number(r, metric)).sum() };
        let mut stalls: Vec<(String, f64)> = stall_columns
            .iter()
            .map(|(reason, metric)| (reason.clone(), weighted(metric)))
            .filter(|(_, v)| v.is_finite())
            .collect();
        stalls.sort_by(|a, b| b.1.total_cmp(&a.1));
        kernels.push(KernelProfile {
            name,
            launches: rows.len() as u32,
            duration_us: total,
            dram_pct: weighted("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
            l2_pct: weighted("lts__throughput.avg.pct_of_peak_sustained_elapsed"),
            sm_pct: weighted("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            memory_pct: weighted(
                "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
            ),
            achieved_occupancy_pct: weighted("sm__warps_active.avg.pct_of_peak_sustained_active"),
            theoretical_occupancy_pct: weighted("sm__maximum_warps_per_active_cycle_pct"),
            l1_hit_pct: weighted("l1tex__t_sector_hit_rate.pct"),
            l2_hit_pct: weighted("lts__t_sector_hit_rate.pct"),
            shared_bank_conflicts: summed(
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            ) + summed(
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
            ),
            stalls,
        });
    }
    // The kernel that took the most time first.
    kernels.sort_by(|a, b| b.duration_us.total_cmp(&a.duration_us));
    Ok(kernels)
}

/// Microseconds in one `unit` of time as ncu spells it.
fn microseconds_per(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" | "nsecond" => 1e-3,
        "us" | "usecond" => 1.0,
        "ms" | "msecond" => 1e3,
        "s" | "second" => 1e6,
        _ => return None,
    })
}

/// Rows of a CSV text with quoted fields ("a","b,c"), as ncu writes it.
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for line in text.lines() {
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '"' if quoted && chars.peek() == Some(&'"') => {
                    field.push('"');
                    chars.next();
                }
                '"' => quoted = !quoted,
                ',' if !quoted => fields.push(std::mem::take(&mut field)),
                c => field.push(c),
            }
        }
        fields.push(field);
        rows.push(fields);
    }
    rows
}

/// The ncu executable: on PATH, or under CUDA_HOME or /usr/local/cuda.
pub fn find_ncu() -> Option<PathBuf> {
    crate::sanitizer::find_cuda_tool("ncu")
}

/// What to profile: a task's kernel at one size.
pub struct ProfileRequest<'a> {
    pub task: &'a kevo_tasks::Task,
    pub source: &'a str,
    pub size: &'a kevo_tasks::Size,
    /// The task's entry points (only their launches are profiled).
    pub kernels: &'a [String],
    /// Launches to profile: one run's worth, capped (heat2d's 100 steps
    /// need not all be replayed ~30 times).
    pub launches: usize,
    pub timeout: Duration,
    /// Where the report goes (`NAME.ncu-rep`).
    pub report: &'a Path,
}

/// Why there is no profile.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("ncu was not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin")]
    NoProfiler,
    #[error("the profiled worker did not start: {0}")]
    Worker(#[from] crate::WorkerError),
    #[error("ncu wrote no usable report ({0})")]
    Report(String),
}

/// Evaluate the candidate once more under ncu at one size and summarise
/// the report. The worker runs without its user and network namespace,
/// which ncu's connection to the profiled process needs (on the H100 a
/// fully confined worker hangs under ncu; leaving out only the namespace
/// layer profiles, leaving out any other layer alone does not), and
/// without the syscall filter: a connection that crosses the namespace
/// while Landlock refuses TCP is a Unix socket, which the filter refuses.
/// Landlock's file, TCP and scope rules and no-new-privileges stay. The
/// candidate ran fully confined when it was scored.
pub fn profile(
    worker: &WorkerCommand,
    mut config: WorkerConfig,
    req: &ProfileRequest<'_>,
) -> Result<Profile, ProfileError> {
    let ncu = find_ncu().ok_or(ProfileError::NoProfiler)?;
    let started = Instant::now();
    let _ = std::fs::remove_file(req.report);
    let names: Vec<String> = req.kernels.iter().map(|k| regex_escape(k)).collect();
    let mut args = vec![
        "--target-processes".to_string(),
        "all".into(),
        "--kernel-name".into(),
        format!("regex:^({})$", names.join("|")),
        "--launch-count".into(),
        req.launches.max(1).to_string(),
        "--metrics".into(),
        METRICS.join(","),
        "--export".into(),
        req.report.display().to_string(),
        "--force-overwrite".into(),
        worker.program.display().to_string(),
    ];
    args.extend(worker.args.iter().cloned());
    for layer in [
        kevo_sandbox::Layer::Namespaces,
        kevo_sandbox::Layer::Syscalls,
    ] {
        if !config.sandbox.skip.contains(&layer) {
            config.sandbox.skip.push(layer);
        }
    }
    let command = WorkerCommand {
        program: ncu.clone(),
        args,
        env: worker.env.clone(),
    };
    let mut w = Worker::start(command, config)?;
    let evaluation = w.evaluate(
        req.task,
        req.source,
        std::slice::from_ref(req.size),
        req.timeout,
    );
    w.shutdown(Duration::from_secs(60));
    let out = std::process::Command::new(&ncu)
        .args(["--import"])
        .arg(req.report)
        // Counts in plain numbers, not scaled to K or M.
        .args(["--csv", "--page", "raw", "--print-units", "base"])
        .output()
        .map_err(|e| ProfileError::Report(format!("cannot run ncu --import: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let kernels = parse_raw_csv(&text).map_err(|m| {
        ProfileError::Report(format!(
            "{m}; the profiled evaluation: {}",
            evaluation.outcome.summary()
        ))
    })?;
    let bound = kernels
        .first()
        .map_or(Bound::Latency, |k| Bound::of(k.memory_pct, k.sm_pct));
    Ok(Profile {
        size: req.size.label.clone(),
        kernels,
        bound,
        report: Some(req.report.to_path_buf()),
        profiling_s: started.elapsed().as_secs_f64(),
    })
}

/// At most this many launches are profiled (each is replayed about 30
/// times): one run of a stepped task is often 50-200 launches of the same
/// kernel.
pub const MAX_PROFILED_LAUNCHES: usize = 20;

/// Profile `source` for `task` at `size`: one run's launches (at most
/// [`MAX_PROFILED_LAUNCHES`]), the report written to `dir` as
/// `NAME.ncu-rep`. The caller decides what a failure means (kevo goes on
/// without a profile).
pub fn profile_task(
    worker: &WorkerCommand,
    config: WorkerConfig,
    task: &kevo_tasks::Task,
    source: &str,
    size: &kevo_tasks::Size,
    report: &Path,
) -> Result<Profile, ProfileError> {
    let launches = task.problem(size, task.default_seed()).launches.len();
    // Under the profiler kernels run 10-100x longer, and every launch is
    // replayed: the candidate's own limit does not apply.
    profile(
        worker,
        config,
        &ProfileRequest {
            task,
            source,
            size,
            kernels: task.kernel_names(),
            launches: launches.clamp(1, MAX_PROFILED_LAUNCHES),
            timeout: Duration::from_secs(600),
            report,
        },
    )
}

fn regex_escape(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                vec![c]
            } else {
                vec!['\\', c]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/profiles")
                .join(name),
        )
        .unwrap()
    }

    /// A slow kernel's duration comes in milliseconds (ncu scales the
    /// unit), a base-unit report's in nanoseconds: both read as us.
    #[test]
    fn durations_are_read_in_the_unit_the_report_names() {
        let text = fixture("saxpy-smoke-64K.csv");
        let with_unit = |unit: &str, value: &str| {
            let mut rows: Vec<String> = text.lines().map(String::from).collect();
            let header = rows.iter().position(|r| r.starts_with("\"ID\"")).unwrap();
            let names = csv_rows(&rows[header])[0].clone();
            let c = names
                .iter()
                .position(|n| n == "gpu__time_duration.sum")
                .unwrap();
            for (i, new) in [(header + 1, unit), (header + 2, value)] {
                let mut cells = csv_rows(&rows[i])[0].clone();
                cells[c] = new.to_string();
                rows[i] = cells
                    .iter()
                    .map(|v| format!("\"{v}\""))
                    .collect::<Vec<_>>()
                    .join(",");
            }
            parse_raw_csv(&rows.join("\n")).map(|k| k[0].duration_us)
        };
        assert!((with_unit("ms", "1.52").unwrap() - 1520.0).abs() < 1e-9);
        assert!((with_unit("nsecond", "3,072").unwrap() - 3.072).abs() < 1e-9);
        assert!((with_unit("us", "3.072").unwrap() - 3.072).abs() < 1e-9);
        let err = with_unit("fortnight", "1").unwrap_err();
        assert!(err.contains("fortnight"), "{err}");
    }

    #[test]
    fn a_recorded_saxpy_report_summarises() {
        let kernels = parse_raw_csv(&fixture("saxpy-smoke-64K.csv")).unwrap();
        assert_eq!(kernels.len(), 1);
        let k = &kernels[0];
        assert_eq!((k.name.as_str(), k.launches), ("saxpy", 1));
        assert!((k.duration_us - 3.072).abs() < 1e-9, "{}", k.duration_us);
        assert!((k.dram_pct - 5.184831).abs() < 1e-6);
        assert!((k.l2_pct - 18.864515).abs() < 1e-6);
        assert!((k.achieved_occupancy_pct - 21.662460).abs() < 1e-6);
        assert!((k.theoretical_occupancy_pct - 100.0).abs() < 1e-9);
        assert_eq!(k.shared_bank_conflicts, 0.0);
        // "selected" is not a stall.
        assert_eq!(k.stalls[0].0, "long_scoreboard");
        assert!(k.stalls.iter().all(|(r, _)| r != "selected"));
        assert_eq!(Bound::of(k.memory_pct, k.sm_pct), Bound::Latency);
        let p = Profile {
            size: "64K".into(),
            kernels,
            bound: Bound::Latency,
            report: None,
            profiling_s: 1.0,
        };
        let s = p.summary();
        assert!(s.contains("latency-bound"), "{s}");
        assert!(
            s.contains("top stalls (warps per issued instruction): long_scoreboard 31.9, no_instruction 9.5, short_scoreboard 8.3"),
            "{s}"
        );
    }

    #[test]
    fn bounds_follow_the_busiest_unit() {
        assert_eq!(Bound::of(91.0, 12.0), Bound::Memory);
        assert_eq!(Bound::of(30.0, 75.0), Bound::Compute);
        assert_eq!(Bound::of(40.0, 59.9), Bound::Latency);
    }

    #[test]
    fn reports_without_launches_or_header_are_errors() {
        assert!(parse_raw_csv("").unwrap_err().contains("no header"));
        let header_only = "\"ID\",\"Kernel Name\"\n\"\",\"\"\n";
        assert!(
            parse_raw_csv(header_only)
                .unwrap_err()
                .contains("no profiled launch")
        );
        assert_eq!(
            csv_rows("\"a\",\"b,c\",\"d\"\"e\"")[0],
            vec!["a", "b,c", "d\"e"]
        );
        assert_eq!(regex_escape("heat_step"), "heat_step");
        assert_eq!(regex_escape("a.b"), "a\\.b");
    }
}

#[cfg(test)]
mod recorded {
    use super::*;

    /// The summaries of the seeds profiled on an H100 at their full
    /// held-out sizes (the fixtures' ncu 2025.3.1 raw pages).
    #[test]
    fn recorded_seed_profiles_classify_by_their_bottleneck() {
        for (task, bound) in [
            ("saxpy", Bound::Memory),
            ("nbody", Bound::Latency),
            ("ising", Bound::Compute),
            ("heat2d", Bound::Latency),
        ] {
            let text = std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join(format!("tests/profiles/{task}-full-held.csv")),
            )
            .unwrap();
            let kernels = parse_raw_csv(&text).unwrap();
            let k = &kernels[0];
            let p = Profile {
                size: "held out".into(),
                bound: Bound::of(k.memory_pct, k.sm_pct),
                kernels: kernels.clone(),
                report: None,
                profiling_s: 0.0,
            };
            println!("{task}: {}", p.summary());
            assert_eq!(p.bound, bound, "{task}: {}", p.summary());
        }
    }
}

#[cfg(test)]
mod without_ncu {
    use super::*;

    /// Where ncu is not installed (CI), profiling is an error that says
    /// so, and no worker is started.
    #[test]
    fn a_missing_profiler_is_a_clear_error() {
        if find_ncu().is_some() {
            return;
        }
        let size = kevo_tasks::Size::new("64K", &[65536]);
        let report = std::env::temp_dir().join("kevo-no-ncu.ncu-rep");
        let e = profile(
            &WorkerCommand {
                program: "/nonexistent/kevo-worker".into(),
                args: vec![],
                env: vec![],
            },
            WorkerConfig::new(
                kevo_runtimes::BackendKind::Cuda,
                kevo_backend::DeviceSelector::default(),
            ),
            &ProfileRequest {
                task: kevo_tasks::by_name("saxpy").unwrap(),
                source: "",
                size: &size,
                kernels: &["saxpy".to_string()],
                launches: 1,
                timeout: Duration::from_secs(1),
                report: &report,
            },
        )
        .unwrap_err();
        assert!(matches!(e, ProfileError::NoProfiler), "{e}");
        assert!(e.to_string().contains("ncu was not found"), "{e}");
    }
}
