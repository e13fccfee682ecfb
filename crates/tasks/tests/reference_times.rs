//! CPU cost of the inputs and references (and, for lj, gradshaf, fft3d,
//! adi3d and morton, of work()) at the full sizes, reported by
//! `cargo test -p kevo-tasks --release --test reference_times -- --ignored
//! --nocapture`.

mod common;

use common::{all_sizes, timed};
use kevo_tasks::{SizeSet, Task, by_name};

#[test]
#[ignore = "timing report; slow in debug builds"]
fn reference_times_full_sizes() {
    println!(
        "{:<8} {:<16} {:>10} {:>12}",
        "task", "size", "inputs s", "reference s"
    );
    for name in ["wave3d", "nbody", "hmc", "lbm", "ising"] {
        let task = by_name(name).unwrap();
        for size in &all_sizes(task, SizeSet::Full) {
            let (problem, inputs) = timed(|| task.problem(size, task.default_seed()));
            let (reference, cpu) = timed(|| task.reference(size, &problem));
            drop(reference);
            println!("{name:<8} {:<16} {inputs:>10.3} {cpu:>12.3}", size.label);
        }
    }
}

#[test]
#[ignore = "measurement: prints the reference time of every full size"]
fn reference_and_work_times_full_sizes() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("CPU reference times at full sizes ({threads} threads)");
    println!(
        "{:<9} {:<20} {:>9} {:>9} {:>9} {:>16}",
        "task", "size", "inputs_s", "ref_s", "work_s", "work"
    );
    let tasks: [&Task; 5] =
        ["lj", "gradshaf", "fft3d", "adi3d", "morton"].map(|n| by_name(n).unwrap());
    for task in tasks {
        for size in &all_sizes(task, SizeSet::Full) {
            let (problem, inputs_s) = timed(|| task.problem(size, task.default_seed()));
            let (reference, ref_s) = timed(|| task.reference(size, &problem));
            let (work, work_s) = timed(|| task.work(size));
            drop(reference);
            println!(
                "{:<9} {:<20} {:>9.3} {:>9.3} {:>9.3} {:>16.0}",
                task.name(),
                size.label,
                inputs_s,
                ref_s,
                work_s,
                work
            );
        }
    }
}
