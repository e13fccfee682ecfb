//! CUDA-specific behaviour beyond the conformance suite: graph replay, the
//! L2 flush, large dynamic shared memory, argument widening, compile logs
//! and kernel attributes. Skipped on machines without CUDA.

mod common;

use kevo_backend::conformance::kernels_source;
use kevo_backend::{Backend, BackendError, CompileOptions, Dialect, KernelArg, KernelId, Launch};
use kevo_cuda::{CudaBackend, CudaOptions};

const FEATURES: &str = include_str!("kernels/features.cu");

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn conformance_kernel(b: &mut CudaBackend, name: &str) -> KernelId {
    let m = b
        .compile(kernels_source(Dialect::Cuda), &CompileOptions::default())
        .expect("conformance kernels compile");
    b.kernel(m, name).expect(name)
}

fn increment(k: KernelId, buf: kevo_backend::BufferId, n: u32) -> Launch {
    Launch {
        kernel: k,
        global: [u64::from(n.div_ceil(256) * 256), 1, 1],
        local: [256, 1, 1],
        dynamic_shared_bytes: 0,
        args: vec![KernelArg::Buffer(buf), KernelArg::U32(n)],
    }
}

/// Run 100 increments `reps` times; every element must end at 100 * reps,
/// and every time must be positive. Returns the median time.
fn increments(b: &mut CudaBackend, reps: u32) -> f64 {
    let k = conformance_kernel(b, "increment");
    let n = 1u32 << 16;
    let buf = b.alloc(4 * n as usize).unwrap();
    b.upload(buf, &vec![0u8; 4 * n as usize]).unwrap();
    let seq = vec![increment(k, buf, n); 100];
    let mut times: Vec<f64> = (0..reps)
        .map(|_| b.run_timed(&seq).expect("sequence").seconds())
        .collect();
    assert!(times.iter().all(|t| *t > 0.0 && t.is_finite()), "{times:?}");
    let mut raw = vec![0u8; 4 * n as usize];
    b.download(buf, &mut raw).unwrap();
    assert!(
        u32s(&raw).iter().all(|&v| v == 100 * reps),
        "not every element was incremented {} times",
        100 * reps
    );
    b.free(buf);
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

#[test]
fn graph_mode_replays_sequences_in_order() {
    let Some(mut b) = common::open(CudaOptions {
        use_graph: true,
        flush_l2: false,
    }) else {
        return;
    };
    let graph = increments(&mut b, 5);
    b.set_use_graph(false);
    let stream = increments(&mut b, 5);
    eprintln!(
        "100 launches of `increment` (64K elements): {:.1} us as a graph, {:.1} us as stream launches",
        graph * 1e6,
        stream * 1e6
    );
}

#[test]
fn l2_flush_mode_gives_correct_results_and_untimed_flushes() {
    let Some(mut b) = common::open(CudaOptions {
        use_graph: false,
        flush_l2: true,
    }) else {
        return;
    };
    increments(&mut b, 3);
    // One small launch after a flush: the 2 x L2 memset (100 MiB on an
    // H100) cannot run faster than 8 TB/s, so a time below that bound
    // shows the flush is outside the timed region.
    let k = conformance_kernel(&mut b, "increment");
    let buf = b.alloc(4096).unwrap();
    let one = increment(k, buf, 1024);
    b.run_timed(std::slice::from_ref(&one)).unwrap();
    let mut t: Vec<f64> = (0..5)
        .map(|_| b.run_timed(std::slice::from_ref(&one)).unwrap().seconds())
        .collect();
    t.sort_by(f64::total_cmp);
    let memset_floor = (2 * b.l2_bytes()) as f64 / 8e12;
    eprintln!(
        "one cold-L2 launch: {:.1} us (L2 {} MiB, flush cannot take under {:.1} us)",
        t[2] * 1e6,
        b.l2_bytes() >> 20,
        memset_floor * 1e6
    );
    assert!(t[0] > 0.0);
    assert!(t[2] < memset_floor, "the flush seems to be timed: {t:?}");
    b.set_options(CudaOptions {
        use_graph: true,
        flush_l2: true,
    });
    increments(&mut b, 3);
}

#[test]
fn dynamic_shared_memory_above_48k_is_enabled() {
    let Some(mut b) = common::open(CudaOptions::default()) else {
        return;
    };
    let m = b.compile(FEATURES, &CompileOptions::default()).unwrap();
    let k = b.kernel(m, "shared_reverse").unwrap();
    let n = 16384u32; // 64 KiB of floats
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let buf = b.alloc(4 * n as usize).unwrap();
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    b.upload(buf, &bytes).unwrap();
    let launch = Launch {
        kernel: k,
        global: [1024, 1, 1],
        local: [1024, 1, 1],
        dynamic_shared_bytes: 4 * n,
        args: vec![KernelArg::Buffer(buf), KernelArg::U32(n)],
    };
    b.run_timed(std::slice::from_ref(&launch))
        .expect("64 KiB launch");
    let mut raw = vec![0u8; 4 * n as usize];
    b.download(buf, &mut raw).unwrap();
    for (i, v) in u32s(&raw).into_iter().enumerate() {
        assert_eq!(f32::from_bits(v), (n - 1 - i as u32) as f32, "element {i}");
    }
    // More than a block can have is a malformed launch, not a fault.
    let too_much = Launch {
        dynamic_shared_bytes: b.info().local_mem_bytes as u32 + 1024,
        ..launch
    };
    assert!(matches!(
        b.run_timed(&[too_much]),
        Err(BackendError::InvalidLaunch(_))
    ));
}

#[test]
fn arguments_must_fit_their_parameters() {
    let Some(mut b) = common::open(CudaOptions::default()) else {
        return;
    };
    let m = b.compile(FEATURES, &CompileOptions::default()).unwrap();
    let k = b.kernel(m, "add_wide").unwrap();
    let n = 3000u32;
    let buf = b.alloc(4 * n as usize).unwrap();
    b.upload(buf, &vec![0u8; 4 * n as usize]).unwrap();
    // A u32 count into a `unsigned long long` parameter is zero-extended.
    let launch = Launch {
        kernel: k,
        global: [3072, 1, 1],
        local: [256, 1, 1],
        dynamic_shared_bytes: 0,
        args: vec![KernelArg::Buffer(buf), KernelArg::U32(n), KernelArg::U32(5)],
    };
    b.run_timed(std::slice::from_ref(&launch)).unwrap();
    let mut raw = vec![0u8; 4 * n as usize];
    b.download(buf, &mut raw).unwrap();
    assert!(u32s(&raw).iter().all(|&v| v == 5));
    // A buffer where a 4-byte scalar goes, or a float where a pointer goes,
    // is rejected before anything runs. (A u32 where a pointer goes cannot
    // be told from a u32 into a size_t: both are 8-byte parameters.)
    let wrong = Launch {
        args: vec![
            KernelArg::Buffer(buf),
            KernelArg::U32(n),
            KernelArg::Buffer(buf),
        ],
        ..launch.clone()
    };
    assert!(matches!(
        b.run_timed(&[wrong]),
        Err(BackendError::InvalidLaunch(_))
    ));
    let wrong = Launch {
        args: vec![KernelArg::F32(1.0), KernelArg::U32(n), KernelArg::U32(5)],
        ..launch
    };
    assert!(matches!(
        b.run_timed(&[wrong]),
        Err(BackendError::InvalidLaunch(_))
    ));
}

#[test]
fn compile_logs_and_kernel_attributes_are_reported() {
    let Some(mut b) = common::open(CudaOptions::default()) else {
        return;
    };
    let m = b.compile(FEATURES, &CompileOptions::default()).unwrap();
    assert!(
        b.last_compile_log().contains("kevo compile log probe"),
        "log: {:?}",
        b.last_compile_log()
    );
    assert_eq!(b.compile_log(m), Some(b.last_compile_log()));

    let err = b
        .compile(
            FEATURES,
            &CompileOptions {
                extra_flags: vec!["--no-such-nvrtc-flag".into()],
                ..CompileOptions::default()
            },
        )
        .expect_err("an unknown flag must be rejected");
    assert!(matches!(err, BackendError::Compile(_)), "{err:?}");

    // Compile the conformance kernels a few times to report NVRTC's speed.
    let src = kernels_source(Dialect::Cuda);
    let mut times = Vec::new();
    for _ in 0..5 {
        b.compile(src, &CompileOptions::default()).unwrap();
        times.push(b.last_compile_time().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let info = b.info().clone();
    eprintln!(
        "{} ({}, {} SMs, {} MiB, shared/block {} KiB, {} MHz, driver CUDA {}), NVRTC {:?} for {}: \
         conformance module (4 kernels) compiles in {:.1} ms median, {:.1} ms first",
        info.name,
        info.arch,
        info.compute_units,
        info.global_mem_bytes >> 20,
        info.local_mem_bytes >> 10,
        info.clock_mhz,
        info.driver_version,
        b.nvrtc_version(),
        b.gpu_arch(),
        times[2] * 1e3,
        times[0].max(times[4]) * 1e3,
    );
    assert!(b.gpu_arch().starts_with("sm_") || b.gpu_arch().starts_with("compute_"));
    assert!(info.arch.starts_with("sm_"));
    assert_eq!(info.vendor, "NVIDIA");

    let m = b.compile(src, &CompileOptions::default()).unwrap();
    let k = b.kernel(m, "args_probe").unwrap();
    let ki = b.kernel_info(k).unwrap();
    eprintln!("args_probe: {ki:?}");
    assert_eq!(ki.num_args, Some(7));
    assert_eq!(ki.preferred_multiple, Some(32));
    assert!(ki.registers_per_thread.is_some_and(|r| r > 0));
    assert_eq!(ki.local_bytes_per_thread, Some(0));

    // A register cap reaches ptxas.
    let capped = b
        .compile(
            FEATURES,
            &CompileOptions {
                max_registers: Some(24),
                ..CompileOptions::default()
            },
        )
        .unwrap();
    let k = b.kernel(capped, "add_wide").unwrap();
    let regs = b.kernel_info(k).unwrap().registers_per_thread.unwrap();
    assert!(regs <= 24, "{regs} registers despite --maxrregcount=24");
}

#[test]
fn devices_are_listed_and_selected_by_name() {
    let Some(b) = common::open(CudaOptions::default()) else {
        return;
    };
    let devices = kevo_cuda::list_devices().unwrap();
    assert!(!devices.is_empty());
    assert_eq!(devices[0].info.name, b.info().name);
    let word = b
        .info()
        .name
        .split_whitespace()
        .last()
        .unwrap()
        .to_lowercase();
    let by_name = CudaBackend::open(&kevo_backend::DeviceSelector {
        platform: Some("ignored".into()),
        device: Some(word),
    })
    .expect("open by name substring");
    assert_eq!(by_name.info().name, b.info().name);
    let none = CudaBackend::open(&kevo_backend::DeviceSelector {
        platform: None,
        device: Some("no such gpu".into()),
    });
    assert!(matches!(none, Err(BackendError::DeviceNotFound(_))));
}
