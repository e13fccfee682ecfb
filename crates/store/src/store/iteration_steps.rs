//! The steps of writing one iteration ([`Store::record_iteration_with`]),
//! one method each, in the order they run, all in the one transaction of
//! an [`IterationWrite`]: a step that fails returns its error and drops
//! the transaction, so nothing of the iteration is stored unless every
//! step succeeded and [`IterationWrite::commit`] ran.

use chrono::{DateTime, Utc};
use sqlx::AssertSqlSafe;
use sqlx::types::Json;

use super::Store;
use super::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use super::values::{
    PreparedEvaluation, clean_opt, clean_text, clean_value, is_unique_violation, source_sha256,
    to_i64,
};
use super::write::Write;
use crate::StoreError;
use crate::model::{
    CandidateId, CandidateRef, Checkpoint, Decided, DecisionId, EvaluationId, EvaluationKind,
    LlmCallId, NewCandidate, NewDecision, ProposalId, ProposalIds, Proposed, RunId, RunStatus,
    Spent,
};

const INSERT_CANDIDATE: &str = "INSERT INTO candidates (run_id, iteration, island, cell, \
     descriptors, source, source_sha256, provider, model, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id";

const INSERT_PARENT: &str =
    "INSERT INTO candidate_parents (candidate_id, position, parent_id) VALUES ($1, $2, $3)";

const INSERT_DECISION: &str = "INSERT INTO decisions (run_id, iteration, candidate_id, island, \
     cell, promoted, incumbent_id, reason, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id";

const INSERT_STEP: &str = "INSERT INTO steps (run_id, iteration, incumbent_id, previous_id, \
     rng_state, strategy_state, input_tokens, output_tokens, reasoning_tokens, cost_usd, wall_s, \
     created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

/// What every database error of an iteration's transaction says it was
/// doing.
const WHAT: &str = "record iteration";

/// Each proposal's evaluation ready to insert, prepared before the
/// transaction starts, so that serializing one cannot fail half-way
/// through it.
pub(super) fn prepare_evaluations(
    proposed: &[Proposed],
) -> Result<Vec<Option<PreparedEvaluation>>, StoreError> {
    proposed
        .iter()
        .map(|p| {
            p.evaluation
                .as_ref()
                .map(|e| PreparedEvaluation::new(&e.evaluation, e.reused_from))
                .transpose()
        })
        .collect()
}

/// The checkpoint's token counts as stored, refused when too large to
/// store; checked as soon as the strategy has decided, before anything
/// that depends on its decisions is written.
pub(super) fn spent_tokens(spent: &Spent) -> Result<[i64; 3], StoreError> {
    Ok([
        to_i64(spent.input_tokens, "input tokens")?,
        to_i64(spent.output_tokens, "output tokens")?,
        to_i64(spent.reasoning_tokens, "reasoning tokens")?,
    ])
}

/// The stored id of each proposal's candidate (None where a proposal has
/// none), in the order of the proposals: what a [`CandidateRef::Proposal`]
/// of the iteration refers to.
pub(super) struct StoredCandidates(Vec<Option<i64>>);

impl StoredCandidates {
    /// The ids as the strategy's `decide` sees them.
    pub(super) fn ids(&self) -> Vec<Option<CandidateId>> {
        self.0.iter().map(|id| id.map(CandidateId)).collect()
    }

    /// The stored id that `r` names.
    fn resolve(&self, r: &CandidateRef) -> i64 {
        match r {
            CandidateRef::Stored(id) => id.0,
            // validate() guarantees the proposal has a candidate.
            CandidateRef::Proposal(j) => self.0[*j].expect("validated reference"),
        }
    }
}

/// One iteration's write transaction, and what all of its rows share.
pub(super) struct IterationWrite<'a> {
    store: &'a Store,
    write: Write<'a>,
    run: &'a RunId,
    /// The iteration's number, as errors name it.
    number: u32,
    /// The same number, as stored.
    iteration: i64,
    /// When every row of the iteration was created.
    at: DateTime<Utc>,
}

impl<'a> IterationWrite<'a> {
    /// Starts the transaction that the whole iteration is written in.
    pub(super) async fn begin(
        store: &'a Store,
        run: &'a RunId,
        number: u32,
        at: DateTime<Utc>,
    ) -> Result<Self, StoreError> {
        Ok(IterationWrite {
            store,
            write: Write::begin(store, WHAT).await?,
            run,
            number,
            iteration: i64::from(number),
            at,
        })
    }

    /// The run must exist and be running, since iterations are only added
    /// to a running run, and every evaluation must be of the run's task.
    pub(super) async fn check_run(
        &mut self,
        evaluations: &[Option<PreparedEvaluation>],
    ) -> Result<(), StoreError> {
        let run = self.run;
        let row: Option<(String, String)> = on_tx!(self.write, async |conn| {
            sqlx::query_as("SELECT status, task FROM runs WHERE id = $1")
                .bind(&run.0)
                .fetch_optional(conn)
                .await
        })
        .map_err(self.store.db(WHAT))?;
        let Some((status, task)) = row else {
            return Err(StoreError::RunNotFound(run.clone()));
        };
        let status: RunStatus = self.store.parse(&status)?;
        if status != RunStatus::Running {
            return Err(StoreError::RunStatus {
                run: run.clone(),
                status,
                why: "iterations can only be added to a running run",
            });
        }
        for ev in evaluations.iter().flatten() {
            if ev.task != task {
                return Err(StoreError::InvalidRecord(format!(
                    "an evaluation of task `{}` cannot belong to a run of task `{task}`",
                    ev.task
                )));
            }
        }
        Ok(())
    }

    /// Refuses an iteration number already recorded, or one before the
    /// last, so that a candidate is never counted twice.
    pub(super) async fn check_iteration_is_next(&mut self) -> Result<(), StoreError> {
        let run = self.run;
        let last: Option<i64> = on_tx!(self.write, async |conn| {
            sqlx::query_scalar("SELECT MAX(iteration) FROM steps WHERE run_id = $1")
                .bind(&run.0)
                .fetch_one(conn)
                .await
        })
        .map_err(self.store.db(WHAT))?;
        if let Some(last) = last {
            if last == self.iteration {
                return Err(StoreError::IterationExists {
                    run: run.clone(),
                    iteration: self.number,
                });
            }
            if last > self.iteration {
                return Err(StoreError::IterationOutOfOrder {
                    run: run.clone(),
                    iteration: self.number,
                    last: self.store.iteration_of(last)?,
                });
            }
        }
        Ok(())
    }

    /// Inserts the proposals' candidates, before anything else: decisions
    /// and the checkpoint may refer to any proposal's candidate, and the
    /// strategy decides on their stored ids.
    pub(super) async fn insert_candidates(
        &mut self,
        proposed: &[Proposed],
    ) -> Result<StoredCandidates, StoreError> {
        let mut ids = Vec::with_capacity(proposed.len());
        for p in proposed {
            let id = match &p.candidate {
                Some(c) => Some(self.insert_candidate(c).await?),
                None => None,
            };
            ids.push(id);
        }
        Ok(StoredCandidates(ids))
    }

    /// Inserts one candidate and returns its id.
    async fn insert_candidate(&mut self, c: &NewCandidate) -> Result<i64, StoreError> {
        let (run, iteration, at) = (self.run, self.iteration, self.at);
        on_tx!(self.write, async |conn| {
            sqlx::query_scalar(INSERT_CANDIDATE)
                .bind(&run.0)
                .bind(iteration)
                .bind(c.island)
                .bind(clean_opt(&c.cell))
                .bind(
                    c.descriptors
                        .as_ref()
                        .map(clean_value)
                        .map(|v| Json(v.into_owned())),
                )
                .bind(clean_text(&c.source))
                .bind(source_sha256(&c.source))
                .bind(clean_opt(&c.provider))
                .bind(clean_opt(&c.model))
                .bind(at)
                .fetch_one(conn)
                .await
        })
        .map_err(self.store.db(WHAT))
    }

    /// Incumbents, previous candidates, re-measured and validated
    /// candidates that the strategy named by id must be this run's: a
    /// decision about another run's candidate is a bug.
    pub(super) async fn check_references(&mut self, decided: &Decided) -> Result<(), StoreError> {
        let stored_refs: Vec<CandidateId> = decided
            .decisions
            .iter()
            .filter_map(|d| d.incumbent)
            .chain(decided.checkpoint.incumbent)
            .chain(decided.checkpoint.previous)
            .filter_map(|r| match r {
                CandidateRef::Stored(id) => Some(id),
                CandidateRef::Proposal(_) => None,
            })
            .chain(
                decided
                    .remeasurements
                    .iter()
                    .flat_map(|r| r.candidates.iter().copied()),
            )
            .chain(
                decided
                    .validations
                    .iter()
                    .filter_map(|v| match v.candidate {
                        CandidateRef::Stored(id) => Some(id),
                        CandidateRef::Proposal(_) => None,
                    }),
            )
            .collect();
        self.write.ensure_run_owns(self.run, &stored_refs).await
    }

    /// Inserts what each proposal produced and the decision about it, in
    /// the order of the proposals, and returns the ids of each.
    pub(super) async fn insert_proposals(
        &mut self,
        proposed: &[Proposed],
        evaluations: &[Option<PreparedEvaluation>],
        decided: &Decided,
        candidates: &StoredCandidates,
    ) -> Result<Vec<ProposalIds>, StoreError> {
        let mut ids = Vec::with_capacity(proposed.len());
        for (i, (p, d)) in proposed.iter().zip(&decided.decisions).enumerate() {
            let proposal_ids = self
                .insert_proposal(p, evaluations[i].as_ref(), d, candidates.0[i], candidates)
                .await?;
            ids.push(proposal_ids);
        }
        Ok(ids)
    }

    /// Inserts one proposal's rows: its candidate's parents, its model
    /// calls (linked to the candidate when there is one), its evaluation,
    /// and the decision about it.
    async fn insert_proposal(
        &mut self,
        p: &Proposed,
        evaluation: Option<&PreparedEvaluation>,
        d: &NewDecision,
        candidate_id: Option<i64>,
        candidates: &StoredCandidates,
    ) -> Result<ProposalIds, StoreError> {
        if let (Some(c), Some(cid)) = (&p.candidate, candidate_id) {
            self.insert_parents(cid, &c.parents, candidates).await?;
        }

        let mut call_ids = Vec::with_capacity(p.llm_calls.len());
        for call in &p.llm_calls {
            let id = self
                .write
                .insert_llm_call(self.run, candidate_id, self.iteration, call, self.at)
                .await?;
            call_ids.push(LlmCallId(id));
        }

        let evaluation_id = match (evaluation, candidate_id) {
            (Some(ev), Some(cid)) => {
                let kind = EvaluationKind::InDistribution;
                let id = self
                    .write
                    .insert_evaluation(cid, kind, ev, ev.reused_from, self.at)
                    .await?;
                Some(EvaluationId(id))
            }
            _ => None,
        };

        let decision_id = self.insert_decision(candidate_id, d, candidates).await?;

        Ok(ProposalIds {
            candidate: candidate_id.map(CandidateId),
            evaluation: evaluation_id,
            llm_calls: call_ids,
            decision: DecisionId(decision_id),
        })
    }

    /// Inserts the parents of candidate `cid` in the strategy's order, a
    /// parent named by proposal resolved to that proposal's candidate.
    async fn insert_parents(
        &mut self,
        cid: i64,
        parents: &[CandidateRef],
        candidates: &StoredCandidates,
    ) -> Result<(), StoreError> {
        for (pos, parent) in parents.iter().enumerate() {
            let parent = candidates.resolve(parent);
            on_tx!(self.write, async |conn| {
                sqlx::query(INSERT_PARENT)
                    .bind(cid)
                    .bind(pos as i64)
                    .bind(parent)
                    .execute(conn)
                    .await
                    .map(|_| ())
            })
            .map_err(self.store.db(WHAT))?;
        }
        Ok(())
    }

    /// Inserts the decision about one proposal (about its candidate, if
    /// any) and returns its id.
    async fn insert_decision(
        &mut self,
        candidate_id: Option<i64>,
        d: &NewDecision,
        candidates: &StoredCandidates,
    ) -> Result<i64, StoreError> {
        let (run, iteration, at) = (self.run, self.iteration, self.at);
        let incumbent = d.incumbent.as_ref().map(|r| candidates.resolve(r));
        on_tx!(self.write, async |conn| {
            sqlx::query_scalar(INSERT_DECISION)
                .bind(&run.0)
                .bind(iteration)
                .bind(candidate_id)
                .bind(d.island)
                .bind(clean_opt(&d.cell))
                .bind(d.promoted)
                .bind(incumbent)
                .bind(clean_text(&d.reason))
                .bind(at)
                .fetch_one(conn)
                .await
        })
        .map_err(self.store.db(WHAT))
    }

    /// Inserts the re-measurements and validations the strategy made to
    /// decide this iteration: they are part of it.
    pub(super) async fn insert_measurements(
        &mut self,
        decided: &Decided,
        candidates: &StoredCandidates,
    ) -> Result<(), StoreError> {
        let (run, iteration, at) = (self.run, self.iteration, self.at);
        for r in &decided.remeasurements {
            self.write
                .insert_remeasurement(run, iteration, r, at)
                .await?;
        }
        for v in &decided.validations {
            let candidate = candidates.resolve(&v.candidate);
            self.write
                .insert_validation(run, iteration, candidate, v, at)
                .await?;
        }
        Ok(())
    }

    /// Inserts the checkpoint, where a resumed run continues. The step's
    /// key is the iteration: if another writer recorded it since
    /// [`Self::check_iteration_is_next`], this is where that shows.
    pub(super) async fn insert_step(
        &mut self,
        cp: &Checkpoint,
        tokens: [i64; 3],
        candidates: &StoredCandidates,
    ) -> Result<(), StoreError> {
        let (run, iteration, at) = (self.run, self.iteration, self.at);
        let incumbent = cp.incumbent.as_ref().map(|r| candidates.resolve(r));
        let previous = cp.previous.as_ref().map(|r| candidates.resolve(r));
        let step = on_tx!(self.write, async |conn| {
            sqlx::query(INSERT_STEP)
                .bind(&run.0)
                .bind(iteration)
                .bind(incumbent)
                .bind(previous)
                .bind(
                    cp.rng_state
                        .as_ref()
                        .map(clean_value)
                        .map(|v| Json(v.into_owned())),
                )
                .bind(
                    cp.strategy_state
                        .as_ref()
                        .map(clean_value)
                        .map(|v| Json(v.into_owned())),
                )
                .bind(tokens[0])
                .bind(tokens[1])
                .bind(tokens[2])
                .bind(cp.spent.cost_usd)
                .bind(cp.spent.wall_s)
                .bind(at)
                .execute(conn)
                .await
                .map(|_| ())
        });
        match step {
            Ok(_) => Ok(()),
            // Another writer recorded this iteration since our check.
            Err(e) if is_unique_violation(&e) => Err(StoreError::IterationExists {
                run: run.clone(),
                iteration: self.number,
            }),
            Err(e) => Err(self.store.db(WHAT)(e)),
        }
    }

    /// Marks the pending proposal that this iteration answers (ask/tell,
    /// batch) answered, so an answer is stored once; one that is not
    /// pending, or not this run's, is refused, saying what it is.
    pub(super) async fn close_answered(&mut self, answered: ProposalId) -> Result<(), StoreError> {
        let (run, iteration, at) = (self.run, self.iteration, self.at);
        let affected = on_tx!(self.write, async |conn| {
            sqlx::query(
                "UPDATE proposals SET status = 'answered', iteration = $1, closed_at = $2 \
                 WHERE id = $3 AND run_id = $4 AND status = 'pending'",
            )
            .bind(iteration)
            .bind(at)
            .bind(answered.0)
            .bind(&run.0)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .map_err(self.store.db(WHAT))?;
        if affected == 1 {
            return Ok(());
        }
        let found: Option<ProposalRow> = on_tx!(self.write, async |conn| {
            sqlx::query_as(AssertSqlSafe(format!(
                "{PROPOSAL_COLUMNS} WHERE id = $1 AND run_id = $2"
            )))
            .bind(answered.0)
            .bind(&run.0)
            .fetch_optional(conn)
            .await
        })
        .map_err(self.store.db(WHAT))?;
        Err(match found {
            None => StoreError::ProposalNotFound {
                run: run.clone(),
                id: answered,
            },
            Some(row) => {
                let p = self.store.proposal_of(row)?;
                StoreError::ProposalClosed {
                    run: run.clone(),
                    id: answered,
                    status: p.status,
                    iteration: p.iteration,
                }
            }
        })
    }

    /// Commits the iteration: from here on it is stored, all of it.
    pub(super) async fn commit(self) -> Result<(), StoreError> {
        self.write.commit().await
    }
}
