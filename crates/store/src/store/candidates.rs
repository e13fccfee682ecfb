//! Candidates and what is known of them: a candidate with its parents,
//! its evaluations, the cached measurement of a source, the run's best
//! candidate, and the run's model calls.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::AssertSqlSafe;
use sqlx::types::Json;

use super::Store;
use crate::StoreError;
use crate::model::{
    BestCandidate, CandidateId, EvaluationId, EvaluationKind, HeldOutRole, LlmCallId, NewLlmCall,
    RunId, StoredCandidate, StoredEvaluation, StoredLlmCall,
};
use kevo_tasks::SizeSet;

#[derive(sqlx::FromRow)]
struct CandidateRow {
    id: i64,
    run_id: String,
    iteration: i64,
    island: Option<i64>,
    cell: Option<String>,
    descriptors: Option<Json<Value>>,
    source: String,
    source_sha256: String,
    provider: Option<String>,
    model: Option<String>,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct EvaluationRow {
    id: i64,
    candidate_id: i64,
    kind: String,
    outcome_kind: String,
    score: Option<f64>,
    device: String,
    backend: String,
    evaluation: Json<Value>,
    reused_from: Option<i64>,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct LlmCallRow {
    id: i64,
    run_id: String,
    candidate_id: Option<i64>,
    iteration: i64,
    purpose: String,
    provider: String,
    model: String,
    prompt_system: String,
    prompt_user: String,
    response: Option<String>,
    reasoning: Option<String>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    reasoning_tokens: Option<i64>,
    cost_usd: Option<f64>,
    latency_s: f64,
    error: Option<String>,
    created_at: DateTime<Utc>,
    transcript: Option<String>,
}

const CANDIDATE_COLUMNS: &str = "SELECT id, run_id, iteration, island, cell, descriptors, source, \
     source_sha256, provider, model, created_at FROM candidates";

const EVALUATION_COLUMNS: &str = "SELECT e.id, e.candidate_id, e.kind, e.outcome_kind, e.score, \
     e.device, e.backend, e.evaluation, e.reused_from, e.created_at FROM evaluations e";

const LLM_CALLS: &str = "SELECT id, run_id, candidate_id, iteration, purpose, provider, model, \
     prompt_system, prompt_user, response, reasoning, input_tokens, output_tokens, \
     reasoning_tokens, cost_usd, latency_s, error, created_at, transcript FROM llm_calls \
     WHERE run_id = $1 ORDER BY iteration, id";

impl Store {
    /// A stored candidate with its parents.
    pub async fn candidate(&self, id: CandidateId) -> Result<StoredCandidate, StoreError> {
        let sql = format!("{CANDIDATE_COLUMNS} WHERE id = $1");
        let row: Option<CandidateRow> = on_pool!(self, async |pool| {
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(id.0)
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("read candidate"))?;
        let parents: Vec<i64> = on_pool!(self, async |pool| {
            sqlx::query_scalar(
                "SELECT parent_id FROM candidate_parents WHERE candidate_id = $1 ORDER BY position",
            )
            .bind(id.0)
            .fetch_all(pool)
            .await
        })
        .map_err(self.db("read candidate parents"))?;
        let r = row.ok_or(StoreError::CandidateNotFound(id))?;
        Ok(StoredCandidate {
            id: CandidateId(r.id),
            run_id: RunId(r.run_id),
            iteration: self.iteration_of(r.iteration)?,
            parents: parents.into_iter().map(CandidateId).collect(),
            island: r.island,
            cell: r.cell,
            descriptors: r.descriptors.map(|j| j.0),
            source: r.source,
            source_sha256: r.source_sha256,
            provider: r.provider,
            model: r.model,
            created_at: r.created_at,
        })
    }

    /// Just the source of a candidate.
    pub async fn candidate_source(&self, id: CandidateId) -> Result<String, StoreError> {
        let source: Option<String> = on_pool!(self, async |pool| {
            sqlx::query_scalar("SELECT source FROM candidates WHERE id = $1")
                .bind(id.0)
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("read candidate source"))?;
        source.ok_or(StoreError::CandidateNotFound(id))
    }

    /// An evaluation row as the public type.
    fn stored_evaluation(&self, r: EvaluationRow) -> Result<StoredEvaluation, StoreError> {
        Ok(StoredEvaluation {
            id: EvaluationId(r.id),
            candidate_id: CandidateId(r.candidate_id),
            kind: self.parse(&r.kind)?,
            outcome_kind: r.outcome_kind,
            score: r.score,
            device: r.device,
            backend: r.backend,
            json: r.evaluation.0,
            reused_from: r.reused_from.map(EvaluationId),
            created_at: r.created_at,
        })
    }

    /// Every evaluation of a candidate (in-distribution, then held-out ones).
    pub async fn evaluations_of(
        &self,
        candidate: CandidateId,
    ) -> Result<Vec<StoredEvaluation>, StoreError> {
        let sql = format!("{EVALUATION_COLUMNS} WHERE e.candidate_id = $1 ORDER BY e.id");
        let rows: Vec<EvaluationRow> = on_pool!(self, async |pool| {
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(candidate.0)
                .fetch_all(pool)
                .await
        })
        .map_err(self.db("read evaluations"))?;
        rows.into_iter()
            .map(|r| self.stored_evaluation(r))
            .collect()
    }

    /// The run's in-distribution evaluation of a source with this SHA-256,
    /// if it has one (the first, original measurement). A resumed run asks
    /// before evaluating, so the same source is never measured twice.
    pub async fn find_evaluation(
        &self,
        run: &RunId,
        source_sha256: &str,
    ) -> Result<Option<StoredEvaluation>, StoreError> {
        let sql = format!(
            "{EVALUATION_COLUMNS} JOIN candidates c ON c.id = e.candidate_id \
             WHERE c.run_id = $1 AND c.source_sha256 = $2 AND e.kind = 'in_distribution' \
             ORDER BY e.id LIMIT 1"
        );
        let row: Option<EvaluationRow> = on_pool!(self, async |pool| {
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(&run.0)
                .bind(source_sha256.to_ascii_lowercase())
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("find evaluation"))?;
        row.map(|r| self.stored_evaluation(r)).transpose()
    }

    /// The latest original in-distribution measurement of a source with
    /// this SHA-256 for `task` at `size_set` on `device` through
    /// `backend`, in any run: the cache that makes a repeated tuning
    /// configuration cost nothing. Timeouts and runtime errors are not
    /// served from it (a worker that died or a busy device is not a
    /// property of the kernel); copies are not either, so a chain of reuse
    /// always ends at a measurement.
    pub async fn find_measurement(
        &self,
        task: &str,
        backend: &str,
        device: &str,
        size_set: SizeSet,
        source_sha256: &str,
    ) -> Result<Option<StoredEvaluation>, StoreError> {
        let sql = format!(
            "{EVALUATION_COLUMNS} JOIN candidates c ON c.id = e.candidate_id \
             JOIN runs r ON r.id = c.run_id \
             WHERE r.task = $1 AND e.backend = $2 AND e.device = $3 AND r.size_set = $4 \
             AND c.source_sha256 = $5 AND e.kind = 'in_distribution' \
             AND e.reused_from IS NULL AND e.outcome_kind NOT IN ('timeout', 'runtime_error') \
             ORDER BY e.id DESC LIMIT 1"
        );
        let row: Option<EvaluationRow> = on_pool!(self, async |pool| {
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(task)
                .bind(backend)
                .bind(device)
                .bind(size_set.to_string())
                .bind(source_sha256.to_ascii_lowercase())
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("find measurement"))?;
        row.map(|r| self.stored_evaluation(r)).transpose()
    }

    /// The run's winner: the candidate its held-out gate scored as the
    /// winner (a finished run's final pick), else its last checkpoint's
    /// incumbent (the strategy's best, which a noise-aware promotion rule
    /// may have kept over a candidate whose one measurement was higher),
    /// else the highest in-distribution score. None while nothing is
    /// correct.
    pub async fn best_candidate(&self, run: &RunId) -> Result<Option<BestCandidate>, StoreError> {
        let winner = self
            .held_out_results(run)
            .await?
            .into_iter()
            .rev()
            .find(|h| h.role == HeldOutRole::Winner)
            .map(|h| h.candidate_id);
        let chosen = match winner {
            Some(id) => Some(id),
            None => self.last_checkpoint(run).await?.and_then(|cp| cp.incumbent),
        };
        if let Some(id) = chosen
            && let Some(evaluation) = self
                .evaluations_of(id)
                .await?
                .into_iter()
                .find(|e| e.kind == EvaluationKind::InDistribution && e.score.is_some())
        {
            let candidate = self.candidate(id).await?;
            return Ok(Some(BestCandidate {
                candidate,
                evaluation,
            }));
        }
        let sql = format!(
            "{EVALUATION_COLUMNS} JOIN candidates c ON c.id = e.candidate_id \
             WHERE c.run_id = $1 AND e.kind = 'in_distribution' AND e.score IS NOT NULL \
             ORDER BY e.score DESC, c.iteration ASC, c.id ASC LIMIT 1"
        );
        let row: Option<EvaluationRow> = on_pool!(self, async |pool| {
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(&run.0)
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("find best candidate"))?;
        let Some(row) = row else {
            self.run(run).await?;
            return Ok(None);
        };
        let evaluation = self.stored_evaluation(row)?;
        let candidate = self.candidate(evaluation.candidate_id).await?;
        Ok(Some(BestCandidate {
            candidate,
            evaluation,
        }))
    }

    /// Every LLM call of a run, in order, failed ones included.
    pub async fn llm_calls(&self, run: &RunId) -> Result<Vec<StoredLlmCall>, StoreError> {
        let rows: Vec<LlmCallRow> = on_pool!(self, async |pool| {
            sqlx::query_as(LLM_CALLS).bind(&run.0).fetch_all(pool).await
        })
        .map_err(self.db("read LLM calls"))?;
        let tokens = |t: Option<i64>| t.map(|v| self.count_of(v)).transpose();
        rows.into_iter()
            .map(|r| {
                Ok(StoredLlmCall {
                    id: LlmCallId(r.id),
                    run_id: RunId(r.run_id),
                    candidate_id: r.candidate_id.map(CandidateId),
                    iteration: self.iteration_of(r.iteration)?,
                    call: NewLlmCall {
                        purpose: r.purpose,
                        provider: r.provider,
                        model: r.model,
                        prompt_system: r.prompt_system,
                        prompt_user: r.prompt_user,
                        response: r.response,
                        reasoning: r.reasoning,
                        input_tokens: tokens(r.input_tokens)?,
                        output_tokens: tokens(r.output_tokens)?,
                        reasoning_tokens: tokens(r.reasoning_tokens)?,
                        cost_usd: r.cost_usd,
                        latency_s: r.latency_s,
                        error: r.error,
                        transcript: r.transcript.and_then(|t| serde_json::from_str(&t).ok()),
                    },
                    created_at: r.created_at,
                })
            })
            .collect()
    }
}
