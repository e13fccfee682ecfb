//! Search strategies decide promotion and what the proposer sees next. They
//! see in-distribution scores only: held-out results never reach them.
//!
//! [`OnePlusOne`] is Metal-Sci's Algorithm 1: one incumbent; a candidate
//! replaces it if and only if its score is defined and strictly greater.
//! With several candidates per iteration (λ > 1) the best of the batch
//! competes with the incumbent.

use serde::{Deserialize, Serialize};

/// What the strategy needs to know about one evaluated candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    /// The store's id of the candidate.
    pub id: i64,
    /// Score on the in-distribution sizes; None unless every size was correct.
    pub score: Option<f64>,
    /// Short outcome name ("correct", "compile_error", ...), for the history.
    pub outcome: String,
}

/// One line of the history shown to the proposer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub iteration: u32,
    pub candidate: i64,
    pub outcome: String,
    pub score: Option<f64>,
    pub promoted: bool,
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

/// State of a (1+1) search; serialisable so a killed run resumes exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OnePlusOne {
    pub seed: i64,
    pub seed_score: f64,
    pub incumbent: i64,
    pub incumbent_score: f64,
    /// The last candidate that was extracted and evaluated (what the
    /// proposer is shown as "your previous attempt").
    pub previous: i64,
    pub history: Vec<HistoryEntry>,
}

impl OnePlusOne {
    /// Start from an evaluated seed. A seed without a score cannot start a
    /// search: there is nothing to beat.
    pub fn new(seed: &Scored) -> Result<Self, String> {
        let score = seed.score.ok_or_else(|| {
            format!(
                "the seed is not correct ({}); a search needs a correct seed",
                seed.outcome
            )
        })?;
        Ok(OnePlusOne {
            seed: seed.id,
            seed_score: score,
            incumbent: seed.id,
            incumbent_score: score,
            previous: seed.id,
            history: vec![HistoryEntry {
                iteration: 0,
                candidate: seed.id,
                outcome: seed.outcome.clone(),
                score: seed.score,
                promoted: true,
            }],
        })
    }

    /// Consider the candidates of one iteration (in proposal order). The best
    /// defined score competes; ties go to the earlier proposal; it is
    /// promoted only if strictly greater than the incumbent's.
    pub fn step(&mut self, iteration: u32, batch: &[Scored]) -> Decision {
        let contender = batch
            .iter()
            .filter(|c| c.score.is_some_and(f64::is_finite))
            .fold(None::<&Scored>, |best, c| match best {
                Some(b) if b.score >= c.score => Some(b),
                _ => Some(c),
            });
        let promoted = contender.is_some_and(|c| c.score.is_some_and(|s| s > self.incumbent_score));
        let reason = match contender {
            None => "no candidate of this iteration has a score".to_string(),
            Some(c) if promoted => format!(
                "score {:.4} beats the incumbent's {:.4}",
                c.score.unwrap_or(f64::NAN),
                self.incumbent_score
            ),
            Some(c) => format!(
                "score {:.4} does not beat the incumbent's {:.4}",
                c.score.unwrap_or(f64::NAN),
                self.incumbent_score
            ),
        };
        if let (true, Some(c)) = (promoted, contender) {
            self.incumbent = c.id;
            self.incumbent_score = c.score.unwrap_or(self.incumbent_score);
        }
        for c in batch {
            self.history.push(HistoryEntry {
                iteration,
                candidate: c.id,
                outcome: c.outcome.clone(),
                score: c.score,
                promoted: promoted && contender.is_some_and(|w| w.id == c.id),
            });
        }
        if let Some(last) = batch.last() {
            self.previous = contender.map(|c| c.id).unwrap_or(last.id);
        }
        Decision {
            contender: contender.map(|c| c.id),
            promoted,
            incumbent: self.incumbent,
            reason,
        }
    }

    /// Rebuild the state a checkpoint describes (history is not needed to
    /// decide, so a resumed run starts with an empty one).
    pub fn restore(
        seed: i64,
        seed_score: f64,
        incumbent: i64,
        incumbent_score: f64,
        previous: i64,
    ) -> Self {
        OnePlusOne {
            seed,
            seed_score,
            incumbent,
            incumbent_score,
            previous,
            history: Vec::new(),
        }
    }

    /// Replace a provisional candidate id (used before the store assigned
    /// one) by the stored id.
    pub fn rename(&mut self, from: i64, to: i64) {
        for id in [&mut self.seed, &mut self.incumbent, &mut self.previous] {
            if *id == from {
                *id = to;
            }
        }
        for h in &mut self.history {
            if h.candidate == from {
                h.candidate = to;
            }
        }
    }

    /// Improvement of the incumbent over the seed, measured in this session.
    pub fn speedup(&self) -> f64 {
        self.incumbent_score / self.seed_score
    }

    /// The last `n` history entries (Metal-Sci shows 8).
    pub fn recent(&self, n: usize) -> &[HistoryEntry] {
        &self.history[self.history.len().saturating_sub(n)..]
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
                "correct"
            } else {
                "wrong_result"
            }
            .into(),
        }
    }

    #[test]
    fn promotes_only_strictly_better_defined_scores() {
        let mut s = OnePlusOne::new(&c(1, Some(0.5))).unwrap();
        assert!(!s.step(1, &[c(2, None)]).promoted, "no score, no promotion");
        assert_eq!(s.previous, 2);
        assert!(
            !s.step(2, &[c(3, Some(0.5))]).promoted,
            "equal is not better"
        );
        assert!(!s.step(3, &[c(4, Some(0.4))]).promoted);
        let d = s.step(4, &[c(5, Some(0.6))]);
        assert!(d.promoted && d.incumbent == 5);
        assert_eq!(s.incumbent_score, 0.6);
        assert!((s.speedup() - 1.2).abs() < 1e-12);
        assert!(
            !s.step(5, &[c(6, Some(f64::NAN))]).promoted,
            "NaN never wins"
        );
        let flags: Vec<bool> = s.history.iter().map(|h| h.promoted).collect();
        assert_eq!(flags, vec![true, false, false, false, true, false]);
    }

    #[test]
    fn the_best_of_a_batch_competes_and_ties_go_to_the_first() {
        let mut s = OnePlusOne::new(&c(1, Some(0.5))).unwrap();
        let d = s.step(
            1,
            &[
                c(2, Some(0.7)),
                c(3, None),
                c(4, Some(0.9)),
                c(5, Some(0.9)),
            ],
        );
        assert_eq!((d.contender, d.promoted, d.incumbent), (Some(4), true, 4));
        assert_eq!(s.previous, 4);
        assert_eq!(
            s.history.iter().filter(|h| h.promoted).count(),
            2,
            "seed and 4"
        );
        let d = s.step(2, &[c(6, Some(0.8))]);
        assert!(!d.promoted);
        assert_eq!(s.recent(2).len(), 2);
    }

    #[test]
    fn provisional_ids_are_renamed_everywhere() {
        let mut s = OnePlusOne::new(&c(-1, Some(0.5))).unwrap();
        s.rename(-1, 10);
        s.step(1, &[c(-2, Some(0.7))]);
        s.rename(-2, 11);
        assert_eq!((s.seed, s.incumbent, s.previous), (10, 11, 11));
        assert_eq!(
            s.history.iter().map(|h| h.candidate).collect::<Vec<_>>(),
            vec![10, 11]
        );
        let r = OnePlusOne::restore(10, 0.5, 11, 0.7, 11);
        assert_eq!((r.incumbent, r.incumbent_score), (11, 0.7));
    }

    #[test]
    fn an_incorrect_seed_cannot_start_a_search() {
        let e = OnePlusOne::new(&c(1, None)).unwrap_err();
        assert!(e.contains("not correct"), "{e}");
    }
}
