//! Search strategies decide promotion and what the proposer sees next. They
//! see in-distribution scores only: held-out results never reach them.
//!
//! A session drives a [`Strategy`] in three steps per iteration: the store
//! records the iteration's candidates first and assigns their ids, the
//! strategy then decides on those ids ([`Strategy::decide`]), and the
//! decisions are recorded with the checkpoint, all in one transaction. No
//! strategy ever sees a provisional id.
//!
//! [`OnePlusOne`] is Metal-Sci's Algorithm 1: one incumbent; a candidate
//! replaces it if and only if its score is defined and strictly greater.
//! With several candidates per iteration (λ > 1) the best of the batch
//! competes with the incumbent.

mod history;

pub use history::{HistoryEntry, StepOutcome};

use serde::{Deserialize, Serialize};

/// What the strategy needs to know about one evaluated, stored candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    /// The store's id of the candidate.
    pub id: i64,
    /// Score on the in-distribution sizes; None unless every size was correct.
    pub score: Option<f64>,
    pub outcome: StepOutcome,
}

/// A candidate the search holds with its score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Elite {
    pub id: i64,
    pub score: f64,
}

/// The promotion decision for one iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The candidate that competed with the incumbent (the best of the batch).
    pub contender: Option<i64>,
    pub promoted: bool,
    /// The incumbent after the decision.
    pub incumbent: i64,
    pub reason: String,
}

impl Decision {
    /// Whether candidate `id` of the decided batch became the incumbent.
    pub fn promotes(&self, id: i64) -> bool {
        self.promoted && self.contender == Some(id)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StrategyError {
    /// A search needs something to beat.
    #[error("the seed is not correct ({outcome}); a search needs a correct seed")]
    SeedNotCorrect { outcome: StepOutcome },
}

/// A search strategy as a session drives it. Ids are the store's
/// candidate ids: every candidate a strategy is shown is already stored.
pub trait Strategy: Send {
    /// The seed the search started from (the baseline of its speedup).
    fn seed(&self) -> Elite;
    /// The best candidate so far: the winner if the run stopped now.
    fn best(&self) -> Elite;
    /// The candidate the next proposals improve on: shown to the proposer
    /// as the incumbent and recorded as their parent.
    fn parent(&self) -> i64;
    /// The last candidate evaluated, shown as "your previous attempt".
    fn previous(&self) -> i64;
    /// Decide on one iteration's evaluated candidates, in proposal order;
    /// `batch` is never empty.
    fn decide(&mut self, iteration: u32, batch: &[Scored]) -> Decision;

    /// Improvement of the best candidate over the seed, measured in this
    /// session.
    fn speedup(&self) -> f64 {
        self.best().score / self.seed().score
    }
}

/// State of a (1+1) search; its checkpoint is the store's incumbent and
/// previous candidate, so a killed run resumes exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OnePlusOne {
    pub seed: Elite,
    pub incumbent: Elite,
    /// The last candidate that was extracted and evaluated (what the
    /// proposer is shown as "your previous attempt").
    pub previous: i64,
}

impl OnePlusOne {
    /// The name stored with a run of this strategy.
    pub const NAME: &'static str = "one_plus_one";

    /// Start from an evaluated, stored seed. A seed without a score cannot
    /// start a search: there is nothing to beat.
    pub fn new(seed: &Scored) -> Result<Self, StrategyError> {
        let score = seed.score.ok_or(StrategyError::SeedNotCorrect {
            outcome: seed.outcome,
        })?;
        Ok(OnePlusOne::starting_at(Elite { id: seed.id, score }))
    }

    /// Start from a seed whose score is known.
    pub fn starting_at(seed: Elite) -> Self {
        OnePlusOne {
            seed,
            incumbent: seed,
            previous: seed.id,
        }
    }

    /// Rebuild the state a checkpoint describes.
    pub fn restore(seed: Elite, incumbent: Elite, previous: i64) -> Self {
        OnePlusOne {
            seed,
            incumbent,
            previous,
        }
    }
}

impl Strategy for OnePlusOne {
    fn seed(&self) -> Elite {
        self.seed
    }

    fn best(&self) -> Elite {
        self.incumbent
    }

    fn parent(&self) -> i64 {
        self.incumbent.id
    }

    fn previous(&self) -> i64 {
        self.previous
    }

    /// The best defined score competes; ties go to the earlier proposal; it
    /// is promoted only if strictly greater than the incumbent's.
    fn decide(&mut self, _iteration: u32, batch: &[Scored]) -> Decision {
        let contender = batch
            .iter()
            .filter_map(|c| c.score.filter(|s| s.is_finite()).map(|s| (c.id, s)))
            .fold(None::<(i64, f64)>, |best, c| match best {
                Some(b) if b.1 >= c.1 => Some(b),
                _ => Some(c),
            });
        let promoted = contender.is_some_and(|(_, s)| s > self.incumbent.score);
        let reason = match contender {
            None => "no candidate of this iteration has a score".to_string(),
            Some((_, s)) => format!(
                "score {s:.4} {} the incumbent's {:.4}",
                if promoted { "beats" } else { "does not beat" },
                self.incumbent.score
            ),
        };
        if let (true, Some((id, score))) = (promoted, contender) {
            self.incumbent = Elite { id, score };
        }
        if let Some(last) = batch.last() {
            self.previous = contender.map(|(id, _)| id).unwrap_or(last.id);
        }
        Decision {
            contender: contender.map(|(id, _)| id),
            promoted,
            incumbent: self.incumbent.id,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: i64, score: Option<f64>) -> Scored {
        Scored {
            id,
            score,
            outcome: if score.is_some() {
                StepOutcome::Correct
            } else {
                StepOutcome::WrongResult
            },
        }
    }

    #[test]
    fn promotes_only_strictly_better_defined_scores() {
        let mut s = OnePlusOne::new(&c(1, Some(0.5))).unwrap();
        assert!(
            !s.decide(1, &[c(2, None)]).promoted,
            "no score, no promotion"
        );
        assert_eq!(s.previous(), 2);
        assert!(
            !s.decide(2, &[c(3, Some(0.5))]).promoted,
            "equal is not better"
        );
        assert!(!s.decide(3, &[c(4, Some(0.4))]).promoted);
        let d = s.decide(4, &[c(5, Some(0.6))]);
        assert!(d.promoted && d.incumbent == 5 && d.promotes(5));
        assert_eq!(s.best(), Elite { id: 5, score: 0.6 });
        assert_eq!(s.parent(), 5);
        assert!((s.speedup() - 1.2).abs() < 1e-12);
        let d = s.decide(5, &[c(6, Some(f64::NAN))]);
        assert!(!d.promoted && d.contender.is_none(), "NaN never competes");
        assert_eq!(s.seed(), Elite { id: 1, score: 0.5 });
    }

    #[test]
    fn the_best_of_a_batch_competes_and_ties_go_to_the_first() {
        let mut s = OnePlusOne::new(&c(1, Some(0.5))).unwrap();
        let d = s.decide(
            1,
            &[
                c(2, Some(0.7)),
                c(3, None),
                c(4, Some(0.9)),
                c(5, Some(0.9)),
            ],
        );
        assert_eq!((d.contender, d.promoted, d.incumbent), (Some(4), true, 4));
        assert!(d.promotes(4) && !d.promotes(5) && !d.promotes(2));
        assert_eq!(s.previous(), 4);
        let d = s.decide(2, &[c(6, Some(0.8))]);
        assert!(!d.promoted && !d.promotes(6));
        assert_eq!(
            d.reason,
            "score 0.8000 does not beat the incumbent's 0.9000"
        );
        assert_eq!(s.previous(), 6, "the last evaluated is shown next");
    }

    #[test]
    fn a_batch_without_scores_keeps_the_incumbent_and_shows_the_last() {
        let mut s = OnePlusOne::new(&c(1, Some(0.5))).unwrap();
        let d = s.decide(1, &[c(2, None), c(3, None)]);
        assert_eq!(d.contender, None);
        assert_eq!(d.reason, "no candidate of this iteration has a score");
        assert_eq!((s.parent(), s.previous()), (1, 3));
    }

    #[test]
    fn a_restored_search_decides_as_the_original_would() {
        let mut original = OnePlusOne::new(&c(10, Some(0.5))).unwrap();
        original.decide(1, &[c(11, Some(0.7))]);
        original.decide(2, &[c(12, Some(0.6))]);
        let mut restored = OnePlusOne::restore(
            Elite { id: 10, score: 0.5 },
            Elite { id: 11, score: 0.7 },
            12,
        );
        assert_eq!(restored, original);
        let batch = [c(13, Some(0.8))];
        assert_eq!(restored.decide(3, &batch), original.decide(3, &batch));
    }

    #[test]
    fn an_incorrect_seed_cannot_start_a_search() {
        let e = OnePlusOne::new(&c(1, None)).unwrap_err();
        assert_eq!(
            e,
            StrategyError::SeedNotCorrect {
                outcome: StepOutcome::WrongResult
            }
        );
        assert!(e.to_string().contains("not correct (wrong_result)"), "{e}");
    }
}
