//! Shared numeric helpers for CPU references and checks.

use crate::Verdict;

pub fn f32s_to_bytes(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

pub fn bytes_to_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// max |got - want|, NaN if any element of `got` is not finite or the
/// lengths differ: `f32::max` ignores NaN, so it is propagated by hand.
pub fn max_abs_diff(got: &[f32], want: &[f32]) -> f64 {
    if got.len() != want.len() {
        return f64::NAN;
    }
    let mut worst = 0f64;
    for (&g, &w) in got.iter().zip(want) {
        if !g.is_finite() {
            return f64::NAN;
        }
        let d = (g as f64 - w as f64).abs();
        if d > worst {
            worst = d;
        }
    }
    worst
}

pub fn max_abs(v: &[f32]) -> f64 {
    v.iter().fold(0f64, |m, &x| m.max((x as f64).abs()))
}

/// A max-abs check; NaN never passes.
pub fn max_abs_verdict(got: &[f32], want: &[f32], tolerance: f64) -> Verdict {
    let value = max_abs_diff(got, want);
    Verdict {
        passed: value <= tolerance,
        metric: "max_abs".into(),
        value,
        tolerance: Some(tolerance),
    }
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
    fn max_abs_finds_the_worst_element() {
        let v = max_abs_verdict(&[1.0, 2.5, 3.0], &[1.0, 2.0, 3.1], 1.0);
        assert!((v.value - 0.5).abs() < 1e-6);
        assert!(v.passed);
        assert!(!max_abs_verdict(&[1.0, 2.5, 3.0], &[1.0, 2.0, 3.1], 0.4).passed);
    }
}
