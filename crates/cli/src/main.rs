//! `kevo`: the command-line front end. Thin glue over the library crates;
//! errors that stop a command are reported in one line and exit with code 2,
//! a candidate that is not correct exits with code 1.

mod asktell;
mod bench;
mod candidate;
mod cross;
mod diagnostics;
mod eval;
mod evolve;
mod kernelbench;
mod printers;
mod progress;
mod queue_worker;
mod run_reports;
mod sandbox_exec;
mod settings;
mod show;
mod style;
mod sweep;
mod task;
mod tool;
mod tune;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use settings::ConfigFileArg;

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
    Eval(Box<eval::EvalArgs>),
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
    /// as if a model had returned it. With --defer the answer is only kept
    /// (no device needed); `kevo tell RUN --deferred` evaluates the kept
    /// answers on a host with the run's device.
    Tell(asktell::TellArgs),
    /// Run a tool call of a pending proposal of a run created with `--llm
    /// external --agent-tools` (compile, check, time, profile, show), or
    /// every request waiting in a mailbox folder (--mailbox), through the
    /// same gate and budget as a tool conversation.
    Tool(tool::ToolArgs),
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
    Report(Box<run_reports::ReportArgs>),
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
    Export(Box<run_reports::ExportArgs>),
    /// Serve the runs of a workspace (or --store) in the browser: the run
    /// list and each run's report, updating live while a search runs.
    /// Read-only; 127.0.0.1 only unless --bind says otherwise.
    Serve(Box<run_reports::ServeArgs>),
    /// The results table across runs (Metal-Sci's Table 3): one row per
    /// run, then per task, models, strategy and device with fast_p.
    Table(Box<run_reports::TableArgs>),
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
    Bench(Box<bench::BenchArgs>),
    /// Confine this process and run a command (kevo runs confined `cmd:`
    /// proposers through it).
    #[command(hide = true)]
    SandboxExec(sandbox_exec::SandboxExecArgs),
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
    /// Print every settings key with its flag and meaning, as Markdown
    /// (docs/guide/settings.md is this output).
    Keys,
}

fn config(command: ConfigCommand) -> Result<ExitCode> {
    let (run, config) = match command {
        ConfigCommand::Show { run, config } => (run, config),
        ConfigCommand::Keys => {
            print!("{}", settings_page());
            return Ok(ExitCode::SUCCESS);
        }
    };
    let effective = settings::effective(None, &config, run.layer()?)?;
    print!("{}", effective.shown()?.to_toml());
    Ok(ExitCode::SUCCESS)
}

/// docs/guide/settings.md: the reference of every key, from the settings'
/// definitions.
fn settings_page() -> String {
    format!(
        "# Settings\n\nEvery setting is a key of a config file and a flag of `kevo evolve` \
         (the device, timing, limit and sandbox flags also of `eval`, `bench`, `tune`, \
         `cross`, `task check` and `kernelbench eval`). This page is the output of \
         `kevo config keys`, written from the definitions in \
         `crates/evolve/src/config/sections.rs`; `kevo config show` prints the values a \
         command line would run with.\n\n\
         Adding a setting is one field there and one use where the run reads it:\n\n\
         ```rust\n\
         /// Stop after this many proposals in a row without a new incumbent.\n\
         #[arg(id = \"budget.patience\", long = \"patience\", value_name = \"N\")]\n\
         #[serde(skip_serializing_if = \"Option::is_none\")]\n\
         pub patience: Option<u32>,\n\
         ```\n\n\
         The field gives the key (`patience` under `[budget]`), the flag (`--patience N`), \
         the help text and this page's line; the layer merge, the flag named in an error, \
         `kevo config show` and the run's stored settings follow from it. The one use: a \
         command reads `settings.budget.patience`, and the search reads \
         `options.settings.budget.patience.unwrap_or(DEFAULT)` (the merged settings are \
         stored with a run's options, so `kevo show RUN --config` and `--config-from RUN` \
         carry the key with no conversion written for it).\n{}",
        kevo_evolve::config::settings_reference()
    )
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
            let label = style::paint(style::Stream::Stderr, style::Tone::Error, "error:");
            eprintln!("{label} {}", diagnostics::error_text(&e));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Tasks { json } => {
            printers::print_tasks(json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Devices {
            measure,
            remeasure,
            json,
            triton_python,
        } => {
            let how = match (measure, remeasure) {
                (_, true) => printers::Measure::Again,
                (true, false) => printers::Measure::Cached,
                (false, false) => printers::Measure::No,
            };
            printers::print_devices(how, json, triton_python)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval(args) => eval::eval(*args),
        Command::Task { command } => task::task(*command),
        Command::Kernelbench { command } => kernelbench::kernelbench(command),
        Command::Bench(args) => bench::bench(*args),
        Command::Llm { command } => llm(command),
        Command::Config { command } => config(command),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            // Generated whole, then written: clap_complete panics on a
            // write error, and `kevo completions bash | head` closes the
            // pipe early.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "kevo", &mut script);
            match std::io::Write::write_all(&mut std::io::stdout(), &script) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    Ok(ExitCode::from(BROKEN_PIPE_EXIT as u8))
                }
                written => {
                    written?;
                    Ok(ExitCode::SUCCESS)
                }
            }
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
        Command::Tell(args) => asktell::tell_command(args),
        Command::Tool(args) => tool::tool(args),
        Command::Finish { run, store, json } => asktell::finish(&run, store, json),
        Command::Runs { store, json } => show::runs(store, json),
        Command::Show {
            run,
            store,
            json,
            config: true,
        } => {
            let _ = json;
            show::show_config(&run, store)
        }
        Command::Show {
            run, store, json, ..
        } => show::show(&run, store, json),
        Command::Cross(args) => cross::cross(*args),
        Command::Report(args) => run_reports::report(*args),
        Command::Translate { kernel, out } => translate(&kernel, out.as_deref()),
        Command::Export(args) => run_reports::export(*args),
        Command::Table(args) => run_reports::table(*args),
        Command::Serve(args) => run_reports::serve(*args),
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
        Command::SandboxExec(args) => sandbox_exec::sandbox_exec(args),
    }
}
