//! Every task draws its inputs from the input seed, so the evaluator's
//! verification run (another seed) really is on fresh inputs: the Data
//! buffers and the references differ between seeds, and an answer computed
//! for one seed (replayed by a memoising kernel) fails the check for
//! another. The launches (by-value arguments included), the buffer layout
//! and the outputs do not depend on the seed: the evaluator reuses the
//! timed run's launches for verification.

mod common;

use common::all_sizes;
use common::models::*;
use kevo_tasks::{BufferInit, Problem, Size, SizeSet, Task};

/// The tasks with CPU models in `common/models.rs` (spec sections 1 to 6):
/// their honest answers are computed and replayed.
const MODELLED_TASKS: [&str; 6] = ["saxpy", "heat2d", "wave3d", "nbody", "hmc", "lbm"];

/// The other tasks (spec sections 7 to 12): their references must differ
/// between seeds in most bytes.
const OTHER_TASKS: [&str; 6] = ["ising", "lj", "gradshaf", "fft3d", "adi3d", "morton"];

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
    for name in MODELLED_TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let base = task.default_seed();
        // The default seed against the evaluator's first verification seed,
        // and two arbitrary seeds.
        for (s1, s2) in [(base, base.wrapping_add(0x9E37_79B9_7F4A_7C15)), (1, 2)] {
            for size in all_sizes(task, SizeSet::Smoke) {
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
    for name in MODELLED_TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let size = &task.sizes(SizeSet::Smoke).in_distribution[0];
        let (p1, p2) = (task.problem(size, 7), task.problem(size, 7));
        assert_eq!(data(&p1), data(&p2), "{name}");
    }
}

/// The reference as raw bytes, whatever its element type.
fn reference_bytes(task: &Task, r: &kevo_tasks::Reference) -> Vec<u8> {
    if let Some(v) = r.downcast_ref::<Vec<u8>>() {
        return v.clone();
    }
    if let Some(v) = r.downcast_ref::<Vec<f32>>() {
        return v.iter().flat_map(|x| x.to_le_bytes()).collect();
    }
    panic!("{}: unexpected reference type", task.name());
}

#[test]
fn inputs_and_references_depend_on_the_seed_but_launches_do_not() {
    for name in OTHER_TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let s1 = task.default_seed();
        let s2 = s1 ^ 0x5EED_0001;
        for size in &all_sizes(task, SizeSet::Smoke) {
            let (a, b) = (task.problem(size, s1), task.problem(size, s2));
            let what = format!("{name} {}", size.label);
            // The same host program.
            assert_eq!(
                format!("{:?}", a.launches),
                format!("{:?}", b.launches),
                "{what}: launches depend on the seed"
            );
            assert_eq!(a.outputs, b.outputs, "{what}");
            assert_eq!(a.buffers.len(), b.buffers.len(), "{what}");
            // Different state: at least one Data buffer differs, and the
            // buffers that hold the initial state differ in most bytes.
            let mut differing = 0;
            for (x, y) in a.buffers.iter().zip(&b.buffers) {
                assert_eq!((&x.name, x.bytes, x.access), (&y.name, y.bytes, y.access));
                match (&x.init, &y.init) {
                    (BufferInit::Data(p), BufferInit::Data(q)) => {
                        assert_eq!(p.len(), q.len(), "{what} {}", x.name);
                        if p != q {
                            differing += 1;
                        }
                    }
                    (BufferInit::Zero, BufferInit::Zero)
                    | (BufferInit::Sentinel, BufferInit::Sentinel) => {}
                    _ => panic!("{what}: buffer {} changes kind with the seed", x.name),
                }
            }
            assert!(differing > 0, "{what}: Data buffers ignore the seed");
            let (ra, rb) = (task.reference(size, &a), task.reference(size, &b));
            let (ra, rb) = (reference_bytes(task, &ra), reference_bytes(task, &rb));
            assert_eq!(ra.len(), rb.len(), "{what}");
            let diff = ra.iter().zip(&rb).filter(|(x, y)| x != y).count();
            assert!(
                diff * 10 > ra.len(),
                "{what}: references differ in only {diff} of {} bytes",
                ra.len()
            );
            // The same seed gives the same inputs.
            let again = task.problem(size, s1);
            for (x, y) in a.buffers.iter().zip(&again.buffers) {
                if let (BufferInit::Data(p), BufferInit::Data(q)) = (&x.init, &y.init) {
                    assert_eq!(p, q, "{what}: {} is not deterministic", x.name);
                }
            }
        }
    }
}
