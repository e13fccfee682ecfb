//! Re-measurements made outside an iteration (the end of a run's final
//! pick), and reading back all of a run's re-measurements, those made
//! inside iterations included.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use super::Store;
use super::values::{now, required_finite};
use super::write::Write;
use crate::StoreError;
use crate::model::{CandidateId, NewRemeasurement, RunId, StoredRemeasurement};

#[derive(sqlx::FromRow)]
struct RemeasurementRow {
    id: i64,
    run_id: String,
    iteration: i64,
    purpose: String,
    candidates: Json<Value>,
    verdict: String,
    rounds: Json<Value>,
    evaluations: i64,
    device_s: f64,
    wall_s: f64,
    created_at: DateTime<Utc>,
}

impl Store {
    /// Store a re-measurement made outside an iteration (the end of a
    /// run's final pick), under the run's last iteration. Its candidates
    /// must be the run's.
    pub async fn record_remeasurement(
        &self,
        run: &RunId,
        iteration: u32,
        remeasurement: &NewRemeasurement,
    ) -> Result<i64, StoreError> {
        Self::validate_remeasurement(remeasurement)?;
        let at = now();
        let what = "record re-measurement";
        let mut write = Write::begin(self, what).await?;
        write
            .ensure_run_owns(run, &remeasurement.candidates)
            .await?;
        let id = write
            .insert_remeasurement(run, i64::from(iteration), remeasurement, at)
            .await?;
        write.commit().await?;
        Ok(id)
    }

    /// A re-measurement needs candidates and its times must be numbers.
    fn validate_remeasurement(r: &NewRemeasurement) -> Result<(), StoreError> {
        if r.candidates.is_empty() {
            return Err(StoreError::InvalidRecord(
                "a re-measurement needs at least one candidate".into(),
            ));
        }
        required_finite(r.device_s, "the re-measurement's device time")?;
        required_finite(r.wall_s, "the re-measurement's wall time")?;
        Ok(())
    }

    /// A run's re-measurements, in the order they were made.
    pub async fn remeasurements(
        &self,
        run: &RunId,
    ) -> Result<Vec<StoredRemeasurement>, StoreError> {
        let rows: Vec<RemeasurementRow> = on_pool!(self, async |pool| {
            sqlx::query_as(
                "SELECT id, run_id, iteration, purpose, candidates, verdict, rounds, \
                 evaluations, device_s, wall_s, created_at FROM remeasurements \
                 WHERE run_id = $1 ORDER BY id",
            )
            .bind(&run.0)
            .fetch_all(pool)
            .await
        })
        .map_err(self.db("read re-measurements"))?;
        rows.into_iter()
            .map(|r| {
                let candidates: Vec<i64> = serde_json::from_value(r.candidates.0).map_err(|e| {
                    StoreError::InvalidRecord(format!(
                        "re-measurement {} has unreadable candidates: {e}",
                        r.id
                    ))
                })?;
                Ok(StoredRemeasurement {
                    id: r.id,
                    run_id: RunId(r.run_id),
                    iteration: self.iteration_of(r.iteration)?,
                    remeasurement: NewRemeasurement {
                        purpose: self.parse(&r.purpose)?,
                        candidates: candidates.into_iter().map(CandidateId).collect(),
                        verdict: r.verdict,
                        rounds: r.rounds.0,
                        evaluations: u32::try_from(r.evaluations).unwrap_or(u32::MAX),
                        device_s: r.device_s,
                        wall_s: r.wall_s,
                    },
                    created_at: r.created_at,
                })
            })
            .collect()
    }
}
