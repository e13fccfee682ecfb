//! saxpy: y <- a*x + y in place (spec section 1). Size dims: `[N]`.

use std::sync::Arc;

use rayon::prelude::*;

use crate::check::{bytes_to_f32s, f32s_to_bytes, max_abs, max_abs_verdict};
use crate::rng::normal_f32;
use crate::*;

const A: f32 = 2.5;

/// 2^-21 * max(1, max|expected|): 4 ulp of the largest expected value. The
/// spec's 1e-5 * max(1, max|expected|) is ~160 times the error of honest
/// kernels (with or without FMA they differ from the reference by at most
/// 1 ulp: 9.5e-7 at every smoke and full size, where max|expected| is 11 to
/// 16); this is 5.6 to 7.8 times that. Skipping elements errs by 0.37 or more
/// (tests/tolerance_audit_a.rs, docs/tolerance-audit-a.md).
fn tolerance(max_expected: f64) -> f64 {
    max_expected.max(1.0) / (1u64 << 21) as f64
}

pub struct Saxpy;

fn n(size: &Size) -> usize {
    size.dims[0] as usize
}

impl TaskCode for Saxpy {
    fn problem(&self, size: &Size, seed: u64) -> Problem {
        let n = n(size);
        let x = normal_f32(n, seed, 0);
        let y = normal_f32(n, seed, 1);
        Problem {
            buffers: vec![
                BufferSpec {
                    name: "x".into(),
                    bytes: 4 * n,
                    init: BufferInit::Data(Arc::new(f32s_to_bytes(&x))),
                    access: Access::ReadOnly,
                },
                BufferSpec {
                    name: "y".into(),
                    bytes: 4 * n,
                    init: BufferInit::Data(Arc::new(f32s_to_bytes(&y))),
                    access: Access::ReadWrite,
                },
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
        let x = bytes_to_f32s(init_data(problem, 0));
        let mut y = bytes_to_f32s(init_data(problem, 1));
        y.par_iter_mut()
            .zip(x.par_iter())
            .for_each(|(y, &x)| *y += A * x);
        Arc::new(y)
    }
    fn check(
        &self,
        _size: &Size,
        _problem: &Problem,
        reference: &Reference,
        outputs: &[Vec<u8>],
    ) -> Verdict {
        let want = reference
            .downcast_ref::<Vec<f32>>()
            .expect("saxpy reference");
        let got = bytes_to_f32s(&outputs[0]);
        max_abs_verdict(&got, want, tolerance(max_abs(want)))
    }
}
