//! A typical bug in each task's kernel, end to end on every backend (PoCL
//! in CI, the H100 under scripts/gpu-check): the task's check rejects it at
//! the first size (the seeds themselves are tested correct in
//! evaluator.rs). Each bug is one edit of the task's seed in the backend's
//! dialect; where the two seeds spell the line differently, each dialect
//! has its own edit of the same bug.

mod common;

use kevo_backend::Dialect;
use kevo_eval::{Evaluation, Outcome};
use kevo_runtimes::testing::UnderTest;

use common::{evaluator, mutant, smoke, task};

kevo_runtimes::backend_tests!(
    wave3d_with_a_sign_error_is_rejected,
    nbody_without_softening_is_rejected,
    hmc_with_a_wrong_rng_counter_is_rejected,
    lbm_streaming_the_wrong_way_is_rejected,
    ising_with_the_wrong_checkerboard_parity_is_rejected,
    lj_without_the_periodic_cell_wrap_is_wrong,
    gradshaf_with_a_reduction_that_does_not_stride_is_wrong,
    fft3d_with_the_wrong_twiddle_sign_is_wrong,
    adi3d_with_a_swapped_sweep_axis_is_wrong,
    morton_with_a_wrong_bit_interleave_is_wrong,
);

/// Evaluate `source` for task `name` at the smoke sizes; None without
/// the device.
fn evaluate(b: UnderTest, name: &str, source: &str) -> Option<Evaluation> {
    let mut ev = evaluator(b)?;
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
fn expect_wrong(
    b: UnderTest,
    name: &str,
    source: &str,
    metric: &str,
) -> Option<(f64, Option<f64>)> {
    let e = evaluate(b, name, source)?;
    Some(wrong_at_first_size(name, &e, metric))
}

fn wave3d_with_a_sign_error_is_rejected(b: UnderTest) {
    let Some((value, tol)) = expect_wrong(
        b,
        "wave3d",
        &mutant(
            "wave3d",
            b.dialect,
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

fn nbody_without_softening_is_rejected(b: UnderTest) {
    let Some((value, tol)) = expect_wrong(
        b,
        "nbody",
        &mutant(
            "nbody",
            b.dialect,
            &[match b.dialect {
                Dialect::Cuda => (
                    "dx * dx + dy * dy + dz * dz + eps2;",
                    "dx * dx + dy * dy + dz * dz;",
                ),
                _ => (
                    "d.x * d.x + d.y * d.y + d.z * d.z + eps2;",
                    "d.x * d.x + d.y * d.y + d.z * d.z;",
                ),
            }],
        ),
        "max_abs_pos",
    ) else {
        return;
    };
    // The j = i term is 0/0: NaN, or garbage under relaxed math.
    assert!(value.is_nan() || value > tol.unwrap(), "{value}");
}

fn hmc_with_a_wrong_rng_counter_is_rejected(b: UnderTest) {
    let Some((value, tol)) = expect_wrong(
        b,
        "hmc",
        &mutant(
            "hmc",
            b.dialect,
            &[(
                // `uint` and CUDA's `unsigned int` end alike.
                "int base = hmc_step_idx * (d + 1u);",
                "int base = d + 1u;",
            )],
        ),
        "stat_err",
    ) else {
        return;
    };
    assert!(tol.is_none());
    assert!(value > 1.0, "{value}");
}

fn lbm_streaming_the_wrong_way_is_rejected(b: UnderTest) {
    let Some((value, tol)) = expect_wrong(
        b,
        "lbm",
        &mutant(
            "lbm",
            b.dialect,
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

fn ising_with_the_wrong_checkerboard_parity_is_rejected(b: UnderTest) {
    let Some((value, tol)) = expect_wrong(
        b,
        "ising",
        &mutant(
            "ising",
            b.dialect,
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
fn assert_rejected(b: UnderTest, name: &str, source: &str, metric: &str) {
    let Some(e) = evaluate(b, name, source) else {
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

fn lj_without_the_periodic_cell_wrap_is_wrong(b: UnderTest) {
    assert_rejected(
        b,
        "lj",
        &mutant(
            "lj",
            b.dialect,
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

fn gradshaf_with_a_reduction_that_does_not_stride_is_wrong(b: UnderTest) {
    assert_rejected(
        b,
        "gradshaf",
        &mutant(
            "gradshaf",
            b.dialect,
            &[(
                "int q = t; q < total; q += w) {",
                "int q = t; q < total && q < w; q += w) {",
            )],
        ),
        "max_abs",
    );
}

fn fft3d_with_the_wrong_twiddle_sign_is_wrong(b: UnderTest) {
    assert_rejected(
        b,
        "fft3d",
        &mutant(
            "fft3d",
            b.dialect,
            &[(
                "float ang = -6.283185307179586f",
                "float ang = 6.283185307179586f",
            )],
        ),
        "max_abs",
    );
}

fn adi3d_with_a_swapped_sweep_axis_is_wrong(b: UnderTest) {
    assert_rejected(
        b,
        "adi3d",
        &mutant(
            "adi3d",
            b.dialect,
            // The x sweep's threads solve lines along y instead.
            &[
                (
                    "if (j >= NY || k >= NZ) return;",
                    "if (j >= NX || k >= NZ) return;",
                ),
                (
                    "solve = j >= 1 && j + 1 < NY && k >= 1 && k + 1 < NZ;",
                    "solve = j >= 1 && j + 1 < NX && k >= 1 && k + 1 < NZ;",
                ),
                (
                    "adi_line(u_in, u_out, (k * NY + j) * NX, 1u, NX, mu, solve, cp);",
                    "adi_line(u_in, u_out, k * NY * NX + j, NX, NY, mu, solve, cp);",
                ),
            ],
        ),
        "max_abs",
    );
}

fn morton_with_a_wrong_bit_interleave_is_wrong(b: UnderTest) {
    assert_rejected(
        b,
        "morton",
        &mutant(
            "morton",
            b.dialect,
            &[
                ("<< (3u * b);", "<< (2u * b);"),
                ("<< (3u * b + 1u);", "<< (2u * b + 1u);"),
                ("<< (3u * b + 2u);", "<< (2u * b + 2u);"),
            ],
        ),
        "max_abs",
    );
}
