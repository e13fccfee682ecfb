//! The tuning session: the worker started, the kernel resolved and the run
//! created; then the seed, the search, the confirmation, the held-out
//! measurement and the run's summary, in that order ([`tune`]).

use std::ops::Deref;
use std::time::{Duration, Instant};

use kevo_backend::DeviceInfo;
use kevo_eval::Evaluation;
use kevo_store::{RunId, Store};
use kevo_tasks::{SizePlan, SizeSet, Task};
use kevo_tune::{Budget, Stop, StrategyKind, TuningSpace};
use kevo_worker::Worker;
use serde_json::Value;
use tokio::runtime::Runtime;

use super::error::TuneError;
use super::kernel::TunedKernel;
use super::observer::{Started, TuneObserver};
use super::outcome::{HeldOutResult, TrialRow, Tuned};
use super::record::{measured_with, new_run, summary};
use super::request::{KernelOut, StoreLocation, TuneRequest};
use crate::remeasure::Confirmation;

/// Run the tuning `request` asks for, telling `observer` as it goes.
/// The run is stored whatever happens after it is created: finished with
/// its summary, or failed when the store failed during the search.
pub fn tune(request: TuneRequest, observer: &mut dyn TuneObserver) -> Result<Tuned, TuneError> {
    request.check()?;
    let (tuning, mut worker) = Tuning::start(request, observer)?;
    let (baseline, seed_id) = tuning.measure_seed(&mut worker)?;
    // The search's clock starts after the seed's measurement.
    let started = Instant::now();
    let seed_score = baseline.outcome.score();
    let (rows, best_index, stop) = tuning.search(&mut worker, started, seed_score, observer)?;
    let (best, confirmation) = tuning.confirm(&mut worker, &rows, best_index);
    let held_out = match best {
        Some(b) if tuning.measure_held_out => {
            Some(tuning.held_out(&mut worker, &rows[b], seed_id)?)
        }
        _ => None,
    };
    let written = best.map(|b| tuning.write_kernel(&rows[b])).transpose()?;
    tuning.finish(Found {
        rows,
        best,
        baseline,
        confirmation,
        held_out,
        written,
        stop,
        started,
    })
}

/// What every step reads, fixed before the run is stored.
pub(super) struct Setup {
    pub(super) task: &'static Task,
    pub(super) size_set: SizeSet,
    pub(super) strategy: StrategyKind,
    pub(super) seed: u64,
    pub(super) cache: bool,
    pub(super) measure_held_out: bool,
    pub(super) out: KernelOut,
    pub(super) plan: SizePlan,
    pub(super) timeout: Duration,
    pub(super) device: DeviceInfo,
    pub(super) kernel: TunedKernel,
    pub(super) budget: Budget,
    /// What, besides the source, decides a measurement (see
    /// [`measured_with`]).
    pub(super) measured_with: Value,
}

/// One tuning run under way: its setup (read through `Deref`) and its
/// store. The worker is kept apart, as the one thing the steps change.
pub(super) struct Tuning {
    setup: Setup,
    pub(super) runtime: Runtime,
    pub(super) store: Store,
    pub(super) run: RunId,
}

impl Deref for Tuning {
    type Target = Setup;

    fn deref(&self) -> &Setup {
        &self.setup
    }
}

/// What the steps found, before the run's summary is stored.
struct Found {
    rows: Vec<TrialRow>,
    best: Option<usize>,
    baseline: Evaluation,
    confirmation: Option<Confirmation>,
    held_out: Option<HeldOutResult>,
    written: Option<std::path::PathBuf>,
    stop: Stop,
    started: Instant,
}

/// The evaluations asked for, or every valid configuration for an
/// exhaustive search and 32 otherwise.
fn budget(
    strategy: StrategyKind,
    evaluations: Option<usize>,
    seconds: Option<f64>,
    space: &TuningSpace,
) -> Budget {
    Budget {
        evaluations: Some(evaluations.unwrap_or(match strategy {
            StrategyKind::Exhaustive => space.valid().len(),
            _ => 32,
        })),
        seconds,
    }
}

impl Tuning {
    /// The worker started, the kernel resolved and the run created and
    /// announced.
    fn start(
        request: TuneRequest,
        observer: &mut dyn TuneObserver,
    ) -> Result<(Self, Worker), TuneError> {
        let TuneRequest {
            task,
            kernel,
            strategy,
            evaluations,
            seconds,
            seed,
            size_set,
            cache,
            held_out,
            time_limit,
            worker: config,
            command,
            store,
            out,
        } = request;
        let measured_with = measured_with(&config);
        let worker = Worker::start(command, config)?;
        let device = worker.device().clone();
        let kernel = TunedKernel::resolve(task, device.dialect, kernel)?;
        let budget = budget(strategy, evaluations, seconds, &kernel.space);
        let plan = task.sizes(size_set);
        let timeout = time_limit.resolve(task, size_set, &plan.in_distribution, worker.ceilings());
        let setup = Setup {
            task,
            size_set,
            strategy,
            seed,
            cache,
            measure_held_out: held_out,
            out,
            plan,
            timeout,
            device,
            kernel,
            budget,
            measured_with,
        };
        let tuning = Tuning::open(setup, &store, &worker)?;
        observer.started(&Started {
            run: &tuning.run,
            task,
            device: &tuning.device,
            sandbox: worker.sandbox(),
            size_set,
            space: &tuning.kernel.space,
            strategy,
            budget,
        });
        Ok((tuning, worker))
    }

    /// The store opened and the run created in it.
    fn open(setup: Setup, location: &StoreLocation, worker: &Worker) -> Result<Self, TuneError> {
        let runtime = Runtime::new().map_err(TuneError::Runtime)?;
        let store = runtime.block_on(location.open())?;
        let run = runtime.block_on(store.create_run(&new_run(&setup, worker)))?;
        Ok(Tuning {
            setup,
            runtime,
            store,
            run,
        })
    }

    /// The result, once the run's summary is stored.
    fn finish(self, found: Found) -> Result<Tuned, TuneError> {
        let Tuning {
            setup,
            runtime,
            store,
            run,
        } = self;
        let tuned = Tuned {
            run,
            task: setup.task,
            device: setup.device,
            size_set: setup.size_set,
            strategy: setup.strategy,
            seed: setup.seed,
            budget: setup.budget,
            space: setup.kernel.space,
            rows: found.rows,
            best: found.best,
            baseline: found.baseline,
            confirmation: found.confirmation,
            held_out: found.held_out,
            written: found.written,
            stop: found.stop,
            started: found.started,
        };
        runtime.block_on(store.mark_finished(&tuned.run, &summary(&tuned)))?;
        Ok(tuned)
    }
}
