//! Search strategies decide what to keep and what the proposer sees next.
//! They see in-distribution scores only: held-out results never reach
//! them.
//!
//! A session drives a [`Strategy`] the same way whatever it is: before an
//! iteration it asks for a [`Selection`] (the parent, the elites and
//! inspirations to show, hints); the strategy decides once on the
//! iteration's evaluated candidates ([`Strategy::decide`]), under
//! provisional ids; the store records the candidates and assigns their
//! ids, the strategy takes them ([`Strategy::rename`]), and its whole
//! state ([`Strategy::state`], random generator included) is stored with
//! the checkpoint in the same transaction, so a run killed at any point
//! resumes exactly ([`restore`]).
//!
//! - [`OnePlusOne`]: Metal-Sci's Algorithm 1, one incumbent.
//! - [`MapElites`]: KernelFoundry's archive over kernel descriptors.
//! - [`Islands`]: populations with ring migration.

mod history;
mod islands;
mod map_elites;
mod one_plus_one;
pub mod promotion;
mod rng;

pub use history::{HistoryEntry, StepOutcome};
pub use islands::{Islands, IslandsConfig, Member};
pub use map_elites::{
    CellElite, MapElites, MapElitesConfig, SelectionMix, Transition, TransitionOutcome,
};
pub use one_plus_one::OnePlusOne;
pub use promotion::{
    Judge, Judgement, NoiseAwareJudge, PairedGain, Promotion, Remeasured, StrictJudge,
};
pub use rng::Rng;

pub use kevo_descriptors::{Axis, Descriptors, LEVELS};
use serde::{Deserialize, Serialize};

/// What the strategy needs to know about one evaluated, stored candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    /// The store's id of the candidate.
    pub id: i64,
    /// Score on the in-distribution sizes; None unless every size was correct.
    pub score: Option<f64>,
    pub outcome: StepOutcome,
    /// Its cell, when its source could be analysed.
    #[serde(default)]
    pub descriptors: Option<Descriptors>,
    /// Its source repeats this earlier candidate's (up to comments and
    /// whitespace): it was not evaluated again, and no strategy keeps it.
    #[serde(default)]
    pub duplicate_of: Option<i64>,
}

impl Scored {
    /// The same candidate under the ids `to` gives.
    pub fn renamed(&self, to: &dyn Fn(i64) -> i64) -> Scored {
        Scored {
            id: to(self.id),
            duplicate_of: self.duplicate_of.map(to),
            ..self.clone()
        }
    }

    /// The reason a duplicate is not kept.
    pub fn duplicate_reason(&self) -> Option<String> {
        self.duplicate_of
            .map(|of| format!("duplicate of candidate {of}: not evaluated again, not kept"))
    }
}

/// A candidate the search holds with its score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Elite {
    pub id: i64,
    pub score: f64,
}

/// Why a hint is given.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum HintReason {
    /// Children of the parent's cell that reached this level improved:
    /// the decayed sum of their fitness changes, positive. (Hints stored
    /// before this held a signed sum per direction; a negative one only
    /// said that the other way did better or this way did worse.)
    Improved { gradient: f64 },
    /// The neighbouring cell this way is empty.
    Unexplored,
    /// Children that reached this level did worse (slower or incorrect):
    /// the decayed sum of their fitness changes, negative. A report, not
    /// a suggestion.
    Worse { change: f64 },
}

/// A place in descriptor space, `level` on `axis`, and what the search
/// knows of it: worth trying (improved, unexplored) or not (worse).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Hint {
    pub axis: Axis,
    pub level: u8,
    pub reason: HintReason,
}

/// What the next proposals are built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The candidate the proposals improve on (recorded as their parent).
    pub parent: i64,
    /// The parent's island; children join it.
    pub island: Option<u32>,
    /// The parent's cell (MAP-Elites).
    pub cell: Option<Descriptors>,
    /// Other elites shown to the proposer, best first.
    pub elites: Vec<i64>,
    /// Elites of other cells or islands shown for diversity.
    pub inspirations: Vec<i64>,
    pub hints: Vec<Hint>,
    /// The last candidate proposed from this parent, if any: shown as
    /// "your previous attempt".
    pub previous: Option<i64>,
    /// The rule that chose the parent ("incumbent", "curiosity", ...).
    pub how: String,
}

/// What became of one candidate of a decided batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    pub id: i64,
    /// Entered the search's population (promoted, inserted, joined).
    pub kept: bool,
    pub island: Option<u32>,
    pub cell: Option<Descriptors>,
    pub reason: String,
}

/// The decision on one iteration's batch: a placement per candidate, in
/// batch order, and the best candidate after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub placements: Vec<Placement>,
    /// The best candidate changed.
    pub improved: bool,
    pub best: Elite,
}

impl Decision {
    /// Whether candidate `id` of the decided batch was kept.
    pub fn kept(&self, id: i64) -> bool {
        self.placement(id).is_some_and(|p| p.kept)
    }

    pub fn placement(&self, id: i64) -> Option<&Placement> {
        self.placements.iter().find(|p| p.id == id)
    }

    /// Whether any candidate was kept.
    pub fn any_kept(&self) -> bool {
        self.placements.iter().any(|p| p.kept)
    }

    /// The decision on `batch` under the ids `to` gives (see
    /// [`Strategy::rename`]). A duplicate's reason names the candidate it
    /// repeats, so it is written again under the new id.
    pub fn rename(&mut self, to: &dyn Fn(i64) -> i64, batch: &[Scored]) {
        for p in &mut self.placements {
            let duplicate = batch.iter().find(|c| c.id == p.id);
            if let Some(reason) = duplicate.and_then(|c| c.renamed(to).duplicate_reason()) {
                p.reason = reason;
            }
            p.id = to(p.id);
        }
        self.best.id = to(self.best.id);
    }
}

/// A strategy's population as `kevo show` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "elites")]
pub enum Archive {
    Incumbent(Elite),
    /// One elite per occupied cell.
    Grid(Vec<CellElite>),
    /// Each island's members, best first.
    Islands(Vec<Vec<Elite>>),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StrategyError {
    /// A search needs something to beat.
    #[error("the seed is not correct ({outcome}); a search needs a correct seed")]
    SeedNotCorrect { outcome: StepOutcome },
    #[error("`{name}` is not a strategy (one-plus-one, map-elites, islands)")]
    Unknown { name: String },
    #[error("the stored state of strategy {name} is unreadable: {reason}")]
    State { name: String, reason: String },
    #[error("strategy setting `{setting}`: {reason}")]
    Setting { setting: String, reason: String },
}

/// A search strategy as a session drives it. Ids are the store's
/// candidate ids, except those of a batch being decided, which are
/// provisional until [`Strategy::rename`] gives them the stored ones.
pub trait Strategy: Send {
    /// The name stored with the run: "one_plus_one", "map_elites", "islands".
    fn name(&self) -> &'static str;
    /// The seed the search started from (the baseline of its speedup).
    fn seed(&self) -> Elite;
    /// The best candidate so far: the winner if the run stopped now.
    fn best(&self) -> Elite;
    /// Choose the parent and context of the next proposals. May draw
    /// random numbers: call it once per iteration, after the last
    /// checkpoint's state.
    fn select(&mut self) -> Selection;
    /// Decide on one iteration's evaluated candidates, proposed from
    /// `selection`, in proposal order; `batch` is never empty. Every
    /// replacement, and every new best, is the `judge`'s call.
    fn decide(
        &mut self,
        iteration: u32,
        selection: &Selection,
        batch: &[Scored],
        judge: &mut dyn Judge,
    ) -> Decision;
    /// Everything needed to continue exactly, random generator included.
    fn state(&self) -> serde_json::Value;
    fn archive(&self) -> Archive;
    /// Give every candidate id the strategy holds its new name. A session
    /// decides a batch before the store has given its candidates ids, on
    /// provisional ones, and renames them here once it has; `to` maps
    /// every other id to itself. No decision depends on an id's value, so
    /// deciding then renaming leaves the state deciding on the stored ids
    /// would have.
    fn rename(&mut self, to: &dyn Fn(i64) -> i64);

    /// Improvement of the best candidate over the seed, measured in this
    /// session.
    fn speedup(&self) -> f64 {
        self.best().score / self.seed().score
    }
}

/// A strategy and its settings, as given on the command line or in a run
/// configuration, and stored with the run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum StrategyConfig {
    #[default]
    OnePlusOne,
    MapElites(MapElitesConfig),
    Islands(IslandsConfig),
}

impl StrategyConfig {
    /// The name stored with a run of this strategy.
    pub fn stored_name(&self) -> &'static str {
        match self {
            StrategyConfig::OnePlusOne => OnePlusOne::NAME,
            StrategyConfig::MapElites(_) => MapElites::NAME,
            StrategyConfig::Islands(_) => Islands::NAME,
        }
    }

    /// From the command line's name (one-plus-one, map-elites, islands).
    pub fn named(name: &str) -> Result<StrategyConfig, StrategyError> {
        match name {
            "one-plus-one" | "one_plus_one" | "1+1" => Ok(StrategyConfig::OnePlusOne),
            "map-elites" | "map_elites" => Ok(StrategyConfig::MapElites(Default::default())),
            "islands" => Ok(StrategyConfig::Islands(Default::default())),
            other => Err(StrategyError::Unknown {
                name: other.to_string(),
            }),
        }
    }

    /// Whether this strategy places candidates by their descriptors.
    pub fn needs_descriptors(&self) -> bool {
        matches!(self, StrategyConfig::MapElites(_))
    }

    /// Start the configured strategy from an evaluated, stored seed. A
    /// seed without a score cannot start a search: there is nothing to
    /// beat.
    pub fn start(&self, seed: &Scored) -> Result<Box<dyn Strategy>, StrategyError> {
        let score = seed.score.ok_or(StrategyError::SeedNotCorrect {
            outcome: seed.outcome,
        })?;
        let elite = Elite { id: seed.id, score };
        Ok(match self {
            StrategyConfig::OnePlusOne => Box::new(OnePlusOne::starting_at(elite)),
            StrategyConfig::MapElites(c) => Box::new(MapElites::new(
                c.clone(),
                elite,
                seed.descriptors.unwrap_or_default(),
            )),
            StrategyConfig::Islands(c) => Box::new(Islands::new(c.clone(), elite)),
        })
    }
}

/// Rebuild a strategy from the state it stored ([`Strategy::state`]).
pub fn restore(name: &str, state: &serde_json::Value) -> Result<Box<dyn Strategy>, StrategyError> {
    fn load<T: serde::de::DeserializeOwned>(
        name: &str,
        state: &serde_json::Value,
    ) -> Result<T, StrategyError> {
        serde_json::from_value(state.clone()).map_err(|e| StrategyError::State {
            name: name.to_string(),
            reason: e.to_string(),
        })
    }
    Ok(match name {
        OnePlusOne::NAME => Box::new(load::<OnePlusOne>(name, state)?),
        MapElites::NAME => Box::new(load::<MapElites>(name, state)?),
        Islands::NAME => Box::new(load::<Islands>(name, state)?),
        other => {
            return Err(StrategyError::Unknown {
                name: other.to_string(),
            });
        }
    })
}

/// A kept candidate that appears better than the best so far, judged
/// against it: `rescore` gives both their judged scores wherever the
/// strategy holds them. Returns the best after it; the judge's note is
/// appended to `reason`.
pub(crate) fn contest_best(
    judge: &mut dyn Judge,
    challenger: Elite,
    best: Elite,
    reason: &mut String,
    mut rescore: impl FnMut(i64, f64),
) -> Elite {
    let j = judge.judge(challenger, best);
    rescore(best.id, j.holder_score);
    if let Some(note) = &j.note {
        reason.push_str(&format!("; against the best so far: {note}"));
    }
    if j.better {
        rescore(challenger.id, j.challenger_score);
        Elite {
            id: challenger.id,
            score: j.challenger_score,
        }
    } else {
        Elite {
            score: j.holder_score,
            ..best
        }
    }
}

/// The candidate of a batch shown next as "your previous attempt": the
/// best scored one, else the last.
pub(crate) fn shown_next(batch: &[Scored]) -> Option<i64> {
    best_of(batch)
        .map(|(id, _)| id)
        .or(batch.last().map(|c| c.id))
}

/// The batch's best defined score among candidates that are not
/// duplicates; ties go to the earlier proposal.
pub(crate) fn best_of(batch: &[Scored]) -> Option<(i64, f64)> {
    batch
        .iter()
        .filter(|c| c.duplicate_of.is_none())
        .filter_map(|c| c.score.filter(|s| s.is_finite()).map(|s| (c.id, s)))
        .fold(None::<(i64, f64)>, |best, c| match best {
            Some(b) if b.1 >= c.1 => Some(b),
            _ => Some(c),
        })
}

/// [`Strategy::decide`] under Metal-Sci's strict rule, for tests.
#[cfg(test)]
pub(crate) trait DecideStrictly {
    fn decide_strictly(
        &mut self,
        iteration: u32,
        selection: &Selection,
        batch: &[Scored],
    ) -> Decision;
}

#[cfg(test)]
impl<S: Strategy + ?Sized> DecideStrictly for S {
    fn decide_strictly(
        &mut self,
        iteration: u32,
        selection: &Selection,
        batch: &[Scored],
    ) -> Decision {
        self.decide(iteration, selection, batch, &mut StrictJudge)
    }
}

/// A scored candidate for the strategies' tests: correct with a score,
/// wrong without one.
#[cfg(test)]
pub(crate) fn scored(id: i64, score: Option<f64>, descriptors: Option<Descriptors>) -> Scored {
    Scored {
        id,
        score,
        outcome: if score.is_some() {
            StepOutcome::Correct
        } else {
            StepOutcome::WrongResult
        },
        descriptors,
        duplicate_of: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(descriptors: Option<Descriptors>) -> Scored {
        Scored {
            id: 1,
            score: Some(0.5),
            outcome: StepOutcome::Correct,
            descriptors,
            duplicate_of: None,
        }
    }

    #[test]
    fn every_strategy_starts_from_a_correct_seed_and_restores_by_name() {
        for name in ["one-plus-one", "map-elites", "islands"] {
            let config = StrategyConfig::named(name).unwrap();
            let mut s = config
                .start(&seed(Some(Descriptors::new(1, 0, 0))))
                .unwrap();
            assert_eq!(s.name(), config.stored_name());
            assert_eq!(
                (s.seed(), s.best()),
                (Elite { id: 1, score: 0.5 }, Elite { id: 1, score: 0.5 })
            );
            let sel = s.select();
            assert_eq!(sel.parent, 1);
            let batch = [Scored {
                id: 2,
                score: Some(0.75),
                outcome: StepOutcome::Correct,
                descriptors: Some(Descriptors::new(2, 0, 0)),
                duplicate_of: None,
            }];
            let d = s.decide(1, &sel, &batch, &mut StrictJudge);
            assert!(d.kept(2) && d.improved && d.best.id == 2, "{name}: {d:?}");
            assert!((s.speedup() - 1.5).abs() < 1e-12);
            let mut back = restore(s.name(), &s.state()).unwrap();
            assert_eq!(back.state(), s.state(), "{name}");
            assert_eq!(back.select(), s.select(), "{name}");
            assert_eq!(back.archive(), s.archive());
        }
    }

    #[test]
    fn no_strategy_keeps_a_duplicate() {
        for name in ["one-plus-one", "map-elites", "islands"] {
            let mut s = StrategyConfig::named(name)
                .unwrap()
                .start(&seed(Some(Descriptors::new(0, 0, 0))))
                .unwrap();
            let sel = s.select();
            let repeat = Scored {
                id: 2,
                score: Some(0.9),
                outcome: StepOutcome::Correct,
                descriptors: Some(Descriptors::new(1, 0, 0)),
                duplicate_of: Some(1),
            };
            let d = s.decide(1, &sel, &[repeat], &mut StrictJudge);
            assert!(!d.kept(2) && !d.improved, "{name}: {d:?}");
            assert_eq!(
                d.placements[0].reason, "duplicate of candidate 1: not evaluated again, not kept",
                "{name}"
            );
        }
    }

    #[test]
    fn bad_names_states_and_seeds_are_named_errors() {
        let e = StrategyConfig::named("greedy").unwrap_err();
        assert_eq!(
            e.to_string(),
            "`greedy` is not a strategy (one-plus-one, map-elites, islands)"
        );
        let e = restore("map_elites", &serde_json::json!({"cells": 3}))
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .starts_with("the stored state of strategy map_elites is unreadable"),
            "{e}"
        );
        let incorrect = Scored {
            score: None,
            outcome: StepOutcome::WrongResult,
            ..seed(None)
        };
        let e = StrategyConfig::OnePlusOne.start(&incorrect).err().unwrap();
        assert_eq!(
            e,
            StrategyError::SeedNotCorrect {
                outcome: StepOutcome::WrongResult
            }
        );
        assert!(e.to_string().contains("not correct (wrong_result)"), "{e}");
    }

    #[test]
    fn a_config_round_trips_with_its_settings() {
        let config = StrategyConfig::MapElites(MapElitesConfig {
            islands: 2,
            rng_seed: 7,
            ..Default::default()
        });
        let json = serde_json::to_value(&config).unwrap();
        assert_eq!(json["name"], "map-elites");
        assert_eq!(
            serde_json::from_value::<StrategyConfig>(json).unwrap(),
            config
        );
        let partial: StrategyConfig =
            serde_json::from_value(serde_json::json!({"name": "islands", "islands": 3})).unwrap();
        assert_eq!(
            partial,
            StrategyConfig::Islands(IslandsConfig {
                islands: 3,
                ..Default::default()
            })
        );
        assert!(
            serde_json::from_value::<StrategyConfig>(
                serde_json::json!({"name": "islands", "island": 3})
            )
            .is_err(),
            "a misspelt setting is refused"
        );
    }
}
