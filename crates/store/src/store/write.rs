//! Write transactions on either backend ([`Write`]), and the inserts and
//! checks that several of them share: model calls, evaluations,
//! re-measurements, validations, and that candidates belong to the run.

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{Postgres, Sqlite, Transaction};

use super::values::{PreparedEvaluation, clean_opt, clean_text, clean_value, finite, to_i64};
use super::{Pool, Store};
use crate::StoreError;
use crate::model::{
    CandidateId, EvaluationKind, NewLlmCall, NewRemeasurement, NewValidation, RunId,
};

const INSERT_LLM_CALL: &str = "INSERT INTO llm_calls (run_id, candidate_id, iteration, purpose, \
     provider, model, prompt_system, prompt_user, response, reasoning, input_tokens, \
     output_tokens, reasoning_tokens, cost_usd, latency_s, error, created_at, transcript) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) \
     RETURNING id";

const INSERT_EVALUATION: &str = "INSERT INTO evaluations (candidate_id, kind, outcome_kind, \
     score, device, backend, evaluation, reused_from, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id";

/// An open transaction of either backend; [`on_tx!`] runs a query on it.
pub(super) enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

/// A write transaction, named by what it is for ("record iteration"), the
/// name its database errors carry. Dropped without [`Write::commit`] (an
/// error returned half-way), it rolls back: nothing of it is stored.
pub(super) struct Write<'s> {
    store: &'s Store,
    what: &'static str,
    pub(super) tx: Tx,
}

impl<'s> Write<'s> {
    /// Starts a transaction that will write. SQLite takes the write lock up
    /// front (`BEGIN IMMEDIATE`): a deferred transaction that reads first and
    /// writes later can fail outright when another connection wrote
    /// meanwhile, instead of waiting.
    pub(super) async fn begin(store: &'s Store, what: &'static str) -> Result<Self, StoreError> {
        let tx = match &store.pool {
            Pool::Sqlite(pool) => pool.begin_with("BEGIN IMMEDIATE").await.map(Tx::Sqlite),
            Pool::Postgres(pool) => pool.begin().await.map(Tx::Postgres),
        }
        .map_err(store.db(what))?;
        Ok(Write { store, what, tx })
    }

    /// Commits everything written.
    pub(super) async fn commit(self) -> Result<(), StoreError> {
        match self.tx {
            Tx::Sqlite(tx) => tx.commit().await,
            Tx::Postgres(tx) => tx.commit().await,
        }
        .map_err(self.store.db(self.what))
    }

    /// Returns an error unless every candidate of `ids` exists and belongs
    /// to `run`: a record about another run's candidate is a bug.
    pub(super) async fn ensure_run_owns(
        &mut self,
        run: &RunId,
        ids: &[CandidateId],
    ) -> Result<(), StoreError> {
        for &id in ids {
            let owner: Option<String> = on_tx!(self, async |conn| {
                sqlx::query_scalar("SELECT run_id FROM candidates WHERE id = $1")
                    .bind(id.0)
                    .fetch_optional(conn)
                    .await
            })
            .map_err(self.store.db(self.what))?;
            match owner {
                None => return Err(StoreError::CandidateNotFound(id)),
                Some(owner) if owner != run.0 => {
                    return Err(StoreError::InvalidRecord(format!(
                        "candidate {id} belongs to run `{owner}`, not `{}`",
                        run
                    )));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Inserts one model call of `run` made for `iteration` (about
    /// `candidate`, if any) and returns its id; token counts too large to
    /// store are refused.
    pub(super) async fn insert_llm_call(
        &mut self,
        run: &RunId,
        candidate: Option<i64>,
        iteration: i64,
        call: &NewLlmCall,
        at: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let tokens = |t: Option<u64>, what: &str| t.map(|t| to_i64(t, what)).transpose();
        let input_tokens = tokens(call.input_tokens, "input tokens")?;
        let output_tokens = tokens(call.output_tokens, "output tokens")?;
        let reasoning_tokens = tokens(call.reasoning_tokens, "reasoning tokens")?;
        // JSON text escapes NUL itself (\u0000), which PostgreSQL's TEXT
        // refuses raw.
        let transcript = call.transcript.as_ref().map(|t| t.to_string());
        on_tx!(self, async |conn| {
            sqlx::query_scalar::<_, i64>(INSERT_LLM_CALL)
                .bind(&run.0)
                .bind(candidate)
                .bind(iteration)
                .bind(clean_text(&call.purpose))
                .bind(clean_text(&call.provider))
                .bind(clean_text(&call.model))
                .bind(clean_text(&call.prompt_system))
                .bind(clean_text(&call.prompt_user))
                .bind(clean_opt(&call.response))
                .bind(clean_opt(&call.reasoning))
                .bind(input_tokens)
                .bind(output_tokens)
                .bind(reasoning_tokens)
                .bind(finite(call.cost_usd))
                .bind(call.latency_s)
                .bind(clean_opt(&call.error))
                .bind(at)
                .bind(&transcript)
                .fetch_one(conn)
                .await
        })
        .map_err(self.store.db(self.what))
    }

    /// Inserts an evaluation of `candidate` and returns its id.
    pub(super) async fn insert_evaluation(
        &mut self,
        candidate: i64,
        kind: EvaluationKind,
        ev: &PreparedEvaluation,
        reused_from: Option<i64>,
        at: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        on_tx!(self, async |conn| {
            sqlx::query_scalar::<_, i64>(INSERT_EVALUATION)
                .bind(candidate)
                .bind(kind.as_str())
                .bind(ev.outcome_kind)
                .bind(ev.score)
                .bind(&ev.device)
                .bind(&ev.backend)
                .bind(Json(&ev.json))
                .bind(reused_from)
                .bind(at)
                .fetch_one(conn)
                .await
        })
        .map_err(self.store.db(self.what))
    }

    /// Inserts one re-measurement of `run` at `iteration` and returns its
    /// id.
    pub(super) async fn insert_remeasurement(
        &mut self,
        run: &RunId,
        iteration: i64,
        r: &NewRemeasurement,
        at: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let candidates: Vec<i64> = r.candidates.iter().map(|c| c.0).collect();
        on_tx!(self, async |conn| {
            sqlx::query_scalar::<_, i64>(
                "INSERT INTO remeasurements (run_id, iteration, purpose, candidates, verdict, \
                 rounds, evaluations, device_s, wall_s, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
            )
            .bind(&run.0)
            .bind(iteration)
            .bind(r.purpose.as_str())
            .bind(Json(serde_json::json!(candidates)))
            .bind(clean_text(&r.verdict).into_owned())
            .bind(Json(clean_value(&r.rounds).into_owned()))
            .bind(i64::from(r.evaluations))
            .bind(r.device_s)
            .bind(r.wall_s)
            .bind(at)
            .fetch_one(conn)
            .await
        })
        .map_err(self.store.db(self.what))
    }

    /// Inserts one validation of `run` at `iteration`, its candidate
    /// resolved to the stored `candidate`, and returns its id.
    pub(super) async fn insert_validation(
        &mut self,
        run: &RunId,
        iteration: i64,
        candidate: i64,
        v: &NewValidation,
        at: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let evaluation = serde_json::to_value(&v.evaluation).map_err(|cause| StoreError::Json {
            what: "evaluation",
            cause,
        })?;
        on_tx!(self, async |conn| {
            sqlx::query_scalar::<_, i64>(
                "INSERT INTO validations (run_id, iteration, candidate_id, passed, reason, \
                 evaluation, device_s, wall_s, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            )
            .bind(&run.0)
            .bind(iteration)
            .bind(candidate)
            .bind(v.passed)
            .bind(clean_text(&v.reason).into_owned())
            .bind(Json(clean_value(&evaluation).into_owned()))
            .bind(v.device_s)
            .bind(v.wall_s)
            .bind(at)
            .fetch_one(conn)
            .await
        })
        .map_err(self.store.db(self.what))
    }
}
