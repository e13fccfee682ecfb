//! Held-out results: a held-out evaluation of one of the run's
//! candidates, stored with the figures derived from it, and reading them
//! back. They live beside the in-distribution evaluations but never appear
//! in what a search strategy reads.

use chrono::{DateTime, Utc};

use super::Store;
use super::values::{PreparedEvaluation, clean_opt, finite, now};
use super::write::Write;
use crate::StoreError;
use crate::model::{
    CandidateId, EvaluationId, EvaluationKind, HeldOutId, HeldOutResult, NewHeldOut, RunId,
};

#[derive(sqlx::FromRow)]
struct HeldOutRow {
    id: i64,
    run_id: String,
    candidate_id: i64,
    role: String,
    evaluation_id: i64,
    outcome_kind: String,
    session: Option<String>,
    phi: Option<f64>,
    fraction: Option<f64>,
    speedup: Option<f64>,
    created_at: DateTime<Utc>,
}

const HELD_OUT: &str = "
SELECT h.id, h.run_id, h.candidate_id, h.role, h.evaluation_id, e.outcome_kind, h.session,
       h.phi, h.fraction, h.speedup, h.created_at
FROM held_out_results h JOIN evaluations e ON e.id = h.evaluation_id
WHERE h.run_id = $1
ORDER BY h.id";

impl Store {
    /// Stores a held-out evaluation of one of the run's candidates and the
    /// figures derived from it, together. Allowed in any run status: the
    /// held-out gate runs after a run finished.
    pub async fn record_held_out(
        &self,
        run: &RunId,
        held_out: &NewHeldOut,
    ) -> Result<HeldOutId, StoreError> {
        let ev = PreparedEvaluation::new(&held_out.evaluation, None)?;
        let at = now();
        let what = "record held-out result";
        let mut write = Write::begin(self, what).await?;
        let owner: Option<(String, String)> = on_tx!(write, async |conn| {
            sqlx::query_as(
                "SELECT c.run_id, r.task FROM candidates c JOIN runs r ON r.id = c.run_id \
                 WHERE c.id = $1",
            )
            .bind(held_out.candidate_id.0)
            .fetch_optional(conn)
            .await
        })
        .map_err(self.db(what))?;
        match owner {
            None => return Err(StoreError::CandidateNotFound(held_out.candidate_id)),
            Some((owner, _)) if owner != run.0 => {
                return Err(StoreError::InvalidRecord(format!(
                    "candidate {} belongs to run `{owner}`, not `{run}`",
                    held_out.candidate_id
                )));
            }
            Some((_, task)) if task != ev.task => {
                return Err(StoreError::InvalidRecord(format!(
                    "a held-out evaluation of task `{}` cannot belong to a run of task `{task}`",
                    ev.task
                )));
            }
            Some(_) => {}
        }
        let kind = EvaluationKind::HeldOut;
        let evaluation_id = write
            .insert_evaluation(held_out.candidate_id.0, kind, &ev, None, at)
            .await?;
        let id: i64 = on_tx!(write, async |conn| {
            sqlx::query_scalar(
                "INSERT INTO held_out_results (run_id, candidate_id, role, evaluation_id, \
                 session, phi, fraction, speedup, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            )
            .bind(&run.0)
            .bind(held_out.candidate_id.0)
            .bind(held_out.role.as_str())
            .bind(evaluation_id)
            .bind(clean_opt(&held_out.session))
            .bind(finite(held_out.phi))
            .bind(finite(held_out.fraction))
            .bind(finite(held_out.speedup))
            .bind(at)
            .fetch_one(conn)
            .await
        })
        .map_err(self.db(what))?;
        write.commit().await?;
        Ok(HeldOutId(id))
    }

    /// A run's held-out results, in the order they were recorded.
    pub async fn held_out_results(&self, run: &RunId) -> Result<Vec<HeldOutResult>, StoreError> {
        let rows: Vec<HeldOutRow> = on_pool!(self, async |pool| {
            sqlx::query_as(HELD_OUT).bind(&run.0).fetch_all(pool).await
        })
        .map_err(self.db("read held-out results"))?;
        rows.into_iter()
            .map(|r| {
                Ok(HeldOutResult {
                    id: HeldOutId(r.id),
                    run_id: RunId(r.run_id),
                    candidate_id: CandidateId(r.candidate_id),
                    role: self.parse(&r.role)?,
                    evaluation_id: EvaluationId(r.evaluation_id),
                    outcome_kind: r.outcome_kind,
                    session: r.session,
                    phi: r.phi,
                    fraction: r.fraction,
                    speedup: r.speedup,
                    created_at: r.created_at,
                })
            })
            .collect()
    }
}
