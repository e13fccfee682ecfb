//! lj, gradshaf, fft3d, adi3d and morton end to end on a real OpenCL device
//! (PoCL in CI): every seed is correct at the smoke sizes and at the smoke
//! held-out size, and a kernel with a typical bug is rejected.

mod common;

use std::time::Instant;

use kevo_backend::Dialect;
use kevo_eval::Outcome;
use kevo_tasks::SizeSet;

const TASKS: [&str; 5] = ["lj", "gradshaf", "fft3d", "adi3d", "morton"];

use common::{evaluator, smoke};

#[test]
fn seeds_are_correct_at_smoke_and_held_out_sizes() {
    let Some(mut ev) = evaluator() else { return };
    for name in TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let seed = task.seed(Dialect::OpenCl).unwrap();
        let t = Instant::now();
        let e = ev.evaluate(task, seed, &smoke(task));
        let elapsed = t.elapsed().as_secs_f64();
        let Outcome::Correct { score } = e.outcome else {
            panic!("{name} seed: {}", e.outcome.summary());
        };
        assert!(score > 0.0 && score.is_finite(), "{name}: {score}");
        assert_eq!(e.sizes.len(), 3);
        for s in &e.sizes {
            assert!(s.correct && s.error <= s.tolerance.unwrap(), "{name} {s:?}");
            assert!(s.time.samples_s.len() >= 10);
            eprintln!(
                "{name} {}: error {:.3e} (tolerance {:.3e}), median {:.3} ms",
                s.label,
                s.error,
                s.tolerance.unwrap(),
                s.time.median_s * 1e3
            );
        }
        eprintln!(
            "{name}: smoke evaluation {elapsed:.2} s (device {:.2} s, inputs {:.2} s, reference {:.2} s)",
            e.wall.device_s, e.wall.inputs_s, e.wall.reference_s
        );
        let held = task.sizes(SizeSet::Smoke).held_out;
        let t = Instant::now();
        let e = ev.evaluate(task, seed, std::slice::from_ref(&held));
        assert!(
            e.outcome.is_correct(),
            "{name} held-out: {}",
            e.outcome.summary()
        );
        assert_eq!(e.sizes[0].label, held.label);
        eprintln!(
            "{name} held-out {}: error {:.3e}, evaluation {:.2} s",
            held.label,
            e.sizes[0].error,
            t.elapsed().as_secs_f64()
        );
    }
}

/// Evaluate `source` for `task` at the smoke sizes and require that it is
/// rejected at the first size by the check (or, failing that, by a fault).
fn assert_rejected(task: &str, source: &str, metric: &str) {
    let Some(mut ev) = evaluator() else { return };
    let task = kevo_tasks::by_name(task).unwrap();
    let sizes = smoke(task);
    let e = ev.evaluate(task, source, &sizes);
    match &e.outcome {
        Outcome::WrongResult {
            size,
            metric: m,
            value,
            tolerance,
        } => {
            assert_eq!(size, &sizes[0].label, "stops at the first size");
            // A differing timed run is checked on its own and may fail
            // first: "max_abs_pos (timed run 2)".
            assert!(m.starts_with(metric), "{m} is not {metric}");
            assert!(
                value.is_nan() || *value > tolerance.unwrap(),
                "{value} vs {tolerance:?}"
            );
            eprintln!(
                "{}: rejected at {size}: {m} = {value:.3e} > {:.3e}",
                task.name(),
                tolerance.unwrap()
            );
        }
        Outcome::RuntimeError { .. } => {
            eprintln!("{}: rejected: {}", task.name(), e.outcome.summary())
        }
        other => panic!("{}: expected a rejection, got {other:?}", task.name()),
    }
    assert_eq!(e.outcome.score(), None);
}

#[test]
fn lj_without_the_periodic_cell_wrap_is_wrong() {
    assert_rejected(
        "lj",
        &common::mutant(
            "lj",
            &[
                ("int nx = (cx + dx + m) % m;", "int nx = cx + dx;"),
                ("int ny = (cy + dy + m) % m;", "int ny = cy + dy;"),
                (
                    "int nz = (cz + dz + m) % m;",
                    "int nz = cz + dz;\n                if (nx < 0 || ny < 0 || nz < 0 || nx >= m || ny >= m || nz >= m) continue;",
                ),
            ],
        ),
        "max_abs_pos",
    );
}

#[test]
fn gradshaf_with_a_reduction_that_does_not_stride_is_wrong() {
    assert_rejected(
        "gradshaf",
        &common::mutant(
            "gradshaf",
            &[(
                "for (uint q = t; q < total; q += w) {",
                "for (uint q = t; q < total && q < w; q += w) {",
            )],
        ),
        "max_abs",
    );
}

#[test]
fn fft3d_with_the_wrong_twiddle_sign_is_wrong() {
    assert_rejected(
        "fft3d",
        &common::mutant(
            "fft3d",
            &[(
                "float ang = -6.283185307179586f",
                "float ang = 6.283185307179586f",
            )],
        ),
        "max_abs",
    );
}

#[test]
fn adi3d_with_a_swapped_sweep_axis_is_wrong() {
    assert_rejected(
        "adi3d",
        &common::mutant(
            "adi3d",
            &[(
                "    uint j = get_global_id(0), k = get_global_id(1);\n    if (j >= NY || k >= NZ) return;\n    int solve = j >= 1 && j + 1 < NY && k >= 1 && k + 1 < NZ;\n    adi_line(u_in, u_out, (k * NY + j) * NX, 1u, NX, mu, solve, cp);",
                "    uint i = get_global_id(0), k = get_global_id(1);\n    if (i >= NX || k >= NZ) return;\n    int solve = i >= 1 && i + 1 < NX && k >= 1 && k + 1 < NZ;\n    adi_line(u_in, u_out, k * NY * NX + i, NX, NY, mu, solve, cp);",
            )],
        ),
        "max_abs",
    );
}

#[test]
fn morton_with_a_wrong_bit_interleave_is_wrong() {
    assert_rejected(
        "morton",
        &common::mutant(
            "morton",
            &[
                ("<< (3u * b);", "<< (2u * b);"),
                ("<< (3u * b + 1u);", "<< (2u * b + 1u);"),
                ("<< (3u * b + 2u);", "<< (2u * b + 2u);"),
            ],
        ),
        "max_abs",
    );
}

#[test]
fn fixed_blocks_ignore_declarations() {
    // fft3d's one block per line and adi3d's 32-wide blocks are part of the
    // contract: a general block declaration leaves them as they are.
    let Some(mut ev) = evaluator() else { return };
    for name in ["fft3d", "adi3d"] {
        let task = kevo_tasks::by_name(name).unwrap();
        let seed = format!("// kevo: block 64\n{}", task.seed(Dialect::OpenCl).unwrap());
        let e = ev.evaluate(task, &seed, &smoke(task)[..1]);
        assert!(e.outcome.is_correct(), "{name}: {}", e.outcome.summary());
    }
}
