//! The micro-benchmarks run on a real OpenCL device (PoCL in CI) and give
//! plausible ceilings, a memory hierarchy and the extra peaks.

use kevo_backend::{Backend, DeviceSelector};
use kevo_opencl::OpenClBackend;
use kevo_roofline::{CeilingCache, CeilingSource, ceilings, human_bytes, measured};

fn device() -> Option<OpenClBackend> {
    match OpenClBackend::open(&DeviceSelector::default()) {
        Ok(b) => Some(b),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("OpenCL must be available in CI: {e}"),
    }
}

#[test]
fn measured_ceilings_are_plausible_and_cached() {
    let Some(mut backend) = device() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = CeilingCache::new(dir.path().join("ceilings.json"));
    let first = ceilings(&mut backend, &cache).unwrap();
    // The hierarchy is measured whatever the source of the two ceilings.
    assert!(first.hierarchy.is_some(), "{first:?}");
    if kevo_roofline::lookup(&backend.info().name).is_some() {
        return; // a datasheet device: its two ceilings were not measured
    }
    assert!(matches!(
        first.source,
        CeilingSource::Measured { cached: false, .. }
    ));
    // Any real device copies faster than 0.1 GB/s and multiplies faster than
    // 0.1 GFLOPS, and nothing here reaches 100 TB/s or 1 PFLOPS.
    assert!((0.1..1e5).contains(&first.bandwidth_gbs), "{first:?}");
    assert!((0.1..1e6).contains(&first.fp32_gflops), "{first:?}");
    let second = ceilings(&mut backend, &cache).unwrap();
    assert!(matches!(
        second.source,
        CeilingSource::Measured { cached: true, .. }
    ));
    assert_eq!(second.bandwidth_gbs, first.bandwidth_gbs);
    assert_eq!(second.hierarchy, first.hierarchy, "cached with the rest");
}

#[test]
fn the_sweep_orders_the_levels_or_says_why_it_found_none() {
    let Some(mut backend) = device() else { return };
    // A CPU's caches stream several times faster than its memory (about
    // 600 vs 45 GB/s on a 2-core EPYC VM). A sweep that finds no such level
    // measures its own loop, not the caches (ratio near 1), and then flags
    // correct cache-resident kernels as faster than the hardware. On a
    // shared 2-core CI machine a neighbour's load once merged every cache
    // point into one level at 2.9x, so the sweep gets three tries and
    // must show 2x in one of them: a loop-bound sweep fails all three.
    let is_cpu = backend.info().is_cpu;
    let mut tries = Vec::new();
    let (m, fastest_ratio) = loop {
        let dir = tempfile::tempdir().unwrap();
        let cache = CeilingCache::new(dir.path().join("ceilings.json"));
        let started = std::time::Instant::now();
        let (m, _) = measured(&mut backend, &cache).unwrap();
        let extras = m
            .extras
            .as_ref()
            .expect("a fresh measurement has the extras");
        let fastest = extras
            .hierarchy
            .caches()
            .first()
            .map_or(0.0, |l| l.gbs.median);
        let ratio = fastest / m.copy_gbs;
        eprintln!(
            "measured in {:.2} s on {}: fastest cache {fastest:.1} GB/s, {ratio:.2}x DRAM copy",
            started.elapsed().as_secs_f64(),
            backend.info().name
        );
        tries.push(ratio);
        if !is_cpu || ratio >= 2.0 || tries.len() == 3 {
            break (m, ratio);
        }
    };
    let extras = m.extras.expect("a fresh measurement has the extras");
    let h = &extras.hierarchy;
    for p in &h.sweep {
        eprintln!(
            "  {:>10}  {:8.1} GB/s ({:.1}-{:.1}){}",
            human_bytes(p.bytes),
            p.gbs.median,
            p.gbs.min,
            p.gbs.max,
            if p.saturated {
                ""
            } else {
                "  (too few threads)"
            }
        );
    }
    for l in &h.levels {
        eprintln!(
            "  {}: {:.1} GB/s ({:.1}-{:.1}), capacity {:?}",
            l.name, l.gbs.median, l.gbs.min, l.gbs.max, l.capacity_bytes
        );
    }
    eprintln!("  note: {:?}", h.note);
    eprintln!(
        "  shared {:?}\n  fp64 {:?}\n  fp16 {:?}",
        extras.shared_gbs, extras.fp64_gflops, extras.fp16_gflops
    );
    assert!(h.sweep.len() >= 10, "{} points", h.sweep.len());
    assert!(
        h.sweep
            .iter()
            .all(|p| p.gbs.median > 0.0 && p.gbs.median.is_finite())
    );
    let last = h.levels.last().unwrap();
    assert_eq!(last.name, "DRAM");
    assert_eq!(last.gbs.median, m.copy_gbs, "DRAM is the copy ceiling");
    let swept = h.sweep.first().unwrap().bytes..=h.sweep.last().unwrap().bytes;
    if is_cpu {
        assert!(
            fastest_ratio >= 2.0,
            "fastest cache level vs DRAM copy in each try: {tries:.2?}"
        );
    }
    if let Some(fastest) = h.caches().first() {
        // Found a cliff. The levels come from the sweep kernel, the DRAM
        // figure from the separate bw_copy kernel: two measurements that
        // must agree that the cache is faster.
        assert!(
            fastest.gbs.median > m.copy_gbs,
            "{fastest:?} vs {}",
            m.copy_gbs
        );
        let caps: Vec<u64> = h.caches().iter().filter_map(|l| l.capacity_bytes).collect();
        assert!(caps.windows(2).all(|w| w[0] < w[1]), "{caps:?}");
        assert!(caps.iter().all(|c| swept.contains(c)), "{caps:?}");
        // A set past the slowest cache's reach is placed in DRAM.
        let reach = h.caches().last().unwrap().reach_bytes.unwrap();
        assert_eq!(h.place(reach + 1).level, "DRAM");
    } else {
        // None found: the reason is stated plainly.
        let note = h.note.as_deref().expect("a reason for no cliff");
        assert!(!note.is_empty());
    }
    // Local memory works on every OpenCL device.
    let shared = extras.shared_gbs.expect("local memory bandwidth");
    assert!(shared.median > 0.0, "{shared:?}");
}
