//! wave3d, nbody, hmc, lbm and ising through the public interface: what the
//! proposer sees, and (ignored by default) the CPU cost of inputs and
//! references at the full sizes, reported by `cargo test -p kevo-tasks
//! --release --test tasks_part1 -- --ignored --nocapture`.

use std::time::Instant;

use kevo_backend::Dialect;
use kevo_tasks::SizeSet;

const TASKS: [&str; 5] = ["wave3d", "nbody", "hmc", "lbm", "ising"];

#[test]
fn briefs_and_signatures_never_show_the_held_out_size() {
    for name in TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let mut texts = vec![task.description()];
        for d in [Dialect::OpenCl, Dialect::Cuda] {
            texts.extend(task.signature(d));
            texts.extend(task.seed(d));
        }
        for set in [SizeSet::Full, SizeSet::Smoke] {
            let held = task.sizes(set).held_out.label;
            for t in &texts {
                assert!(!t.contains(&held), "{name} mentions {held}");
            }
        }
        assert!(task.description().contains("// kevo: block"), "{name}");
        for k in task.kernel_names() {
            assert!(task.signature(Dialect::Cuda).unwrap().contains(k));
            assert!(task.signature(Dialect::OpenCl).unwrap().contains(k));
        }
    }
}

#[test]
#[ignore = "timing report; slow in debug builds"]
fn reference_times_full_sizes() {
    println!(
        "{:<8} {:<16} {:>10} {:>12}",
        "task", "size", "inputs s", "reference s"
    );
    for name in TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let plan = task.sizes(SizeSet::Full);
        for size in plan.in_distribution.iter().chain([&plan.held_out]) {
            let t = Instant::now();
            let problem = task.problem(size, task.default_seed());
            let inputs = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let reference = task.reference(size, &problem);
            let cpu = t.elapsed().as_secs_f64();
            drop(reference);
            println!("{name:<8} {:<16} {inputs:>10.3} {cpu:>12.3}", size.label);
        }
    }
}
