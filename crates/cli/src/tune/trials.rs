//! The search's steps: one configuration at a time, served from the
//! store when it was measured with the same settings, else measured, then
//! decided against the incumbent and stored as an iteration.

use std::collections::HashMap;
use std::time::Instant;

use anyhow::Result;
use indicatif::ProgressBar;
use kevo_eval::Evaluation;
use kevo_store::{CandidateId, CandidateRef, NewDecision, NewEvaluation, source_sha256};
use kevo_tune::Configuration;
use kevo_worker::Worker;

use super::{Row, Tuning, record};

/// The search's state between configurations.
pub(super) struct Trials {
    /// The best correct configuration so far: its stored candidate and
    /// score.
    incumbent: Option<(CandidateId, f64)>,
    /// Which runs measured with our settings, asked once per run.
    settings_of_run: HashMap<String, bool>,
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Trials {
    pub(super) fn new(bar: Option<ProgressBar>, started: Instant) -> Self {
        Trials {
            incumbent: None,
            settings_of_run: HashMap::new(),
            bar,
            started,
        }
    }

    /// The progress bar cleared, once the search is over.
    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// One configuration: served from the store or measured, decided
    /// against the incumbent, and stored as an iteration.
    pub(super) fn trial(
        &mut self,
        t: &Tuning,
        worker: &mut Worker,
        c: &Configuration,
        index: usize,
    ) -> Result<(Option<f64>, Row)> {
        let source = t.kernel.instantiate(c);
        let cached = if t.args.no_cache {
            None
        } else {
            self.cached(t, &source)?
        };
        let (evaluation, cached_from) = match cached {
            Some((id, evaluation)) => (evaluation, Some(id)),
            None => (
                worker.evaluate(t.task.name(), &source, &t.plan.in_distribution, t.timeout),
                None,
            ),
        };
        // Only a correct configuration competes: a suspicious one (beyond
        // the roofline) must not win a search.
        let score = evaluation.outcome.score();
        let promoted = score.is_some_and(|s| self.incumbent.is_none_or(|(_, b)| s > b));
        let mut r = record(
            &source,
            "tuner",
            Some(t.args.strategy.name()),
            NewEvaluation {
                evaluation: evaluation.clone(),
                reused_from: cached_from.map(kevo_store::EvaluationId),
            },
            index as u32 + 1,
        );
        let reason = match score {
            Some(_) if promoted => "best configuration so far".to_string(),
            Some(_) => "not better".to_string(),
            None => format!("failed: {}", evaluation.outcome.kind()),
        };
        let kept = self.kept(promoted);
        r.proposals[0].decision = NewDecision {
            promoted,
            incumbent: kept,
            island: None,
            cell: None,
            reason: format!("{}: {reason}", t.kernel.space.describe(c)),
        };
        r.checkpoint.incumbent = kept;
        r.checkpoint.spent.wall_s = self.started.elapsed().as_secs_f64();
        let stored = t.runtime.block_on(t.store.record_iteration(&t.run, &r))?[0]
            .candidate
            .expect("a candidate was recorded");
        if let Some(s) = score.filter(|_| promoted) {
            self.incumbent = Some((stored, s));
        }
        self.show_progress();
        let row = Row {
            index,
            configuration: c.clone(),
            evaluation,
            cached_from,
            candidate: stored,
        };
        Ok((score, row))
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

    fn show_progress(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(match self.incumbent {
                Some((_, s)) => format!("best {s:.4}"),
                None => "no correct configuration yet".into(),
            });
        }
    }

    /// A measurement of `source` the store holds for this task, size set
    /// and device, taken with our settings.
    fn cached(&mut self, t: &Tuning, source: &str) -> Result<Option<(i64, Evaluation)>> {
        let found = t.runtime.block_on(t.store.find_measurement(
            t.task.name(),
            &t.device.backend,
            &t.device.name,
            t.size_set,
            &source_sha256(source),
        ))?;
        match found {
            Some(stored) => self.same_settings(t, stored),
            None => Ok(None),
        }
    }

    /// The stored evaluation, if its run measured with our settings.
    fn same_settings(
        &mut self,
        t: &Tuning,
        stored: kevo_store::StoredEvaluation,
    ) -> Result<Option<(i64, Evaluation)>> {
        let candidate = t.runtime.block_on(t.store.candidate(stored.candidate_id))?;
        let run_id = candidate.run_id.0.clone();
        let same = match self.settings_of_run.get(&run_id) {
            Some(same) => *same,
            None => {
                let info = t.runtime.block_on(t.store.run(&candidate.run_id))?;
                let same = info.config.get("measured_with") == Some(&t.measured_with);
                self.settings_of_run.insert(run_id, same);
                same
            }
        };
        Ok(same
            .then(|| stored.evaluation().ok().map(|e| (stored.id.0, e)))
            .flatten())
    }
}
