//! CPU reference cost of lj, gradshaf, fft3d, adi3d and morton at the full
//! sizes. Run with `cargo test -p kevo-tasks --test reference_times_part2 --
//! --ignored --nocapture`.

use std::time::Instant;

use kevo_tasks::{SizeSet, Task, by_name};

#[test]
#[ignore = "measurement: prints the reference time of every full size"]
fn reference_times_full_sizes_part2() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("CPU reference times at full sizes ({threads} threads)");
    println!(
        "{:<9} {:<20} {:>9} {:>9} {:>9} {:>16}",
        "task", "size", "inputs_s", "ref_s", "work_s", "work"
    );
    let tasks: [&Task; 5] =
        ["lj", "gradshaf", "fft3d", "adi3d", "morton"].map(|n| by_name(n).unwrap());
    for task in tasks {
        let plan = task.sizes(SizeSet::Full);
        for size in plan.in_distribution.iter().chain([&plan.held_out]) {
            let t = Instant::now();
            let problem = task.problem(size, task.default_seed());
            let inputs_s = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let reference = task.reference(size, &problem);
            let ref_s = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let work = task.work(size);
            let work_s = t.elapsed().as_secs_f64();
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
