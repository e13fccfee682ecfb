//! Shared numeric helpers for CPU references and checks.

use crate::{Problem, Reference, Verdict, init_data};

use rayon::prelude::*;

/// Elements per parallel chunk: big enough to amortise scheduling, small
/// enough to spread a 64M-element output over every core.
const PAR_CHUNK: usize = 1 << 16;

pub fn f32s_to_bytes(v: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; v.len() * 4];
    out.par_chunks_mut(PAR_CHUNK * 4)
        .zip(v.par_chunks(PAR_CHUNK))
        .for_each(|(o, v)| {
            for (o, x) in o.chunks_exact_mut(4).zip(v) {
                o.copy_from_slice(&x.to_le_bytes());
            }
        });
    out
}

pub fn bytes_to_f32s(b: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; b.len() / 4];
    out.par_chunks_mut(PAR_CHUNK)
        .zip(b.par_chunks(PAR_CHUNK * 4))
        .for_each(|(o, b)| {
            for (o, c) in o.iter_mut().zip(b.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        });
    out
}

/// The f32 values a buffer starts with: the inputs of a reference.
pub fn init_f32s(problem: &Problem, buffer: usize) -> Vec<f32> {
    bytes_to_f32s(init_data(problem, buffer))
}

/// Little-endian u32 values (counters such as accept counts or cell
/// occupancy); a trailing partial value is ignored.
pub fn bytes_to_u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// max |got - want|, NaN if any element of `got` is not finite or the
/// lengths differ: `f32::max` ignores NaN, so it is propagated by hand.
pub fn max_abs_diff(got: &[f32], want: &[f32]) -> f64 {
    if got.len() != want.len() {
        return f64::NAN;
    }
    got.par_chunks(PAR_CHUNK)
        .zip(want.par_chunks(PAR_CHUNK))
        .map(|(g, w)| chunk_worst(g.iter().copied(), w))
        .reduce(|| 0.0, nan_max)
}

/// [`max_abs_diff`] on a downloaded output as it is (little-endian f32
/// bytes), without first converting it into a new vector: a check of
/// saxpy's 64M-element size spent most of its time allocating and
/// faulting in that copy, and two workers on one host contended for it.
pub fn max_abs_diff_bytes(got: &[u8], want: &[f32]) -> f64 {
    if got.len() != want.len() * 4 {
        return f64::NAN;
    }
    got.par_chunks(PAR_CHUNK * 4)
        .zip(want.par_chunks(PAR_CHUNK))
        .map(|(g, w)| {
            let values = g
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            chunk_worst(values, w)
        })
        .reduce(|| 0.0, nan_max)
}

/// The largest |got - want| of one chunk, NaN at the first value of `got`
/// that is not finite.
fn chunk_worst(got: impl Iterator<Item = f32>, want: &[f32]) -> f64 {
    let mut worst = 0f64;
    for (g, &w) in got.zip(want) {
        if !g.is_finite() {
            return f64::NAN;
        }
        worst = worst.max((g as f64 - w as f64).abs());
    }
    worst
}

/// The larger of two chunk results, NaN if either is.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

pub fn max_abs(v: &[f32]) -> f64 {
    v.par_chunks(PAR_CHUNK)
        .map(|c| c.iter().fold(0f64, |m, &x| m.max((x as f64).abs())))
        .reduce(|| 0.0, f64::max)
}

/// A check against one threshold: it passes when `value <= tolerance`, so
/// a NaN value never passes.
pub fn threshold_verdict(metric: &str, value: f64, tolerance: f64) -> Verdict {
    Verdict {
        passed: value <= tolerance,
        metric: metric.into(),
        value,
        tolerance: Some(tolerance),
    }
}

/// A check that is not a single threshold (exact match, statistics):
/// `passed` is decided by the caller and no tolerance is reported.
pub fn untoleranced_verdict(metric: &str, passed: bool, value: f64) -> Verdict {
    Verdict {
        passed,
        metric: metric.into(),
        value,
        tolerance: None,
    }
}

/// A max-abs check; NaN never passes.
pub fn max_abs_verdict(got: &[f32], want: &[f32], tolerance: f64) -> Verdict {
    threshold_verdict("max_abs", max_abs_diff(got, want), tolerance)
}

/// The reference of a task whose CPU result is one f32 array; any other
/// type is a bug in `task`'s code.
pub fn f32_reference<'a>(reference: &'a Reference, task: &str) -> &'a [f32] {
    reference
        .downcast_ref::<Vec<f32>>()
        .unwrap_or_else(|| panic!("{task} reference"))
}

/// The check of a task with one f32 output that must match its f32
/// reference element by element: max-abs, with the tolerance computed from
/// the reference (most tasks scale it by max|ref|).
pub fn max_abs_check(
    task: &str,
    reference: &Reference,
    outputs: &[Vec<u8>],
    tolerance: impl FnOnce(&[f32]) -> f64,
) -> Verdict {
    let want = f32_reference(reference, task);
    threshold_verdict(
        "max_abs",
        max_abs_diff_bytes(&outputs[0], want),
        tolerance(want),
    )
}

/// Round `n` up to a multiple of `m`.
pub fn round_up(n: u64, m: u64) -> u64 {
    n.div_ceil(m) * m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_and_inf_fail_the_max_abs_check() {
        let want = [1.0f32, 2.0, 3.0];
        assert!(max_abs_verdict(&[1.0, 2.0, 3.0], &want, 1e-6).passed);
        let v = max_abs_verdict(&[1.0, f32::NAN, 3.0], &want, 1e-6);
        assert!(!v.passed && v.value.is_nan());
        assert!(!max_abs_verdict(&[1.0, f32::INFINITY, 3.0], &want, 1e9).passed);
        assert!(!max_abs_verdict(&[1.0, 2.0], &want, 1e9).passed);
    }

    #[test]
    fn parallel_helpers_agree_with_a_serial_scan_across_chunks() {
        let n = 3 * PAR_CHUNK + 17;
        let want: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut got = want.clone();
        got[2 * PAR_CHUNK + 5] += 0.25;
        assert_eq!(bytes_to_f32s(&f32s_to_bytes(&want)), want);
        assert!((max_abs_diff(&got, &want) - 0.25).abs() < 1e-6);
        got[n - 1] = f32::NAN;
        assert!(
            max_abs_diff(&got, &want).is_nan(),
            "NaN in the last chunk propagates"
        );
        let serial = want.iter().fold(0f64, |m, &x| m.max((x as f64).abs()));
        assert_eq!(max_abs(&want), serial);
    }

    #[test]
    fn the_diff_of_downloaded_bytes_is_the_diff_of_their_values() {
        let n = 2 * PAR_CHUNK + 9;
        let want: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut got = want.clone();
        got[PAR_CHUNK + 3] -= 0.5;
        let bytes = f32s_to_bytes(&got);
        assert_eq!(max_abs_diff_bytes(&bytes, &want), max_abs_diff(&got, &want));
        assert!((max_abs_diff_bytes(&bytes, &want) - 0.5).abs() < 1e-6);
        got[n - 1] = f32::INFINITY;
        assert!(max_abs_diff_bytes(&f32s_to_bytes(&got), &want).is_nan());
        assert!(max_abs_diff_bytes(&bytes[..bytes.len() - 4], &want).is_nan());
        assert!(max_abs_diff_bytes(&bytes[..bytes.len() - 1], &want).is_nan());
    }

    #[test]
    fn max_abs_finds_the_worst_element() {
        let v = max_abs_verdict(&[1.0, 2.5, 3.0], &[1.0, 2.0, 3.1], 1.0);
        assert!((v.value - 0.5).abs() < 1e-6);
        assert!(v.passed);
        assert!(!max_abs_verdict(&[1.0, 2.5, 3.0], &[1.0, 2.0, 3.1], 0.4).passed);
    }
}
