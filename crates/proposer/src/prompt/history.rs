//! The run history as the proposer sees it, and Metal-Sci's stagnation
//! detection (section 14.4) as a pure function.

use kevo_eval::{Evaluation, Outcome};
use serde::{Deserialize, Serialize};

/// One iteration, as much as a prompt needs of it. Iteration 0 is the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRecord {
    pub iteration: u32,
    /// `Outcome::kind()`, or `"skipped"` when the provider failed and no
    /// candidate was produced.
    pub outcome: String,
    pub score: Option<f64>,
    /// Became the new incumbent.
    pub promoted: bool,
}

impl HistoryRecord {
    pub fn from_outcome(iteration: u32, outcome: &Outcome, promoted: bool) -> Self {
        HistoryRecord {
            iteration,
            outcome: outcome.kind().to_string(),
            score: outcome.score(),
            promoted,
        }
    }

    pub fn from_evaluation(iteration: u32, eval: &Evaluation, promoted: bool) -> Self {
        Self::from_outcome(iteration, &eval.outcome, promoted)
    }

    /// An iteration whose provider call failed.
    pub fn skipped(iteration: u32) -> Self {
        HistoryRecord {
            iteration,
            outcome: "skipped".into(),
            score: None,
            promoted: false,
        }
    }

    pub fn correct(&self) -> bool {
        self.outcome == "correct"
    }

    /// `iter  3: compile OK, correct False (runtime error), score N/A`.
    pub fn line(&self) -> String {
        let status = match self.outcome.as_str() {
            "correct" => "compile OK, correct True",
            "compile_error" => "compile FAIL, correct False",
            "wrong_result" => "compile OK, correct False",
            "runtime_error" => "compile OK, correct False (runtime error)",
            "timeout" => "compile OK, correct False (timeout)",
            "no_code" => "no code in the response",
            "skipped" => "skipped (no response)",
            other => other,
        };
        let score = self
            .score
            .map_or_else(|| "N/A".to_string(), |s| format!("{s:.4}"));
        let tag = match (self.iteration, self.promoted) {
            (0, _) => " (seed)",
            (_, true) => " (new best)",
            _ => "",
        };
        format!("iter {:>2}: {status}, score {score}{tag}", self.iteration)
    }
}

/// Window and gap of the stagnation rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StagnationParams {
    pub window: usize,
    /// Relative gap below the incumbent's score, 0.15 = 15 %.
    pub gap: f64,
}

impl Default for StagnationParams {
    /// Metal-Sci's values: the last 3 correct attempts within 15 %.
    fn default() -> Self {
        StagnationParams {
            window: 3,
            gap: 0.15,
        }
    }
}

/// Stagnation fires iff the incumbent's score is positive, there are at
/// least `window` correct scored records after the seed, none of the last
/// `window` of them was promoted, and all their scores lie in
/// `[best * (1 - gap), best]`.
pub fn is_stagnating(
    history: &[HistoryRecord],
    incumbent_score: Option<f64>,
    params: StagnationParams,
) -> bool {
    let Some(best) = incumbent_score.filter(|b| *b > 0.0) else {
        return false;
    };
    if params.window == 0 {
        return false;
    }
    let correct: Vec<&HistoryRecord> = history
        .iter()
        .filter(|r| r.iteration > 0 && r.correct() && r.score.is_some())
        .collect();
    if correct.len() < params.window {
        return false;
    }
    let last = &correct[correct.len() - params.window..];
    let lo = best * (1.0 - params.gap);
    !last.iter().any(|r| r.promoted)
        && last.iter().all(|r| {
            let s = r.score.expect("filtered");
            s >= lo && s <= best
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(iteration: u32, score: Option<f64>, promoted: bool) -> HistoryRecord {
        HistoryRecord {
            iteration,
            outcome: if score.is_some() {
                "correct"
            } else {
                "compile_error"
            }
            .into(),
            score,
            promoted,
        }
    }

    const P: StagnationParams = StagnationParams {
        window: 3,
        gap: 0.15,
    };

    #[test]
    fn fires_on_three_near_misses() {
        let h = [
            rec(0, Some(0.5), true),
            rec(1, Some(1.0), true),
            rec(2, Some(0.9), false),
            rec(3, None, false),
            rec(4, Some(0.86), false),
            rec(5, Some(1.0), false),
        ];
        assert!(is_stagnating(&h, Some(1.0), P));
    }

    #[test]
    fn each_condition_is_needed() {
        let base = vec![
            rec(1, Some(1.0), true),
            rec(2, Some(0.9), false),
            rec(3, Some(0.9), false),
            rec(4, Some(0.9), false),
        ];
        assert!(is_stagnating(&base, Some(1.0), P));
        // Incumbent score must be positive and defined.
        assert!(!is_stagnating(&base, Some(0.0), P));
        assert!(!is_stagnating(&base, None, P));
        // Fewer than 3 correct records after the seed (the seed never counts).
        let short = [
            rec(0, Some(1.0), true),
            rec(1, Some(0.9), false),
            rec(2, Some(0.9), false),
        ];
        assert!(!is_stagnating(&short, Some(1.0), P));
        // A promotion among the last 3.
        let mut promoted = base.clone();
        promoted[3].promoted = true;
        assert!(!is_stagnating(&promoted, Some(0.9), P));
        // One of the last 3 outside the 15 % band.
        let mut far = base.clone();
        far[2].score = Some(0.84);
        assert!(!is_stagnating(&far, Some(1.0), P));
        // Exactly at the lower edge counts as inside.
        let mut edge = base.clone();
        edge[2].score = Some(0.85);
        assert!(is_stagnating(&edge, Some(1.0), P));
        // Failures in between do not break a streak of correct near misses.
        let mut gaps = base.clone();
        gaps.insert(2, rec(9, None, false));
        assert!(is_stagnating(&gaps, Some(1.0), P));
    }

    #[test]
    fn lines_read_like_the_original() {
        assert_eq!(
            rec(0, Some(0.12345), true).line(),
            "iter  0: compile OK, correct True, score 0.1235 (seed)"
        );
        assert_eq!(
            rec(3, None, false).line(),
            "iter  3: compile FAIL, correct False, score N/A"
        );
        assert_eq!(
            HistoryRecord::skipped(4).line(),
            "iter  4: skipped (no response), score N/A"
        );
        let r = HistoryRecord::from_outcome(5, &Outcome::Correct { score: 0.5 }, true);
        assert_eq!(
            r.line(),
            "iter  5: compile OK, correct True, score 0.5000 (new best)"
        );
    }
}
