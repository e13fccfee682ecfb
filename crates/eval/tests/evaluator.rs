//! The evaluator end to end on every backend's first device (PoCL in CI,
//! the H100 under scripts/gpu-check): every seed at the smoke and held-out
//! sizes, compile and launch failures, wrong results, block declarations.
//! Triton runs the suites whose kernels it has: the seeds, and the wrong
//! saxpy kernels of tests/kernels/*.py.

mod common;

use kevo_backend::{Backend, Dialect};
use kevo_eval::Outcome;
use kevo_runtimes::testing::UnderTest;
use kevo_tasks::SizeSet;

use common::{evaluator, seed, smoke, task};

kevo_runtimes::backend_tests!(
    seeds_are_correct_with_a_score_at_smoke_sizes,
    a_kernel_that_skips_the_boundary_is_wrong_with_nan,
    a_kernel_that_writes_nothing_is_wrong,
    a_syntax_error_reports_the_compiler_message_and_line,
    a_missing_entry_point_is_named,
    a_wrong_argument_count_is_a_runtime_error_naming_the_counts,
    an_unusual_but_correct_kernel_is_accepted,
    an_empty_source_is_no_code,
    a_declared_block_is_applied_to_every_launch,
    invalid_block_declarations_are_rejected_with_a_reason,
    fixed_blocks_ignore_declarations,
    a_chosen_verification_seed_is_the_one_whose_answers_were_shipped;
    triton:
    seeds_are_correct_with_a_score_at_smoke_sizes,
    a_kernel_that_writes_nothing_is_wrong,
    a_missing_entry_point_is_named,
    an_empty_source_is_no_code,
);

/// A worker holds a folder task's expected outputs only for the seeds its
/// coordinator computed: the timed seed and the verification seed it chose
/// (`Evaluator::verify_next_on`). Verified on that seed the candidate is
/// correct; a fresh evaluator draws its own secret, so its inputs are not
/// the shipped ones and the worker reports the answer missing, naming it.
fn a_chosen_verification_seed_is_the_one_whose_answers_were_shipped(b: UnderTest) {
    if b.dialect != Dialect::OpenCl {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("saxpy-command");
    std::fs::create_dir(&root).unwrap();
    // The checkout the binary runs in (`KEVO_REPO`, which scripts/gpu-check
    // sets on the device machine), else the one it was built in.
    let repo = std::env::var_os("KEVO_REPO")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    let example = repo.join("examples/tasks/saxpy");
    for entry in std::fs::read_dir(&example).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, root.join(path.file_name().unwrap())).unwrap();
    }
    let toml = std::fs::read_to_string(root.join("task.toml")).unwrap();
    let kernel_reference = "kernel = { cuda = \"reference.cu\", opencl = \"reference.cl\" }";
    assert!(toml.contains(kernel_reference));
    std::fs::write(
        root.join("task.toml"),
        toml.replace(
            kernel_reference,
            "command = [\"python3\", \"reference.py\"]",
        ),
    )
    .unwrap();
    let load = || kevo_tasks::folder::FolderTask::load(&root).unwrap();
    let coordinator = load().into_task();
    let worker = load().into_shipped_task();
    let sizes = smoke(&coordinator);
    let chosen = 2;
    let Some(mut ev) = evaluator(b) else { return };
    // The evaluator's seeds, from its secret, as a supervisor computes them.
    let timed = ev.timed_seed(&coordinator);
    for size in &sizes {
        for seed in [timed, ev.verify_seed(&coordinator, chosen)] {
            let (fingerprint, outputs) = coordinator
                .folder()
                .unwrap()
                .expected_at(size, seed)
                .unwrap()
                .unwrap();
            worker
                .folder()
                .unwrap()
                .add_expected(&size.label, &fingerprint, outputs.to_vec());
        }
    }
    let source = seed(&worker, Dialect::OpenCl);
    ev.verify_next_on(chosen);
    let e = ev.evaluate(&worker, source, &sizes);
    assert!(e.outcome.is_correct(), "{}", e.outcome.summary());
    // The missing answer panics in the task's reference; the worker's
    // serve loop catches it as the evaluation's internal error.
    let Some(mut fresh) = evaluator(b) else {
        return;
    };
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fresh.evaluate(&worker, source, &sizes)
    }))
    .expect_err("another evaluator's inputs, whose answers were not shipped");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("no expected outputs were sent"),
        "{message}"
    );
}

fn seeds_are_correct_with_a_score_at_smoke_sizes(b: UnderTest) {
    let Some(mut ev) = common::evaluator_with(b, kevo_eval::EvalConfig::default()) else {
        return;
    };
    for task in kevo_tasks::all() {
        let seed = seed(task, b.dialect);
        let e = ev.evaluate(task, seed, &smoke(task));
        let Outcome::Correct { score } = e.outcome else {
            panic!("{} seed: {}", task.name(), e.outcome.summary());
        };
        assert!(score > 0.0 && score.is_finite(), "{score}");
        assert_eq!(e.sizes.len(), 3);
        for s in &e.sizes {
            // Statistical and exact-match checks have no single tolerance.
            assert!(s.correct && s.tolerance.is_none_or(|t| s.error <= t));
            // At least 10 timed runs, more until the spread is small or the cap.
            let runs = s.time.samples_s.len();
            let config = kevo_eval::EvalConfig::default();
            assert!(
                (config.timed_runs..=config.max_timed_runs).contains(&runs),
                "{runs}"
            );
            assert!(
                runs == config.max_timed_runs
                    || s.time.spread <= config.target_spread
                    || s.time.samples_s.iter().sum::<f64>() >= config.timing_budget_s,
                "stopped at {runs} runs with spread {}",
                s.time.spread
            );
            assert!((2..=5).contains(&s.warmups), "{}", s.warmups);
            assert!(s.time.q1_s <= s.time.median_s && s.time.median_s <= s.time.q3_s);
            assert!(
                s.time.min_s > 0.0
                    && s.time.min_s <= s.time.median_s
                    && s.time.median_s <= s.time.max_s
            );
            assert!((s.fraction - s.achieved / s.ceiling).abs() < 1e-12);
        }
        for s in &e.sizes {
            eprintln!(
                "{} {}: {} {:.3e} (tolerance {:?}), median {:.3} ms",
                task.name(),
                s.label,
                s.metric,
                s.error,
                s.tolerance,
                s.time.median_s * 1e3
            );
        }
        let gmean = (e.sizes.iter().map(|s| s.fraction.ln()).sum::<f64>() / 3.0).exp();
        assert!((score - gmean).abs() < 1e-9 * gmean);
        // Every entry point's resources, in the task's order.
        let names: Vec<&str> = e.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, task.kernel_names(), "{}", task.name());
        for k in &e.kernels {
            assert!(k.info.max_threads_per_block >= 1, "{k:?}");
            match b.dialect {
                // The driver's count for the compiled entry point, and its
                // occupancy calculator at the block the launches used
                // (Triton's cubins run on the CUDA backend).
                Dialect::Cuda | Dialect::Triton => {
                    assert!(k.info.registers_per_thread.is_some_and(|r| r > 0));
                    let o = k.occupancy.unwrap_or_else(|| panic!("no occupancy: {k:?}"));
                    assert!(
                        o.active_blocks_per_sm >= 1
                            && o.block_threads >= 1
                            && o.fraction() > 0.0
                            && o.fraction() <= 1.0,
                        "{} {}: {o:?}",
                        task.name(),
                        k.name
                    );
                    eprintln!(
                        "{} {}: {} registers, {} blocks of {} per SM, occupancy {:.0}%",
                        task.name(),
                        k.name,
                        k.info.registers_per_thread.unwrap_or(0),
                        o.active_blocks_per_sm,
                        o.block_threads,
                        o.fraction() * 100.0
                    );
                }
                _ => {
                    assert_eq!(
                        k.info.registers_per_thread, None,
                        "OpenCL has no register count"
                    );
                    assert_eq!(k.occupancy, None, "OpenCL has no occupancy calculator");
                }
            }
        }
        // The held-out and validation sizes evaluate too.
        let plan = task.sizes(SizeSet::Smoke);
        let hidden: Vec<_> = plan
            .all()
            .skip(plan.in_distribution.len())
            .cloned()
            .collect();
        let e = ev.evaluate(task, seed, &hidden);
        assert!(
            e.outcome.is_correct(),
            "{} held-out and validation: {}",
            task.name(),
            e.outcome.summary()
        );
        let labels: Vec<&str> = e.sizes.iter().map(|s| s.label.as_str()).collect();
        let want: Vec<&str> = hidden.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, want);
    }
}

fn a_kernel_that_skips_the_boundary_is_wrong_with_nan(b: UnderTest) {
    let Some(mut ev) = evaluator(b) else { return };
    let task = task("heat2d");
    let e = ev.evaluate(
        task,
        kernel!(b.dialect, "heat2d_skips_boundary"),
        &smoke(task),
    );
    match e.outcome {
        Outcome::WrongResult {
            size,
            metric,
            value,
            tolerance,
        } => {
            assert_eq!(size, "64x64_20", "stops at the first size");
            assert_eq!(metric, "max_abs");
            assert!(
                value.is_nan(),
                "unwritten cells keep the NaN sentinel: {value}"
            );
            // The audited tolerance: 2e-6 max(1, max|u|) (docs/tolerance-audit-a.md).
            assert!(tolerance.unwrap() >= 2e-6);
        }
        other => panic!("expected a wrong result, got {other:?}"),
    }
    assert_eq!(e.sizes.len(), 1, "later sizes do not run");
}

fn a_kernel_that_writes_nothing_is_wrong(b: UnderTest) {
    let Some(mut ev) = evaluator(b) else { return };
    let task = task("saxpy");
    let source = match b.dialect {
        Dialect::Triton => include_str!("kernels/saxpy_writes_nothing.py"),
        dialect => kernel!(dialect, "saxpy_writes_nothing"),
    };
    let e = ev.evaluate(task, source, &smoke(task));
    let Outcome::WrongResult {
        value, tolerance, ..
    } = e.outcome
    else {
        panic!("{:?}", e.outcome);
    };
    assert!(
        value > tolerance.unwrap() * 1000.0,
        "y unchanged is off by |a*x|: {value}"
    );
    assert_eq!(e.outcome.score(), None);
}

fn a_syntax_error_reports_the_compiler_message_and_line(b: UnderTest) {
    let Some(mut ev) = evaluator(b) else { return };
    let task = task("saxpy");
    let e = ev.evaluate(task, kernel!(b.dialect, "saxpy_syntax_error"), &smoke(task));
    let Outcome::CompileError {
        message,
        diagnostics,
    } = &e.outcome
    else {
        panic!("{:?}", e.outcome);
    };
    let first = diagnostics
        .errors()
        .next()
        .unwrap_or_else(|| panic!("no parsed error in: {message}"));
    assert_eq!(first.line, Some(4), "{diagnostics:?}");
    assert!(e.kernels.is_empty(), "nothing compiled: {:?}", e.kernels);
    assert!(message.contains("yy"), "{message}");
    assert!(
        e.outcome.summary().starts_with("compile error: line 4"),
        "{}",
        e.outcome.summary()
    );
}

fn a_missing_entry_point_is_named(b: UnderTest) {
    let Some(mut ev) = evaluator(b) else { return };
    let task = task("saxpy");
    let source = match b.dialect {
        Dialect::Triton => include_str!("kernels/saxpy_wrong_name.py"),
        dialect => kernel!(dialect, "saxpy_wrong_name"),
    };
    let e = ev.evaluate(task, source, &smoke(task));
    let Outcome::CompileError { message, .. } = &e.outcome else {
        panic!("{:?}", e.outcome);
    };
    assert!(message.contains("`saxpy`"), "{message}");
}

fn a_wrong_argument_count_is_a_runtime_error_naming_the_counts(b: UnderTest) {
    let Some(mut ev) = evaluator(b) else { return };
    let task = task("saxpy");
    let e = ev.evaluate(
        task,
        kernel!(b.dialect, "saxpy_missing_argument"),
        &smoke(task),
    );
    let Outcome::RuntimeError { size, message, .. } = &e.outcome else {
        panic!("{:?}", e.outcome);
    };
    assert_eq!(size.as_deref(), Some("64K"));
    assert!(
        message.contains("takes 3 arguments") && message.contains("passes 4"),
        "{message}"
    );
    // The evaluator is still usable afterwards.
    let seed = seed(task, b.dialect);
    assert!(ev.evaluate(task, seed, &smoke(task)).outcome.is_correct());
}

fn an_unusual_but_correct_kernel_is_accepted(b: UnderTest) {
    let Some(mut ev) = evaluator(b) else { return };
    let task = task("saxpy");
    let e = ev.evaluate(task, kernel!(b.dialect, "saxpy_vectorised"), &smoke(task));
    assert!(e.outcome.is_correct(), "{}", e.outcome.summary());
}

fn an_empty_source_is_no_code(b: UnderTest) {
    let Some(mut ev) = evaluator(b) else { return };
    let task = task("saxpy");
    let e = ev.evaluate(task, "  \n", &smoke(task));
    assert_eq!(e.outcome.kind(), "no_code");
    assert!(ev.backend().info().compute_units > 0);
}

fn a_declared_block_is_applied_to_every_launch(b: UnderTest) {
    let Some(mut ev) = evaluator(b) else { return };
    let task = task("heat2d");
    let e = ev.evaluate(
        task,
        kernel!(b.dialect, "heat2d_checks_block"),
        &smoke(task),
    );
    assert!(e.outcome.is_correct(), "{}", e.outcome.summary());
    // The same kernel without the declaration runs with the default 16x16
    // block and writes NaN, which proves the check inside the kernel bites.
    let undeclared =
        kernel!(b.dialect, "heat2d_checks_block").replacen("// kevo: block 32x4", "//", 1);
    let e = ev.evaluate(task, &undeclared, &smoke(task));
    assert_eq!(e.outcome.kind(), "wrong_result", "{}", e.outcome.summary());
}

fn invalid_block_declarations_are_rejected_with_a_reason(b: UnderTest) {
    let Some(mut ev) = evaluator(b) else { return };
    let task = task("heat2d");
    let seed = &format!("// kevo: block 32x4\n{}", seed(task, b.dialect));
    let too_big = seed.replacen("block 32x4", "block 4096x4", 1);
    let e = ev.evaluate(task, &too_big, &smoke(task));
    let Outcome::RuntimeError { message, .. } = &e.outcome else {
        panic!("{:?}", e.outcome);
    };
    assert!(message.contains("allows at most"), "{message}");
    let three_d = seed.replacen("block 32x4", "block 8x8x4", 1);
    let e = ev.evaluate(task, &three_d, &smoke(task));
    assert!(
        e.outcome.summary().contains("more dimensions"),
        "{}",
        e.outcome.summary()
    );
    let garbage = seed.replacen("block 32x4", "block banana", 1);
    let e = ev.evaluate(task, &garbage, &smoke(task));
    let Outcome::CompileError { diagnostics, .. } = &e.outcome else {
        panic!("{:?}", e.outcome);
    };
    assert_eq!(diagnostics.errors().next().unwrap().line, Some(1));
    assert!(ev.evaluate(task, seed, &smoke(task)).outcome.is_correct());
}

fn fixed_blocks_ignore_declarations(b: UnderTest) {
    // fft3d's one block per line and adi3d's 32-wide blocks are part of the
    // contract: a general block declaration leaves them as they are.
    let Some(mut ev) = evaluator(b) else { return };
    for name in ["fft3d", "adi3d"] {
        let task = task(name);
        let seed = format!("// kevo: block 64\n{}", seed(task, b.dialect));
        let e = ev.evaluate(task, &seed, &smoke(task)[..1]);
        assert!(e.outcome.is_correct(), "{name}: {}", e.outcome.summary());
    }
}
