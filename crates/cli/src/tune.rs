//! `kevo tune`: search the configurations of a tunable kernel. The
//! session itself (trials, the store's cache, confirmation, the held-out
//! measurement) is [`kevo_evolve::tuning`]; this front end reads the
//! settings and the kernel file into its request, drives the progress bar,
//! and prints the result as a table or JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use kevo_evolve::RunConfig;
use kevo_evolve::tuning::{
    GivenKernel, KernelOut, StoreLocation, TimeLimit, TuneRequest, check_budget,
};
use kevo_tasks::{SizeSet, Task};
use kevo_tune::StrategyKind;
use kevo_worker::WorkerCommand;

use crate::candidate::{default_timeout, read_kernel};
use crate::evolve::StoreArgs;
use crate::settings::{self, ConfigFileArg, DeviceArgs};

mod output;
mod progress;

use progress::Progress;

#[derive(Args)]
pub struct TuneArgs {
    /// Task name (see `kevo tasks`) or a task folder (`./my-task`, see `kevo task new`); or the config file's `task`.
    #[arg(long)]
    task: Option<String>,
    /// The tunable kernel (`// kevo: tune NAME V1 V2 ...` lines); the task's
    /// tunable variant of its seed when absent.
    #[arg(long)]
    kernel: Option<PathBuf>,
    /// exhaustive, random, local (neighbourhood search) or tpe (a
    /// tree-structured Parzen estimator).
    #[arg(long, default_value = "tpe")]
    strategy: StrategyKind,
    /// Configurations to evaluate (cached ones count too, so a strategy
    /// chooses the same whatever the store holds). Default: every valid one
    /// for exhaustive, 32 otherwise.
    #[arg(long, value_name = "N")]
    budget: Option<usize>,
    /// Stop starting configurations after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    budget_s: Option<f64>,
    /// Seed of the strategy's random choices.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Size table: smoke, full (default) or large.
    #[arg(long)]
    sizes: Option<SizeSet>,
    /// Measure every configuration, even those the store has measured.
    #[arg(long)]
    no_cache: bool,
    /// Skip the held-out measurement of the best configuration.
    #[arg(long)]
    no_held_out: bool,
    /// Where to write the best configuration's kernel (default: in the
    /// workspace, `tuned/RUN.EXT`).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Hard wall-clock limit per configuration in seconds (default as for
    /// `kevo eval`).
    #[arg(long)]
    timeout: Option<f64>,
    /// Compile without fast math.
    #[arg(long)]
    no_fast_math: bool,
    #[command(flatten)]
    device: Box<DeviceArgs>,
    #[command(flatten)]
    config: ConfigFileArg,
    #[command(flatten)]
    store: StoreArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn tune(args: TuneArgs) -> Result<ExitCode> {
    let request = request(&args)?;
    let mut progress = Progress::new(args.json);
    let tuned = kevo_evolve::tuning::tune(request, &mut progress)?;
    if args.json {
        output::print_json(&tuned)?;
    } else {
        output::print_text(&tuned)?;
    }
    Ok(if tuned.best().is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The settings, the task and the given kernel (with its space), checked
/// before any device is opened: a mistake in a declaration costs nothing.
fn checked_request(args: &TuneArgs) -> Result<(RunConfig, &'static Task, Option<GivenKernel>)> {
    let settings = settings::evaluation_settings(
        &args.config,
        args.task.as_deref(),
        args.sizes,
        args.timeout,
        args.no_fast_math,
        &args.device,
    )?;
    let Some(task_name) = settings.task.clone() else {
        bail!("give --task NAME (or `task` in the config file)");
    };
    let task: &'static Task = kevo_tasks::resolve(&task_name)?;
    let given = read_kernel(&args.kernel)?;
    check_budget(args.budget, args.budget_s)?;
    let given = match (given, &args.kernel) {
        (Some(s), Some(p)) => Some(GivenKernel::parse(s, p.display().to_string())?),
        _ => None,
    };
    Ok((settings, task, given))
}

/// The session `args` ask for: the checked settings, the worker they
/// describe, and where to store and write.
fn request(args: &TuneArgs) -> Result<TuneRequest> {
    let (settings, task, kernel) = checked_request(args)?;
    let worker = settings.worker_config()?;
    let command = WorkerCommand::current_exe()?;
    Ok(TuneRequest {
        task,
        kernel,
        strategy: args.strategy,
        evaluations: args.budget,
        seconds: args.budget_s,
        seed: args.seed,
        size_set: settings.sizes.unwrap_or(SizeSet::Full),
        cache: !args.no_cache,
        held_out: !args.no_held_out,
        time_limit: match settings.limits.candidate_timeout_s {
            Some(s) => TimeLimit::Seconds(s),
            None => TimeLimit::Default(default_timeout),
        },
        worker,
        command,
        store: match &args.store.store {
            Some(url) => StoreLocation::Url(url.clone()),
            None => StoreLocation::Workspace(args.store.workspace.clone()),
        },
        out: match &args.out {
            Some(p) => KernelOut::File(p.clone()),
            None => KernelOut::Folder(args.store.workspace.join("tuned")),
        },
    })
}
