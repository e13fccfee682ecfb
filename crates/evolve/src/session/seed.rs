//! The seed's evaluation, and restoring a run from its checkpoint.

use std::time::Duration;

use kevo_descriptors::{Descriptors, Features};
use kevo_eval::Evaluation;
use kevo_proposer::{ChatRequest, EnsembleState, StepOutcome, evaluated_entry};
use kevo_store::{
    CandidateId, CandidateRef, Checkpoint, Decided, NewCandidate, NewDecision, NewEvaluation,
    NewValidation, Proposed,
};
use kevo_strategy::{Elite, OnePlusOne, Scored};

use super::base::Session;
use super::calls::{META_PURPOSE, is_abandoned};
use super::error::EvolveError;
use super::events::{Event, Observer};
use super::extract::normalised_sha;
use super::state::StrategyState;

impl<'e> Session<'e> {
    /// Evaluate and record the seed (iteration 0). A seed that is not
    /// correct aborts the run with the reason.
    pub(super) async fn run_seed(
        &mut self,
        observer: &mut dyn Observer,
    ) -> Result<(), EvolveError> {
        let source = self.seed_source()?;
        let sizes = self.plan.in_distribution.clone();
        // The seed gets a generous limit; candidates get one derived from it.
        let seed_limit =
            Duration::from_secs_f64(self.options.timeout_s.unwrap_or(600.0).max(600.0));
        let evaluation = self.evaluate(&source, &sizes, seed_limit)?;
        self.dir.write_seed(&source)?;
        self.dir.write_result(0, &evaluation)?;
        let Some(score) = evaluation.outcome.score() else {
            return Err(self.seed_failed(evaluation.outcome.summary()).await);
        };
        self.state.seed_wall_s = evaluation.wall.total_s;
        self.timeout = self.candidate_timeout();
        if self.meta_prompter.is_some() {
            let start = self.prompts.default_guidance()?;
            self.state.prompts = Some(kevo_proposer::prompt::meta::PromptArchive::new(
                &start,
                self.options.rng_seed,
            ));
        }
        let validations = self.validate_seed(&source, seed_limit).await?;
        let (proposed, seed_cell) = self.seed_proposed(&source, &evaluation);
        let proposed = [proposed];
        let (rng_state, spent) = (self.rng_state(), self.spent());
        let state = &mut self.state;
        let config = &self.options.strategy;
        let mut strategy = None;
        let env = self.env;
        let ids = env
            .store
            .record_iteration_with(&self.run, 0, &proposed, |ids| {
                let id = ids[0].expect("the seed is a candidate");
                state
                    .history
                    .push(evaluated_entry(0, id.0, &evaluation.outcome, true));
                // The seed has a score, the one thing starting can need.
                let started = config.start(&Scored {
                    id: id.0,
                    score: Some(score),
                    outcome: StepOutcome::Correct,
                    descriptors: Some(seed_cell),
                    duplicate_of: None,
                });
                state.search = started.as_ref().ok().map(|s| s.state());
                strategy = Some(started);
                Decided {
                    decisions: vec![NewDecision {
                        promoted: true,
                        incumbent: Some(CandidateRef::Stored(id)),
                        island: None,
                        cell: None,
                        reason: "the seed is the first incumbent".into(),
                    }],
                    checkpoint: Checkpoint {
                        incumbent: Some(CandidateRef::Stored(id)),
                        previous: Some(CandidateRef::Stored(id)),
                        rng_state,
                        strategy_state: Some(state.to_json()),
                        spent,
                    },
                    remeasurements: Vec::new(),
                    validations,
                    answers: None,
                }
            })
            .await?;
        let id = ids[0].candidate.map(|c| c.0).unwrap_or_default();
        self.normalised.insert(normalised_sha(&source), id);
        self.sources.insert(id, source.clone());
        self.evaluations.insert(id, evaluation.clone());
        self.strategy = Some(strategy.expect("the seed iteration decided")?);
        self.dir.write_best(&source, &evaluation)?;
        self.write_history()?;
        observer.on(&Event::Started {
            run: self.run.0.clone(),
            task: self.task.name().into(),
            device: self.pool.device().name.clone(),
            backend: self.pool.device().backend,
            resumed_from: None,
            iterations: self.options.iterations,
            sandbox: self.pool.sandbox().summary(),
        });
        observer.on(&Event::Seed {
            score,
            wall_s: evaluation.wall.total_s,
        });
        Ok(())
    }
    /// The kernel a run starts from: `--seed-kernel`'s, else the task's
    /// seed in the run's dialect.
    fn seed_source(&self) -> Result<String, EvolveError> {
        Ok(match &self.options.start_source {
            Some(s) => s.clone(),
            None => self
                .task
                .seed(self.dialect)
                .ok_or_else(|| EvolveError::NoSeed {
                    task: self.task.name().to_string(),
                    dialect: self.dialect,
                })?
                .to_string(),
        })
    }

    /// With --validate, the seed at the validation sizes: it must pass
    /// them, and its times there are the baseline candidates are held to.
    async fn validate_seed(
        &mut self,
        source: &str,
        seed_limit: Duration,
    ) -> Result<Vec<NewValidation>, EvolveError> {
        let mut validations = Vec::new();
        if !self.options.validation.enabled {
            return Ok(validations);
        }
        let sizes = self.plan.validation.clone();
        let v = self.evaluate(source, &sizes, seed_limit)?;
        if !v.outcome.is_correct() {
            let reason = format!(
                "at its validation sizes, which --validate needs it to pass: {}",
                v.outcome.summary()
            );
            return Err(self.seed_failed(reason).await);
        }
        let gate = &mut self.state.validation;
        gate.seed_times = v
            .sizes
            .iter()
            .map(|s| (s.label.clone(), s.time.median_s))
            .collect();
        gate.seed_wall_s = v.wall.total_s;
        validations.push(NewValidation {
            candidate: CandidateRef::Proposal(0),
            passed: true,
            reason: "the seed: the baseline at the validation sizes".into(),
            device_s: v.wall.device_s,
            wall_s: v.wall.total_s,
            evaluation: v,
        });
        Ok(validations)
    }

    /// The seed as the store's first proposal, with its cell; the seed's
    /// features are kept for the descriptors of later candidates.
    fn seed_proposed(&mut self, source: &str, evaluation: &Evaluation) -> (Proposed, Descriptors) {
        let features = Features::of(source, self.dialect);
        let analysis = kevo_descriptors::analyse(source, self.dialect, &features);
        let seed_cell = analysis.descriptors;
        self.seed_features = Some(features);
        let proposed = Proposed {
            llm_calls: Vec::new(),
            candidate: Some(NewCandidate {
                source: source.to_string(),
                parents: Vec::new(),
                island: None,
                cell: Some(seed_cell.to_string()),
                descriptors: serde_json::to_value(&analysis).ok(),
                provider: Some("seed".into()),
                model: None,
            }),
            evaluation: Some(NewEvaluation::from(evaluation.clone())),
        };
        (proposed, seed_cell)
    }

    /// The run marked failed because its seed is not correct (`reason`),
    /// and the error that says so (or the store's, if marking failed).
    pub(super) async fn seed_failed(&self, reason: String) -> EvolveError {
        if let Err(e) = self
            .env
            .store
            .mark_failed(&self.run, &format!("seed failed: {reason}"))
            .await
        {
            return e.into();
        }
        EvolveError::SeedFailed {
            task: self.task.name().to_string(),
            reason,
        }
    }

    pub(super) async fn load(&mut self, id: CandidateId) -> Result<(), EvolveError> {
        if self.sources.contains_key(&id.0) {
            return Ok(());
        }
        let source = self.env.store.candidate_source(id).await?;
        let evaluation = self
            .env
            .store
            .evaluations_of(id)
            .await?
            .into_iter()
            .find(|e| e.kind == kevo_store::EvaluationKind::InDistribution)
            .ok_or_else(|| EvolveError::Resume {
                run: self.run.0.clone(),
                reason: format!("candidate {} has no stored evaluation", id.0),
            })?
            .evaluation()
            .map_err(|source| EvolveError::StoredEvaluation {
                candidate: id.0,
                source,
            })?;
        self.sources.insert(id.0, source);
        self.evaluations.insert(id.0, evaluation);
        Ok(())
    }

    /// Continue from a stored checkpoint: strategy, history, spend, RNG
    /// state, and the proposer fast-forwarded past the calls already made.
    pub(super) async fn restore(
        &mut self,
        cp: kevo_store::StoredCheckpoint,
    ) -> Result<(), EvolveError> {
        let run_name = self.run.0.clone();
        let bad = |reason: String| EvolveError::Resume {
            run: run_name.clone(),
            reason,
        };
        let state: StrategyState = cp
            .strategy_state
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| bad(format!("unreadable strategy state: {e}")))?
            .unwrap_or_default();
        let incumbent = cp
            .incumbent
            .ok_or_else(|| bad("the checkpoint has no incumbent".into()))?;
        let previous = cp.previous.unwrap_or(incumbent);
        let history = self.env.store.history(&self.run).await?;
        let seed = history
            .iter()
            .find(|h| h.iteration == 0)
            .and_then(|h| h.candidate_id)
            .ok_or_else(|| bad("the seed was never recorded".into()))?;
        for id in [seed, incumbent, previous] {
            self.load(id).await?;
        }
        self.seed_features = Some(Features::of(&self.sources[&seed.0], self.dialect));
        for id in history.iter().filter_map(|h| h.candidate_id) {
            let source = self.env.store.candidate_source(id).await?;
            self.normalised
                .entry(normalised_sha(&source))
                .or_insert(id.0);
        }
        self.strategy = Some(match &state.search {
            Some(search) => kevo_strategy::restore(self.options.strategy.stored_name(), search)?,
            None => {
                let score_of = |s: &Self, id: CandidateId| s.evaluations[&id.0].outcome.score();
                let seed_score = score_of(self, seed)
                    .ok_or_else(|| bad("the stored seed has no score".into()))?;
                let incumbent_score = score_of(self, incumbent)
                    .ok_or_else(|| bad("the stored incumbent has no score".into()))?;
                Box::new(OnePlusOne::restore(
                    Elite {
                        id: seed.0,
                        score: seed_score,
                    },
                    Elite {
                        id: incumbent.0,
                        score: incumbent_score,
                    },
                    previous.0,
                    cp.iteration,
                ))
            }
        });
        self.state = state;
        self.timeout = self.candidate_timeout();
        self.iteration = cp.iteration;
        self.spent_before = cp.spent;
        self.resumed_from = Some(cp.iteration);
        if let Some(rng) = &cp.rng_state {
            let s: EnsembleState = serde_json::from_value(rng.clone())
                .map_err(|e| bad(format!("unreadable RNG state: {e}")))?;
            self.provider.restore_ensemble_state(&s)?;
        }
        self.replay_calls(cp.iteration).await
    }

    /// The model calls a resumed run already made, played forward: each
    /// proposer skips the answers it gave, meta-prompter answers paid for
    /// and not applied are applied in order, recommendations are not asked
    /// again, and calls made after the checkpoint count in what was spent.
    async fn replay_calls(&mut self, checkpoint_iteration: u32) -> Result<(), EvolveError> {
        // Every call that ended, failed ones included (a recording holds
        // them too); not the abandoned ones, which never did.
        let ended: Vec<kevo_store::StoredLlmCall> = self
            .env
            .store
            .llm_calls(&self.run)
            .await?
            .into_iter()
            .filter(|c| !is_abandoned(c))
            .collect();
        let served = |purpose: &str| -> Vec<(String, ChatRequest)> {
            ended
                .iter()
                .filter(|c| match purpose {
                    "analysis" | META_PURPOSE => c.call.purpose == purpose,
                    _ => c.call.purpose != "analysis" && c.call.purpose != META_PURPOSE,
                })
                .map(|c| {
                    (
                        c.call.provider.clone(),
                        ChatRequest::new(c.call.prompt_system.clone(), c.call.prompt_user.clone()),
                    )
                })
                .collect()
        };
        self.provider.fast_forward(&served("propose"))?;
        if let Some(analyst) = &self.analyst {
            analyst.fast_forward(&served("analysis"))?;
        }
        if let Some(prompter) = &self.meta_prompter {
            prompter.fast_forward(&served(META_PURPOSE))?;
        }
        // Meta-prompter calls stored after the checkpoint's archive was
        // written are answers paid for and not applied: the resumed run
        // applies them in order instead of asking again.
        let applied = self.state.prompts.as_ref().map_or(0, |a| a.meta_calls) as usize;
        self.meta_answers = ended
            .iter()
            .filter(|c| c.call.purpose == META_PURPOSE)
            .skip(applied)
            .map(|c| c.call.response.clone())
            .collect();
        for c in ended
            .iter()
            .filter(|c| c.call.purpose == "analysis" || c.call.purpose == META_PURPOSE)
        {
            // Recommendations already paid for are not asked again.
            if let (Some(id), Some(answer)) = (c.candidate_id, &c.call.response)
                && let Some(r) = kevo_proposer::recommendation(answer)
            {
                self.analyses.insert(id.0, r);
            }
            // Made after the checkpoint was written (stored under the
            // iteration recorded last when they were made): not in its
            // spent figures.
            if c.iteration >= checkpoint_iteration {
                self.spent_before.input_tokens += c.call.input_tokens.unwrap_or(0);
                self.spent_before.output_tokens += c.call.output_tokens.unwrap_or(0);
                self.spent_before.reasoning_tokens += c.call.reasoning_tokens.unwrap_or(0);
                self.spent_before.cost_usd += c.call.cost_usd.unwrap_or(0.0);
            }
        }
        Ok(())
    }
}
