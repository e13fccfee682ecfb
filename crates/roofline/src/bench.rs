//! The DRAM copy and FP32 FMA micro-benchmarks behind measured ceilings,
//! and the re-measurement an evaluator makes before it calls a kernel
//! faster than the hardware.
//!
//! On a CPU device both run twice, as scalar kernels and as explicit
//! float16/float8 ones, and the faster counts: PoCL's scalar FMA loop ran at
//! 19.5 GFLOPS on two AVX-512 cores (about their scalar rate) while honest
//! vectorised nbody kernels reached 31-46, so the scalar figure was no
//! ceiling at all.

use kevo_backend::{
    Backend, BackendError, CompileOptions, DeviceInfo, Dialect, KernelArg, Launch, ModuleId,
};

use crate::hierarchy::Spread;
use crate::{Measurement, RooflineError, levels};

fn kernels(dialect: Dialect) -> Result<&'static str, RooflineError> {
    match dialect.native() {
        Dialect::OpenCl => Ok(include_str!("../kernels/microbench.cl")),
        Dialect::Cuda => Ok(include_str!("../kernels/microbench.cu")),
        Dialect::Metal | Dialect::Triton => Err(RooflineError::NoKernels(dialect)),
    }
}

/// Time `launch` with 3 warm-ups and 10 timed runs; return the 10 times.
fn time_runs(backend: &mut dyn Backend, launch: &Launch) -> Result<Vec<f64>, BackendError> {
    let seq = std::slice::from_ref(launch);
    for _ in 0..3 {
        backend.run_timed(seq)?;
    }
    (0..10)
        .map(|_| backend.run_timed(seq).map(|t| t.seconds()))
        .collect()
}

/// Bytes per buffer of the DRAM copy: 256 MiB on GPUs (far past any L2);
/// on CPUs 64 MiB or the driver's cache size if larger (up to 1 GiB), so
/// the two buffers together are past every cache the driver admits to
/// (a VM's host L3 of 256 MiB made 64 MiB buffers partly cache-resident).
fn copy_buffer_bytes(info: &DeviceInfo) -> u64 {
    let cap = (info.global_mem_bytes / 8).max(16 << 20);
    if info.is_cpu {
        (64u64 << 20).max(info.cache_bytes.min(1 << 30)).min(cap)
    } else {
        (256u64 << 20).min(cap)
    }
}

/// Copy bandwidth (bytes read + written per second) of kernel `name`,
/// which copies `elem` bytes per work-item.
fn copy_rate(
    backend: &mut dyn Backend,
    module: ModuleId,
    name: &str,
    elem: u64,
    buf_bytes: u64,
) -> Result<Spread, BackendError> {
    let copy = backend.kernel(module, name)?;
    let local = 256u32
        .min(backend.kernel_info(copy)?.max_threads_per_block as u32)
        .max(1);
    let n = buf_bytes / elem;
    let input = backend.alloc(buf_bytes as usize)?;
    let output = match backend.alloc(buf_bytes as usize) {
        Ok(b) => b,
        Err(e) => {
            backend.free(input);
            return Err(e);
        }
    };
    let times = backend
        .fill_buffer(input, 0x3F, buf_bytes as usize)
        .and_then(|()| {
            let launch = Launch {
                kernel: copy,
                global: [n.div_ceil(u64::from(local)) * u64::from(local), 1, 1],
                local: [local, 1, 1],
                dynamic_shared_bytes: 0,
                args: vec![
                    KernelArg::Buffer(input),
                    KernelArg::Buffer(output),
                    KernelArg::U32(n as u32),
                ],
            };
            time_runs(backend, &launch)
        });
    backend.free(input);
    backend.free(output);
    let moved = (2 * n * elem) as f64;
    Ok(Spread::of(
        times?.into_iter().map(|t| moved / t / 1e9).collect(),
    ))
}

/// FMA throughput of kernel `name`, which does `flops_per_iter` FLOPs per
/// loop iteration and work-item.
fn fma_rate(
    backend: &mut dyn Backend,
    module: ModuleId,
    name: &str,
    flops_per_iter: f64,
) -> Result<Spread, BackendError> {
    let info = backend.info().clone();
    let fma = backend.kernel(module, name)?;
    let local = 256u32
        .min(backend.kernel_info(fma)?.max_threads_per_block as u32)
        .max(1);
    let (threads, iters): (u64, u32) = if info.is_cpu {
        (1 << 16, 1024)
    } else {
        (u64::from(info.compute_units.max(1)) * 2048, 16384)
    };
    // The vector kernel does 8x the work per iteration: as many FLOPs.
    let iters = (f64::from(iters) * 16.0 / flops_per_iter).max(1.0) as u32;
    let threads = threads.div_ceil(u64::from(local)) * u64::from(local);
    let out = backend.alloc(threads as usize * 4)?;
    let launch = Launch {
        kernel: fma,
        global: [threads, 1, 1],
        local: [local, 1, 1],
        dynamic_shared_bytes: 0,
        args: vec![
            KernelArg::Buffer(out),
            KernelArg::U32(iters),
            KernelArg::F32(0.999_9),
        ],
    };
    let times = time_runs(backend, &launch);
    backend.free(out);
    let flops = threads as f64 * flops_per_iter * f64::from(iters);
    Ok(Spread::of(
        times?.into_iter().map(|t| flops / t / 1e9).collect(),
    ))
}

/// The faster (by median) of the scalar kernel and, on CPUs, its vector
/// twin; a vector kernel the device cannot run leaves the scalar figure.
fn faster(scalar: Spread, vector: Option<Result<Spread, BackendError>>) -> Spread {
    match vector {
        Some(Ok(v)) if v.median > scalar.median => v,
        _ => scalar,
    }
}

fn dram_copy(backend: &mut dyn Backend, module: ModuleId) -> Result<Spread, BackendError> {
    let info = backend.info().clone();
    let bytes = copy_buffer_bytes(&info);
    let scalar = copy_rate(backend, module, "bw_copy", 16, bytes)?;
    let vector = (info.is_cpu && backend.dialect().native() == Dialect::OpenCl)
        .then(|| copy_rate(backend, module, "bw_copy_vec", 64, bytes));
    Ok(faster(scalar, vector))
}

fn fp32_fma(backend: &mut dyn Backend, module: ModuleId) -> Result<Spread, BackendError> {
    let info = backend.info().clone();
    let scalar = fma_rate(backend, module, "fma_peak", 16.0)?;
    let vector = (info.is_cpu && backend.dialect().native() == Dialect::OpenCl)
        .then(|| fma_rate(backend, module, "fma_peak_vec", 128.0));
    Ok(faster(scalar, vector))
}

/// Compiles the micro-benchmarks, runs `body`, releases the module.
fn with_module<T>(
    backend: &mut dyn Backend,
    body: impl FnOnce(&mut dyn Backend, ModuleId) -> Result<T, RooflineError>,
) -> Result<T, RooflineError> {
    let module = backend.compile(kernels(backend.dialect())?, &CompileOptions::default())?;
    let result = body(backend, module);
    backend.release_module(module);
    result
}

/// Run the copy and FMA micro-benchmarks and the extras (sweep, shared
/// memory, FP64/FP16, launch overhead).
pub fn measure(backend: &mut dyn Backend) -> Result<Measurement, RooflineError> {
    let info = backend.info().clone();
    with_module(backend, |backend, module| {
        let copy = dram_copy(backend, module)?;
        let fma = fp32_fma(backend, module)?;
        let extras = levels::measure_extras(backend, copy);
        let now = crate::envelope::unix_now();
        Ok(Measurement::from_spreads(
            copy,
            fma,
            2 * copy_buffer_bytes(&info),
            (now, now, 1),
            Some(extras),
        ))
    })
}

/// How [`measure`] finds the two ceilings of `info`'s device, in a clause
/// for the proposer: a fraction of a measured ceiling means little without
/// the kernel that set it (a scalar FMA loop on a CPU is no peak).
pub fn method(info: &DeviceInfo) -> String {
    let mib = copy_buffer_bytes(info) >> 20;
    let (copy, fma) = if info.is_cpu && info.dialect.native() == Dialect::OpenCl {
        (
            "the faster of a float4 and a float16 copy kernel",
            "the faster of a scalar and a float8 FMA loop",
        )
    } else {
        (
            "a float4 copy kernel",
            "an FMA loop of eight independent chains per thread",
        )
    };
    format!(
        "DRAM: {copy} over two {mib} MiB buffers, bytes read + written; FP32: {fma}; \
each on every compute unit, the best of every measurement of this device"
    )
}

/// Which ceiling a re-measurement is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// The DRAM copy bandwidth.
    Dram,
    /// The FP32 FMA peak.
    Fp32,
    /// The copy bandwidth of a cache-resident working set of this many
    /// bytes (one point of the hierarchy sweep).
    Cache { working_set: u64 },
}

/// One ceiling measured again now, in the calling process: what an
/// evaluator does before it calls a kernel faster than the hardware, so a
/// ceiling measured while the machine was busy never condemns an honest
/// kernel. About 1 s on a 2-core PoCL machine, milliseconds on a GPU.
pub fn remeasure(backend: &mut dyn Backend, bound: Bound) -> Result<Spread, RooflineError> {
    match bound {
        Bound::Dram => with_module(backend, |b, m| Ok(dram_copy(b, m)?)),
        Bound::Fp32 => with_module(backend, |b, m| Ok(fp32_fma(b, m)?)),
        Bound::Cache { working_set } => {
            let points = levels::sweep_points(backend, &[working_set.max(64)])
                .map_err(|e| RooflineError::Backend(BackendError::Runtime(e)))?;
            points
                .first()
                .map(|p| p.gbs)
                .ok_or(RooflineError::Backend(BackendError::Runtime(
                    "the working set is too small to measure".into(),
                )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(is_cpu: bool, cache_bytes: u64) -> DeviceInfo {
        DeviceInfo {
            backend: kevo_backend::BackendName::Opencl,
            dialect: Dialect::OpenCl,
            platform: "p".into(),
            name: "d".into(),
            vendor: "v".into(),
            compute_units: 2,
            global_mem_bytes: 16 << 30,
            max_work_group_size: 4096,
            local_mem_bytes: 1,
            clock_mhz: 1,
            arch: String::new(),
            driver_version: "1".into(),
            is_cpu,
            cache_bytes,
            integrated: false,
            details: Default::default(),
        }
    }

    #[test]
    fn cpu_copy_buffers_are_past_the_drivers_cache() {
        assert_eq!(copy_buffer_bytes(&info(true, 0)), 64 << 20);
        assert_eq!(copy_buffer_bytes(&info(true, 260 << 20)), 260 << 20);
        assert_eq!(copy_buffer_bytes(&info(true, 8 << 30)), 1 << 30);
        assert_eq!(copy_buffer_bytes(&info(false, 50 << 20)), 256 << 20);
    }

    #[test]
    fn the_faster_of_scalar_and_vector_counts() {
        let s = Spread::of(vec![19.5]);
        let v = Spread::of(vec![140.0]);
        assert_eq!(faster(s, Some(Ok(v))), v);
        assert_eq!(faster(v, Some(Ok(s))), v);
        assert_eq!(faster(s, None), s);
        assert_eq!(faster(s, Some(Err(BackendError::Runtime("no".into())))), s);
    }

    #[test]
    fn the_method_names_the_kernels_that_ran() {
        let cpu = method(&info(true, 260 << 20));
        assert!(
            cpu.contains("float16 copy kernel over two 260 MiB"),
            "{cpu}"
        );
        assert!(cpu.contains("a scalar and a float8 FMA loop"), "{cpu}");
        let gpu = method(&info(false, 50 << 20));
        assert!(
            gpu.starts_with("DRAM: a float4 copy kernel over two 256 MiB"),
            "{gpu}"
        );
        assert!(!gpu.contains("float8"), "{gpu}");
    }
}
