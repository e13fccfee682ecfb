//! The device section of a prompt: the ceilings with how they were found,
//! the runtime's limits, the facts a kernel's shape depends on (a CPU's
//! vector width and usable cores, a GPU's warp and register file) and the
//! measured memory levels with what their figures cover.
//!
//! Every figure comes from a device query or a cached measurement, never
//! from the time of day: prompts of runs that share a ceiling cache stay
//! byte-identical (keyed replay depends on it).

use kevo_backend::{DeviceInfo, Dialect};
use kevo_roofline::{CeilingSource, Ceilings, Hierarchy, human_bytes};
use kevo_tasks::CeilingKind;
use serde::Serialize;

use super::{DeviceBrief, dialect_ctx, fmt_rate};

#[derive(Serialize)]
pub(super) struct DeviceCtx {
    name: String,
    bandwidth: String,
    fp32: String,
    /// Where the ceilings come from and, when measured, how.
    source: String,
    scored: String,
    details: Option<String>,
    /// "CPU", "integrated GPU", "discrete GPU"; None when unknown.
    kind: Option<String>,
    /// "an empty kernel takes 4.1 us as a run of its own and 2.3 us per
    /// launch back to back (median of 15 runs)".
    launch_overhead: Option<String>,
    /// A CPU's vector set, clock and usable cores; a GPU's multiprocessor,
    /// clock, architecture and cache.
    cores: Option<String>,
    /// The measured cache levels and what their figures cover.
    levels: Option<String>,
}

/// The device section's values for `brief`, scored on `kind`'s ceiling.
pub(super) fn device_ctx(brief: &DeviceBrief, dialect: Dialect, kind: CeilingKind) -> DeviceCtx {
    let c = &brief.ceilings;
    let info = brief.info.as_ref();
    DeviceCtx {
        name: brief.name.clone(),
        bandwidth: fmt_rate(c.bandwidth_gbs),
        fp32: fmt_rate(c.fp32_gflops),
        source: source(c, info),
        scored: fmt_rate(c.for_kind(kind)),
        details: info.and_then(|i| limits(i, dialect)),
        kind: info.map(|i| i.kind().to_string()),
        launch_overhead: c.launch_overhead.as_ref().map(|l| {
            format!(
                "an empty kernel takes {} us as a run of its own and {} us per launch back to back (medians of 15 runs)",
                fmt_rate(l.alone_us.median),
                fmt_rate(l.back_to_back_us.median)
            )
        }),
        cores: info.and_then(|i| {
            if i.is_cpu {
                cpu_facts(i)
            } else {
                gpu_facts(i, dialect)
            }
        }),
        levels: c.hierarchy.as_ref().and_then(|h| levels(h, info, dialect)),
    }
}

/// Where the ceilings come from; a measurement says which kernels set
/// them. "Measured now" and "measured (cached)" are never said: they
/// would make otherwise equal prompts differ between runs.
fn source(c: &Ceilings, info: Option<&DeviceInfo>) -> String {
    match (&c.source, info) {
        (CeilingSource::Datasheet { entry }, _) => format!("datasheet figures for {entry}"),
        (CeilingSource::Measured { .. }, Some(i)) => {
            format!("measured on this device; {}", kevo_roofline::method(i))
        }
        (CeilingSource::Measured { .. }, None) => "measured on this device".to_string(),
        (CeilingSource::Declared, _) => "declared for this device, not measured".to_string(),
    }
}

/// What a multiprocessor or compute unit is called in `dialect`.
fn unit_name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Cuda | Dialect::Triton => "SM",
        _ => "compute unit",
    }
}

/// "2 compute units, 512 KB of __local memory per work-group, at most 4096
/// threads per work-group."
fn limits(i: &DeviceInfo, dialect: Dialect) -> Option<String> {
    let d = dialect_ctx(dialect);
    let mut parts = Vec::new();
    if i.compute_units > 0 {
        parts.push(format!("{} {}s", i.compute_units, unit_name(dialect)));
    }
    if i.local_mem_bytes > 0 {
        parts.push(format!(
            "{} KB of {} per {}",
            i.local_mem_bytes / 1024,
            d.shared.replace('`', ""),
            d.group
        ));
    }
    if i.max_work_group_size > 0 {
        parts.push(format!(
            "at most {} threads per {}",
            i.max_work_group_size, d.group
        ));
    }
    (!parts.is_empty()).then(|| format!("{}.", parts.join(", ")))
}

/// "Cores: AVX-512, 16 fp32 lanes per vector register, 2445 MHz; this
/// process may run on 2 cores, as many as the runtime's 2 compute units."
/// The width is the host's instruction set; the core count is what the
/// process's affinity and quota allow, which a runtime that counts the
/// machine's cores overstates.
fn cpu_facts(i: &DeviceInfo) -> Option<String> {
    let d = &i.details;
    let mut parts = Vec::new();
    if let Some(simd) = d.simd {
        parts.push(format!(
            "{simd}, {} fp32 lanes per vector register",
            simd.fp32_lanes()
        ));
    }
    if i.clock_mhz > 0 {
        parts.push(format!("{} MHz", i.clock_mhz));
    }
    let usable = d.cores_available.map(|n| usable_cores(n, i.compute_units));
    let head = (!parts.is_empty()).then(|| parts.join(", "));
    let line = match (head, usable) {
        (Some(h), Some(u)) => format!("{h}; {u}"),
        (Some(h), None) => h,
        (None, Some(u)) => u,
        (None, None) => return None,
    };
    Some(format!("Cores: {line}."))
}

/// The cores the process may use against the compute units the runtime
/// reports: a runtime that counts the machine's cores runs its extra
/// work-groups on the same few.
fn usable_cores(n: u32, cus: u32) -> String {
    use std::cmp::Ordering;
    let head = format!("this process may run on {n} cores");
    match n.cmp(&cus) {
        _ if cus == 0 => head,
        Ordering::Equal => format!("{head}, as many as the runtime's {cus} compute units"),
        Ordering::Less => format!(
            "{head}, fewer than the runtime's {cus} compute units, so at most {n} of them run at once"
        ),
        Ordering::Greater => {
            format!("{head}, more than the runtime's {cus} compute units, which it uses")
        }
    }
}

/// "Each SM: 65536 registers, at most 2048 resident threads, warps of 32
/// threads; 1980 MHz, sm_90, 50.0 MiB L2." Only what the device query
/// gave and can be trusted: OpenCL's version string is no architecture,
/// and its global memory cache size is no L2 (NVIDIA's driver reports
/// 4.1 MiB on an H200 whose sweep finds 64 MiB), so both are left out.
fn gpu_facts(i: &DeviceInfo, dialect: Dialect) -> Option<String> {
    let d = &i.details;
    let cuda = i.dialect.native() == Dialect::Cuda;
    let mut sm = Vec::new();
    if let Some(r) = d.registers_per_sm {
        sm.push(format!("{r} registers"));
    }
    if let Some(t) = d.max_threads_per_sm {
        sm.push(format!("at most {t} resident threads"));
    }
    if let Some(w) = d.warp_size {
        sm.push(format!("warps of {w} threads"));
    }
    let mut chip = Vec::new();
    if i.clock_mhz > 0 {
        chip.push(format!("{} MHz", i.clock_mhz));
    }
    if cuda && !i.arch.is_empty() {
        chip.push(i.arch.clone());
    }
    if cuda && i.cache_bytes > 0 {
        chip.push(format!("{} L2", human_bytes(i.cache_bytes)));
    }
    let sm = (!sm.is_empty()).then(|| format!("Each {}: {}", unit_name(dialect), sm.join(", ")));
    let chip = (!chip.is_empty()).then(|| chip.join(", "));
    match (sm, chip) {
        (Some(s), Some(c)) => Some(format!("{s}; {c}.")),
        (Some(s), None) => Some(format!("{s}.")),
        (None, Some(c)) => Some(format!("Clock: {c}.")),
        (None, None) => None,
    }
}

/// The measured cache levels: "Memory levels, from a copy sweep over
/// growing working sets on all 2 compute units; each working set and
/// bandwidth is for all of them together, ...: L1 up to 64.0 KiB at 180
/// GB/s, ...". The sweep spreads one working set over every compute unit,
/// so a per-core cache's capacity and bandwidth are the sum over the
/// cores, not one core's; a level whose runs spread widely (a cache shared
/// with other tenants, a slope between two levels) shows the spread
/// rather than a single figure.
fn levels(h: &Hierarchy, info: Option<&DeviceInfo>, dialect: Dialect) -> Option<String> {
    let caches = h.caches();
    if caches.is_empty() {
        return None;
    }
    let each: Vec<String> = caches
        .iter()
        .filter_map(|l| {
            let cap = human_bytes(l.capacity_bytes?);
            let mut s = format!("{} up to {cap} at {} GB/s", l.name, fmt_rate(l.gbs.median));
            if l.gbs.max > l.gbs.min * kevo_roofline::hierarchy::CLIFF_FACTOR {
                s.push_str(&format!(
                    " (runs from {} to {} GB/s)",
                    fmt_rate(l.gbs.min),
                    fmt_rate(l.gbs.max)
                ));
            }
            Some(s)
        })
        .collect();
    Some(format!(
        "Memory levels, from a copy sweep over growing working sets on {}; each working set and bandwidth is for all of them together, the best of every measurement: {}; then DRAM.",
        swept_units(info, dialect),
        each.join(", ")
    ))
}

/// What the sweep ran on: every compute unit, which on a CPU whose
/// process may use fewer cores than the runtime counts share those cores.
fn swept_units(info: Option<&DeviceInfo>, dialect: Dialect) -> String {
    let Some(i) = info else {
        return format!("every {}", unit_name(dialect));
    };
    let all = format!("all {} {}s", i.compute_units, unit_name(dialect));
    match i.details.cores_available {
        Some(n) if i.is_cpu && n < i.compute_units => {
            format!("{all}, sharing this process's {n} cores")
        }
        _ => all,
    }
}

#[cfg(test)]
mod tests {
    use kevo_backend::{BackendName, DeviceDetails, Simd};
    use kevo_roofline::{Level, Spread};
    use kevo_tasks::SizeSet;

    use super::super::{PromptBuilder, TaskCtx, kind_name};
    use super::*;

    fn info(dialect: Dialect, is_cpu: bool, details: DeviceDetails) -> DeviceInfo {
        DeviceInfo {
            backend: BackendName::Opencl,
            dialect,
            platform: "p".into(),
            name: "d".into(),
            vendor: "v".into(),
            compute_units: if is_cpu { 2 } else { 132 },
            global_mem_bytes: 8 << 30,
            max_work_group_size: if is_cpu { 4096 } else { 1024 },
            local_mem_bytes: if is_cpu { 512 << 10 } else { 227 << 10 },
            clock_mhz: if is_cpu { 2445 } else { 1980 },
            arch: if is_cpu { "OpenCL 3.0 PoCL" } else { "sm_90" }.into(),
            driver_version: "1".into(),
            is_cpu,
            cache_bytes: if is_cpu { 32 << 20 } else { 50 << 20 },
            integrated: false,
            details,
        }
    }

    fn pocl(cores: u32) -> DeviceInfo {
        info(
            Dialect::OpenCl,
            true,
            DeviceDetails {
                simd: Some(Simd::Avx512),
                cores_available: Some(cores),
                ..DeviceDetails::default()
            },
        )
    }

    fn h100() -> DeviceInfo {
        info(
            Dialect::Cuda,
            false,
            DeviceDetails {
                warp_size: Some(32),
                registers_per_sm: Some(65536),
                max_threads_per_sm: Some(2048),
                ..DeviceDetails::default()
            },
        )
    }

    fn spread(median: f64, min: f64, max: f64) -> Spread {
        Spread { median, min, max }
    }

    fn level(name: &str, capacity: u64, gbs: Spread) -> Level {
        Level {
            name: name.into(),
            capacity_bytes: Some(capacity),
            reach_bytes: Some(capacity * 2),
            gbs,
        }
    }

    fn dram(gbs: f64) -> Level {
        Level {
            name: "DRAM".into(),
            capacity_bytes: None,
            reach_bytes: None,
            gbs: spread(gbs, gbs * 0.95, gbs * 1.02),
        }
    }

    /// A 2-core VM's levels: the L3 is shared with the host's other cores.
    fn hierarchy() -> Hierarchy {
        Hierarchy {
            levels: vec![
                level("L2", 1 << 20, spread(180.0, 170.0, 190.0)),
                level("L3", 24 << 20, spread(95.0, 38.0, 152.0)),
                dram(21.4),
            ],
            sweep: Vec::new(),
            driver_cache_bytes: 32 << 20,
            note: None,
        }
    }

    fn brief(info: DeviceInfo, source: CeilingSource) -> DeviceBrief {
        DeviceBrief {
            name: "pthread-skylake-avx512-Intel(R) Xeon(R)".into(),
            ceilings: Ceilings {
                bandwidth_gbs: 21.4,
                fp32_gflops: 151.0,
                source,
                hierarchy: Some(hierarchy()),
                launch_overhead: None,
            },
            info: Some(info),
        }
    }

    fn measured() -> CeilingSource {
        CeilingSource::Measured {
            measured_unix: 1_700_000_000,
            cached: true,
        }
    }

    #[derive(Serialize)]
    struct BriefCtx<'a> {
        task: TaskCtx<'a>,
        dialect: super::super::DialectCtx,
        device: DeviceCtx,
        device_kind: &'static str,
    }

    /// The rendered device section of saxpy's brief on `device`.
    fn section(device: DeviceBrief, dialect: Dialect) -> String {
        let task = kevo_tasks::by_name("saxpy").unwrap();
        let b = PromptBuilder::new(task, dialect, SizeSet::Smoke, device).unwrap();
        let ctx = BriefCtx {
            task: b.task_ctx(),
            dialect: dialect_ctx(dialect),
            device: b.device_ctx(),
            device_kind: kind_name(b.device_kind()),
        };
        let text = b.templates.render("_brief.j2", &ctx).unwrap();
        let start = text.find("## Device").unwrap();
        let end = text.find("This task is scored").unwrap();
        text[start..end].trim().to_string()
    }

    #[test]
    fn a_cpu_gets_its_vector_width_clock_and_usable_cores() {
        assert_eq!(
            cpu_facts(&pocl(2)).unwrap(),
            "Cores: AVX-512, 16 fp32 lanes per vector register, 2445 MHz; this process may run on 2 cores, as many as the runtime's 2 compute units."
        );
        let fewer = cpu_facts(&pocl(1)).unwrap();
        assert!(
            fewer.ends_with(
                "fewer than the runtime's 2 compute units, so at most 1 of them run at once."
            ),
            "{fewer}"
        );
        let bare = info(Dialect::OpenCl, true, DeviceDetails::default());
        assert_eq!(cpu_facts(&bare).unwrap(), "Cores: 2445 MHz.");
    }

    #[test]
    fn a_gpu_gets_only_what_its_device_query_gave() {
        assert_eq!(
            gpu_facts(&h100(), Dialect::Cuda).unwrap(),
            "Each SM: 65536 registers, at most 2048 resident threads, warps of 32 threads; 1980 MHz, sm_90, 50.0 MiB L2."
        );
        // OpenCL on a GPU: no warp query; its version string is no
        // architecture and its cache size no L2.
        let mut cl = info(Dialect::OpenCl, false, DeviceDetails::default());
        cl.arch = "OpenCL 3.0 CUDA".into();
        assert_eq!(gpu_facts(&cl, Dialect::OpenCl).unwrap(), "Clock: 1980 MHz.");
    }

    #[test]
    fn cache_levels_say_what_their_figures_cover() {
        let line = levels(&hierarchy(), Some(&pocl(2)), Dialect::OpenCl).unwrap();
        assert!(line.contains("sweep over growing working sets on all 2 compute units; each working set and bandwidth is for all of them together"), "{line}");
        assert!(line.contains("L2 up to 1.0 MiB at 180 GB/s, "), "{line}");
        // A level whose runs spread widely shows the spread.
        assert!(
            line.contains("L3 up to 24.0 MiB at 95.0 GB/s (runs from 38.0 to 152 GB/s)"),
            "{line}"
        );
        let only_dram = Hierarchy {
            levels: hierarchy().levels.split_off(2),
            ..hierarchy()
        };
        assert_eq!(levels(&only_dram, None, Dialect::OpenCl), None);
        // A runtime that counts more cores than the process may use.
        let line = levels(&hierarchy(), Some(&pocl(1)), Dialect::OpenCl).unwrap();
        assert!(
            line.contains("on all 2 compute units, sharing this process's 1 cores; "),
            "{line}"
        );
    }

    #[test]
    fn measured_ceilings_say_how_and_stay_the_same_between_runs() {
        let fresh = CeilingSource::Measured {
            measured_unix: 1_800_000_000,
            cached: false,
        };
        let s = source(&brief(pocl(2), measured()).ceilings, Some(&pocl(2)));
        assert_eq!(s, source(&brief(pocl(2), fresh).ceilings, Some(&pocl(2))));
        assert!(
            s.starts_with("measured on this device; DRAM: the faster of"),
            "{s}"
        );
    }

    /// A correct evaluation whose one kernel reports PoCL's fixed 1024 B.
    fn pocl_evaluation() -> kevo_eval::Evaluation {
        kevo_eval::Evaluation {
            task: "saxpy".into(),
            device: "d".into(),
            backend: BackendName::Opencl,
            outcome: kevo_eval::Outcome::Correct { score: 0.5 },
            sizes: Vec::new(),
            wall: kevo_eval::WallTimes::default(),
            kernels: vec![kevo_eval::KernelResources {
                name: "saxpy".into(),
                info: kevo_backend::KernelInfo {
                    local_bytes_per_thread: Some(1024),
                    preferred_multiple: Some(16),
                    ..Default::default()
                },
                occupancy: None,
            }],
            source_sha: None,
        }
    }

    #[test]
    fn feedback_on_a_cpu_leaves_out_the_runtimes_private_memory_figure() {
        let task = kevo_tasks::by_name("saxpy").unwrap();
        let on = |device: DeviceBrief| {
            let b = PromptBuilder::new(task, Dialect::OpenCl, SizeSet::Smoke, device).unwrap();
            b.feedback(&pocl_evaluation(), "test").unwrap().text
        };
        let cpu = on(brief(pocl(2), measured()));
        assert!(
            cpu.starts_with("saxpy: work-group size best a multiple of 16\n"),
            "{cpu}"
        );
        let mut gpu = brief(
            info(Dialect::OpenCl, false, DeviceDetails::default()),
            measured(),
        );
        gpu.name = "an OpenCL GPU".into();
        let gpu = on(gpu);
        assert!(gpu.contains("1024 B private memory per work-item"), "{gpu}");
    }

    #[test]
    fn the_cpu_device_section() {
        let text = section(brief(pocl(2), measured()), Dialect::OpenCl);
        insta::assert_snapshot!(text, @r#"
## Device

pthread-skylake-avx512-Intel(R) Xeon(R) (CPU): peak DRAM bandwidth 21.4 GB/s, peak FP32 151 GFLOPS (measured on this device; DRAM: the faster of a float4 and a float16 copy kernel over two 64 MiB buffers, bytes read + written; FP32: the faster of a scalar and a float8 FMA loop; each on every compute unit, the best of every measurement of this device). 2 compute units, 512 KB of __local memory per work-group, at most 4096 threads per work-group.
Cores: AVX-512, 16 fp32 lanes per vector register, 2445 MHz; this process may run on 2 cores, as many as the runtime's 2 compute units.
Memory levels, from a copy sweep over growing working sets on all 2 compute units; each working set and bandwidth is for all of them together, the best of every measurement: L2 up to 1.0 MiB at 180 GB/s, L3 up to 24.0 MiB at 95.0 GB/s (runs from 38.0 to 152 GB/s); then DRAM.
"#);
    }

    #[test]
    fn the_gpu_device_section() {
        let source = CeilingSource::Datasheet {
            entry: "NVIDIA H100 SXM".into(),
        };
        let mut b = brief(h100(), source);
        b.name = "NVIDIA H100 80GB HBM3".into();
        b.ceilings.bandwidth_gbs = 3350.0;
        b.ceilings.fp32_gflops = 67000.0;
        b.ceilings.hierarchy = Some(Hierarchy {
            levels: vec![
                level("L2", 32 << 20, spread(7400.0, 7100.0, 7600.0)),
                dram(3010.0),
            ],
            ..hierarchy()
        });
        let text = section(b, Dialect::Cuda);
        insta::assert_snapshot!(text, @r#"
## Device

NVIDIA H100 80GB HBM3 (discrete GPU): peak DRAM bandwidth 3350 GB/s, peak FP32 67000 GFLOPS (datasheet figures for NVIDIA H100 SXM). 132 SMs, 227 KB of shared memory per block, at most 1024 threads per block.
Each SM: 65536 registers, at most 2048 resident threads, warps of 32 threads; 1980 MHz, sm_90, 50.0 MiB L2.
Memory levels, from a copy sweep over growing working sets on all 132 SMs; each working set and bandwidth is for all of them together, the best of every measurement: L2 up to 32.0 MiB at 7400 GB/s; then DRAM.
"#);
    }
}
