//! Islands (Kernel-Smith, OpenEvolve): N populations evolving apart, each
//! sampled in turn, with the best of each island copied to the next one
//! in a ring every few generations. The rules OpenEvolve got wrong are
//! the contract here: a child lands on its parent's island, every island
//! is sampled, a migrant already on an island is not copied again, and
//! the assignment is part of the checkpoint.

use serde::{Deserialize, Serialize};

use crate::rng::Rng;
use crate::{Decision, Elite, Placement, Scored, Selection, Strategy};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IslandsConfig {
    pub islands: u32,
    /// Members an island keeps at most (the best by score).
    pub population: usize,
    /// Generations between migrations; a generation is one proposal per
    /// island.
    pub migration_interval: u32,
    /// Probability that an island's parent is its best member rather than
    /// any member.
    pub exploit: f64,
    /// Members of the parent's island other than the parent shown, best
    /// first.
    pub elites_shown: usize,
    /// Bests of other islands shown for diversity.
    pub inspirations: usize,
    pub rng_seed: u64,
}

impl Default for IslandsConfig {
    fn default() -> Self {
        IslandsConfig {
            islands: 4,
            population: 8,
            migration_interval: 2,
            exploit: 0.7,
            elites_shown: 3,
            inspirations: 2,
            rng_seed: 0,
        }
    }
}

/// A member of an island; `from` is the island a migrant came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub elite: Elite,
    pub from: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Islands {
    pub config: IslandsConfig,
    rng: Rng,
    seed: Elite,
    best: Elite,
    /// Each island's members, best first.
    islands: Vec<Vec<Member>>,
    /// The island sampled next.
    next: u32,
    /// Iterations decided (a generation is `islands` of them).
    decided: u32,
    /// Migrations done.
    migrations: u32,
    /// The candidate shown next as "your previous attempt": the latest
    /// decided batch's best (else its last), whatever its island, so the
    /// proposer always sees what became of its latest answer. (Stored
    /// before as a last child per parent; that key is ignored.)
    #[serde(default)]
    latest: Option<i64>,
}

impl Islands {
    pub const NAME: &'static str = "islands";

    /// Every island starts from the seed.
    pub fn new(config: IslandsConfig, seed: Elite) -> Self {
        let n = config.islands.max(1) as usize;
        Islands {
            rng: Rng::new(config.rng_seed),
            islands: vec![
                vec![Member {
                    elite: seed,
                    from: None
                }];
                n
            ],
            config,
            seed,
            best: seed,
            next: 0,
            decided: 0,
            migrations: 0,
            latest: None,
        }
    }

    pub fn members(&self, island: u32) -> &[Member] {
        &self.islands[island as usize]
    }

    pub fn count(&self) -> u32 {
        self.islands.len() as u32
    }

    pub fn migrations(&self) -> u32 {
        self.migrations
    }

    /// Insert `m` keeping the island sorted best first and within its
    /// population; false if it is already there or not good enough.
    fn insert(&mut self, island: usize, m: Member) -> bool {
        let cap = self.config.population.max(1);
        let members = &mut self.islands[island];
        if members.iter().any(|x| x.elite.id == m.elite.id) {
            return false;
        }
        if members.len() >= cap
            && members
                .last()
                .is_some_and(|worst| m.elite.score <= worst.elite.score)
        {
            return false;
        }
        let at = members
            .iter()
            .position(|x| m.elite.score > x.elite.score)
            .unwrap_or(members.len());
        members.insert(at, m);
        members.truncate(cap);
        true
    }

    /// Give candidate `id` a re-measured score wherever it is held (every
    /// island, the best so far), keeping each island sorted.
    fn rescore(&mut self, id: i64, score: f64) {
        for members in &mut self.islands {
            for m in members.iter_mut().filter(|m| m.elite.id == id) {
                m.elite.score = score;
            }
            members.sort_by(|a, b| b.elite.score.total_cmp(&a.elite.score));
        }
        if self.best.id == id {
            self.best.score = score;
        }
    }

    /// A child `elite` joining `island`: a full island takes it only if
    /// the judge finds it better than the island's worst member, whom it
    /// displaces. Returns whether it joined and the judge's note.
    fn join(
        &mut self,
        island: usize,
        elite: Elite,
        judge: &mut dyn crate::Judge,
    ) -> (bool, Option<String>) {
        let full = self.islands[island].len() >= self.config.population.max(1);
        let worst = self.islands[island].last().map(|m| m.elite);
        let (elite, note) = match worst {
            Some(worst) if full => {
                if elite.score <= worst.score {
                    return (false, None);
                }
                let j = judge.judge(elite, worst);
                self.rescore(worst.id, j.holder_score);
                if !j.better {
                    return (false, j.note);
                }
                // The judge found it better: the worst member leaves,
                // whatever the two re-measured medians say on their own.
                self.islands[island].retain(|m| m.elite.id != worst.id);
                (
                    Elite {
                        score: j.challenger_score,
                        ..elite
                    },
                    j.note,
                )
            }
            _ => (elite, None),
        };
        let joined = self.insert(island, Member { elite, from: None });
        (joined, note)
    }

    /// Ring migration: each island's best to the next island, unless that
    /// island already holds it. Bests are taken before any is inserted.
    fn migrate(&mut self) {
        let n = self.islands.len();
        let bests: Vec<Elite> = self.islands.iter().map(|i| i[0].elite).collect();
        for (from, best) in bests.into_iter().enumerate() {
            let to = (from + 1) % n;
            if to != from {
                self.insert(
                    to,
                    Member {
                        elite: best,
                        from: Some(from as u32),
                    },
                );
            }
        }
        self.migrations += 1;
    }
}

impl Strategy for Islands {
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
        let island = self.next as usize;
        let members = self.islands[island].clone();
        let (parent, how) = if self.rng.unit() < self.config.exploit {
            (members[0].elite, "island best")
        } else {
            (
                members[self.rng.below(members.len())].elite,
                "island member",
            )
        };
        let elites: Vec<i64> = members
            .iter()
            .map(|m| m.elite.id)
            .filter(|id| *id != parent.id)
            .take(self.config.elites_shown)
            .collect();
        let others: Vec<i64> = self
            .islands
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != island)
            .map(|(_, m)| m[0].elite.id)
            .filter(|id| *id != parent.id && !elites.contains(id))
            .fold(Vec::new(), |mut v, id| {
                if !v.contains(&id) {
                    v.push(id);
                }
                v
            });
        let inspirations = self.rng.sample(&others, self.config.inspirations);
        Selection {
            parent: parent.id,
            island: Some(island as u32),
            cell: None,
            elites,
            inspirations,
            hints: Vec::new(),
            previous: self.latest,
            how: how.into(),
        }
    }

    /// Children join the island they were selected on; after every
    /// island had its turn `migration_interval` times, the ring migrates.
    fn decide(
        &mut self,
        _iteration: u32,
        selection: &Selection,
        batch: &[Scored],
        judge: &mut dyn crate::Judge,
    ) -> Decision {
        let island = selection.island.unwrap_or(self.next).min(self.count() - 1) as usize;
        let before = self.best;
        let mut placements = Vec::with_capacity(batch.len());
        for c in batch {
            let (kept, reason) = match c.score.filter(|s| s.is_finite()) {
                _ if c.duplicate_of.is_some() => (false, c.duplicate_reason().unwrap_or_default()),
                None => (false, format!("no score ({})", c.outcome)),
                Some(s) => {
                    let (kept, note) = self.join(island, Elite { id: c.id, score: s }, judge);
                    let mut reason = if kept {
                        format!("score {s:.4} joins island {island}")
                    } else if note.is_some() {
                        format!("score {s:.4} appeared to beat island {island}'s worst member")
                    } else {
                        format!(
                            "score {s:.4} is below island {island}'s {} members",
                            self.islands[island].len()
                        )
                    };
                    if let Some(note) = note {
                        reason = format!("{reason}; {note}");
                    }
                    let held = self.islands[island]
                        .iter()
                        .find(|m| m.elite.id == c.id)
                        .map(|m| m.elite);
                    if let Some(elite) = held.filter(|e| e.score > self.best.score) {
                        let best = self.best;
                        self.best =
                            crate::contest_best(judge, elite, best, &mut reason, |id, s| {
                                self.rescore(id, s)
                            });
                    }
                    (kept, reason)
                }
            };
            placements.push(Placement {
                id: c.id,
                kept,
                island: Some(island as u32),
                cell: c.descriptors,
                reason,
            });
        }
        if let Some(last) = crate::shown_next(batch) {
            self.latest = Some(last);
        }
        self.decided += 1;
        self.next = (self.next + 1) % self.count();
        let n = self.count();
        let interval = self.config.migration_interval.max(1);
        if n > 1 && self.decided.is_multiple_of(n * interval) {
            self.migrate();
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
        for m in self.islands.iter_mut().flatten() {
            m.elite.id = to(m.elite.id);
        }
        self.latest = self.latest.map(to);
    }

    fn state(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn archive(&self) -> crate::Archive {
        crate::Archive::Islands(
            self.islands
                .iter()
                .map(|m| m.iter().map(|x| x.elite).collect())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DecideStrictly;

    fn child(id: i64, score: Option<f64>) -> Scored {
        crate::scored(id, score, None)
    }

    fn start(config: IslandsConfig) -> Islands {
        Islands::new(config, Elite { id: 1, score: 0.5 })
    }

    #[test]
    fn every_island_is_sampled_in_turn_and_a_child_lands_on_its_parents() {
        let mut s = start(IslandsConfig {
            islands: 3,
            migration_interval: 100,
            ..Default::default()
        });
        let mut seen = Vec::new();
        for k in 0..6 {
            let sel = s.select();
            seen.push(sel.island.unwrap());
            let d = s.decide_strictly(
                k + 1,
                &sel,
                &[child(10 + k as i64, Some(0.6 + 0.01 * k as f64))],
            );
            assert_eq!(d.placements[0].island, sel.island);
            assert!(d.kept(10 + k as i64));
        }
        assert_eq!(seen, [0, 1, 2, 0, 1, 2]);
        // Island k holds the children of iterations k and k + 3 only.
        for island in 0..3u32 {
            let ids: Vec<i64> = s.members(island).iter().map(|m| m.elite.id).collect();
            assert_eq!(
                ids,
                [13 + island as i64, 10 + island as i64, 1],
                "island {island}"
            );
        }
        assert_eq!(s.best().id, 15);
    }

    #[test]
    fn the_ring_migrates_each_best_once_and_never_duplicates() {
        let mut s = start(IslandsConfig {
            islands: 3,
            migration_interval: 1,
            ..Default::default()
        });
        // Generation 1: island 0 gets 0.9, the others nothing new.
        let scores = [Some(0.9), None, None];
        for (k, score) in scores.iter().enumerate() {
            let sel = s.select();
            s.decide_strictly(k as u32 + 1, &sel, &[child(20 + k as i64, *score)]);
        }
        assert_eq!(s.migrations(), 1);
        let ids =
            |s: &Islands, i: u32| -> Vec<i64> { s.members(i).iter().map(|m| m.elite.id).collect() };
        assert_eq!(ids(&s, 1), [20, 1], "island 0's best moved on to island 1");
        assert_eq!(s.members(1)[0].from, Some(0));
        assert_eq!(
            ids(&s, 2),
            [1],
            "island 1's best (the seed) is already there"
        );
        assert_eq!(ids(&s, 0), [20, 1]);
        // Generation 2: nothing new; the migrant goes on to island 2 and
        // is not copied onto island 1 a second time.
        for k in 0..3 {
            let sel = s.select();
            s.decide_strictly(4 + k, &sel, &[child(30 + k as i64, None)]);
        }
        assert_eq!(s.migrations(), 2);
        assert_eq!(ids(&s, 1), [20, 1]);
        assert_eq!(ids(&s, 2), [20, 1]);
        assert_eq!(ids(&s, 0), [20, 1]);
    }

    #[test]
    fn an_island_keeps_its_best_members_and_shows_others_as_inspiration() {
        let mut s = start(IslandsConfig {
            islands: 2,
            population: 2,
            migration_interval: 100,
            exploit: 1.0,
            ..Default::default()
        });
        let sel = s.select();
        let d = s.decide_strictly(
            1,
            &sel,
            &[
                child(2, Some(0.7)),
                child(3, Some(0.6)),
                child(4, Some(0.4)),
            ],
        );
        assert_eq!(
            d.placements.iter().map(|p| p.kept).collect::<Vec<_>>(),
            [true, true, false]
        );
        let ids: Vec<i64> = s.members(0).iter().map(|m| m.elite.id).collect();
        assert_eq!(ids, [2, 3], "the seed fell out of a population of 2");
        let sel = s.select();
        assert_eq!((sel.island, sel.parent), (Some(1), 1));
        assert_eq!(sel.inspirations, [2], "island 0's best");
        let sel = {
            s.decide_strictly(2, &sel, &[child(5, None)]);
            s.select()
        };
        assert_eq!((sel.parent, sel.elites.clone()), (2, vec![3]));
    }

    #[test]
    fn islands_survive_a_restore_exactly() {
        let mut a = start(IslandsConfig {
            rng_seed: 9,
            exploit: 0.3,
            ..Default::default()
        });
        for k in 0..11 {
            let sel = a.select();
            a.decide_strictly(
                k + 1,
                &sel,
                &[child(10 + k as i64, Some(0.3 + 0.05 * (k % 5) as f64))],
            );
        }
        let mut b: Islands = serde_json::from_value(a.state()).unwrap();
        assert_eq!(a, b);
        for k in 0..9 {
            let (sa, sb) = (a.select(), b.select());
            assert_eq!(sa, sb);
            let batch = [child(100 + k, Some(0.1 * (k % 7) as f64))];
            assert_eq!(
                a.decide_strictly(20 + k as u32, &sa, &batch),
                b.decide_strictly(20 + k as u32, &sb, &batch)
            );
        }
        assert_eq!(a, b);
    }
}
