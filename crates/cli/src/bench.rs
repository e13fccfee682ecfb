//! `kevo bench`: the evaluation latency per candidate, cold and warm and
//! split by phase; with `--isolated` the cost of the worker process, with
//! `--sandbox-cost` the cost of its confinement.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Args;
use kevo_eval::Evaluation;
use kevo_tasks::{SizeSet, Task};
use kevo_worker::{Worker, WorkerCommand, WorkerConfig};

use crate::candidate::{open_evaluator, read_kernel, source_for};
use crate::printers::{self, BenchRow, IsolationRow, SandboxCostRow};
use crate::settings::{self, ConfigFileArg, DeviceArgs};

#[derive(Args)]
pub struct BenchArgs {
    /// Task name; every task when absent.
    #[arg(long)]
    task: Option<String>,
    #[command(flatten)]
    device: Box<DeviceArgs>,
    /// Kernel source to evaluate; the task's seed when absent.
    #[arg(long)]
    kernel: Option<PathBuf>,
    /// smoke, full (the default) or large.
    #[arg(long)]
    sizes: Option<SizeSet>,
    #[command(flatten)]
    config: ConfigFileArg,
    /// Warm evaluations after the cold one.
    #[arg(long, default_value_t = 10)]
    repeats: usize,
    /// Also evaluate through a worker process and report the cost of
    /// isolation: round trip minus the worker's own evaluation time.
    #[arg(long)]
    isolated: bool,
    /// Instead: measure what the sandbox costs. A confined and an unconfined
    /// worker evaluate the same candidates, alternating (ABBA order against
    /// drift); each evaluation gets a source no compiler cache has seen, as
    /// a new candidate would.
    #[arg(long, conflicts_with_all = ["isolated", "sandbox.enabled", "sandbox.required"])]
    sandbox_cost: bool,
    #[arg(long)]
    json: bool,
}

pub fn bench(args: BenchArgs) -> Result<ExitCode> {
    if args.sandbox_cost {
        return bench_sandbox_cost(args);
    }
    let (tasks, size_set, config) = bench_settings(&args)?;
    let kernel = read_kernel(&args.kernel)?;
    let mut evaluator = open_evaluator(&config)?;
    let dialect = evaluator.backend().dialect();
    let mut rows = Vec::new();
    for task in tasks {
        let source = source_for(task, &kernel, dialect)?;
        let sizes = task.sizes(size_set).in_distribution;
        let cold = evaluator.evaluate(task, &source, &sizes);
        let warm: Vec<Evaluation> = (0..args.repeats)
            .map(|_| evaluator.evaluate(task, &source, &sizes))
            .collect();
        rows.push(BenchRow::new(task.name(), &cold, &warm));
    }
    printers::print_bench(&rows, evaluator.backend().info(), args.json)?;
    if args.isolated {
        drop(evaluator);
        let isolation = isolation_rows(&args, &rows, (&kernel, dialect), size_set, config)?;
        printers::print_isolation(&isolation, args.json)?;
    }
    Ok(if rows.iter().all(|r| r.correct) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `bench`'s tasks, size set and worker: its flags over its config file.
fn bench_settings(args: &BenchArgs) -> Result<(Vec<&'static Task>, SizeSet, WorkerConfig)> {
    let settings = settings::evaluation_settings(
        &args.config,
        args.task.as_deref(),
        args.sizes,
        None,
        false,
        &args.device,
    )?;
    Ok((
        tasks_of(&settings)?,
        settings.sizes.unwrap_or(SizeSet::Full),
        settings.worker_config()?,
    ))
}

/// The tasks a command names (`task` in the settings), or every task.
fn tasks_of(settings: &kevo_evolve::RunConfig) -> Result<Vec<&'static Task>> {
    Ok(match &settings.task {
        Some(name) => vec![kevo_tasks::resolve(name)?],
        None => kevo_tasks::all(),
    })
}

/// `--isolated`: every task again through a worker process, after one
/// untimed evaluation; the cost of isolation is each round trip minus the
/// worker's own evaluation time.
fn isolation_rows(
    args: &BenchArgs,
    rows: &[BenchRow],
    (kernel, dialect): (&Option<String>, kevo_backend::Dialect),
    size_set: SizeSet,
    config: WorkerConfig,
) -> Result<Vec<IsolationRow>> {
    let mut worker = Worker::start(WorkerCommand::current_exe()?, config)?;
    let mut isolation = Vec::new();
    for row in rows {
        let task = kevo_tasks::by_name(&row.task)?;
        let source = source_for(task, kernel, dialect)?;
        let sizes = task.sizes(size_set).in_distribution;
        let limit = Duration::from_secs(600);
        worker.evaluate(task, &source, &sizes, limit);
        let mut cost = Vec::new();
        let mut totals = Vec::new();
        for _ in 0..args.repeats {
            let t = Instant::now();
            let e = worker.evaluate(task, &source, &sizes, limit);
            let round_trip = t.elapsed().as_secs_f64();
            cost.push(round_trip - e.wall.total_s);
            totals.push(round_trip);
        }
        isolation.push(IsolationRow::new(task.name(), &cost, &totals));
    }
    Ok(isolation)
}

/// `--sandbox-cost`: the same candidates through a confined and an
/// unconfined worker, and what starting each costs.
fn bench_sandbox_cost(args: BenchArgs) -> Result<ExitCode> {
    let (tasks, size_set, base_config) = bench_settings(&args)?;
    if args.repeats < 2 {
        bail!("--sandbox-cost needs --repeats of at least 2");
    }
    let kernel = read_kernel(&args.kernel)?;
    let (mut pair, start_s) = WorkerPair::start(&base_config)?;
    let dialect = pair.confined.device().dialect;
    let sandbox = pair.confined.sandbox().summary();
    let mut rows = Vec::new();
    for task in tasks {
        let base = source_for(task, &kernel, dialect)?;
        let sizes = task.sizes(size_set).in_distribution;
        rows.push(pair.compare(task, &base, &sizes, args.repeats));
    }
    printers::print_sandbox_cost(
        &rows,
        &SandboxCostRow::new("worker start", &start_s[1], &start_s[0], true),
        &sandbox,
        args.json,
    )?;
    Ok(if rows.iter().all(|r| r.correct) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// An unconfined and a confined worker of the same settings.
struct WorkerPair {
    open: Worker,
    confined: Worker,
    /// Sources made unique so far (no compiler cache has seen the next).
    variants: u64,
}

impl WorkerPair {
    /// The two workers, started over three rounds in alternating order,
    /// with each start's seconds (index 1: confined). Start-up (spawn,
    /// confinement, device open) is paid again on every respawn after a
    /// fault, so it is part of the cost. The last round's workers are kept.
    fn start(base_config: &WorkerConfig) -> Result<(WorkerPair, [Vec<f64>; 2])> {
        let start = |confined: bool| -> Result<(Worker, f64)> {
            let mut config = base_config.clone();
            config.sandbox.enabled = confined;
            let t = Instant::now();
            let worker = Worker::start(WorkerCommand::current_exe()?, config)?;
            Ok((worker, t.elapsed().as_secs_f64()))
        };
        let mut start_s = [Vec::new(), Vec::new()];
        let mut workers = Vec::new();
        for round in 0..3 {
            workers.clear();
            for confined in [round % 2 == 0, round % 2 != 0] {
                let (w, s) = start(confined)?;
                start_s[usize::from(confined)].push(s);
                workers.push((confined, w));
            }
        }
        workers.sort_by_key(|(confined, _)| *confined);
        let mut workers = workers.into_iter().map(|(_, w)| w);
        let (Some(open), Some(confined)) = (workers.next(), workers.next()) else {
            unreachable!("two workers were started");
        };
        let pair = WorkerPair {
            open,
            confined,
            variants: 0,
        };
        Ok((pair, start_s))
    }

    /// One task on both workers: one untimed evaluation each (first-use
    /// costs of the task), then `repeats` rounds in ABBA order against
    /// drift, each evaluation with a source no compiler cache has seen.
    fn compare(
        &mut self,
        task: &Task,
        base: &str,
        sizes: &[kevo_tasks::Size],
        repeats: usize,
    ) -> SandboxCostRow {
        let limit = Duration::from_secs(600);
        self.open.evaluate(task, base, sizes, limit);
        self.confined.evaluate(task, base, sizes, limit);
        let mut times = [Vec::new(), Vec::new()];
        let mut correct = true;
        for r in 0..repeats {
            let order = if r % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for is_confined in order {
                self.variants += 1;
                let variant = self.variants;
                let source = format!("{base}\n// kevo bench --sandbox-cost variant {variant}\n");
                let w = if is_confined {
                    &mut self.confined
                } else {
                    &mut self.open
                };
                let t = Instant::now();
                let e = w.evaluate(task, &source, sizes, limit);
                times[usize::from(is_confined)].push(t.elapsed().as_secs_f64());
                correct &= e.outcome.is_correct();
            }
        }
        SandboxCostRow::new(task.name(), &times[1], &times[0], correct)
    }
}
