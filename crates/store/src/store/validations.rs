//! Validations made outside an iteration (the seed's baseline), and
//! reading back all of a run's validations, those made inside iterations
//! included.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use super::Store;
use super::values::{now, required_finite};
use super::write::Write;
use crate::StoreError;
use crate::model::{CandidateId, CandidateRef, NewValidation, RunId, StoredValidation};

#[derive(sqlx::FromRow)]
struct ValidationRow {
    id: i64,
    run_id: String,
    iteration: i64,
    candidate_id: i64,
    passed: bool,
    reason: String,
    evaluation: Json<Value>,
    device_s: f64,
    wall_s: f64,
    created_at: DateTime<Utc>,
}

impl Store {
    /// Store a validation made outside an iteration (the seed's baseline,
    /// at iteration 0). Its candidate must be the run's.
    pub async fn record_validation(
        &self,
        run: &RunId,
        iteration: u32,
        validation: &NewValidation,
    ) -> Result<i64, StoreError> {
        let CandidateRef::Stored(candidate) = validation.candidate else {
            return Err(StoreError::InvalidRecord(
                "a validation outside an iteration names a stored candidate".into(),
            ));
        };
        required_finite(validation.device_s, "the validation's device time")?;
        required_finite(validation.wall_s, "the validation's wall time")?;
        let at = now();
        let what = "record validation";
        let mut write = Write::begin(self, what).await?;
        write.ensure_run_owns(run, &[candidate]).await?;
        let id = write
            .insert_validation(run, i64::from(iteration), candidate.0, validation, at)
            .await?;
        write.commit().await?;
        Ok(id)
    }

    /// A run's validations, in the order they were made.
    pub async fn validations(&self, run: &RunId) -> Result<Vec<StoredValidation>, StoreError> {
        let rows: Vec<ValidationRow> = on_pool!(self, async |pool| {
            sqlx::query_as(
                "SELECT id, run_id, iteration, candidate_id, passed, reason, evaluation, \
                 device_s, wall_s, created_at FROM validations WHERE run_id = $1 ORDER BY id",
            )
            .bind(&run.0)
            .fetch_all(pool)
            .await
        })
        .map_err(self.db("read validations"))?;
        rows.into_iter()
            .map(|r| {
                let evaluation = serde_json::from_value(r.evaluation.0).map_err(|e| {
                    StoreError::InvalidRecord(format!("validation {} is unreadable: {e}", r.id))
                })?;
                Ok(StoredValidation {
                    id: r.id,
                    run_id: RunId(r.run_id),
                    iteration: self.iteration_of(r.iteration)?,
                    candidate_id: CandidateId(r.candidate_id),
                    passed: r.passed,
                    reason: r.reason,
                    evaluation,
                    device_s: r.device_s,
                    wall_s: r.wall_s,
                    created_at: r.created_at,
                })
            })
            .collect()
    }
}
