//! Driving a run from outside (`--llm external`): `kevo ask` hands out the
//! next prompts without calling any model, `kevo tell` brings one answer,
//! which is extracted, evaluated, decided and stored exactly as a
//! provider's would be, and `kevo finish` ends the run with the final pick
//! and the held-out gate. Between commands the run waits (stored as
//! interrupted, with that reason), so an agent, a person or a cluster job
//! may take days over it.
//!
//! A prompt's selection is stored with it, and the strategy state its
//! selection left (random draws, round-robins) replaces that of the
//! checkpoint it was asked after, so the next `ask` continues from there.
//! An answer is recorded once: its proposal is marked answered in the
//! iteration's own transaction.
//!
//! Prompts are written and answers kept without the run's device (the
//! device the run recorded stands in for it): `ask` and `tell --defer` work
//! on a coordinator without a GPU, and `tell --deferred` (or `finish`)
//! evaluates the kept answers where the device is. The store is what
//! travels between the two, for evaluation hosts with no network path to
//! the coordinator.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use kevo_proposer::{ChatRequest, Completion, ProviderError, Usage};
use kevo_store::{ProposalId, RunId, StoreError};
use kevo_strategy::Selection;
use serde::Serialize;

use super::base::{Environment, Session};
use super::error::EvolveError;
use super::events::{Event, Observer};
use super::state::stored_options;
use super::summary::Summary;
use crate::EvolveOptions;

use kevo_store::{NewProposal, ProposalStatus, RunStatus};

/// The status reason of a run that waits for `kevo ask` and `kevo tell`.
fn waiting_reason(run: &str) -> String {
    format!(
        "waiting for proposals: `kevo ask {run}`, then `kevo tell {run} ID FILE`; `kevo finish {run}` ends it"
    )
}

/// An answer brought from outside: its text, who answered (if said) and
/// when it was told.
struct Answer<'a> {
    text: &'a str,
    model: Option<&'a str>,
    at: DateTime<Utc>,
}

/// A prompt handed out by [`ask`].
#[derive(Debug, Clone, Serialize)]
pub struct Asked {
    /// The id `kevo tell` answers.
    pub proposal: i64,
    pub run: String,
    /// The run's last recorded iteration when it was asked.
    pub asked_after: u32,
    /// The candidate the answer should improve on, and the rule that chose
    /// it ("incumbent", "curiosity", ...).
    pub parent: i64,
    pub how: String,
    /// The parent's island (islands strategy).
    pub island: Option<u32>,
    /// The prompt as a file: `<run dir>/ask/<proposal>_prompt.md`.
    pub prompt_file: PathBuf,
    pub system: String,
    pub user: String,
}

/// Create a run driven from outside: its seed is evaluated and stored, and
/// the run then waits for `kevo ask`. Returns the run's id.
pub async fn create(
    options: EvolveOptions,
    env: &Environment,
    observer: &mut dyn Observer,
) -> Result<String, EvolveError> {
    let task = kevo_tasks::resolve(&options.task)?;
    if !options.is_external() {
        return Err(EvolveError::NotExternal {
            run: "a new run".into(),
        });
    }
    let mut session = Session::open(options, task, env, None, None).await?;
    observer.on(&Event::Created {
        run: session.run.0.clone(),
    });
    session.run_seed(observer).await?;
    session.wait().await?;
    Ok(session.run.0.clone())
}

/// The next `n` prompts of an external run, stored as pending proposals
/// (fewer when a budget leaves room for fewer; none is an error).
pub async fn ask(run: &str, n: u32, env: &Environment) -> Result<Vec<Asked>, EvolveError> {
    let mut session = open_external(run, env, Host::Recorded).await?;
    let asked = session.ask(n).await;
    session.wait().await?;
    asked
}

/// What an external run waits for once an answer is recorded: another
/// prompt, or (its budget spent) the pending answers and `kevo finish`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Ask,
    /// No prompt is left to hand out (`reason`); `pending` proposals may
    /// still be answered before the run is finished.
    Finish {
        reason: String,
        pending: u32,
    },
}

/// An answer recorded: the iteration it became and what comes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Told {
    pub iteration: u32,
    pub next: Next,
}

/// Record `response` as the answer to proposal `proposal`: extracted,
/// evaluated, decided and stored as the run's next iteration, which is
/// returned with what the run waits for next. A response with nothing to evaluate is refused and nothing
/// is stored. `model` names who answered (stored with the call).
pub async fn tell(
    run: &str,
    proposal: i64,
    response: &str,
    model: Option<&str>,
    env: &Environment,
    observer: &mut dyn Observer,
) -> Result<Told, EvolveError> {
    let run_id = RunId(run.to_string());
    let stored = pending_proposal(env, &run_id, proposal).await?;
    let mut session = open_external(run, env, Host::Device).await?;
    let answer = Answer {
        text: response,
        model,
        at: Utc::now(),
    };
    let told = match session.tell(stored, answer, observer).await {
        Ok(iteration) => session.next_after(iteration).await,
        Err(e) => Err(e),
    };
    session.wait().await?;
    told
}

/// A pending proposal of a run that is not finished, with no answer kept
/// for it yet.
pub(super) async fn pending_proposal(
    env: &Environment,
    run: &RunId,
    proposal: i64,
) -> Result<kevo_store::StoredProposal, EvolveError> {
    // Checked before the run is opened (and its device started).
    if env.store.run(run).await?.status == RunStatus::Finished {
        return Err(EvolveError::RunFinished { run: run.0.clone() });
    }
    let stored = env.store.proposal(run, ProposalId(proposal)).await?;
    if stored.status != ProposalStatus::Pending {
        return Err(StoreError::ProposalClosed {
            run: run.clone(),
            id: stored.id,
            status: stored.status,
            iteration: stored.iteration,
        }
        .into());
    }
    if let Some(d) = &stored.deferred {
        return Err(StoreError::AnswerDeferred {
            run: run.clone(),
            id: stored.id,
            told_at: d.told_at,
        }
        .into());
    }
    Ok(stored)
}

/// An answer kept by [`defer`], and how many of the run's answers now
/// wait to be evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct Deferred {
    pub answer: kevo_store::DeferredAnswer,
    pub waiting: u32,
}

/// Keep `response` as the answer to proposal `proposal` without evaluating
/// it: checked for code here (without the run's device) and stored with
/// the proposal, to be recorded as an iteration by [`tell_deferred`] (or
/// [`finish`]) on a host with the device. Nothing is evaluated or decided.
pub async fn defer(
    run: &str,
    proposal: i64,
    response: &str,
    model: Option<&str>,
    env: &Environment,
) -> Result<Deferred, EvolveError> {
    let run_id = RunId(run.to_string());
    let stored = pending_proposal(env, &run_id, proposal).await?;
    let mut session = open_external(run, env, Host::Recorded).await?;
    let checked = session.check_answer(&stored, response).await;
    session.wait().await?;
    checked?;
    let answer = env
        .store
        .defer_answer(&run_id, stored.id, response, model)
        .await?;
    let waiting = deferred_of(env, &run_id).await?.len() as u32;
    Ok(Deferred { answer, waiting })
}

/// The runs that are not finished and hold answers kept with `--defer`,
/// oldest first.
pub async fn runs_with_deferred(env: &Environment) -> Result<Vec<String>, EvolveError> {
    let mut runs = Vec::new();
    for listed in env.store.list_runs().await?.into_iter().rev() {
        if listed.status != RunStatus::Finished && !deferred_of(env, &listed.id).await?.is_empty() {
            runs.push(listed.id.0);
        }
    }
    Ok(runs)
}

/// Every answer of `run` kept with `--defer`, in the order they were asked.
async fn deferred_of(
    env: &Environment,
    run: &RunId,
) -> Result<Vec<kevo_store::StoredProposal>, EvolveError> {
    Ok(env
        .store
        .proposals(run)
        .await?
        .into_iter()
        .filter(|p| p.status == ProposalStatus::Pending && p.deferred.is_some())
        .collect())
}

/// Record every answer of `run` kept with `--defer`, in the order the
/// prompts were asked, each exactly as `tell` would: the proposal and the
/// iteration it became, and what the run waits for next. Each answer is
/// its own transaction: if one fails to be recorded the ones before it
/// stay recorded and the rest stay kept, for the next attempt.
pub async fn tell_deferred(
    run: &str,
    env: &Environment,
    observer: &mut dyn Observer,
) -> Result<(Vec<(i64, u32)>, Told), EvolveError> {
    let run_id = RunId(run.to_string());
    if env.store.run(&run_id).await?.status == RunStatus::Finished {
        return Err(EvolveError::RunFinished {
            run: run.to_string(),
        });
    }
    let mut session = open_external(run, env, Host::Device).await?;
    let recorded = session.record_deferred(observer).await;
    let told = match recorded {
        Ok(recorded) => {
            let iteration = recorded
                .last()
                .map(|(_, k)| *k)
                .unwrap_or(session.iteration);
            session.next_after(iteration).await.map(|t| (recorded, t))
        }
        Err(e) => Err(e),
    };
    session.wait().await?;
    told
}

/// End an external run: the final pick among its best, the held-out gate,
/// the summary. Proposals still pending are withdrawn.
pub async fn finish(
    run: &str,
    env: &Environment,
    observer: &mut dyn Observer,
) -> Result<Summary, EvolveError> {
    let mut session = open_external(run, env, Host::Device).await?;
    // Answers kept with --defer are evaluated first: they were meant to count.
    if let Err(e) = session.record_deferred(observer).await {
        session.wait().await?;
        return Err(e);
    }
    let reason = format!(
        "finished by `kevo finish` after {} answered proposal(s)",
        session.iteration
    );
    match session.finish(reason, observer).await {
        Ok(s) => Ok(s),
        Err(e) => {
            session.wait().await?;
            Err(e)
        }
    }
}

/// Where an external run's command works: on the run's device, or with
/// the device as the run recorded it (writing prompts, keeping answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Host {
    Device,
    Recorded,
}

/// Open an external run where its last checkpoint left it. A finished run,
/// and a run that calls its own model, are refused.
pub(super) async fn open_external<'e>(
    run: &str,
    env: &'e Environment,
    host: Host,
) -> Result<Session<'e>, EvolveError> {
    let run_id = RunId(run.to_string());
    let info = env.store.run(&run_id).await?;
    let options = stored_options(&info)?;
    if !options.is_external() {
        return Err(EvolveError::NotExternal {
            run: run.to_string(),
        });
    }
    if info.status == RunStatus::Finished {
        return Err(EvolveError::RunFinished {
            run: run.to_string(),
        });
    }
    let task = kevo_tasks::resolve(&options.task)?;
    let (_, checkpoint) = env.store.resume_run(&run_id).await?;
    let opened = async {
        let recorded = (host == Host::Recorded).then_some(&info.config);
        let mut session = Session::open(options, task, env, Some(run_id.clone()), recorded).await?;
        match checkpoint {
            None => session.run_seed(&mut |_: &Event| {}).await?,
            Some(cp) => session.restore(cp).await?,
        }
        Ok::<_, EvolveError>(session)
    }
    .await;
    if opened.is_err() {
        let _ = env
            .store
            .mark_interrupted(&run_id, &waiting_reason(run))
            .await;
    }
    opened
}

impl Session<'_> {
    /// Back to waiting for the next command.
    pub(super) async fn wait(&self) -> Result<(), EvolveError> {
        self.env
            .store
            .mark_interrupted(&self.run, &waiting_reason(&self.run.0))
            .await?;
        Ok(())
    }

    /// What the run waits for after iteration `iteration` was recorded:
    /// the rule `ask` hands prompts out by, pending proposals counted as
    /// calls in flight.
    async fn next_after(&self, iteration: u32) -> Result<Told, EvolveError> {
        let pending = self.pending().await?;
        let next = match self.stop_reason(self.iteration + pending + 1) {
            None => Next::Ask,
            Some(reason) => Next::Finish { reason, pending },
        };
        Ok(Told { iteration, next })
    }

    async fn pending(&self) -> Result<u32, EvolveError> {
        Ok(self
            .env
            .store
            .proposals(&self.run)
            .await?
            .iter()
            .filter(|p| p.status == ProposalStatus::Pending)
            .count() as u32)
    }

    pub(super) async fn ask(&mut self, n: u32) -> Result<Vec<Asked>, EvolveError> {
        let pending = self.pending().await?;
        let mut asked: Vec<(Selection, ChatRequest)> = Vec::new();
        for i in 0..n {
            // Pending proposals count as calls in flight: no prompt is
            // handed out past a budget.
            if let Some(reason) = self.stop_reason(self.iteration + pending + i + 1) {
                if i == 0 {
                    return Err(EvolveError::NothingToAsk {
                        run: self.run.0.clone(),
                        reason,
                        pending,
                    });
                }
                break;
            }
            let (selection, _, mut request) =
                self.next_prompt(self.iteration + pending + i + 1).await?;
            if let Some(bench) = &self.tools {
                request
                    .user
                    .push_str(&super::external_tools::guidance(&self.run.0, bench));
            }
            asked.push((selection, request));
        }
        let proposals = asked
            .iter()
            .map(|(selection, request)| {
                Ok(NewProposal {
                    system: request.system.clone(),
                    user: request.user.clone(),
                    selection: serde_json::to_value(selection).map_err(|source| {
                        EvolveError::Serialize {
                            what: "a selection",
                            source,
                        }
                    })?,
                })
            })
            .collect::<Result<Vec<_>, EvolveError>>()?;
        let mut state = self.state.clone();
        state.search = Some(self.strategy.as_deref().expect("seed evaluated").state());
        let ids = self
            .env
            .store
            .add_proposals(
                &self.run,
                self.iteration,
                &proposals,
                Some(&state.to_json()),
            )
            .await?;
        self.state = state;
        ids.into_iter()
            .zip(asked)
            .map(|(id, (selection, request))| {
                Ok(Asked {
                    proposal: id.0,
                    run: self.run.0.clone(),
                    asked_after: self.iteration,
                    parent: selection.parent,
                    how: selection.how.clone(),
                    island: selection.island,
                    prompt_file: self.dir.write_asked(id.0, &request.system, &request.user)?,
                    system: request.system,
                    user: request.user,
                })
            })
            .collect()
    }

    /// Refuse an answer with nothing to evaluate before anything is
    /// stored: the agent can fix it and tell again.
    async fn check_answer(
        &mut self,
        proposal: &kevo_store::StoredProposal,
        response: &str,
    ) -> Result<(), EvolveError> {
        let selection = self.selection_of(proposal)?;
        let context = self.prompt_context(&selection).await?;
        match self.extract(response, &context.incumbent_source) {
            Ok(_) => Ok(()),
            Err((_, reason)) => Err(EvolveError::NoCodeInAnswer {
                proposal: proposal.id.0,
                reason,
            }),
        }
    }

    /// Record the run's answers kept with `--defer`, in proposal order.
    async fn record_deferred(
        &mut self,
        observer: &mut dyn Observer,
    ) -> Result<Vec<(i64, u32)>, EvolveError> {
        let mut recorded = Vec::new();
        for mut proposal in deferred_of(self.env, &self.run).await? {
            let kept = proposal.deferred.take().expect("filtered on a kept answer");
            let answer = Answer {
                text: &kept.text,
                model: kept.model.as_deref(),
                at: kept.told_at,
            };
            let id = proposal.id.0;
            let iteration = self.tell(proposal, answer, observer).await?;
            recorded.push((id, iteration));
        }
        Ok(recorded)
    }

    async fn tell(
        &mut self,
        proposal: kevo_store::StoredProposal,
        answer: Answer<'_>,
        observer: &mut dyn Observer,
    ) -> Result<u32, EvolveError> {
        self.check_answer(&proposal, answer.text).await?;
        let completion = Completion {
            text: answer.text.to_string(),
            reasoning: None,
            usage: Usage::default(),
            cost_usd: None,
            latency: (answer.at - proposal.asked_at).to_std().unwrap_or_default(),
            model: answer.model.unwrap_or("external").to_string(),
            provider: "external".into(),
            finish_reason: None,
            attempts: 1,
            usage_unknown: Some(
                "an answer brought by `kevo tell`: its tokens are not known".into(),
            ),
            member: None,
            tool_calls: Vec::new(),
            native: None,
        };
        self.accounting.record_success("external", &completion);
        // With `kevo tool` calls, the answer ends their conversation: it is
        // stored with it, and it fails as the conversation would have when
        // the calls ended the proposal (a loop, calls past the budget).
        let ledger = self.tool_ledger(proposal.id.0)?;
        let mut transcript = (!ledger.transcript.turns.is_empty()).then_some(ledger.transcript);
        let result = match (&ledger.ended, &mut transcript) {
            (Some(reason), Some(t)) => Err(ProviderError::ToolLoop {
                turns: t.turns.len() as u32,
                reason: reason.clone(),
            }),
            (None, Some(t)) => {
                t.ended = "answered with `kevo tell`".into();
                Ok(completion)
            }
            _ => Ok(completion),
        };
        self.answer(proposal, result, transcript, answer.at, observer)
            .await
    }

    pub(super) fn selection_of(
        &self,
        proposal: &kevo_store::StoredProposal,
    ) -> Result<Selection, EvolveError> {
        serde_json::from_value(proposal.proposal.selection.clone()).map_err(|e| {
            EvolveError::Resume {
                run: self.run.0.clone(),
                reason: format!("proposal {}'s selection is unreadable: {e}", proposal.id),
            }
        })
    }

    /// Record the answer to a pending proposal (a completion, or why there
    /// is none) as the run's next iteration, exactly as a provider's answer
    /// to that prompt would be; the proposal is marked answered in the
    /// iteration's transaction.
    pub(super) async fn answer(
        &mut self,
        proposal: kevo_store::StoredProposal,
        result: Result<Completion, ProviderError>,
        transcript: Option<kevo_proposer::tools::Transcript>,
        answered_at: DateTime<Utc>,
        observer: &mut dyn Observer,
    ) -> Result<u32, EvolveError> {
        let selection = self.selection_of(&proposal)?;
        let context = self.prompt_context(&selection).await?;
        let request = ChatRequest::new(
            proposal.proposal.system.clone(),
            proposal.proposal.user.clone(),
        );
        // The call's latency is how long the proposal was out.
        let latency = (answered_at - proposal.asked_at)
            .to_std()
            .unwrap_or_default()
            .as_secs_f64();
        let k = self.iteration + 1;
        self.dir.write_prompt(k, &request.system, &request.user)?;
        self.answering = Some(proposal.id);
        let concluded = self
            .conclude(
                k,
                &request,
                &context,
                &selection,
                vec![super::calls::Answer {
                    result,
                    latency_s: latency,
                    transcript,
                }],
                observer,
            )
            .await;
        self.answering = None;
        concluded?;
        self.iteration = k;
        Ok(k)
    }
}
