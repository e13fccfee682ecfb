//! CPU models of what GPU kernels of saxpy, heat2d, wave3d, nbody, hmc and
//! lbm may legitimately compute (honest variants: other summation orders,
//! FMA contraction, fast-math approximations of sqrt / rsqrt / division /
//! log / sin / cos with a few ulp of error) and of kernels that do less work
//! than asked (under-computing variants). They produce the bytes of a
//! problem's `outputs`, so the tests can feed them to `Task::check`.
//!
//! Used by `tolerance_audit/sections_1_to_6.rs` and `seed_inputs.rs`.
#![allow(dead_code, clippy::needless_range_loop)]

pub use super::{bytes, f32s};
use kevo_tasks::{Problem, Size, init_data};
use rayon::prelude::*;

pub fn u32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Order in which a kernel adds up the terms of a sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// As the reference / the seed kernel writes it.
    Forward,
    Reversed,
    /// Pairwise (tree) reduction, as a shared-memory or warp reduction does.
    Pairwise,
    /// Four interleaved partial sums added at the end (unrolled loops,
    /// several threads per output, tiles processed by different lanes).
    Blocked,
}

/// One honest way to compute a task's arithmetic.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    pub order: Order,
    /// Contract a*b + c into fused multiply-adds.
    pub fma: bool,
    /// Fast-math: every transcendental / sqrt / rsqrt / division result is
    /// off by up to `approx_ulps` ulp (pseudo-randomly, per call site and
    /// value), like `-cl-fast-relaxed-math` / `--use_fast_math`.
    pub approx_ulps: i32,
    /// Use an algebraically equivalent rearrangement of the update (e.g.
    /// heat2d `(1-4a)c + a*sum`, lbm `(1-w)f + w*feq`, hmc dH as
    /// `(U1-U0)+(K1-K0)` and `u < exp(-dH)`).
    pub rearranged: bool,
}

impl Variant {
    pub fn name(&self) -> String {
        format!(
            "{:?}{}{}{}",
            self.order,
            if self.fma { "+fma" } else { "" },
            if self.approx_ulps > 0 {
                format!("+approx{}ulp", self.approx_ulps)
            } else {
                String::new()
            },
            if self.rearranged { "+rearranged" } else { "" }
        )
    }

    /// The reference's own arithmetic (f32, forward, no fma, exact libm).
    pub const EXACT: Variant = Variant {
        order: Order::Forward,
        fma: false,
        approx_ulps: 0,
        rearranged: false,
    };
}

/// Honest variants tried on every task.
pub fn honest_variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for order in [
        Order::Forward,
        Order::Reversed,
        Order::Pairwise,
        Order::Blocked,
    ] {
        for fma in [false, true] {
            v.push(Variant {
                order,
                fma,
                approx_ulps: 0,
                rearranged: false,
            });
        }
    }
    for order in [Order::Forward, Order::Pairwise, Order::Blocked] {
        for rearranged in [false, true] {
            v.push(Variant {
                order,
                fma: true,
                approx_ulps: 2,
                rearranged,
            });
        }
    }
    v.push(Variant {
        order: Order::Reversed,
        fma: false,
        approx_ulps: 4,
        rearranged: true,
    });
    v
}

fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x85EB_CA6B);
    x ^= x >> 13;
    x = x.wrapping_mul(0xC2B2_AE35);
    x ^ (x >> 16)
}

/// `x` moved by a pseudo-random number of ulp in [-ulps, ulps], chosen from
/// its bits and `site`; emulates an approximate hardware instruction.
pub fn approx(x: f32, ulps: i32, site: u32) -> f32 {
    if ulps == 0 || !x.is_finite() || x == 0.0 {
        return x;
    }
    let k =
        (mix(x.to_bits() ^ site.wrapping_mul(0x9E37_79B9)) % (2 * ulps as u32 + 1)) as i32 - ulps;
    f32::from_bits((x.to_bits() as i32 + k) as u32)
}

impl Variant {
    /// a * b + c
    pub fn mad(&self, a: f32, b: f32, c: f32) -> f32 {
        if self.fma { a.mul_add(b, c) } else { a * b + c }
    }
    pub fn sqrt(&self, x: f32, site: u32) -> f32 {
        approx(x.sqrt(), self.approx_ulps, site)
    }
    pub fn rsqrt(&self, x: f32, site: u32) -> f32 {
        approx((1.0 / (x as f64).sqrt()) as f32, self.approx_ulps, site)
    }
    pub fn div(&self, a: f32, b: f32, site: u32) -> f32 {
        approx(a / b, self.approx_ulps, site)
    }
    pub fn recip(&self, b: f32, site: u32) -> f32 {
        approx(1.0 / b, self.approx_ulps, site)
    }
    pub fn ln(&self, x: f32, site: u32) -> f32 {
        approx(x.ln(), self.approx_ulps, site)
    }
    pub fn exp(&self, x: f32, site: u32) -> f32 {
        approx(x.exp(), self.approx_ulps, site)
    }
    pub fn sin(&self, x: f32, site: u32) -> f32 {
        // Fast sin/cos on [0, 2pi) have an absolute, not relative, error:
        // model it as a few ulp of 1.
        let s = x.sin();
        if self.approx_ulps == 0 {
            s
        } else {
            s + (approx(1.0, self.approx_ulps, site ^ s.to_bits()) - 1.0)
        }
    }
    pub fn cos(&self, x: f32, site: u32) -> f32 {
        let c = x.cos();
        if self.approx_ulps == 0 {
            c
        } else {
            c + (approx(1.0, self.approx_ulps, site ^ c.to_bits()) - 1.0)
        }
    }

    /// Sum of `terms` in this variant's order.
    pub fn sum(&self, terms: &[f32]) -> f32 {
        sum_in(self.order, terms)
    }

    /// sum_j a[j] * b[j] in this variant's order, with or without fma.
    pub fn dot(&self, a: &[f32], b: &[f32]) -> f32 {
        let n = a.len();
        match self.order {
            Order::Forward => {
                let mut s = 0f32;
                for j in 0..n {
                    s = self.mad(a[j], b[j], s);
                }
                s
            }
            Order::Reversed => {
                let mut s = 0f32;
                for j in (0..n).rev() {
                    s = self.mad(a[j], b[j], s);
                }
                s
            }
            Order::Blocked => {
                let mut p = [0f32; 4];
                for j in 0..n {
                    p[j % 4] = self.mad(a[j], b[j], p[j % 4]);
                }
                (p[0] + p[1]) + (p[2] + p[3])
            }
            Order::Pairwise => {
                let prods: Vec<f32> = (0..n).map(|j| a[j] * b[j]).collect();
                sum_in(Order::Pairwise, &prods)
            }
        }
    }
}

pub fn sum_in(order: Order, terms: &[f32]) -> f32 {
    match order {
        Order::Forward => terms.iter().fold(0f32, |s, &t| s + t),
        Order::Reversed => terms.iter().rev().fold(0f32, |s, &t| s + t),
        Order::Blocked => {
            let mut p = [0f32; 4];
            for (j, &t) in terms.iter().enumerate() {
                p[j % 4] += t;
            }
            (p[0] + p[1]) + (p[2] + p[3])
        }
        Order::Pairwise => {
            if terms.len() <= 2 {
                terms.iter().fold(0f32, |s, &t| s + t)
            } else {
                let h = terms.len().div_ceil(2);
                sum_in(Order::Pairwise, &terms[..h]) + sum_in(Order::Pairwise, &terms[h..])
            }
        }
    }
}

// ---------------------------------------------------------------- saxpy

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaxpyCheat {
    /// Only even elements are updated.
    EveryOther,
    /// The last element is not updated (off-by-one bound).
    LastElement,
}

pub fn saxpy(p: &Problem, v: Variant, cheat: Option<SaxpyCheat>) -> Vec<Vec<u8>> {
    let x = f32s(init_data(p, 0));
    let mut y = f32s(init_data(p, 1));
    let n = y.len();
    for (i, (y, &x)) in y.iter_mut().zip(&x).enumerate() {
        let skip = match cheat {
            Some(SaxpyCheat::EveryOther) => i % 2 == 1,
            Some(SaxpyCheat::LastElement) => i == n - 1,
            None => false,
        };
        if !skip {
            *y = v.mad(2.5, x, *y);
        }
    }
    vec![bytes(&y)]
}

// ---------------------------------------------------------------- heat2d / wave3d / lbm

/// Under-computing variants of the time-stepping tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepCheat {
    /// The middle step is not applied (the state is copied).
    SkipMiddleStep,
    /// The last step is not applied.
    SkipLastStep,
}

fn skipped(cheat: Option<StepCheat>, s: usize, steps: usize) -> bool {
    match cheat {
        Some(StepCheat::SkipMiddleStep) => s == steps / 2,
        Some(StepCheat::SkipLastStep) => s + 1 == steps,
        None => false,
    }
}

pub fn heat2d(size: &Size, p: &Problem, v: Variant, cheat: Option<StepCheat>) -> Vec<Vec<u8>> {
    let (nx, ny, steps) = (
        size.dims[0] as usize,
        size.dims[1] as usize,
        size.dims[2] as usize,
    );
    let alpha = 0.20f32;
    let mut u = f32s(init_data(p, 0));
    let mut next = u.clone();
    for s in 0..steps {
        if skipped(cheat, s, steps) {
            continue;
        }
        next.par_chunks_mut(nx).enumerate().for_each(|(j, row)| {
            for i in 0..nx {
                let idx = j * nx + i;
                if i == 0 || j == 0 || i == nx - 1 || j == ny - 1 {
                    row[i] = u[idx];
                    continue;
                }
                let c = u[idx];
                let t = [u[idx - 1], u[idx + 1], u[idx - nx], u[idx + nx]];
                let sum = v.sum(&t);
                row[i] = if v.rearranged {
                    v.mad(alpha, sum, (1.0 - 4.0 * alpha) * c)
                } else {
                    let lap = v.mad(-4.0, c, sum);
                    v.mad(alpha, lap, c)
                };
            }
        });
        std::mem::swap(&mut u, &mut next);
    }
    vec![bytes(&u)]
}

pub fn wave3d(size: &Size, p: &Problem, v: Variant, cheat: Option<StepCheat>) -> Vec<Vec<u8>> {
    let (nx, ny, nz, steps) = (
        size.dims[0] as usize,
        size.dims[1] as usize,
        size.dims[2] as usize,
        size.dims[3] as usize,
    );
    let alpha = 0.18f32;
    let plane = nx * ny;
    let mut prev = f32s(init_data(p, 0));
    let mut curr = f32s(init_data(p, 1));
    let mut next = vec![0f32; curr.len()];
    for s in 0..steps {
        if skipped(cheat, s, steps) {
            // A skipped launch leaves the rotation intact but the new
            // state is just the current one.
            next.copy_from_slice(&curr);
        } else {
            next.par_chunks_mut(plane).enumerate().for_each(|(k, out)| {
                for j in 0..ny {
                    for i in 0..nx {
                        let idx = k * plane + j * nx + i;
                        let o = &mut out[j * nx + i];
                        if i == 0 || j == 0 || k == 0 || i == nx - 1 || j == ny - 1 || k == nz - 1 {
                            *o = curr[idx];
                            continue;
                        }
                        let c = curr[idx];
                        let t = [
                            curr[idx - 1],
                            curr[idx + 1],
                            curr[idx - nx],
                            curr[idx + nx],
                            curr[idx - plane],
                            curr[idx + plane],
                        ];
                        let sum = v.sum(&t);
                        *o = if v.rearranged {
                            v.mad(alpha, sum, v.mad(2.0 - 6.0 * alpha, c, -prev[idx]))
                        } else {
                            let lap = v.mad(-6.0, c, sum);
                            v.mad(alpha, lap, 2.0 * c - prev[idx])
                        };
                    }
                }
            });
        }
        std::mem::swap(&mut prev, &mut curr);
        std::mem::swap(&mut curr, &mut next);
    }
    vec![bytes(&curr)]
}

const LBM_CX: [i32; 9] = [0, 1, 0, -1, 0, 1, -1, -1, 1];
const LBM_CY: [i32; 9] = [0, 0, 1, 0, -1, 1, 1, -1, -1];

const LBM_W: [f32; 9] = [
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

/// lbm's collision as a model wrote it on an H200 (and failed the first
/// tolerance with, at 2.5e-6): no velocity, the equilibrium in momentum
/// m = rho u, feq_k = w_k (P + 3 q_k + 4.5 q_k^2 / rho) with
/// P = rho - 1.5 |m|^2 / rho and q_k = c_k . m, one reciprocal of rho,
/// and the relaxation as (1 - 1/tau) f + (w_k / tau) (...), all fused.
fn lbm_momentum_form(
    v: Variant,
    ft: &[f32; 9],
    rho: f32,
    (mx, my): (f32, f32),
    inv_tau: f32,
) -> [f32; 9] {
    let inv = v.recip(rho, 1);
    let m2 = v.mad(mx, mx, my * my);
    let pp = v.mad(-1.5 * m2, inv, rho);
    let h = 4.5 * inv;
    let keep = 1.0 - inv_tau;
    std::array::from_fn(|k| {
        let q = LBM_CX[k] as f32 * mx + LBM_CY[k] as f32 * my;
        let inner = v.mad(3.0, q, v.mad(h * q, q, pp));
        v.mad(inv_tau * LBM_W[k], inner, keep * ft[k])
    })
}

pub fn lbm(size: &Size, p: &Problem, v: Variant, cheat: Option<StepCheat>) -> Vec<Vec<u8>> {
    let (nx, ny, steps) = (
        size.dims[0] as usize,
        size.dims[1] as usize,
        size.dims[2] as usize,
    );
    let w = LBM_W;
    let cells = nx * ny;
    let inv_tau = 1.0f32 / 0.8;
    let mut f = f32s(init_data(p, 0));
    for s in 0..steps {
        if skipped(cheat, s, steps) {
            continue;
        }
        let rows: Vec<Vec<[f32; 9]>> = (0..ny)
            .into_par_iter()
            .map(|j| {
                (0..nx)
                    .map(|i| {
                        let mut ft = [0f32; 9];
                        for k in 0..9 {
                            let sj = (j as i64 - LBM_CY[k] as i64).rem_euclid(ny as i64) as usize;
                            let si = (i as i64 - LBM_CX[k] as i64).rem_euclid(nx as i64) as usize;
                            ft[k] = f[k * cells + sj * nx + si];
                        }
                        let rho = v.sum(&ft);
                        let mxt: [f32; 9] = std::array::from_fn(|k| LBM_CX[k] as f32 * ft[k]);
                        let myt: [f32; 9] = std::array::from_fn(|k| LBM_CY[k] as f32 * ft[k]);
                        let (mx, my) = (v.sum(&mxt), v.sum(&myt));
                        let (u, vv) = if v.approx_ulps > 0 {
                            let r = v.recip(rho, 1);
                            (mx * r, my * r)
                        } else {
                            (mx / rho, my / rho)
                        };
                        if v.rearranged {
                            return lbm_momentum_form(v, &ft, rho, (mx, my), inv_tau);
                        }
                        let usq = v.mad(u, u, vv * vv);
                        let mut out = [0f32; 9];
                        for k in 0..9 {
                            let cu = v.mad(LBM_CX[k] as f32, u, LBM_CY[k] as f32 * vv);
                            let poly = v.mad(4.5 * cu, cu, v.mad(3.0, cu, 1.0)) - 1.5 * usq;
                            let feq = w[k] * rho * poly;
                            out[k] = v.mad(-inv_tau, ft[k] - feq, ft[k]);
                        }
                        out
                    })
                    .collect()
            })
            .collect();
        f.par_chunks_mut(cells).enumerate().for_each(|(k, plane)| {
            for (j, row) in rows.iter().enumerate() {
                for (i, cell) in row.iter().enumerate() {
                    plane[j * nx + i] = cell[k];
                }
            }
        });
    }
    vec![bytes(&f)]
}

// ---------------------------------------------------------------- nbody

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NbodyCheat {
    /// Forces recomputed only on even steps; odd steps reuse them.
    ForcesEveryOtherStep,
    /// Velocities are integrated but the written velocity is the input one.
    StaleVelocityOutput,
    /// Only every other body j is summed, with doubled mass (a sub-sampled
    /// force).
    HalfThePairs,
}

/// Final (pos, vel) as the problem's `outputs` (float4 arrays).
pub fn nbody(size: &Size, p: &Problem, v: Variant, cheat: Option<NbodyCheat>) -> Vec<Vec<u8>> {
    let (n, steps) = (size.dims[0] as usize, size.dims[1] as usize);
    let (dt, eps) = (1e-3f32, 0.05f32);
    let eps2 = eps * eps;
    let mut pos = f32s(init_data(p, 0));
    let mut vel = f32s(init_data(p, 2));
    let mass = f32s(init_data(p, 4));
    let mut acc = vec![[0f32; 3]; n];
    let mut vel_written = vel.clone();
    for s in 0..steps {
        let recompute = !(cheat == Some(NbodyCheat::ForcesEveryOtherStep) && s % 2 == 1);
        if recompute {
            acc.par_iter_mut().enumerate().for_each(|(i, a)| {
                let ri = [pos[4 * i], pos[4 * i + 1], pos[4 * i + 2]];
                let js: Vec<usize> = match cheat {
                    Some(NbodyCheat::HalfThePairs) => (0..n).step_by(2).collect(),
                    _ => (0..n).collect(),
                };
                let scale = if cheat == Some(NbodyCheat::HalfThePairs) {
                    2.0
                } else {
                    1.0
                };
                let mut sms = Vec::with_capacity(js.len());
                let mut ds = [
                    Vec::with_capacity(js.len()),
                    Vec::with_capacity(js.len()),
                    Vec::with_capacity(js.len()),
                ];
                for &j in &js {
                    let d = [
                        pos[4 * j] - ri[0],
                        pos[4 * j + 1] - ri[1],
                        pos[4 * j + 2] - ri[2],
                    ];
                    let r2 = v.mad(d[0], d[0], v.mad(d[1], d[1], v.mad(d[2], d[2], eps2)));
                    let inv_r3 = if v.rearranged {
                        let inv = v.rsqrt(r2, 7);
                        inv * inv * inv
                    } else {
                        v.rsqrt(r2 * r2 * r2, 7)
                    };
                    sms.push(scale * mass[j] * inv_r3);
                    for c in 0..3 {
                        ds[c].push(d[c]);
                    }
                }
                // acc += s * d, with the product fused or not.
                for c in 0..3 {
                    a[c] = v.dot(&sms, &ds[c]);
                }
            });
        }
        let mut np = pos.clone();
        let mut nv = vel.clone();
        for i in 0..n {
            for c in 0..3 {
                let vv = v.mad(acc[i][c], dt, vel[4 * i + c]);
                nv[4 * i + c] = vv;
                np[4 * i + c] = v.mad(vv, dt, pos[4 * i + c]);
            }
        }
        vel_written = if cheat == Some(NbodyCheat::StaleVelocityOutput) {
            vel.clone()
        } else {
            nv.clone()
        };
        pos = np;
        vel = nv;
    }
    vec![bytes(&pos), bytes(&vel_written)]
}

// ---------------------------------------------------------------- hmc

/// hmc's in-kernel hash (spec section 5).
pub fn hmc_uniform(seed: u32, chain: u32, ctr: u32) -> f32 {
    let key = seed.wrapping_add(chain.wrapping_mul(0x9E37_79B9));
    let bits = mix(mix(key ^ ctr));
    (bits >> 8) as f32 * (1.0 / 16_777_216.0)
}

pub const HMC_T: u32 = 200;
pub const HMC_L: u32 = 10;
pub const HMC_EPS: f32 = 0.2;
pub const HMC_SEED: u32 = 0xCAFE_BEEF;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HmcCheat {
    /// q0 / 2 ~ N(0, Sigma): right statistics, no sampling; a plausible
    /// accept count (196 of 200) per chain.
    RescaleInitial,
    /// The initial states, unchanged, with the accept counts of an honest run.
    ReturnInitial,
    /// L - 1 leapfrog steps instead of L.
    FewerLeapfrogSteps,
    /// Only every other HMC step is done (T/2 transitions).
    HalfTheSteps,
}

fn hmc_matvec(v: &Variant, a: &[f32], q: &[f32], f: &mut [f32]) {
    let d = q.len();
    for i in 0..d {
        f[i] = v.dot(&a[i * d..(i + 1) * d], q);
    }
}

/// One HMC step of one chain with this variant's arithmetic.
pub fn hmc_step(
    v: &Variant,
    a: &[f32],
    q: &mut [f32],
    chain: u32,
    step: u32,
    l_steps: u32,
) -> bool {
    let d = q.len();
    let seed = HMC_SEED;
    let mut p = vec![0f32; d];
    let mut f = vec![0f32; d];
    let base = step.wrapping_mul(d as u32 + 1);
    for i in (0..d).step_by(2) {
        let u1 = hmc_uniform(seed, chain, base.wrapping_add(i as u32)).max(1e-7);
        let u2 = hmc_uniform(seed, chain, base.wrapping_add(i as u32 + 1));
        let r = v.sqrt(-2.0 * v.ln(u1, 1), 2);
        let theta = std::f32::consts::TAU * u2;
        p[i] = r * v.cos(theta, 3);
        p[i + 1] = r * v.sin(theta, 4);
    }
    let q_old = q.to_vec();
    hmc_matvec(v, a, q, &mut f);
    let half: Vec<f32> = (0..d).map(|i| 0.5 * q[i]).collect();
    let halfp: Vec<f32> = (0..d).map(|i| 0.5 * p[i]).collect();
    let u_old = v.dot(&half, &f);
    let k_old = v.dot(&halfp, &p);
    for i in 0..d {
        p[i] = v.mad(-0.5 * HMC_EPS, f[i], p[i]);
    }
    for l in 0..l_steps {
        for i in 0..d {
            q[i] = v.mad(HMC_EPS, p[i], q[i]);
        }
        hmc_matvec(v, a, q, &mut f);
        let s = if l == l_steps - 1 {
            0.5 * HMC_EPS
        } else {
            HMC_EPS
        };
        for i in 0..d {
            p[i] = v.mad(-s, f[i], p[i]);
        }
    }
    let half: Vec<f32> = (0..d).map(|i| 0.5 * q[i]).collect();
    let halfp: Vec<f32> = (0..d).map(|i| 0.5 * p[i]).collect();
    let u_new = v.dot(&half, &f);
    let k_new = v.dot(&halfp, &p);
    let u_acc = hmc_uniform(seed, chain, base.wrapping_add(d as u32));
    let accept = if v.rearranged {
        let dh = (u_new - u_old) + (k_new - k_old);
        dh.is_finite() && u_acc < v.exp(-dh, 5)
    } else {
        let dh = (u_new + k_new) - (u_old + k_old);
        dh.is_finite() && v.ln(u_acc.max(1e-30), 6) < -dh
    };
    if !accept {
        q.copy_from_slice(&q_old);
    }
    accept
}

/// Final states and accept counts of every chain (in parallel).
pub fn hmc(size: &Size, p: &Problem, v: Variant, cheat: Option<HmcCheat>) -> Vec<Vec<u8>> {
    let d = size.dims[0] as usize;
    let q0 = f32s(init_data(p, 0));
    let a = f32s(init_data(p, 3));
    let l_steps = if cheat == Some(HmcCheat::FewerLeapfrogSteps) {
        HMC_L - 1
    } else {
        HMC_L
    };
    let mut q = q0.clone();
    let mut acc = vec![0u32; q0.len() / d];
    q.par_chunks_mut(d)
        .zip(acc.par_iter_mut())
        .enumerate()
        .for_each(|(chain, (qc, acc))| {
            for s in 0..HMC_T {
                if cheat == Some(HmcCheat::HalfTheSteps) && s % 2 == 1 {
                    continue;
                }
                *acc += hmc_step(&v, &a, qc, chain as u32, s, l_steps) as u32;
            }
        });
    match cheat {
        Some(HmcCheat::RescaleInitial) => {
            let q: Vec<f32> = q0.iter().map(|x| 0.5 * x).collect();
            vec![bytes(&q), u32_bytes(&vec![196; acc.len()])]
        }
        Some(HmcCheat::ReturnInitial) => vec![bytes(&q0), u32_bytes(&acc)],
        _ => vec![bytes(&q), u32_bytes(&acc)],
    }
}

/// nbody as the reference computes it: pair sums in f64, rounded once,
/// f32 updates. Final (pos, vel).
pub fn nbody_f64(size: &Size, p: &Problem) -> Vec<Vec<u8>> {
    let (n, steps) = (size.dims[0] as usize, size.dims[1] as usize);
    let dt = 1e-3f32;
    let eps2 = 0.05f32 as f64 * 0.05f32 as f64;
    let mut pos = f32s(init_data(p, 0));
    let mut vel = f32s(init_data(p, 2));
    let mass = f32s(init_data(p, 4));
    for _ in 0..steps {
        let acc: Vec<[f32; 3]> = (0..n)
            .into_par_iter()
            .map(|i| {
                let ri = [
                    pos[4 * i] as f64,
                    pos[4 * i + 1] as f64,
                    pos[4 * i + 2] as f64,
                ];
                let mut a = [0f64; 3];
                for j in 0..n {
                    let d = [
                        pos[4 * j] as f64 - ri[0],
                        pos[4 * j + 1] as f64 - ri[1],
                        pos[4 * j + 2] as f64 - ri[2],
                    ];
                    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2;
                    let s = mass[j] as f64 / (r2 * r2.sqrt());
                    for c in 0..3 {
                        a[c] += s * d[c];
                    }
                }
                [a[0] as f32, a[1] as f32, a[2] as f32]
            })
            .collect();
        for i in 0..n {
            for c in 0..3 {
                let v = vel[4 * i + c] + acc[i][c] * dt;
                vel[4 * i + c] = v;
                pos[4 * i + c] += v * dt;
            }
        }
    }
    vec![bytes(&pos), bytes(&vel)]
}
