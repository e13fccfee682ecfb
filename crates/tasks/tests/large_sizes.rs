//! The `large` size set of every task: three in-distribution sizes and one
//! held-out, all distinct and none a full or smoke size; every memory-bound
//! size has a working set of at least 256 MiB (4x a 64 MB last-level
//! cache), every compute-bound size takes at least ~5 ms at an H100's FP32
//! peak; work() > 0. No large inputs are generated: working sets are
//! computed from the dims by a formula that is checked against the real
//! buffer list at small sizes. lj's work() counts pairs from generated
//! inputs, so its check is `#[ignore]`d.

mod common;

use common::{all_sizes, timed};
use kevo_backend::Dialect;
use kevo_tasks::{CeilingKind, Size, SizeSet, Task};

/// The tasks of spec sections 1 to 6.
const TASKS: [&str; 6] = ["saxpy", "heat2d", "wave3d", "nbody", "hmc", "lbm"];

const MIB: u64 = 1 << 20;

/// 256 MiB.
const MIN_WORKING_SET: u64 = 256 << 20;
/// An H100 SXM's FP32 peak (non-tensor), FLOP/s.
const H100_FP32: f64 = 67e12;

/// Bytes of every buffer `problem(size)` allocates, from the dims.
fn working_set(task: &str, d: &[u64]) -> u64 {
    match task {
        "saxpy" => 8 * d[0],
        "heat2d" => 2 * 4 * d[0] * d[1],
        "wave3d" => 3 * 4 * d[0] * d[1] * d[2],
        "lbm" => 2 * 4 * 9 * d[0] * d[1],
        "nbody" => 4 * 16 * d[0] + 4 * d[0],
        "hmc" => 2 * 4 * d[0] * d[1] + 4 * d[1] + 4 * d[0] * d[0],
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

/// The large sizes of `task` (three in-distribution, the held-out, then
/// the validation ones).
fn large_sizes(task: &Task) -> Vec<Size> {
    let plan = task.sizes(SizeSet::Large);
    assert_eq!(plan.in_distribution.len(), 3, "{}", task.name());
    plan.all().cloned().collect()
}

#[test]
fn the_working_set_formula_matches_the_buffers() {
    for name in TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        for s in all_sizes(task, SizeSet::Smoke) {
            let p = task.problem(&s, 1);
            let bytes: u64 = p.buffers.iter().map(|b| b.bytes as u64).sum();
            assert_eq!(bytes, working_set(name, &s.dims), "{name} {}", s.label);
        }
    }
}

#[test]
fn large_sizes_are_large() {
    for name in TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let plan = task.sizes(SizeSet::Large);
        assert_eq!(plan.in_distribution.len(), 3, "{name}");
        let sizes = all_sizes(task, SizeSet::Large);
        let full = all_sizes(task, SizeSet::Full);
        for (i, s) in sizes.iter().enumerate() {
            assert!(task.work(s) > 0.0, "{name} {}", s.label);
            // Distinct labels and dims, and none is just a full size.
            for t in &sizes[i + 1..] {
                assert_ne!(s.label, t.label, "{name}");
                assert_ne!(s.dims, t.dims, "{name}");
            }
            assert!(!full.iter().any(|f| f.dims == s.dims), "{name} {}", s.label);
            match task.ceiling() {
                CeilingKind::Bandwidth => {
                    let ws = working_set(name, &s.dims);
                    assert!(
                        ws >= MIN_WORKING_SET,
                        "{name} {}: working set {ws} B",
                        s.label
                    );
                }
                CeilingKind::Fp32 => {
                    let t = task.work(s) / H100_FP32;
                    assert!(t >= 5e-3, "{name} {}: {t:.2e} s at peak", s.label);
                }
            }
            // Device indices stay in u32.
            assert!(working_set(name, &s.dims) / 4 < u32::MAX as u64, "{name}");
        }
        // The held-out size is never shown to the proposer.
        let held = &plan.held_out.label;
        let mut texts = vec![task.description()];
        for d in [Dialect::OpenCl, Dialect::Cuda] {
            texts.extend(task.signature(d));
            texts.extend(task.seed(d));
        }
        for t in texts {
            assert!(!t.contains(held.as_str()), "{name} mentions {held}");
        }
    }
}

/// Labels follow the full sizes' pattern (dims spelled out, steps last).
#[test]
fn large_labels_spell_out_the_dims() {
    for name in ["heat2d", "wave3d", "lbm", "nbody"] {
        let task = kevo_tasks::by_name(name).unwrap();
        for s in all_sizes(task, SizeSet::Large) {
            let (grid, steps) = s.label.rsplit_once('_').unwrap();
            assert_eq!(steps.parse::<u64>().unwrap(), *s.dims.last().unwrap());
            let grid: Vec<u64> = grid.split('x').map(|x| x.parse().unwrap()).collect();
            assert_eq!(grid, s.dims[..s.dims.len() - 1], "{name} {}", s.label);
        }
    }
    for s in all_sizes(kevo_tasks::by_name("hmc").unwrap(), SizeSet::Large) {
        assert_eq!(s.label, format!("d{}_K{}", s.dims[0], s.dims[1]));
    }
    for s in all_sizes(kevo_tasks::by_name("saxpy").unwrap(), SizeSet::Large) {
        assert_eq!(s.label, format!("{}M", s.dims[0] >> 20));
    }
}

/// CPU cost of inputs, reference and check at the large sizes (the check
/// is fed the timed inputs' Data as a stand-in output, which is fine for
/// timing). Run on a big machine with
/// `cargo test -p kevo-tasks --release --test large_sizes -- --ignored --nocapture large_reference_and_check_times`;
/// `LARGE_TASKS=nbody,hmc` picks tasks, `LARGE_SIZES=49152_10` sizes.
#[test]
#[ignore = "generates every large input: minutes and tens of GB"]
fn large_reference_and_check_times() {
    let only = std::env::var("LARGE_TASKS").ok();
    let only_sizes = std::env::var("LARGE_SIZES").ok();
    println!(
        "{} threads; {:<7} {:<16} {:>9} {:>11} {:>9}",
        rayon_threads(),
        "task",
        "size",
        "inputs s",
        "reference s",
        "check s"
    );
    for name in TASKS {
        if let Some(only) = &only
            && !only.split(',').any(|t| t == name)
        {
            continue;
        }
        let task = kevo_tasks::by_name(name).unwrap();
        for s in all_sizes(task, SizeSet::Large) {
            if let Some(only) = &only_sizes
                && !only.split(',').any(|l| l == s.label)
            {
                continue;
            }
            let (p, inputs) = timed(|| task.problem(&s, task.default_seed()));
            let (r, reference) = timed(|| task.reference(&s, &p));
            let outputs: Vec<Vec<u8>> = p
                .outputs
                .iter()
                .map(|&i| match &p.buffers[i].init {
                    kevo_tasks::BufferInit::Data(d) => d.to_vec(),
                    _ => vec![0u8; p.buffers[i].bytes],
                })
                .collect();
            let (v, check) = timed(|| task.check(&s, &p, &r, &outputs));
            println!(
                "{:<7} {:<16} {inputs:>9.2} {reference:>11.2} {check:>9.2}  ({} {:.3e})",
                name, s.label, v.metric, v.value
            );
        }
    }
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn large_sizes_are_distinct_and_memory_bound_ones_exceed_the_cache() {
    for name in ["ising", "gradshaf", "fft3d", "adi3d", "morton", "lj"] {
        let task = kevo_tasks::by_name(name).unwrap();
        let all = large_sizes(task);
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.label, b.label, "{name}");
                assert_ne!(a.dims, b.dims, "{name}");
            }
            for set in [SizeSet::Full, SizeSet::Smoke] {
                let p = task.sizes(set);
                let other: Vec<&Size> = p.all().collect();
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
    for s in large_sizes(lj) {
        let w = lj.work(&s);
        // At least ~5 ms at 10 % of an H100's ~60 TFLOPS FP32.
        assert!(w >= 2.5e10, "lj {}: {w:e} FLOPs", s.label);
        println!("lj {}: {w:.3e} FLOPs", s.label);
    }
}

#[test]
#[ignore = "measurement: inputs and reference at every large size (16 cores: about a minute in all)"]
fn large_reference_and_work_times() {
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
        for size in large_sizes(task) {
            let (p, inputs_s) = timed(|| task.problem(&size, task.default_seed()));
            let (r, ref_s) = timed(|| task.reference(&size, &p));
            let (work, work_s) = timed(|| task.work(&size));
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
