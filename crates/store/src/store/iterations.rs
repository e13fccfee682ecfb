//! Iterations: recording one, whole or not at all, with the checks made
//! before its transaction starts (the steps inside it are in
//! [`super::iteration_steps`]), and reading back what they recorded: the
//! last checkpoint and the history of decisions.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::AssertSqlSafe;
use sqlx::types::Json;

use super::Store;
use super::iteration_steps::{IterationWrite, prepare_evaluations, spent_tokens};
use super::values::{check_proposal_ref, now, required_finite};
use crate::StoreError;
use crate::model::{
    CandidateId, CandidateRef, Decided, HistoryRow, IterationRecord, ProposalIds, Proposed, RunId,
    Spent, StoredCheckpoint,
};

#[derive(sqlx::FromRow)]
struct StepRow {
    run_id: String,
    iteration: i64,
    incumbent_id: Option<i64>,
    previous_id: Option<i64>,
    rng_state: Option<Json<Value>>,
    strategy_state: Option<Json<Value>>,
    input_tokens: i64,
    output_tokens: i64,
    reasoning_tokens: i64,
    cost_usd: f64,
    wall_s: f64,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct HistoryDbRow {
    iteration: i64,
    candidate_id: Option<i64>,
    outcome_kind: Option<String>,
    score: Option<f64>,
    promoted: bool,
    incumbent_id: Option<i64>,
    island: Option<i64>,
    cell: Option<String>,
    reason: String,
}

const STEP_COLUMNS: &str = "SELECT run_id, iteration, incumbent_id, previous_id, rng_state, \
     strategy_state, input_tokens, output_tokens, reasoning_tokens, cost_usd, wall_s, created_at \
     FROM steps";

const HISTORY: &str = "
SELECT d.iteration, d.candidate_id, e.outcome_kind, e.score, d.promoted, d.incumbent_id,
       d.island, d.cell, d.reason
FROM decisions d
LEFT JOIN evaluations e ON e.candidate_id = d.candidate_id AND e.kind = 'in_distribution'
WHERE d.run_id = $1
ORDER BY d.iteration, d.id";

impl Store {
    /// What can be checked of an iteration's proposals before any
    /// decision: evaluations belong to candidates, parents that name a
    /// proposal name one with a candidate, latencies are numbers.
    fn validate_proposed(proposed: &[Proposed]) -> Result<(), StoreError> {
        for (i, p) in proposed.iter().enumerate() {
            if p.candidate.is_none() && p.evaluation.is_some() {
                return Err(StoreError::InvalidRecord(format!(
                    "proposal {i} has an evaluation but no candidate"
                )));
            }
            if let Some(c) = &p.candidate {
                for parent in &c.parents {
                    if *parent == CandidateRef::Proposal(i) {
                        return Err(StoreError::InvalidRecord(format!(
                            "proposal {i}'s candidate is its own parent"
                        )));
                    }
                    check_proposal_ref(proposed, parent, &format!("a parent of proposal {i}"))?;
                }
            }
            for call in &p.llm_calls {
                required_finite(call.latency_s, "an LLM call's latency")?;
            }
        }
        Ok(())
    }

    /// The decisions about `proposed`: one per proposal, promoting only
    /// candidates that exist, naming only proposals that have one.
    fn validate_decided(proposed: &[Proposed], decided: &Decided) -> Result<(), StoreError> {
        if decided.decisions.len() != proposed.len() {
            return Err(StoreError::InvalidRecord(format!(
                "{} decisions for {} proposals",
                decided.decisions.len(),
                proposed.len()
            )));
        }
        for (i, (p, d)) in proposed.iter().zip(&decided.decisions).enumerate() {
            if p.candidate.is_none() && d.promoted {
                return Err(StoreError::InvalidRecord(format!(
                    "proposal {i} promotes a candidate it does not have"
                )));
            }
            if let Some(r) = &d.incumbent {
                check_proposal_ref(proposed, r, &format!("the incumbent of proposal {i}"))?;
            }
        }
        let cp = &decided.checkpoint;
        if let Some(r) = &cp.incumbent {
            check_proposal_ref(proposed, r, "the checkpoint's incumbent")?;
        }
        if let Some(r) = &cp.previous {
            check_proposal_ref(proposed, r, "the checkpoint's previous candidate")?;
        }
        for (i, v) in decided.validations.iter().enumerate() {
            check_proposal_ref(proposed, &v.candidate, &format!("validation {i}"))?;
            required_finite(v.device_s, "the validation's device time")?;
            required_finite(v.wall_s, "the validation's wall time")?;
        }
        required_finite(cp.spent.cost_usd, "the spent cost")?;
        required_finite(cp.spent.wall_s, "the spent wall time")?;
        Ok(())
    }

    /// Writes everything one iteration produced (candidates, LLM calls,
    /// evaluations, decisions, checkpoint) in one transaction. If anything
    /// fails, or the process dies before the commit, nothing of the
    /// iteration is stored, and the run resumes from the previous
    /// checkpoint. Recording an iteration number twice, or out of order, is
    /// refused, so a candidate is never counted twice.
    pub async fn record_iteration(
        &self,
        run: &RunId,
        record: &IterationRecord,
    ) -> Result<Vec<ProposalIds>, StoreError> {
        let (proposed, decided) = record.split();
        // Refused before the transaction, as it always was (the proposals
        // are checked first thing in `record_iteration_with`).
        Self::validate_decided(&proposed, &decided)?;
        self.record_iteration_with(run, record.iteration, &proposed, |_| decided)
            .await
    }

    /// [`Store::record_iteration`] for a strategy that decides on stored
    /// ids: the candidates of `proposed` are inserted first, `decide` is
    /// called with their ids (None where a proposal has no candidate, in
    /// the order of `proposed`), and what it returns (one decision per
    /// proposal, the checkpoint) is written in the same transaction. If
    /// anything fails after `decide` ran, nothing is stored: a caller
    /// whose strategy decided must then give up its in-memory state and
    /// resume from the store.
    pub async fn record_iteration_with<F>(
        &self,
        run: &RunId,
        iteration_number: u32,
        proposed: &[Proposed],
        decide: F,
    ) -> Result<Vec<ProposalIds>, StoreError>
    where
        F: FnOnce(&[Option<CandidateId>]) -> Decided,
    {
        Self::validate_proposed(proposed)?;
        let at = now();
        let evaluations = prepare_evaluations(proposed)?;
        // One transaction from here to the commit: a step that fails
        // returns, dropping `write`, and nothing of the iteration is stored.
        let mut write = IterationWrite::begin(self, run, iteration_number, at).await?;
        write.check_run(&evaluations).await?;
        write.check_iteration_is_next().await?;
        let candidates = write.insert_candidates(proposed).await?;
        let decided = decide(&candidates.ids());
        Self::validate_decided(proposed, &decided)?;
        let tokens = spent_tokens(&decided.checkpoint.spent)?;
        write.check_references(&decided).await?;
        let ids = write
            .insert_proposals(proposed, &evaluations, &decided, &candidates)
            .await?;
        write.insert_measurements(&decided, &candidates).await?;
        write
            .insert_step(&decided.checkpoint, tokens, &candidates)
            .await?;
        if let Some(answered) = decided.answers {
            write.close_answered(answered).await?;
        }
        write.commit().await?;
        Ok(ids)
    }

    /// The last completed step of a run: where `resume` continues. None if
    /// not even the seed was recorded.
    pub async fn last_checkpoint(
        &self,
        run: &RunId,
    ) -> Result<Option<StoredCheckpoint>, StoreError> {
        let sql = format!("{STEP_COLUMNS} WHERE run_id = $1 ORDER BY iteration DESC LIMIT 1");
        let row: Option<StepRow> = on_pool!(self, async |pool| {
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(&run.0)
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("read checkpoint"))?;
        match row {
            Some(r) => Ok(Some(StoredCheckpoint {
                run_id: RunId(r.run_id),
                iteration: self.iteration_of(r.iteration)?,
                incumbent: r.incumbent_id.map(CandidateId),
                previous: r.previous_id.map(CandidateId),
                rng_state: r.rng_state.map(|j| j.0),
                strategy_state: r.strategy_state.map(|j| j.0),
                spent: Spent {
                    input_tokens: self.count_of(r.input_tokens)?,
                    output_tokens: self.count_of(r.output_tokens)?,
                    reasoning_tokens: self.count_of(r.reasoning_tokens)?,
                    cost_usd: r.cost_usd,
                    wall_s: r.wall_s,
                },
                created_at: r.created_at,
            })),
            None => {
                // Distinguish "nothing recorded yet" from "no such run".
                self.run(run).await?;
                Ok(None)
            }
        }
    }

    /// One row per proposal, in order: what was tried, how it fared, and
    /// whether it was kept.
    pub async fn history(&self, run: &RunId) -> Result<Vec<HistoryRow>, StoreError> {
        let rows: Vec<HistoryDbRow> = on_pool!(self, async |pool| {
            sqlx::query_as(HISTORY).bind(&run.0).fetch_all(pool).await
        })
        .map_err(self.db("read history"))?;
        if rows.is_empty() {
            self.run(run).await?;
        }
        rows.into_iter()
            .map(|r| {
                Ok(HistoryRow {
                    iteration: self.iteration_of(r.iteration)?,
                    candidate_id: r.candidate_id.map(CandidateId),
                    outcome_kind: r.outcome_kind,
                    score: r.score,
                    promoted: r.promoted,
                    incumbent_id: r.incumbent_id.map(CandidateId),
                    island: r.island,
                    cell: r.cell,
                    reason: r.reason,
                })
            })
            .collect()
    }
}
