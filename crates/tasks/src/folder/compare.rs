//! The comparison of a task folder's checked output with the expected
//! one, by the output's `[check.NAME]`: bit for bit, or by tolerances,
//! summed in parallel over the elements.

use rayon::prelude::*;

use super::program::decode_one;
use super::{CheckDef, FolderTask, Scalar};
use crate::Verdict;

impl FolderTask {
    /// Compare one checked output (`got`, the downloaded bytes) with the
    /// expected bytes, by the output's `[check.NAME]`. NaN anywhere in the
    /// output fails, whatever the tolerance.
    pub fn check_output(&self, name: &str, got: &[u8], want: &[u8]) -> Verdict {
        let check = &self.checks[name];
        let buffer = self
            .buffers
            .iter()
            .find(|b| b.name == name)
            .expect("validated");
        if got.len() != want.len() {
            return Verdict {
                passed: false,
                metric: format!("{name}: length"),
                value: got.len() as f64,
                tolerance: Some(want.len() as f64),
            };
        }
        if check.exact {
            return exact_verdict(name, got, want, buffer.element.scalar.bytes());
        }
        let scalar = buffer.element.scalar;
        let scaled;
        let check = if check.atol_rms > 0.0 {
            scaled = CheckDef {
                atol: check.atol + check.atol_rms * root_mean_square(want, scalar),
                ..check.clone()
            };
            &scaled
        } else {
            check
        };
        let tally = Tally::of(got, want, scalar, check);
        let n = (got.len() / scalar.bytes()).max(1);
        tolerance_verdict(name, check, &tally, n)
    }
}

/// An exact check: how many elements of `width` bytes differ at all.
fn exact_verdict(name: &str, got: &[u8], want: &[u8], width: usize) -> Verdict {
    let differ: usize = got
        .par_chunks(width * 4096)
        .zip(want.par_chunks(width * 4096))
        .map(|(a, b)| {
            a.chunks(width)
                .zip(b.chunks(width))
                .filter(|(x, y)| x != y)
                .count()
        })
        .sum();
    Verdict {
        passed: differ == 0,
        metric: format!("{name}: elements that differ"),
        value: differ as f64,
        tolerance: Some(0.0),
    }
}

/// The root mean square of the finite values of `want`, decoded as
/// `scalar`, in parallel: the scale of `atol_rms` (0 for no elements).
fn root_mean_square(want: &[u8], scalar: Scalar) -> f64 {
    let width = scalar.bytes();
    let (sum, n) = want
        .par_chunks(width * 4096)
        .map(|w| {
            w.chunks_exact(width)
                .map(|v| decode_one(v, scalar))
                .filter(|v| v.is_finite())
                .fold((0.0, 0usize), |(s, n), v| (s + v * v, n + 1))
        })
        .reduce(|| (0.0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    if n == 0 { 0.0 } else { (sum / n as f64).sqrt() }
}

/// A tolerance check of `n` elements summed up in `tally`: the share
/// within the tolerance (no NaN at all), then the optional ceiling on the
/// largest error and floor on the cosine similarity.
fn tolerance_verdict(name: &str, check: &CheckDef, tally: &Tally, n: usize) -> Verdict {
    let &Tally {
        outside,
        worst,
        peak,
        dot,
        gg,
        ww,
        any_nan,
    } = tally;
    let inside = 1.0 - outside as f64 / n as f64;
    if any_nan || inside < check.within {
        return Verdict {
            passed: false,
            metric: within_metric(name, check, worst),
            value: inside,
            tolerance: Some(check.within),
        };
    }
    if let Some(share) = check.peak_error {
        // The atol keeps an all-zero reference from demanding exact zeros.
        let ceiling = check.atol + share * peak;
        if worst > ceiling {
            return Verdict {
                passed: false,
                metric: format!("{name}: largest error / largest |ref| ({peak:.2e})"),
                value: worst / peak.max(f64::MIN_POSITIVE),
                tolerance: Some(share),
            };
        }
    }
    if let Some(floor) = check.cosine {
        let cosine = if gg == 0.0 && ww == 0.0 {
            1.0
        } else {
            dot / (gg.sqrt() * ww.sqrt())
        };
        let similar = cosine >= floor;
        if !similar {
            return Verdict {
                passed: false,
                metric: format!("{name}: cosine similarity"),
                value: cosine,
                tolerance: Some(floor),
            };
        }
    }
    Verdict {
        passed: true,
        metric: within_metric(name, check, worst),
        value: inside,
        tolerance: Some(check.within),
    }
}

/// The sums a tolerance check needs, over part of an output.
#[derive(Default)]
struct Tally {
    outside: usize,
    worst: f64,
    /// The reference's largest magnitude.
    peak: f64,
    dot: f64,
    gg: f64,
    ww: f64,
    any_nan: bool,
}

impl Tally {
    /// The sums over all of `got` and `want`, decoded as `scalar`: in
    /// parallel and without decoding whole buffers (saxpy 64M: 0.1 s
    /// instead of 2.9 s per candidate).
    fn of(got: &[u8], want: &[u8], scalar: Scalar, check: &CheckDef) -> Tally {
        let width = scalar.bytes();
        got.par_chunks(width * 4096)
            .zip(want.par_chunks(width * 4096))
            .map(|(g, w)| {
                let mut t = Tally::default();
                for (g, w) in g.chunks_exact(width).zip(w.chunks_exact(width)) {
                    t.add(decode_one(g, scalar), decode_one(w, scalar), check);
                }
                t
            })
            .reduce(Tally::default, Tally::merge)
    }

    fn add(&mut self, g: f64, w: f64, check: &CheckDef) {
        let diff = (g - w).abs();
        // NaN compares false: a NaN output is outside, always.
        let close = diff <= check.atol + check.rtol * w.abs();
        if !close {
            self.outside += 1;
        }
        self.worst = if diff.is_finite() {
            self.worst.max(diff)
        } else {
            f64::INFINITY
        };
        // Finite values only: one Inf in the reference would lift the
        // ceiling to Inf for every element.
        if w.is_finite() {
            self.peak = self.peak.max(w.abs());
        }
        self.any_nan |= g.is_nan();
        self.dot += g * w;
        self.gg += g * g;
        self.ww += w * w;
    }

    fn merge(a: Tally, b: Tally) -> Tally {
        Tally {
            outside: a.outside + b.outside,
            worst: a.worst.max(b.worst),
            peak: a.peak.max(b.peak),
            dot: a.dot + b.dot,
            gg: a.gg + b.gg,
            ww: a.ww + b.ww,
            any_nan: a.any_nan || b.any_nan,
        }
    }
}

/// "y: fraction within 4e-6 + 1e-5·|ref| (max error 9.54e-7)".
fn within_metric(name: &str, check: &CheckDef, worst: f64) -> String {
    format!(
        "{name}: fraction within {:e} + {:e}·|ref| (max error {worst:.2e})",
        check.atol, check.rtol
    )
}
