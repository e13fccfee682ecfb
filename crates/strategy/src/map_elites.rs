//! MAP-Elites (KernelFoundry, section 3.2-3.3): an archive of one elite per
//! cell of the descriptor grid (memory access x algorithm x coordination,
//! 4 x 4 x 4), parents chosen by a mix of four selection rules, and hints
//! drawn from the parent->child transitions seen so far.

use std::collections::{BTreeMap, VecDeque};

use kevo_descriptors::{Axis, Descriptors};
use serde::{Deserialize, Serialize};

use crate::rng::Rng;

mod placement;
use crate::{Decision, Elite, Hint, HintReason, Scored, Selection, Strategy};

/// How often each parent-selection rule is used (relative weights).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionMix {
    /// Any occupied cell, equally likely: spreads effort over the archive.
    pub uniform: f64,
    /// Cells in proportion to their elite's score: exploits the best.
    pub fitness: f64,
    /// Cells whose children improved most often lately; untried cells
    /// count as promising.
    pub curiosity: f64,
    /// The next island in turn, then any of its cells: sub-populations
    /// that each get their share.
    pub island: f64,
}

impl Default for SelectionMix {
    /// KernelFoundry's best runs used curiosity; half the draws go to it.
    fn default() -> Self {
        SelectionMix {
            uniform: 0.25,
            fitness: 0.25,
            curiosity: 0.5,
            island: 0.0,
        }
    }
}

impl SelectionMix {
    /// Parse "uniform=0.2,fitness=0.3,curiosity=0.5,island=0"; rules left
    /// out weigh 0.
    pub fn parse(text: &str) -> Result<SelectionMix, String> {
        let mut mix = SelectionMix {
            uniform: 0.0,
            fitness: 0.0,
            curiosity: 0.0,
            island: 0.0,
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected RULE=WEIGHT"))?;
            let w: f64 = value
                .trim()
                .parse()
                .map_err(|_| format!("`{part}`: the weight is not a number"))?;
            if !(w.is_finite() && w >= 0.0) {
                return Err(format!(
                    "`{part}`: a weight must be finite and not negative"
                ));
            }
            let slot = match name.trim() {
                "uniform" => &mut mix.uniform,
                "fitness" => &mut mix.fitness,
                "curiosity" => &mut mix.curiosity,
                "island" => &mut mix.island,
                other => {
                    return Err(format!(
                        "`{other}` is not a selection rule (uniform, fitness, curiosity, island)"
                    ));
                }
            };
            *slot = w;
        }
        if mix.weights().iter().sum::<f64>() <= 0.0 {
            return Err("at least one selection rule needs a positive weight".into());
        }
        Ok(mix)
    }

    fn weights(&self) -> [f64; 4] {
        [self.uniform, self.fitness, self.curiosity, self.island]
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MapElitesConfig {
    pub selection: SelectionMix,
    /// Islands for island-based selection; a child joins its parent's.
    pub islands: u32,
    /// Elites other than the parent shown to the proposer, best first.
    pub elites_shown: usize,
    /// Elites of other cells shown for diversity.
    pub inspirations: usize,
    /// Hints per prompt at most.
    pub hints: usize,
    /// Transitions kept for curiosity and hints (a ring buffer).
    pub transitions: usize,
    /// Weight of a transition per iteration of age (exponential decay).
    pub decay: f64,
    pub rng_seed: u64,
}

impl Default for MapElitesConfig {
    fn default() -> Self {
        MapElitesConfig {
            selection: SelectionMix::default(),
            islands: 4,
            elites_shown: 3,
            inspirations: 2,
            hints: 2,
            transitions: 64,
            decay: 0.9,
            rng_seed: 0,
        }
    }
}

/// One cell's elite and the island its lineage belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CellElite {
    pub cell: Descriptors,
    pub elite: Elite,
    pub island: u32,
}

/// What happened when a parent produced a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransitionOutcome {
    /// The child became an elite (a better one, or a new cell's first).
    Improvement,
    /// Correct, but kept out by its cell's elite.
    Neutral,
    /// Incorrect, or slower than its parent.
    Regression,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    pub iteration: u32,
    pub parent: Descriptors,
    /// None when the child had no descriptors (it did not compile).
    pub child: Option<Descriptors>,
    /// Child score / parent score - 1; -1 for a child without a score.
    pub delta: f64,
    pub outcome: TransitionOutcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MapElites {
    pub config: MapElitesConfig,
    rng: Rng,
    seed: Elite,
    best: Elite,
    /// Occupied cells in grid order (stored as a list: JSON keys are
    /// strings).
    #[serde(with = "cells_as_list")]
    cells: BTreeMap<Descriptors, CellElite>,
    transitions: VecDeque<Transition>,
    /// The candidate shown next as "your previous attempt": the latest
    /// decided batch's best (else its last), whatever its parent, so the
    /// proposer always sees what became of its latest answer. (Stored
    /// before as a last child per parent, which showed an attempt several
    /// iterations old whenever the parent changed; that key is ignored.)
    #[serde(default)]
    latest: Option<i64>,
    /// The island island-based selection visits next.
    next_island: u32,
    /// The last decided iteration (the age of transitions counts from it).
    iteration: u32,
}

mod cells_as_list {
    use std::collections::BTreeMap;

    use kevo_descriptors::Descriptors;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::CellElite;

    pub fn serialize<S: Serializer>(
        cells: &BTreeMap<Descriptors, CellElite>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        cells.values().collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<Descriptors, CellElite>, D::Error> {
        let list = Vec::<CellElite>::deserialize(d)?;
        Ok(list.into_iter().map(|c| (c.cell, c)).collect())
    }
}

const SELECTION_RULES: [&str; 4] = ["uniform", "fitness", "curiosity", "island"];

impl MapElites {
    pub const NAME: &'static str = "map_elites";

    /// Give candidate `id` a re-measured score wherever the archive holds
    /// it (its cell, the best so far).
    fn rescore(&mut self, id: i64, score: f64) {
        for c in self.cells.values_mut().filter(|c| c.elite.id == id) {
            c.elite.score = score;
        }
        if self.best.id == id {
            self.best.score = score;
        }
    }

    /// Start from the stored, correct seed in its cell.
    pub fn new(config: MapElitesConfig, seed: Elite, seed_cell: Descriptors) -> Self {
        let mut cells = BTreeMap::new();
        cells.insert(
            seed_cell,
            CellElite {
                cell: seed_cell,
                elite: seed,
                island: 0,
            },
        );
        MapElites {
            rng: Rng::new(config.rng_seed),
            config,
            seed,
            best: seed,
            cells,
            transitions: VecDeque::new(),
            latest: None,
            next_island: 0,
            iteration: 0,
        }
    }

    pub fn cells(&self) -> impl Iterator<Item = &CellElite> {
        self.cells.values()
    }

    pub fn transitions(&self) -> impl Iterator<Item = &Transition> {
        self.transitions.iter()
    }

    fn weight_of_age(&self, iteration: u32) -> f64 {
        self.config
            .decay
            .powi(self.iteration.saturating_sub(iteration) as i32)
    }

    /// Optimistic improvement rate of a cell's children: (1 + decayed
    /// improvements) / (1 + decayed children); an untried cell has 1.
    fn curiosity(&self, cell: &Descriptors) -> f64 {
        let (mut improved, mut tried) = (0.0, 0.0);
        for t in self.transitions.iter().filter(|t| t.parent == *cell) {
            let w = self.weight_of_age(t.iteration);
            tried += w;
            if t.outcome == TransitionOutcome::Improvement {
                improved += w;
            }
        }
        (1.0 + improved) / (1.0 + tried)
    }

    fn pick_cell(&mut self) -> (CellElite, &'static str) {
        let occupied: Vec<CellElite> = self.cells.values().copied().collect();
        let rule = self
            .rng
            .weighted(&self.config.selection.weights())
            .unwrap_or(0);
        let index = match rule {
            1 => {
                let w: Vec<f64> = occupied.iter().map(|c| c.elite.score).collect();
                self.rng.weighted(&w)
            }
            2 => {
                let w: Vec<f64> = occupied.iter().map(|c| self.curiosity(&c.cell)).collect();
                self.rng.weighted(&w)
            }
            3 => {
                // The next island in turn; one without an elite yet
                // starts from the seed's cell (the seed belongs to every
                // island).
                let n = self.config.islands.max(1);
                let island = self.next_island % n;
                self.next_island = (island + 1) % n;
                let members: Vec<usize> = (0..occupied.len())
                    .filter(|i| occupied[*i].island == island)
                    .collect();
                let index = if members.is_empty() {
                    occupied
                        .iter()
                        .position(|c| c.elite.id == self.seed.id)
                        .or_else(|| occupied.iter().position(|c| c.elite.id == self.best.id))
                } else {
                    Some(members[self.rng.below(members.len())])
                };
                return index.map_or_else(
                    || (occupied[0], "island"),
                    |i| {
                        (
                            CellElite {
                                island,
                                ..occupied[i]
                            },
                            "island",
                        )
                    },
                );
            }
            _ => None,
        };
        let index = index.unwrap_or_else(|| self.rng.below(occupied.len()));
        let how = if index < occupied.len() && rule < 4 {
            SELECTION_RULES[rule]
        } else {
            "uniform"
        };
        (occupied[index], how)
    }

    /// Hints for a parent in `cell`, from what its children did: per axis
    /// and level a child reached, the decayed sum of their fitness
    /// changes. A positive sum suggests that level (`Improved`); a
    /// negative one reports it (`Worse`) and suggests nothing. Without an
    /// improvement, empty neighbouring cells are suggested, never one
    /// that children reached and did worse in.
    fn hints(&mut self, cell: &Descriptors) -> Vec<Hint> {
        let mut sums: BTreeMap<(Axis, u8), f64> = BTreeMap::new();
        for t in self.transitions.iter().filter(|t| t.parent == *cell) {
            let Some(child) = t.child else { continue };
            let w = self.weight_of_age(t.iteration);
            for axis in Axis::ALL {
                if child.level(axis) != cell.level(axis) {
                    *sums.entry((axis, child.level(axis))).or_default() += w * t.delta;
                }
            }
        }
        let seen = |keep: fn(f64) -> bool| -> Vec<(Axis, u8, f64)> {
            let mut v: Vec<_> = sums
                .iter()
                .filter(|(_, g)| keep(**g))
                .map(|((a, l), g)| (*a, *l, *g))
                .collect();
            v.sort_by(|a, b| b.2.abs().total_cmp(&a.2.abs()));
            v
        };
        let improved = seen(|g| g > 1e-9);
        let worse = seen(|g| g < -1e-9);
        let mut hints: Vec<Hint> = improved
            .iter()
            .map(|(axis, level, g)| Hint {
                axis: *axis,
                level: *level,
                reason: HintReason::Improved { gradient: *g },
            })
            .collect();
        let worse: Vec<Hint> = worse
            .iter()
            .map(|(axis, level, g)| Hint {
                axis: *axis,
                level: *level,
                reason: HintReason::Worse { change: *g },
            })
            .collect();
        // The strongest evidence against comes before guesses.
        hints.extend(worse.first().copied());
        if improved.is_empty() {
            let avoid: Vec<(Axis, u8)> = worse.iter().map(|h| (h.axis, h.level)).collect();
            hints.extend(self.unexplored(cell, &avoid));
        }
        hints.extend(worse.iter().skip(1).copied());
        hints.truncate(self.config.hints);
        hints
    }

    /// Empty neighbouring cells of `cell` (upward moves first: they are
    /// the optimisations not yet tried), leaving out the moves in `avoid`.
    fn unexplored(&mut self, cell: &Descriptors, avoid: &[(Axis, u8)]) -> Vec<Hint> {
        let empty: Vec<(Axis, u8)> = Axis::ALL
            .iter()
            .flat_map(|a| {
                let l = cell.level(*a);
                [
                    l.checked_sub(1),
                    l.checked_add(1).filter(|x| *x < kevo_descriptors::LEVELS),
                ]
                .into_iter()
                .flatten()
                .map(move |t| (*a, t))
            })
            .filter(|(a, t)| !self.cells.contains_key(&cell.with(*a, *t)))
            .filter(|move_| !avoid.contains(move_))
            .collect();
        let mut up: Vec<(Axis, u8)> = empty
            .iter()
            .copied()
            .filter(|(a, t)| *t > cell.level(*a))
            .collect();
        if up.is_empty() {
            up = empty;
        }
        self.rng
            .sample(&up, self.config.hints)
            .into_iter()
            .map(|(axis, level)| Hint {
                axis,
                level,
                reason: HintReason::Unexplored,
            })
            .collect()
    }
}

impl Strategy for MapElites {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn seed(&self) -> Elite {
        self.seed
    }

    fn best(&self) -> Elite {
        self.best
    }

    fn select(&mut self) -> Selection {
        let (parent, how) = self.pick_cell();
        let mut others: Vec<CellElite> = self
            .cells
            .values()
            .copied()
            .filter(|c| c.elite.id != parent.elite.id)
            .collect();
        others.sort_by(|a, b| {
            b.elite
                .score
                .total_cmp(&a.elite.score)
                .then(a.elite.id.cmp(&b.elite.id))
        });
        let elites: Vec<i64> = others
            .iter()
            .take(self.config.elites_shown)
            .map(|c| c.elite.id)
            .collect();
        let rest: Vec<i64> = others
            .iter()
            .skip(self.config.elites_shown)
            .map(|c| c.elite.id)
            .collect();
        let inspirations = self.rng.sample(&rest, self.config.inspirations);
        let hints = self.hints(&parent.cell);
        Selection {
            parent: parent.elite.id,
            island: Some(parent.island),
            cell: Some(parent.cell),
            elites,
            inspirations,
            hints,
            previous: self.latest,
            how: how.into(),
        }
    }

    /// Each scored child in turn: it fills an empty cell or replaces its
    /// cell's elite if strictly better; everything else is kept out.
    fn decide(
        &mut self,
        iteration: u32,
        selection: &Selection,
        batch: &[Scored],
        judge: &mut dyn crate::Judge,
    ) -> Decision {
        self.iteration = iteration;
        let parent = self.parent_of(selection);
        let mut placements = Vec::with_capacity(batch.len());
        let before = self.best;
        for c in batch {
            placements.push(self.place(iteration, &parent, c, judge));
        }
        if let Some(last) = crate::shown_next(batch) {
            self.latest = Some(last);
        }
        Decision {
            placements,
            // By id: a re-measurement that only rescored the best is no
            // new best ("NEW BEST" beside "within noise, not promoted").
            improved: self.best.id != before.id,
            best: self.best,
        }
    }

    fn rename(&mut self, to: &dyn Fn(i64) -> i64) {
        self.seed.id = to(self.seed.id);
        self.best.id = to(self.best.id);
        for c in self.cells.values_mut() {
            c.elite.id = to(c.elite.id);
        }
        self.latest = self.latest.map(to);
    }

    fn state(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn archive(&self) -> crate::Archive {
        crate::Archive::Grid(self.cells.values().copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DecideStrictly;

    fn cell(m: u8, a: u8, c: u8) -> Descriptors {
        Descriptors::new(m, a, c)
    }

    fn child(id: i64, score: Option<f64>, d: Option<Descriptors>) -> Scored {
        crate::scored(id, score, d)
    }

    fn start(config: MapElitesConfig) -> MapElites {
        MapElites::new(config, Elite { id: 1, score: 0.5 }, cell(0, 0, 0))
    }

    #[test]
    fn a_child_fills_an_empty_cell_or_beats_its_elite_strictly() {
        let mut s = start(MapElitesConfig::default());
        let sel = s.select();
        assert_eq!((sel.parent, sel.cell), (1, Some(cell(0, 0, 0))));
        let d = s.decide_strictly(
            1,
            &sel,
            &[
                child(2, Some(0.3), Some(cell(2, 0, 0))),
                child(3, Some(0.5), Some(cell(0, 0, 0))),
                child(4, None, Some(cell(1, 0, 0))),
                child(5, Some(0.9), None),
            ],
        );
        let kept: Vec<bool> = d.placements.iter().map(|p| p.kept).collect();
        assert_eq!(kept, [true, false, false, false]);
        assert_eq!(d.placements[0].reason, "fills the empty cell m2-a0-c0");
        assert!(
            d.placements[1].reason.contains("does not beat"),
            "equal is not better"
        );
        assert!(
            !d.improved && d.best.id == 1,
            "a worse new cell is kept, not best"
        );
        let sel = s.select();
        let d = s.decide_strictly(2, &sel, &[child(6, Some(0.4), Some(cell(2, 0, 0)))]);
        assert!(d.kept(6), "0.4 beats the cell's 0.3");
        let d = s.decide_strictly(3, &sel, &[child(7, Some(0.8), Some(cell(0, 0, 0)))]);
        assert!(d.kept(7) && d.improved && s.best() == Elite { id: 7, score: 0.8 });
        let cells: Vec<(String, i64)> = s
            .cells()
            .map(|c| (c.cell.to_string(), c.elite.id))
            .collect();
        assert_eq!(cells, [("m0-a0-c0".into(), 7), ("m2-a0-c0".into(), 6)]);
        assert!((s.speedup() - 1.6).abs() < 1e-12);
    }

    #[test]
    fn the_previous_attempt_is_the_latest_whatever_its_parent() {
        let mut s = start(MapElitesConfig::default());
        let sel = s.select();
        assert_eq!(sel.previous, None, "nothing proposed yet");
        s.decide_strictly(1, &sel, &[child(2, Some(0.3), Some(cell(2, 0, 0)))]);
        // Later proposals from another parent: the next prompt shows the
        // latest of them, not the seed's own last child (2).
        let from_other = Selection {
            parent: 2,
            cell: Some(cell(2, 0, 0)),
            ..sel.clone()
        };
        s.decide_strictly(2, &from_other, &[child(3, None, Some(cell(3, 0, 0)))]);
        s.decide_strictly(3, &from_other, &[child(4, Some(0.1), Some(cell(1, 0, 0)))]);
        for _ in 0..8 {
            assert_eq!(s.select().previous, Some(4));
        }
        s.rename(&|id| id * 10);
        assert_eq!(s.select().previous, Some(40));
        // A state stored with the old per-parent map still loads.
        let mut old = s.state();
        let o = old.as_object_mut().unwrap();
        o.remove("latest");
        o.insert("last_child".into(), serde_json::json!({"10": 20}));
        let back: MapElites = serde_json::from_value(old).unwrap();
        assert_eq!(back.latest, None);
    }

    #[test]
    fn a_best_only_rescored_by_a_re_measurement_is_no_new_best() {
        /// Within noise: not better, and the holder re-measured lower.
        struct WithinNoise;
        impl crate::Judge for WithinNoise {
            fn judge(&mut self, challenger: Elite, holder: Elite) -> crate::Judgement {
                crate::Judgement {
                    better: false,
                    challenger_score: challenger.score,
                    holder_score: holder.score * 0.9,
                    note: Some("within noise, not promoted".into()),
                }
            }
        }
        let mut s = start(MapElitesConfig::default());
        let sel = s.select();
        let d = s.decide(
            1,
            &sel,
            &[child(2, Some(0.6), Some(cell(1, 0, 0)))],
            &mut WithinNoise,
        );
        assert!(d.kept(2), "it fills an empty cell");
        assert_eq!(s.best().id, 1);
        assert!(!d.improved, "the best was rescored, not replaced");
    }

    /// An archive with cells of scores 0.1, 0.2, ... 0.6.
    fn filled(config: MapElitesConfig) -> MapElites {
        let mut s = start(config);
        let sel = s.select();
        let batch: Vec<Scored> = (0..6)
            .map(|k| {
                child(
                    10 + k,
                    Some(0.1 * (k + 1) as f64),
                    Some(cell(k as u8 % 4, k as u8 / 4, 1)),
                )
            })
            .collect();
        s.decide_strictly(1, &sel, &batch);
        s
    }

    #[test]
    fn the_prompt_context_is_the_top_elites_and_other_cells() {
        let mut s = filled(MapElitesConfig {
            elites_shown: 2,
            inspirations: 2,
            ..Default::default()
        });
        for _ in 0..20 {
            let sel = s.select();
            let mut scores: Vec<(i64, f64)> = s
                .cells()
                .map(|c| (c.elite.id, c.elite.score))
                .filter(|(id, _)| *id != sel.parent)
                .collect();
            scores.sort_by(|a, b| b.1.total_cmp(&a.1));
            let top: Vec<i64> = scores.iter().take(2).map(|(id, _)| *id).collect();
            assert_eq!(sel.elites, top);
            assert_eq!(sel.inspirations.len(), 2);
            for i in &sel.inspirations {
                assert!(*i != sel.parent && !sel.elites.contains(i), "{sel:?}");
            }
        }
    }

    #[test]
    fn each_selection_rule_draws_as_it_says() {
        let only = |uniform, fitness, curiosity, island| MapElitesConfig {
            selection: SelectionMix {
                uniform,
                fitness,
                curiosity,
                island,
            },
            ..Default::default()
        };
        // Fitness: the 0.6 cell about six times as often as the 0.1 cell.
        let mut s = filled(only(0.0, 1.0, 0.0, 0.0));
        let mut counts = BTreeMap::new();
        for _ in 0..4000 {
            let sel = s.select();
            assert_eq!(sel.how, "fitness");
            *counts.entry(sel.parent).or_insert(0usize) += 1;
        }
        let ratio = counts[&15] as f64 / counts[&10] as f64;
        assert!((4.5..7.5).contains(&ratio), "{counts:?}");

        // Curiosity: a cell whose children keep failing is drawn less
        // than the untried ones.
        let mut s = filled(only(0.0, 0.0, 1.0, 0.0));
        let failing = cell(3, 0, 1);
        let parent = s.cells().find(|c| c.cell == failing).unwrap().elite.id;
        let sel = Selection {
            parent,
            cell: Some(failing),
            island: Some(0),
            ..s.select()
        };
        for k in 0..6 {
            s.decide_strictly(2 + k, &sel, &[child(100 + k as i64, None, None)]);
        }
        assert!(s.curiosity(&failing) < 0.5 && s.curiosity(&cell(0, 0, 1)) == 1.0);
        let drawn = (0..3000).filter(|_| s.select().parent == parent).count();
        assert!(drawn < 3000 / 7 / 2, "{drawn}");

        // Island: every island in turn; an island without an elite starts
        // from the seed, and a child joins its parent's island.
        let mut s = start(only(0.0, 0.0, 0.0, 1.0));
        let sel0 = s.select();
        assert_eq!((sel0.island, sel0.parent), (Some(0), 1));
        let sel1 = s.select();
        assert_eq!((sel1.island, sel1.parent), (Some(1), 1));
        s.decide_strictly(1, &sel1, &[child(2, Some(0.6), Some(cell(1, 0, 0)))]);
        assert_eq!(s.cells().find(|c| c.elite.id == 2).unwrap().island, 1);
        let picks: Vec<(u32, i64)> = (0..4)
            .map(|_| {
                let sel = s.select();
                (sel.island.unwrap(), sel.parent)
            })
            .collect();
        assert_eq!(picks, [(2, 1), (3, 1), (0, 1), (1, 2)]);
    }

    #[test]
    fn hints_follow_the_directions_that_improved_and_else_point_to_empty_cells() {
        let mut s = start(MapElitesConfig::default());
        let sel = s.select();
        // Nothing learned yet: the empty neighbours, upward moves first.
        assert_eq!(sel.hints.len(), 2);
        for h in &sel.hints {
            assert_eq!(h.reason, HintReason::Unexplored);
            assert_eq!(h.level, 1, "{h:?}");
        }
        // Tiling improved by 60%, a coordination move failed.
        s.decide_strictly(
            1,
            &sel,
            &[
                child(2, Some(0.8), Some(cell(2, 0, 0))),
                child(3, None, Some(cell(0, 0, 1))),
            ],
        );
        let hints = s.hints(&cell(0, 0, 0));
        assert_eq!((hints[0].axis, hints[0].level), (Axis::Memory, 2));
        assert!(matches!(hints[0].reason, HintReason::Improved { gradient } if gradient > 0.5));
        assert_eq!((hints[1].axis, hints[1].level), (Axis::Coordination, 1));
        assert!(
            matches!(hints[1].reason, HintReason::Worse { change } if change < -0.5),
            "the failed move is reported as what it was: {hints:?}"
        );
    }

    #[test]
    fn a_move_that_got_slower_never_reads_as_an_improvement() {
        // The parent is vectorised; its child tiled and got slower.
        let mut s = MapElites::new(
            MapElitesConfig::default(),
            Elite { id: 1, score: 0.5 },
            cell(1, 0, 0),
        );
        let sel = s.select();
        s.decide_strictly(1, &sel, &[child(2, Some(0.3), Some(cell(2, 0, 0)))]);
        let hints = s.hints(&cell(1, 0, 0));
        assert_eq!(hints.len(), 2, "{hints:?}");
        assert_eq!((hints[0].axis, hints[0].level), (Axis::Memory, 2));
        assert!(matches!(hints[0].reason, HintReason::Worse { change } if change < 0.0));
        for h in &hints[1..] {
            assert_eq!(h.reason, HintReason::Unexplored, "no data for it: {h:?}");
            assert_ne!(
                (h.axis, h.level),
                (Axis::Memory, 2),
                "not where it got slower"
            );
        }
        // Only a child that moved down and improved supports moving down.
        assert!(!hints.iter().any(|h| h.axis == Axis::Memory
            && h.level == 0
            && matches!(h.reason, HintReason::Improved { .. })));
        s.decide_strictly(2, &sel, &[child(3, Some(0.6), Some(cell(0, 0, 0)))]);
        let hints = s.hints(&cell(1, 0, 0));
        assert_eq!((hints[0].axis, hints[0].level), (Axis::Memory, 0));
        assert!(matches!(hints[0].reason, HintReason::Improved { gradient } if gradient > 0.0));
        for h in &hints {
            assert!(h.level < kevo_descriptors::LEVELS, "{h:?}");
            if let HintReason::Improved { gradient } = h.reason {
                assert!(gradient > 0.0, "{h:?}");
            }
        }
    }

    #[test]
    fn hints_stored_before_the_worse_reason_still_load() {
        let old = r#"{"axis":"memory","level":0,"reason":{"kind":"improved","gradient":-0.4}}"#;
        let hint: Hint = serde_json::from_str(old).unwrap();
        assert_eq!(hint.reason, HintReason::Improved { gradient: -0.4 });
        let unexplored = r#"{"axis":"algorithm","level":1,"reason":{"kind":"unexplored"}}"#;
        assert!(serde_json::from_str::<Hint>(unexplored).is_ok());
        let worse = Hint {
            axis: Axis::Memory,
            level: 2,
            reason: HintReason::Worse { change: -0.4 },
        };
        let text = serde_json::to_string(&worse).unwrap();
        assert_eq!(serde_json::from_str::<Hint>(&text).unwrap(), worse);
    }

    #[test]
    fn a_restored_archive_selects_and_decides_as_the_original() {
        let mut a = filled(MapElitesConfig {
            rng_seed: 42,
            ..Default::default()
        });
        for k in 0..5 {
            let sel = a.select();
            a.decide_strictly(
                2 + k,
                &sel,
                &[child(
                    50 + k as i64,
                    Some(0.05 * k as f64 + 0.3),
                    Some(cell(1, k as u8 % 4, 2)),
                )],
            );
        }
        let mut b: MapElites = serde_json::from_value(a.state()).unwrap();
        assert_eq!(a, b);
        for k in 0..10 {
            let (sa, sb) = (a.select(), b.select());
            assert_eq!(sa, sb);
            let batch = [child(
                200 + k,
                Some(0.01 * k as f64),
                Some(cell(3, 1, (k % 4) as u8)),
            )];
            assert_eq!(
                a.decide_strictly(10 + k as u32, &sa, &batch),
                b.decide_strictly(10 + k as u32, &sb, &batch)
            );
        }
        assert_eq!(a, b);
    }

    #[test]
    fn the_transition_buffer_is_bounded() {
        let mut s = start(MapElitesConfig {
            transitions: 3,
            ..Default::default()
        });
        for k in 0..10 {
            let sel = s.select();
            s.decide_strictly(k + 1, &sel, &[child(10 + k as i64, None, None)]);
        }
        let its: Vec<u32> = s.transitions().map(|t| t.iteration).collect();
        assert_eq!(its, [8, 9, 10]);
    }

    #[test]
    fn selection_mixes_parse_with_named_errors() {
        let m = SelectionMix::parse("uniform=1, curiosity=3").unwrap();
        assert_eq!(
            (m.uniform, m.fitness, m.curiosity, m.island),
            (1.0, 0.0, 3.0, 0.0)
        );
        for (text, says) in [
            ("greedy=1", "`greedy` is not a selection rule"),
            ("uniform", "expected RULE=WEIGHT"),
            ("uniform=x", "not a number"),
            ("uniform=-1", "not negative"),
            ("uniform=0", "positive weight"),
        ] {
            let e = SelectionMix::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
