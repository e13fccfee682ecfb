//! Tolerance audit of saxpy, heat2d, wave3d, nbody, hmc and lbm (spec
//! sections 1 to 6): honest CPU variants of each kernel (other summation
//! orders, FMA, fast-math approximations; see `common/models.rs`) must pass
//! `Task::check` with margin,
//! and under-computing variants (a skipped step, forces every other step,
//! chains that are not sampled, ...) must fail it.
//!
//! The smoke sizes run in CI. The full table (smoke, full and, for the
//! compute-bound tasks where it is affordable, more) is printed by
//!
//! ```text
//! cargo test -p kevo-tasks --release \
//!     --test tolerance_audit -- --ignored --nocapture sections_1_to_6::
//! ```
//!
//! and recorded in docs/tolerance-audit-a.md.

use crate::common::all_sizes as sizes;
use crate::common::models::*;
use kevo_tasks::{Problem, Size, SizeSet, Task, Verdict};

/// How one variant fared.
struct Row {
    variant: String,
    honest: bool,
    /// max |out - ref| per output (for hmc: mismatching chains of all K,
    /// then the largest |q - q_ref| over the chains that match).
    errs: Vec<f64>,
    verdict: Verdict,
}

fn max_abs_f32(a: &[u8], b: &[u8]) -> f64 {
    let (a, b) = (f32s(a), f32s(b));
    assert_eq!(a.len(), b.len());
    let mut w = 0f64;
    for (x, y) in a.iter().zip(&b) {
        if !x.is_finite() {
            return f64::NAN;
        }
        w = w.max((*x as f64 - *y as f64).abs());
    }
    w
}

/// nbody compares xyz only (w is padding).
fn max_abs_xyz(a: &[u8], b: &[u8]) -> f64 {
    let (a, b) = (f32s(a), f32s(b));
    let mut w = 0f64;
    for (x, y) in a.chunks_exact(4).zip(b.chunks_exact(4)) {
        for c in 0..3 {
            w = w.max((x[c] as f64 - y[c] as f64).abs());
        }
    }
    w
}

/// hmc: (chains whose accept count or state differs by more than 1e-3,
/// largest |q - q_ref| over the other chains).
fn hmc_errs(d: usize, got: &[Vec<u8>], want: &[Vec<u8>]) -> Vec<f64> {
    let (q, qr) = (f32s(&got[0]), f32s(&want[0]));
    let (a, ar) = (&got[1], &want[1]);
    let mut mismatched = 0;
    let mut worst = 0f64;
    for c in 0..qr.len() / d {
        let dq = (0..d)
            .map(|i| (q[c * d + i] as f64 - qr[c * d + i] as f64).abs())
            .fold(0f64, f64::max);
        if a[4 * c..4 * c + 4] != ar[4 * c..4 * c + 4] || dq > 1e-3 {
            mismatched += 1;
        } else {
            worst = worst.max(dq);
        }
    }
    vec![mismatched as f64, worst]
}

type Outputs = Vec<Vec<u8>>;
type Model = dyn Fn(&Size, &Problem, Option<Variant>, usize) -> Outputs;
type Exact = dyn Fn(&Size, &Problem) -> Outputs;
type Errs = fn(&Size, &[Vec<u8>], &[Vec<u8>]) -> Vec<f64>;

/// The task's honest and under-computing variants: `model(size, problem,
/// Some(variant), _)` is honest, `model(size, problem, None, c)` is cheat
/// number `c` (of `cheats`).
struct Subject {
    task: &'static Task,
    model: Box<Model>,
    cheats: Vec<&'static str>,
    errs: Errs,
    /// The output of `model` that the reference computes, for the errors.
    exact: Box<Exact>,
}

fn per_output(_: &Size, got: &[Vec<u8>], want: &[Vec<u8>]) -> Vec<f64> {
    got.iter()
        .zip(want)
        .map(|(g, w)| max_abs_f32(g, w))
        .collect()
}

fn subjects() -> Vec<Subject> {
    let step_cheats = vec!["skip middle step", "skip last step"];
    let step_cheat = |c: usize| match c {
        0 => StepCheat::SkipMiddleStep,
        _ => StepCheat::SkipLastStep,
    };
    vec![
        Subject {
            task: kevo_tasks::by_name("saxpy").unwrap(),
            model: Box::new(|_, p, v, c| match v {
                Some(v) => saxpy(p, v, None),
                None => saxpy(
                    p,
                    Variant::EXACT,
                    Some([SaxpyCheat::EveryOther, SaxpyCheat::LastElement][c]),
                ),
            }),
            cheats: vec!["every other element", "last element skipped"],
            errs: per_output,
            exact: Box::new(|_, p| saxpy(p, Variant::EXACT, None)),
        },
        Subject {
            task: kevo_tasks::by_name("heat2d").unwrap(),
            model: Box::new(move |s, p, v, c| match v {
                Some(v) => heat2d(s, p, v, None),
                None => heat2d(s, p, Variant::EXACT, Some(step_cheat(c))),
            }),
            cheats: step_cheats.clone(),
            errs: per_output,
            exact: Box::new(|s, p| heat2d(s, p, Variant::EXACT, None)),
        },
        Subject {
            task: kevo_tasks::by_name("wave3d").unwrap(),
            model: Box::new(move |s, p, v, c| match v {
                Some(v) => wave3d(s, p, v, None),
                None => wave3d(s, p, Variant::EXACT, Some(step_cheat(c))),
            }),
            cheats: step_cheats.clone(),
            errs: per_output,
            exact: Box::new(|s, p| wave3d(s, p, Variant::EXACT, None)),
        },
        Subject {
            task: kevo_tasks::by_name("nbody").unwrap(),
            model: Box::new(|s, p, v, c| match v {
                Some(v) => nbody(s, p, v, None),
                None => nbody(
                    s,
                    p,
                    Variant::EXACT,
                    Some(
                        [
                            NbodyCheat::ForcesEveryOtherStep,
                            NbodyCheat::StaleVelocityOutput,
                            NbodyCheat::HalfThePairs,
                        ][c],
                    ),
                ),
            }),
            cheats: vec![
                "forces every other step",
                "stale velocity output",
                "half the pairs",
            ],
            errs: |_, g, w| vec![max_abs_xyz(&g[0], &w[0]), max_abs_xyz(&g[1], &w[1])],
            exact: Box::new(nbody_f64),
        },
        Subject {
            task: kevo_tasks::by_name("hmc").unwrap(),
            model: Box::new(|s, p, v, c| match v {
                Some(v) => hmc(s, p, v, None),
                None => hmc(
                    s,
                    p,
                    Variant::EXACT,
                    Some(
                        [
                            HmcCheat::RescaleInitial,
                            HmcCheat::ReturnInitial,
                            HmcCheat::FewerLeapfrogSteps,
                            HmcCheat::HalfTheSteps,
                        ][c],
                    ),
                ),
            }),
            cheats: vec![
                "rescaled initial states",
                "initial states returned",
                "L-1 leapfrog steps",
                "half the HMC steps",
            ],
            errs: |s, g, w| hmc_errs(s.dims[0] as usize, g, w),
            exact: Box::new(|s, p| hmc(s, p, Variant::EXACT, None)),
        },
        Subject {
            task: kevo_tasks::by_name("lbm").unwrap(),
            model: Box::new(move |s, p, v, c| match v {
                Some(v) => lbm(s, p, v, None),
                None => lbm(s, p, Variant::EXACT, Some(step_cheat(c))),
            }),
            cheats: step_cheats,
            errs: per_output,
            exact: Box::new(|s, p| lbm(s, p, Variant::EXACT, None)),
        },
    ]
}

fn audit(subject: &Subject, size: &Size, variants: &[Variant]) -> Vec<Row> {
    let task = subject.task;
    let seed = task.default_seed() ^ 0x5EED;
    let p = task.problem(size, seed);
    let r = task.reference(size, &p);
    let exact = (subject.exact)(size, &p);
    let mut rows = Vec::new();
    for v in variants {
        let out = (subject.model)(size, &p, Some(*v), 0);
        rows.push(Row {
            variant: v.name(),
            honest: true,
            errs: (subject.errs)(size, &out, &exact),
            verdict: task.check(size, &p, &r, &out),
        });
    }
    for (c, name) in subject.cheats.iter().enumerate() {
        let out = (subject.model)(size, &p, None, c);
        rows.push(Row {
            variant: name.to_string(),
            honest: false,
            errs: (subject.errs)(size, &out, &exact),
            verdict: task.check(size, &p, &r, &out),
        });
    }
    rows
}

fn print_rows(task: &str, size: &Size, rows: &[Row]) {
    for row in rows {
        println!(
            "{task:<7} {:<18} {:<6} {:<32} {:<28} {:>11.3e} {:>11} {}",
            size.label,
            if row.honest { "honest" } else { "cheat" },
            row.variant,
            row.errs
                .iter()
                .map(|e| format!("{e:.3e}"))
                .collect::<Vec<_>>()
                .join(" "),
            row.verdict.value,
            row.verdict
                .tolerance
                .map_or("-".into(), |t| format!("{t:.3e}")),
            if row.verdict.passed { "pass" } else { "FAIL" },
        );
    }
    let worst = rows
        .iter()
        .filter(|r| r.honest)
        .map(|r| r.verdict.value)
        .fold(0f64, f64::max);
    let least_cheat = rows
        .iter()
        .filter(|r| !r.honest)
        .map(|r| r.verdict.value)
        .fold(f64::INFINITY, f64::min);
    println!(
        "{task:<7} {:<18} worst honest {worst:.3e}, least cheat {least_cheat:.3e}",
        size.label
    );
}

/// Every honest variant passes with a margin of 2 (its error is at most
/// half the tolerance) and every under-computing variant fails.
fn assert_rows(task: &str, size: &Size, rows: &[Row]) {
    for row in rows {
        let v = &row.verdict;
        if row.honest {
            assert!(v.passed, "{task} {} {}: {v:?}", size.label, row.variant);
            if let Some(t) = v.tolerance {
                assert!(
                    v.value <= 0.5 * t,
                    "{task} {} {}: no margin: {v:?}",
                    size.label,
                    row.variant
                );
            }
        } else {
            assert!(
                !v.passed,
                "{task} {} {} passes: {v:?}",
                size.label, row.variant
            );
        }
    }
}

#[test]
fn honest_variants_pass_and_under_computing_ones_fail_at_smoke_sizes() {
    let variants = honest_variants();
    let only = std::env::var("AUDIT_TASKS").ok();
    for subject in subjects() {
        let name = subject.task.name();
        if let Some(only) = &only
            && !only.split(',').any(|t| t == name)
        {
            continue;
        }
        // hmc simulates every chain once per variant: a few variants keep
        // the debug build fast (the full list runs in the ignored audit).
        let vs: Vec<Variant> = if name == "hmc" {
            vec![variants[0], variants[3], variants[9], variants[12]]
        } else {
            variants.clone()
        };
        for size in sizes(subject.task, SizeSet::Smoke) {
            let rows = audit(&subject, &size, &vs);
            print_rows(name, &size, &rows);
            assert_rows(name, &size, &rows);
        }
    }
}

#[test]
#[ignore = "the full audit table; run in release"]
fn tolerance_audit_table() {
    let variants = honest_variants();
    let only = std::env::var("AUDIT_TASKS").ok();
    println!(
        "{:<7} {:<18} {:<6} {:<32} {:<28} {:>11} {:>11}",
        "task", "size", "kind", "variant", "error per output", "value", "tolerance"
    );
    for subject in subjects() {
        let name = subject.task.name();
        if let Some(only) = &only
            && !only.split(',').any(|t| t == name)
        {
            continue;
        }
        for set in [SizeSet::Smoke, SizeSet::Full] {
            for size in sizes(subject.task, set) {
                let rows = audit(&subject, &size, &variants);
                print_rows(name, &size, &rows);
                if std::env::var_os("AUDIT_NO_ASSERT").is_none() {
                    assert_rows(name, &size, &rows);
                }
            }
        }
    }
}

/// nbody's tolerances grow with N; this measures the honest error beyond
/// the full sizes (towards the large ones, whose f64 reference alone takes
/// minutes on 2 cores) to check the trend: `NBODY_N=8192,16384`.
#[test]
#[ignore = "minutes in release"]
fn nbody_error_growth_beyond_the_full_sizes() {
    let ns: Vec<u64> = std::env::var("NBODY_N")
        .unwrap_or_else(|_| "4096,8192".into())
        .split(',')
        .map(|n| n.parse().unwrap())
        .collect();
    let all = honest_variants();
    let variants = [all[0], all[2], all[9], all[14]];
    let subject = subjects()
        .into_iter()
        .find(|s| s.task.name() == "nbody")
        .unwrap();
    for n in ns {
        let size = Size::new(&format!("{n}_10"), &[n, 10]);
        let rows = audit(&subject, &size, &variants);
        print_rows("nbody", &size, &rows);
        assert_rows("nbody", &size, &rows);
    }
}

/// The stencil tasks' honest error on grids between the full and the large
/// sizes (the large ones take too long on 2 cores), to check that it does
/// not grow with the number of cells: 4 honest variants each.
#[test]
#[ignore = "minutes in release"]
fn stencil_error_on_bigger_grids() {
    let all = honest_variants();
    let variants = [all[2], all[3], all[10], all[14]];
    for (name, size) in [
        ("heat2d", Size::new("2048x2048_60", &[2048, 2048, 60])),
        ("lbm", Size::new("1024x1024_30", &[1024, 1024, 30])),
        ("wave3d", Size::new("256x256x256_30", &[256, 256, 256, 30])),
    ] {
        let subject = subjects()
            .into_iter()
            .find(|s| s.task.name() == name)
            .unwrap();
        let rows = audit(&subject, &size, &variants);
        print_rows(name, &size, &rows);
        assert_rows(name, &size, &rows);
    }
}
