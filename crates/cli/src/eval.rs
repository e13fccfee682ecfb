//! `kevo eval`: a kernel (the task's seed by default) evaluated by the
//! isolated worker and printed with its score, per size; optionally under
//! compute-sanitizer and Nsight Compute, and beside a vendor library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use kevo_eval::{Evaluation, VendorBaseline};
use kevo_tasks::{SizeSet, Task};
use kevo_worker::profiler::Profile;
use kevo_worker::{Worker, WorkerCommand, WorkerConfig};

use crate::candidate::{default_timeout, read_candidate, source_for};
use crate::printers;
use crate::settings::{self, ConfigFileArg, DeviceArgs};

#[derive(Args)]
pub struct EvalArgs {
    /// Task name (see `kevo tasks`) or a task folder (`./my-task`, see `kevo task new`); or the config file's `task`.
    #[arg(long, conflicts_with = "all")]
    task: Option<String>,
    /// Evaluate the seed of every task and print one table.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    device: Box<DeviceArgs>,
    /// Kernel source to evaluate; the task's seed when absent.
    #[arg(long, conflicts_with = "all")]
    kernel: Option<PathBuf>,
    /// Size table: `smoke` (small, for CPUs and CI), `full` (the paper's,
    /// the default) or `large` (working sets past a data-centre GPU's
    /// last-level cache).
    #[arg(long)]
    sizes: Option<SizeSet>,
    #[command(flatten)]
    config: ConfigFileArg,
    /// Evaluate the held-out size of the chosen set instead of the in-distribution sizes.
    #[arg(long)]
    held_out: bool,
    /// Compile without fast math (the default matches Metal's fast math).
    #[arg(long)]
    no_fast_math: bool,
    /// Evaluate once more under NVIDIA compute-sanitizer (CUDA only):
    /// memcheck, racecheck, initcheck or synccheck. Slow: meant for a final
    /// winner, best at smoke sizes. A reported error fails the candidate.
    #[arg(long)]
    sanitize: Option<kevo_worker::sanitizer::SanitizerTool>,
    /// Profile the kernel once more under NVIDIA Nsight Compute (CUDA
    /// only) at one size and print a summary: DRAM, L2 and SM throughput
    /// against peak, achieved and theoretical occupancy, hit rates, bank
    /// conflicts, top warp stalls, and whether it is memory-, compute- or
    /// latency-bound. Not part of the score. Without ncu, or where it
    /// fails, kevo says so and goes on.
    #[arg(long)]
    profile: bool,
    /// The size to profile (a label of the chosen set; default its largest
    /// in-distribution size, or the held-out size with --held-out).
    #[arg(long, requires = "profile")]
    profile_size: Option<String>,
    /// Where the .ncu-rep reports go (default: the system temp directory).
    #[arg(long, requires = "profile")]
    profile_dir: Option<PathBuf>,
    /// Hard wall-clock limit per candidate in seconds. Default: the larger of
    /// 60 s (900 s for the large sizes, whose inputs and references take
    /// minutes) and 14 runs at 0.1% of the roofline at every size.
    #[arg(long)]
    timeout: Option<f64>,
    /// Skip the vendor baseline. By default, where a vendor library does
    /// the task's job on this backend (cuFFT for fft3d, cuBLAS for saxpy
    /// on CUDA), it runs on the same inputs, timed the same way and checked
    /// by the task's check, and each size shows the kernel's time relative
    /// to it; a missing library is said in one line and skipped.
    #[arg(long)]
    no_vendor: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn eval(args: EvalArgs) -> Result<ExitCode> {
    let settings = settings::evaluation_settings(
        &args.config,
        args.task.as_deref(),
        args.sizes,
        args.timeout,
        args.no_fast_math,
        &args.device,
    )?;
    let tasks: Vec<&'static Task> = match (&settings.task, args.all) {
        (_, true) => kevo_tasks::all(),
        (Some(name), false) => vec![kevo_tasks::resolve(name)?],
        (None, false) => bail!("give --task NAME (or `task` in the config file) or --all"),
    };
    let config = settings.worker_config()?;
    let kernel = match read_candidate(&args.kernel)? {
        Some(Err(reason)) => return reject_unreadable(tasks[0], config.backend, reason, args.json),
        Some(Ok(source)) => Some(source),
        None => None,
    };
    let worker = start_worker(&config, args.json)?;
    let mut evaluating = Evaluating {
        args: &args,
        worker,
        config,
        size_set: settings.sizes.unwrap_or(SizeSet::Full),
        timeout_s: settings.limits.candidate_timeout_s,
        kernel,
    };
    let mut results = Vec::new();
    for task in &tasks {
        results.push(evaluating.task(task)?);
    }
    print_results(&args, &results, evaluating.worker.ceilings())?;
    let all_correct = results.iter().all(|r| r.evaluation.outcome.is_correct());
    Ok(if all_correct {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A kernel file that is not text, rejected like any candidate the
/// compiler would not take (exit 1), without starting a worker. No device
/// was opened, so the JSON names the backend asked for (`auto` when none
/// was) and no device, in an evaluation's shape.
fn reject_unreadable(
    task: &Task,
    asked: kevo_runtimes::BackendKind,
    reason: String,
    json: bool,
) -> Result<ExitCode> {
    let outcome = kevo_eval::Outcome::CompileError {
        diagnostics: kevo_backend::CompileDiagnostics::from_log(reason.clone()),
        message: reason,
    };
    if json {
        /// [`Evaluation`]'s fields, in its order, with the backend asked for.
        #[derive(serde::Serialize)]
        struct Rejected<'a> {
            task: &'a str,
            device: &'a str,
            backend: kevo_runtimes::BackendKind,
            outcome: &'a kevo_eval::Outcome,
            sizes: [(); 0],
            wall: kevo_eval::WallTimes,
        }
        let rejected = Rejected {
            task: task.name(),
            device: "",
            backend: asked,
            outcome: &outcome,
            sizes: [],
            wall: kevo_eval::WallTimes::default(),
        };
        println!("{}", serde_json::to_string_pretty(&rejected)?);
    } else {
        println!("{}: {}", task.name(), outcome.summary());
    }
    Ok(ExitCode::from(1))
}

/// The isolated worker, and (in text) how it is confined and which secret
/// draws its inputs, so that a result can be reproduced.
fn start_worker(config: &WorkerConfig, json: bool) -> Result<Worker> {
    let worker = Worker::start(WorkerCommand::current_exe()?, config.clone())?;
    if !json {
        // Diagnostics, on standard error: standard output is the result.
        eprintln!("sandbox: {}", worker.sandbox().summary());
        eprintln!(
            "inputs: drawn from secret {} (KEVO_INPUTS_SECRET set to it draws them again)",
            worker.inputs_secret()
        );
    }
    Ok(worker)
}

/// One task's result: the evaluation, the vendor library's on the same
/// inputs, and the profile (or why there is none) when asked for.
struct TaskResult {
    evaluation: Evaluation,
    baseline: Option<VendorBaseline>,
    profile: Option<std::result::Result<Profile, String>>,
}

/// What every task of one `kevo eval` is evaluated with. The worker's
/// settings are kept: the sanitizer and the profiler start workers of
/// their own from them.
struct Evaluating<'a> {
    args: &'a EvalArgs,
    worker: Worker,
    config: WorkerConfig,
    size_set: SizeSet,
    /// `--timeout` or the config file's; else each task's default.
    timeout_s: Option<f64>,
    /// The kernel given; each task's seed when absent.
    kernel: Option<String>,
}

impl Evaluating<'_> {
    /// Evaluate `task`, then the optional passes over the same kernel, and
    /// print it (a single task's table; `--all` prints one at the end).
    fn task(&mut self, task: &Task) -> Result<TaskResult> {
        let args = self.args;
        let dialect = self.worker.device().dialect;
        let source = source_for(task, &self.kernel, dialect)?;
        let sizes = self.sizes(task);
        let timeout = match self.timeout_s {
            Some(s) => Duration::from_secs_f64(s),
            None => default_timeout(task, self.size_set, &sizes, self.worker.ceilings()),
        };
        let mut evaluation = self.worker.evaluate(task, &source, &sizes, timeout);
        if let Some(tool) = args.sanitize {
            self.sanitize(tool, task, &source, (&sizes, timeout), &mut evaluation)?;
        }
        // After the kernel: the worker's inputs and references are warm.
        let baseline =
            (!args.no_vendor && sizes.iter().any(|s| task.vendor_op(s).is_some())).then(|| {
                let mut b = self.worker.vendor_baseline(task, &sizes, timeout);
                b.compare(&evaluation);
                b
            });
        if !args.json && !args.all {
            printers::print_evaluation(&evaluation, self.worker.ceilings(), baseline.as_ref());
        }
        let profile = match args.profile && !evaluation.sizes.is_empty() {
            false => None,
            true => Some(profile_evaluated(
                args,
                task,
                &source,
                (&sizes, self.size_set),
                dialect,
                self.config.clone(),
            )?),
        };
        if let Some(p) = &profile
            && !args.json
        {
            print_profile(p);
        }
        Ok(TaskResult {
            evaluation,
            baseline,
            profile,
        })
    }

    /// The chosen set's in-distribution sizes, or its held-out size.
    fn sizes(&self, task: &Task) -> Vec<kevo_tasks::Size> {
        let plan = task.sizes(self.size_set);
        if self.args.held_out {
            vec![plan.held_out]
        } else {
            plan.in_distribution
        }
    }

    /// `--sanitize TOOL`: the kernel once more under compute-sanitizer; an
    /// error it reports replaces the evaluation's outcome.
    fn sanitize(
        &self,
        tool: kevo_worker::sanitizer::SanitizerTool,
        task: &Task,
        source: &str,
        (sizes, timeout): (&[kevo_tasks::Size], Duration),
        evaluation: &mut Evaluation,
    ) -> Result<()> {
        if self.worker.device().dialect != kevo_backend::Dialect::Cuda {
            bail!("--sanitize needs the CUDA backend (compute-sanitizer checks CUDA kernels)");
        }
        let config = self.config.clone();
        // The sanitizer slows kernels 10-100x; give it room.
        let checked = kevo_worker::sanitizer::sanitized_evaluation(
            &WorkerCommand::current_exe()?,
            config,
            tool,
            &kevo_worker::sanitizer::SanitizeRequest {
                task,
                source,
                sizes,
                timeout: timeout * 20,
                log_dir: &std::env::temp_dir(),
            },
        )?;
        match &checked.outcome {
            kevo_eval::Outcome::RuntimeError { message, .. }
                if message.starts_with("compute-sanitizer") =>
            {
                evaluation.outcome = checked.outcome.clone();
            }
            _ if !self.args.json => println!("compute-sanitizer {}: no errors", tool.name()),
            _ => {}
        }
        Ok(())
    }
}

/// The profile's summary, or why there is none.
fn print_profile(profile: &std::result::Result<Profile, String>) {
    match profile {
        Ok(p) => println!(
            "{}
(profiled in {:.1} s, not part of the score; report: {})",
            p.summary(),
            p.profiling_s,
            p.report
                .as_ref()
                .map_or("-".into(), |r| r.display().to_string())
        ),
        Err(e) => println!("no profile: {e}"),
    }
}

/// After every task: JSON (one object, or an array with `--all`), or with
/// `--all` the table of every task and the vendor comparisons.
fn print_results(
    args: &EvalArgs,
    results: &[TaskResult],
    ceilings: &kevo_roofline::Ceilings,
) -> Result<()> {
    if args.json {
        let value = if args.all {
            let all: Result<Vec<_>> = results.iter().map(json_with_extras).collect();
            serde_json::Value::Array(all?)
        } else {
            json_with_extras(&results[0])?
        };
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else if args.all {
        let evaluations: Vec<Evaluation> = results.iter().map(|r| r.evaluation.clone()).collect();
        let baselines: Vec<Option<VendorBaseline>> =
            results.iter().map(|r| r.baseline.clone()).collect();
        printers::print_summary(&evaluations, ceilings);
        printers::print_vendor_summary(&evaluations, &baselines);
    }
    Ok(())
}

/// A task's evaluation as JSON, with its profile (or the profiler's
/// error) and its vendor baseline beside it.
fn json_with_extras(result: &TaskResult) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(&result.evaluation)?;
    match &result.profile {
        Some(Ok(p)) => v["profile"] = serde_json::to_value(p)?,
        Some(Err(e)) => v["profile_error"] = e.clone().into(),
        None => {}
    }
    if let Some(b) = &result.baseline {
        v["vendor"] = serde_json::to_value(b)?;
    }
    Ok(v)
}

/// `eval --profile`: the kernel once more under Nsight Compute at the
/// chosen size; an error of the user's (a size the set lacks) fails the
/// command, while a profiler that is missing or fails is reported and the
/// evaluation stands.
fn profile_evaluated(
    args: &EvalArgs,
    task: &Task,
    source: &str,
    (sizes, size_set): (&[kevo_tasks::Size], SizeSet),
    dialect: kevo_backend::Dialect,
    config: WorkerConfig,
) -> Result<std::result::Result<kevo_worker::profiler::Profile, String>> {
    let size = match &args.profile_size {
        None => sizes.last().expect("at least one size").clone(),
        Some(label) => {
            let plan = task.sizes(size_set);
            plan.in_distribution
                .iter()
                .chain([&plan.held_out])
                .find(|s| &s.label == label)
                .cloned()
                .with_context(|| {
                    format!(
                        "--profile-size {label}: not a size of {} in this set",
                        task.name()
                    )
                })?
        }
    };
    if dialect != kevo_backend::Dialect::Cuda {
        return Ok(Err(
            "--profile needs the CUDA backend (Nsight Compute profiles CUDA kernels)".into(),
        ));
    }
    let dir = args.profile_dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("--profile-dir {}", dir.display()))?;
    let report = dir.join(format!(
        "kevo-{}-{}-{}.ncu-rep",
        task.name(),
        size.label,
        std::process::id()
    ));
    Ok(kevo_worker::profiler::profile_task(
        &WorkerCommand::current_exe()?,
        config,
        task,
        source,
        &size,
        &report,
    )
    .map_err(|e| e.to_string()))
}
