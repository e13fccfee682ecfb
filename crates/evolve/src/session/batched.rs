//! `--llm batch:PROVIDER:MODEL`: prompts go out through the provider's
//! batch endpoint (half price, answers within hours). The loop hands out up
//! to `--concurrency K` prompts as pending proposals (as `kevo ask` does),
//! submits them as one batch, stores the batch's id on them, polls every
//! `--batch-poll-s` seconds, and records each answer as the next iteration
//! once the batch ended, marking its proposal answered in that iteration's
//! transaction. A kevo killed while a batch runs resumes by polling the
//! stored batch, not by sending its prompts again; prompts asked but not
//! yet recorded as sent (a kill between the two) are sent on resume.

use std::sync::Arc;
use std::time::Duration;

use kevo_proposer::{ChatRequest, ProviderError};
use kevo_store::ProposalId;

use super::base::Session;
use super::error::EvolveError;
use super::events::{Event, Observer};

use kevo_proposer::{BatchProvider, BatchState};
use kevo_store::{ProposalStatus, StoredProposal};

/// Consecutive failed polls after which the run stops (resumable).
const MAX_POLL_FAILURES: u32 = 5;

/// The custom id a proposal's request carries in a batch.
fn custom_id(id: ProposalId) -> String {
    format!("kevo-{}", id.0)
}

impl Session<'_> {
    pub(super) async fn run_batched(
        &mut self,
        batch: Arc<BatchProvider>,
        observer: &mut dyn Observer,
    ) -> Result<String, EvolveError> {
        let poll_every = Duration::from_secs_f64(self.options.batch_poll_s.max(0.01));
        loop {
            let pending: Vec<StoredProposal> = self
                .env
                .store
                .proposals(&self.run)
                .await?
                .into_iter()
                .filter(|p| p.status == ProposalStatus::Pending)
                .collect();
            if pending.is_empty() {
                if let Some(reason) = self.stop_reason(self.iteration + 1) {
                    return Ok(reason);
                }
                self.ask(self.options.concurrency.max(1)).await?;
                continue;
            }
            let unsent: Vec<&StoredProposal> =
                pending.iter().filter(|p| p.batch.is_none()).collect();
            if !unsent.is_empty() {
                let requests: Vec<(String, ChatRequest)> = unsent
                    .iter()
                    .map(|p| {
                        (
                            custom_id(p.id),
                            ChatRequest::new(p.proposal.system.clone(), p.proposal.user.clone()),
                        )
                    })
                    .collect();
                let id = match batch.submit(&requests).await {
                    Ok(id) => id,
                    Err(e) if e.is_budget_stop() => return Ok(e.to_string()),
                    Err(e) => return Err(e.into()),
                };
                let ids: Vec<ProposalId> = unsent.iter().map(|p| p.id).collect();
                self.env
                    .store
                    .set_proposal_batch(&self.run, &ids, &id)
                    .await?;
                observer.on(&Event::Batch {
                    batch: id,
                    status: "submitted".into(),
                    done: 0,
                    total: requests.len() as u64,
                });
                continue;
            }
            // The oldest batch still out.
            let id = pending[0].batch.clone().expect("every unsent one was sent");
            let members: Vec<StoredProposal> = pending
                .into_iter()
                .filter(|p| p.batch.as_deref() == Some(id.as_str()))
                .collect();
            let mut failures = 0;
            let (status, mut results) = loop {
                // A batch may take a day: the wall-time limit ends the run
                // while it waits; the batch is cancelled and its prompts
                // withdrawn (the provider bills what it answered).
                if let Some(limit) = self.options.max_wall_s
                    && self.spent().wall_s >= limit
                {
                    if let Err(e) = batch.cancel(&id).await {
                        kevo_proposer::notice::notice(&format!(
                            "batch {id} could not be cancelled: {e}"
                        ));
                    }
                    return Ok(format!(
                        "wall-time limit of {limit:.0} s reached while batch {id} runs"
                    ));
                }
                match batch.poll(&id).await {
                    Ok(BatchState::Ended { status, results }) => break (status, results),
                    Ok(BatchState::Running {
                        status,
                        done,
                        total,
                    }) => {
                        failures = 0;
                        observer.on(&Event::Batch {
                            batch: id.clone(),
                            status,
                            done,
                            total,
                        });
                    }
                    Err(e) => {
                        failures += 1;
                        if failures >= MAX_POLL_FAILURES {
                            return Err(e.into());
                        }
                        kevo_proposer::notice::notice(&format!(
                            "polling batch {id} failed ({failures} of {MAX_POLL_FAILURES}): {e}"
                        ));
                    }
                }
                tokio::time::sleep(poll_every).await;
            };
            observer.on(&Event::Batch {
                batch: id.clone(),
                status: status.clone(),
                done: results.len() as u64,
                total: members.len() as u64,
            });
            for p in members {
                let result = results.remove(&custom_id(p.id)).unwrap_or_else(|| {
                    Err(ProviderError::Permanent {
                        provider: batch.label(),
                        message: format!(
                            "batch {id} ended ({status}) without answering this request"
                        ),
                    })
                });
                self.answer(p, result, None, chrono::Utc::now(), observer)
                    .await?;
            }
        }
    }
}
