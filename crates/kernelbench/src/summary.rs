//! The literature's KernelBench metrics over a set of problems: correct
//! rate, speedup over the PyTorch baseline, and fast_p, the fraction of
//! problems whose kernel is correct and more than p times faster.

use serde::{Deserialize, Serialize};

/// The p values the seed systems report. fast_0 counts the correct
/// kernels that have a speedup, which is the correct rate where every
/// problem has a baseline.
pub const FAST_P: [f64; 4] = [0.0, 1.0, 1.5, 2.0];

/// One problem's evaluated kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProblemResult {
    pub problem: String,
    pub correct: bool,
    /// The kernel's median time at the full size, when it was correct.
    pub kernel_ms: Option<f64>,
    /// PyTorch eager and torch.compile medians, as the import timed them.
    pub eager_ms: Option<f64>,
    pub compile_ms: Option<f64>,
    /// kevo's roofline fraction at the full size.
    pub fraction: Option<f64>,
}

impl ProblemResult {
    /// Eager time over kernel time, for a correct kernel with both times.
    pub fn speedup(&self) -> Option<f64> {
        ratio(self.eager_ms, self.kernel_ms, self.correct)
    }

    pub fn speedup_over_compile(&self) -> Option<f64> {
        ratio(self.compile_ms, self.kernel_ms, self.correct)
    }

    /// The faster of the eager and torch.compile times: the baseline
    /// KernelBench v3 and CUDA Agent report against (either alone where
    /// only one was timed).
    pub fn best_baseline_ms(&self) -> Option<f64> {
        match (self.eager_ms, self.compile_ms) {
            (Some(e), Some(c)) => Some(e.min(c)),
            (e, c) => e.or(c),
        }
    }

    pub fn speedup_over_best(&self) -> Option<f64> {
        ratio(self.best_baseline_ms(), self.kernel_ms, self.correct)
    }
}

fn ratio(baseline: Option<f64>, kernel: Option<f64>, correct: bool) -> Option<f64> {
    match (baseline, kernel) {
        (Some(b), Some(k)) if correct && b > 0.0 && k > 0.0 => Some(b / k),
        _ => None,
    }
}

/// The metrics over the problems given, each over all of them (an
/// incorrect, unevaluated or untimed problem counts against every fast_p;
/// problems the import's screen dropped are not among them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub problems: usize,
    pub correct_rate: f64,
    /// (p, fraction of problems correct and faster than p x eager).
    pub fast_p: Vec<(f64, f64)>,
    /// The same against torch.compile, over all problems (one without a
    /// torch.compile time counts against it).
    pub fast_p_compile: Vec<(f64, f64)>,
    /// The same against the faster of the two: the headline.
    #[serde(default)]
    pub fast_p_best: Vec<(f64, f64)>,
    /// Geometric mean of the speedups of the correct kernels over eager.
    pub geomean_speedup: Option<f64>,
    /// ... over the faster of eager and torch.compile.
    #[serde(default)]
    pub geomean_speedup_best: Option<f64>,
}

pub fn summarize(results: &[ProblemResult]) -> Summary {
    let n = results.len().max(1) as f64;
    let fast = |speedup: &dyn Fn(&ProblemResult) -> Option<f64>| -> Vec<(f64, f64)> {
        FAST_P
            .iter()
            .map(|&p| {
                let count = results
                    .iter()
                    .filter(|r| r.correct && speedup(r).is_some_and(|s| s > p))
                    .count();
                (p, count as f64 / n)
            })
            .collect()
    };
    let geomean = |speedup: &dyn Fn(&ProblemResult) -> Option<f64>| -> Option<f64> {
        let s: Vec<f64> = results.iter().filter_map(speedup).collect();
        (!s.is_empty()).then(|| (s.iter().map(|s| s.ln()).sum::<f64>() / s.len() as f64).exp())
    };
    Summary {
        problems: results.len(),
        correct_rate: results.iter().filter(|r| r.correct).count() as f64 / n,
        fast_p: fast(&ProblemResult::speedup),
        fast_p_compile: fast(&ProblemResult::speedup_over_compile),
        fast_p_best: fast(&ProblemResult::speedup_over_best),
        geomean_speedup: geomean(&ProblemResult::speedup),
        geomean_speedup_best: geomean(&ProblemResult::speedup_over_best),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(correct: bool, kernel_ms: Option<f64>, eager_ms: f64) -> ProblemResult {
        ProblemResult {
            problem: "p".into(),
            correct,
            kernel_ms,
            eager_ms: Some(eager_ms),
            compile_ms: None,
            fraction: None,
        }
    }

    #[test]
    fn fast_p_counts_correct_kernels_faster_than_p_over_every_problem() {
        let results = [
            result(true, Some(1.0), 3.0),   // 3x
            result(true, Some(2.0), 3.0),   // 1.5x: not > 1.5
            result(true, Some(4.0), 2.0),   // 0.5x
            result(false, Some(0.1), 10.0), // wrong: counts for nothing
        ];
        let s = summarize(&results);
        assert_eq!(s.problems, 4);
        assert_eq!(s.correct_rate, 0.75);
        assert_eq!(
            s.fast_p,
            vec![(0.0, 0.75), (1.0, 0.5), (1.5, 0.25), (2.0, 0.25)]
        );
        assert!(
            s.fast_p_compile.iter().all(|(_, f)| *f == 0.0),
            "no compile times"
        );
        let g = s.geomean_speedup.unwrap();
        assert!((g - (3.0f64 * 1.5 * 0.5).cbrt()).abs() < 1e-12, "{g}");
        assert_eq!(results[3].speedup(), None);
        // Without compile times the faster baseline is eager.
        assert_eq!(s.fast_p_best, s.fast_p);
        assert_eq!(s.geomean_speedup_best, s.geomean_speedup);
    }

    #[test]
    fn the_headline_is_against_the_faster_of_eager_and_compiled() {
        let with = |kernel: f64, eager: f64, compile: Option<f64>| ProblemResult {
            compile_ms: compile,
            ..result(true, Some(kernel), eager)
        };
        let results = [
            with(1.0, 3.0, Some(1.5)), // 3x eager, 1.5x compiled: best 1.5x
            with(1.0, 2.0, Some(4.0)), // compile slower: best is eager, 2x
            with(1.0, 0.5, None),      // only eager: 0.5x
        ];
        assert_eq!(results[0].speedup_over_best(), Some(1.5));
        assert_eq!(results[1].speedup_over_best(), Some(2.0));
        assert_eq!(results[2].speedup_over_best(), Some(0.5));
        let s = summarize(&results);
        let third = 1.0 / 3.0;
        assert_eq!(
            s.fast_p_best,
            vec![(0.0, 1.0), (1.0, 2.0 * third), (1.5, third), (2.0, 0.0)]
        );
        let g = s.geomean_speedup_best.unwrap();
        assert!((g - (1.5f64 * 2.0 * 0.5).cbrt()).abs() < 1e-12, "{g}");
        // Against compile alone the one without a compile time counts
        // against every fast_p.
        assert_eq!(s.fast_p_compile[0], (0.0, 2.0 * third));
    }

    #[test]
    fn no_problems_and_no_times_give_zero_rates_not_nan() {
        let s = summarize(&[]);
        assert_eq!(s.correct_rate, 0.0);
        assert_eq!(s.geomean_speedup, None);
        let untimed = [result(true, None, 1.0)];
        assert_eq!(summarize(&untimed).fast_p[0], (0.0, 0.0));
    }
}
