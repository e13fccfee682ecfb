//! The session's last stages: the best few configurations chosen again
//! against the seed on interleaved rounds, the choice measured with the
//! seed at the held-out size, and its kernel written.

use std::convert::Infallible;
use std::path::PathBuf;
use std::time::Duration;

use kevo_eval::Evaluation;
use kevo_store::CandidateId;
use kevo_tune::Configuration;
use kevo_worker::Worker;

use super::error::TuneError;
use super::outcome::{HeldOutResult, TrialRow};
use super::request::KernelOut;
use super::session::Tuning;
use crate::remeasure::{Confirmation, Confirmed, pick_and_confirm};
use crate::verdict::HeldOutComparison;

/// Configurations chosen again among: the best few by their single
/// measurement.
pub const CONFIRM_TOP: usize = 3;

impl Tuning {
    /// The single-measurement best is a maximum of noisy figures (a dozen
    /// of heat2d's 24 within 2% of each other on an H200): the top few are
    /// chosen again on interleaved rounds and the choice confirmed against
    /// the seed on fresh ones. Returns the chosen row and the confirmation.
    pub(super) fn confirm(
        &self,
        worker: &mut Worker,
        rows: &[TrialRow],
        best_index: Option<usize>,
    ) -> (Option<usize>, Option<Confirmation>) {
        let confirmed = best_index.map(|_| {
            confirm_top(
                rows,
                &mut |source: &str| {
                    worker.evaluate(self.task, source, &self.plan.in_distribution, self.timeout)
                },
                &|c| self.kernel.instantiate(c),
                &self.kernel.seed_source,
            )
        });
        let best = match &confirmed {
            Some((ranked, c)) => c.chosen.map(|i| ranked[i]).or(best_index),
            None => None,
        };
        let confirmation = confirmed.as_ref().and_then(|(_, c)| c.confirmation());
        (best, confirmation)
    }

    /// The held-out gate: the best configuration and the seed at the
    /// held-out size, in one session, stored with the run.
    pub(super) fn held_out(
        &self,
        worker: &mut Worker,
        best: &TrialRow,
        seed_id: CandidateId,
    ) -> Result<HeldOutResult, TuneError> {
        let size = self.plan.held_out.clone();
        let limit = self.timeout.max(Duration::from_secs(60));
        let source = self.kernel.instantiate(&best.configuration);
        let at_size = std::slice::from_ref(&size);
        let winner = worker.evaluate(self.task, &source, at_size, limit);
        let seed = worker.evaluate(self.task, &self.kernel.seed_source, at_size, limit);
        let comparison = HeldOutComparison {
            winner,
            seed,
            seed_kept: false,
        };
        let session = format!("{}-held-out", self.run);
        for row in comparison.records(best.candidate, seed_id, &session) {
            self.runtime
                .block_on(self.store.record_held_out(&self.run, &row))?;
        }
        let (verdict, verdict_reason) = comparison.verdict();
        Ok(HeldOutResult {
            verdict,
            verdict_reason,
            size: size.label,
            fraction: comparison.winner_fraction(),
            seed_fraction: comparison.seed_fraction(),
            speedup: comparison.speedup(),
            outcome: comparison.winner.outcome.kind().to_string(),
            seed_outcome: comparison.seed.outcome.kind().to_string(),
        })
    }

    /// The best configuration's kernel, to the file asked for or to
    /// `RUN.EXT` in the folder asked for.
    pub(super) fn write_kernel(&self, best: &TrialRow) -> Result<PathBuf, TuneError> {
        let path = match &self.out {
            KernelOut::File(p) => p.clone(),
            KernelOut::Folder(dir) => {
                std::fs::create_dir_all(dir).map_err(|source| TuneError::CreateDir {
                    path: dir.clone(),
                    source,
                })?;
                dir.join(format!("{}.{}", self.run, self.device.dialect.extension()))
            }
        };
        std::fs::write(&path, self.kernel.instantiate(&best.configuration)).map_err(|source| {
            TuneError::WriteKernel {
                path: path.clone(),
                source,
            }
        })?;
        Ok(path)
    }
}

/// The top [`CONFIRM_TOP`] correct rows (indices into `rows`, best first)
/// and their pick-and-confirm against the seed.
pub(super) fn confirm_top(
    rows: &[TrialRow],
    evaluate: &mut dyn FnMut(&str) -> Evaluation,
    instantiate: &dyn Fn(&Configuration) -> String,
    seed_source: &str,
) -> (Vec<usize>, Confirmed) {
    let score = |i: usize| {
        rows[i]
            .evaluation
            .outcome
            .score()
            .unwrap_or(f64::NEG_INFINITY)
    };
    let mut ranked: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].evaluation.outcome.score().is_some())
        .collect();
    ranked.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
    ranked.truncate(CONFIRM_TOP);
    let sources: Vec<String> = ranked
        .iter()
        .map(|&i| instantiate(&rows[i].configuration))
        .collect();
    let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
    let rounds = kevo_strategy::promotion::DEFAULT_ROUNDS;
    let confirmed = pick_and_confirm(&refs, seed_source, rounds, &mut |s| {
        Ok::<_, Infallible>(evaluate(s))
    });
    let confirmed = match confirmed {
        Ok(c) => c,
        Err(never) => match never {},
    };
    (ranked, confirmed)
}
