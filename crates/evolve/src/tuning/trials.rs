//! The search's steps: one configuration at a time, served from the
//! store when it was measured with the same settings, else measured, then
//! decided against the incumbent and stored as an iteration.

use std::time::Instant;

use kevo_eval::Evaluation;
use kevo_store::{CandidateId, CandidateRef, EvaluationId, NewEvaluation, StoreError};
use kevo_tune::Configuration;
use kevo_worker::Worker;

use super::cache::{Cache, MeasuredAt};
use super::outcome::TrialRow;
use super::record::{decision, record};
use super::session::Tuning;

/// The search's state between configurations.
pub(super) struct Trials {
    /// The best correct configuration so far: its stored candidate and
    /// score.
    incumbent: Option<(CandidateId, f64)>,
    /// The seed's score: a configuration is stored as kept only when it is
    /// the best so far and beats the seed, so the report never rings a
    /// configuration slower than the kernel the tuning started from.
    seed_score: Option<f64>,
    cache: Cache,
    started: Instant,
}

impl Trials {
    pub(super) fn new(started: Instant, seed_score: Option<f64>) -> Self {
        Trials {
            incumbent: None,
            seed_score,
            cache: Cache::default(),
            started,
        }
    }

    /// The best correct score so far.
    pub(super) fn best_score(&self) -> Option<f64> {
        self.incumbent.map(|(_, s)| s)
    }

    /// One configuration: served from the store or measured, decided
    /// against the incumbent, and stored as an iteration.
    pub(super) fn trial(
        &mut self,
        t: &Tuning,
        worker: &mut Worker,
        c: &Configuration,
        index: usize,
    ) -> Result<TrialRow, StoreError> {
        let source = t.kernel.instantiate(c);
        let (evaluation, cached_from) = self.evaluate(t, worker, &source)?;
        let candidate = self.store(t, c, index, &source, &evaluation, cached_from)?;
        Ok(TrialRow {
            index,
            configuration: c.clone(),
            evaluation,
            cached_from,
            candidate,
        })
    }

    /// The store's measurement of `source` (and its id) when the cache is
    /// on and holds one, else a new one.
    fn evaluate(
        &mut self,
        t: &Tuning,
        worker: &mut Worker,
        source: &str,
    ) -> Result<(Evaluation, Option<i64>), StoreError> {
        let cached = if t.cache {
            let backend = t.device.backend.to_string();
            let at = MeasuredAt {
                task: t.task.name(),
                backend: &backend,
                device: &t.device.name,
                size_set: t.size_set,
                measured_with: &t.measured_with,
            };
            self.cache.lookup(&t.runtime, &t.store, &at, source)?
        } else {
            None
        };
        Ok(match cached {
            Some((id, evaluation)) => (evaluation, Some(id)),
            None => (
                worker.evaluate(t.task, source, &t.plan.in_distribution, t.timeout),
                None,
            ),
        })
    }

    /// The trial decided against the incumbent and stored as iteration
    /// `index + 1`; its stored candidate.
    fn store(
        &mut self,
        t: &Tuning,
        c: &Configuration,
        index: usize,
        source: &str,
        evaluation: &Evaluation,
        cached_from: Option<i64>,
    ) -> Result<CandidateId, StoreError> {
        // Only a correct configuration competes: a suspicious one (beyond
        // the roofline) must not win a search.
        let score = evaluation.outcome.score();
        let promoted = score.is_some_and(|s| self.incumbent.is_none_or(|(_, b)| s > b));
        let beats_seed = score.is_some_and(|s| self.seed_score.is_none_or(|seed| s > seed));
        let mut r = record(
            source,
            "tuner",
            Some(t.strategy.name()),
            NewEvaluation {
                evaluation: evaluation.clone(),
                reused_from: cached_from.map(EvaluationId),
            },
            index as u32 + 1,
        );
        let reason = match (score, self.seed_score) {
            (Some(_), _) if promoted && beats_seed => "best configuration so far".to_string(),
            (Some(_), Some(seed)) if promoted => {
                format!("best configuration so far, below the seed's {seed:.4}")
            }
            (Some(_), _) => "not better".to_string(),
            (None, _) => format!("failed: {}", evaluation.outcome.kind()),
        };
        let kept = self.kept(promoted);
        let described = t.kernel.space.describe(c);
        r.proposals[0].decision = decision(
            promoted && beats_seed,
            kept,
            format!("{described}: {reason}"),
        );
        r.checkpoint.incumbent = kept;
        r.checkpoint.spent.wall_s = self.started.elapsed().as_secs_f64();
        let stored = t.runtime.block_on(t.store.record_iteration(&t.run, &r))?[0]
            .candidate
            .expect("a candidate was recorded");
        if let Some(s) = score.filter(|_| promoted) {
            self.incumbent = Some((stored, s));
        }
        Ok(stored)
    }

    /// The incumbent after this trial: the new candidate when it is
    /// promoted, else the one before (none before a correct one).
    fn kept(&self, promoted: bool) -> Option<CandidateRef> {
        match (promoted, self.incumbent) {
            (true, _) => Some(CandidateRef::Proposal(0)),
            (false, Some((id, _))) => Some(id.into()),
            (false, None) => None,
        }
    }
}
