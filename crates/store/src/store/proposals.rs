//! Proposals handed out to be answered later (ask/tell, batch): storing
//! them, reading them, and marking them sent in a batch or withdrawn. An
//! iteration marks the one it answers (see [`super::iteration_steps`]).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::AssertSqlSafe;
use sqlx::types::Json;

use super::Store;
use super::values::{clean_text, clean_value, now};
use super::write::Write;
use crate::StoreError;
use crate::model::{
    DeferredAnswer, NewProposal, ProposalId, ProposalStatus, RunId, RunStatus, StoredProposal,
};

pub(super) const PROPOSAL_COLUMNS: &str = "SELECT id, run_id, asked_after, system, user_prompt, selection, \
     status, batch, iteration, reason, asked_at, closed_at, answer, answer_model, told_at FROM proposals";

#[derive(sqlx::FromRow)]
pub(super) struct ProposalRow {
    id: i64,
    run_id: String,
    asked_after: i64,
    system: String,
    user_prompt: String,
    selection: Json<Value>,
    status: String,
    batch: Option<String>,
    iteration: Option<i64>,
    reason: Option<String>,
    asked_at: DateTime<Utc>,
    closed_at: Option<DateTime<Utc>>,
    answer: Option<String>,
    answer_model: Option<String>,
    told_at: Option<DateTime<Utc>>,
}

impl Store {
    /// Store prompts handed out to be answered later (ask/tell, batch),
    /// asked after iteration `asked_after`, and return their ids. With
    /// `strategy_state`, that iteration's checkpoint takes the strategy's
    /// state as the selections left it (a selection may draw random numbers
    /// or advance a round-robin), in the same transaction: the next session
    /// continues from there instead of selecting the same again.
    pub async fn add_proposals(
        &self,
        run: &RunId,
        asked_after: u32,
        proposals: &[NewProposal],
        strategy_state: Option<&Value>,
    ) -> Result<Vec<ProposalId>, StoreError> {
        let what = "record proposals";
        let at = now();
        let mut write = Write::begin(self, what).await?;
        let status: Option<String> = on_tx!(write, async |conn| {
            sqlx::query_scalar("SELECT status FROM runs WHERE id = $1")
                .bind(&run.0)
                .fetch_optional(conn)
                .await
        })
        .map_err(self.db(what))?;
        let Some(status) = status else {
            return Err(StoreError::RunNotFound(run.clone()));
        };
        let status: RunStatus = self.parse(&status)?;
        if status != RunStatus::Running {
            return Err(StoreError::RunStatus {
                run: run.clone(),
                status,
                why: "proposals can only be added to a running run",
            });
        }
        let mut ids = Vec::with_capacity(proposals.len());
        for p in proposals {
            let id: i64 = on_tx!(write, async |conn| {
                sqlx::query_scalar(
                    "INSERT INTO proposals (run_id, asked_after, system, user_prompt, selection, \
                     status, asked_at) VALUES ($1, $2, $3, $4, $5, 'pending', $6) RETURNING id",
                )
                .bind(&run.0)
                .bind(i64::from(asked_after))
                .bind(clean_text(&p.system))
                .bind(clean_text(&p.user))
                .bind(Json(clean_value(&p.selection).into_owned()))
                .bind(at)
                .fetch_one(conn)
                .await
            })
            .map_err(self.db(what))?;
            ids.push(ProposalId(id));
        }
        if let Some(state) = strategy_state {
            let affected = on_tx!(write, async |conn| {
                sqlx::query(
                    "UPDATE steps SET strategy_state = $1 WHERE run_id = $2 AND iteration = $3",
                )
                .bind(Json(clean_value(state).into_owned()))
                .bind(&run.0)
                .bind(i64::from(asked_after))
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
            })
            .map_err(self.db(what))?;
            if affected != 1 {
                return Err(StoreError::InvalidRecord(format!(
                    "run `{run}` has no checkpoint at iteration {asked_after} to advance"
                )));
            }
        }
        write.commit().await?;
        Ok(ids)
    }

    /// One of `run`'s proposals.
    pub async fn proposal(
        &self,
        run: &RunId,
        id: ProposalId,
    ) -> Result<StoredProposal, StoreError> {
        let row: Option<ProposalRow> = on_pool!(self, async |pool| {
            sqlx::query_as(AssertSqlSafe(format!(
                "{PROPOSAL_COLUMNS} WHERE id = $1 AND run_id = $2"
            )))
            .bind(id.0)
            .bind(&run.0)
            .fetch_optional(pool)
            .await
        })
        .map_err(self.db("read a proposal"))?;
        match row {
            Some(row) => self.proposal_of(row),
            None => Err(StoreError::ProposalNotFound {
                run: run.clone(),
                id,
            }),
        }
    }

    /// `run`'s proposals in the order they were asked.
    pub async fn proposals(&self, run: &RunId) -> Result<Vec<StoredProposal>, StoreError> {
        let rows: Vec<ProposalRow> = on_pool!(self, async |pool| {
            sqlx::query_as(AssertSqlSafe(format!(
                "{PROPOSAL_COLUMNS} WHERE run_id = $1 ORDER BY id"
            )))
            .bind(&run.0)
            .fetch_all(pool)
            .await
        })
        .map_err(self.db("read proposals"))?;
        rows.into_iter().map(|r| self.proposal_of(r)).collect()
    }

    /// Keep `answer` with pending proposal `id` to be evaluated later, on a
    /// host with the run's device (`kevo tell --defer`). `model` says who
    /// answered. Refused, with the reason, for a proposal that is not
    /// pending or already has a deferred answer.
    pub async fn defer_answer(
        &self,
        run: &RunId,
        id: ProposalId,
        answer: &str,
        model: Option<&str>,
    ) -> Result<DeferredAnswer, StoreError> {
        let what = "keep a deferred answer";
        let at = now();
        let affected = on_pool!(self, async |pool| {
            sqlx::query(
                "UPDATE proposals SET answer = $1, answer_model = $2, told_at = $3 \
                 WHERE id = $4 AND run_id = $5 AND status = 'pending' AND answer IS NULL",
            )
            .bind(clean_text(answer))
            .bind(model.map(clean_text))
            .bind(at)
            .bind(id.0)
            .bind(&run.0)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })
        .map_err(self.db(what))?;
        if affected == 1 {
            return Ok(DeferredAnswer {
                text: clean_text(answer).into_owned(),
                model: model.map(|m| clean_text(m).into_owned()),
                told_at: at,
            });
        }
        let stored = self.proposal(run, id).await?;
        match (stored.status, stored.deferred) {
            (ProposalStatus::Pending, Some(d)) => Err(StoreError::AnswerDeferred {
                run: run.clone(),
                id,
                told_at: d.told_at,
            }),
            (status, _) => Err(StoreError::ProposalClosed {
                run: run.clone(),
                id,
                status,
                iteration: stored.iteration,
            }),
        }
    }

    /// Record that pending proposals `ids` went out in the provider's batch
    /// job `batch`.
    pub async fn set_proposal_batch(
        &self,
        run: &RunId,
        ids: &[ProposalId],
        batch: &str,
    ) -> Result<(), StoreError> {
        self.update_pending(run, ids, "batch = $1", batch, false)
            .await
    }

    /// Give up pending proposals `ids`, saying why; answers to them are
    /// refused from then on.
    pub async fn withdraw_proposals(
        &self,
        run: &RunId,
        ids: &[ProposalId],
        reason: &str,
    ) -> Result<(), StoreError> {
        self.update_pending(
            run,
            ids,
            "status = 'withdrawn', reason = $1, closed_at = $4",
            reason,
            true,
        )
        .await
    }

    async fn update_pending(
        &self,
        run: &RunId,
        ids: &[ProposalId],
        set: &'static str,
        value: &str,
        closes: bool,
    ) -> Result<(), StoreError> {
        let what = "update proposals";
        let at = now();
        let sql = format!(
            "UPDATE proposals SET {set} WHERE id = $2 AND run_id = $3 AND status = 'pending'"
        );
        let mut write = Write::begin(self, what).await?;
        for id in ids {
            let affected = on_tx!(write, async |conn| {
                let mut query = sqlx::query(AssertSqlSafe(sql.clone()))
                    .bind(clean_text(value))
                    .bind(id.0)
                    .bind(&run.0);
                if closes {
                    query = query.bind(at);
                }
                query.execute(conn).await.map(|done| done.rows_affected())
            })
            .map_err(self.db(what))?;
            if affected != 1 {
                return Err(StoreError::InvalidRecord(format!(
                    "proposal {id} of run `{run}` is not pending"
                )));
            }
        }
        write.commit().await
    }

    pub(super) fn proposal_of(&self, r: ProposalRow) -> Result<StoredProposal, StoreError> {
        let status: ProposalStatus = self.parse(&r.status)?;
        Ok(StoredProposal {
            id: ProposalId(r.id),
            run_id: RunId(r.run_id),
            asked_after: self.iteration_of(r.asked_after)?,
            proposal: NewProposal {
                system: r.system,
                user: r.user_prompt,
                selection: r.selection.0,
            },
            status,
            batch: r.batch,
            iteration: r.iteration.map(|i| self.iteration_of(i)).transpose()?,
            reason: r.reason,
            asked_at: r.asked_at,
            closed_at: r.closed_at,
            // Once recorded, the answer is its iteration's response.
            deferred: match (r.answer, r.told_at) {
                (Some(text), Some(told_at)) if status == ProposalStatus::Pending => {
                    Some(DeferredAnswer {
                        text,
                        model: r.answer_model,
                        told_at,
                    })
                }
                _ => None,
            },
        })
    }
}
