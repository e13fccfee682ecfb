//! Re-measurement: candidates evaluated again together, interleaved, in
//! one session, to confirm a promotion (kevo_strategy::promotion) or to
//! pick a run's winner among its best few at the end (the in-run best is
//! the maximum of noisy measurements, so it is biased upward: the
//! winner's curse).

use kevo_eval::Evaluation;
use kevo_strategy::Remeasured;
use serde::{Deserialize, Serialize};

/// What re-measurement cost a run, apart from the candidates' own
/// evaluations: comparisons made, evaluations run, device and wall time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RemeasureSpend {
    pub remeasurements: u32,
    pub evaluations: u64,
    pub device_s: f64,
    pub wall_s: f64,
}

impl RemeasureSpend {
    pub fn add(&mut self, other: &RemeasureSpend) {
        self.remeasurements += other.remeasurements;
        self.evaluations += other.evaluations;
        self.device_s += other.device_s;
        self.wall_s += other.wall_s;
    }

    /// "2 re-measurements: 20 evaluations, 0.41 s on the device, 1.9 s
    /// wall"; None if nothing was re-measured.
    pub fn describe(&self) -> Option<String> {
        (self.remeasurements > 0).then(|| {
            format!(
                "{} re-measurement{}: {} evaluations, {:.2} s on the device, {:.1} s wall",
                self.remeasurements,
                if self.remeasurements == 1 { "" } else { "s" },
                self.evaluations,
                self.device_s,
                self.wall_s
            )
        })
    }
}

/// One size of one candidate in one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeTime {
    pub label: String,
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
}

/// One candidate's evaluation in one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundResult {
    /// None unless every size was correct and plausible.
    pub score: Option<f64>,
    /// The outcome in words when it was not correct: the candidate fails
    /// the re-measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Every check passed but a size ran faster than the hardware allows:
    /// the timing is not trusted, so the round is discarded for every
    /// candidate (it can only have favoured this one). A kernel that
    /// skipped work would have failed the checks instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implausible: Option<String>,
    pub sizes: Vec<SizeTime>,
}

impl RoundResult {
    pub fn of(e: &Evaluation) -> RoundResult {
        let score = e.outcome.score();
        let implausible = matches!(e.outcome, kevo_eval::Outcome::Suspicious { .. });
        RoundResult {
            score,
            failure: (score.is_none() && !implausible).then(|| e.outcome.summary()),
            implausible: implausible.then(|| e.outcome.summary()),
            sizes: e
                .sizes
                .iter()
                .map(|s| SizeTime {
                    label: s.label.clone(),
                    median_s: s.time.median_s,
                    min_s: s.time.min_s,
                    max_s: s.time.max_s,
                })
                .collect(),
        }
    }
}

/// The rounds of a re-measurement: per round, one result per candidate
/// in the candidates' order (None once a candidate has failed: it is not
/// run again).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interleaved {
    pub rounds: Vec<Vec<Option<RoundResult>>>,
    pub spend: RemeasureSpend,
}

impl Interleaved {
    /// The order in which `n` candidates run in round `r`: rotated by one
    /// each round (AB, BA, AB, ... for two), so that no candidate always
    /// runs first and a steady drift of the device's speed spreads over
    /// all alike.
    pub fn order(n: usize, round: usize) -> Vec<usize> {
        (0..n).map(|i| (i + round) % n.max(1)).collect()
    }

    /// Candidate `i`'s first failure: "round 2: wrong result at 64x64";
    /// or, if every round of it was implausibly fast, that.
    pub fn failure(&self, i: usize) -> Option<String> {
        let failed = self.rounds.iter().enumerate().find_map(|(r, row)| {
            let f = row.get(i)?.as_ref()?.failure.as_ref()?;
            Some(format!("round {}: {f}", r + 1))
        });
        failed.or_else(|| {
            let timed = self.rounds.iter().filter_map(|row| row.get(i)?.as_ref());
            let mut implausible = timed.clone().filter_map(|r| r.implausible.as_ref());
            let first = implausible.next()?;
            (timed.count() == 1 + implausible.count())
                .then(|| format!("every round faster than the hardware allows ({first})"))
        })
    }

    /// Rounds discarded because a candidate's timing in them was
    /// implausible (1-based).
    pub fn discarded(&self) -> Vec<usize> {
        (0..self.rounds.len())
            .filter(|&r| self.implausible_round(r))
            .map(|r| r + 1)
            .collect()
    }

    fn implausible_round(&self, r: usize) -> bool {
        self.rounds[r]
            .iter()
            .flatten()
            .any(|x| x.implausible.is_some())
    }

    /// Candidate `i`'s scores, one per round that was not discarded.
    pub fn scores(&self, i: usize) -> Vec<f64> {
        (0..self.rounds.len())
            .filter(|&r| !self.implausible_round(r))
            .filter_map(|r| self.rounds[r].get(i)?.as_ref()?.score)
            .collect()
    }

    /// Candidate `i`'s median score, if it failed no round and has one.
    pub fn median(&self, i: usize) -> Option<f64> {
        let scores = self.scores(i);
        if self.failure(i).is_some() || scores.is_empty() {
            return None;
        }
        Some(kevo_strategy::promotion::median(scores))
    }

    /// A two-candidate re-measurement (challenger, holder) as the
    /// promotion rule takes it.
    pub fn pair(&self, names: [i64; 2]) -> Remeasured {
        let failure = (0..2).find_map(|i| {
            self.failure(i)
                .map(|f| format!("candidate {}: {f}", names[i]))
        });
        Remeasured {
            rounds: (0..self.rounds.len())
                .filter(|&r| !self.implausible_round(r))
                .filter_map(|r| {
                    let row = &self.rounds[r];
                    Some([row.first()?.as_ref()?.score?, row.get(1)?.as_ref()?.score?])
                })
                .collect(),
            failure,
        }
    }
}

/// The end-of-run pick: the best few and the seed re-measured together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalPick {
    pub rounds: u32,
    /// In in-run rank order, the seed last (unless it ranked).
    pub candidates: Vec<FinalEntry>,
    /// The best median of the re-measurement.
    pub winner: i64,
    /// The strategy's best, by its in-run score.
    pub in_run_best: i64,
    /// The winner's median over the seed's, both from the re-measurement.
    pub speedup: Option<f64>,
    /// Rounds left out because a timing in them was implausible.
    #[serde(default)]
    pub discarded_rounds: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalEntry {
    pub candidate: i64,
    pub iteration: u32,
    pub in_run_score: f64,
    /// Median over the rounds; None if it failed one.
    pub remeasured: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl FinalPick {
    /// Whether the re-measurement picked another winner than the in-run
    /// scores did.
    pub fn changed(&self) -> bool {
        self.winner != self.in_run_best
    }

    /// One line per candidate and the verdict, for summaries.
    pub fn describe(&self) -> String {
        let mut lines = vec![format!(
            "final re-measurement of the {} best and the seed over {} interleaved rounds:",
            self.candidates.len().saturating_sub(1).max(1),
            self.rounds
        )];
        for e in &self.candidates {
            let now = match (e.remeasured, &e.failure) {
                (Some(m), _) => format!("{m:.4}"),
                (None, Some(f)) => format!("failed ({f})"),
                (None, None) => "-".into(),
            };
            lines.push(format!(
                "  candidate {} (iteration {}): in-run {:.4}, re-measured {now}{}",
                e.candidate,
                e.iteration,
                e.in_run_score,
                if e.candidate == self.winner {
                    "  <- winner"
                } else {
                    ""
                }
            ));
        }
        if !self.discarded_rounds.is_empty() {
            lines.push(format!(
                "  rounds {:?} discarded: a candidate ran faster than the hardware allows in them",
                self.discarded_rounds
            ));
        }
        if self.changed() {
            lines.push(format!(
                "  the in-run best (candidate {}) was not the re-measured best",
                self.in_run_best
            ));
        }
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(score: Option<f64>) -> Option<RoundResult> {
        Some(RoundResult {
            score,
            failure: score.is_none().then(|| "wrong result at 64x64".to_string()),
            implausible: None,
            sizes: Vec::new(),
        })
    }

    fn too_fast() -> Option<RoundResult> {
        Some(RoundResult {
            score: None,
            failure: None,
            implausible: Some("suspicious at size 1M".into()),
            sizes: Vec::new(),
        })
    }

    #[test]
    fn an_implausibly_fast_round_is_discarded_for_both() {
        let m = Interleaved {
            rounds: vec![
                vec![result(Some(0.6)), result(Some(0.5))],
                vec![too_fast(), result(Some(0.9))],
                vec![result(Some(0.62)), result(Some(0.52))],
            ],
            spend: RemeasureSpend::default(),
        };
        assert_eq!(m.discarded(), vec![2]);
        assert_eq!(m.failure(0), None);
        assert_eq!(m.median(0), Some(0.61));
        assert_eq!(m.median(1), Some(0.51), "round 2's 0.9 is left out too");
        assert_eq!(m.pair([7, 3]).rounds, vec![[0.6, 0.5], [0.62, 0.52]]);
        let always = Interleaved {
            rounds: vec![vec![too_fast()], vec![too_fast()]],
            spend: RemeasureSpend::default(),
        };
        assert!(always.failure(0).unwrap().starts_with("every round faster"));
        assert_eq!(always.median(0), None);
    }

    #[test]
    fn rounds_rotate_the_order() {
        assert_eq!(Interleaved::order(2, 0), vec![0, 1]);
        assert_eq!(Interleaved::order(2, 1), vec![1, 0]);
        assert_eq!(Interleaved::order(3, 2), vec![2, 0, 1]);
    }

    #[test]
    fn a_failed_round_names_the_candidate_and_leaves_no_median() {
        let m = Interleaved {
            rounds: vec![
                vec![result(Some(0.6)), result(Some(0.5))],
                vec![result(None), result(Some(0.52))],
                vec![None, result(Some(0.48))],
            ],
            spend: RemeasureSpend::default(),
        };
        assert_eq!(m.median(0), None);
        assert_eq!(m.median(1), Some(0.5));
        assert_eq!(
            m.failure(0).as_deref(),
            Some("round 2: wrong result at 64x64")
        );
        let pair = m.pair([7, 3]);
        assert_eq!(pair.rounds, vec![[0.6, 0.5]]);
        assert_eq!(
            pair.failure.as_deref(),
            Some("candidate 7: round 2: wrong result at 64x64")
        );
    }
}
