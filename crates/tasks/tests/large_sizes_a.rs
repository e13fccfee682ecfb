//! The `large` size set of saxpy, heat2d, wave3d, nbody, hmc and lbm: every
//! memory-bound size has a working set of at least 256 MiB (4x a 64 MB
//! last-level cache), every compute-bound size takes at least ~5 ms at an
//! H100's FP32 peak. No large inputs are generated: working sets are
//! computed from the dims by a formula that is checked against the real
//! buffer list at the (cheap) smoke sizes.

use kevo_backend::Dialect;
use kevo_tasks::{CeilingKind, Size, SizeSet, Task};

const TASKS: [&str; 6] = ["saxpy", "heat2d", "wave3d", "nbody", "hmc", "lbm"];

/// 256 MiB.
const MIN_WORKING_SET: u64 = 256 << 20;
/// An H100 SXM's FP32 peak (non-tensor), FLOP/s.
const H100_FP32: f64 = 67e12;

/// Sum of the problem's buffer bytes, from the dims.
fn working_set(task: &str, s: &Size) -> u64 {
    let d = &s.dims;
    match task {
        "saxpy" => 8 * d[0],
        "heat2d" => 2 * 4 * d[0] * d[1],
        "wave3d" => 3 * 4 * d[0] * d[1] * d[2],
        "lbm" => 2 * 4 * 9 * d[0] * d[1],
        "nbody" => 4 * 16 * d[0] + 4 * d[0],
        "hmc" => 2 * 4 * d[0] * d[1] + 4 * d[1] + 4 * d[0] * d[0],
        _ => unreachable!(),
    }
}

fn all_sizes(task: &Task, set: SizeSet) -> Vec<Size> {
    let plan = task.sizes(set);
    let mut v = plan.in_distribution;
    v.push(plan.held_out);
    v
}

#[test]
fn the_working_set_formula_matches_the_buffers() {
    for name in TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        for s in all_sizes(task, SizeSet::Smoke) {
            let p = task.problem(&s, 1);
            let bytes: u64 = p.buffers.iter().map(|b| b.bytes as u64).sum();
            assert_eq!(bytes, working_set(name, &s), "{name} {}", s.label);
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
                    let ws = working_set(name, s);
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
            assert!(working_set(name, s) / 4 < u32::MAX as u64, "{name}");
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
/// `cargo test -p kevo-tasks --release --test large_sizes_a -- --ignored --nocapture`;
/// `LARGE_TASKS=nbody,hmc` picks tasks, `LARGE_SIZES=49152_10` sizes.
#[test]
#[ignore = "generates every large input: minutes and tens of GB"]
fn large_reference_times() {
    use std::time::Instant;
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
            let t = Instant::now();
            let p = task.problem(&s, task.default_seed());
            let inputs = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let r = task.reference(&s, &p);
            let reference = t.elapsed().as_secs_f64();
            let outputs: Vec<Vec<u8>> = p
                .outputs
                .iter()
                .map(|&i| match &p.buffers[i].init {
                    kevo_tasks::BufferInit::Data(d) => d.to_vec(),
                    _ => vec![0u8; p.buffers[i].bytes],
                })
                .collect();
            let t = Instant::now();
            let v = task.check(&s, &p, &r, &outputs);
            let check = t.elapsed().as_secs_f64();
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
