//! The example task folders under examples/tasks load, and each builds the
//! same host program as the built-in task it restates: the same buffers
//! with the same bytes (the same seeded inputs), the same launches and the
//! same checked outputs, at every size of every set.

use std::path::Path;

use kevo_tasks::folder::FolderTask;
use kevo_tasks::{BufferInit, SizeSet};

fn example(name: &str) -> FolderTask {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/tasks")
        .join(name);
    FolderTask::load(&root).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_saxpy_folder_builds_the_built_in_saxpy_program() {
    let folder = example("saxpy");
    let builtin = kevo_tasks::by_name("saxpy").unwrap();
    assert_eq!(folder.spec.work.as_ref().unwrap().text(), "12 * N");
    for set in [SizeSet::Smoke, SizeSet::Full] {
        let plan = builtin.sizes(set);
        assert_eq!(folder.spec.sizes[&set], plan, "{set}");
        // The smallest size of the set is enough to compare bytes.
        let size = &plan.in_distribution[0];
        for seed in [builtin.default_seed(), 12345] {
            let (a, b) = (folder.problem(size, seed), builtin.problem(size, seed));
            assert_eq!(a.buffers.len(), b.buffers.len());
            for (x, y) in a.buffers.iter().zip(&b.buffers) {
                assert_eq!((x.bytes, x.access), (y.bytes, y.access), "{}", x.name);
                match (&x.init, &y.init) {
                    (BufferInit::Data(p), BufferInit::Data(q)) => {
                        assert!(p == q, "{}: the inputs differ", x.name)
                    }
                    (p, q) => panic!("{}: {p:?} against {q:?}", x.name),
                }
            }
            assert_eq!(a.outputs, b.outputs);
            assert_eq!(a.launches.len(), b.launches.len());
            for (l, m) in a.launches.iter().zip(&b.launches) {
                assert_eq!(
                    (l.kernel, l.threads, l.block),
                    (m.kernel, m.threads, m.block)
                );
                assert_eq!(l.args, m.args);
            }
        }
    }
    assert_eq!(folder.dialects.len(), 2);
    assert_eq!(
        folder.dialects["cuda"].0,
        builtin.seed(kevo_backend::Dialect::Cuda).unwrap()
    );
}

/// The launches (kernel, threads, block, arguments) and checked outputs of
/// `folder` and the built-in task of the same seed agree at every size of
/// every set; the seeds and signatures are the built-in's.
fn same_program_shape(folder: &FolderTask, builtin: &kevo_tasks::Task) {
    for set in [SizeSet::Smoke, SizeSet::Full, SizeSet::Large] {
        let plan = builtin.sizes(set);
        assert_eq!(folder.spec.sizes[&set], plan, "{set}");
        for size in plan.in_distribution.iter().chain([&plan.held_out]) {
            let (a, b) = (folder.problem(size, 1), builtin.problem(size, 1));
            assert_eq!(a.outputs, b.outputs, "{}", size.label);
            assert_eq!(a.launches.len(), b.launches.len(), "{}", size.label);
            for (l, m) in a.launches.iter().zip(&b.launches) {
                assert_eq!(
                    (l.kernel, l.threads, l.block, &l.args),
                    (m.kernel, m.threads, m.block, &m.args),
                    "{}",
                    size.label
                );
            }
            let shape = |p: &kevo_tasks::Problem| -> Vec<(usize, kevo_tasks::Access, bool)> {
                p.buffers
                    .iter()
                    .map(|b| (b.bytes, b.access, matches!(b.init, BufferInit::Data(_))))
                    .collect()
            };
            assert_eq!(shape(&a), shape(&b), "{}", size.label);
            // Large sizes: the shapes are enough (the inputs are GiBs).
            if set == SizeSet::Large {
                break;
            }
        }
    }
    for d in [kevo_backend::Dialect::Cuda, kevo_backend::Dialect::OpenCl] {
        let name = if d == kevo_backend::Dialect::Cuda {
            "cuda"
        } else {
            "opencl"
        };
        assert_eq!(folder.dialects[name].0, builtin.seed(d).unwrap());
        assert_eq!(folder.dialects[name].1, builtin.signature(d).unwrap());
    }
}

#[test]
fn the_heat2d_folder_builds_the_built_in_heat2d_program() {
    let folder = example("heat2d");
    let builtin = kevo_tasks::by_name("heat2d").unwrap();
    same_program_shape(&folder, builtin);
    // The same draw inside; the built-in zeroes the border.
    let size = &builtin.sizes(SizeSet::Smoke).in_distribution[0];
    let seed = builtin.default_seed();
    let (a, b) = (folder.problem(size, seed), builtin.problem(size, seed));
    let (BufferInit::Data(p), BufferInit::Data(q)) = (&a.buffers[0].init, &b.buffers[0].init)
    else {
        panic!("A starts with data in both");
    };
    let [nx, ny, _] = size.usize_dims();
    for j in 1..ny - 1 {
        for i in 1..nx - 1 {
            let at = 4 * (j * nx + i);
            assert_eq!(p[at..at + 4], q[at..at + 4], "cell ({i}, {j})");
        }
    }
}

#[test]
fn the_nbody_folder_builds_the_built_in_nbody_program() {
    let folder = example("nbody");
    same_program_shape(&folder, kevo_tasks::by_name("nbody").unwrap());
    assert_eq!(folder.checks.len(), 2);
}

/// The folder task's host-side hot paths against the built-in's, at
/// saxpy's largest full size (64M elements): building the problem (input
/// generation, once per size and seed) and checking one output (once per
/// candidate and size). Run with
/// `cargo test --release -p kevo-tasks --test folders -- --ignored --nocapture`;
/// the results are in docs/BENCHMARKS.md.
#[test]
#[ignore = "a benchmark: run it in release and read the output"]
fn folder_host_paths_cost_about_what_the_built_in_paths_cost() {
    let folder = example("saxpy");
    let task = folder.clone().into_task();
    let builtin = kevo_tasks::by_name("saxpy").unwrap();
    let size = builtin.sizes(SizeSet::Full).in_distribution[2].clone();
    let time = |f: &mut dyn FnMut()| {
        let mut samples: Vec<f64> = (0..5)
            .map(|_| {
                let t = std::time::Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        (samples[2], samples[0], samples[4])
    };
    let seed = builtin.default_seed();
    let p_folder = time(&mut || drop(task.problem(&size, seed)));
    let p_builtin = time(&mut || drop(builtin.problem(&size, seed)));
    let problem = builtin.problem(&size, seed);
    let reference = builtin.reference(&size, &problem);
    // The built-in's expected y as the folder's expected output, and an
    // honest output one ulp off in every element.
    let BufferInit::Data(x) = &problem.buffers[0].init else {
        panic!()
    };
    let BufferInit::Data(y) = &problem.buffers[1].init else {
        panic!()
    };
    let want: Vec<u8> = x
        .chunks_exact(4)
        .zip(y.chunks_exact(4))
        .flat_map(|(a, b)| {
            let (a, b) = (
                f32::from_le_bytes(a.try_into().unwrap()),
                f32::from_le_bytes(b.try_into().unwrap()),
            );
            (2.5f32 * a + b).to_le_bytes()
        })
        .collect();
    let got: Vec<u8> = want
        .chunks_exact(4)
        .flat_map(|c| f32::from_bits(u32::from_le_bytes(c.try_into().unwrap()) + 1).to_le_bytes())
        .collect();
    let c_folder = time(&mut || assert!(folder.check_output("y", &got, &want).passed));
    let outputs = vec![got.clone()];
    let c_builtin =
        time(&mut || assert!(builtin.check(&size, &problem, &reference, &outputs).passed));
    let show = |what: &str, (m, lo, hi): (f64, f64, f64)| {
        println!("{what:28} median {m:.3} s (min {lo:.3}, max {hi:.3}) over 5");
    };
    println!(
        "saxpy {} on {} threads:",
        size.label,
        rayon::current_num_threads()
    );
    show("problem, folder", p_folder);
    show("problem, built-in", p_builtin);
    show("check one output, folder", c_folder);
    show("check one output, built-in", c_builtin);
}
