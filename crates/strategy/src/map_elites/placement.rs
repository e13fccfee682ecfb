//! How [`MapElites::decide`](crate::Strategy::decide) places one child:
//! judged against its cell's elite, inserted when kept, and its
//! transition from the parent recorded for the hints.

use kevo_descriptors::Descriptors;

use super::{CellElite, MapElites, Transition, TransitionOutcome};
use crate::{Elite, Judge, Placement, Scored, Selection};

/// The parent a batch of children came from.
pub(super) struct Parent {
    pub(super) cell: Descriptors,
    /// The parent's score while it holds its cell, else the seed's.
    pub(super) score: f64,
    pub(super) island: u32,
}

impl MapElites {
    /// The parent of `selection`, as the archive holds it now.
    pub(super) fn parent_of(&self, selection: &Selection) -> Parent {
        let cell = selection.cell.unwrap_or_default();
        let score = self
            .cells
            .get(&cell)
            .filter(|c| c.elite.id == selection.parent)
            .map(|c| c.elite.score)
            .unwrap_or(self.seed.score);
        Parent {
            cell,
            score,
            island: selection.island.unwrap_or(0),
        }
    }

    /// One child: a repeat is kept out with no transition; any other is
    /// judged, inserted when kept, and its transition recorded.
    pub(super) fn place(
        &mut self,
        iteration: u32,
        parent: &Parent,
        c: &Scored,
        judge: &mut dyn Judge,
    ) -> Placement {
        if let Some(reason) = c.duplicate_reason() {
            // A repeat teaches nothing new: no insertion, no transition.
            return Placement {
                id: c.id,
                kept: false,
                island: Some(parent.island),
                cell: c.descriptors,
                reason,
            };
        }
        let mut score = c.score.filter(|s| s.is_finite());
        let (kept, mut reason, outcome) = self.judge_child(c, &mut score, parent.score, judge);
        if let (true, Some(s), Some(cell)) = (kept, score, c.descriptors) {
            let elite = Elite { id: c.id, score: s };
            self.insert_elite(elite, cell, parent.island, judge, &mut reason);
        }
        self.record_transition(Transition {
            iteration,
            parent: parent.cell,
            child: c.descriptors,
            delta: score.map_or(-1.0, |s| s / parent.score - 1.0),
            outcome,
        });
        Placement {
            id: c.id,
            kept,
            island: Some(parent.island),
            cell: c.descriptors,
            reason,
        }
    }

    /// Whether the child is kept, why, and the transition's outcome: a
    /// child without a score or descriptors is kept out, one in an empty
    /// cell fills it, any other challenges the cell's elite. `score`
    /// becomes the judge's where the child wins.
    fn judge_child(
        &mut self,
        c: &Scored,
        score: &mut Option<f64>,
        parent_score: f64,
        judge: &mut dyn Judge,
    ) -> (bool, String, TransitionOutcome) {
        match (*score, c.descriptors) {
            (None, _) => (
                false,
                format!("no score ({})", c.outcome),
                TransitionOutcome::Regression,
            ),
            (Some(_), None) => (
                false,
                "no descriptors to place it by".to_string(),
                TransitionOutcome::Neutral,
            ),
            (Some(s), Some(cell)) => match self.cells.get(&cell).copied() {
                None => (
                    true,
                    format!("fills the empty cell {cell}"),
                    TransitionOutcome::Improvement,
                ),
                Some(e) => {
                    let challenger = Elite { id: c.id, score: s };
                    self.challenge(challenger, cell, e, score, parent_score, judge)
                }
            },
        }
    }

    /// The child `challenger` against the elite `e` of its `cell`: it
    /// wins only when the judge finds it strictly better (both re-measured
    /// scores are taken); losing below the parent's score is a regression.
    fn challenge(
        &mut self,
        challenger: Elite,
        cell: Descriptors,
        e: CellElite,
        score: &mut Option<f64>,
        parent_score: f64,
        judge: &mut dyn Judge,
    ) -> (bool, String, TransitionOutcome) {
        let s = challenger.score;
        let j = judge.judge(challenger, e.elite);
        self.rescore(e.elite.id, j.holder_score);
        if j.better {
            *score = Some(j.challenger_score);
        }
        let base = j.against(s, &format!("cell {cell}'s elite {:.4}", e.elite.score));
        let outcome = if j.better {
            TransitionOutcome::Improvement
        } else if s < parent_score {
            TransitionOutcome::Regression
        } else {
            TransitionOutcome::Neutral
        };
        (j.better, j.reason(base), outcome)
    }

    /// `elite` becomes `cell`'s elite in `island`; past the best so far,
    /// it contests the best (the contest's note goes into `reason`).
    fn insert_elite(
        &mut self,
        elite: Elite,
        cell: Descriptors,
        island: u32,
        judge: &mut dyn Judge,
        reason: &mut String,
    ) {
        self.cells.insert(
            cell,
            CellElite {
                cell,
                elite,
                island,
            },
        );
        if elite.score > self.best.score {
            let best = self.best;
            self.best =
                crate::contest_best(judge, elite, best, reason, |id, s| self.rescore(id, s));
        }
    }

    /// Keep `transition`, dropping the oldest past the configured number
    /// (at least 1).
    fn record_transition(&mut self, transition: Transition) {
        self.transitions.push_back(transition);
        while self.transitions.len() > self.config.transitions.max(1) {
            self.transitions.pop_front();
        }
    }
}
