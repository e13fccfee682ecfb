//! saxpy, heat2d, wave3d, nbody, hmc and lbm draw their inputs from the input
//! seed, so the evaluator's verification run (another seed) really is on
//! fresh inputs: the Data buffers and the references differ between seeds,
//! and an answer computed for one seed (replayed by a memoising kernel)
//! fails the check for another. The launches, by-value arguments included,
//! do not depend on the seed: the evaluator reuses the timed run's launches
//! for verification.

#[path = "models_a.rs"]
mod models;

use kevo_tasks::{BufferInit, Problem, Size, SizeSet, Task};
use models::*;

const TASKS: [&str; 6] = ["saxpy", "heat2d", "wave3d", "nbody", "hmc", "lbm"];

fn smoke_sizes(task: &Task) -> Vec<Size> {
    let plan = task.sizes(SizeSet::Smoke);
    let mut v = plan.in_distribution;
    v.push(plan.held_out);
    v
}

/// The honest CPU model's outputs (the reference's own arithmetic).
fn answer(name: &str, size: &Size, p: &Problem) -> Vec<Vec<u8>> {
    let v = Variant::EXACT;
    match name {
        "saxpy" => saxpy(p, v, None),
        "heat2d" => heat2d(size, p, v, None),
        "wave3d" => wave3d(size, p, v, None),
        "nbody" => nbody_f64(size, p),
        "hmc" => hmc(size, p, v, None),
        "lbm" => lbm(size, p, v, None),
        _ => unreachable!(),
    }
}

fn data(p: &Problem) -> Vec<Option<&[u8]>> {
    p.buffers
        .iter()
        .map(|b| match &b.init {
            BufferInit::Data(d) => Some(d.as_slice()),
            _ => None,
        })
        .collect()
}

/// Everything about the buffers but their Data contents.
fn layout(p: &Problem) -> String {
    p.buffers
        .iter()
        .map(|b| {
            let init = match b.init {
                BufferInit::Data(_) => "data",
                BufferInit::Zero => "zero",
                BufferInit::Sentinel => "sentinel",
            };
            format!("{} {} {init} {:?}", b.name, b.bytes, b.access)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn inputs_and_references_depend_on_the_seed_and_launches_do_not() {
    for name in TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let base = task.default_seed();
        // The default seed against the evaluator's first verification seed,
        // and two arbitrary seeds.
        for (s1, s2) in [(base, base.wrapping_add(0x9E37_79B9_7F4A_7C15)), (1, 2)] {
            for size in smoke_sizes(task) {
                let ctx = format!("{name} {} seeds {s1:#x}/{s2:#x}", size.label);
                let (p1, p2) = (task.problem(&size, s1), task.problem(&size, s2));
                // Same buffers, launches (by-value arguments included) and
                // outputs.
                assert_eq!(layout(&p1), layout(&p2), "{ctx}");
                assert_eq!(
                    format!("{:?}", p1.launches),
                    format!("{:?}", p2.launches),
                    "{ctx}: launches depend on the seed"
                );
                assert_eq!(p1.outputs, p2.outputs, "{ctx}");
                // Different Data contents.
                let (d1, d2) = (data(&p1), data(&p2));
                assert!(d1.iter().any(|d| d.is_some()), "{ctx}");
                assert_ne!(d1, d2, "{ctx}: Data buffers do not depend on the seed");
                // Different references: each seed's answer passes its own
                // check and fails the other's.
                let (r1, r2) = (task.reference(&size, &p1), task.reference(&size, &p2));
                let (a1, a2) = (answer(name, &size, &p1), answer(name, &size, &p2));
                let v = task.check(&size, &p1, &r1, &a1);
                assert!(v.passed, "{ctx}: the honest answer fails: {v:?}");
                let v = task.check(&size, &p2, &r2, &a2);
                assert!(v.passed, "{ctx}: the honest answer fails: {v:?}");
                let v = task.check(&size, &p2, &r2, &a1);
                assert!(!v.passed, "{ctx}: a replayed answer passes: {v:?}");
                let v = task.check(&size, &p1, &r1, &a2);
                assert!(!v.passed, "{ctx}: a replayed answer passes: {v:?}");
            }
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_inputs() {
    for name in TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let size = &task.sizes(SizeSet::Smoke).in_distribution[0];
        let (p1, p2) = (task.problem(size, 7), task.problem(size, 7));
        assert_eq!(data(&p1), data(&p2), "{name}");
    }
}
