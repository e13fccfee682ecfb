//! The loop: one iteration after another, sequentially or with proposals in
//! flight concurrently.

use std::collections::HashMap;

use kevo_proposer::ChatRequest;
use kevo_strategy::Selection;

use super::base::Session;
use super::calls::Calls;
use super::error::EvolveError;
use super::events::{Event, Observer};
use super::summary::Summary;
use super::values::PromptContext;

impl<'e> Session<'e> {
    pub(super) async fn run_loop(
        &mut self,
        observer: &mut dyn Observer,
    ) -> Result<Summary, EvolveError> {
        if self.resumed_from.is_some() {
            observer.on(&Event::Started {
                run: self.run.0.clone(),
                task: self.task.name().into(),
                device: self.pool.device().name.clone(),
                backend: self.pool.device().backend,
                resumed_from: self.resumed_from,
                iterations: self.options.iterations,
                sandbox: self.pool.sandbox().summary(),
            });
        }
        let stopped = if let Some(batch) = self.batch.clone() {
            self.run_batched(batch, observer).await
        } else if self.options.concurrency > 1 {
            self.run_concurrently(observer).await
        } else {
            self.run_sequentially(observer).await
        };
        let stop_reason = match stopped {
            Ok(reason) => reason,
            Err(e) => {
                let _ = self
                    .env
                    .store
                    .mark_interrupted(&self.run, &e.to_string())
                    .await;
                return Err(e);
            }
        };
        if let Some(reason) = self.refused.take() {
            return Err(self.fail(reason).await);
        }
        self.finish(stop_reason, observer).await
    }

    /// Marks the run failed with `reason`; the error to end with.
    pub(super) async fn fail(&mut self, reason: String) -> EvolveError {
        if let Err(e) = self.env.store.mark_failed(&self.run, &reason).await {
            return e.into();
        }
        EvolveError::RunFailed {
            run: self.run.0.clone(),
            reason,
        }
    }

    /// One prompt at a time until a stop rule holds; the reason.
    pub(super) async fn run_sequentially(
        &mut self,
        observer: &mut dyn Observer,
    ) -> Result<String, EvolveError> {
        loop {
            let next = self.iteration + 1;
            if let Some(reason) = self.stop_reason(next) {
                return Ok(reason);
            }
            match self.run_iteration(next, observer).await {
                Ok(()) => self.iteration = next,
                Err(EvolveError::Provider(e)) if e.is_budget_stop() => return Ok(e.to_string()),
                Err(e) => return Err(e),
            }
        }
    }

    /// The steady-state loop of `--concurrency K`: up to K prompts' calls
    /// in flight; a freed slot gets a prompt built from the archive as it
    /// is then; each answer is evaluated, decided and stored as the next
    /// iteration as soon as it arrives. Iterations are numbered in arrival
    /// order, so the store stays dense: a kill loses only the calls in
    /// flight, which the resumed run issues again. No call is issued past
    /// a budget; calls already out when a budget stops the run are waited
    /// for and recorded.
    pub(super) async fn run_concurrently(
        &mut self,
        observer: &mut dyn Observer,
    ) -> Result<String, EvolveError> {
        let slots = self.options.concurrency.max(1);
        let mut flights: tokio::task::JoinSet<(u64, Calls)> = tokio::task::JoinSet::new();
        let mut waiting: HashMap<u64, (Selection, PromptContext, ChatRequest)> = HashMap::new();
        let mut next_flight = 0u64;
        let mut stop: Option<String> = None;
        let arrived = self.arrived.clone();
        loop {
            while stop.is_none() && self.in_flight < slots {
                let next = self.iteration + self.in_flight + 1;
                if let Some(reason) = self.stop_reason(next) {
                    stop = Some(reason);
                    break;
                }
                let (selection, context, request) = self.next_prompt(next).await?;
                let calls = self.issue(next, &request, &context);
                let id = next_flight;
                next_flight += 1;
                let arrived = arrived.clone();
                flights.spawn(async move {
                    let calls = calls.await;
                    arrived.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    (id, calls)
                });
                waiting.insert(id, (selection, context, request));
                self.in_flight += 1;
            }
            let Some(joined) = flights.join_next().await else {
                break;
            };
            let (id, calls) = joined?;
            arrived.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            self.in_flight -= 1;
            let (selection, context, request) =
                waiting.remove(&id).expect("every flight is waited for");
            let completions = match calls {
                Ok(c) => c,
                Err(EvolveError::Provider(e)) if e.is_budget_stop() => {
                    stop.get_or_insert_with(|| e.to_string());
                    continue;
                }
                Err(e) => return Err(e),
            };
            let k = self.iteration + 1;
            self.dir.write_prompt(k, &request.system, &request.user)?;
            self.conclude(k, &request, &context, &selection, completions, observer)
                .await?;
            self.iteration = k;
        }
        Ok(stop.unwrap_or_else(|| format!("{} iterations done", self.options.iterations)))
    }

    /// One iteration in stages: prompt, model calls, extraction and
    /// evaluation, decision and storage, artifacts and event.
    pub(super) async fn run_iteration(
        &mut self,
        k: u32,
        observer: &mut dyn Observer,
    ) -> Result<(), EvolveError> {
        let (selection, context, request) = self.next_prompt(k).await?;
        self.dir.write_prompt(k, &request.system, &request.user)?;
        let completions = self.issue(k, &request, &context).await?;
        self.conclude(k, &request, &context, &selection, completions, observer)
            .await
    }

    /// Stage 1: the strategy's selection, its context and the request of
    /// proposal `k` (with `--meta-prompter`, after the meta-prompter's
    /// turn when one is due, with a sampled prompt variant).
    pub(super) async fn next_prompt(
        &mut self,
        k: u32,
    ) -> Result<(Selection, PromptContext, ChatRequest), EvolveError> {
        self.meta_step(k).await?;
        let selection = self
            .strategy
            .as_deref_mut()
            .expect("seed evaluated")
            .select();
        let mut context = self.prompt_context(&selection).await?;
        context.prompt_variant = self.state.prompts.as_mut().map(|a| a.sample());
        let request = self.request(&context, &selection)?;
        Ok((selection, context, request))
    }
}
