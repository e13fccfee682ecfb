//! What a tuning session is asked to do: the task and kernel, the strategy
//! and its budget, how to measure, where to store and where to write the
//! best kernel. A plain value, checked before any device is opened.

use std::path::PathBuf;
use std::time::Duration;

use kevo_roofline::Ceilings;
use kevo_store::{Store, StoreError};
use kevo_tasks::{Size, SizeSet, Task};
use kevo_tune::StrategyKind;
use kevo_worker::{WorkerCommand, WorkerConfig};

use super::error::TuneError;
use super::kernel::GivenKernel;

/// The time limit of a configuration's evaluation, from the task, its
/// size set, the sizes measured and the device's ceilings.
pub type DefaultTimeout = fn(&Task, SizeSet, &[Size], &Ceilings) -> Duration;

/// The hard wall-clock limit per configuration.
#[derive(Debug, Clone, Copy)]
pub enum TimeLimit {
    /// As given, in seconds.
    Seconds(f64),
    /// Computed once the device is known.
    Default(DefaultTimeout),
}

impl TimeLimit {
    pub(super) fn resolve(
        self,
        task: &Task,
        set: SizeSet,
        sizes: &[Size],
        ceilings: &Ceilings,
    ) -> Duration {
        match self {
            TimeLimit::Seconds(s) => Duration::from_secs_f64(s),
            TimeLimit::Default(f) => f(task, set, sizes, ceilings),
        }
    }
}

/// The run store to record the session in.
#[derive(Debug, Clone)]
pub enum StoreLocation {
    /// A store named by its location, e.g. `postgres://host/db`.
    Url(String),
    /// The workspace's SQLite file.
    Workspace(PathBuf),
}

impl StoreLocation {
    pub(super) async fn open(&self) -> Result<Store, StoreError> {
        match self {
            StoreLocation::Url(url) => Store::open(url).await,
            StoreLocation::Workspace(dir) => Store::open_workspace(dir).await,
        }
    }
}

/// Where the best configuration's kernel is written.
#[derive(Debug, Clone)]
pub enum KernelOut {
    /// This file.
    File(PathBuf),
    /// `RUN.EXT` in this folder (created when missing).
    Folder(PathBuf),
}

/// One tuning session, as asked for.
pub struct TuneRequest {
    pub task: &'static Task,
    /// The template to tune; the task's tunable variant of its seed when
    /// absent.
    pub kernel: Option<GivenKernel>,
    pub strategy: StrategyKind,
    /// Configurations to evaluate (cached ones count too). Default: every
    /// valid one for exhaustive, 32 otherwise.
    pub evaluations: Option<usize>,
    /// Stop starting configurations after this many seconds.
    pub seconds: Option<f64>,
    /// Seed of the strategy's random choices.
    pub seed: u64,
    pub size_set: SizeSet,
    /// Serve configurations the store has measured with the same settings.
    pub cache: bool,
    /// Measure the best configuration and the seed at the held-out size.
    pub held_out: bool,
    pub time_limit: TimeLimit,
    /// The worker to measure with, and how to start it.
    pub worker: WorkerConfig,
    pub command: WorkerCommand,
    pub store: StoreLocation,
    pub out: KernelOut,
}

impl TuneRequest {
    /// What can be checked before anything is started.
    pub fn check(&self) -> Result<(), TuneError> {
        check_budget(self.evaluations, self.seconds)
    }
}

/// A budget of at least one configuration and a positive, finite number
/// of seconds.
pub fn check_budget(evaluations: Option<usize>, seconds: Option<f64>) -> Result<(), TuneError> {
    if let Some(b) = seconds
        && !(b.is_finite() && b > 0.0)
    {
        return Err(TuneError::BudgetSeconds(b));
    }
    if evaluations == Some(0) {
        return Err(TuneError::NoBudget);
    }
    Ok(())
}
