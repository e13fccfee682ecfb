//! How a run's winner did at the held-out size, in the words users look
//! for. Metal-Sci's own results show why a winner needs more than its
//! in-distribution score: an fft3d kernel 2.95x the seed in-distribution
//! was 0.23x at the held-out size, an hmc kernel correct at d in {8, 16,
//! 32} was wrong at d = 24. The held-out size chooses nothing; this only
//! says what it showed.

use kevo_eval::Evaluation;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HeldOutVerdict {
    /// Correct at the held-out size and not slower than the seed there
    /// beyond the timing noise.
    #[serde(rename = "generalises")]
    Generalises,
    /// Correct there, but slower than the seed beyond the timing noise.
    #[serde(rename = "held-out regression")]
    HeldOutRegression,
    /// Wrong, or failed (compile, runtime error, timeout), at the held-out
    /// size. Never said of a correct kernel: speed alone is not overfit.
    #[serde(rename = "overfit")]
    Overfit,
    /// Correct there, but faster than the hardware allows even after the
    /// evaluator measured the ceiling again: a verdict on honesty, kept
    /// apart from overfit.
    #[serde(rename = "suspicious")]
    Suspicious,
    /// The winner is the seed: the search found nothing to judge.
    #[serde(rename = "seed kept")]
    SeedKept,
}

impl HeldOutVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            HeldOutVerdict::Generalises => "generalises",
            HeldOutVerdict::HeldOutRegression => "held-out regression",
            HeldOutVerdict::Overfit => "overfit",
            HeldOutVerdict::Suspicious => "suspicious",
            HeldOutVerdict::SeedKept => "seed kept",
        }
    }
}

impl std::fmt::Display for HeldOutVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The smallest slowdown called a regression: two single held-out
/// measurements of equal kernels differ by about 1 % on the H100
/// (docs/BENCHMARKS.md); below 2 % it is noise whatever the spreads say.
pub const MIN_REGRESSION: f64 = 0.02;

/// The verdict on `winner` against `seed`, both evaluated once at the
/// held-out size in the same session, and why, in one sentence. Slower
/// means the winner's fraction of the ceiling is below the seed's by more
/// than the two timings' spreads ((q3 - q1) / median) added, and at least
/// [`MIN_REGRESSION`].
pub fn classify(
    winner_is_seed: bool,
    winner: &Evaluation,
    seed: &Evaluation,
) -> (HeldOutVerdict, String) {
    if winner_is_seed {
        return (
            HeldOutVerdict::SeedKept,
            "the winner is the seed: no candidate beat it".into(),
        );
    }
    if let kevo_eval::Outcome::Suspicious { size, reason, .. } = &winner.outcome {
        return (
            HeldOutVerdict::Suspicious,
            format!("correct at the held-out size but suspicious at {size}: {reason}"),
        );
    }
    if !winner.outcome.is_correct() {
        return (
            HeldOutVerdict::Overfit,
            format!(
                "the winner is correct at the scored sizes but not at the held-out size: {}",
                winner.outcome.summary()
            ),
        );
    }
    let (Some(w), Some(s)) = (winner.sizes.first(), seed.sizes.first()) else {
        return (
            HeldOutVerdict::Generalises,
            "correct at the held-out size".into(),
        );
    };
    if !seed.outcome.is_correct() || s.fraction <= 0.0 {
        return (
            HeldOutVerdict::Generalises,
            format!(
                "correct at the held-out size, where the seed is not ({})",
                seed.outcome.summary()
            ),
        );
    }
    let spread = |x: f64| if x.is_finite() { x.max(0.0) } else { 0.0 };
    let margin = (spread(w.time.spread) + spread(s.time.spread)).max(MIN_REGRESSION);
    let ratio = w.fraction / s.fraction;
    if ratio < 1.0 / (1.0 + margin) {
        (
            HeldOutVerdict::HeldOutRegression,
            format!(
                "correct at the held-out size but {ratio:.2}x the seed there (slower beyond the timings' spread of {:.1}%)",
                margin * 100.0
            ),
        )
    } else {
        (
            HeldOutVerdict::Generalises,
            format!("correct at the held-out size, {ratio:.2}x the seed there"),
        )
    }
}

/// The winner under compute-sanitizer (`--sanitize-winner`): "safe" when
/// every tool ran it correctly with no error, "unsafe" when any reported
/// one, "not checked" when a tool could not run (no CUDA, no
/// compute-sanitizer, the sanitized run failed for another reason).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Safety {
    /// "safe", "unsafe" or "not checked".
    pub verdict: String,
    /// The tools asked for, comma-separated.
    pub tools: String,
    /// What each tool found, "memcheck: no errors", ...
    pub findings: Vec<String>,
}

impl Safety {
    pub fn not_checked(tools: &str, why: String) -> Self {
        Safety {
            verdict: "not checked".into(),
            tools: tools.into(),
            findings: vec![why],
        }
    }

    /// From each tool's outcome (or why it could not run).
    pub fn from_checks(checks: &[(String, Result<kevo_eval::Outcome, String>)]) -> Self {
        let mut findings = Vec::new();
        let (mut unsafe_, mut unchecked) = (false, false);
        for (tool, result) in checks {
            findings.push(match result {
                Ok(kevo_eval::Outcome::Correct { .. }) => format!("{tool}: no errors"),
                Ok(kevo_eval::Outcome::RuntimeError { message, .. })
                    if message.starts_with("compute-sanitizer") =>
                {
                    unsafe_ = true;
                    format!("{tool}: {message}")
                }
                Ok(other) => {
                    unchecked = true;
                    format!(
                        "{tool}: not checked (the sanitized run ended {})",
                        other.summary()
                    )
                }
                Err(e) => {
                    unchecked = true;
                    format!("{tool}: not checked ({e})")
                }
            });
        }
        let verdict = if unsafe_ {
            "unsafe"
        } else if unchecked {
            "not checked"
        } else {
            "safe"
        };
        Safety {
            verdict: verdict.into(),
            tools: checks
                .iter()
                .map(|(t, _)| t.as_str())
                .collect::<Vec<_>>()
                .join(","),
            findings,
        }
    }

    /// "unsafe (memcheck: ...; racecheck: no errors)".
    pub fn line(&self) -> String {
        format!("{} ({})", self.verdict, self.findings.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevo_eval::{Outcome, SizeResult, TimeStats, WallTimes};

    fn held(fraction: f64, spread: f64, outcome: Outcome) -> Evaluation {
        let time = TimeStats {
            median_s: 1e-3,
            min_s: 1e-3,
            max_s: 1e-3,
            q1_s: 1e-3,
            q3_s: 1e-3,
            spread,
            samples_s: vec![1e-3; 10],
        };
        let mut e = Evaluation::without_sizes(
            "saxpy",
            "d",
            kevo_backend::BackendName::Cuda,
            outcome,
            WallTimes::default(),
        );
        e.sizes = vec![SizeResult {
            label: "4M".into(),
            correct: true,
            metric: "max_abs".into(),
            error: 0.0,
            tolerance: Some(1e-5),
            time,
            warmups: 3,
            work: 1e6,
            achieved: fraction * 100.0,
            ceiling: 100.0,
            fraction,
            unit: "GB/s".into(),
            work_note: "effective".into(),
            suspicious: None,
            working_set_bytes: 0,
            level: None,
        }];
        e
    }

    fn correct(fraction: f64, spread: f64) -> Evaluation {
        held(fraction, spread, Outcome::Correct { score: fraction })
    }

    #[test]
    fn each_verdict_in_its_case() {
        let seed = correct(0.5, 0.005);
        let v = |w: &Evaluation| classify(false, w, &seed).0;
        assert_eq!(v(&correct(0.6, 0.005)), HeldOutVerdict::Generalises);
        // 1 % slower with 0.5 % spreads each: noise (the 2 % floor).
        assert_eq!(v(&correct(0.495, 0.005)), HeldOutVerdict::Generalises);
        // 10 % slower: a regression, unless the timings spread as much.
        assert_eq!(v(&correct(0.45, 0.005)), HeldOutVerdict::HeldOutRegression);
        assert_eq!(v(&correct(0.45, 0.2)), HeldOutVerdict::Generalises);
        let wrong = held(
            0.9,
            0.0,
            Outcome::WrongResult {
                size: "4M".into(),
                metric: "max_abs".into(),
                value: 1.0,
                tolerance: Some(1e-5),
            },
        );
        let (verdict, why) = classify(false, &wrong, &seed);
        assert_eq!(verdict, HeldOutVerdict::Overfit);
        assert!(why.contains("4M"), "{why}");
        assert_eq!(
            classify(true, &wrong, &seed).0,
            HeldOutVerdict::SeedKept,
            "the seed is what it is"
        );
        // The words are what users search for, in the JSON too.
        let race = Outcome::RuntimeError {
            size: None,
            fault: None,
            message: "compute-sanitizer racecheck: 2 error(s): hazard".into(),
        };
        let checks = |second: Result<Outcome, String>| {
            Safety::from_checks(&[
                ("memcheck".into(), Ok(Outcome::Correct { score: 0.5 })),
                ("racecheck".into(), second),
            ])
        };
        let s = checks(Ok(race));
        assert_eq!(s.verdict, "unsafe");
        assert_eq!(s.tools, "memcheck,racecheck");
        assert!(
            s.line()
                .contains("memcheck: no errors; racecheck: compute-sanitizer")
        );
        assert_eq!(checks(Ok(Outcome::Correct { score: 0.5 })).verdict, "safe");
        assert_eq!(
            checks(Err("no compute-sanitizer".into())).verdict,
            "not checked"
        );
        assert_eq!(
            serde_json::to_value(HeldOutVerdict::HeldOutRegression).unwrap(),
            "held-out regression"
        );
    }
}

/// A winner and the seed evaluated at the held-out size in one session:
/// what a search's end and `kevo tune` both store and report.
#[derive(Debug, Clone)]
pub struct HeldOutComparison {
    pub winner: Evaluation,
    pub seed: Evaluation,
    /// The winner is the seed: one evaluation serves both roles.
    pub seed_kept: bool,
}

impl HeldOutComparison {
    /// A correct evaluation's fraction of the ceiling at the held-out size.
    fn fraction(e: &Evaluation) -> Option<f64> {
        e.outcome
            .is_correct()
            .then(|| e.sizes.first().map(|s| s.fraction))
            .flatten()
    }

    pub fn winner_fraction(&self) -> Option<f64> {
        Self::fraction(&self.winner)
    }

    pub fn seed_fraction(&self) -> Option<f64> {
        Self::fraction(&self.seed)
    }

    /// The winner's fraction over the seed's (1 when the seed was kept).
    pub fn speedup(&self) -> Option<f64> {
        match (self.winner_fraction(), self.seed_fraction()) {
            (w, _) if self.seed_kept => w.map(|_| 1.0),
            (Some(w), Some(s)) if s > 0.0 => Some(w / s),
            _ => None,
        }
    }

    /// The verdict and why ([`classify`]).
    pub fn verdict(&self) -> (HeldOutVerdict, String) {
        classify(self.seed_kept, &self.winner, &self.seed)
    }

    /// The two rows the store keeps: the seed's, then the winner's.
    pub fn records(
        &self,
        winner: kevo_store::CandidateId,
        seed: kevo_store::CandidateId,
        session: &str,
    ) -> [kevo_store::NewHeldOut; 2] {
        let row = |id, role, evaluation: &Evaluation, fraction: Option<f64>, speedup| {
            kevo_store::NewHeldOut {
                candidate_id: id,
                role,
                evaluation: evaluation.clone(),
                session: Some(session.to_string()),
                phi: Some(fraction.unwrap_or(0.0)),
                fraction,
                speedup: fraction.and(speedup),
            }
        };
        [
            row(
                seed,
                kevo_store::HeldOutRole::Seed,
                &self.seed,
                self.seed_fraction(),
                Some(1.0),
            ),
            row(
                winner,
                kevo_store::HeldOutRole::Winner,
                &self.winner,
                self.winner_fraction(),
                self.speedup(),
            ),
        ]
    }
}
