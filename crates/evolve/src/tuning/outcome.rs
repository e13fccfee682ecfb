//! What a tuning session found: every trial, the chosen configuration, its
//! confirmation against the seed and its held-out result.

use std::path::PathBuf;
use std::time::Instant;

use kevo_backend::DeviceInfo;
use kevo_eval::Evaluation;
use kevo_store::{CandidateId, RunId};
use kevo_tasks::{SizeSet, Task};
use kevo_tune::{Budget, Configuration, Stop, StrategyKind, TuningSpace};
use serde::Serialize;

use crate::remeasure::Confirmation;
use crate::verdict::HeldOutVerdict;

/// One configuration's result.
#[derive(Debug, Clone)]
pub struct TrialRow {
    /// Its place in the search, from 0.
    pub index: usize,
    pub configuration: Configuration,
    pub evaluation: Evaluation,
    /// The stored evaluation it was served from, when cached.
    pub cached_from: Option<i64>,
    /// The stored candidate.
    pub candidate: CandidateId,
}

/// The best configuration and the seed at the held-out size, measured in
/// one session (the fields in the order they are stored).
#[derive(Debug, Clone, Serialize)]
pub struct HeldOutResult {
    pub verdict: HeldOutVerdict,
    pub verdict_reason: String,
    /// The held-out size's label.
    pub size: String,
    pub fraction: Option<f64>,
    pub seed_fraction: Option<f64>,
    pub speedup: Option<f64>,
    /// The best configuration's outcome kind there.
    pub outcome: String,
    pub seed_outcome: String,
}

/// A finished tuning session.
pub struct Tuned {
    pub run: RunId,
    pub task: &'static Task,
    pub device: DeviceInfo,
    pub size_set: SizeSet,
    pub strategy: StrategyKind,
    pub seed: u64,
    pub budget: Budget,
    pub space: TuningSpace,
    /// In the order they were tried.
    pub rows: Vec<TrialRow>,
    /// The chosen configuration (an index into `rows`).
    pub best: Option<usize>,
    /// The naive seed's measurement in this session.
    pub baseline: Evaluation,
    pub confirmation: Option<Confirmation>,
    pub held_out: Option<HeldOutResult>,
    /// Where the best configuration's kernel was written.
    pub written: Option<PathBuf>,
    pub stop: Stop,
    /// When the search began (after the seed's measurement).
    pub started: Instant,
}

impl Tuned {
    pub fn best(&self) -> Option<&TrialRow> {
        self.best.map(|i| &self.rows[i])
    }

    /// Configurations measured in this session.
    pub fn measured(&self) -> usize {
        self.rows.iter().filter(|r| r.cached_from.is_none()).count()
    }

    /// Configurations served from the store.
    pub fn from_store(&self) -> usize {
        self.rows.len() - self.measured()
    }
}
