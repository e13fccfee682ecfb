//! Deciding a batch: the strategy decides once, on a copy of itself and
//! under provisional ids, strictly or with challengers re-measured (the
//! noise-aware rule); the validation gate; the ids a decision is made
//! under and their renaming to the store's.

use std::collections::HashMap;
use std::time::Duration;

use kevo_proposer::step_outcome;
use kevo_store::{CandidateId, CandidateRef, NewValidation};
use kevo_strategy::{
    Decision, Elite, Judge, Judgement, NoiseAwareJudge, Promotion, Scored, Selection, Strategy,
    StrictJudge,
};

use super::base::Session;
use super::error::EvolveError;
use super::values::{Duplicate, Tried, TriedResult};
use crate::Interleaved;

/// The strategy's name for a candidate. A strategy names candidates by
/// `i64`, the form its state is checkpointed in; a proposal of this
/// iteration, decided on before the store has given it an id, is named by
/// a negative one until [`stored_id`] renames it.
pub(super) fn strategy_id(candidate: CandidateRef) -> i64 {
    match candidate {
        CandidateRef::Stored(id) => id.0,
        CandidateRef::Proposal(j) => -(j as i64) - 1,
    }
}

/// The candidate a strategy's id names.
pub(super) fn candidate_ref(id: i64) -> CandidateRef {
    match id {
        p if p < 0 => CandidateRef::Proposal((-p - 1) as usize),
        id => CandidateRef::Stored(CandidateId(id)),
    }
}

/// The stored id of the candidate a strategy's id names, once the store
/// has given the iteration's proposals their `ids`.
pub(super) fn stored_id(id: i64, ids: &[Option<CandidateId>]) -> i64 {
    match candidate_ref(id) {
        CandidateRef::Proposal(j) => ids.get(j).copied().flatten().map_or(id, |c| c.0),
        CandidateRef::Stored(c) => c.0,
    }
}

/// The batch the strategy decides on, in proposal order, each proposal
/// under its provisional id.
pub(super) fn provisional_batch(tried: &[Tried]) -> Vec<Scored> {
    tried
        .iter()
        .enumerate()
        .filter_map(|(j, t)| match &t.result {
            TriedResult::Evaluated(e) => Some(Scored {
                id: strategy_id(CandidateRef::Proposal(j)),
                score: e.evaluation.outcome.score(),
                outcome: step_outcome(&e.evaluation.outcome),
                descriptors: e.descriptors,
                duplicate_of: e.duplicate.map(|d| match d {
                    Duplicate::Stored(id) => id,
                    Duplicate::InBatch(i) => strategy_id(CandidateRef::Proposal(i)),
                }),
            }),
            TriedResult::Nothing { .. } => None,
        })
        .collect()
}

/// What the noise-aware rule found about an iteration's batch: every
/// judgement the strategy asked for, by (challenger, holder), and the
/// re-measurements made for them. Kept across the validation gate's
/// rounds, so no pair is measured twice.
#[derive(Default)]
pub(super) struct Judged {
    pub(super) table: HashMap<(i64, i64), Judgement>,
    pub(super) measured: Vec<Measured>,
}

pub(super) struct Measured {
    pub(super) challenger: i64,
    pub(super) holder: i64,
    pub(super) interleaved: Interleaved,
    pub(super) verdict: String,
}

/// A strategy's decision on an iteration's batch, made on a copy of the
/// strategy under provisional ids; the copy becomes the session's
/// strategy once the store has the iteration and the ids are renamed.
pub(super) struct BatchDecision {
    pub(super) strategy: Box<dyn Strategy>,
    /// None when nothing of the batch was evaluated.
    pub(super) decision: Option<Decision>,
    /// The batch decided on, validation rejections without a score.
    pub(super) batch: Vec<Scored>,
    pub(super) judged: Judged,
    pub(super) gate: Gate,
}

/// Records every judgement of an inner judge and asks it once per pair.
pub(super) struct RecordingJudge<'t, J> {
    pub(super) inner: J,
    pub(super) table: &'t mut HashMap<(i64, i64), Judgement>,
}

impl<J: Judge> Judge for RecordingJudge<'_, J> {
    fn judge(&mut self, challenger: Elite, holder: Elite) -> Judgement {
        let key = (challenger.id, holder.id);
        if let Some(j) = self.table.get(&key) {
            return j.clone();
        }
        let j = self.inner.judge(challenger, holder);
        self.table.insert(key, j.clone());
        j
    }
}

/// What the validation gate found in one iteration: the proposals it
/// rejected (by position, with the reason), its evaluations, and the
/// provisional ids it has checked.
#[derive(Default)]
pub(super) struct Gate {
    pub(super) rejected: HashMap<usize, String>,
    pub(super) validations: Vec<NewValidation>,
    pub(super) checked: std::collections::HashSet<i64>,
}

/// Every candidate a strategy holds (its archive, best and seed): those a
/// challenger can be compared with.
pub(super) fn held_ids(strategy: &dyn Strategy) -> Vec<i64> {
    let mut ids: Vec<i64> = match strategy.archive() {
        kevo_strategy::Archive::Incumbent(e) => vec![e.id],
        kevo_strategy::Archive::Grid(cells) => cells.iter().map(|c| c.elite.id).collect(),
        kevo_strategy::Archive::Islands(islands) => {
            islands.iter().flatten().map(|e| e.id).collect()
        }
    };
    ids.extend([strategy.best().id, strategy.seed().id]);
    ids.sort_unstable();
    ids.dedup();
    ids
}

impl<'e> Session<'e> {
    /// What each answered call of this iteration earned its model, told
    /// to the provider (an ensemble choosing by bandit learns from it):
    /// the relative gain of its candidate over the parent it was asked to
    /// improve; 0 for no code, rejected edits, wrong or suspicious
    /// results, a validation rejection, or a duplicate of a kernel this
    /// run already had. Failed calls are the ensemble's to count.
    pub(super) fn reward_models(
        &self,
        selection: &Selection,
        tried: &[Tried],
        rejected: &HashMap<usize, String>,
    ) {
        let parent = self
            .evaluations
            .get(&selection.parent)
            .and_then(|e| e.outcome.score());
        for (j, t) in tried.iter().enumerate() {
            if t.call.response.is_none() {
                continue;
            }
            let reward = match &t.result {
                TriedResult::Evaluated(e)
                    if e.duplicate.is_none() && !rejected.contains_key(&j) =>
                {
                    kevo_proposer::bandit::improvement(e.evaluation.outcome.score(), parent)
                }
                _ => 0.0,
            };
            self.provider
                .reward(&t.call.provider, reward, t.call.cost_usd.unwrap_or(0.0));
        }
    }

    /// Evaluate `sources` together over `rounds` interleaved rounds at the
    /// in-distribution sizes, with the full protocol (checks included); a
    /// candidate that fails a round is not run again.
    pub(super) fn remeasure(
        &mut self,
        sources: &[&str],
        rounds: u32,
    ) -> Result<Interleaved, EvolveError> {
        let sizes = self.sizes();
        let timeout = self.timeout;
        crate::remeasure::interleave(sources, rounds, &mut |source| {
            self.evaluate(source, &sizes, timeout)
        })
    }

    /// The validation gate on one candidate: evaluated at the validation
    /// sizes, it passes when correct there and at most `max_slowdown`
    /// times the seed's time at each. The caller names the candidate.
    pub(super) fn validate(&mut self, source: &str) -> Result<NewValidation, EvolveError> {
        let sizes = self.plan.validation.clone();
        let limit = kevo_worker::timeout_from_seed(
            self.state.validation.seed_wall_s,
            10.0,
            Duration::from_secs(30),
        )
        .max(self.timeout);
        let e = self.evaluate(source, &sizes, limit)?;
        let max = self.options.validation.max_slowdown;
        let verdict = match e.outcome.is_correct() {
            false => Err(format!("at a validation size: {}", e.outcome.summary())),
            true => {
                let ratios: Vec<(&str, f64)> = e
                    .sizes
                    .iter()
                    .filter_map(|s| {
                        let (_, seed) = self
                            .state
                            .validation
                            .seed_times
                            .iter()
                            .find(|(l, _)| *l == s.label)?;
                        Some((s.label.as_str(), s.time.median_s / seed))
                    })
                    .collect();
                let worst = ratios
                    .iter()
                    .copied()
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .unwrap_or(("", 1.0));
                match worst.1 > max || !worst.1.is_finite() {
                    true => Err(format!(
                        "{:.2}x the seed's time at validation size `{}` (at most {max}x allowed)",
                        worst.1, worst.0
                    )),
                    false => Ok(format!(
                        "correct at the validation sizes, at most {:.2}x the seed's time there",
                        worst.1
                    )),
                }
            }
        };
        let (passed, reason) = match verdict {
            Ok(r) => (true, r),
            Err(r) => (false, r),
        };
        Ok(NewValidation {
            candidate: CandidateRef::Proposal(0),
            passed,
            reason,
            device_s: e.wall.device_s,
            wall_s: e.wall.total_s,
            evaluation: e,
        })
    }

    /// The strategy's decision on `batch`, made once on a copy of it.
    /// Under the noise-aware rule every challenger that appears better
    /// than what it would replace is re-measured against it first
    /// (`judged` keeps the answers, so a pair is measured once).
    pub(super) async fn decide_once(
        &mut self,
        k: u32,
        selection: &Selection,
        batch: &[Scored],
        tried: &[Tried],
        judged: &mut Judged,
    ) -> Result<(Box<dyn Strategy>, Option<Decision>), EvolveError> {
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let held: Vec<i64> = held_ids(strategy);
        let mut copy = kevo_strategy::restore(strategy.name(), &strategy.state())?;
        if batch.is_empty() {
            return Ok((copy, None));
        }
        let rounds = match self.options.promotion {
            Promotion::NoiseAware { rounds } if batch.iter().any(|c| c.score.is_some()) => rounds,
            _ => {
                let decision = copy.decide(k, selection, batch, &mut StrictJudge);
                return Ok((copy, Some(decision)));
            }
        };
        for id in &held {
            self.load(CandidateId(*id)).await?;
        }
        let already = judged.measured.len();
        // Holders are gated by their single first evaluation, as the
        // challengers are by theirs.
        let first_score: HashMap<i64, f64> = held
            .iter()
            .filter_map(|id| Some((*id, self.evaluations.get(id)?.outcome.score()?)))
            .collect();
        let decision = self.decide_measuring(tried, first_score, rounds, judged, |judge| {
            copy.decide(k, selection, batch, judge)
        })?;
        for m in &mut judged.measured[already..] {
            m.verdict = judged
                .table
                .get(&(m.challenger, m.holder))
                .and_then(|j| j.note.clone())
                .unwrap_or_default();
            let discarded = m.interleaved.discarded();
            if !discarded.is_empty() {
                m.verdict = format!(
                    "{}; rounds {discarded:?} discarded: faster than the hardware allows",
                    m.verdict
                );
            }
            self.state.remeasure.add(&m.interleaved.spend);
        }
        Ok((copy, Some(decision)))
    }

    /// `decide` under the noise-aware rule: the pairs the strategy asks
    /// about are re-measured over `rounds` interleaved rounds.
    fn decide_measuring(
        &mut self,
        tried: &[Tried],
        first_score: HashMap<i64, f64>,
        rounds: u32,
        judged: &mut Judged,
        decide: impl FnOnce(&mut dyn Judge) -> Decision,
    ) -> Result<Decision, EvolveError> {
        // The queue of a distributed run failing mid-judgement: the
        // decision is abandoned and the error returned.
        let mut unreachable: Option<EvolveError> = None;
        let measured = &mut judged.measured;
        let mut judge = RecordingJudge {
            inner: NoiseAwareJudge {
                first_score,
                measure: |c: Elite, h: Elite| {
                    let source = |s: &Self, id: i64| match candidate_ref(id) {
                        CandidateRef::Proposal(j) => tried[j]
                            .candidate()
                            .map(|c| c.source.clone())
                            .unwrap_or_default(),
                        CandidateRef::Stored(id) => s.sources[&id.0].clone(),
                    };
                    let (a, b) = (source(self, c.id), source(self, h.id));
                    let names = [c.id, h.id].map(|id| match candidate_ref(id) {
                        CandidateRef::Proposal(_) => "this iteration's proposal".to_string(),
                        CandidateRef::Stored(id) => format!("candidate {}", id.0),
                    });
                    let m = match self.remeasure(&[&a, &b], rounds) {
                        Ok(m) => m,
                        Err(e) => {
                            unreachable.get_or_insert(e);
                            return Interleaved::default().pair_named(names);
                        }
                    };
                    let pair = m.pair_named(names);
                    measured.push(Measured {
                        challenger: c.id,
                        holder: h.id,
                        interleaved: m,
                        verdict: String::new(),
                    });
                    pair
                },
            },
            table: &mut judged.table,
        };
        let decision = decide(&mut judge);
        match unreachable {
            Some(e) => Err(e),
            None => Ok(decision),
        }
    }
}
