//! Recording an iteration: the strategy's decision and everything proposed,
//! stored in one transaction.

use std::collections::HashMap;

use kevo_proposer::{HistoryEntry, StepOutcome};
use kevo_store::{
    CandidateId, CandidateRef, Checkpoint, Decided, NewDecision, NewRemeasurement, NewValidation,
    ProposalId, ProposalIds, Proposed, RemeasurePurpose, Spent,
};
use kevo_strategy::{Decision, Scored, Selection, Strategy};

use super::base::Session;
use super::error::EvolveError;
use super::events::{Event, Observer, arm_stats};
use super::judge::{BatchDecision, Gate, Judged, candidate_ref, provisional_batch, stored_id};
use super::state::StrategyState;
use super::values::{EvaluatedProposal, PromptContext, Tried, TriedResult};

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

/// What an iteration's proposals tell its record, read before they are
/// moved into the store's rows.
struct TriedFacts {
    outcomes: Vec<String>,
    notes: Vec<Option<String>>,
    /// Why each evaluated proposal failed, in the evaluator's words (None
    /// for a correct one: its decision says what became of it).
    failed_because: Vec<Option<String>>,
    /// Each evaluated proposal's normalised hash (the duplicate key).
    normalised: Vec<Option<String>>,
    scores: Vec<Option<f64>>,
    /// Whether any proposal had a candidate to evaluate.
    any_candidate: bool,
    /// The reason shown to the proposer next time when nothing of this
    /// iteration could be evaluated (the last one that has a reason).
    failure: Option<String>,
    /// The proposals without a candidate, with why.
    failures: Vec<(StepOutcome, String)>,
}

impl TriedFacts {
    fn of(tried: &[Tried]) -> TriedFacts {
        fn evaluated(t: &Tried) -> Option<&EvaluatedProposal> {
            match &t.result {
                TriedResult::Evaluated(e) => Some(e),
                TriedResult::Nothing { .. } => None,
            }
        }
        TriedFacts {
            outcomes: tried.iter().map(Tried::outcome).collect(),
            notes: tried
                .iter()
                .map(|t| evaluated(t).and_then(|e| e.note.clone()))
                .collect(),
            failed_because: tried
                .iter()
                .map(|t| {
                    let outcome = &evaluated(t)?.evaluation.outcome;
                    (!outcome.is_correct())
                        .then(|| kevo_proposer::prompt::feedback::outcome_summary(outcome))
                })
                .collect(),
            normalised: tried
                .iter()
                .map(|t| evaluated(t).map(|e| e.normalised.clone()))
                .collect(),
            scores: tried.iter().map(Tried::score).collect(),
            any_candidate: tried.iter().any(|t| t.candidate().is_some()),
            failure: tried.iter().rev().find_map(|t| match &t.result {
                TriedResult::Nothing {
                    outcome: StepOutcome::NoCode | StepOutcome::EditRejected,
                    reason,
                } => Some(reason.clone()),
                _ => None,
            }),
            failures: tried
                .iter()
                .filter_map(|t| match &t.result {
                    TriedResult::Nothing { outcome, reason } => Some((*outcome, reason.clone())),
                    TriedResult::Evaluated(_) => None,
                })
                .collect(),
        }
    }
}

/// Everything the store's transaction needs once it has given the
/// iteration's proposals their ids: the decision made on provisional ids,
/// renamed to the stored ones, and the rows written with the candidates.
struct InTransaction<'a> {
    k: u32,
    selection: &'a Selection,
    context: &'a PromptContext,
    facts: &'a TriedFacts,
    /// The decided batch, under provisional ids.
    batch: &'a [Scored],
    judged: &'a Judged,
    /// Proposals whose validation failed, with why.
    rejected: &'a HashMap<usize, String>,
    validations: Vec<NewValidation>,
    answers: Option<ProposalId>,
    rng_state: Option<serde_json::Value>,
    spent: Spent,
    strategy: &'a mut dyn Strategy,
    state: &'a mut StrategyState,
    decision: &'a mut Option<Decision>,
}

impl InTransaction<'_> {
    /// The rows the store writes with the candidates: decisions,
    /// re-measurements, validations and the checkpoint, from the decision
    /// renamed to the stored ids.
    fn resolve(mut self, ids: &[Option<CandidateId>]) -> Decided {
        let to = |id: i64| stored_id(id, ids);
        self.strategy.rename(&to);
        if let Some(decision) = self.decision.as_mut() {
            decision.rename(&to, self.batch);
        }
        let batch: Vec<Scored> = self.batch.iter().map(|c| c.renamed(&to)).collect();
        let remeasurements = remeasurements(self.judged, ids);
        self.record_history(&batch, ids);
        let decisions = self.decisions(ids);
        let checkpoint = Checkpoint {
            incumbent: Some(CandidateRef::Stored(CandidateId(self.strategy.best().id))),
            previous: batch
                .last()
                .map(|c| CandidateRef::Stored(CandidateId(c.id)))
                .or(Some(CandidateRef::Stored(CandidateId(
                    self.selection.parent,
                )))),
            rng_state: self.rng_state,
            strategy_state: Some(self.state.to_json()),
            spent: self.spent,
        };
        Decided {
            decisions,
            remeasurements,
            validations: self.validations,
            answers: self.answers,
            checkpoint,
        }
    }

    /// The history the next prompt shows (proposals without a candidate
    /// first, then the decided ones, each in proposal order), the prompt
    /// archive's credit, and the strategy's state.
    fn record_history(&mut self, batch: &[Scored], ids: &[Option<CandidateId>]) {
        let (k, state, decision) = (self.k, &mut *self.state, self.decision.as_ref());
        for (outcome, reason) in &self.facts.failures {
            state.history.push(HistoryEntry {
                reason: HistoryEntry::short_reason(reason),
                ..HistoryEntry::without_candidate(k, *outcome)
            });
        }
        let index_of = |id: i64| ids.iter().position(|i| i.is_some_and(|i| i.0 == id));
        for s in batch {
            let j = index_of(s.id);
            state.history.push(HistoryEntry {
                iteration: k,
                candidate: Some(s.id),
                outcome: s.outcome,
                score: s.score,
                promoted: decision.is_some_and(|d| d.kept(s.id)),
                new_best: Some(decision.is_some_and(|d| d.improved && d.best.id == s.id)),
                duplicate_of: s.duplicate_of,
                note: j.and_then(|j| self.facts.notes[j].clone()),
                reason: history_reason(
                    s,
                    decision,
                    j.and_then(|j| self.facts.failed_because[j].as_deref()),
                ),
            });
        }
        state.previous_failure = if self.facts.any_candidate {
            None
        } else {
            self.facts.failure.clone()
        };
        if let (Some(archive), Some(v)) = (&mut state.prompts, self.context.prompt_variant) {
            // A duplicate is the variant's answer, not a new kernel of its:
            // listed, with no fitness.
            for s in batch {
                let fresh = s.duplicate_of.is_none();
                archive.credit(v, s.id, s.score.filter(|_| fresh));
            }
        }
        if decision.is_some_and(|d| d.improved) {
            state.best_iteration = k;
        }
        state.search = Some(self.strategy.state());
    }

    /// One decision row per proposal: where a decided candidate was placed
    /// and why, or why a proposal had nothing to decide on.
    fn decisions(&self, ids: &[Option<CandidateId>]) -> Vec<NewDecision> {
        let mut failure_reasons = self.facts.failures.iter().map(|(_, r)| r.clone());
        let incumbent = CandidateRef::Stored(CandidateId(self.strategy.best().id));
        ids.iter()
            .enumerate()
            .map(|(j, id)| {
                let placed = id.and_then(|i| self.decision.as_ref()?.placement(i.0));
                match (id, placed) {
                    (Some(_), Some(p)) => NewDecision {
                        promoted: p.kept,
                        incumbent: Some(incumbent),
                        island: p.island.map(i64::from),
                        cell: p.cell.map(|c| c.to_string()),
                        reason: match self.rejected.get(&j) {
                            Some(why) => format!("rejected by validation: {why}"),
                            None => p.reason.clone(),
                        },
                    },
                    _ => NewDecision {
                        promoted: false,
                        incumbent: Some(CandidateRef::Stored(CandidateId(self.context.incumbent))),
                        island: self.selection.island.map(i64::from),
                        cell: None,
                        reason: match id {
                            None => failure_reasons.next().unwrap_or_default(),
                            Some(_) => String::new(),
                        },
                    },
                }
            })
            .collect()
    }
}

/// What the history tells the proposer became of candidate `s`: for a
/// correct one, its decision (kept or not, and what a re-measurement
/// found); for a failed one, the evaluator's reason. None for one the
/// validation gate rejected: its reason may name a size the proposer never
/// sees, and the status line already says it fails on unseen sizes.
fn history_reason(s: &Scored, decision: Option<&Decision>, failed: Option<&str>) -> Option<String> {
    let reason = match s.outcome {
        StepOutcome::RejectedByValidation => None,
        StepOutcome::Correct => decision
            .and_then(|d| d.placement(s.id))
            .map(|p| p.reason.as_str()),
        _ => failed,
    };
    reason.and_then(HistoryEntry::short_reason)
}

/// The pairs re-measured to judge the batch, by stored id.
fn remeasurements(judged: &Judged, ids: &[Option<CandidateId>]) -> Vec<NewRemeasurement> {
    judged
        .measured
        .iter()
        .map(|m| NewRemeasurement {
            purpose: RemeasurePurpose::Promotion,
            candidates: vec![
                CandidateId(stored_id(m.challenger, ids)),
                CandidateId(stored_id(m.holder, ids)),
            ],
            verdict: m.verdict.clone(),
            rounds: serde_json::to_value(&m.interleaved.rounds).unwrap_or_default(),
            evaluations: m.interleaved.spend.evaluations as u32,
            device_s: m.interleaved.spend.device_s,
            wall_s: m.interleaved.spend.wall_s,
        })
        .collect()
}

impl<'e> Session<'e> {
    /// Stages 4 and 5: the strategy decides the batch once, on
    /// provisional ids; the candidates are stored and get their ids, the
    /// decision is renamed to them, and the decisions, history and
    /// checkpoint are stored with the candidates in one transaction.
    pub(super) async fn decide_and_record(
        &mut self,
        k: u32,
        context: &PromptContext,
        selection: &Selection,
        tried: Vec<Tried>,
    ) -> Result<DecidedIteration, EvolveError> {
        let facts = TriedFacts::of(&tried);
        let BatchDecision {
            mut strategy,
            mut decision,
            batch,
            judged,
            gate,
        } = self.decide_validated(k, selection, &tried).await?;
        let Gate {
            rejected,
            validations,
            ..
        } = gate;
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
        let verdicts: Vec<String> = judged.measured.iter().map(|m| m.verdict.clone()).collect();
        let in_transaction = InTransaction {
            k,
            selection,
            context,
            facts: &facts,
            batch: &batch,
            judged: &judged,
            rejected: &rejected,
            validations,
            answers: self.answering.take(),
            rng_state: self.rng_state(),
            spent: self.spent(),
            strategy: &mut *strategy,
            state: &mut self.state,
            decision: &mut decision,
        };
        let ids = self
            .env
            .store
            .record_iteration_with(&self.run, k, &proposed, |ids| in_transaction.resolve(ids))
            .await?;
        self.strategy = Some(strategy);
        self.keep_stored(proposed, &ids, &facts.normalised);
        Ok(DecidedIteration {
            models,
            prompt_variant: context.prompt_variant,
            promoted: decision.is_some_and(|d| d.improved),
            outcomes: facts.outcomes,
            scores: facts.scores,
            verdicts,
        })
    }

    /// The strategy's decision on the batch; with --validate, the gate
    /// validates what it would keep, and it decides again without what
    /// failed, until all it keeps has passed (each candidate is validated
    /// at most once, and pairs already re-measured are not measured
    /// again). The last decision is the one kept.
    async fn decide_validated(
        &mut self,
        k: u32,
        selection: &Selection,
        tried: &[Tried],
    ) -> Result<BatchDecision, EvolveError> {
        let mut batch = provisional_batch(tried);
        let mut judged = Judged::default();
        let mut gate = Gate::default();
        loop {
            let (strategy, decision) = self
                .decide_once(k, selection, &batch, tried, &mut judged)
                .await?;
            let fresh: Vec<i64> = match (&decision, self.options.validation.enabled) {
                (Some(d), true) => d
                    .placements
                    .iter()
                    .filter(|p| p.kept && gate.checked.insert(p.id))
                    .map(|p| p.id)
                    .collect(),
                _ => Vec::new(),
            };
            if fresh.is_empty() || !self.validate_fresh(&fresh, tried, &mut batch, &mut gate)? {
                return Ok(BatchDecision {
                    strategy,
                    decision,
                    batch,
                    judged,
                    gate,
                });
            }
        }
    }

    /// Validates the proposals of `fresh` (provisional ids); one that fails
    /// loses its score in the batch. Whether any failed.
    fn validate_fresh(
        &mut self,
        fresh: &[i64],
        tried: &[Tried],
        provisional: &mut [Scored],
        gate: &mut Gate,
    ) -> Result<bool, EvolveError> {
        let mut rejected_any = false;
        for &p in fresh {
            let CandidateRef::Proposal(j) = candidate_ref(p) else {
                continue;
            };
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
        Ok(rejected_any)
    }

    /// The stored candidates' sources and evaluations, kept for the run's
    /// later stages (prompts, the final pick, duplicates).
    fn keep_stored(
        &mut self,
        proposed: Vec<Proposed>,
        ids: &[ProposalIds],
        normalised: &[Option<String>],
    ) {
        for ((p, id), normalised) in proposed.into_iter().zip(ids).zip(normalised) {
            if let (Some(c), Some(e), Some(id), Some(normalised)) =
                (p.candidate, p.evaluation, id.candidate, normalised)
            {
                self.normalised.entry(normalised.clone()).or_insert(id.0);
                self.sources.insert(id.0, c.source);
                self.evaluations.insert(id.0, e.evaluation);
            }
        }
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
            best_measure: match self.evaluations.get(&best.id) {
                Some(e) if e.outcome.score() != Some(best.score) => kevo_store::Measure::Remeasured,
                _ => kevo_store::Measure::InRun,
            },
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
