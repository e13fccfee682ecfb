//! wave3d, nbody, hmc, lbm and ising end to end on a real OpenCL device
//! (PoCL in CI): every seed is correct at the smoke sizes and the held-out
//! smoke size, and a deliberately wrong kernel of each task is rejected.

mod common;

use std::time::Instant;

use kevo_backend::Dialect;
use kevo_eval::Outcome;
use kevo_tasks::{SizeSet, Task};

const TASKS: [&str; 5] = ["wave3d", "nbody", "hmc", "lbm", "ising"];

use common::{evaluator, smoke};

fn task(name: &str) -> &'static Task {
    kevo_tasks::by_name(name).unwrap()
}

#[test]
fn seeds_are_correct_at_smoke_and_held_out_sizes() {
    let Some(mut ev) = evaluator() else { return };
    for name in TASKS {
        let task = task(name);
        let seed = task.seed(Dialect::OpenCl).unwrap();
        let start = Instant::now();
        let e = ev.evaluate(task, seed, &smoke(task));
        let elapsed = start.elapsed().as_secs_f64();
        let Outcome::Correct { score } = e.outcome else {
            panic!("{name} seed: {}", e.outcome.summary());
        };
        assert!(score > 0.0 && score.is_finite(), "{name}: {score}");
        assert_eq!(e.sizes.len(), 3);
        for s in &e.sizes {
            assert!(s.correct, "{name} {}", s.label);
            match s.tolerance {
                Some(t) => assert!(s.error <= t, "{name} {}", s.label),
                None => assert!(s.error.is_finite()),
            }
            assert!(s.time.samples_s.len() >= 10);
        }
        eprintln!(
            "{name}: seed at smoke sizes in {elapsed:.2} s wall ({:.2} s device, {:.2} s reference); errors {:?}",
            e.wall.device_s,
            e.wall.reference_s,
            e.sizes.iter().map(|s| s.error).collect::<Vec<_>>()
        );
        let held = task.sizes(SizeSet::Smoke).held_out;
        let e = ev.evaluate(task, seed, std::slice::from_ref(&held));
        assert!(
            e.outcome.is_correct(),
            "{name} held-out: {}",
            e.outcome.summary()
        );
        assert_eq!(e.sizes[0].label, held.label);
    }
}

/// Evaluate a wrong kernel: it must be a wrong result at the first size
/// with `metric`; returns (value, tolerance).
fn expect_wrong(name: &str, source: &str, metric: &str) -> Option<(f64, Option<f64>)> {
    let mut ev = evaluator()?;
    let task = task(name);
    let sizes = smoke(task);
    let e = ev.evaluate(task, source, &sizes);
    match e.outcome {
        Outcome::WrongResult {
            size,
            metric: m,
            value,
            tolerance,
        } => {
            assert_eq!(size, sizes[0].label, "{name}: stops at the first size");
            // A differing timed run may be the one that fails first.
            assert!(m.starts_with(metric), "{name}: {m}");
            assert_eq!(e.sizes.len(), 1, "{name}: later sizes do not run");
            Some((value, tolerance))
        }
        other => panic!("{name}: expected a wrong result, got {}", other.summary()),
    }
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
