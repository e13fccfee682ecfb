//! Recording an iteration: the strategy's decision and everything proposed,
//! stored in one transaction.

use std::collections::HashMap;

use kevo_descriptors::Descriptors;
use kevo_proposer::{HistoryEntry, StepOutcome, step_outcome};
use kevo_store::{
    CandidateId, CandidateRef, Checkpoint, Decided, NewDecision, NewRemeasurement, NewValidation,
    Proposed, RemeasurePurpose,
};
use kevo_strategy::{Decision, Scored, Selection, StrictJudge};

use super::base::Session;
use super::error::EvolveError;
use super::events::{Event, Observer, arm_stats};
use super::judge::{Gate, ReplayJudge, provisional_batch, provisional_id};
use super::values::{Duplicate, PromptContext, Tried, TriedResult, normalised_sha};

/// What an iteration's event reports of its decision.
pub(super) struct DecidedIteration {
    pub(super) promoted: bool,
    /// The ensemble members that answered, in proposal order.
    pub(super) models: Vec<String>,
    pub(super) prompt_variant: Option<u32>,
    /// Per proposal, in order.
    pub(super) outcomes: Vec<String>,
    pub(super) scores: Vec<Option<f64>>,
    /// Re-measurement verdicts, in the order they were measured.
    pub(super) verdicts: Vec<String>,
}

impl<'e> Session<'e> {
    /// Stages 4 and 5: the candidates are stored and get their ids, the
    /// strategy decides on those ids, and the decisions, history and
    /// checkpoint are stored with them in one transaction.
    pub(super) async fn decide_and_record(
        &mut self,
        k: u32,
        context: &PromptContext,
        selection: &Selection,
        tried: Vec<Tried>,
    ) -> Result<DecidedIteration, EvolveError> {
        let outcomes = tried.iter().map(Tried::outcome).collect();
        let duplicates: Vec<Option<Duplicate>> = tried
            .iter()
            .map(|t| match &t.result {
                TriedResult::Evaluated(e) => e.duplicate,
                TriedResult::Nothing { .. } => None,
            })
            .collect();
        let cells: Vec<Option<Descriptors>> = tried
            .iter()
            .map(|t| match &t.result {
                TriedResult::Evaluated(e) => e.descriptors,
                TriedResult::Nothing { .. } => None,
            })
            .collect();
        let notes: Vec<Option<String>> = tried
            .iter()
            .map(|t| match &t.result {
                TriedResult::Evaluated(e) => e.note.clone(),
                TriedResult::Nothing { .. } => None,
            })
            .collect();
        let scores = tried.iter().map(Tried::score).collect();
        // The reason shown to the proposer next time when nothing of this
        // iteration could be evaluated (the last one that has a reason).
        let any_candidate = tried.iter().any(|t| t.candidate().is_some());
        let failure = tried.iter().rev().find_map(|t| match &t.result {
            TriedResult::Nothing {
                outcome: StepOutcome::NoCode | StepOutcome::EditRejected,
                reason,
            } => Some(reason.clone()),
            _ => None,
        });
        let failures: Vec<(StepOutcome, String)> = tried
            .iter()
            .filter_map(|t| match &t.result {
                TriedResult::Nothing { outcome, reason } => Some((*outcome, reason.clone())),
                TriedResult::Evaluated(_) => None,
            })
            .collect();
        let mut provisional = provisional_batch(&tried);
        // Judge the batch; with --validate, validate what the strategy
        // would keep and judge again without what failed, until all it
        // keeps has passed (each candidate is validated at most once, and
        // pairs already re-measured are not measured again).
        let mut judged = None;
        let mut gate = Gate::default();
        loop {
            judged = self
                .judge_batch(k, selection, &provisional, &tried, judged.take())
                .await?;
            if !self.options.validation.enabled {
                break;
            }
            let fresh: Vec<i64> = self
                .probe_kept(k, selection, &provisional, judged.as_ref())?
                .into_iter()
                .filter(|id| gate.checked.insert(*id))
                .collect();
            if fresh.is_empty() {
                break;
            }
            let mut rejected_any = false;
            for p in fresh {
                let j = (-p - 1) as usize;
                let source = tried[j]
                    .candidate()
                    .map(|c| c.source.clone())
                    .unwrap_or_default();
                let v = self.validate(&source)?;
                let gate_state = &mut self.state.validation;
                gate_state.checked += 1;
                gate_state.device_s += v.device_s;
                gate_state.wall_s += v.wall_s;
                if !v.passed {
                    gate_state.rejected += 1;
                    rejected_any = true;
                    gate.rejected.insert(j, v.reason.clone());
                    if let Some(c) = provisional.iter_mut().find(|c| c.id == p) {
                        c.score = None;
                        c.outcome = StepOutcome::RejectedByValidation;
                    }
                }
                gate.validations.push(NewValidation {
                    candidate: CandidateRef::Proposal(j),
                    ..v
                });
            }
            if !rejected_any {
                break;
            }
        }
        let rejected = gate.rejected;
        let validations = gate.validations;
        self.reward_models(selection, &tried, &rejected);
        let models: Vec<String> = match self.provider.ensemble_state() {
            Some(_) => tried
                .iter()
                .filter(|t| t.call.response.is_some())
                .map(|t| t.call.provider.clone())
                .collect(),
            None => Vec::new(),
        };
        let proposed: Vec<Proposed> = tried.into_iter().map(Tried::into_proposed).collect();
        let verdicts: Vec<String> = judged
            .iter()
            .flat_map(|j| &j.measured)
            .map(|m| m.verdict.clone())
            .collect();

        let (rng_state, spent) = (self.rng_state(), self.spent());
        let answers = self.answering.take();
        let strategy = self.strategy.as_deref_mut().expect("seed evaluated");
        let state = &mut self.state;
        let mut decision: Option<Decision> = None;
        let env = self.env;
        let ids = env
            .store
            .record_iteration_with(&self.run, k, &proposed, |ids| {
                // Whose duplicate each proposal is, by stored id.
                let duplicate_of = |j: usize| match duplicates[j] {
                    Some(Duplicate::Stored(id)) => Some(id),
                    Some(Duplicate::InBatch(e)) => ids[e].map(|i| i.0),
                    None => None,
                };
                let batch: Vec<Scored> = proposed
                    .iter()
                    .zip(ids)
                    .zip(&cells)
                    .enumerate()
                    .filter_map(|(j, ((p, id), cell))| {
                        let e = &p.evaluation.as_ref()?.evaluation;
                        let (score, outcome) = match rejected.contains_key(&j) {
                            true => (None, StepOutcome::RejectedByValidation),
                            false => (e.outcome.score(), step_outcome(&e.outcome)),
                        };
                        Some(Scored {
                            id: (*id)?.0,
                            score,
                            outcome,
                            descriptors: *cell,
                            duplicate_of: duplicate_of(j),
                        })
                    })
                    .collect();
                // Stored ids back to the provisional ones the batch was
                // judged under.
                let provisional_of: HashMap<i64, i64> = ids
                    .iter()
                    .enumerate()
                    .filter_map(|(j, id)| Some((id.as_ref()?.0, provisional_id(j))))
                    .collect();
                let stored_of = |p: i64| {
                    ids.iter()
                        .enumerate()
                        .find(|(j, _)| provisional_id(*j) == p)
                        .and_then(|(_, id)| id.map(|i| i.0))
                        .unwrap_or(p)
                };
                decision = (!batch.is_empty()).then(|| match &judged {
                    None => strategy.decide(k, selection, &batch, &mut StrictJudge),
                    Some(judged) => strategy.decide(
                        k,
                        selection,
                        &batch,
                        &mut ReplayJudge {
                            table: &judged.table,
                            provisional_of: &provisional_of,
                        },
                    ),
                });
                let remeasurements = judged
                    .iter()
                    .flat_map(|j| &j.measured)
                    .map(|m| NewRemeasurement {
                        purpose: RemeasurePurpose::Promotion,
                        candidates: vec![
                            CandidateId(stored_of(m.challenger)),
                            CandidateId(stored_of(m.holder)),
                        ],
                        verdict: m.verdict.clone(),
                        rounds: serde_json::to_value(&m.interleaved.rounds).unwrap_or_default(),
                        evaluations: m.interleaved.spend.evaluations as u32,
                        device_s: m.interleaved.spend.device_s,
                        wall_s: m.interleaved.spend.wall_s,
                    })
                    .collect();
                // Proposals without a candidate first, then the decided
                // ones, each in proposal order.
                for (outcome, _) in &failures {
                    state
                        .history
                        .push(HistoryEntry::without_candidate(k, *outcome));
                }
                let note_of = |id: i64| {
                    ids.iter()
                        .position(|i| i.is_some_and(|i| i.0 == id))
                        .and_then(|j| notes[j].clone())
                };
                for s in &batch {
                    state.history.push(HistoryEntry {
                        iteration: k,
                        candidate: Some(s.id),
                        outcome: s.outcome,
                        score: s.score,
                        promoted: decision.as_ref().is_some_and(|d| d.kept(s.id)),
                        new_best: Some(
                            decision
                                .as_ref()
                                .is_some_and(|d| d.improved && d.best.id == s.id),
                        ),
                        duplicate_of: s.duplicate_of,
                        note: note_of(s.id),
                    });
                }
                state.previous_failure = if any_candidate { None } else { failure };
                if let (Some(archive), Some(v)) = (&mut state.prompts, context.prompt_variant) {
                    // A duplicate is the variant's answer, not a new kernel
                    // of its: listed, with no fitness.
                    for s in &batch {
                        let fresh = s.duplicate_of.is_none();
                        archive.credit(v, s.id, s.score.filter(|_| fresh));
                    }
                }
                if decision.as_ref().is_some_and(|d| d.improved) {
                    state.best_iteration = k;
                }
                state.search = Some(strategy.state());
                let mut failure_reasons = failures.iter().map(|(_, r)| r.clone());
                let decisions = ids
                    .iter()
                    .enumerate()
                    .map(
                        |(j, id)| match (id, id.and_then(|i| decision.as_ref()?.placement(i.0))) {
                            (Some(_), Some(p)) => NewDecision {
                                promoted: p.kept,
                                incumbent: Some(CandidateRef::Stored(CandidateId(
                                    strategy.best().id,
                                ))),
                                island: p.island.map(i64::from),
                                cell: p.cell.map(|c| c.to_string()),
                                reason: match rejected.get(&j) {
                                    Some(why) => format!("rejected by validation: {why}"),
                                    None => p.reason.clone(),
                                },
                            },
                            _ => NewDecision {
                                promoted: false,
                                incumbent: Some(CandidateRef::Stored(CandidateId(
                                    context.incumbent,
                                ))),
                                island: selection.island.map(i64::from),
                                cell: None,
                                reason: match id {
                                    None => failure_reasons.next().unwrap_or_default(),
                                    Some(_) => String::new(),
                                },
                            },
                        },
                    )
                    .collect();
                Decided {
                    decisions,
                    remeasurements,
                    validations,
                    answers,
                    checkpoint: Checkpoint {
                        incumbent: Some(CandidateRef::Stored(CandidateId(strategy.best().id))),
                        previous: batch
                            .last()
                            .map(|c| CandidateRef::Stored(CandidateId(c.id)))
                            .or(Some(CandidateRef::Stored(CandidateId(selection.parent)))),
                        rng_state,
                        strategy_state: Some(state.to_json()),
                        spent,
                    },
                }
            })
            .await?;
        for (p, id) in proposed.into_iter().zip(&ids) {
            if let (Some(c), Some(e), Some(id)) = (p.candidate, p.evaluation, id.candidate) {
                self.normalised
                    .entry(normalised_sha(&c.source))
                    .or_insert(id.0);
                self.sources.insert(id.0, c.source);
                self.evaluations.insert(id.0, e.evaluation);
            }
        }
        Ok(DecidedIteration {
            models,
            prompt_variant: context.prompt_variant,
            promoted: decision.is_some_and(|d| d.improved),
            outcomes,
            scores,
            verdicts,
        })
    }

    /// Stage 6: the run directory's best kernel and history, and the
    /// iteration's event.
    pub(super) fn publish(
        &mut self,
        k: u32,
        decided: DecidedIteration,
        observer: &mut dyn Observer,
    ) -> Result<(), EvolveError> {
        let best = self.strategy.as_deref().expect("seed evaluated").best();
        if decided.promoted {
            self.dir
                .write_best(&self.sources[&best.id], &self.evaluations[&best.id])?;
        }
        self.write_history()?;
        let spent = self.spent();
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let totals = self.accounting.totals().all;
        let queued = self
            .arrived
            .load(std::sync::atomic::Ordering::Relaxed)
            .min(self.in_flight);
        for event in std::mem::take(&mut self.pending_events) {
            observer.on(&event);
        }
        let arms = self
            .provider
            .ensemble_state()
            .map(|s| arm_stats(&s))
            .unwrap_or_default();
        observer.on(&Event::Iteration {
            models: decided.models,
            prompt_variant: decided.prompt_variant,
            arms,
            iteration: k,
            outcomes: decided.outcomes,
            scores: decided.scores,
            promoted: decided.promoted,
            best_score: best.score,
            speedup: strategy.speedup(),
            input_tokens: spent.input_tokens,
            output_tokens: spent.output_tokens,
            cost_usd: spent.cost_usd,
            unknown_cost_calls: totals.unpriced_calls,
            unknown_usage_calls: totals.usage_unknown_calls,
            wall_s: spent.wall_s,
            verdicts: decided.verdicts,
            in_flight: self.in_flight - queued,
            queued,
            evaluating_s: self.evaluating.as_secs_f64(),
            session_s: self.started.elapsed().as_secs_f64(),
        });
        Ok(())
    }
}
