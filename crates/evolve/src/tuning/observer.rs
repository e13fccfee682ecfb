//! What a tuning session reports as it goes, for a display of its
//! progress: the run it started, and each configuration as it is stored.
//! Every method has a default that ignores the report.

use kevo_backend::DeviceInfo;
use kevo_store::RunId;
use kevo_tasks::{SizeSet, Task};
use kevo_tune::{Budget, StrategyKind, TuningSpace};
use kevo_worker::kevo_sandbox;

use super::outcome::TrialRow;

/// The session's run is stored and its worker started; nothing is
/// measured yet.
pub struct Started<'a> {
    pub run: &'a RunId,
    pub task: &'a Task,
    pub device: &'a DeviceInfo,
    /// How the worker is confined.
    pub sandbox: &'a kevo_sandbox::Status,
    pub size_set: SizeSet,
    pub space: &'a TuningSpace,
    pub strategy: StrategyKind,
    pub budget: Budget,
}

/// Hears of a session's progress.
pub trait TuneObserver {
    /// The run is created (before the seed is measured).
    fn started(&mut self, _started: &Started<'_>) {}
    /// The search begins, after the seed's measurement: at most `planned`
    /// configurations.
    fn search_started(&mut self, _planned: u64) {}
    /// A configuration was evaluated (or served from the store) and
    /// stored; `best` is the best correct score so far.
    fn trial(&mut self, _trial: &TrialRow, _best: Option<f64>) {}
    /// The search is over, before a failure of it is reported.
    fn search_finished(&mut self) {}
}

/// Hears nothing.
impl TuneObserver for () {}
