//! gradshaf: Picard–Jacobi iteration of the Grad–Shafranov equation, a
//! max-reduction feeding a variable-coefficient stencil every step (spec
//! section 9). Size dims: `[NR, NZ, K]` (K outer steps).
//!
//! Deviation from the spec: its initial state is deterministic, so the
//! evaluator's "fresh" verification inputs would equal the timed ones and a
//! kernel that memoised its answer would pass. Here every interior cell of
//! the spec's psi0 is multiplied by (1 + e), e uniform in [-1e-2, 1e-2)
//! drawn from the input seed (see `perturb_relative`); the Dirichlet boundary stays
//! exactly 0 and the iteration stays well conditioned (psi_axis is the max
//! of the perturbed state, about 1.01). The spec's derived max|ref| figures
//! therefore hold only to about 1e-2.

use std::sync::Arc;

use rayon::prelude::*;

use crate::check::{
    bytes_to_f32s, f32_reference, f32s_to_bytes, init_f32s, max_abs, max_abs_verdict,
    threshold_verdict,
};
use crate::host::{ping_pong, ping_pong_buffers};
use crate::rng::perturb_relative;
use crate::*;

const R_MIN: f32 = 1.0;
const P_AXIS: f32 = 200.0;
const MU0: f32 = 1.0;
const OMEGA: f32 = 1.0;
/// The check: max_abs <= TOL_ABS + TOL_REL * max|ref| on psi and psi_axis
/// (see `check`). The spec's 1e-4 + 1e-5 max|ref| was ~100x the worst
/// honest f32 error. Worst honest error over the smoke and full sizes
/// (tests/tolerance_audit/sections_7_to_12.rs, docs/tolerance-audit-b.md): psi 1.07e-6,
/// psi_axis 7.2e-7 (65x65_30, pairwise sums); reordered, fma, reciprocal,
/// 2-ulp fast-math and f64 variants stay below. Under-computing errs >=
/// 2.8e-3 (one step fewer) or 4e-4 (psi_axis reduced only once).
const TOL_ABS: f64 = 0.0;
const TOL_REL: f64 = 1e-5;
/// Block width of the single-block reduction.
const REDUCE_WIDTH: u32 = 256;

pub struct Gradshaf;

fn dims(size: &Size) -> (usize, usize, usize) {
    let (nr, nz, k) = (
        size.dims[0] as usize,
        size.dims[1] as usize,
        size.dims[2] as usize,
    );
    assert!(nr >= 3 && nz >= 3, "gradshaf needs an interior");
    (nr, nz, k)
}

fn spacing(nr: usize, nz: usize) -> (f32, f32) {
    ((2.0 - 1.0) / (nr - 1) as f32, 1.0 / (nz - 1) as f32)
}

/// psi0 = sin(pi v) sin(pi u) on linspace(0, 1) grids, boundary forced to 0.
fn initial_psi(nr: usize, nz: usize) -> Vec<f32> {
    let lin = |n: usize, k: usize| (k as f64 / (n - 1) as f64) as f32;
    let pi = std::f32::consts::PI;
    let mut psi = vec![0f32; nr * nz];
    for j in 1..nz - 1 {
        let sv = (pi * lin(nz, j)).sin();
        for i in 1..nr - 1 {
            psi[j * nr + i] = sv * (pi * lin(nr, i)).sin();
        }
    }
    psi
}

/// Relative amplitude of the seeded perturbation of the initial state.
const PERTURBATION: f64 = 1e-2;

/// Max of psi over the interior.
fn axis_value(psi: &[f32], nr: usize, nz: usize) -> f32 {
    (1..nz - 1)
        .into_par_iter()
        .map(|j| {
            psi[j * nr + 1..j * nr + nr - 1]
                .iter()
                .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
        })
        .reduce(|| f32::NEG_INFINITY, f32::max)
}

/// One reduce + stencil step, f32, in the reference's order of operations;
/// returns psi_axis.
fn step(psi: &[f32], out: &mut [f32], nr: usize, nz: usize) -> f32 {
    let axis = axis_value(psi, nr, nz);
    let (dr, dz) = spacing(nr, nz);
    let inv_dr2 = 1.0 / (dr * dr);
    let inv_dz2 = 1.0 / (dz * dz);
    let a_ns = inv_dz2;
    let a_c = -2.0 * inv_dr2 - 2.0 * inv_dz2;
    out.par_chunks_mut(nr).enumerate().for_each(|(j, row)| {
        if j == 0 || j == nz - 1 {
            row.copy_from_slice(&psi[j * nr..(j + 1) * nr]);
            return;
        }
        let (below, mid, above) = (
            &psi[(j - 1) * nr..j * nr],
            &psi[j * nr..(j + 1) * nr],
            &psi[(j + 1) * nr..(j + 2) * nr],
        );
        row[0] = mid[0];
        row[nr - 1] = mid[nr - 1];
        for i in 1..nr - 1 {
            let r = R_MIN + i as f32 * dr;
            let a_w = inv_dr2 + 1.0 / (2.0 * r * dr);
            let a_e = inv_dr2 - 1.0 / (2.0 * r * dr);
            let c = mid[i];
            let psin = c / axis;
            let jt = if psin > 0.0 && psin < 1.0 {
                r * P_AXIS * 4.0 * psin * (1.0 - psin)
            } else {
                0.0
            };
            let rhs = -MU0 * r * jt;
            let lap =
                a_w * mid[i - 1] + a_e * mid[i + 1] + a_ns * below[i] + a_ns * above[i] + a_c * c;
            row[i] = c + OMEGA * (rhs - lap) / a_c;
        }
    });
    axis
}

/// K reduce + stencil steps from `psi`: the reference result, the final
/// psi (NR·NZ values) followed by the psi_axis of the last step.
fn iterate(psi: Vec<f32>, nr: usize, nz: usize, k: usize) -> Vec<f32> {
    let mut axis = f32::NAN;
    let mut psi = crate::host::iterate(psi, k, |_, psi, next| axis = step(psi, next, nr, nz));
    psi.push(axis);
    psi
}

impl TaskCode for Gradshaf {
    fn problem(&self, size: &Size, seed: u64) -> Problem {
        let (nr, nz, k) = dims(size);
        let mut psi0 = initial_psi(nr, nz);
        perturb_relative(&mut psi0, seed, PERTURBATION);
        let (dr, dz) = spacing(nr, nz);
        let mut launches = Vec::with_capacity(2 * k);
        for s in 0..k {
            let (src, dst) = ping_pong(s);
            launches.push(LaunchSpec {
                kernel: 0,
                threads: [REDUCE_WIDTH as u64, 1, 1],
                block: Block::Fixed([REDUCE_WIDTH, 1, 1]),
                args: vec![
                    Arg::Buffer(src),
                    Arg::Buffer(2),
                    Arg::U32(nr as u32),
                    Arg::U32(nz as u32),
                ],
            });
            launches.push(LaunchSpec {
                kernel: 1,
                threads: [nr as u64, nz as u64, 1],
                block: Block::Default([16, 16, 1]),
                args: vec![
                    Arg::Buffer(src),
                    Arg::Buffer(dst),
                    Arg::Buffer(2),
                    Arg::U32(nr as u32),
                    Arg::U32(nz as u32),
                    Arg::F32(R_MIN),
                    Arg::F32(dr),
                    Arg::F32(dz),
                    Arg::F32(P_AXIS),
                    Arg::F32(MU0),
                    Arg::F32(OMEGA),
                ],
            });
        }
        let mut buffers = ping_pong_buffers(["A", "B"], f32s_to_bytes(&psi0));
        buffers.push(BufferSpec::sentinel("psi_axis", 4));
        Problem {
            buffers,
            launches,
            // After K steps the state is in A when K is even, else in B;
            // then psi_axis of the last step.
            outputs: vec![k % 2, 2],
        }
    }
    fn reference(&self, size: &Size, problem: &Problem) -> Reference {
        let (nr, nz, k) = dims(size);
        Arc::new(iterate(init_f32s(problem, 0), nr, nz, k))
    }
    fn check(&self, _: &Size, _: &Problem, reference: &Reference, outputs: &[Vec<u8>]) -> Verdict {
        let want = f32_reference(reference, "gradshaf");
        let (want_psi, want_axis) = want.split_at(want.len() - 1);
        let tolerance = TOL_ABS + TOL_REL * max_abs(want_psi);
        let got = bytes_to_f32s(&outputs[0]);
        let psi = max_abs_verdict(&got, want_psi, tolerance);
        if !psi.passed {
            return psi;
        }
        // psi_axis, the reduction's output, is a result too: the max the
        // last step used.
        let axis = bytes_to_f32s(&outputs[1]);
        let axis_err = match axis.as_slice() {
            [a] if a.is_finite() => (*a as f64 - want_axis[0] as f64).abs(),
            _ => f64::NAN,
        };
        let axis = threshold_verdict("psi_axis_abs", axis_err, tolerance);
        if !axis.passed {
            return axis;
        }
        psi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_state_peaks_at_one_in_the_centre_with_zero_edges() {
        let (nr, nz) = (33, 17);
        let psi = initial_psi(nr, nz);
        assert!((psi[8 * nr + 16] - 1.0).abs() < 1e-6);
        assert_eq!(axis_value(&psi, nr, nz), psi[8 * nr + 16]);
        for i in 0..nr {
            assert_eq!(psi[i], 0.0);
            assert_eq!(psi[(nz - 1) * nr + i], 0.0);
        }
        for j in 0..nz {
            assert_eq!(psi[j * nr], 0.0);
            assert_eq!(psi[j * nr + nr - 1], 0.0);
        }
        let (dr, dz) = spacing(65, 129);
        assert_eq!((dr, dz), (1.0 / 64.0, 1.0 / 128.0));
    }

    #[test]
    fn one_step_is_a_jacobi_update_of_the_spec_operator() {
        let (nr, nz) = (9, 7);
        let psi = initial_psi(nr, nz);
        let mut out = vec![0f32; nr * nz];
        step(&psi, &mut out, nr, nz);
        let (i, j) = (3, 2);
        let (dr, dz) = spacing(nr, nz);
        let (dr, dz) = (dr as f64, dz as f64);
        let r = 1.0 + i as f64 * dr;
        let p = |i: usize, j: usize| psi[j * nr + i] as f64;
        let a_w = 1.0 / (dr * dr) + 1.0 / (2.0 * r * dr);
        let a_e = 1.0 / (dr * dr) - 1.0 / (2.0 * r * dr);
        let a_c = -2.0 / (dr * dr) - 2.0 / (dz * dz);
        let axis = axis_value(&psi, nr, nz) as f64;
        let pn = p(i, j) / axis;
        let jt = r * 200.0 * 4.0 * pn * (1.0 - pn);
        let nb = a_w * p(i - 1, j) + a_e * p(i + 1, j) + (p(i, j - 1) + p(i, j + 1)) / (dz * dz);
        let want = (-r * jt - nb) / a_c;
        assert!(
            (out[j * nr + i] as f64 - want).abs() < 1e-5,
            "{} {want}",
            out[j * nr + i]
        );
        assert_eq!(out[0], 0.0);
        assert_eq!(out[nr * nz - 1], 0.0);
    }

    #[test]
    fn max_of_the_reference_matches_the_spec() {
        // The initial state is deterministic, so the spec's derived
        // max|ref| figures apply exactly (up to f32 summation order).
        let plan = crate::by_name("gradshaf").unwrap().sizes(SizeSet::Full);
        for (size, want) in plan
            .in_distribution
            .iter()
            .take(2)
            .zip([0.98937, 0.99736])
            .chain([(&plan.held_out, 0.99318)])
        {
            // The spec's unperturbed psi0.
            let (nr, nz, k) = dims(size);
            let mut psi = iterate(initial_psi(nr, nz), nr, nz, k);
            psi.pop();
            let m = max_abs(&psi);
            let p = crate::by_name("gradshaf").unwrap().problem(size, 0);
            assert!((m - want).abs() < 2e-5, "{}: {m} vs {want}", size.label);
            assert_eq!(p.launches.len(), 2 * size.dims[2] as usize);
            assert_eq!(p.outputs, vec![size.dims[2] as usize % 2, 2]);
        }
    }

    /// The same iteration in f64 (sum order aside).
    fn iterate_f64(psi0: &[f32], nr: usize, nz: usize, k: usize) -> Vec<f64> {
        let mut psi: Vec<f64> = psi0.iter().map(|&v| v as f64).collect();
        let (dr, dz) = (1.0 / (nr - 1) as f64, 1.0 / (nz - 1) as f64);
        for _ in 0..k {
            let axis = (1..nz - 1)
                .flat_map(|j| (1..nr - 1).map(move |i| j * nr + i))
                .map(|q| psi[q])
                .fold(f64::MIN, f64::max);
            let mut out = psi.clone();
            for j in 1..nz - 1 {
                for i in 1..nr - 1 {
                    let q = j * nr + i;
                    let r = 1.0 + i as f64 * dr;
                    let a_w = 1.0 / (dr * dr) + 1.0 / (2.0 * r * dr);
                    let a_e = 1.0 / (dr * dr) - 1.0 / (2.0 * r * dr);
                    let a_c = -2.0 / (dr * dr) - 2.0 / (dz * dz);
                    let pn = psi[q] / axis;
                    let jt = if pn > 0.0 && pn < 1.0 {
                        r * 800.0 * pn * (1.0 - pn)
                    } else {
                        0.0
                    };
                    let nb = a_w * psi[q - 1]
                        + a_e * psi[q + 1]
                        + (psi[q - nr] + psi[q + nr]) / (dz * dz);
                    out[q] = (-r * jt - nb) / a_c;
                }
            }
            psi = out;
        }
        psi
    }

    #[test]
    fn smoke_sizes_are_well_conditioned() {
        // On coarse grids the Picard iteration amplifies rounding (33x33
        // after 20 steps already differs from f64 by 1e-4, the tolerance),
        // so smoke sizes start at 65: f32 and f64 must agree far inside the
        // tolerance for a correct fp32 kernel to pass reliably.
        let plan = crate::by_name("gradshaf").unwrap().sizes(SizeSet::Smoke);
        for size in plan.in_distribution.iter().chain([&plan.held_out]) {
            let (nr, nz, k) = dims(size);
            let p = crate::by_name("gradshaf").unwrap().problem(size, 0);
            let r = crate::by_name("gradshaf").unwrap().reference(size, &p);
            let got = &r.downcast_ref::<Vec<f32>>().unwrap()[..nr * nz];
            let want = iterate_f64(&init_f32s(&p, 0), nr, nz, k);
            let d = got
                .iter()
                .zip(&want)
                .map(|(&g, &w)| (g as f64 - w).abs())
                .fold(0f64, f64::max);
            assert!(d < 1e-5, "{}: f32 vs f64 {d:e}", size.label);
        }
    }
}
