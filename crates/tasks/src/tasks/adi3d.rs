//! adi3d: locally one-dimensional ADI for the 3-D heat equation, three
//! implicit tridiagonal sweeps (x, y, z) per step (spec section 11).
//! Size dims: `[NX, NY, NZ, n_steps]`; the box need not be a cube.
//!
//! Deviation from the spec: its initial state is deterministic, so the
//! evaluator's "fresh" verification inputs would equal the timed ones and a
//! kernel that memoised its answer would pass. Here every cell of the
//! spec's Gaussian u0 is multiplied by (1 + e), e uniform in [-1e-2, 1e-2)
//! drawn from the input seed (see `perturb_relative`): the faces stay exactly 0, and
//! the implicit sweeps are unconditionally stable and damp the noise. The
//! spec's derived max|ref| figures therefore hold only to about 1e-2.

use std::sync::Arc;

use rayon::prelude::*;

use crate::check::{f32s_to_bytes, init_f32s, max_abs, max_abs_check};
use crate::host::{iterate, ping_pong, ping_pong_problem};
use crate::rng::perturb_relative;
use crate::*;

const MU: f32 = 0.5;
/// The check: max_abs <= TOL_REL * max|ref|. The spec's 1e-3 + 1e-3 max|ref|
/// was ~1000x the worst honest f32 error and passed a kernel that skipped a
/// whole step (held-out size) or the last z sweep (N128, held-out). Worst
/// honest error over the smoke and full sizes (tests/tolerance_audit/sections_7_to_12.rs,
/// docs/tolerance-audit-b.md): 1.85e-6 = 2.5e-6 max|ref| (Thomas with a
/// reciprocal multiply, N64_20); fma, reversed elimination, 2-ulp divisions
/// and an f64 solve stay below. Skipping the last z sweep errs >= 1.3e-3.
const TOL_REL: f64 = 1.5e-5;
/// Block of every sweep, fixed by the task.
const BLOCK: u32 = 32;

pub struct Adi3d;

fn dims(size: &Size) -> ([usize; 3], usize) {
    let d = [
        size.dims[0] as usize,
        size.dims[1] as usize,
        size.dims[2] as usize,
    ];
    assert!(
        d.iter().all(|&n| n >= 3),
        "adi3d: every axis needs >= 3 points"
    );
    (d, size.dims[3] as usize)
}

/// Relative amplitude of the seeded perturbation of the initial state.
const PERTURBATION: f64 = 1e-2;

/// Gaussian bump centred in the box, sigma from the geometric-mean edge, all
/// six faces 0 (f32).
fn initial_u(d: [usize; 3]) -> Vec<f32> {
    let [nx, ny, nz] = d;
    let sigma = (0.15 * ((nx * ny * nz) as f64).cbrt()) as f32;
    let c = d.map(|n| (n as f32 - 1.0) / 2.0);
    let mut u = vec![0f32; nx * ny * nz];
    u.par_chunks_mut(nx * ny)
        .enumerate()
        .for_each(|(k, plane)| {
            for j in 0..ny {
                for i in 0..nx {
                    let on_face =
                        i == 0 || j == 0 || k == 0 || i == nx - 1 || j == ny - 1 || k == nz - 1;
                    if on_face {
                        continue;
                    }
                    let (x, y, z) = (i as f32 - c[0], j as f32 - c[1], k as f32 - c[2]);
                    let r2 = x * x + y * y + z * z;
                    plane[j * nx + i] = (-r2 / (2.0 * sigma * sigma)).exp();
                }
            }
        });
    u
}

/// Elements per parallel chunk when one solve spans whole planes.
const CHUNK: usize = 4096;

/// The c' table of the Thomas recurrence for lines of length `n` (f32):
/// c'[1] = c/b, c'[q] = c/(b - a*c'[q-1]); identical for every line.
fn c_prime(n: usize, mu: f32) -> Vec<f32> {
    let (a, b, c) = (-mu, 1.0 + 2.0 * mu, -mu);
    let mut cp = vec![0f32; n];
    for q in 1..n - 1 {
        let den = if q == 1 { b } else { b - a * cp[q - 1] };
        cp[q] = c / den;
    }
    cp
}

/// The Thomas solve of one line as the reference does it (f32), endpoints
/// copied.
#[cfg(test)]
fn thomas(rhs: &[f32], out: &mut [f32], mu: f32) {
    let n = rhs.len();
    solve_lines(rhs, out, n, 1, &c_prime(n, mu), mu, &|_| true);
}

/// Work on one output row given up to three input rows.
type RowOp<'a> = dyn Fn(&mut [f32], [&[f32]; 3]) + Sync + 'a;

/// Apply `f` to matching pieces of one output row and three input rows, in
/// parallel chunks when the rows are long.
fn rows(out: &mut [f32], ins: [&[f32]; 3], f: &RowOp<'_>) {
    if out.len() < 2 * CHUNK {
        f(out, ins);
        return;
    }
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, o)| {
        let r = c * CHUNK..c * CHUNK + o.len();
        f(o, ins.map(|s| if s.is_empty() { s } else { &s[r.clone()] }));
    });
}

/// Solve `inner` interleaved lines of length `n` at once: element q of line
/// e is at q*inner + e, in both `input` and `out`. The recurrence is the
/// Thomas algorithm with constant coefficients a = c = -mu, b = 1 + 2mu and
/// Dirichlet endpoints, d' streamed through `out`; lines with
/// `solve(e) == false` are copied.
fn solve_lines(
    input: &[f32],
    out: &mut [f32],
    n: usize,
    inner: usize,
    cp: &[f32],
    mu: f32,
    solve: &(dyn Fn(usize) -> bool + Sync),
) {
    let (a, b) = (-mu, 1.0 + 2.0 * mu);
    let row = |q: usize| q * inner..(q + 1) * inner;
    let first = &input[row(0)];
    let last = &input[row(n - 1)];
    // Forward sweep.
    for q in 1..n - 1 {
        let den = if q == 1 { b } else { b - a * cp[q - 1] };
        let (add_first, add_last) = (q == 1, q == n - 2);
        let (done, rest) = out.split_at_mut(q * inner);
        let prev = if q == 1 {
            first
        } else {
            &done[(q - 1) * inner..]
        };
        rows(
            &mut rest[..inner],
            [&input[row(q)], prev, last],
            &|cur, [r_in, prev, last]| {
                for e in 0..cur.len() {
                    let mut r = r_in[e];
                    if add_first {
                        r += mu * prev[e];
                    }
                    if add_last {
                        r += mu * last[e];
                    }
                    cur[e] = if add_first {
                        r / den
                    } else {
                        (r - a * prev[e]) / den
                    };
                }
            },
        );
    }
    // Back substitution.
    for q in (1..n - 2).rev() {
        let (lo, hi) = out.split_at_mut((q + 1) * inner);
        let c = cp[q];
        rows(&mut lo[q * inner..], [&hi[..inner], &[], &[]], &|cur,
                                                               [
            next,
            _,
            _,
        ]| {
            for e in 0..cur.len() {
                cur[e] -= c * next[e];
            }
        });
    }
    out[row(0)].copy_from_slice(first);
    out[row(n - 1)].copy_from_slice(last);
    for e in (0..inner).filter(|&e| !solve(e)) {
        for q in 0..n {
            out[q * inner + e] = input[q * inner + e];
        }
    }
}

/// One sweep along `axis` (0 = x, 1 = y, 2 = z). Only lines whose two
/// off-axis indices are both strictly interior are solved.
fn sweep(input: &[f32], out: &mut [f32], d: [usize; 3], axis: usize) {
    let [nx, ny, nz] = d;
    let interior = |v: usize, n: usize| v >= 1 && v + 1 < n;
    let cp = c_prime(d[axis], MU);
    match axis {
        0 => out
            .par_chunks_mut(nx)
            .zip(input.par_chunks(nx))
            .enumerate()
            .for_each(|(row, (o, i))| {
                let (j, k) = (row % ny, row / ny);
                if interior(j, ny) && interior(k, nz) {
                    solve_lines(i, o, nx, 1, &cp, MU, &|_| true);
                } else {
                    o.copy_from_slice(i);
                }
            }),
        1 => out
            .par_chunks_mut(nx * ny)
            .zip(input.par_chunks(nx * ny))
            .enumerate()
            .for_each(|(k, (o, i))| {
                if interior(k, nz) {
                    solve_lines(i, o, ny, nx, &cp, MU, &|e| interior(e, nx));
                } else {
                    o.copy_from_slice(i);
                }
            }),
        _ => solve_lines(input, out, nz, nx * ny, &cp, MU, &|e| {
            interior(e % nx, nx) && interior(e / nx, ny)
        }),
    }
}

/// `steps` ADI steps (x, y, z sweeps each) from `u`.
fn simulate(u: Vec<f32>, d: [usize; 3], steps: usize) -> Vec<f32> {
    iterate(u, 3 * steps, |s, u, next| sweep(u, next, d, s % 3))
}

impl TaskCode for Adi3d {
    fn problem(&self, size: &Size, seed: u64) -> Problem {
        let (d, steps) = dims(size);
        let [nx, ny, nz] = d.map(|v| v as u64);
        let mut u0 = initial_u(d);
        perturb_relative(&mut u0, seed, PERTURBATION);
        // Per pass: the grid's two axes (one thread per line).
        let grids = [[ny, nz, 1], [nx, nz, 1], [nx, ny, 1]];
        let mut launches = Vec::with_capacity(3 * steps);
        for s in 0..3 * steps {
            let (src, dst) = ping_pong(s);
            launches.push(LaunchSpec {
                kernel: s % 3,
                threads: grids[s % 3],
                block: Block::Fixed([BLOCK, 1, 1]),
                args: vec![
                    Arg::Buffer(src),
                    Arg::Buffer(dst),
                    Arg::U32(nx as u32),
                    Arg::U32(ny as u32),
                    Arg::U32(nz as u32),
                    Arg::F32(MU),
                ],
            });
        }
        // 3·n_steps sweeps: the state ends in A when n_steps is even.
        ping_pong_problem(["A", "B"], f32s_to_bytes(&u0), launches)
    }
    fn reference(&self, size: &Size, problem: &Problem) -> Reference {
        let (d, steps) = dims(size);
        Arc::new(simulate(init_f32s(problem, 0), d, steps))
    }
    fn check(&self, _: &Size, _: &Problem, reference: &Reference, outputs: &[Vec<u8>]) -> Verdict {
        max_abs_check("adi3d", reference, outputs, |want| TOL_REL * max_abs(want))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dense Gaussian elimination with partial pivoting (f64).
    fn dense_solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
        let n = b.len();
        for col in 0..n {
            let piv = (col..n)
                .max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))
                .unwrap();
            a.swap(col, piv);
            b.swap(col, piv);
            let pivot_row = a[col].clone();
            for r in col + 1..n {
                let f = a[r][col] / pivot_row[col];
                for (x, p) in a[r][col..].iter_mut().zip(&pivot_row[col..]) {
                    *x -= f * p;
                }
                b[r] -= f * b[col];
            }
        }
        let mut x = vec![0f64; n];
        for r in (0..n).rev() {
            let s: f64 = (r + 1..n).map(|c| a[r][c] * x[c]).sum();
            x[r] = (b[r] - s) / a[r][r];
        }
        x
    }

    #[test]
    fn thomas_matches_a_dense_solve_with_dirichlet_ends() {
        for n in [3usize, 4, 7, 40] {
            let rhs: Vec<f32> = (0..n).map(|q| ((q * 37 % 11) as f32 - 5.0) / 3.0).collect();
            let mut got = vec![0f32; n];
            thomas(&rhs, &mut got, MU);
            let mu = MU as f64;
            let mut a = vec![vec![0f64; n]; n];
            a[0][0] = 1.0;
            a[n - 1][n - 1] = 1.0;
            for q in 1..n - 1 {
                a[q][q - 1] = -mu;
                a[q][q] = 1.0 + 2.0 * mu;
                a[q][q + 1] = -mu;
            }
            let want = dense_solve(a, rhs.iter().map(|&v| v as f64).collect());
            for q in 0..n {
                assert!((got[q] as f64 - want[q]).abs() < 1e-5, "n {n} q {q}");
            }
            assert_eq!((got[0], got[n - 1]), (rhs[0], rhs[n - 1]));
        }
    }

    #[test]
    fn interleaved_lines_match_single_lines() {
        let (n, inner) = (9, 5);
        let input: Vec<f32> = (0..n * inner).map(|v| ((v * 7919) % 13) as f32).collect();
        let mut out = vec![0f32; n * inner];
        solve_lines(&input, &mut out, n, inner, &c_prime(n, MU), MU, &|e| e != 2);
        for e in 0..inner {
            let line: Vec<f32> = (0..n).map(|q| input[q * inner + e]).collect();
            let mut want = vec![0f32; n];
            thomas(&line, &mut want, MU);
            for q in 0..n {
                let w = if e == 2 { line[q] } else { want[q] };
                assert_eq!(out[q * inner + e], w, "line {e} q {q}");
            }
        }
    }

    #[test]
    fn sweeps_keep_faces_and_diffuse_a_prism() {
        let size = Size::new("t", &[12, 9, 7, 3]);
        let p = crate::by_name("adi3d").unwrap().problem(&size, 0);
        let r = crate::by_name("adi3d").unwrap().reference(&size, &p);
        let u = r.downcast_ref::<Vec<f32>>().unwrap();
        let u0 = init_f32s(&p, 0);
        let (nx, ny, nz) = (12, 9, 7);
        for k in 0..nz {
            for j in 0..ny {
                for i in 0..nx {
                    let face =
                        i == 0 || j == 0 || k == 0 || i == nx - 1 || j == ny - 1 || k == nz - 1;
                    if face {
                        assert_eq!(u[(k * ny + j) * nx + i], 0.0);
                    }
                }
            }
        }
        assert!(max_abs(u) < max_abs(&u0) && max_abs(u) > 0.0);
        assert_eq!(p.launches.len(), 9);
        assert_eq!(p.launches[1].threads, [12, 7, 1]);
        assert_eq!(p.outputs, vec![1]);
        // A y sweep equals solving each y line on its own.
        let d = [nx, ny, nz];
        let mut out = vec![0f32; u0.len()];
        sweep(&u0, &mut out, d, 1);
        let (i, k) = (4, 3);
        let line: Vec<f32> = (0..ny).map(|j| u0[(k * ny + j) * nx + i]).collect();
        let mut want = vec![0f32; ny];
        thomas(&line, &mut want, MU);
        for j in 0..ny {
            assert_eq!(out[(k * ny + j) * nx + i], want[j]);
        }
    }

    #[test]
    fn max_of_the_reference_matches_the_spec() {
        // From the spec's unperturbed u0, its derived max|ref| figures
        // apply (up to f32 rounding).
        let plan = crate::by_name("adi3d").unwrap().sizes(SizeSet::Full);
        for (size, want) in plan.in_distribution.iter().zip([0.74408, 0.89943]) {
            let (d, steps) = dims(size);
            let m = max_abs(&simulate(initial_u(d), d, steps));
            assert!((m - want).abs() < 2e-5, "{}: {m} vs {want}", size.label);
        }
    }
}
