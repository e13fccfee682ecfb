//! Everything a report shows about one run, read from the store once, and
//! the series derived from it (one point per proposal, best so far).

use std::collections::BTreeMap;

use kevo_eval::Evaluation;
use kevo_store::{
    CandidateId, EvaluationKind, HeldOutResult, HeldOutRole, HistoryRow, RunId, RunInfo, Store,
    StoredCandidate, StoredLlmCall,
};

use crate::ReportError;

/// One run as the report reads it.
#[derive(Debug, Clone)]
pub struct RunData {
    pub info: RunInfo,
    pub history: Vec<HistoryRow>,
    pub candidates: BTreeMap<i64, StoredCandidate>,
    /// Each candidate's in-distribution evaluation (the first stored).
    pub evaluations: BTreeMap<i64, Evaluation>,
    pub llm_calls: Vec<StoredLlmCall>,
    /// Held-out results with their evaluations.
    pub held_out: Vec<(HeldOutResult, Option<Evaluation>)>,
    pub seed: Option<CandidateId>,
    pub winner: Option<CandidateId>,
    /// The run's last checkpoint: the ensemble's model choice (with a
    /// bandit, its arms) and the prompt archive of a meta-prompted run.
    pub checkpoint: Option<kevo_store::StoredCheckpoint>,
}

impl RunData {
    pub async fn gather(store: &Store, run: &RunId) -> Result<RunData, ReportError> {
        let info = store.run(run).await?;
        let history = store.history(run).await?;
        let mut candidates = BTreeMap::new();
        let mut evaluations = BTreeMap::new();
        let mut held_out_evaluations = BTreeMap::new();
        for id in history.iter().filter_map(|h| h.candidate_id) {
            if candidates.contains_key(&id.0) {
                continue;
            }
            candidates.insert(id.0, store.candidate(id).await?);
            for e in store.evaluations_of(id).await? {
                let Ok(evaluation) = e.evaluation() else {
                    continue;
                };
                match e.kind {
                    EvaluationKind::InDistribution => {
                        evaluations.entry(id.0).or_insert(evaluation);
                    }
                    EvaluationKind::HeldOut => {
                        held_out_evaluations.insert(e.id.0, evaluation);
                    }
                }
            }
        }
        let held_out = store
            .held_out_results(run)
            .await?
            .into_iter()
            .map(|h| {
                let e = held_out_evaluations.get(&h.evaluation_id.0).cloned();
                (h, e)
            })
            .collect();
        let seed = history
            .iter()
            .find(|h| h.iteration == 0)
            .and_then(|h| h.candidate_id);
        let winner = match info
            .summary
            .as_ref()
            .and_then(|s| s["best_candidate"].as_i64())
        {
            Some(w) => Some(CandidateId(w)),
            None => store.best_candidate(run).await?.map(|b| b.candidate.id),
        };
        Ok(RunData {
            checkpoint: store.last_checkpoint(run).await?,
            info,
            llm_calls: store.llm_calls(run).await?,
            history,
            candidates,
            evaluations,
            held_out,
            seed,
            winner,
        })
    }

    /// One point per proposal, in the order they were made.
    pub fn points(&self) -> Vec<Point> {
        let start = self.info.created_at;
        let mut cost_by_iteration: BTreeMap<u32, f64> = BTreeMap::new();
        for c in &self.llm_calls {
            *cost_by_iteration.entry(c.iteration).or_default() += c.call.cost_usd.unwrap_or(0.0);
        }
        let mut points = Vec::with_capacity(self.history.len());
        let mut best: Option<f64> = None;
        for h in &self.history {
            let candidate = h.candidate_id.and_then(|id| self.candidates.get(&id.0));
            let cost: f64 = cost_by_iteration
                .range(..=h.iteration)
                .map(|(_, c)| c)
                .sum();
            let score = h.score.filter(|s| s.is_finite());
            let outcome = outcome_class(h);
            if outcome == "correct"
                && let Some(s) = score
            {
                best = Some(best.map_or(s, |b: f64| b.max(s)));
            }
            points.push(Point {
                iteration: h.iteration,
                candidate: h.candidate_id.map(|c| c.0),
                outcome,
                score: if outcome == "correct" { score } else { None },
                promoted: h.promoted,
                wall_s: candidate
                    .map(|c| (c.created_at - start).num_milliseconds() as f64 / 1e3)
                    .unwrap_or(0.0)
                    .max(0.0),
                cost_usd: cost,
                best_so_far: best,
                island: h.island,
                cell: h.cell.clone(),
                model: candidate.and_then(|c| c.model.clone()),
            });
        }
        points
    }

    /// The winner's ancestors back to the seed, winner first.
    pub fn lineage(&self) -> Vec<&StoredCandidate> {
        let mut chain = Vec::new();
        let mut next = self.winner.map(|w| w.0);
        while let Some(id) = next {
            let Some(c) = self.candidates.get(&id) else {
                break;
            };
            if chain.iter().any(|seen: &&StoredCandidate| seen.id == c.id) {
                break;
            }
            chain.push(c);
            next = c.parents.first().map(|p| p.0);
        }
        chain
    }

    pub fn held_out_of(&self, role: HeldOutRole) -> Option<&(HeldOutResult, Option<Evaluation>)> {
        self.held_out.iter().rev().find(|(h, _)| h.role == role)
    }

    /// The winner's in-distribution score over the seed's: a search's
    /// summary has it; a tuning run's has the two scores.
    pub fn speedup(&self) -> Option<f64> {
        self.summary_f64("speedup").or_else(|| {
            match (
                self.summary_f64("best_score"),
                self.summary_f64("seed_score"),
            ) {
                (Some(best), Some(seed)) if seed > 0.0 => Some(best / seed),
                _ => None,
            }
        })
    }

    pub fn summary_f64(&self, key: &str) -> Option<f64> {
        self.info.summary.as_ref().and_then(|s| s[key].as_f64())
    }
}

/// What became of a proposal: the evaluation's outcome, or why there was
/// none.
fn outcome_class(h: &HistoryRow) -> &'static str {
    if h.reason.starts_with("rejected by validation") {
        return "rejected_by_validation";
    }
    match h.outcome_kind.as_deref() {
        Some("correct") => "correct",
        Some("compile_error") => "compile_error",
        Some("runtime_error") => "runtime_error",
        Some("timeout") => "timeout",
        Some("wrong_result") => "wrong_result",
        Some("suspicious") => "suspicious",
        Some("no_code") => "no_code",
        Some(_) => "other",
        None => "no_candidate",
    }
}

/// One proposal on the charts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Point {
    pub iteration: u32,
    pub candidate: Option<i64>,
    pub outcome: &'static str,
    /// The score when correct.
    pub score: Option<f64>,
    pub promoted: bool,
    /// Seconds from the run's start to the candidate's storing.
    pub wall_s: f64,
    /// Model cost spent up to and including this iteration.
    pub cost_usd: f64,
    pub best_so_far: Option<f64>,
    pub island: Option<i64>,
    pub cell: Option<String>,
    pub model: Option<String>,
}

/// A running run's facts, for tests that build a [`RunData`] by hand.
#[cfg(test)]
pub(crate) fn test_info(strategy: &str) -> RunInfo {
    RunInfo {
        id: RunId("r".into()),
        created_at: chrono::Utc::now(),
        task: "saxpy".into(),
        backend: "opencl".into(),
        device: "GPU".into(),
        size_set: kevo_tasks::SizeSet::Smoke,
        strategy: strategy.into(),
        config: serde_json::json!({}),
        status: kevo_store::RunStatus::Running,
        status_reason: None,
        rng_state: None,
        finished_at: None,
        summary: None,
    }
}
