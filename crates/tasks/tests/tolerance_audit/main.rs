//! Tolerance audit: honest CPU variants of every task's kernels (other
//! summation and evaluation orders, fma, fast-math approximations, other
//! algorithms) must pass `Task::check` with a margin, and under-computing
//! variants (skipped steps, stale forces or reductions, unsampled chains,
//! half-precision intermediates, ...) must fail it.
//!
//! - `sections_1_to_6`: saxpy, heat2d, wave3d, nbody, hmc and lbm, with the
//!   arithmetic models of `common/models.rs` (docs/tolerance-audit-a.md).
//! - `sections_7_to_12`: ising, lj, gradshaf, fft3d, adi3d and morton, with
//!   a CPU kernel per task (docs/tolerance-audit-b.md).
//!
//! The smoke sizes run in CI; the full tables are `#[ignore]`d.

#[path = "../common/mod.rs"]
mod common;
mod sections_1_to_6;
mod sections_7_to_12;
