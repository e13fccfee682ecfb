//! Cross-device evaluations (`kevo cross`) of a run's candidates:
//! storing a session of them, all or none, and reading them back.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use super::Store;
use super::values::{clean_text, clean_value, now};
use super::write::Write;
use crate::StoreError;
use crate::model::{CandidateId, NewCrossEvaluation, RunId, StoredCrossEvaluation};

#[derive(sqlx::FromRow)]
struct CrossRow {
    id: i64,
    run_id: String,
    candidate_id: i64,
    role: String,
    session: String,
    evaluation: Json<Value>,
    translated_source: Option<String>,
    created_at: DateTime<Utc>,
}

impl Store {
    /// Stores a session of cross-device evaluations (`kevo cross`) of
    /// `run`'s candidates, all or none.
    pub async fn record_cross(
        &self,
        run: &RunId,
        rows: &[NewCrossEvaluation],
    ) -> Result<(), StoreError> {
        let what = "record cross-device evaluations";
        let at = now();
        let mut write = Write::begin(self, what).await?;
        let candidates: Vec<CandidateId> = rows.iter().map(|r| r.candidate_id).collect();
        write.ensure_run_owns(run, &candidates).await?;
        for r in rows {
            let evaluation =
                serde_json::to_value(&r.evaluation).map_err(|cause| StoreError::Json {
                    what: "evaluation",
                    cause,
                })?;
            on_tx!(write, async |conn| {
                sqlx::query(
                    "INSERT INTO cross_evaluations (run_id, candidate_id, role, session, backend, \
                     device, outcome_kind, score, evaluation, translated_source, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                )
                .bind(&run.0)
                .bind(r.candidate_id.0)
                .bind(r.role.as_str())
                .bind(clean_text(&r.session))
                .bind(clean_text(r.evaluation.backend.name()))
                .bind(clean_text(&r.evaluation.device))
                .bind(r.evaluation.outcome.kind())
                .bind(r.evaluation.outcome.score())
                .bind(Json(clean_value(&evaluation).as_ref()))
                .bind(r.translated_source.as_deref().map(clean_text))
                .bind(at)
                .execute(conn)
                .await
                .map(|_| ())
            })
            .map_err(self.db(what))?;
        }
        write.commit().await
    }

    /// `run`'s cross-device evaluations, oldest first.
    pub async fn cross_evaluations(
        &self,
        run: &RunId,
    ) -> Result<Vec<StoredCrossEvaluation>, StoreError> {
        let rows: Vec<CrossRow> = on_pool!(self, async |pool| {
            sqlx::query_as(
                "SELECT id, run_id, candidate_id, role, session, evaluation, translated_source, \
                 created_at FROM cross_evaluations WHERE run_id = $1 ORDER BY id",
            )
            .bind(&run.0)
            .fetch_all(pool)
            .await
        })
        .map_err(self.db("read cross-device evaluations"))?;
        rows.into_iter()
            .map(|r| {
                let evaluation = serde_json::from_value(r.evaluation.0).map_err(|e| {
                    StoreError::InvalidRecord(format!(
                        "cross-device evaluation {} is unreadable: {e}",
                        r.id
                    ))
                })?;
                Ok(StoredCrossEvaluation {
                    id: r.id,
                    run_id: RunId(r.run_id),
                    cross: NewCrossEvaluation {
                        candidate_id: CandidateId(r.candidate_id),
                        role: self.parse(&r.role)?,
                        session: r.session,
                        evaluation,
                        translated_source: r.translated_source,
                    },
                    created_at: r.created_at,
                })
            })
            .collect()
    }
}
