//! saxpy: y <- a*x + y in place (spec section 1). Size dims: `[N]`.

use std::sync::Arc;

use rayon::prelude::*;

use crate::check::{init_f32s, max_abs, max_abs_check};
use crate::rng::normal_f32;
use crate::*;

const A: f32 = 2.5;

/// 2^-21 * max(1, max|expected|): 4 ulp of the largest expected value. The
/// spec's 1e-5 * max(1, max|expected|) is ~160 times the error of honest
/// kernels (with or without FMA they differ from the reference by at most
/// 1 ulp: 9.5e-7 at every smoke and full size, where max|expected| is 11 to
/// 16); this is 5.6 to 7.8 times that. Skipping elements errs by 0.37 or more
/// (tests/tolerance_audit/sections_1_to_6.rs, docs/tolerance-audit-a.md).
fn tolerance(max_expected: f64) -> f64 {
    max_expected.max(1.0) / (1u64 << 21) as f64
}

pub struct Saxpy;

impl TaskCode for Saxpy {
    fn problem(&self, size: &Size, seed: u64) -> Problem {
        let [n] = size.usize_dims();
        Problem {
            buffers: vec![
                BufferSpec::f32_data("x", &normal_f32(n, seed, 0), Access::ReadOnly),
                BufferSpec::f32_data("y", &normal_f32(n, seed, 1), Access::ReadWrite),
            ],
            launches: vec![LaunchSpec {
                kernel: 0,
                threads: [n as u64, 1, 1],
                block: Block::Default([256, 1, 1]),
                args: vec![
                    Arg::Buffer(0),
                    Arg::Buffer(1),
                    Arg::F32(A),
                    Arg::U32(n as u32),
                ],
            }],
            outputs: vec![1],
        }
    }
    fn reference(&self, _size: &Size, problem: &Problem) -> Reference {
        let x = init_f32s(problem, 0);
        let mut y = init_f32s(problem, 1);
        y.par_iter_mut()
            .zip(x.par_iter())
            .for_each(|(y, &x)| *y += A * x);
        Arc::new(y)
    }
    fn check(&self, _: &Size, _: &Problem, reference: &Reference, outputs: &[Vec<u8>]) -> Verdict {
        max_abs_check("saxpy", reference, outputs, |want| tolerance(max_abs(want)))
    }
    /// cublasSaxpy on the same buffers: x (0) read, y (1) updated in place.
    fn vendor_op(&self, size: &Size) -> Option<VendorOp<usize>> {
        let [n] = size.usize_dims();
        Some(VendorOp::Saxpy {
            n: n as u64,
            alpha: A,
            x: 0,
            y: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendor_op_updates_the_checked_buffer_in_place() {
        let task = crate::by_name("saxpy").unwrap();
        for set in [SizeSet::Smoke, SizeSet::Full, SizeSet::Large] {
            let plan = task.sizes(set);
            for size in plan.in_distribution.iter().chain([&plan.held_out]) {
                let n = size.dims[0];
                let op = task.vendor_op(size).unwrap();
                assert_eq!(
                    op,
                    VendorOp::Saxpy {
                        n,
                        alpha: 2.5,
                        x: 0,
                        y: 1
                    },
                    "{}",
                    size.label
                );
            }
        }
        // The same buffers and scalar the kernel gets, and y is what is checked.
        let size = Size::new("t", &[1000]);
        let p = task.problem(&size, 1);
        assert_eq!(p.outputs, vec![1]);
        assert_eq!(p.launches[0].args[2], Arg::F32(A));
        assert_eq!(p.buffers[1].access, Access::ReadWrite);
    }
}
