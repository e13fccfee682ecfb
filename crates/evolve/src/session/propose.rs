//! Proposing: the prompt's context, model calls with retries, tuning a
//! template, evaluating each extracted candidate once.

use std::time::Instant;

use kevo_eval::{Evaluation, Outcome, WallTimes};
use kevo_proposer::{Attempt, ChatRequest, ProviderError, StepOutcome, UserContext};
use kevo_store::{CandidateId, CandidateRef, NewCandidate};
use kevo_strategy::Selection;

use super::base::{AbortOnDrop, Session};
use super::calls::{Answer, Calls, InFlightCall, proposal_call, with_answer, with_transcript};
use super::error::EvolveError;
use super::extract::{Candidate, NoCandidate};
use super::tool_host::ProposalTools;
use super::values::{
    Duplicate, EvaluatedOnce, EvaluatedProposal, PromptContext, Tried, TriedResult, attempts,
    hint_text,
};

impl<'e> Session<'e> {
    /// What the proposer is shown: the parent's source and evaluation,
    /// the previous attempt from it (or why the last proposal gave
    /// nothing to evaluate), and whether the parent is still the seed.
    /// Every candidate the selection names is loaded first.
    pub(super) async fn prompt_context(
        &mut self,
        selection: &Selection,
    ) -> Result<PromptContext, EvolveError> {
        let named = [selection.parent]
            .into_iter()
            .chain(selection.previous)
            .chain(selection.elites.iter().copied())
            .chain(selection.inspirations.iter().copied());
        for id in named.collect::<Vec<_>>() {
            self.load(CandidateId(id)).await?;
        }
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let (seed, best) = (strategy.seed().id, strategy.best());
        let (best, best_score) = (best.id, best.score);
        let incumbent = selection.parent;
        let incumbent_profile = self.profile(incumbent);
        let role = if incumbent == seed {
            "seed"
        } else if incumbent == best {
            "incumbent"
        } else {
            "parent"
        };
        let analysis = self
            .analysis(incumbent, incumbent_profile.as_deref(), role)
            .await?;
        let incumbent_source = self.sources[&incumbent].clone();
        let incumbent_evaluation = self.evaluations[&incumbent].clone();
        let mut previous_profile = None;
        let previous = match &self.state.previous_failure {
            // The last proposal gave nothing to evaluate: tell the proposer
            // why, against the source it was asked to improve.
            Some(reason) => Some((
                incumbent_source.clone(),
                Evaluation::without_sizes(
                    &incumbent_evaluation.task,
                    &incumbent_evaluation.device,
                    incumbent_evaluation.backend,
                    Outcome::NoCode {
                        reason: reason.clone(),
                    },
                    WallTimes::default(),
                ),
            )),
            // Before the first attempt from this parent it is the only
            // baseline.
            None => selection.previous.map(|p| {
                // With --profile-every, a correct attempt is profiled when
                // it is first shown, so the proposer sees why it was slow.
                if self.options.profile_every
                    && p != incumbent
                    && self.evaluations[&p].outcome.score().is_some()
                {
                    previous_profile = self.profile(p);
                }
                (self.sources[&p].clone(), self.evaluations[&p].clone())
            }),
        };
        let shown = |ids: &[i64]| -> Vec<(String, Evaluation)> {
            ids.iter()
                .map(|id| (self.sources[id].clone(), self.evaluations[id].clone()))
                .collect()
        };
        let previous_rejected = self.state.previous_failure.is_none()
            && selection.previous.is_some_and(|p| {
                self.state.history.iter().any(|h| {
                    h.candidate == Some(p) && h.outcome == StepOutcome::RejectedByValidation
                })
            });
        Ok(PromptContext {
            previous_rejected,
            incumbent,
            incumbent_profile,
            previous_profile,
            analysis,
            incumbent_source,
            incumbent_evaluation,
            previous,
            incumbent_is_seed: incumbent == seed,
            incumbent_is_best: incumbent == best,
            incumbent_score: (incumbent == best).then_some(best_score),
            elites: shown(&selection.elites),
            inspirations: shown(&selection.inspirations),
            prompt_variant: None,
        })
    }

    /// The request for a selection and its context, with its prompt
    /// variant's guidance.
    pub(super) fn request(
        &self,
        context: &PromptContext,
        selection: &Selection,
    ) -> Result<ChatRequest, EvolveError> {
        let guidance = match (context.prompt_variant, &self.state.prompts) {
            (Some(v), Some(archive)) => {
                let variant = archive.get(v).ok_or_else(|| {
                    EvolveError::MetaPrompter(format!("the archive has no variant {v}"))
                })?;
                Some(
                    kevo_proposer::prompt::guidance::Guidance::parse(&variant.guidance).map_err(
                        |e| EvolveError::MetaPrompter(format!("variant {v} is unreadable: {e}")),
                    )?,
                )
            }
            _ => None,
        };
        let search = self
            .strategy
            .as_deref()
            .and_then(|s| kevo_proposer::SearchBrief::of(&s.archive(), selection));
        // Hints that make no sense on this device (tiling on a CPU) are left out.
        let kind = Some(self.pool.device().kind());
        let hints: Vec<String> = selection
            .hints
            .iter()
            .filter_map(|h| hint_text(h, self.dialect, kind))
            .collect();
        let request = self.prompts.request_with(
            &UserContext {
                previous: context
                    .previous
                    .as_ref()
                    .map(|(source, evaluation)| Attempt { source, evaluation }),
                incumbent: Attempt {
                    source: &context.incumbent_source,
                    evaluation: &context.incumbent_evaluation,
                },
                incumbent_is_seed: context.incumbent_is_seed,
                incumbent_is_best: context.incumbent_is_best,
                incumbent_score: context.incumbent_score,
                history: &self.state.history,
                elites: &attempts(&context.elites),
                inspirations: &attempts(&context.inspirations),
                hints: &hints,
                incumbent_profile: context.incumbent_profile.as_deref(),
                previous_profile: context.previous_profile.as_deref(),
                analysis: context.analysis.as_deref(),
                previous_rejected: context.previous_rejected,
                search: search.as_ref(),
            },
            guidance.as_ref(),
        )?;
        Ok(request)
    }

    /// Stage 2: the calls of one prompt (concurrently, with their
    /// latencies; a budget stop of every call ends the run) as a future
    /// that owns what it needs, so that several prompts' calls can be in
    /// flight at once. They are registered until they return; if the
    /// future is dropped instead (a signal), `interrupt` stores them as
    /// abandoned under iteration `k`.
    pub(super) fn issue(
        &self,
        k: u32,
        request: &ChatRequest,
        context: &PromptContext,
    ) -> impl std::future::Future<Output = Calls> + Send + 'static {
        static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let token = TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = self.options.candidates_per_iteration.max(1) as usize;
        let sent = Instant::now();
        let in_flight = self.env.in_flight.clone();
        in_flight.lock().extend((0..n).map(|_| InFlightCall {
            token,
            purpose: "propose",
            run: self.run.clone(),
            iteration: k,
            provider: self.provider.label(),
            system: request.system.clone(),
            user: request.user.clone(),
            sent,
        }));
        let tools = self.proposal_tools(context);
        let handles = AbortOnDrop(
            (0..n)
                .map(|_| {
                    tokio::spawn(propose_once(
                        self.provider.clone(),
                        tools.clone(),
                        request.clone(),
                        self.accounting.clone(),
                    ))
                })
                .collect(),
        );
        async move {
            let mut handles = handles;
            let mut joined = Vec::with_capacity(n);
            for h in handles.0.iter_mut() {
                joined.push(h.await);
            }
            in_flight.lock().retain(|c| c.token != token);
            let answers: Vec<Answer> = joined.into_iter().collect::<Result<_, _>>()?;
            if let Some(Err(e)) = answers.first().map(|a| &a.result)
                && e.is_budget_stop()
                && answers.iter().all(|a| a.result.is_err())
            {
                return Err(EvolveError::Provider(e.clone()));
            }
            Ok(answers)
        }
    }

    /// With `--agent-tools`, the tools of a proposal from `context`: its
    /// parent, the incumbent and the elites it is shown.
    pub(super) fn proposal_tools(
        &self,
        context: &PromptContext,
    ) -> Option<std::sync::Arc<ProposalTools>> {
        let bench = self.tools.clone()?;
        let best = self.strategy.as_deref().map(|s| s.best().id);
        let incumbent = best
            .and_then(|id| {
                Some((
                    self.sources.get(&id)?.clone(),
                    self.evaluations.get(&id)?.clone(),
                ))
            })
            .unwrap_or_else(|| {
                (
                    context.incumbent_source.clone(),
                    context.incumbent_evaluation.clone(),
                )
            });
        Some(std::sync::Arc::new(ProposalTools {
            bench,
            parent: (
                context.incumbent_source.clone(),
                context.incumbent_evaluation.clone(),
            ),
            incumbent,
            elites: context.elites.clone(),
            timeout: self.timeout,
        }))
    }

    /// With several workers (`--devices`, or remote ones), the new sources
    /// of an iteration's answers are evaluated at once, before the answers
    /// are taken one by one (which then find their evaluation here): the
    /// same sources, checks and limits, in parallel. Templates, and
    /// sources this run has measured, are left to the sequential path.
    pub(super) async fn prefetch(
        &mut self,
        extracted: &[Option<Result<Candidate, NoCandidate>>],
    ) -> Result<(), EvolveError> {
        self.prefetched.clear();
        if self.pool.parallel() < 2 || extracted.len() < 2 {
            return Ok(());
        }
        let mut fresh: Vec<&Candidate> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for candidate in extracted.iter().flatten().flatten() {
            if kevo_tune::is_template(&candidate.source)
                || self.normalised.contains_key(&candidate.normalised)
                || !seen.insert(&candidate.normalised)
            {
                continue;
            }
            if self
                .env
                .store
                .find_evaluation(&self.run, &candidate.sha)
                .await?
                .is_some()
            {
                continue;
            }
            fresh.push(candidate);
        }
        if fresh.len() < 2 {
            return Ok(());
        }
        let started = Instant::now();
        let sizes = self.sizes();
        let tools = self.tools.clone();
        let _device = tools.as_deref().map(super::tool_host::ToolBench::hold);
        let evaluations = self
            .pool
            .evaluate_many(self.task, &fresh, &sizes, self.timeout)?;
        self.evaluating += started.elapsed();
        for (candidate, e) in fresh.into_iter().zip(evaluations) {
            self.prefetched.insert(candidate.sha.clone(), e);
        }
        Ok(())
    }

    /// Stage 3: each response's call record, its source extracted, and the
    /// source evaluated unless this run already measured it. The first
    /// proposal's response, source and result go to the run directory.
    pub(super) async fn try_completions(
        &mut self,
        k: u32,
        request: &ChatRequest,
        context: &PromptContext,
        selection: &Selection,
        completions: Vec<Answer>,
    ) -> Result<Vec<Tried>, EvolveError> {
        if let Some(error) = permanent_failure(&completions) {
            self.refused = Some(format!("the model cannot be reached: {error}"));
        }
        let extracted = self.extract_all(&completions, &context.incumbent_source);
        self.prefetch(&extracted).await?;
        let mut tried: Vec<Tried> = Vec::with_capacity(completions.len());
        for (j, (answer, extracted)) in completions.into_iter().zip(extracted).enumerate() {
            let mut call = self.call_record(request, &answer);
            let completion = match answer.result {
                Err(e) => {
                    call.error = Some(e.to_string());
                    tried.push(Tried::nothing(
                        call,
                        StepOutcome::Skipped,
                        format!("the proposer failed: {e}"),
                    ));
                    continue;
                }
                Ok(c) => c,
            };
            let mut call = with_answer(call, &completion);
            // An ensemble's call is stored under the member that answered.
            if let Some(member) = &completion.member {
                call.provider = member.clone();
            }
            if j == 0 {
                self.dir.write_response(k, &completion.text)?;
                if let Some(r) = &completion.reasoning {
                    self.dir.write_reasoning(k, r)?;
                }
            }
            let candidate = match extracted {
                Some(Ok(candidate)) => candidate,
                Some(Err((outcome, reason))) => {
                    tried.push(Tried::nothing(call, outcome, reason));
                    continue;
                }
                None => unreachable!("a failed call was taken above"),
            };
            let note = kevo_proposer::prompt::attempt_note(&completion.text, &candidate.source);
            let tune_seed = self.options.rng_seed ^ (u64::from(k) << 16) ^ j as u64;
            let (candidate, (evaluation, reused_from, duplicate)) =
                if kevo_tune::is_template(&candidate.source) {
                    self.tune_template(candidate, &tried, tune_seed).await?
                } else {
                    let result = self.evaluate_once(&candidate, &tried).await?;
                    (candidate, result)
                };
            let Candidate {
                source, normalised, ..
            } = candidate;
            if j == 0 {
                // A tuned template's candidate is its best instance.
                self.dir.write_candidate(k, &source)?;
            }
            if j == 0 {
                self.dir.write_result(k, &evaluation)?;
            }
            let analysis = self
                .seed_features
                .as_ref()
                .map(|seed| kevo_descriptors::analyse(&source, self.dialect, seed));
            tried.push(Tried {
                call,
                result: TriedResult::Evaluated(Box::new(EvaluatedProposal {
                    candidate: NewCandidate {
                        source,
                        parents: vec![CandidateRef::Stored(CandidateId(selection.parent))],
                        island: selection.island.map(i64::from),
                        cell: analysis.as_ref().map(|a| a.descriptors.to_string()),
                        descriptors: analysis.as_ref().and_then(|a| serde_json::to_value(a).ok()),
                        provider: Some(completion.provider.clone()),
                        model: Some(completion.model.clone()),
                    },
                    descriptors: analysis.map(|a| a.descriptors),
                    normalised,
                    evaluation,
                    reused_from,
                    duplicate,
                    note,
                })),
            });
        }
        Ok(tried)
    }

    /// The stored record of a proposal call, before its answer is read:
    /// with a tool conversation, its transcript and every turn's tokens,
    /// and its worker time counted as this run's evaluation time.
    fn call_record(&mut self, request: &ChatRequest, answer: &Answer) -> kevo_store::NewLlmCall {
        let call = proposal_call(
            self.provider.label(),
            &request.system,
            &request.user,
            answer.latency_s,
        );
        match &answer.transcript {
            Some(t) => {
                self.evaluating += std::time::Duration::from_secs_f64(t.device_s);
                with_transcript(call, t)
            }
            None => call,
        }
    }

    /// `source`'s evaluation: the stored one if this run measured the
    /// same source before, that of an earlier candidate whose source is
    /// the same up to comments and whitespace, one of this batch's, or a
    /// new measurement; with the candidate it duplicates, if any.
    pub(super) async fn evaluate_once(
        &mut self,
        candidate: &Candidate,
        batch: &[Tried],
    ) -> Result<EvaluatedOnce, EvolveError> {
        if let Some(stored) = self
            .env
            .store
            .find_evaluation(&self.run, &candidate.sha)
            .await?
            && let Ok(e) = stored.evaluation()
        {
            let of = Duplicate::Stored(stored.candidate_id.0);
            return Ok((e, Some(stored.id), Some(of)));
        }
        if let Some(&id) = self.normalised.get(&candidate.normalised) {
            self.load(CandidateId(id)).await?;
            return Ok((
                self.evaluations[&id].clone(),
                None,
                Some(Duplicate::Stored(id)),
            ));
        }
        let earlier = batch.iter().enumerate().find_map(|(j, t)| match &t.result {
            TriedResult::Evaluated(e) if e.normalised == candidate.normalised => {
                Some((e.evaluation.clone(), j))
            }
            _ => None,
        });
        Ok(match earlier {
            Some((e, j)) => (e, None, Some(Duplicate::InBatch(j))),
            None => match self.prefetched.remove(&candidate.sha) {
                Some(e) => (e, None, None),
                None => (
                    self.evaluate_candidate(candidate, &self.sizes(), self.timeout)?,
                    None,
                    None,
                ),
            },
        })
    }
}

/// One answer to `request`: a single call, or with tools a conversation
/// (an API model's through the provider, an agent's in its directory).
async fn propose_once(
    provider: std::sync::Arc<dyn kevo_proposer::Provider>,
    tools: Option<std::sync::Arc<ProposalTools>>,
    request: ChatRequest,
    accounting: kevo_proposer::Accounting,
) -> Answer {
    let t = Instant::now();
    let (result, transcript) = match tools {
        Some(host) => {
            let budget = host.bench.budget.clone();
            let (result, transcript) = match provider.agent() {
                Some(agent) => {
                    let (result, transcript) = agent.converse(&*host, &request, &budget).await;
                    // No Managed layer counts an agent's calls: what it
                    // spent is unknown unless it said (usage.json), and a
                    // failed run spent something too, never 0.
                    match &result {
                        Ok(c) => accounting.record_success(&provider.label(), c),
                        Err(_) => accounting.record_unseen_failure(&provider.label(), 1),
                    }
                    (result, transcript)
                }
                None => kevo_proposer::tools::converse(&*provider, &*host, &request, &budget).await,
            };
            (result, Some(transcript))
        }
        None => (provider.complete(&request).await, None),
    };
    Answer {
        result,
        latency_s: t.elapsed().as_secs_f64(),
        transcript,
    }
}

/// The error of a batch of calls that all failed permanently (see
/// [`ProviderError::is_permanent`]); None when one was answered or may be
/// next time.
fn permanent_failure(completions: &[Answer]) -> Option<&ProviderError> {
    let mut errors = completions.iter().map(|a| a.result.as_ref().err());
    let first = errors.next()??;
    (first.is_permanent() && errors.all(|e| e.is_some_and(ProviderError::is_permanent)))
        .then_some(first)
}
