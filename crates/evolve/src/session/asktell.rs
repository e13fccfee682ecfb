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

use std::path::PathBuf;

use chrono::Utc;
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
    let mut session = Session::open(options, task, env, None).await?;
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
    let mut session = open_external(run, env).await?;
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
    // Checked before the run is opened (and its device started).
    let run_id = RunId(run.to_string());
    if env.store.run(&run_id).await?.status == RunStatus::Finished {
        return Err(EvolveError::RunFinished {
            run: run.to_string(),
        });
    }
    let stored = env.store.proposal(&run_id, ProposalId(proposal)).await?;
    if stored.status != ProposalStatus::Pending {
        return Err(StoreError::ProposalClosed {
            run: run_id,
            id: stored.id,
            status: stored.status,
            iteration: stored.iteration,
        }
        .into());
    }
    let mut session = open_external(run, env).await?;
    let told = match session.tell(stored, response, model, observer).await {
        Ok(iteration) => session.next_after(iteration).await,
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
    let mut session = open_external(run, env).await?;
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

/// Open an external run where its last checkpoint left it. A finished run,
/// and a run that calls its own model, are refused.
async fn open_external<'e>(run: &str, env: &'e Environment) -> Result<Session<'e>, EvolveError> {
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
        let mut session = Session::open(options, task, env, Some(run_id.clone())).await?;
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
    async fn wait(&self) -> Result<(), EvolveError> {
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
            let (selection, _, request) =
                self.next_prompt(self.iteration + pending + i + 1).await?;
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

    async fn tell(
        &mut self,
        proposal: kevo_store::StoredProposal,
        response: &str,
        model: Option<&str>,
        observer: &mut dyn Observer,
    ) -> Result<u32, EvolveError> {
        let selection = self.selection_of(&proposal)?;
        let context = self.prompt_context(&selection).await?;
        // An answer with nothing to evaluate is refused before anything
        // is stored: the agent can fix it and tell again.
        if let Err((_, reason)) = self.extract(response, &context.incumbent_source) {
            return Err(EvolveError::NoCodeInAnswer {
                proposal: proposal.id.0,
                reason,
            });
        }
        let completion = Completion {
            text: response.to_string(),
            reasoning: None,
            usage: Usage::default(),
            cost_usd: None,
            latency: (Utc::now() - proposal.asked_at)
                .to_std()
                .unwrap_or_default(),
            model: model.unwrap_or("external").to_string(),
            provider: "external".into(),
            finish_reason: None,
            attempts: 1,
            usage_unknown: Some(
                "an answer brought by `kevo tell`: its tokens are not known".into(),
            ),
            member: None,
        };
        self.accounting.record_success("external", &completion);
        self.answer(proposal, Ok(completion), observer).await
    }

    fn selection_of(
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
        observer: &mut dyn Observer,
    ) -> Result<u32, EvolveError> {
        let selection = self.selection_of(&proposal)?;
        let context = self.prompt_context(&selection).await?;
        let request = ChatRequest::new(
            proposal.proposal.system.clone(),
            proposal.proposal.user.clone(),
        );
        // The call's latency is how long the proposal was out.
        let latency = (Utc::now() - proposal.asked_at)
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
                vec![(result, latency)],
                observer,
            )
            .await;
        self.answering = None;
        concluded?;
        self.iteration = k;
        Ok(k)
    }
}
