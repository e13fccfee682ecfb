//! The evaluator times a candidate on inputs drawn from the default seed and
//! verifies it on fresh inputs drawn from another seed, reusing the timed
//! launches. For ising, lj, gradshaf, fft3d, adi3d and morton, at every smoke
//! size: two seeds give different Data buffers and different references,
//! while the launch sequence (by-value arguments included), the buffer
//! layout and the outputs do not depend on the seed.

use kevo_tasks::{BufferInit, SizeSet, Task};

const TASKS: [&str; 6] = ["ising", "lj", "gradshaf", "fft3d", "adi3d", "morton"];

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
    for name in TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let plan = task.sizes(SizeSet::Smoke);
        let s1 = task.default_seed();
        let s2 = s1 ^ 0x5EED_0001;
        for size in plan.in_distribution.iter().chain([&plan.held_out]) {
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
