//! lbm: D2Q9 lattice Boltzmann with BGK collision, fused pull-streaming and
//! collision, periodic in both axes (spec section 6). Size dims:
//! `[NX, NY, n_steps]`.
//!
//! Deviation from the spec: the spec's initial state is deterministic (a
//! density bump at rest), so the evaluator's "fresh" verification inputs
//! would equal the timed ones and a kernel that memoises its answer would
//! pass. Here the initial density of every cell gets a seeded additive
//! perturbation drawn uniformly from [-1e-2, 1e-2] (rho0 stays in
//! [0.99, 1.06], so every population is positive); the fluid still starts at
//! rest (f_k = w_k rho0). The default seed's state is within 1 % of the
//! spec's.

use std::sync::Arc;

use rayon::prelude::*;

use crate::check::{init_f32s, max_abs, max_abs_check};
use crate::host::{grid_2d_problem, iterate};
use crate::rng::uniform_f32;
use crate::*;

/// Relative to max(1, max|f_ref|). The spec's 5e-4 + 1e-4 max|f_ref| let a
/// kernel that skips one of 50 to 100 steps pass (it errs by 2.1e-4 to
/// 5.2e-4 at the full sizes). Honest kernels reach 2.8e-6 at the full
/// sizes: the worst is the momentum form a model wrote on an H200 (the
/// equilibrium in m = rho u with one reciprocal of rho, fused, under fast
/// math), which erred by 2.5e-6 there and which 2e-6 wrongly rejected.
/// 1.5e-5 is 5.3 times the worst honest error and 14 times below the least
/// step skip (tests/tolerance_audit/sections_1_to_6.rs,
/// docs/tolerance-audit-a.md).
const TOLERANCE: f64 = 1.5e-5;

/// Amplitude of the seeded perturbation of the initial density.
const NOISE: f64 = 1e-2;

const TAU: f32 = 0.8;
const CX: [i32; 9] = [0, 1, 0, -1, 0, 1, -1, -1, 1];
const CY: [i32; 9] = [0, 0, 1, 0, -1, 1, 1, -1, -1];
const W: [f32; 9] = [
    4.0 / 9.0,
    1.0 / 9.0,
    1.0 / 9.0,
    1.0 / 9.0,
    1.0 / 9.0,
    1.0 / 36.0,
    1.0 / 36.0,
    1.0 / 36.0,
    1.0 / 36.0,
];

pub struct Lbm;

/// Initial populations: a density bump at rest plus `noise` (one value per
/// cell, added to rho0 in f64), f_k = w_k * rho0 (SoA: f[k*NX*NY + j*NX + i]).
/// With `noise` all zero this is the spec's deterministic state.
fn initial(nx: usize, ny: usize, noise: &[f32]) -> Vec<f32> {
    let (cx, cy) = ((nx as f64 - 1.0) / 2.0, (ny as f64 - 1.0) / 2.0);
    let sigma = 0.15 * nx.min(ny) as f64;
    let cells = nx * ny;
    let mut rho = vec![0f32; cells];
    rho.par_chunks_mut(nx).enumerate().for_each(|(j, row)| {
        for (i, r) in row.iter_mut().enumerate() {
            let r2 = (i as f64 - cx).powi(2) + (j as f64 - cy).powi(2);
            let bump = (-r2 / (2.0 * sigma * sigma)).exp();
            *r = (1.0 + 0.05 * bump + noise[j * nx + i] as f64) as f32;
        }
    });
    let mut f = vec![0f32; 9 * cells];
    f.par_chunks_mut(cells).enumerate().for_each(|(k, plane)| {
        for (x, &r) in plane.iter_mut().zip(&rho) {
            *x = W[k] * r;
        }
    });
    f
}

/// Collide the nine pulled populations of one cell (f32, reference order).
fn collide(ft: &[f32; 9], inv_tau: f32) -> [f32; 9] {
    let mut rho = 0f32;
    let (mut mx, mut my) = (0f32, 0f32);
    for k in 0..9 {
        rho += ft[k];
        mx += CX[k] as f32 * ft[k];
        my += CY[k] as f32 * ft[k];
    }
    let u = mx / rho;
    let v = my / rho;
    let usq = u * u + v * v;
    let mut out = [0f32; 9];
    for k in 0..9 {
        let cu = CX[k] as f32 * u + CY[k] as f32 * v;
        let feq = W[k] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - 1.5 * usq);
        out[k] = ft[k] - inv_tau * (ft[k] - feq);
    }
    out
}

/// One step: periodic pull from (i - cx, j - cy), then BGK collision.
fn step(f: &[f32], out: &mut [f32], nx: usize, ny: usize) {
    let cells = nx * ny;
    let inv_tau = 1.0 / TAU;
    // Rows of the output are spread over the nine planes; compute a row of
    // all nine populations at a time, then scatter.
    let rows: Vec<Vec<[f32; 9]>> = (0..ny)
        .into_par_iter()
        .map(|j| {
            (0..nx)
                .map(|i| {
                    let mut ft = [0f32; 9];
                    for k in 0..9 {
                        let sj = (j as i64 - CY[k] as i64).rem_euclid(ny as i64) as usize;
                        let si = (i as i64 - CX[k] as i64).rem_euclid(nx as i64) as usize;
                        ft[k] = f[k * cells + sj * nx + si];
                    }
                    collide(&ft, inv_tau)
                })
                .collect()
        })
        .collect();
    out.par_chunks_mut(cells)
        .enumerate()
        .for_each(|(k, plane)| {
            for (j, row) in rows.iter().enumerate() {
                for (i, cell) in row.iter().enumerate() {
                    plane[j * nx + i] = cell[k];
                }
            }
        });
}

impl TaskCode for Lbm {
    fn problem(&self, size: &Size, seed: u64) -> Problem {
        let dims @ [nx, ny, _] = size.usize_dims();
        let f0 = initial(nx, ny, &uniform_f32(nx * ny, seed, 0, -NOISE, NOISE));
        grid_2d_problem(["f_a", "f_b"], &f0, dims, TAU)
    }
    fn reference(&self, size: &Size, problem: &Problem) -> Reference {
        let [nx, ny, steps] = size.usize_dims();
        let f0 = init_f32s(problem, 0);
        Arc::new(iterate(f0, steps, |_, f, next| step(f, next, nx, ny)))
    }
    fn check(&self, _: &Size, _: &Problem, reference: &Reference, outputs: &[Vec<u8>]) -> Verdict {
        max_abs_check("lbm", reference, outputs, |want| {
            TOLERANCE * max_abs(want).max(1.0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(f: &[f32], cells: usize) -> (f64, f64, f64) {
        let (mut m, mut px, mut py) = (0f64, 0f64, 0f64);
        for k in 0..9 {
            for c in 0..cells {
                let x = f[k * cells + c] as f64;
                m += x;
                px += CX[k] as f64 * x;
                py += CY[k] as f64 * x;
            }
        }
        (m, px, py)
    }

    #[test]
    fn initial_state_matches_the_specification() {
        let f = initial(64, 64, &[0.0; 64 * 64]);
        assert!((max_abs(&f) - 0.46661).abs() < 1e-5, "{}", max_abs(&f));
        let (mass, px, py) = moments(&f, 64 * 64);
        assert!((mass - 4124.9036).abs() < 2e-3, "{mass}");
        assert!(px.abs() < 1e-9 && py.abs() < 1e-9);
    }

    #[test]
    fn steps_conserve_mass_and_momentum() {
        let (nx, ny, steps) = (24, 20, 30);
        let size = Size::new("t", &[nx as u64, ny as u64, steps]);
        let p = crate::by_name("lbm").unwrap().problem(&size, 0);
        let r = crate::by_name("lbm").unwrap().reference(&size, &p);
        let f = r.downcast_ref::<Vec<f32>>().unwrap();
        let f0 = init_f32s(&p, 0);
        let (m0, _, _) = moments(&f0, nx * ny);
        let (m, px, py) = moments(f, nx * ny);
        assert!((m - m0).abs() < 1e-3 * m0 / 1e3, "mass {m0} -> {m}");
        assert!(px.abs() < 1e-3 && py.abs() < 1e-3, "momentum ({px}, {py})");
        assert_ne!(f, &f0, "the bump spreads");
        assert_eq!(p.outputs, vec![0]);
    }

    #[test]
    fn one_step_pulls_from_upstream_and_collides() {
        let (nx, ny) = (5, 4);
        let cells = nx * ny;
        let f: Vec<f32> = (0..9 * cells)
            .map(|n| 0.05 + ((n * 37) % 17) as f32 * 0.01)
            .collect();
        let mut out = vec![0f32; f.len()];
        step(&f, &mut out, nx, ny);
        // Cell (0, 0): the population k = 5 (c = (1, 1)) comes from (NX-1, NY-1).
        let (i, j) = (0usize, 0usize);
        let mut ft = [0f32; 9];
        for k in 0..9 {
            let si = (i as i32 - CX[k]).rem_euclid(nx as i32) as usize;
            let sj = (j as i32 - CY[k]).rem_euclid(ny as i32) as usize;
            ft[k] = f[k * cells + sj * nx + si];
        }
        assert_eq!(ft[5], f[5 * cells + (ny - 1) * nx + nx - 1]);
        let rho: f32 = ft.iter().sum();
        let u = (ft[1] + ft[5] + ft[8] - ft[3] - ft[6] - ft[7]) / rho;
        let v = (ft[2] + ft[5] + ft[6] - ft[4] - ft[7] - ft[8]) / rho;
        for k in 0..9 {
            let cu = CX[k] as f32 * u + CY[k] as f32 * v;
            let feq = W[k] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - 1.5 * (u * u + v * v));
            let want = ft[k] - 1.25 * (ft[k] - feq);
            assert!((out[k * cells] - want).abs() < 1e-6, "k {k}");
        }
    }
}
