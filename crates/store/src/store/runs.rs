//! Runs: creating one, reading it back, listing them, and moving a run
//! between running, interrupted, failed and finished; its heartbeat, and
//! model calls recorded outside an iteration.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use super::Store;
use super::values::{
    clean_text, clean_value, is_unique_violation, new_run_id, now, required_finite,
};
use super::write::Write;
use crate::StoreError;
use crate::model::{
    CandidateId, HEARTBEAT_STALE_S, LlmCallId, Measure, NewLlmCall, NewRun, RunId, RunInfo,
    RunListing, RunStatus, StoredCheckpoint,
};

// Rows as the database returns them; converted to the public types with
// range and enum checks.

#[derive(sqlx::FromRow)]
struct RunRow {
    id: String,
    created_at: DateTime<Utc>,
    task: String,
    backend: String,
    device: String,
    size_set: String,
    strategy: String,
    config: Json<Value>,
    status: String,
    status_reason: Option<String>,
    rng_state: Option<Json<Value>>,
    finished_at: Option<DateTime<Utc>>,
    summary: Option<Json<Value>>,
}

#[derive(sqlx::FromRow)]
struct ListingRow {
    id: String,
    created_at: DateTime<Utc>,
    task: String,
    backend: String,
    device: String,
    size_set: String,
    strategy: String,
    status: String,
    finished_at: Option<DateTime<Utc>>,
    last_iteration: Option<i64>,
    candidates: i64,
    best_score: Option<f64>,
    cost_usd: Option<f64>,
    heartbeat_at: Option<DateTime<Utc>>,
    heartbeat_holder: Option<String>,
    summary: Option<Json<Value>>,
}

const SELECT_RUN: &str = "SELECT id, created_at, task, backend, device, size_set, strategy, \
     config, status, status_reason, rng_state, finished_at, summary FROM runs WHERE id = $1";

const LIST_RUNS: &str = "
SELECT r.id, r.created_at, r.task, r.backend, r.device, r.size_set, r.strategy, r.status,
       r.finished_at,
       (SELECT MAX(s.iteration) FROM steps s WHERE s.run_id = r.id) AS last_iteration,
       (SELECT COUNT(*) FROM candidates c WHERE c.run_id = r.id) AS candidates,
       (SELECT MAX(e.score) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
         WHERE c.run_id = r.id AND e.kind = 'in_distribution') AS best_score,
       (SELECT s.cost_usd FROM steps s WHERE s.run_id = r.id
         ORDER BY s.iteration DESC LIMIT 1) AS cost_usd,
       r.heartbeat_at, r.heartbeat_holder, r.summary
FROM runs r
ORDER BY r.created_at DESC, r.id DESC";

impl Store {
    /// Starts a run with status `running` and returns its new id.
    pub async fn create_run(&self, run: &NewRun) -> Result<RunId, StoreError> {
        let created = now();
        let config = clean_value(&run.config);
        let rng = run.rng_state.as_ref().map(clean_value);
        // The random part makes a clash within one second unlikely; a clash
        // is retried with a fresh id rather than reported.
        for _ in 0..8 {
            let id = new_run_id(&run.task, created);
            let result = on_pool!(self, async |pool| {
                sqlx::query(
                    "INSERT INTO runs (id, created_at, task, backend, device, size_set, strategy, \
                     config, status, rng_state) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'running', $9)",
                )
                .bind(&id.0)
                .bind(created)
                .bind(clean_text(&run.task))
                .bind(clean_text(&run.backend))
                .bind(clean_text(&run.device))
                .bind(run.size_set.to_string())
                .bind(clean_text(&run.strategy))
                .bind(Json(config.as_ref()))
                .bind(rng.as_ref().map(|v| Json(v.as_ref())))
                .execute(pool)
                .await
                .map(|_| ())
            });
            match result {
                Ok(_) => return Ok(id),
                Err(e) if is_unique_violation(&e) => continue,
                Err(e) => return Err(self.db("create run")(e)),
            }
        }
        Err(StoreError::InvalidRecord(
            "could not find a free run id".into(),
        ))
    }

    /// A run's stored record.
    pub async fn run(&self, run: &RunId) -> Result<RunInfo, StoreError> {
        let row: Option<RunRow> = on_pool!(self, async |pool| {
            sqlx::query_as(SELECT_RUN)
                .bind(&run.0)
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("read run"))?;
        let row = row.ok_or_else(|| StoreError::RunNotFound(run.clone()))?;
        self.run_info(row)
    }

    /// The run a user names: `latest` (the newest run), a whole id, or
    /// the start of one that no other run shares (`saxpy-20261129-0931`
    /// for `saxpy-20261129-093112-4f2a`).
    pub async fn resolve_run(&self, name: &str) -> Result<RunId, StoreError> {
        let ids: Vec<(String,)> = on_pool!(self, async |pool| {
            sqlx::query_as("SELECT id FROM runs ORDER BY created_at DESC, id DESC")
                .fetch_all(pool)
                .await
        })
        .map_err(self.db("list run ids"))?;
        let ids: Vec<String> = ids.into_iter().map(|(id,)| id).collect();
        pick_run(name, &ids)
    }

    /// A run row as the public type.
    fn run_info(&self, r: RunRow) -> Result<RunInfo, StoreError> {
        Ok(RunInfo {
            id: RunId(r.id),
            created_at: r.created_at,
            task: r.task,
            backend: r.backend,
            device: r.device,
            size_set: self.size_set(&r.size_set)?,
            strategy: r.strategy,
            config: r.config.0,
            status: self.parse(&r.status)?,
            status_reason: r.status_reason,
            rng_state: r.rng_state.map(|j| j.0),
            finished_at: r.finished_at,
            summary: r.summary.map(|j| j.0),
        })
    }

    /// Every run, newest first, with its progress and best score.
    pub async fn list_runs(&self) -> Result<Vec<RunListing>, StoreError> {
        let rows: Vec<ListingRow> = on_pool!(self, async |pool| {
            sqlx::query_as(LIST_RUNS).fetch_all(pool).await
        })
        .map_err(self.db("list runs"))?;
        rows.into_iter()
            .map(|r| {
                Ok(RunListing {
                    id: RunId(r.id),
                    created_at: r.created_at,
                    task: r.task,
                    backend: r.backend,
                    device: r.device,
                    size_set: self.size_set(&r.size_set)?,
                    strategy: r.strategy,
                    status: self.parse(&r.status)?,
                    finished_at: r.finished_at,
                    last_iteration: r.last_iteration.map(|i| self.iteration_of(i)).transpose()?,
                    candidates: self.count_of(r.candidates)?,
                    // A finished run's winner is the confirmed one of its
                    // summary, not the in-run maximum of noisy scores.
                    best_score: r
                        .summary
                        .as_ref()
                        .and_then(|s| s.0["best_score"].as_f64())
                        .or(r.best_score),
                    best_score_measure: match &r.summary {
                        Some(s) if s.0["best_score"].is_f64() => Measure::of_summary_score(&s.0),
                        _ => Measure::InRun,
                    },
                    speedup: r.summary.as_ref().and_then(|s| s.0["speedup"].as_f64()),
                    cost_usd: r.cost_usd,
                    heartbeat_at: r.heartbeat_at,
                    heartbeat_holder: r.heartbeat_holder,
                    held_out_verdict: r
                        .summary
                        .as_ref()
                        .and_then(|s| s.0["held_out"]["verdict"].as_str())
                        .map(String::from),
                    winner_safety: r
                        .summary
                        .as_ref()
                        .and_then(|s| s.0["safety"]["verdict"].as_str())
                        .map(String::from),
                })
            })
            .collect()
    }

    /// Changes a run's status if it is currently one of `from`.
    async fn set_status(
        &self,
        run: &RunId,
        to: RunStatus,
        from: &[RunStatus],
        reason: Option<&str>,
        summary: Option<&Value>,
        why: &'static str,
    ) -> Result<(), StoreError> {
        let finished_at = (to == RunStatus::Finished).then(now);
        let allowed: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        let summary = summary.map(clean_value);
        let what = "update run status";
        let mut write = Write::begin(self, what).await?;
        let current: Option<String> = on_tx!(write, async |conn| {
            sqlx::query_scalar("SELECT status FROM runs WHERE id = $1")
                .bind(&run.0)
                .fetch_optional(conn)
                .await
        })
        .map_err(self.db(what))?;
        let Some(current) = current else {
            return Err(StoreError::RunNotFound(run.clone()));
        };
        if !allowed.contains(&current.as_str()) {
            return Err(StoreError::RunStatus {
                run: run.clone(),
                status: self.parse(&current)?,
                why,
            });
        }
        let affected = on_tx!(write, async |conn| {
            sqlx::query(
                "UPDATE runs SET status = $2, status_reason = $3, \
                 finished_at = COALESCE($4, finished_at), summary = COALESCE($5, summary) \
                 WHERE id = $1",
            )
            .bind(&run.0)
            .bind(to.as_str())
            .bind(reason.map(clean_text))
            .bind(finished_at)
            .bind(summary.as_ref().map(|v| Json(v.as_ref())))
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .map_err(self.db(what))?;
        write.commit().await?;
        debug_assert_eq!(affected, 1);
        Ok(())
    }

    /// Marks a running run finished and stores its summary.
    pub async fn mark_finished(&self, run: &RunId, summary: &Value) -> Result<(), StoreError> {
        self.set_status(
            run,
            RunStatus::Finished,
            &[RunStatus::Running],
            None,
            Some(summary),
            "only a running run can finish",
        )
        .await
    }

    /// Marks a run failed, with the reason.
    pub async fn mark_failed(&self, run: &RunId, reason: &str) -> Result<(), StoreError> {
        self.set_status(
            run,
            RunStatus::Failed,
            &[RunStatus::Running, RunStatus::Interrupted],
            Some(reason),
            None,
            "a finished run cannot fail",
        )
        .await
    }

    /// Record that the process running `run` is alive (see
    /// [`RunListing::is_alive`]). A run that is not running is left alone.
    pub async fn heartbeat(&self, run: &RunId) -> Result<(), StoreError> {
        let at = now();
        on_pool!(self, async |pool| {
            sqlx::query(
                "UPDATE runs SET heartbeat_at = $1, heartbeat_holder = $2 \
                 WHERE id = $3 AND status = 'running'",
            )
            .bind(at)
            .bind(crate::lease::this_process())
            .bind(&run.0)
            .execute(pool)
            .await
            .map(|_| ())
        })
        .map_err(self.db("write a heartbeat"))?;
        Ok(())
    }

    /// Marks a running run interrupted (Ctrl-C, budget pause); it can be
    /// resumed.
    pub async fn mark_interrupted(&self, run: &RunId, reason: &str) -> Result<(), StoreError> {
        self.set_status(
            run,
            RunStatus::Interrupted,
            &[RunStatus::Running],
            Some(reason),
            None,
            "only a running run can be interrupted",
        )
        .await
    }

    /// Puts an interrupted, failed or (after a crash) still-running run back
    /// to running and returns it with its last checkpoint: the point to
    /// continue from. A finished run is refused, and so is a running run
    /// whose process still writes its heartbeat: two processes would
    /// record the same iterations.
    pub async fn resume_run(
        &self,
        run: &RunId,
    ) -> Result<(RunInfo, Option<StoredCheckpoint>), StoreError> {
        let row: Option<(String, Option<DateTime<Utc>>, Option<String>)> =
            on_pool!(self, async |pool| {
                sqlx::query_as(
                    "SELECT status, heartbeat_at, heartbeat_holder FROM runs WHERE id = $1",
                )
                .bind(&run.0)
                .fetch_optional(pool)
                .await
            })
            .map_err(self.db("read a run's heartbeat"))?;
        let Some((status, heartbeat_at, holder)) = row else {
            return Err(StoreError::RunNotFound(run.clone()));
        };
        if self.parse::<RunStatus>(&status)? == RunStatus::Running
            && let Some(at) = heartbeat_at
            && !holder.as_deref().is_some_and(crate::lease::holder_is_gone)
        {
            let age_s = (Utc::now() - at).num_seconds();
            if age_s <= HEARTBEAT_STALE_S {
                return Err(StoreError::RunAlive {
                    run: run.clone(),
                    age_s: age_s.max(0),
                    stale_s: HEARTBEAT_STALE_S,
                });
            }
        }
        self.set_status(
            run,
            RunStatus::Running,
            &[
                RunStatus::Running,
                RunStatus::Interrupted,
                RunStatus::Failed,
            ],
            None,
            None,
            "a finished run has nothing to resume",
        )
        .await?;
        let info = self.run(run).await?;
        let checkpoint = self.last_checkpoint(run).await?;
        Ok((info, checkpoint))
    }

    /// Stores model calls that were in flight when the run stopped
    /// (Ctrl-C): they belong to no candidate and no recorded iteration
    /// (`iteration` is the one they were for, which a resume runs again),
    /// but what was asked, and that it may have been billed, is kept.
    pub async fn record_abandoned_calls(
        &self,
        run: &RunId,
        iteration: u32,
        calls: &[NewLlmCall],
    ) -> Result<(), StoreError> {
        let what = "record abandoned LLM calls";
        for call in calls {
            required_finite(call.latency_s, "an LLM call's latency")?;
        }
        let at = now();
        let mut write = Write::begin(self, what).await?;
        for call in calls {
            write
                .insert_llm_call(run, None, i64::from(iteration), call, at)
                .await?;
        }
        write.commit().await?;
        Ok(())
    }

    /// Stores one model call made outside an iteration's proposals (the
    /// performance analyst's, about `candidate`) as soon as it returns, so
    /// that what it cost is kept whatever happens to the iteration it
    /// informs. `iteration` is the last one recorded when it was made.
    pub async fn record_llm_call(
        &self,
        run: &RunId,
        candidate: Option<CandidateId>,
        iteration: u32,
        call: &NewLlmCall,
    ) -> Result<LlmCallId, StoreError> {
        let what = "record an LLM call";
        required_finite(call.latency_s, "an LLM call's latency")?;
        let at = now();
        let mut write = Write::begin(self, what).await?;
        let id = write
            .insert_llm_call(run, candidate.map(|c| c.0), i64::from(iteration), call, at)
            .await?;
        write.commit().await?;
        Ok(LlmCallId(id))
    }
}

/// `name` among `ids` (newest first): see [`Store::resolve_run`].
fn pick_run(name: &str, ids: &[String]) -> Result<RunId, StoreError> {
    let not_found = || StoreError::RunNotFound(RunId(name.to_string()));
    if name == "latest" {
        return ids
            .first()
            .map(|id| RunId(id.clone()))
            .ok_or_else(not_found);
    }
    if ids.iter().any(|id| id == name) {
        return Ok(RunId(name.to_string()));
    }
    let matches: Vec<String> = ids
        .iter()
        .filter(|id| !name.is_empty() && id.starts_with(name))
        .cloned()
        .collect();
    match matches.as_slice() {
        [] => Err(not_found()),
        [one] => Ok(RunId(one.clone())),
        _ => Err(StoreError::AmbiguousRun {
            prefix: name.to_string(),
            matches,
        }),
    }
}

#[cfg(test)]
mod pick_tests {
    use super::*;

    #[test]
    fn latest_a_whole_id_and_a_unique_prefix_name_a_run() {
        let ids: Vec<String> = ["20261129-0931-b", "20261129-0930-a", "20261128-1200-c"]
            .map(String::from)
            .into();
        assert_eq!(pick_run("latest", &ids).unwrap().0, "20261129-0931-b");
        assert_eq!(pick_run("20261128", &ids).unwrap().0, "20261128-1200-c");
        assert_eq!(
            pick_run("20261129-0930-a", &ids).unwrap().0,
            "20261129-0930-a"
        );
        let ambiguous = pick_run("20261129", &ids).unwrap_err().to_string();
        assert!(
            ambiguous.contains("names 2 runs") && ambiguous.contains("20261129-0930-a"),
            "{ambiguous}"
        );
        assert!(matches!(
            pick_run("2027", &ids),
            Err(StoreError::RunNotFound(_))
        ));
        assert!(matches!(
            pick_run("", &ids),
            Err(StoreError::RunNotFound(_))
        ));
        assert!(matches!(
            pick_run("latest", &[]),
            Err(StoreError::RunNotFound(_))
        ));
    }
}
