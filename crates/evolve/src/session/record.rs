//! Recording an iteration: the strategy's decision and everything proposed,
//! stored in one transaction.

use std::collections::HashMap;

use kevo_descriptors::Descriptors;
use kevo_proposer::{HistoryEntry, StepOutcome, step_outcome};
use kevo_store::{
    CandidateId, CandidateRef, Checkpoint, Decided, NewDecision, NewRemeasurement, NewValidation,
    ProposalId, ProposalIds, Proposed, RemeasurePurpose, Spent,
};
use kevo_strategy::{Decision, Scored, Selection, Strategy, StrictJudge};

use super::base::Session;
use super::error::EvolveError;
use super::events::{Event, Observer, arm_stats};
use super::judge::{Gate, Judged, ReplayJudge, provisional_batch, provisional_id};
use super::state::StrategyState;
use super::values::{
    Duplicate, EvaluatedProposal, PromptContext, Tried, TriedResult, normalised_sha,
};

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
    duplicates: Vec<Option<Duplicate>>,
    cells: Vec<Option<Descriptors>>,
    notes: Vec<Option<String>>,
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
            duplicates: tried
                .iter()
                .map(|t| evaluated(t).and_then(|e| e.duplicate))
                .collect(),
            cells: tried
                .iter()
                .map(|t| evaluated(t).and_then(|e| e.descriptors))
                .collect(),
            notes: tried
                .iter()
                .map(|t| evaluated(t).and_then(|e| e.note.clone()))
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

/// Everything the decision inside the store's transaction reads, and the
/// decision it leaves behind: the strategy decides on the stored ids.
struct InTransaction<'a> {
    k: u32,
    selection: &'a Selection,
    context: &'a PromptContext,
    facts: &'a TriedFacts,
    proposed: &'a [Proposed],
    judged: &'a Option<Judged>,
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
    /// re-measurements, validations and the checkpoint.
    fn decide(mut self, ids: &[Option<CandidateId>]) -> Decided {
        let batch = self.scored_batch(ids);
        // Stored ids back to the provisional ones the batch was judged
        // under.
        let provisional_of: HashMap<i64, i64> = ids
            .iter()
            .enumerate()
            .filter_map(|(j, id)| Some((id.as_ref()?.0, provisional_id(j))))
            .collect();
        *self.decision = (!batch.is_empty()).then(|| match self.judged {
            None => self
                .strategy
                .decide(self.k, self.selection, &batch, &mut StrictJudge),
            Some(judged) => self.strategy.decide(
                self.k,
                self.selection,
                &batch,
                &mut ReplayJudge {
                    table: &judged.table,
                    provisional_of: &provisional_of,
                },
            ),
        });
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

    /// The batch as the strategy sees it, by stored id: a proposal whose
    /// validation failed has no score.
    fn scored_batch(&self, ids: &[Option<CandidateId>]) -> Vec<Scored> {
        // Whose duplicate each proposal is, by stored id.
        let duplicate_of = |j: usize| match self.facts.duplicates[j] {
            Some(Duplicate::Stored(id)) => Some(id),
            Some(Duplicate::InBatch(e)) => ids[e].map(|i| i.0),
            None => None,
        };
        self.proposed
            .iter()
            .zip(ids)
            .zip(&self.facts.cells)
            .enumerate()
            .filter_map(|(j, ((p, id), cell))| {
                let e = &p.evaluation.as_ref()?.evaluation;
                let (score, outcome) = match self.rejected.contains_key(&j) {
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
            .collect()
    }

    /// The history the next prompt shows (proposals without a candidate
    /// first, then the decided ones, each in proposal order), the prompt
    /// archive's credit, and the strategy's state.
    fn record_history(&mut self, batch: &[Scored], ids: &[Option<CandidateId>]) {
        let (k, state, decision) = (self.k, &mut *self.state, self.decision.as_ref());
        for (outcome, _) in &self.facts.failures {
            state
                .history
                .push(HistoryEntry::without_candidate(k, *outcome));
        }
        let note_of = |id: i64| {
            ids.iter()
                .position(|i| i.is_some_and(|i| i.0 == id))
                .and_then(|j| self.facts.notes[j].clone())
        };
        for s in batch {
            state.history.push(HistoryEntry {
                iteration: k,
                candidate: Some(s.id),
                outcome: s.outcome,
                score: s.score,
                promoted: decision.is_some_and(|d| d.kept(s.id)),
                new_best: Some(decision.is_some_and(|d| d.improved && d.best.id == s.id)),
                duplicate_of: s.duplicate_of,
                note: note_of(s.id),
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

/// The pairs re-measured to judge the batch, by stored id.
fn remeasurements(judged: &Option<Judged>, ids: &[Option<CandidateId>]) -> Vec<NewRemeasurement> {
    let stored_of = |p: i64| {
        ids.iter()
            .enumerate()
            .find(|(j, _)| provisional_id(*j) == p)
            .and_then(|(_, id)| id.map(|i| i.0))
            .unwrap_or(p)
    };
    judged
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
        .collect()
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
        let facts = TriedFacts::of(&tried);
        let (judged, gate) = self.judge_validated(k, selection, &tried).await?;
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
        let verdicts: Vec<String> = judged
            .iter()
            .flat_map(|j| &j.measured)
            .map(|m| m.verdict.clone())
            .collect();
        let mut decision: Option<Decision> = None;
        let in_transaction = InTransaction {
            k,
            selection,
            context,
            facts: &facts,
            proposed: &proposed,
            judged: &judged,
            rejected: &rejected,
            validations,
            answers: self.answering.take(),
            rng_state: self.rng_state(),
            spent: self.spent(),
            strategy: self.strategy.as_deref_mut().expect("seed evaluated"),
            state: &mut self.state,
            decision: &mut decision,
        };
        let ids = self
            .env
            .store
            .record_iteration_with(&self.run, k, &proposed, |ids| in_transaction.decide(ids))
            .await?;
        self.keep_stored(proposed, &ids);
        Ok(DecidedIteration {
            models,
            prompt_variant: context.prompt_variant,
            promoted: decision.is_some_and(|d| d.improved),
            outcomes: facts.outcomes,
            scores: facts.scores,
            verdicts,
        })
    }

    /// Judges the batch; with --validate, validates what the strategy
    /// would keep and judges again without what failed, until all it keeps
    /// has passed (each candidate is validated at most once, and pairs
    /// already re-measured are not measured again).
    async fn judge_validated(
        &mut self,
        k: u32,
        selection: &Selection,
        tried: &[Tried],
    ) -> Result<(Option<Judged>, Gate), EvolveError> {
        let mut provisional = provisional_batch(tried);
        let mut judged = None;
        let mut gate = Gate::default();
        loop {
            judged = self
                .judge_batch(k, selection, &provisional, tried, judged.take())
                .await?;
            if !self.options.validation.enabled {
                break;
            }
            let fresh: Vec<i64> = self
                .probe_kept(k, selection, &provisional, judged.as_ref())?
                .into_iter()
                .filter(|id| gate.checked.insert(*id))
                .collect();
            if fresh.is_empty()
                || !self.validate_fresh(&fresh, tried, &mut provisional, &mut gate)?
            {
                break;
            }
        }
        Ok((judged, gate))
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
        Ok(rejected_any)
    }

    /// The stored candidates' sources and evaluations, kept for the run's
    /// later stages (prompts, the final pick, duplicates).
    fn keep_stored(&mut self, proposed: Vec<Proposed>, ids: &[ProposalIds]) {
        for (p, id) in proposed.into_iter().zip(ids) {
            if let (Some(c), Some(e), Some(id)) = (p.candidate, p.evaluation, id.candidate) {
                self.normalised
                    .entry(normalised_sha(&c.source))
                    .or_insert(id.0);
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
