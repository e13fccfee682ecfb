//! The store as a cache of measurements: a configuration measured before
//! for the same task, size set and device, with the same settings, is
//! served from the store instead of measured again.

use std::collections::HashMap;

use kevo_eval::Evaluation;
use kevo_store::{Store, StoreError, StoredEvaluation, source_sha256};
use kevo_tasks::SizeSet;
use serde_json::Value;
use tokio::runtime::Runtime;

/// Which measurements can stand in for a new one.
pub(super) struct MeasuredAt<'a> {
    pub(super) task: &'a str,
    pub(super) backend: &'a str,
    pub(super) device: &'a str,
    pub(super) size_set: SizeSet,
    /// The run's settings that decide a measurement (stored with every
    /// tuning run as `measured_with`).
    pub(super) measured_with: &'a Value,
}

/// The cache's memory across lookups.
#[derive(Default)]
pub(super) struct Cache {
    /// Which runs measured with our settings, asked once per run.
    settings_of_run: HashMap<String, bool>,
}

impl Cache {
    /// A measurement of `source` the store holds for `at`'s task, size
    /// set and device, taken with its settings: the stored evaluation's id
    /// and the evaluation.
    pub(super) fn lookup(
        &mut self,
        runtime: &Runtime,
        store: &Store,
        at: &MeasuredAt,
        source: &str,
    ) -> Result<Option<(i64, Evaluation)>, StoreError> {
        let found = runtime.block_on(store.find_measurement(
            at.task,
            at.backend,
            at.device,
            at.size_set,
            &source_sha256(source),
        ))?;
        match found {
            Some(stored) => self.same_settings(runtime, store, at.measured_with, stored),
            None => Ok(None),
        }
    }

    /// The stored evaluation, if its run measured with `measured_with`.
    fn same_settings(
        &mut self,
        runtime: &Runtime,
        store: &Store,
        measured_with: &Value,
        stored: StoredEvaluation,
    ) -> Result<Option<(i64, Evaluation)>, StoreError> {
        let candidate = runtime.block_on(store.candidate(stored.candidate_id))?;
        let run_id = candidate.run_id.0.clone();
        let same = match self.settings_of_run.get(&run_id) {
            Some(same) => *same,
            None => {
                let info = runtime.block_on(store.run(&candidate.run_id))?;
                let same = info.config.get("measured_with") == Some(measured_with);
                self.settings_of_run.insert(run_id, same);
                same
            }
        };
        Ok(same
            .then(|| stored.evaluation().ok().map(|e| (stored.id.0, e)))
            .flatten())
    }
}
