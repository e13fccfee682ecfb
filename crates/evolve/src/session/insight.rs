//! What the run learns beside the search: meta-prompting, analyst conclusions,
//! profiles and the winner's sanitizer check.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use kevo_backend::Dialect;
use kevo_proposer::{ChatRequest, HistoryEntry, Provider, StepOutcome};
use kevo_store::{CandidateId, NewLlmCall};
use kevo_strategy::Selection;

use super::base::Session;
use super::calls::{
    ANALYST_GIVE_UP, InFlightCall, META_FAILURES_SHOWN, META_PURPOSE, proposal_call, with_answer,
};
use super::error::EvolveError;
use super::events::{Event, Observer};
use super::values::PromptContext;

impl<'e> Session<'e> {
    /// The meta-prompter's turn before proposal `k`, every `every`
    /// proposals: it is shown the fittest variant's guidance, the archive,
    /// and the last `every` proposals with their variants and failures,
    /// and its edits make a new variant. A failed call leaves the archive
    /// as it is (said once); a budget stop is the generator's to report.
    /// The call is stored (purpose "meta-prompt"); after a resume, answers
    /// stored after the checkpoint are used instead of asking again.
    pub(super) async fn meta_step(&mut self, k: u32) -> Result<(), EvolveError> {
        let (Some(meta), Some(prompter)) = (&self.options.meta_prompt, self.meta_prompter.clone())
        else {
            return Ok(());
        };
        let every = meta.every.max(1);
        if k <= 1 || !(k - 1).is_multiple_of(every) {
            return Ok(());
        }
        let Some(archive) = &self.state.prompts else {
            return Ok(());
        };
        if archive.meta_calls >= (k - 1) / every {
            return Ok(());
        }
        let parent = archive.best().id;
        let variant_of: HashMap<i64, u32> = archive
            .variants
            .iter()
            .flat_map(|v| v.candidates.iter().map(move |c| (*c, v.id)))
            .collect();
        let proposals: Vec<&HistoryEntry> = self
            .state
            .history
            .iter()
            .filter(|h| h.iteration > 0)
            .collect();
        let entries: Vec<HistoryEntry> = proposals
            [proposals.len().saturating_sub(every as usize)..]
            .iter()
            .map(|h| (*h).clone())
            .collect();
        let mut recent = Vec::with_capacity(entries.len());
        let mut failures_shown = 0;
        for e in entries.iter().rev() {
            let mut feedback = None;
            if let Some(c) = e.candidate
                && e.outcome != StepOutcome::Correct
                && failures_shown < META_FAILURES_SHOWN
            {
                self.load(CandidateId(c)).await?;
                feedback = self.prompts.meta_feedback(&self.evaluations[&c])?;
                failures_shown += usize::from(feedback.is_some());
            }
            recent.push(kevo_proposer::prompt::meta::MetaAttempt {
                line: kevo_proposer::history_line(e),
                variant: e.candidate.and_then(|c| variant_of.get(&c).copied()),
                feedback,
            });
        }
        recent.reverse();
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let archive = self.state.prompts.as_ref().expect("checked above");
        let request = self
            .prompts
            .meta_request(&kevo_proposer::prompt::meta::MetaContext {
                archive,
                parent,
                recent: &recent,
                seed_score: strategy.seed().score,
                best_score: strategy.best().score,
            })?;
        let answer = match self.meta_answers.pop_front() {
            Some(stored) => stored.ok_or_else(|| "the stored call had failed".to_string()),
            None => match self.ask_meta_prompter(&prompter, &request).await? {
                Some(answer) => answer,
                // A budget stop: no call was made, and the generator's
                // next call stops the run with the same reason.
                None => return Ok(()),
            },
        };
        let archive = self.state.prompts.as_mut().expect("checked above");
        let event = match answer {
            Ok(text) => {
                let (variant, rejected) = archive.add_edited(parent, k, &text).map_err(|e| {
                    EvolveError::MetaPrompter(format!("variant {parent} is unreadable: {e}"))
                })?;
                let new = variant.and_then(|v| archive.get(v));
                Event::MetaPrompt {
                    iteration: k,
                    parent,
                    variant,
                    applied: new.map(|v| v.edited.clone()).unwrap_or_default(),
                    rejected: rejected.iter().map(|r| r.to_string()).collect(),
                    diagnosis: new.map(|v| v.diagnosis.clone()).unwrap_or_default(),
                    failed: None,
                }
            }
            Err(reason) => {
                archive.add_failed();
                Event::MetaPrompt {
                    iteration: k,
                    parent,
                    variant: None,
                    applied: Vec::new(),
                    rejected: Vec::new(),
                    diagnosis: String::new(),
                    failed: Some(reason),
                }
            }
        };
        self.pending_events.push(event);
        Ok(())
    }

    /// One meta-prompter call, registered while in flight and stored as it
    /// returns; the answer, or why there is none; None when a budget
    /// stopped it before it was made.
    pub(super) async fn ask_meta_prompter(
        &mut self,
        prompter: &Arc<dyn Provider>,
        request: &ChatRequest,
    ) -> Result<Option<Result<String, String>>, EvolveError> {
        static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let token = (u64::MAX >> 1) - TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sent = Instant::now();
        self.env.in_flight.lock().push(InFlightCall {
            token,
            purpose: META_PURPOSE,
            run: self.run.clone(),
            iteration: self.iteration,
            provider: prompter.label(),
            system: request.system.clone(),
            user: request.user.clone(),
            sent,
        });
        let result = prompter.complete(request).await;
        self.env.in_flight.lock().retain(|c| c.token != token);
        let asked = NewLlmCall {
            purpose: META_PURPOSE.into(),
            ..proposal_call(
                prompter.label(),
                &request.system,
                &request.user,
                sent.elapsed().as_secs_f64(),
            )
        };
        let (call, answer) = match result {
            Ok(c) => (with_answer(asked, &c), Ok(c.text)),
            Err(e) => {
                if e.is_budget_stop() {
                    return Ok(None);
                }
                (
                    NewLlmCall {
                        error: Some(e.to_string()),
                        transcript: None,
                        ..asked
                    },
                    Err(e.to_string()),
                )
            }
        };
        self.env
            .store
            .record_llm_call(&self.run, None, self.iteration, &call)
            .await?;
        if let Err(reason) = &answer
            && !self.meta_failed_said
        {
            eprintln!(
                "kevo: the meta-prompter gave no answer ({reason}); the prompt stays as it is"
            );
            self.meta_failed_said = true;
        }
        Ok(Some(answer))
    }

    /// Stages 3 to 6 for iteration `k`'s answers.
    pub(super) async fn conclude(
        &mut self,
        k: u32,
        request: &ChatRequest,
        context: &PromptContext,
        selection: &Selection,
        completions: Vec<super::calls::Answer>,
        observer: &mut dyn Observer,
    ) -> Result<(), EvolveError> {
        let tried = self
            .try_completions(k, request, context, selection, completions)
            .await?;
        let decided = self.decide_and_record(k, context, selection, tried).await?;
        self.publish(k, decided, observer)
    }

    /// The profile summary of candidate `id` (an incumbent, or with
    /// `--profile-every` an attempt, about to be shown), profiling it the
    /// first time (`--profile`): under Nsight
    /// Compute at the largest in-distribution size, the report and the
    /// summary kept in the run directory. The first failure turns
    /// profiling off for the run, said once; the run goes on.
    pub(super) fn profile(&mut self, id: i64) -> Option<String> {
        if !(self.options.profile || self.options.profile_every) {
            return None;
        }
        if let Some(p) = self.profiles.get(&id) {
            return Some(p.clone());
        }
        if self.profiling_off.is_some() {
            return None;
        }
        let result = if self.dialect != Dialect::Cuda {
            Err("--profile needs the CUDA backend (Nsight Compute profiles CUDA kernels)".into())
        } else {
            let size = self
                .plan
                .in_distribution
                .last()
                .expect("a size plan has sizes")
                .clone();
            let report = self.dir.path().join(format!("profile_{id}.ncu-rep"));
            let config = self.options.worker_config();
            tokio::task::block_in_place(|| {
                kevo_worker::profiler::profile_task(
                    &self.env.worker,
                    config,
                    self.task,
                    &self.sources[&id],
                    &size,
                    &report,
                )
            })
            .map_err(|e| e.to_string())
        };
        match result {
            Ok(p) => {
                self.profiling_s += p.profiling_s;
                let summary = p.summary();
                // The run directory keeps what the model was shown; a
                // failed write loses only that copy.
                let _ = std::fs::write(
                    self.dir.path().join(format!("profile_{id}.txt")),
                    format!(
                        "{summary}

(profiled in {:.1} s; {:.1} s of profiling in this run so far)
",
                        p.profiling_s, self.profiling_s
                    )
                    .as_bytes(),
                );
                self.profiles.insert(id, summary.clone());
                Some(summary)
            }
            Err(reason) => {
                eprintln!("kevo: no profiles in this run: {reason}");
                self.profiling_off = Some(reason);
                None
            }
        }
    }

    /// The winner run under each `--sanitize-winner` tool at the task's
    /// smoke sizes (CUDA): unsafe on any error a tool reports. None when
    /// no tool was asked for.
    pub(super) fn sanitize_winner(&mut self, id: i64) -> Option<crate::verdict::Safety> {
        if self.options.sanitize_winner.is_empty() {
            return None;
        }
        let tools = self.options.sanitize_winner.join(",");
        if self.dialect != Dialect::Cuda {
            return Some(crate::verdict::Safety::not_checked(
                &tools,
                "compute-sanitizer checks CUDA kernels; this run is not on CUDA".into(),
            ));
        }
        let sizes = self.task.sizes(kevo_tasks::SizeSet::Smoke).in_distribution;
        let mut checks = Vec::new();
        for name in &self.options.sanitize_winner {
            let tool: kevo_worker::sanitizer::SanitizerTool = match name.parse() {
                Ok(t) => t,
                Err(e) => {
                    checks.push((name.clone(), Err(e)));
                    continue;
                }
            };
            let started = Instant::now();
            let result = tokio::task::block_in_place(|| {
                kevo_worker::sanitizer::sanitized_evaluation(
                    &self.env.worker,
                    self.options.worker_config(),
                    tool,
                    &kevo_worker::sanitizer::SanitizeRequest {
                        task: self.task,
                        source: &self.sources[&id],
                        sizes: &sizes,
                        // The sanitizer slows kernels 10-100x.
                        timeout: self.timeout * 20,
                        log_dir: self.dir.path(),
                    },
                )
            });
            self.evaluating += started.elapsed();
            checks.push((
                name.clone(),
                result.map(|e| e.outcome).map_err(|e| e.to_string()),
            ));
        }
        let safety = crate::verdict::Safety::from_checks(&checks);
        eprintln!(
            "kevo: winner under compute-sanitizer ({tools}): {}",
            safety.line()
        );
        Some(safety)
    }

    /// The performance analyst's recommendation about candidate `id` (a
    /// kernel about to be shown for improvement as `role`), asked the
    /// first time (`--analyst`). Analysing the kernel the next prompt
    /// builds on, once, rather than every proposal: a losing candidate is
    /// never improved upon, and (1+1) shows one incumbent for many
    /// iterations. The call is stored as it returns (purpose "analysis",
    /// tied to `id`), with its prompt and answer in the run directory. A
    /// failed call, or an answer with no recommendation, leaves the prompt
    /// without one; after [`ANALYST_GIVE_UP`] in a row the run stops
    /// asking, said once.
    pub(super) async fn analysis(
        &mut self,
        id: i64,
        profile: Option<&str>,
        role: &str,
    ) -> Result<Option<String>, EvolveError> {
        let Some(analyst) = self.analyst.clone() else {
            return Ok(None);
        };
        if let Some(a) = self.analyses.get(&id) {
            return Ok(Some(a.clone()));
        }
        if self.analyst_failures >= ANALYST_GIVE_UP {
            return Ok(None);
        }
        let request = self
            .prompts
            .analyst_request(&kevo_proposer::AnalystContext {
                source: &self.sources[&id],
                evaluation: &self.evaluations[&id],
                profile,
                role,
            })?;
        static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let token = u64::MAX - TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sent = Instant::now();
        self.env.in_flight.lock().push(InFlightCall {
            token,
            purpose: "analysis",
            run: self.run.clone(),
            iteration: self.iteration,
            provider: analyst.label(),
            system: request.system.clone(),
            user: request.user.clone(),
            sent,
        });
        let result = analyst.complete(&request).await;
        self.env.in_flight.lock().retain(|c| c.token != token);
        let asked = NewLlmCall {
            purpose: "analysis".into(),
            ..proposal_call(
                analyst.label(),
                &request.system,
                &request.user,
                sent.elapsed().as_secs_f64(),
            )
        };
        let (call, failure) = match &result {
            Ok(c) => {
                let recommendation = kevo_proposer::recommendation(&c.text);
                // The run directory keeps what was asked and answered; a
                // failed write loses only that copy.
                let _ = self.dir.write_analysis(
                    id,
                    &request.system,
                    &request.user,
                    &c.text,
                    recommendation.as_deref(),
                );
                if let Some(r) = recommendation {
                    self.analyses.insert(id, r);
                }
                let failure = (!self.analyses.contains_key(&id))
                    .then(|| "its answer held no recommendation".to_string());
                (with_answer(asked, c), failure)
            }
            Err(e) => (
                NewLlmCall {
                    error: Some(e.to_string()),
                    transcript: None,
                    ..asked
                },
                // A budget stop is the budget's: the generator's call
                // stops the run.
                (!e.is_budget_stop()).then(|| e.to_string()),
            ),
        };
        self.env
            .store
            .record_llm_call(&self.run, Some(CandidateId(id)), self.iteration, &call)
            .await?;
        if let Some(reason) = failure {
            self.analyst_failures += 1;
            if self.analyst_failures == 1 {
                eprintln!(
                    "kevo: the analyst gave no recommendation about candidate {id} ({reason}); the prompt goes without one"
                );
            }
            if self.analyst_failures == ANALYST_GIVE_UP {
                eprintln!(
                    "kevo: the analyst failed {ANALYST_GIVE_UP} times in a row; this run asks it no more"
                );
            }
        } else if result.is_ok() {
            self.analyst_failures = 0;
        }
        Ok(self.analyses.get(&id).cloned())
    }
}
