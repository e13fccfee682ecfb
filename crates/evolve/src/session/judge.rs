//! Judging a batch: strict or noise-aware promotion, re-measurement of
//! challengers, validation, and the judges that replay and record decisions.

use std::collections::HashMap;
use std::time::Duration;

use kevo_proposer::step_outcome;
use kevo_store::{CandidateId, CandidateRef, NewValidation};
use kevo_strategy::{
    Elite, Judge, Judgement, NoiseAwareJudge, Promotion, Scored, Selection, Strategy, StrictJudge,
};

use super::base::Session;
use super::error::EvolveError;
use super::values::{Duplicate, Tried, TriedResult};
use crate::Interleaved;

pub(super) fn provisional_id(proposal: usize) -> i64 {
    -(proposal as i64) - 1
}

/// The batch a strategy will decide on, under provisional ids, in
/// proposal order: the same candidates, scores and duplicates as the
/// batch built once the store has given ids.
pub(super) fn provisional_batch(tried: &[Tried]) -> Vec<Scored> {
    tried
        .iter()
        .enumerate()
        .filter_map(|(j, t)| match &t.result {
            TriedResult::Evaluated(e) => Some(Scored {
                id: provisional_id(j),
                score: e.evaluation.outcome.score(),
                outcome: step_outcome(&e.evaluation.outcome),
                descriptors: e.descriptors,
                duplicate_of: e.duplicate.map(|d| match d {
                    Duplicate::Stored(id) => id,
                    Duplicate::InBatch(i) => provisional_id(i),
                }),
            }),
            TriedResult::Nothing { .. } => None,
        })
        .collect()
}

/// What the noise-aware rule found about an iteration's batch: every
/// judgement the strategy asked for, by (challenger, holder) under
/// provisional ids, and the re-measurements made for them.
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

/// Answers a strategy's questions from a table judged beforehand (the
/// strategy asks the same questions again once the candidates have ids).
pub(super) struct ReplayJudge<'a> {
    pub(super) table: &'a HashMap<(i64, i64), Judgement>,
    pub(super) provisional_of: &'a HashMap<i64, i64>,
}

impl Judge for ReplayJudge<'_> {
    fn judge(&mut self, challenger: Elite, holder: Elite) -> Judgement {
        let p = |id: i64| self.provisional_of.get(&id).copied().unwrap_or(id);
        match self.table.get(&(p(challenger.id), p(holder.id))) {
            Some(j) => j.clone(),
            // The strategy decides the same way twice, so this is not
            // reached; if it were, nothing unmeasured is promoted.
            None => Judgement {
                better: false,
                challenger_score: challenger.score,
                holder_score: holder.score,
                note: Some("not re-measured, not promoted".into()),
            },
        }
    }
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

    /// The provisional ids a copy of the strategy keeps from `batch`,
    /// deciding as the real decision will: on `judged`'s answers under the
    /// noise-aware rule, strictly otherwise.
    pub(super) fn probe_kept(
        &self,
        k: u32,
        selection: &Selection,
        batch: &[Scored],
        judged: Option<&Judged>,
    ) -> Result<Vec<i64>, EvolveError> {
        if batch.iter().all(|c| c.score.is_none()) {
            return Ok(Vec::new());
        }
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let mut probe = kevo_strategy::restore(strategy.name(), &strategy.state())?;
        let same = HashMap::new();
        let decision = match judged {
            None => probe.decide(k, selection, batch, &mut StrictJudge),
            Some(j) => probe.decide(
                k,
                selection,
                batch,
                &mut ReplayJudge {
                    table: &j.table,
                    provisional_of: &same,
                },
            ),
        };
        Ok(decision
            .placements
            .iter()
            .filter(|p| p.kept)
            .map(|p| p.id)
            .collect())
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

    /// Under the noise-aware rule, decide `batch` once on a copy of the
    /// strategy, re-measuring every challenger that appears better than
    /// what it would replace; the answers are replayed when the strategy
    /// decides for real. None under the strict rule.
    pub(super) async fn judge_batch(
        &mut self,
        k: u32,
        selection: &Selection,
        batch: &[Scored],
        tried: &[Tried],
        prior: Option<Judged>,
    ) -> Result<Option<Judged>, EvolveError> {
        let Promotion::NoiseAware { rounds } = self.options.promotion else {
            return Ok(None);
        };
        let Judged {
            mut table,
            mut measured,
        } = prior.unwrap_or_default();
        let already = measured.len();
        if batch.iter().all(|c| c.score.is_none()) {
            return Ok(Some(Judged { table, measured }));
        }
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let held: Vec<i64> = held_ids(strategy);
        let mut probe = kevo_strategy::restore(strategy.name(), &strategy.state())?;
        for id in &held {
            self.load(CandidateId(*id)).await?;
        }
        // The queue of a distributed run failing mid-judgement: the
        // decision is abandoned and the error returned.
        let mut unreachable: Option<EvolveError> = None;
        // Holders are gated by their single first evaluation, as the
        // challengers are by theirs.
        let first_score: HashMap<i64, f64> = held
            .iter()
            .filter_map(|id| Some((*id, self.evaluations.get(id)?.outcome.score()?)))
            .collect();
        {
            let mut judge = RecordingJudge {
                inner: NoiseAwareJudge {
                    first_score,
                    measure: |c: Elite, h: Elite| {
                        // A provisional id is a proposal of `tried`; any
                        // other is held by the strategy, loaded above.
                        let source = |s: &Self, id: i64| match id {
                            p if p < 0 => tried[(-p - 1) as usize]
                                .candidate()
                                .map(|c| c.source.clone())
                                .unwrap_or_default(),
                            id => s.sources[&id].clone(),
                        };
                        let (a, b) = (source(self, c.id), source(self, h.id));
                        let m = match self.remeasure(&[&a, &b], rounds) {
                            Ok(m) => m,
                            Err(e) => {
                                unreachable.get_or_insert(e);
                                return Interleaved::default().pair([c.id, h.id]);
                            }
                        };
                        let pair = m.pair([c.id, h.id]);
                        measured.push(Measured {
                            challenger: c.id,
                            holder: h.id,
                            interleaved: m,
                            verdict: String::new(),
                        });
                        pair
                    },
                },
                table: &mut table,
            };
            probe.decide(k, selection, batch, &mut judge);
        }
        if let Some(e) = unreachable {
            return Err(e);
        }
        for m in &mut measured[already..] {
            m.verdict = table
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
        Ok(Some(Judged { table, measured }))
    }
}
