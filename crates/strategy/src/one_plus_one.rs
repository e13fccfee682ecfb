//! Metal-Sci's Algorithm 1: one incumbent; a candidate replaces it if and
//! only if its score is defined and strictly greater. With several
//! candidates per iteration (λ > 1) the best of the batch competes.

use serde::{Deserialize, Serialize};

use crate::{Archive, Decision, Elite, Judge, Placement, Scored, Selection, Strategy, best_of};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OnePlusOne {
    pub seed: Elite,
    pub incumbent: Elite,
    /// The last candidate that was extracted and evaluated (what the
    /// proposer is shown as "your previous attempt").
    pub previous: i64,
    /// Iterations decided; before the first, only the seed is shown.
    #[serde(default)]
    pub decided: u32,
}

impl OnePlusOne {
    /// The name stored with a run of this strategy.
    pub const NAME: &'static str = "one_plus_one";

    /// Start from a seed whose score is known.
    pub fn starting_at(seed: Elite) -> Self {
        OnePlusOne {
            seed,
            incumbent: seed,
            previous: seed.id,
            decided: 0,
        }
    }

    /// Rebuild the state of a run checkpointed before strategies stored
    /// their own state: its incumbent and previous candidate columns.
    pub fn restore(seed: Elite, incumbent: Elite, previous: i64, decided: u32) -> Self {
        OnePlusOne {
            seed,
            incumbent,
            previous,
            decided,
        }
    }
}

impl Strategy for OnePlusOne {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn seed(&self) -> Elite {
        self.seed
    }

    fn best(&self) -> Elite {
        self.incumbent
    }

    fn select(&mut self) -> Selection {
        Selection {
            parent: self.incumbent.id,
            island: None,
            cell: None,
            elites: Vec::new(),
            inspirations: Vec::new(),
            hints: Vec::new(),
            previous: (self.decided > 0).then_some(self.previous),
            how: "incumbent".into(),
        }
    }

    /// The best defined score competes; ties go to the earlier proposal; it
    /// is promoted if the judge finds it better than the incumbent
    /// (strictly greater, or significantly so when re-measured).
    fn decide(
        &mut self,
        _iteration: u32,
        _selection: &Selection,
        batch: &[Scored],
        judge: &mut dyn Judge,
    ) -> Decision {
        let contender = best_of(batch);
        let judgement =
            contender.map(|(id, score)| judge.judge(Elite { id, score }, self.incumbent));
        let promoted = judgement.as_ref().is_some_and(|j| j.better);
        let reason = match (contender, &judgement) {
            (Some((_, s)), Some(j)) => {
                j.reason(j.against(s, &format!("the incumbent's {:.4}", self.incumbent.score)))
            }
            _ => "no candidate of this iteration has a score".to_string(),
        };
        if let Some(j) = &judgement {
            // Re-measured scores replace the selecting measurement.
            self.incumbent.score = j.holder_score;
            if let (true, Some((id, _))) = (j.better, contender) {
                self.incumbent = Elite {
                    id,
                    score: j.challenger_score,
                };
            }
        }
        if let Some(last) = batch.last() {
            self.previous = contender.map(|(id, _)| id).unwrap_or(last.id);
        }
        self.decided += 1;
        Decision {
            placements: batch
                .iter()
                .map(|c| Placement {
                    id: c.id,
                    kept: promoted && contender.is_some_and(|(id, _)| id == c.id),
                    island: None,
                    cell: c.descriptors,
                    reason: c.duplicate_reason().unwrap_or_else(|| reason.clone()),
                })
                .collect(),
            improved: promoted,
            best: self.incumbent,
        }
    }

    fn rename(&mut self, to: &dyn Fn(i64) -> i64) {
        self.seed.id = to(self.seed.id);
        self.incumbent.id = to(self.incumbent.id);
        self.previous = to(self.previous);
    }

    fn state(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn archive(&self) -> Archive {
        Archive::Incumbent(self.incumbent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: i64, score: Option<f64>) -> Scored {
        crate::scored(id, score, None)
    }

    fn start() -> OnePlusOne {
        OnePlusOne::starting_at(Elite { id: 1, score: 0.5 })
    }

    fn decide(s: &mut OnePlusOne, k: u32, batch: &[Scored]) -> Decision {
        let sel = s.select();
        assert_eq!(sel.parent, s.incumbent.id, "the parent is the incumbent");
        s.decide(k, &sel, batch, &mut crate::StrictJudge)
    }

    #[test]
    fn promotes_only_strictly_better_defined_scores() {
        let mut s = start();
        assert_eq!(
            s.select().previous,
            None,
            "nothing before the first iteration"
        );
        assert!(
            !decide(&mut s, 1, &[c(2, None)]).improved,
            "no score, no promotion"
        );
        assert_eq!(s.select().previous, Some(2));
        assert!(
            !decide(&mut s, 2, &[c(3, Some(0.5))]).improved,
            "equal is not better"
        );
        assert!(!decide(&mut s, 3, &[c(4, Some(0.4))]).improved);
        let d = decide(&mut s, 4, &[c(5, Some(0.6))]);
        assert!(d.improved && d.best.id == 5 && d.kept(5));
        assert_eq!(s.best(), Elite { id: 5, score: 0.6 });
        assert_eq!(s.select().parent, 5);
        assert!((s.speedup() - 1.2).abs() < 1e-12);
        let d = decide(&mut s, 5, &[c(6, Some(f64::NAN))]);
        assert!(!d.improved && !d.kept(6), "NaN never competes");
        assert_eq!(s.seed(), Elite { id: 1, score: 0.5 });
    }

    #[test]
    fn the_best_of_a_batch_competes_and_ties_go_to_the_first() {
        let mut s = start();
        let d = decide(
            &mut s,
            1,
            &[
                c(2, Some(0.7)),
                c(3, None),
                c(4, Some(0.9)),
                c(5, Some(0.9)),
            ],
        );
        assert!(d.improved && d.best.id == 4);
        assert!(d.kept(4) && !d.kept(5) && !d.kept(2));
        assert_eq!(s.select().previous, Some(4));
        let d = decide(&mut s, 2, &[c(6, Some(0.8))]);
        assert!(!d.improved && !d.kept(6));
        assert_eq!(
            d.placements[0].reason,
            "score 0.8000 does not beat the incumbent's 0.9000"
        );
        assert_eq!(
            s.select().previous,
            Some(6),
            "the last evaluated is shown next"
        );
    }

    #[test]
    fn a_batch_without_scores_keeps_the_incumbent_and_shows_the_last() {
        let mut s = start();
        let d = decide(&mut s, 1, &[c(2, None), c(3, None)]);
        assert!(!d.any_kept());
        assert_eq!(
            d.placements[1].reason,
            "no candidate of this iteration has a score"
        );
        let sel = s.select();
        assert_eq!((sel.parent, sel.previous), (1, Some(3)));
    }

    #[test]
    fn a_search_restored_from_checkpoint_columns_decides_as_the_original() {
        let mut original = start();
        decide(&mut original, 1, &[c(11, Some(0.7))]);
        decide(&mut original, 2, &[c(12, Some(0.6))]);
        let mut restored = OnePlusOne::restore(
            Elite { id: 1, score: 0.5 },
            Elite { id: 11, score: 0.7 },
            12,
            2,
        );
        assert_eq!(restored, original);
        let batch = [c(13, Some(0.8))];
        assert_eq!(
            decide(&mut restored, 3, &batch),
            decide(&mut original, 3, &batch)
        );
    }
}
