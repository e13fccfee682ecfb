//! A typical bug in each task's kernel, end to end on a real OpenCL device
//! (PoCL in CI): the task's check rejects it at the first size (the seeds
//! themselves are tested correct in evaluator.rs).

mod common;

use kevo_eval::{Evaluation, Outcome};
use kevo_tasks::Task;

use common::{evaluator, smoke};

fn task(name: &str) -> &'static Task {
    kevo_tasks::by_name(name).unwrap()
}

/// Evaluate `source` for task `name` at the smoke sizes; None without
/// OpenCL.
fn evaluate(name: &str, source: &str) -> Option<Evaluation> {
    let mut ev = evaluator()?;
    let task = task(name);
    Some(ev.evaluate(task, source, &smoke(task)))
}

/// `e` must be a wrong result at the first size with `metric` (or, for a
/// differing timed run checked on its own, "`metric` (timed run N)");
/// returns (value, tolerance).
fn wrong_at_first_size(name: &str, e: &Evaluation, metric: &str) -> (f64, Option<f64>) {
    let Outcome::WrongResult {
        size,
        metric: m,
        value,
        tolerance,
    } = &e.outcome
    else {
        panic!(
            "{name}: expected a wrong result, got {}",
            e.outcome.summary()
        );
    };
    assert_eq!(
        size,
        &smoke(task(name))[0].label,
        "{name}: stops at the first size"
    );
    assert!(m.starts_with(metric), "{name}: {m} is not {metric}");
    assert_eq!(e.sizes.len(), 1, "{name}: later sizes do not run");
    (*value, *tolerance)
}

/// Evaluate a wrong kernel: it must be a wrong result at the first size
/// with `metric`; returns (value, tolerance).
fn expect_wrong(name: &str, source: &str, metric: &str) -> Option<(f64, Option<f64>)> {
    let e = evaluate(name, source)?;
    Some(wrong_at_first_size(name, &e, metric))
}

#[test]
fn wave3d_with_a_sign_error_is_rejected() {
    let Some((value, tol)) = expect_wrong(
        "wave3d",
        &common::mutant(
            "wave3d",
            &[(
                "xm + xp + ym + yp + zm + zp - 6.0f * c",
                "xm + xp + ym + yp + zm - zp - 6.0f * c",
            )],
        ),
        "max_abs",
    ) else {
        return;
    };
    assert!(value.is_finite() && value > tol.unwrap(), "{value}");
}

#[test]
fn nbody_without_softening_is_rejected() {
    let Some((value, tol)) = expect_wrong(
        "nbody",
        &common::mutant(
            "nbody",
            &[(
                "d.x * d.x + d.y * d.y + d.z * d.z + eps2;",
                "d.x * d.x + d.y * d.y + d.z * d.z;",
            )],
        ),
        "max_abs_pos",
    ) else {
        return;
    };
    // The j = i term is 0/0: NaN, or garbage under relaxed math.
    assert!(value.is_nan() || value > tol.unwrap(), "{value}");
}

#[test]
fn hmc_with_a_wrong_rng_counter_is_rejected() {
    let Some((value, tol)) = expect_wrong(
        "hmc",
        &common::mutant(
            "hmc",
            &[(
                "uint base = hmc_step_idx * (d + 1u);",
                "uint base = d + 1u;",
            )],
        ),
        "stat_err",
    ) else {
        return;
    };
    assert!(tol.is_none());
    assert!(value > 1.0, "{value}");
}

#[test]
fn lbm_streaming_the_wrong_way_is_rejected() {
    let Some((value, tol)) = expect_wrong(
        "lbm",
        &common::mutant(
            "lbm",
            &[
                ("(int)i - LBM_CX[k]", "(int)i + LBM_CX[k]"),
                ("(int)j - LBM_CY[k]", "(int)j + LBM_CY[k]"),
            ],
        ),
        "max_abs",
    ) else {
        return;
    };
    assert!(value.is_finite() && value > tol.unwrap(), "{value}");
}

#[test]
fn ising_with_the_wrong_checkerboard_parity_is_rejected() {
    let Some((value, tol)) = expect_wrong(
        "ising",
        &common::mutant(
            "ising",
            &[(
                "!= (step_idx & 1u)) return;",
                "!= ((step_idx + 1u) & 1u)) return;",
            )],
        ),
        "spin_disagreements",
    ) else {
        return;
    };
    assert!(tol.is_none());
    assert!(value >= 1.0, "{value}");
}

/// Evaluate `source` for `task` at the smoke sizes and require that it is
/// rejected at the first size by the check (or, failing that, by a fault).
fn assert_rejected(name: &str, source: &str, metric: &str) {
    let Some(e) = evaluate(name, source) else {
        return;
    };
    if let Outcome::RuntimeError { .. } = e.outcome {
        eprintln!("{name}: rejected: {}", e.outcome.summary());
        return;
    }
    let (value, tolerance) = wrong_at_first_size(name, &e, metric);
    let tolerance = tolerance.expect("a toleranced check");
    assert!(
        value.is_nan() || value > tolerance,
        "{value} vs {tolerance}"
    );
    eprintln!("{name}: rejected: {value:.3e} > {tolerance:.3e}");
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
