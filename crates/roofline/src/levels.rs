//! The micro-benchmarks beyond DRAM copy and FP32 FMA: the copy sweep that
//! finds the cache levels, shared/local-memory bandwidth, and FP64 and FP16
//! FMA peaks where the device has them. Each runs 2 warm-ups and 7 timed
//! launches; a benchmark the device cannot run is reported with the reason
//! instead of failing the others.

use kevo_backend::{
    Backend, BackendError, CompileOptions, DeviceInfo, Dialect, KernelArg, KernelId, Launch,
    ModuleId,
};
use serde::{Deserialize, Serialize};

use crate::hierarchy::{Hierarchy, Spread, SweepPoint};

/// What the extra micro-benchmarks measured, each with the reason where it
/// could not run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extras {
    pub hierarchy: Hierarchy,
    /// Shared (CUDA) / local (OpenCL) memory read bandwidth, GB/s.
    pub shared_gbs: Result<Spread, String>,
    pub fp64_gflops: Result<Spread, String>,
    pub fp16_gflops: Result<Spread, String>,
    /// The fixed cost of a launch; None in measurements cached before kevo
    /// measured it (which are then measured again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_overhead: Option<Result<LaunchOverhead, String>>,
}

/// What an empty kernel (one work-group per compute unit) costs on the
/// device clock, in microseconds: the floor under every timed run, which
/// holds a size's launches back to back. About 3-5 us per launch on PoCL,
/// a few us on a discrete GPU: most of a small size's time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LaunchOverhead {
    /// One launch timed as a run of its own.
    pub alone_us: Spread,
    /// Per launch, over [`BACK_TO_BACK`] launches timed as one run.
    pub back_to_back_us: Spread,
}

/// Launches in the back-to-back figure of [`LaunchOverhead`].
pub const BACK_TO_BACK: usize = 64;

const WARMUPS: usize = 2;
const TIMED: usize = 7;

fn time(backend: &mut dyn Backend, launch: &Launch) -> Result<Vec<f64>, BackendError> {
    let seq = std::slice::from_ref(launch);
    for _ in 0..WARMUPS {
        backend.run_timed(seq)?;
    }
    (0..TIMED)
        .map(|_| backend.run_timed(seq).map(|t| t.seconds()))
        .collect()
}

/// `amount` per run over each timed run, in units of 1e9 per second.
fn rate(amount: f64, times: Vec<f64>) -> Spread {
    Spread::of(times.into_iter().map(|t| amount / t / 1e9).collect())
}

fn source(dialect: Dialect, name: &str) -> Option<&'static str> {
    match (dialect, name) {
        (Dialect::Cuda, "hierarchy" | "fp64" | "fp16") => {
            Some(include_str!("../kernels/hierarchy.cu"))
        }
        (Dialect::OpenCl, "hierarchy") => Some(include_str!("../kernels/hierarchy.cl")),
        (Dialect::OpenCl, "fp64") => Some(include_str!("../kernels/fp64.cl")),
        (Dialect::OpenCl, "fp16") => Some(include_str!("../kernels/fp16.cl")),
        _ => None,
    }
}

/// Compiles `file`'s kernels, runs `body` and releases the module whatever
/// happens; a compile failure becomes the reason (a device without doubles
/// or halves fails to build fp64.cl / fp16.cl).
fn with_kernel<T>(
    backend: &mut dyn Backend,
    file: &str,
    kernel: &str,
    body: impl FnOnce(&mut dyn Backend, KernelId) -> Result<T, BackendError>,
) -> Result<T, String> {
    // kevo's probes are in the device's native language (CUDA C++ on the
    // Triton backend, whose `compile` takes it).
    let dialect = backend.dialect().native();
    let Some(src) = source(dialect, file) else {
        return Err(format!("no {file} micro-benchmark for {dialect:?}"));
    };
    let module: ModuleId = backend
        .compile(src, &CompileOptions::default())
        .map_err(|e| format!("the device does not build it: {}", first_line(&e)))?;
    let result = backend
        .kernel(module, kernel)
        .and_then(|k| body(backend, k))
        .map_err(|e| first_line(&e));
    backend.release_module(module);
    result
}

fn first_line(e: &BackendError) -> String {
    let text = match e {
        BackendError::Compile(d) => d.summary(),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or_default().to_string()
}

fn block(backend: &dyn Backend, kernel: KernelId, want: u32) -> Result<u32, BackendError> {
    Ok(want
        .min(backend.kernel_info(kernel)?.max_threads_per_block as u32)
        .max(1))
}

/// Working sets of the sweep, from `lo` to `hi` bytes in steps of sqrt(2)
/// (rounded to 64 bytes: whole float4 pairs).
fn working_sets(lo: u64, hi: u64) -> Vec<u64> {
    let mut sets = Vec::new();
    let mut b = lo as f64;
    while b <= hi as f64 * 1.0001 {
        sets.push(((b as u64) / 64).max(1) * 64);
        b *= std::f64::consts::SQRT_2;
    }
    sets.dedup();
    sets
}

/// The sweep's range and load for a device: CPUs from 16 KiB (inside a
/// core's L1) to 256 MiB, GPUs from 256 KiB to 512 MiB (or 8x the
/// driver's cache if larger, capped by an eighth of memory); each launch
/// moves at least 64 MB (CPU) or 1 GB (GPU) so that launch overhead is a
/// small part of even the smallest set's time.
struct SweepPlan {
    sets: Vec<u64>,
    min_bytes_per_launch: u64,
    threads: u64,
    saturating_threads: u64,
    /// CPUs run `bw_sweep_chunked` (a contiguous chunk per work-item,
    /// 16-item groups, at least 4 float16 each); GPUs the coalesced grid-stride `bw_sweep`.
    chunked: bool,
}

fn plan(info: &DeviceInfo) -> SweepPlan {
    let cus = u64::from(info.compute_units.max(1));
    if info.is_cpu {
        SweepPlan {
            // Past the driver's cache (up to 1 GiB): a VM's share of a
            // 256 MiB host L3 ends where the sweep's last cliff is, not
            // where the driver says.
            sets: working_sets(
                16 << 10,
                (256u64 << 20)
                    .max(info.cache_bytes.saturating_mul(2).min(1 << 30))
                    .min((info.global_mem_bytes / 4).max(256 << 20)),
            ),
            min_bytes_per_launch: 64 << 20,
            threads: cus * 256,
            saturating_threads: cus * 64,
            chunked: true,
        }
    } else {
        let hi = (512u64 << 20)
            .max(info.cache_bytes.saturating_mul(8))
            .min((info.global_mem_bytes / 8).max(4 << 20));
        SweepPlan {
            sets: working_sets(256 << 10, hi),
            min_bytes_per_launch: 1 << 30,
            threads: cus * 2048,
            saturating_threads: cus * 1024,
            chunked: false,
        }
    }
}

/// The copy sweep: every working set of the plan, each with its bandwidth.
pub fn sweep(backend: &mut dyn Backend) -> Result<Vec<SweepPoint>, String> {
    let sets = plan(backend.info()).sets;
    sweep_points(backend, &sets)
}

/// The copy bandwidth at each of `sets` (bytes, increasing), with the
/// plan's threads and load: the sweep, or one point of it measured again.
pub fn sweep_points(backend: &mut dyn Backend, sets: &[u64]) -> Result<Vec<SweepPoint>, String> {
    let info = backend.info().clone();
    let plan = SweepPlan {
        sets: sets.to_vec(),
        ..plan(&info)
    };
    let largest = *plan.sets.last().ok_or("no working sets to measure")?;
    let name = if plan.chunked {
        "bw_sweep_chunked"
    } else {
        "bw_sweep"
    };
    with_kernel(backend, "hierarchy", name, |backend, kernel| {
        let local = block(backend, kernel, if plan.chunked { 16 } else { 256 })?;
        let half = (largest / 2) as usize;
        let a = backend.alloc(half)?;
        let b = match backend.alloc(half) {
            Ok(b) => b,
            Err(e) => {
                backend.free(a);
                return Err(e);
            }
        };
        let result = (|| {
            backend.fill_buffer(a, 0, half)?;
            backend.fill_buffer(b, 0, half)?;
            let mut points = Vec::new();
            for &bytes in &plan.sets {
                // Two buffers of n float4 each; n even for the i ^ 1 swap.
                let mut n = (bytes / 32) & !1;
                let threads = if plan.chunked {
                    // A power of two, with n cut to whole chunks of
                    // float16 (4 float4: the chunked kernel's unit).
                    let t = (n / 16).min(plan.threads).max(1);
                    let t = (1u64 << (63 - t.leading_zeros())).max(u64::from(local));
                    n -= n % (4 * t);
                    t
                } else {
                    n.min(plan.threads).div_ceil(u64::from(local)) * u64::from(local)
                };
                // Chunk rounding can map two working sets to one.
                if n == 0
                    || points
                        .last()
                        .is_some_and(|p: &SweepPoint| p.bytes == 32 * n)
                {
                    continue;
                }
                let local = local.min(threads as u32);
                let passes = plan.min_bytes_per_launch.div_ceil(32 * n).max(1);
                let launch = Launch {
                    kernel,
                    global: [threads, 1, 1],
                    local: [local, 1, 1],
                    dynamic_shared_bytes: 0,
                    args: vec![
                        KernelArg::Buffer(a),
                        KernelArg::Buffer(b),
                        KernelArg::U32(n as u32),
                        KernelArg::U32(passes as u32),
                    ],
                };
                let moved = (32 * n * passes) as f64;
                points.push(SweepPoint {
                    bytes: 32 * n,
                    gbs: rate(moved, time(backend, &launch)?),
                    saturated: n >= plan.saturating_threads,
                });
            }
            Ok(points)
        })();
        backend.free(a);
        backend.free(b);
        result
    })
}

/// Shared/local-memory read bandwidth over 256-thread blocks.
pub fn shared_bandwidth(backend: &mut dyn Backend) -> Result<Spread, String> {
    let info = backend.info().clone();
    with_kernel(backend, "hierarchy", "shared_bw", |backend, kernel| {
        if block(backend, kernel, 256)? < 256 {
            return Err(BackendError::InvalidLaunch(
                "shared_bw needs 256 threads per block".into(),
            ));
        }
        let cus = u64::from(info.compute_units.max(1));
        let (blocks, iters): (u64, u32) = if info.is_cpu {
            (cus * 4, 1024)
        } else {
            (cus * 8, 4096)
        };
        let threads = blocks * 256;
        let out = backend.alloc(threads as usize * 4)?;
        let launch = Launch {
            kernel,
            global: [threads, 1, 1],
            local: [256, 1, 1],
            dynamic_shared_bytes: 0,
            args: vec![KernelArg::Buffer(out), KernelArg::U32(iters)],
        };
        let times = time(backend, &launch);
        backend.free(out);
        Ok(rate(threads as f64 * f64::from(iters) * 16.0, times?))
    })
}

/// FMA peak in FP64 (`bits` 64) or FP16 (`bits` 16, packed pairs).
pub fn fma_peak(backend: &mut dyn Backend, bits: u32) -> Result<Spread, String> {
    let info = backend.info().clone();
    let (file, kernel, flops_per_iter, bytes_per_out) = match bits {
        64 => ("fp64", "fma_peak_f64", 16.0, 8),
        16 => ("fp16", "fma_peak_f16", 32.0, 4),
        other => return Err(format!("no FP{other} benchmark")),
    };
    let dialect = backend.dialect().native();
    with_kernel(backend, file, kernel, |backend, k| {
        let local = block(backend, k, 256)?;
        let (threads, iters): (u64, u32) = if info.is_cpu {
            (1 << 14, 512)
        } else {
            (u64::from(info.compute_units.max(1)) * 2048, 8192)
        };
        let threads = threads.div_ceil(u64::from(local)) * u64::from(local);
        let out = backend.alloc(threads as usize * bytes_per_out)?;
        let multiplier = match (bits, dialect) {
            // binary16 0.9995 (0x3BFF) in both halves of the pair.
            (16, Dialect::Cuda) => KernelArg::U32(0x3BFF_3BFF),
            // The kernels convert it to their precision.
            _ => KernelArg::F32(0.999_5),
        };
        let launch = Launch {
            kernel: k,
            global: [threads, 1, 1],
            local: [local, 1, 1],
            dynamic_shared_bytes: 0,
            args: vec![KernelArg::Buffer(out), KernelArg::U32(iters), multiplier],
        };
        let times = time(backend, &launch);
        backend.free(out);
        Ok(rate(
            threads as f64 * flops_per_iter * f64::from(iters),
            times?,
        ))
    })
}

/// The empty kernel's launch cost, alone and back to back; 15 timed runs of
/// each after the warm-ups (they take microseconds).
pub fn launch_overhead(backend: &mut dyn Backend) -> Result<LaunchOverhead, String> {
    let cus = u64::from(backend.info().compute_units.max(1));
    with_kernel(backend, "hierarchy", "empty_launch", |backend, kernel| {
        let local = block(backend, kernel, 64)?;
        let threads = cus * u64::from(local);
        let out = backend.alloc(4)?;
        let launch = Launch {
            kernel,
            global: [threads, 1, 1],
            local: [local, 1, 1],
            dynamic_shared_bytes: 0,
            args: vec![KernelArg::Buffer(out), KernelArg::U32(threads as u32)],
        };
        let many = vec![launch.clone(); BACK_TO_BACK];
        let result = (|| {
            for _ in 0..WARMUPS {
                backend.run_timed(&many)?;
            }
            let mut alone = Vec::new();
            let mut back_to_back = Vec::new();
            for _ in 0..15 {
                alone.push(backend.run_timed(std::slice::from_ref(&launch))?.seconds() * 1e6);
                back_to_back.push(backend.run_timed(&many)?.seconds() * 1e6 / BACK_TO_BACK as f64);
            }
            Ok(LaunchOverhead {
                alone_us: Spread::of(alone),
                back_to_back_us: Spread::of(back_to_back),
            })
        })();
        backend.free(out);
        result
    })
}

/// Every extra benchmark; `dram` is the copy bandwidth measured past every
/// cache (the DRAM level).
pub fn measure_extras(backend: &mut dyn Backend, dram: Spread) -> Extras {
    let info = backend.info().clone();
    let hierarchy = match sweep(backend) {
        Ok(points) => Hierarchy::from_sweep(points, dram, info.is_cpu, info.cache_bytes),
        Err(reason) => Hierarchy {
            note: Some(format!("the sweep could not run: {reason}")),
            ..Hierarchy::from_sweep(Vec::new(), dram, info.is_cpu, info.cache_bytes)
        },
    };
    Extras {
        hierarchy,
        shared_gbs: shared_bandwidth(backend),
        fp64_gflops: fma_peak(backend, 64),
        fp16_gflops: fma_peak(backend, 16),
        launch_overhead: Some(launch_overhead(backend)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_sets_step_by_sqrt2_in_whole_pairs() {
        let sets = working_sets(16 << 10, 256 << 10);
        assert_eq!(sets.first(), Some(&(16 << 10)));
        assert_eq!(sets.last(), Some(&(256 << 10)));
        assert_eq!(sets.len(), 9, "{sets:?}");
        assert!(sets.iter().all(|b| b % 64 == 0));
        assert!(sets.windows(2).all(|w| w[1] > w[0]));
    }
}
