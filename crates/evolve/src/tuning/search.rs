//! The session's first two stages: the naive seed measured as the
//! baseline, then the strategy's configurations within the budget, one
//! trial each ([`super::trials`]).

use std::time::Instant;

use kevo_eval::Evaluation;
use kevo_store::{CandidateId, StoreError};
use kevo_tune::{Step, Stop};
use kevo_worker::Worker;

use super::error::{TuneError, chain};
use super::observer::TuneObserver;
use super::outcome::TrialRow;
use super::record::{decision, record};
use super::session::Tuning;
use super::trials::Trials;

impl Tuning {
    /// The naive seed, measured in this session (the baseline of the
    /// speedups) and stored as iteration 0, never the incumbent.
    pub(super) fn measure_seed(
        &self,
        worker: &mut Worker,
    ) -> Result<(Evaluation, CandidateId), TuneError> {
        let seed_source = &self.kernel.seed_source;
        let baseline = worker.evaluate(
            self.task,
            seed_source,
            &self.plan.in_distribution,
            self.timeout,
        );
        let mut seed_record = record(seed_source, "seed", None, baseline.clone().into(), 0);
        seed_record.proposals[0].decision =
            decision(false, None, "baseline: the task's naive seed".into());
        seed_record.checkpoint.incumbent = None;
        let seed_id = self
            .runtime
            .block_on(self.store.record_iteration(&self.run, &seed_record))?[0]
            .candidate
            .ok_or(TuneError::SeedNotStored)?;
        Ok((baseline, seed_id))
    }

    /// The strategy's configurations within the budget, each one stored
    /// as an iteration; the index of the best by its single measurement,
    /// and why the search stopped. A store error ends the search and marks
    /// the run failed.
    pub(super) fn search(
        &self,
        worker: &mut Worker,
        started: Instant,
        seed_score: Option<f64>,
        observer: &mut dyn TuneObserver,
    ) -> Result<(Vec<TrialRow>, Option<usize>, Stop), TuneError> {
        let valid = self.kernel.space.valid().len();
        observer.search_started(self.budget.evaluations.unwrap_or(0).min(valid) as u64);
        let mut trials = Trials::new(started, seed_score);
        let mut search = self.strategy.build(self.seed);
        let mut failure: Option<StoreError> = None;
        let (done, stop) = kevo_tune::run(
            &self.kernel.space,
            search.as_mut(),
            self.budget,
            |c, index| match trials.trial(self, worker, c, index) {
                Ok(row) => {
                    observer.trial(&row, trials.best_score());
                    Step::Scored(row.evaluation.outcome.score(), row)
                }
                Err(e) => {
                    failure = Some(e);
                    Step::Break
                }
            },
        );
        observer.search_finished();
        if let Some(e) = failure {
            let _ = self
                .runtime
                .block_on(self.store.mark_failed(&self.run, &chain(&e)));
            return Err(TuneError::Stopped {
                run: self.run.clone(),
                source: e,
            });
        }
        let best_index = kevo_tune::best(&done);
        let rows: Vec<TrialRow> = done.into_iter().map(|t| t.detail).collect();
        Ok((rows, best_index, stop))
    }
}
