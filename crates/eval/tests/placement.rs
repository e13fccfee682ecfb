//! Every task's smoke, full, held-out and large sizes placed in two given
//! hierarchies (an H100-like GPU and a 2-core VM like CI's), with no
//! device: the placement the evaluator attaches to each size and the
//! suspicious rule build on.

use kevo_roofline::{Hierarchy, Spread, SweepPoint, human_bytes};
use kevo_tasks::{Size, SizeSet, Task};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

fn spread(gbs: f64) -> Spread {
    Spread {
        median: gbs,
        min: gbs * 0.97,
        max: gbs * 1.03,
    }
}

/// A sweep from `from` to 512 MiB in 2x steps with `level(bytes)` GB/s.
fn hierarchy(from: u64, dram: f64, is_cpu: bool, level: impl Fn(u64) -> f64) -> Hierarchy {
    let mut sweep = Vec::new();
    let mut b = from;
    while b <= 512 * MIB {
        sweep.push(SweepPoint {
            bytes: b,
            gbs: spread(level(b)),
            saturated: true,
        });
        b *= 2;
    }
    Hierarchy::from_sweep(sweep, spread(dram), is_cpu, 0)
}

/// H100-like: the sweep starts at 8 MiB (every SM busy), L2 holds 32 MiB
/// at full speed, 64 MiB is DRAM.
fn h100() -> Hierarchy {
    hierarchy(8 * MIB, 2900.0, false, |b| {
        if b <= 32 * MIB { 7000.0 } else { 2900.0 }
    })
}

/// A 2-core VM: 1 MiB at 120 GB/s, 16 MiB at 60, then DRAM at 20.
fn vm() -> Hierarchy {
    hierarchy(16 * KIB, 20.0, true, |b| {
        if b <= MIB {
            120.0
        } else if b <= 16 * MIB {
            60.0
        } else {
            20.0
        }
    })
}

fn every_size(task: &Task) -> Vec<(SizeSet, Size)> {
    let mut all = Vec::new();
    for set in [SizeSet::Smoke, SizeSet::Full, SizeSet::Large] {
        let plan = task.sizes(set);
        for s in plan.in_distribution {
            all.push((set, s));
        }
        all.push((set, plan.held_out));
    }
    all
}

#[test]
fn every_tasks_sizes_are_placed_in_the_level_that_holds_them() {
    let (gpu, cpu) = (h100(), vm());
    assert_eq!(
        gpu.levels
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        ["L2", "DRAM"]
    );
    assert_eq!(
        cpu.levels
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        ["L2", "L3", "DRAM"]
    );
    let mut placed = 0;
    for task in kevo_tasks::all() {
        for (set, size) in every_size(task) {
            let ws = task.working_set_bytes(&size);
            assert!(ws > 0, "{} {}", task.name(), size.label);
            // (hierarchy, its caches' capacities): in 2x sweeps a level
            // reaches twice its capacity, where the next point is slower.
            let cases: [(&Hierarchy, &[(&str, u64)]); 2] = [
                (&gpu, &[("L2", 32 * MIB)]),
                (&cpu, &[("L2", MIB), ("L3", 16 * MIB)]),
            ];
            for (h, caches) in cases {
                let p = h.place(ws);
                assert_eq!(p.working_set_bytes, ws);
                let expected = caches
                    .iter()
                    .find(|(_, cap)| ws < 2 * cap)
                    .map_or("DRAM", |(name, _)| *name);
                assert_eq!(
                    p.level,
                    expected,
                    "{} {} ({})",
                    task.name(),
                    size.label,
                    human_bytes(ws)
                );
                assert_eq!(p.is_dram(), expected == "DRAM");
                let capacity = caches.iter().find(|(n, _)| *n == expected).map(|(_, c)| *c);
                assert_eq!(
                    p.partial,
                    capacity.is_some_and(|c| ws > c),
                    "{}",
                    size.label
                );
                placed += 1;
            }
            eprintln!(
                "{:<9} {:<6} {:<20} {:>10}  H100-like: {:<5} VM: {}",
                task.name(),
                format!("{set:?}"),
                size.label,
                human_bytes(ws),
                gpu.place(ws).level,
                cpu.place(ws).level
            );
        }
    }
    assert!(placed >= 12 * 2 * 6, "{placed}");
}

#[test]
fn the_sizes_the_issue_names_are_cache_resident_on_an_h100() {
    // ising 4 MB, lbm 4.7 MB, saxpy 1M, heat2d 256x256 at full sizes:
    // below the L2's 32 MiB, so in L2 (and flagged as below the sweep's
    // first point, where a faster level could hold them).
    let gpu = h100();
    for (task, label) in [
        ("ising", None),
        ("lbm", None),
        ("saxpy", Some("1M")),
        ("heat2d", Some("256x256_50")),
    ] {
        let t = kevo_tasks::by_name(task).unwrap();
        let sizes = t.sizes(SizeSet::Full).in_distribution;
        let size = match label {
            Some(l) => sizes.iter().find(|s| s.label == l).unwrap().clone(),
            None => sizes.last().unwrap().clone(),
        };
        let p = gpu.place(t.working_set_bytes(&size));
        assert_eq!(p.level, "L2", "{task} {}", size.label);
        assert!(
            p.describe().starts_with("cache-resident"),
            "{}",
            p.describe()
        );
    }
}

/// fft3d's suspicious rule divides the 48 B/cell a correct kernel must
/// stream (its `min_traffic`), not the 96 B/cell the score counts: a kernel
/// as fast as cuFFT at the held-out 256³ (past the caches; 152-157% of the
/// DRAM ceiling scored, measured on an H100) is plausible, and one twice
/// that fast is not.
#[test]
fn an_fft3d_kernel_as_fast_as_cufft_is_not_suspicious() {
    let task = kevo_tasks::by_name("fft3d").unwrap();
    let size = task.sizes(SizeSet::Full).held_out;
    let ceilings = kevo_roofline::Ceilings {
        bandwidth_gbs: 3350.0,
        fp32_gflops: 67000.0,
        source: kevo_roofline::CeilingSource::Declared,
        hierarchy: Some(h100()),
        launch_overhead: None,
    };
    let working_set = task.working_set_bytes(&size);
    assert!(
        ceilings
            .hierarchy
            .as_ref()
            .unwrap()
            .place(working_set)
            .is_dram()
    );
    let rule = |fraction_scored: f64| {
        let time = task.work(&size) / (fraction_scored * 3350.0 * 1e9);
        let plausible = task.plausibility_work(&size) / time / 1e9;
        let device = kevo_eval::placement::DeviceFacts {
            driver_cache_bytes: 50 * MIB,
            is_cpu: false,
        };
        kevo_eval::placement::suspicion(plausible, task.ceiling(), &ceilings, working_set, device)
            .map(|s| s.why)
    };
    assert_eq!(rule(1.55), None, "cuFFT's speed is plausible");
    assert_eq!(rule(2.4), None, "1.2x DRAM at 48 B/cell is within the rule");
    let flagged = rule(2.6).expect("1.3x DRAM at 48 B/cell is not");
    assert!(flagged.contains("DRAM"), "{flagged}");
}
