//! `kevo`: the command-line front end. Thin glue over the library crates;
//! errors that stop a command are reported in one line and exit with code 2,
//! a candidate that is not correct exits with code 1.

mod asktell;
mod cross;
mod evolve;
mod kernelbench;
mod queue_worker;
mod report;
mod reporting;
mod settings;
mod sweep;
mod task;
mod tune;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use kevo_eval::{Evaluation, Evaluator};
use kevo_roofline::CeilingCache;
use kevo_tasks::{SizeSet, Task};

use kevo_worker::{Worker, WorkerCommand, WorkerConfig};
use settings::{ConfigFileArg, DeviceArgs};

#[derive(Parser)]
#[command(
    name = "kevo",
    version = kevo_evolve::VERSION,
    about = "LLM-driven evolutionary optimisation of GPU kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the benchmark tasks with their regimes and sizes.
    Tasks {
        #[arg(long)]
        json: bool,
    },
    /// List the devices of every backend with their roofline ceilings.
    Devices {
        /// Run the copy and FMA micro-benchmarks even for datasheet devices.
        #[arg(long)]
        measure: bool,
        /// Measure every device again now and add the result to its cached
        /// envelope: a ceiling only rises, so a measurement made while the
        /// machine was busy never lowers one.
        #[arg(long)]
        remeasure: bool,
        #[arg(long)]
        json: bool,
        /// The interpreter to ask about Triton (default $KEVO_TRITON_PYTHON,
        /// then ~/.cache/kevo/triton-venv, then python3), as `--dialect
        /// triton` would use it.
        #[arg(long, value_name = "PYTHON")]
        triton_python: Option<String>,
    },
    /// Evaluate a kernel (the task's seed by default) and print its score.
    Eval(Box<EvalArgs>),
    /// Task folders: scaffold one (`new`) or validate one (`check`).
    Task {
        #[command(subcommand)]
        command: Box<task::TaskCommand>,
    },
    /// Search for a faster kernel: the (1+1) loop with a language model.
    Evolve(Box<evolve::EvolveArgs>),
    /// Hand out the next prompts of a run created with `--llm external`,
    /// without calling any model: as files under the run directory, and
    /// with --json as JSON with their proposal ids.
    Ask {
        run: String,
        /// How many prompts (fewer when the run's budget leaves room for
        /// fewer).
        #[arg(long, default_value_t = 1)]
        n: u32,
        #[command(flatten)]
        store: evolve::StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Answer a proposal of `kevo ask`: the response is extracted,
    /// evaluated, decided and stored as the run's next iteration, exactly
    /// as if a model had returned it.
    Tell {
        run: String,
        /// The proposal id `kevo ask` printed.
        proposal: i64,
        /// The response: markdown with the kernel in a code block (or
        /// SEARCH/REPLACE edits in diff mode); `-` reads stdin.
        response: PathBuf,
        /// Who answered, stored with the call (default "external").
        #[arg(long)]
        model: Option<String>,
        #[command(flatten)]
        store: evolve::StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// End a run created with `--llm external`: the final pick among its
    /// best and the held-out gate; pending proposals are withdrawn.
    Finish {
        run: String,
        #[command(flatten)]
        store: evolve::StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// List stored runs.
    Runs {
        #[command(flatten)]
        store: evolve::StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// A run's history and its winner's per-size numbers.
    Show {
        run: String,
        #[command(flatten)]
        store: evolve::StoreArgs,
        #[arg(long)]
        json: bool,
        /// Print the run's settings as a config file instead (`kevo evolve
        /// --config FILE` starts a run with them).
        #[arg(long, conflicts_with = "json")]
        config: bool,
    },
    /// Evaluate a run's winner and seed together on another device or
    /// backend (--backend, --platform, --device) and store the result
    /// with the run.
    Cross(Box<cross::CrossArgs>),
    /// Write a run's report: one self-contained HTML file (charts as SVG,
    /// nothing fetched) with its progress, roofline bars per size, search
    /// view, lineage, seed/winner diff, held-out table, model spend, phase
    /// times and settings.
    Report(Box<reporting::ReportArgs>),
    /// Translate a CUDA kernel to OpenCL C 1.2 (what `kevo cross` runs
    /// when a CUDA run meets an OpenCL device), to stdout or --out FILE;
    /// refuses, naming the line, what it cannot translate faithfully.
    Translate {
        /// The CUDA source (.cu); `-` reads stdin.
        kernel: PathBuf,
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write a run's winning kernel source (to stdout, or --out FILE), or
    /// with --trajectories FILE.jsonl its steps as training records.
    Export(Box<reporting::ExportArgs>),
    /// Serve the runs of a workspace (or --store) in the browser: the run
    /// list and each run's report, updating live while a search runs.
    /// Read-only; 127.0.0.1 only unless --bind says otherwise.
    Serve(Box<reporting::ServeArgs>),
    /// The results table across runs (Metal-Sci's Table 3): one row per
    /// run, then per task, models, strategy and device with fast_p.
    Table(Box<reporting::TableArgs>),
    /// Run a grid of runs (tasks x models x strategies x repeats, any
    /// setting as an axis) from a TOML file, each an ordinary resumable
    /// run; run it again to resume. Ends with the table comparing them.
    Sweep(Box<sweep::SweepArgs>),
    /// Tune a kernel's declared parameters (`// kevo: tune NAME V1 V2 ...`):
    /// every configuration is an evaluation; prints the table, the best
    /// configuration and its held-out result, and writes the best kernel.
    Tune(Box<tune::TuneArgs>),
    /// Print a shell completion script: `kevo completions bash >
    /// ~/.local/share/bash-completion/completions/kevo` (zsh: a file
    /// `_kevo` on $fpath; fish: ~/.config/fish/completions/kevo.fish).
    Completions { shell: clap_complete::Shell },
    /// Run settings: `kevo config show` prints the effective settings of
    /// a run as TOML (kevo's defaults, then --config FILE, then flags).
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// KernelBench as an external suite: `kevo kernelbench import` turns
    /// its PyTorch problems into task folders, screened and with their
    /// eager baselines.
    Kernelbench {
        #[command(subcommand)]
        command: kernelbench::KernelBenchCommand,
    },
    /// Language-model utilities.
    Llm {
        #[command(subcommand)]
        command: LlmCommand,
    },
    /// Serve evaluation jobs from NATS JetStream on this host's device
    /// (`--nats URL`): runs started with `kevo evolve --nats URL` anywhere
    /// evaluate their candidates here. (kevo also starts this command
    /// itself, with --config and --protocol-fd, as a run's local worker.)
    Worker {
        /// The local worker's settings (set by kevo).
        #[arg(long, hide = true, conflicts_with = "nats")]
        config: Option<String>,
        /// The descriptor kevo reads replies from (set by kevo).
        #[arg(long, hide = true, requires = "config")]
        protocol_fd: Option<i32>,
        #[command(flatten)]
        queue: queue_worker::QueueWorkerArgs,
    },
    /// Measure the evaluation latency per candidate: the first (cold)
    /// evaluation and the median of repeated (warm) ones, split by phase.
    Bench(Box<BenchArgs>),
}

fn translate(kernel: &std::path::Path, out: Option<&std::path::Path>) -> Result<ExitCode> {
    let source = if kernel == std::path::Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("reading the CUDA source from stdin")?
    } else {
        std::fs::read_to_string(kernel)
            .with_context(|| format!("reading the CUDA source {}", kernel.display()))?
    };
    let translated = kevo_translate::cuda_to_opencl(&source)
        .with_context(|| format!("{} cannot be translated to OpenCL C", kernel.display()))?;
    match out {
        Some(path) => std::fs::write(path, translated)
            .with_context(|| format!("writing {}", path.display()))?,
        None => print!("{translated}"),
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the effective settings as TOML: a config file to start from.
    Show {
        #[command(flatten)]
        run: Box<settings::RunFlags>,
        #[command(flatten)]
        config: ConfigFileArg,
    },
}

fn config(command: ConfigCommand) -> Result<ExitCode> {
    let ConfigCommand::Show { run, config } = command;
    let effective = settings::effective(None, &config, run.layer()?)?;
    // Defaults filled in; the task and models may still be missing.
    let mut shown = kevo_evolve::RunConfig::from_options(&effective.options_without_task()?);
    shown.task = effective.task.clone();
    shown.seed_kernel = effective.seed_kernel.clone();
    shown.llm.models = effective.llm.models.clone();
    print!("{}", shown.to_toml());
    Ok(ExitCode::SUCCESS)
}

#[derive(Subcommand)]
enum LlmCommand {
    /// Send one small prompt to each model and print latency, tokens and cost.
    Test {
        /// Model spec, e.g. openai:gpt-5, anthropic:claude-opus-4-1,
        /// openai@http://localhost:8000/v1:qwen2.5-coder, cmd:./agent.sh,
        /// replay:run.jsonl; repeat for an ensemble (a:m1=0.7).
        #[arg(long, required = true)]
        llm: Vec<String>,
        /// Provider configuration (TOML or JSON): endpoints, keys, prices.
        #[arg(long, env = "KEVO_LLM_CONFIG")]
        llm_config: Option<PathBuf>,
        /// Seconds one call attempt may take.
        #[arg(long, value_name = "SECONDS")]
        llm_timeout: Option<f64>,
        /// Retries of a failed call.
        #[arg(long, value_name = "N")]
        llm_retries: Option<u32>,
    },
}

/// The provider configuration from a file, or the built-in defaults.
fn llm_config(path: &Option<PathBuf>) -> Result<kevo_proposer::ProviderConfig> {
    match path {
        Some(p) => Ok(kevo_proposer::ProviderConfig::load(p)?),
        None => Ok(kevo_proposer::ProviderConfig::default()),
    }
}

fn llm(command: LlmCommand) -> Result<ExitCode> {
    let LlmCommand::Test {
        llm,
        llm_config: path,
        llm_timeout,
        llm_retries,
    } = command;
    let config = llm_config(&path)?.with_overrides(llm_timeout, llm_retries)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut failed = false;
    for spec in &llm {
        let results = runtime.block_on(kevo_proposer::probe_all(spec, &config))?;
        // What an endpoint sent is printed with control characters escaped.
        use kevo_proposer::sanitize::terminal;
        for r in results {
            match r {
                Ok(report) => println!("{}", terminal(&report.to_string())),
                Err(e) => {
                    failed = true;
                    println!("{}", terminal(&format!("{spec}: FAILED: {e}")));
                }
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[derive(Args)]
struct BenchArgs {
    /// Task name; every task when absent.
    #[arg(long)]
    task: Option<String>,
    #[command(flatten)]
    device: DeviceArgs,
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
    #[arg(long, conflicts_with_all = ["isolated", "no_sandbox", "require_sandbox"])]
    sandbox_cost: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct EvalArgs {
    /// Task name (see `kevo tasks`) or a task folder (`./my-task`, see `kevo task new`); or the config file's `task`.
    #[arg(long, conflicts_with = "all")]
    task: Option<String>,
    /// Evaluate the seed of every task and print one table.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    device: DeviceArgs,
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

/// Exit status of a tool killed by SIGPIPE, as a shell reports it.
const BROKEN_PIPE_EXIT: i32 = 128 + 13;

/// `kevo ... | head` closes stdout early: the next print fails. End like
/// any Unix tool whose reader went away (status 141, nothing on stderr)
/// instead of a panic with a backtrace. SIGPIPE itself stays ignored:
/// kevo writes to worker and proposer pipes that may close, and those
/// errors are handled where they happen.
fn exit_quietly_when_stdout_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    exit_quietly_when_stdout_closes();
    let cli = Cli::parse();
    // Retries, refused waits and leftover processes of model calls: one
    // line each, so a long wait is never silent.
    kevo_proposer::notice::set_sink(|line| eprintln!("kevo: {line}"));
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Tasks { json } => {
            report::print_tasks(json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Devices {
            measure,
            remeasure,
            json,
            triton_python,
        } => {
            let how = match (measure, remeasure) {
                (_, true) => report::Measure::Again,
                (true, false) => report::Measure::Cached,
                (false, false) => report::Measure::No,
            };
            report::print_devices(how, json, triton_python)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval(args) => eval(*args),
        Command::Task { command } => task::task(*command),
        Command::Kernelbench { command } => kernelbench::kernelbench(command),
        Command::Bench(args) => bench(*args),
        Command::Llm { command } => llm(command),
        Command::Config { command } => config(command),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "kevo", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Sweep(args) => sweep::sweep(*args),
        Command::Tune(args) => tune::tune(*args),
        Command::Evolve(args) => evolve::evolve(*args),
        Command::Ask {
            run,
            n,
            store,
            json,
        } => asktell::ask(&run, n, store, json),
        Command::Tell {
            run,
            proposal,
            response,
            model,
            store,
            json,
        } => asktell::tell(&run, proposal, &response, model.as_deref(), store, json),
        Command::Finish { run, store, json } => asktell::finish(&run, store, json),
        Command::Runs { store, json } => evolve::runs(store, json),
        Command::Show {
            run,
            store,
            json,
            config: true,
        } => {
            let _ = json;
            evolve::show_config(&run, store)
        }
        Command::Show {
            run, store, json, ..
        } => evolve::show(&run, store, json),
        Command::Cross(args) => cross::cross(*args),
        Command::Report(args) => reporting::report(*args),
        Command::Translate { kernel, out } => translate(&kernel, out.as_deref()),
        Command::Export(args) => reporting::export(*args),
        Command::Table(args) => reporting::table(*args),
        Command::Serve(args) => reporting::serve(*args),
        Command::Worker {
            config: Some(config),
            protocol_fd: Some(protocol_fd),
            ..
        } => {
            kevo_worker::worker_main(&[
                "--config".to_string(),
                config,
                "--protocol-fd".to_string(),
                protocol_fd.to_string(),
            ])?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker { queue, .. } => queue_worker::serve(queue),
    }
}

fn open_evaluator(worker: &WorkerConfig) -> Result<Evaluator<Box<dyn kevo_backend::Backend>>> {
    let mut backend = kevo_runtimes::open(
        worker.backend,
        &worker.selector,
        worker.timing.open_options(),
    )?;
    let ceilings = match worker.declared_ceilings {
        Some(declared) => declared.ceilings(),
        None => kevo_roofline::ceilings(backend.as_mut(), &CeilingCache::default_location())
            .context("cannot determine the device's roofline ceilings")?,
    };
    Ok(Evaluator::new(backend, ceilings, worker.eval.clone()))
}

/// The tasks a command names (`task` in the settings), or every task.
fn tasks_of(settings: &kevo_evolve::RunConfig) -> Result<Vec<&'static Task>> {
    Ok(match &settings.task {
        Some(name) => vec![kevo_tasks::resolve(name)?],
        None => kevo_tasks::all(),
    })
}

/// 14 runs (3 warm-up, 10 timed, 1 verification) of every size at 0.1% of
/// the roofline, and never less than 60 s: a seed is at 0.3% (hmc d32 on
/// the M1 Pro) or better in the Metal-Sci results.
pub(crate) fn default_timeout(
    task: &Task,
    set: SizeSet,
    sizes: &[kevo_tasks::Size],
    ceilings: &kevo_roofline::Ceilings,
) -> std::time::Duration {
    let ceiling = ceilings.for_kind(task.ceiling()) * 1e9;
    let slow_run_s: f64 = sizes.iter().map(|s| task.work(s) / (1e-3 * ceiling)).sum();
    // The limit covers generating inputs and CPU references too: at the
    // large sizes those take up to a few minutes (lj's held-out size did not
    // finish in 60 s on an H100 machine's 16 cores).
    let floor = match set {
        SizeSet::Large => 900,
        _ => 60,
    };
    // A folder's reference command runs before the clock starts (the
    // supervisor computes expected outputs, then sends the candidate).
    kevo_worker::timeout_from_seed(slow_run_s, 14.0, std::time::Duration::from_secs(floor))
}

fn read_kernel(path: &Option<PathBuf>) -> Result<Option<String>> {
    read_candidate(path)?
        .map(|c| c.map_err(|reason| anyhow::anyhow!("{reason}")))
        .transpose()
}

/// A candidate kernel file: its text, or why it is not text (a rejected
/// candidate, not a failed command). An unreadable file is an error.
fn read_candidate(path: &Option<PathBuf>) -> Result<Option<std::result::Result<String, String>>> {
    let Some(p) = path else { return Ok(None) };
    let bytes =
        std::fs::read(p).with_context(|| format!("cannot read kernel file {}", p.display()))?;
    Ok(Some(String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        format!(
            "{}: line {line}: not valid UTF-8 at byte {at}; kernel source must be text",
            p.display()
        )
    })))
}

pub(crate) fn source_for(
    task: &Task,
    kernel: &Option<String>,
    dialect: kevo_backend::Dialect,
) -> Result<String> {
    match kernel {
        Some(s) => Ok(s.clone()),
        None => Ok(task
            .seed(dialect)
            .with_context(|| format!("task {} has no {dialect} seed kernel", task.name()))?
            .to_string()),
    }
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

fn bench(args: BenchArgs) -> Result<ExitCode> {
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
        rows.push(report::BenchRow::new(task.name(), &cold, &warm));
    }
    report::print_bench(&rows, evaluator.backend().info(), args.json)?;
    if args.isolated {
        drop(evaluator);
        let mut worker = Worker::start(WorkerCommand::current_exe()?, config)?;
        let mut isolation = Vec::new();
        for row in &rows {
            let task = kevo_tasks::by_name(&row.task)?;
            let source = source_for(task, &kernel, dialect)?;
            let sizes = task.sizes(size_set).in_distribution;
            let limit = std::time::Duration::from_secs(600);
            worker.evaluate(task.name(), &source, &sizes, limit);
            let mut cost = Vec::new();
            let mut totals = Vec::new();
            for _ in 0..args.repeats {
                let t = std::time::Instant::now();
                let e = worker.evaluate(task.name(), &source, &sizes, limit);
                let round_trip = t.elapsed().as_secs_f64();
                cost.push(round_trip - e.wall.total_s);
                totals.push(round_trip);
            }
            isolation.push(report::IsolationRow::new(task.name(), &cost, &totals));
        }
        report::print_isolation(&isolation, args.json)?;
    }
    Ok(if rows.iter().all(|r| r.correct) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn bench_sandbox_cost(args: BenchArgs) -> Result<ExitCode> {
    let (tasks, size_set, base_config) = bench_settings(&args)?;
    if args.repeats < 2 {
        bail!("--sandbox-cost needs --repeats of at least 2");
    }
    let kernel = read_kernel(&args.kernel)?;
    let start = |confined: bool| -> Result<(Worker, f64)> {
        let mut config = base_config.clone();
        config.sandbox.enabled = confined;
        let t = std::time::Instant::now();
        let worker = Worker::start(WorkerCommand::current_exe()?, config)?;
        Ok((worker, t.elapsed().as_secs_f64()))
    };
    // Start-up (spawn, confinement, device open) is paid again on every
    // respawn after a fault, so it is part of the cost.
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
    let [(_, open), (_, confined)] = &mut workers[..] else {
        unreachable!("two workers were started");
    };
    let dialect = confined.device().dialect;
    let sandbox = confined.sandbox().summary();
    let limit = std::time::Duration::from_secs(600);
    let mut rows = Vec::new();
    let mut variant = 0u64;
    for task in tasks {
        let base = source_for(task, &kernel, dialect)?;
        let sizes = task.sizes(size_set).in_distribution;
        // One untimed evaluation each: first-use costs of the task.
        open.evaluate(task.name(), &base, &sizes, limit);
        confined.evaluate(task.name(), &base, &sizes, limit);
        let mut times = [Vec::new(), Vec::new()];
        let mut correct = true;
        for r in 0..args.repeats {
            let order = if r % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for is_confined in order {
                variant += 1;
                let source = format!("{base}\n// kevo bench --sandbox-cost variant {variant}\n");
                let w = if is_confined {
                    &mut *confined
                } else {
                    &mut *open
                };
                let t = std::time::Instant::now();
                let e = w.evaluate(task.name(), &source, &sizes, limit);
                times[usize::from(is_confined)].push(t.elapsed().as_secs_f64());
                correct &= e.outcome.is_correct();
            }
        }
        rows.push(report::SandboxCostRow::new(
            task.name(),
            &times[1],
            &times[0],
            correct,
        ));
    }
    report::print_sandbox_cost(
        &rows,
        &report::SandboxCostRow::new("worker start", &start_s[1], &start_s[0], true),
        &sandbox,
        args.json,
    )?;
    Ok(if rows.iter().all(|r| r.correct) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn eval(args: EvalArgs) -> Result<ExitCode> {
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
    let size_set = settings.sizes.unwrap_or(SizeSet::Full);
    let kernel_source = match read_candidate(&args.kernel)? {
        Some(Err(reason)) => {
            // Rejected like any candidate the compiler would not take.
            let evaluation = Evaluation::without_sizes(
                tasks[0].name(),
                "",
                "",
                kevo_eval::Outcome::CompileError {
                    diagnostics: kevo_backend::CompileDiagnostics::from_log(reason.clone()),
                    message: reason,
                },
                kevo_eval::WallTimes::default(),
            );
            if args.json {
                println!("{}", serde_json::to_string_pretty(&evaluation)?);
            } else {
                println!("{}: {}", evaluation.task, evaluation.outcome.summary());
            }
            return Ok(ExitCode::from(1));
        }
        Some(Ok(source)) => Some(source),
        None => None,
    };
    let config = settings.worker_config()?;
    let mut worker = Worker::start(WorkerCommand::current_exe()?, config.clone())?;
    let dialect = worker.device().dialect;
    if !args.json {
        println!("sandbox: {}", worker.sandbox().summary());
        println!(
            "inputs: drawn from secret {} (KEVO_INPUTS_SECRET set to it draws them again)",
            worker.inputs_secret()
        );
    }

    let mut evaluations: Vec<Evaluation> = Vec::new();
    let mut baselines: Vec<Option<kevo_eval::VendorBaseline>> = Vec::new();
    let mut profiles: Vec<Option<Result<kevo_worker::profiler::Profile, String>>> = Vec::new();
    for task in &tasks {
        let source = source_for(task, &kernel_source, dialect)?;
        let plan = task.sizes(size_set);
        let sizes = if args.held_out {
            vec![plan.held_out]
        } else {
            plan.in_distribution
        };
        let timeout = match settings.limits.candidate_timeout_s {
            Some(s) => std::time::Duration::from_secs_f64(s),
            None => default_timeout(task, size_set, &sizes, worker.ceilings()),
        };
        let mut evaluation = worker.evaluate(task.name(), &source, &sizes, timeout);
        if let Some(tool) = args.sanitize {
            if worker.device().dialect != kevo_backend::Dialect::Cuda {
                bail!("--sanitize needs the CUDA backend (compute-sanitizer checks CUDA kernels)");
            }
            let config = config.clone();
            // The sanitizer slows kernels 10-100x; give it room.
            let checked = kevo_worker::sanitizer::sanitized_evaluation(
                &WorkerCommand::current_exe()?,
                config,
                tool,
                &kevo_worker::sanitizer::SanitizeRequest {
                    task: task.name(),
                    source: &source,
                    sizes: &sizes,
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
                _ if !args.json => println!("compute-sanitizer {}: no errors", tool.name()),
                _ => {}
            }
        }
        // After the kernel: the worker's inputs and references are warm.
        let baseline =
            (!args.no_vendor && sizes.iter().any(|s| task.vendor_op(s).is_some())).then(|| {
                let mut b = worker.vendor_baseline(task.name(), &sizes, timeout);
                b.compare(&evaluation);
                b
            });
        if !args.json && !args.all {
            report::print_evaluation(&evaluation, worker.ceilings(), baseline.as_ref());
        }
        let profile = match args.profile && !evaluation.sizes.is_empty() {
            false => None,
            true => Some(profile_evaluated(
                &args,
                task,
                &source,
                (&sizes, size_set),
                dialect,
                config.clone(),
            )?),
        };
        if let Some(p) = &profile
            && !args.json
        {
            match p {
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
        profiles.push(profile);
        evaluations.push(evaluation);
        baselines.push(baseline);
    }
    if args.json {
        let with_extras = |i: usize| -> Result<_> {
            let mut v = serde_json::to_value(&evaluations[i])?;
            match &profiles[i] {
                Some(Ok(p)) => v["profile"] = serde_json::to_value(p)?,
                Some(Err(e)) => v["profile_error"] = e.clone().into(),
                None => {}
            }
            if let Some(b) = &baselines[i] {
                v["vendor"] = serde_json::to_value(b)?;
            }
            Ok(v)
        };
        let value = if args.all {
            let all: Result<Vec<_>> = (0..evaluations.len()).map(with_extras).collect();
            serde_json::Value::Array(all?)
        } else {
            with_extras(0)?
        };
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else if args.all {
        report::print_summary(&evaluations, worker.ceilings());
        report::print_vendor_summary(&evaluations, &baselines);
    }
    let all_correct = evaluations.iter().all(|e| e.outcome.is_correct());
    Ok(if all_correct {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
