//! morton: explicit 3-D heat stencil on an N³ grid stored in Z-order
//! (Morton order) (spec section 12). Size dims: `[N, n_steps]`, N a power of
//! two.
//!
//! Deviation from the spec: its initial state is deterministic, so the
//! evaluator's "fresh" verification inputs would equal the timed ones and a
//! kernel that memoised its answer would pass. Here every cell of the
//! spec's Gaussian u0 is multiplied by (1 + e), e uniform in [-1e-2, 1e-2)
//! drawn from the input seed (see `perturb_relative`): the faces stay exactly 0, and
//! the stencil (alpha = 0.1 < 1/6) damps the noise. The spec's derived
//! max|ref| figures therefore hold only to about 1e-2.

use std::sync::Arc;

use rayon::prelude::*;

use crate::check::{
    bytes_to_f32s, f32_reference, f32s_to_bytes, init_f32s, max_abs, max_abs_verdict,
};
use crate::host::{iterate, ping_pong_launches, ping_pong_problem};
use crate::rng::perturb_relative;
use crate::*;

const ALPHA: f32 = 0.10;
/// The check: max_abs <= TOL_ABS + TOL_REL * max|ref| (after un-permuting).
/// The spec's 1e-4 + 1e-5 max|ref| was ~140x the worst honest f32 error.
/// Worst honest error over the smoke and full sizes
/// (tests/tolerance_audit/sections_7_to_12.rs, docs/tolerance-audit-b.md): 7.75e-7 at
/// N64_60 (max|ref| 0.83) for c (1 - 6 alpha) + alpha sum; reordered,
/// pairwise and fma sums and f64 stay below. One step fewer errs >= 3.6e-3
/// at smoke sizes and 4e-4 at the held-out; half-precision intermediates
/// >= 2e-4.
const TOL_ABS: f64 = 4e-6;
const TOL_REL: f64 = 4e-6;

pub struct Morton;

fn dims(size: &Size) -> (usize, usize) {
    let n = size.dims[0] as usize;
    assert!(
        n.is_power_of_two() && (2..=1024).contains(&n),
        "morton: N = {n} must be a power of two in [2, 1024]"
    );
    (n, size.dims[1] as usize)
}

/// Spread the low 10 bits of `v` so that bit b moves to bit 3b.
fn spread3(v: usize) -> usize {
    let mut x = (v as u32) & 0x3FF;
    x = (x | (x << 16)) & 0x0300_00FF;
    x = (x | (x << 8)) & 0x0300_F00F;
    x = (x | (x << 4)) & 0x030C_30C3;
    x = (x | (x << 2)) & 0x0924_9249;
    x as usize
}

/// Inverse of `spread3`: gather every third bit.
fn compact3(v: usize) -> usize {
    let mut x = (v as u32) & 0x0924_9249;
    x = (x | (x >> 2)) & 0x030C_30C3;
    x = (x | (x >> 4)) & 0x0300_F00F;
    x = (x | (x >> 8)) & 0x0300_00FF;
    x = (x | (x >> 16)) & 0x3FF;
    x as usize
}

/// Morton index: bit b of x, y, z goes to bit 3b, 3b+1, 3b+2 (N <= 1024).
fn encode(x: usize, y: usize, z: usize) -> usize {
    spread3(x) | (spread3(y) << 1) | (spread3(z) << 2)
}

fn decode(m: usize) -> (usize, usize, usize) {
    (compact3(m), compact3(m >> 1), compact3(m >> 2))
}

/// Relative amplitude of the seeded perturbation of the initial state.
const PERTURBATION: f64 = 1e-2;

/// Row-major Gaussian with faces zeroed (f32).
fn initial_row_major(n: usize) -> Vec<f32> {
    let sigma = (0.15 * n as f64) as f32;
    let c = (n as f32 - 1.0) / 2.0;
    let mut u = vec![0f32; n * n * n];
    u.par_chunks_mut(n * n).enumerate().for_each(|(z, plane)| {
        for y in 0..n {
            for x in 0..n {
                let face = [x, y, z].iter().any(|&v| v == 0 || v == n - 1);
                if !face {
                    let (dx, dy, dz) = (x as f32 - c, y as f32 - c, z as f32 - c);
                    let r2 = dx * dx + dy * dy + dz * dz;
                    plane[y * n + x] = (-r2 / (2.0 * sigma * sigma)).exp();
                }
            }
        }
    });
    u
}

/// Row-major -> Morton order.
fn to_morton(u: &[f32], n: usize) -> Vec<f32> {
    (0..u.len())
        .into_par_iter()
        .map(|m| {
            let (x, y, z) = decode(m);
            u[(z * n + y) * n + x]
        })
        .collect()
}

/// Morton order -> row-major.
fn from_morton(v: &[f32], n: usize) -> Vec<f32> {
    let mut u = vec![0f32; v.len()];
    u.par_chunks_mut(n).enumerate().for_each(|(row, out)| {
        let yz = encode(0, row % n, row / n);
        for (x, o) in out.iter_mut().enumerate() {
            *o = v[spread3(x) | yz];
        }
    });
    u
}

/// One forward-Euler step on the row-major grid (f32), summing x-, x+,
/// y-, y+, z-, z+ and then subtracting 6c.
fn step(u: &[f32], out: &mut [f32], n: usize) {
    let p = n * n;
    out.par_chunks_mut(p).enumerate().for_each(|(z, plane)| {
        if z == 0 || z == n - 1 {
            plane.copy_from_slice(&u[z * p..(z + 1) * p]);
            return;
        }
        for (y, o) in plane.chunks_exact_mut(n).enumerate() {
            let base = z * p + y * n;
            let c = &u[base..base + n];
            if y == 0 || y == n - 1 {
                o.copy_from_slice(c);
                continue;
            }
            let (ym, yp) = (&u[base - n..base], &u[base + n..base + 2 * n]);
            let (zm, zp) = (&u[base - p..base - p + n], &u[base + p..base + p + n]);
            o[0] = c[0];
            o[n - 1] = c[n - 1];
            for x in 1..n - 1 {
                let lap = c[x - 1] + c[x + 1] + ym[x] + yp[x] + zm[x] + zp[x] - 6.0 * c[x];
                o[x] = c[x] + ALPHA * lap;
            }
        }
    });
}

/// `steps` stencil steps from the row-major `u`.
fn simulate(u: Vec<f32>, n: usize, steps: usize) -> Vec<f32> {
    iterate(u, steps, |_, u, next| step(u, next, n))
}

impl TaskCode for Morton {
    fn problem(&self, size: &Size, seed: u64) -> Problem {
        let (n, steps) = dims(size);
        let mut u0 = initial_row_major(n);
        perturb_relative(&mut u0, seed, PERTURBATION);
        let u0 = to_morton(&u0, n);
        let launches = ping_pong_launches(
            steps,
            [u0.len() as u64, 1, 1],
            Block::Default([256, 1, 1]),
            &[
                Arg::U32(n as u32),
                Arg::U32(n.trailing_zeros()),
                Arg::F32(ALPHA),
            ],
        );
        ping_pong_problem(["A", "B"], f32s_to_bytes(&u0), launches)
    }
    fn reference(&self, size: &Size, problem: &Problem) -> Reference {
        let (n, steps) = dims(size);
        let u = from_morton(&init_f32s(problem, 0), n);
        // Row-major; the output is un-permuted before the comparison.
        Arc::new(simulate(u, n, steps))
    }
    fn check(&self, size: &Size, _: &Problem, r: &Reference, outputs: &[Vec<u8>]) -> Verdict {
        let (n, _) = dims(size);
        let want = f32_reference(r, "morton");
        let stored = bytes_to_f32s(&outputs[0]);
        if stored.len() != n * n * n {
            return max_abs_verdict(&stored, want, 0.0);
        }
        let got = from_morton(&stored, n);
        max_abs_verdict(&got, want, TOL_ABS + TOL_REL * max_abs(want))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_matches_the_spec_and_round_trips() {
        assert_eq!(encode(1, 0, 0), 1);
        assert_eq!(encode(0, 1, 0), 2);
        assert_eq!(encode(0, 0, 1), 4);
        assert_eq!(encode(3, 3, 3), 63);
        // The O(1) spreading agrees with the per-bit definition.
        let per_bit = |x: usize, y: usize, z: usize| {
            (0..10).fold(0, |m, b| {
                m | ((x >> b) & 1) << (3 * b)
                    | ((y >> b) & 1) << (3 * b + 1)
                    | ((z >> b) & 1) << (3 * b + 2)
            })
        };
        for (x, y, z) in [
            (1023, 0, 5),
            (0, 1023, 17),
            (513, 2, 1023),
            (1023, 1023, 1023),
        ] {
            assert_eq!(encode(x, y, z), per_bit(x, y, z));
            assert_eq!(decode(per_bit(x, y, z)), (x, y, z));
        }
        for log_n in [1u32, 3, 5] {
            let n = 1usize << log_n;
            let mut seen = vec![false; n * n * n];
            for z in 0..n {
                for y in 0..n {
                    for x in 0..n {
                        let m = encode(x, y, z);
                        assert!(!seen[m]);
                        seen[m] = true;
                        assert_eq!(decode(m), (x, y, z));
                    }
                }
            }
        }
        let u: Vec<f32> = (0..512).map(|v| v as f32).collect();
        assert_eq!(from_morton(&to_morton(&u, 8), 8), u);
    }

    #[test]
    fn reference_diffuses_and_keeps_faces() {
        let size = Size::new("t", &[16, 6]);
        let p = crate::by_name("morton").unwrap().problem(&size, 0);
        let r = crate::by_name("morton").unwrap().reference(&size, &p);
        let u = r.downcast_ref::<Vec<f32>>().unwrap();
        let mut u0 = initial_row_major(16);
        perturb_relative(&mut u0, 0, PERTURBATION);
        assert_eq!(from_morton(&init_f32s(&p, 0), 16), u0);
        assert!(max_abs(u) < max_abs(&u0));
        assert!((0..16).all(|x| u[x] == 0.0 && u[15 * 256 + 15 * 16 + x] == 0.0));
        // The check un-permutes: the reference scattered back passes.
        let stored = to_morton(u, 16);
        let v = crate::by_name("morton")
            .unwrap()
            .check(&size, &p, &r, &[f32s_to_bytes(&stored)]);
        assert!(v.passed && v.value == 0.0);
        // The row-major layout itself does not.
        assert!(
            !crate::by_name("morton")
                .unwrap()
                .check(&size, &p, &r, &[f32s_to_bytes(u)])
                .passed
        );
    }

    #[test]
    fn max_of_the_reference_matches_the_spec() {
        // From the spec's unperturbed u0, its derived max|ref| figures
        // apply (up to f32 rounding).
        let plan = crate::by_name("morton").unwrap().sizes(SizeSet::Full);
        for (size, want) in plan.in_distribution.iter().zip([0.34001, 0.82928]) {
            let (n, steps) = dims(size);
            let m = max_abs(&simulate(initial_row_major(n), n, steps));
            assert!((m - want).abs() < 2e-5, "{}: {m} vs {want}", size.label);
        }
    }
}
