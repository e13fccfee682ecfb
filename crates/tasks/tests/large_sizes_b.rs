//! The `large` size set of ising, lj, gradshaf, fft3d, adi3d and morton:
//! three in-distribution sizes and one held-out, all distinct; every
//! memory-bound task's working set (the sum of the problem's buffer bytes,
//! computed here from the dims so that no large input is generated) is at
//! least 256 MiB, 4x a 64 MB last-level cache; work() > 0. lj's work()
//! counts pairs from generated inputs, so its check is `#[ignore]`d.

use kevo_tasks::{Size, SizeSet, Task};

const MIB: u64 = 1 << 20;

fn sizes(task: &Task) -> Vec<Size> {
    let plan = task.sizes(SizeSet::Large);
    assert_eq!(plan.in_distribution.len(), 3, "{}", task.name());
    let mut v = plan.in_distribution;
    v.push(plan.held_out);
    v
}

/// Bytes of every buffer `problem(size)` allocates, from the dims.
fn working_set(name: &str, d: &[u64]) -> u64 {
    match name {
        // spins (1 B per site) + the 5-entry acceptance table.
        "ising" => d[0] * d[1] + 20,
        // psi A, psi B, psi_axis.
        "gradshaf" => 2 * 4 * d[0] * d[1] + 4,
        // A and B, float2 per cell.
        "fft3d" => 2 * 8 * d[0].pow(3),
        // A and B, f32.
        "adi3d" => 2 * 4 * d[0] * d[1] * d[2],
        "morton" => 2 * 4 * d[0].pow(3),
        _ => unreachable!(),
    }
}

#[test]
fn large_sizes_are_distinct_and_memory_bound_ones_exceed_the_cache() {
    for name in ["ising", "gradshaf", "fft3d", "adi3d", "morton", "lj"] {
        let task = kevo_tasks::by_name(name).unwrap();
        let all = sizes(task);
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.label, b.label, "{name}");
                assert_ne!(a.dims, b.dims, "{name}");
            }
            for set in [SizeSet::Full, SizeSet::Smoke] {
                let p = task.sizes(set);
                let other: Vec<&Size> = p.in_distribution.iter().chain([&p.held_out]).collect();
                assert!(
                    !other.iter().any(|s| s.label == a.label),
                    "{name}: large size {} is also a {set} size",
                    a.label
                );
            }
        }
        if name == "lj" {
            continue;
        }
        for s in &all {
            let ws = working_set(name, &s.dims);
            assert!(
                ws >= 256 * MIB,
                "{name} {}: working set {} MiB < 256 MiB",
                s.label,
                ws / MIB
            );
            assert!(task.work(s) > 0.0, "{name} {}", s.label);
        }
    }
}

#[test]
fn the_working_set_formula_matches_the_problem() {
    // The formula above, checked against real problems at small dims.
    for (name, dims) in [
        ("ising", vec![64u64, 32, 2]),
        ("gradshaf", vec![33, 17, 3]),
        ("fft3d", vec![16, 2]),
        ("adi3d", vec![12, 10, 8, 2]),
        ("morton", vec![16, 2]),
    ] {
        let task = kevo_tasks::by_name(name).unwrap();
        let p = task.problem(&Size::new("t", &dims), task.default_seed());
        let bytes: u64 = p.buffers.iter().map(|b| b.bytes as u64).sum();
        assert_eq!(bytes, working_set(name, &dims), "{name}");
    }
}

#[test]
#[ignore = "lj's work() generates the inputs of every large size (seconds in release)"]
fn lj_large_sizes_have_work() {
    let lj = kevo_tasks::by_name("lj").unwrap();
    for s in sizes(lj) {
        let w = lj.work(&s);
        // At least ~5 ms at 10 % of an H100's ~60 TFLOPS FP32.
        assert!(w >= 2.5e10, "lj {}: {w:e} FLOPs", s.label);
        println!("lj {}: {w:.3e} FLOPs", s.label);
    }
}

#[test]
#[ignore = "measurement: inputs and reference at every large size (16 cores: about a minute in all)"]
fn large_reference_times() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("CPU cost of the large sizes ({threads} threads)");
    println!(
        "{:<9} {:<22} {:>9} {:>9} {:>9} {:>12} {:>16}",
        "task", "size", "inputs_s", "ref_s", "work_s", "bytes_MiB", "work"
    );
    let only = std::env::var("LARGE_TASK").ok();
    for name in ["ising", "gradshaf", "fft3d", "adi3d", "morton", "lj"] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let task = kevo_tasks::by_name(name).unwrap();
        for size in sizes(task) {
            let t = std::time::Instant::now();
            let p = task.problem(&size, task.default_seed());
            let inputs_s = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let r = task.reference(&size, &p);
            let ref_s = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let work = task.work(&size);
            let work_s = t.elapsed().as_secs_f64();
            let bytes: u64 = p.buffers.iter().map(|b| b.bytes as u64).sum();
            drop((p, r));
            println!(
                "{:<9} {:<22} {:>9.2} {:>9.2} {:>9.2} {:>12} {:>16.4e}",
                name,
                size.label,
                inputs_s,
                ref_s,
                work_s,
                bytes / MIB,
                work
            );
        }
    }
}
