//! Run settings from the command line: the flags every run-making command
//! shares, turned into a layer over a config file (`--config`) and a stored
//! run's settings (`--config-from`). The layering and every check live in
//! kevo_evolve::config; here each flag becomes the key it sets, and the
//! flag's name is kept for messages.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, ValueEnum};
use kevo_evolve::config::{Ceilings, ConfigLayer, EditModeName, RunConfig};
use kevo_runtimes::BackendKind;
use kevo_store::RunId;
use kevo_tasks::SizeSet;

/// Device, timing, limit and sandbox flags (`eval`, `bench`, `evolve`).
/// Defaults are kevo's (see `kevo config show`); a flag left out leaves
/// the config file's value.
#[derive(Args, Default)]
pub struct DeviceArgs {
    /// Which GPU runtime to use: auto (default), opencl, cuda, or triton
    /// (Triton kernels, compiled by Triton, run on a CUDA device).
    #[arg(long)]
    pub backend: Option<BackendKind>,
    /// The kernel language instead of a backend: cuda, opencl or triton
    /// (each picks the backend that runs it).
    #[arg(long, value_enum, conflicts_with = "backend")]
    pub dialect: Option<DialectArg>,
    /// The interpreter with Triton installed, for --dialect triton
    /// (default $KEVO_TRITON_PYTHON, then ~/.cache/kevo/triton-venv, made
    /// by `scripts/setup --triton`, then python3).
    #[arg(long, value_name = "PYTHON")]
    pub triton_python: Option<String>,
    /// OpenCL platform, by index or name substring.
    #[arg(long)]
    pub platform: Option<String>,
    /// Device, by index or name substring.
    #[arg(long)]
    pub device: Option<String>,
    /// CUDA: launch each kernel on a stream instead of replaying each size's
    /// launch sequence as one CUDA graph (the default: graphs keep launch
    /// jitter from dominating small sizes).
    #[arg(long)]
    pub no_cuda_graph: bool,
    /// CUDA: flush the L2 cache before every timed run (outside the timing),
    /// so sizes that fit in L2 are not timed warm.
    #[arg(long)]
    pub flush_l2: bool,
    /// Repeat timed runs until (q3 - q1) / median is at most this (default
    /// 0.01).
    #[arg(long)]
    pub target_spread: Option<f64>,
    /// ... or until this many runs were timed (default 50, at least 10).
    #[arg(long)]
    pub max_timed_runs: Option<usize>,
    /// Seconds a candidate's compilation may take (default 30).
    #[arg(long)]
    pub compile_timeout: Option<f64>,
    /// GiB of memory a compilation may add to the worker (default 4).
    #[arg(long)]
    pub compile_memory_gib: Option<f64>,
    /// GiB of memory the worker may add once its device is open; 0 (the
    /// default) is half the machine's memory.
    #[arg(long)]
    pub worker_memory_gib: Option<f64>,
    /// Score against these ceilings, `GBS,GFLOPS` (DRAM bandwidth in GB/s,
    /// FP32 peak in GFLOPS), instead of the datasheet entry or a measurement:
    /// for a MIG slice or a power-capped or clock-locked GPU.
    #[arg(long, value_name = "GBS,GFLOPS")]
    pub ceilings: Option<String>,
    /// Refuse to run unless every sandbox layer is in force (Landlock,
    /// a network namespace, no new privileges).
    #[arg(long, conflicts_with = "no_sandbox")]
    pub require_sandbox: bool,
    /// Run workers unconfined (the environment is still allow-listed): to
    /// measure the sandbox's cost or rule it out when a driver misbehaves.
    #[arg(long)]
    pub no_sandbox: bool,
    /// Leave these sandbox layers out (namespaces, files, tcp, scopes, syscalls),
    /// comma-separated: to find the one a driver cannot live with. Each is
    /// reported as missing.
    #[arg(long, value_delimiter = ',', value_name = "LAYER")]
    pub sandbox_skip: Vec<kevo_worker::kevo_sandbox::Layer>,
    /// Let workers also read this directory or file (a driver or toolkit
    /// installed outside /usr, such as /opt/cuda); repeatable, reported.
    #[arg(long, value_name = "PATH")]
    pub sandbox_allow_read: Vec<PathBuf>,
    /// Let workers also write this directory or file; repeatable, reported.
    #[arg(long, value_name = "PATH")]
    pub sandbox_allow_write: Vec<PathBuf>,
}

/// The keys a command line sets, each with the flag that set it.
#[derive(Default)]
pub struct FlagLayer {
    pub config: RunConfig,
    /// Strategy keys given (a table: only those, not a whole strategy).
    pub strategy: toml::Table,
    pub named: Vec<(String, String)>,
}

impl FlagLayer {
    fn name(&mut self, key: &str, flag: &str) {
        self.named.push((key.into(), flag.into()));
    }

    /// Sets `slot` and records the flag when the flag was given.
    fn set<T>(
        &mut self,
        given: Option<T>,
        key: &str,
        flag: &str,
        slot: fn(&mut RunConfig) -> &mut Option<T>,
    ) {
        if let Some(v) = given {
            *slot(&mut self.config) = Some(v);
            self.name(key, flag);
        }
    }

    /// The layer, checked on its own.
    pub fn into_layer(self) -> Result<ConfigLayer> {
        let mut table = toml::Table::try_from(&self.config)
            .map_err(|e| anyhow!("the command line's settings: {e}"))?;
        if !self.strategy.is_empty() {
            table.insert("strategy".into(), toml::Value::Table(self.strategy));
        }
        Ok(ConfigLayer::from_flags(table, self.named)?)
    }
}

/// A path as given on the command line, made absolute (stored runs are
/// resumed from any directory).
pub fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve the path {}", path.display()))
}

/// A kernel language on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DialectArg {
    Cuda,
    Opencl,
    Triton,
}

impl DialectArg {
    /// The backend that compiles and runs this language.
    pub fn backend(self) -> BackendKind {
        match self {
            DialectArg::Cuda => BackendKind::Cuda,
            DialectArg::Opencl => BackendKind::Opencl,
            DialectArg::Triton => BackendKind::Triton,
        }
    }
}

impl DeviceArgs {
    /// The keys these flags set: device, timing, limits and sandbox, in
    /// that order.
    pub fn apply(&self, l: &mut FlagLayer) -> Result<()> {
        self.device_keys(l)?;
        self.timing_keys(l);
        self.limit_keys(l);
        self.sandbox_keys(l)
    }

    /// Which device, and the ceilings it is scored against.
    fn device_keys(&self, l: &mut FlagLayer) -> Result<()> {
        l.set(self.backend, "device.backend", "--backend", |c| {
            &mut c.device.backend
        });
        l.set(
            self.dialect.map(DialectArg::backend),
            "device.backend",
            "--dialect",
            |c| &mut c.device.backend,
        );
        l.set(
            self.triton_python.clone(),
            "device.triton_python",
            "--triton-python",
            |c| &mut c.device.triton_python,
        );
        l.set(
            self.platform.clone(),
            "device.platform",
            "--platform",
            |c| &mut c.device.platform,
        );
        l.set(self.device.clone(), "device.device", "--device", |c| {
            &mut c.device.device
        });
        if let Some(text) = &self.ceilings {
            l.config.device.ceilings = Some(parse_ceilings(text)?);
            l.name("device.ceilings", "--ceilings");
        }
        Ok(())
    }

    fn timing_keys(&self, l: &mut FlagLayer) {
        l.set(
            self.no_cuda_graph.then_some(false),
            "timing.cuda_graph",
            "--no-cuda-graph",
            |c| &mut c.timing.cuda_graph,
        );
        l.set(
            self.flush_l2.then_some(true),
            "timing.flush_l2",
            "--flush-l2",
            |c| &mut c.timing.flush_l2,
        );
        l.set(
            self.target_spread,
            "timing.target_spread",
            "--target-spread",
            |c| &mut c.timing.target_spread,
        );
        l.set(
            self.max_timed_runs,
            "timing.max_timed_runs",
            "--max-timed-runs",
            |c| &mut c.timing.max_timed_runs,
        );
    }

    fn limit_keys(&self, l: &mut FlagLayer) {
        l.set(
            self.compile_timeout,
            "limits.compile_timeout_s",
            "--compile-timeout",
            |c| &mut c.limits.compile_timeout_s,
        );
        l.set(
            self.compile_memory_gib,
            "limits.compile_memory_gib",
            "--compile-memory-gib",
            |c| &mut c.limits.compile_memory_gib,
        );
        l.set(
            self.worker_memory_gib,
            "limits.worker_memory_gib",
            "--worker-memory-gib",
            |c| &mut c.limits.worker_memory_gib,
        );
    }

    /// How the workers are confined (paths made absolute).
    fn sandbox_keys(&self, l: &mut FlagLayer) -> Result<()> {
        l.set(
            self.require_sandbox.then_some(true),
            "sandbox.required",
            "--require-sandbox",
            |c| &mut c.sandbox.required,
        );
        l.set(
            self.no_sandbox.then_some(false),
            "sandbox.enabled",
            "--no-sandbox",
            |c| &mut c.sandbox.enabled,
        );
        let nonempty = |v: &Vec<_>| (!v.is_empty()).then(|| v.clone());
        l.set(
            nonempty(&self.sandbox_skip),
            "sandbox.skip",
            "--sandbox-skip",
            |c| &mut c.sandbox.skip,
        );
        let paths = |v: &[PathBuf]| -> Result<Option<Vec<PathBuf>>> {
            if v.is_empty() {
                return Ok(None);
            }
            v.iter()
                .map(|p| absolute(p))
                .collect::<Result<_>>()
                .map(Some)
        };
        l.set(
            paths(&self.sandbox_allow_read)?,
            "sandbox.allow_read",
            "--sandbox-allow-read",
            |c| &mut c.sandbox.allow_read,
        );
        l.set(
            paths(&self.sandbox_allow_write)?,
            "sandbox.allow_write",
            "--sandbox-allow-write",
            |c| &mut c.sandbox.allow_write,
        );
        Ok(())
    }
}

fn parse_ceilings(text: &str) -> Result<Ceilings> {
    let parsed: Vec<Option<f64>> = text
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
        })
        .collect();
    match parsed[..] {
        [Some(bandwidth_gbs), Some(fp32_gflops)] => Ok(Ceilings {
            bandwidth_gbs,
            fp32_gflops,
        }),
        _ => bail!(
            "--ceilings must be two positive numbers, GB/s and GFLOPS, as in 3350,67000; got {text:?}"
        ),
    }
}

/// `--config FILE`: the settings file under the flags.
#[derive(Args, Default)]
pub struct ConfigFileArg {
    /// Settings from a TOML file (see `kevo config show` for every key);
    /// flags given as well win over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The effective settings: the stored run's (if any), the file's, the flags'.
pub fn effective(
    from_run: Option<ConfigLayer>,
    file: &ConfigFileArg,
    flags: FlagLayer,
) -> Result<RunConfig> {
    let mut layers: Vec<ConfigLayer> = from_run.into_iter().collect();
    if let Some(path) = &file.config {
        layers.push(ConfigLayer::from_file(path)?);
    }
    layers.push(flags.into_layer()?);
    Ok(kevo_evolve::config::merge(&layers)?)
}

/// The settings `eval` and `bench` use: task, sizes, device, timing, limits
/// and sandbox (a shared experiment file's other keys are ignored).
pub fn evaluation_settings(
    file: &ConfigFileArg,
    task: Option<&str>,
    sizes: Option<SizeSet>,
    timeout: Option<f64>,
    no_fast_math: bool,
    device: &DeviceArgs,
) -> Result<RunConfig> {
    let mut l = FlagLayer::default();
    l.set(task.map(String::from), "task", "--task", |c| &mut c.task);
    l.set(sizes, "sizes", "--sizes", |c| &mut c.sizes);
    l.set(timeout, "limits.candidate_timeout_s", "--timeout", |c| {
        &mut c.limits.candidate_timeout_s
    });
    l.set(
        no_fast_math.then_some(false),
        "device.fast_math",
        "--no-fast-math",
        |c| &mut c.device.fast_math,
    );
    device.apply(&mut l)?;
    effective(None, file, l)
}

/// The settings of run `run`, as a layer for `--config-from`, and the
/// kernel it started from (kept when no layer names another).
pub async fn from_run(
    store: &kevo_store::Store,
    run: &str,
) -> Result<(ConfigLayer, Option<String>)> {
    let info = store
        .run(&RunId(run.to_string()))
        .await
        .with_context(|| format!("--config-from {run}"))?;
    let options = kevo_evolve::stored_options(&info)?;
    Ok((
        ConfigLayer::from_run(run, &options)?,
        options.start_source.clone(),
    ))
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EditModeArg {
    /// The proposer returns the whole kernel.
    Full,
    /// The proposer returns SEARCH/REPLACE edits to the incumbent.
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StrategyName {
    OnePlusOne,
    MapElites,
    Islands,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PromotionName {
    NoiseAware,
    Strict,
}

/// Every setting of a run that has a flag (`evolve`, `config show`).
#[derive(Args, Default)]
pub struct RunFlags {
    /// Task name (see `kevo tasks`) or a task folder (`./my-task`, see `kevo task new`).
    #[arg(long)]
    pub task: Option<String>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Model spec (see `kevo llm test --help`); repeat for a weighted ensemble.
    /// `external`: kevo calls no model; `kevo ask`/`kevo tell` drive the run.
    #[arg(long)]
    pub llm: Vec<String>,
    /// Provider configuration (TOML or JSON): endpoints, keys, prices.
    #[arg(long, env = "KEVO_LLM_CONFIG")]
    pub llm_config: Option<PathBuf>,
    /// Seconds one model call attempt may take (default 300, or the
    /// provider configuration's `timeout_s`).
    #[arg(long, value_name = "SECONDS")]
    pub llm_timeout: Option<f64>,
    /// Retries of a failed model call (default 4, or the provider
    /// configuration's `max_retries`).
    #[arg(long, value_name = "N")]
    pub llm_retries: Option<u32>,
    /// With --max-cost-usd: run on when a call's cost is unknown (no price
    /// for the model, or no token counts from the server) instead of
    /// stopping because the cap cannot be enforced.
    #[arg(long)]
    pub accept_unknown_cost: bool,
    /// Proposals to make (default 10).
    #[arg(long)]
    pub iterations: Option<u32>,
    /// `smoke` (small, for CPUs and CI), `full` (the paper's sizes, the
    /// default) or `large`.
    #[arg(long)]
    pub sizes: Option<SizeSet>,
    /// Proposals per iteration; the best competes with the incumbent
    /// (default 1).
    #[arg(long)]
    pub candidates_per_iteration: Option<u32>,
    /// Prompts in flight at once: each answer is evaluated as soon as it
    /// arrives and a freed slot gets a prompt from the archive as it is
    /// then, so the device works while the model thinks (default 1: one
    /// prompt at a time).
    #[arg(long)]
    pub concurrency: Option<u32>,
    /// Seconds between polls of a running batch (`--llm batch:...`, whose
    /// prompts go out `--concurrency` at a time through the provider's
    /// batch endpoint; default 60).
    #[arg(long)]
    pub batch_poll_s: Option<f64>,
    /// A second model, the performance analyst (any model spec, e.g.
    /// `openai:gpt-5-mini`): it reads each kernel the proposer is about
    /// to improve (source, per-size results, compiler facts, the profile
    /// with --profile) and recommends one change, which the proposer's
    /// next prompt shows. Its tokens and cost count in the budget.
    #[arg(long, value_name = "SPEC")]
    pub analyst: Option<String>,
    /// Append every exchange with the model (prompt key, request, answer
    /// with reasoning, tokens, cost and latency, or the error) to FILE in
    /// the replay format: `--llm replay:FILE` replays the run.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Stop after this many seconds of wall time.
    #[arg(long)]
    pub max_wall_s: Option<f64>,
    /// Stop once this much has been spent on the proposer (USD).
    #[arg(long)]
    pub max_cost_usd: Option<f64>,
    /// Stop once the incumbent's score reaches this.
    #[arg(long)]
    pub target_score: Option<f64>,
    /// Hard limit per candidate in seconds; default 10x the seed's
    /// evaluation, at least 30 s.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// full (the default) or diff.
    #[arg(long, value_enum)]
    pub edit_mode: Option<EditModeArg>,
    #[arg(long)]
    pub no_fast_math: bool,
    /// Profile each new incumbent under NVIDIA Nsight Compute (CUDA only)
    /// and show the summary with its result in the next prompt (see `kevo
    /// eval --profile`); without ncu the run says so once and goes on.
    #[arg(long)]
    pub profile: bool,
    /// Profile every correct candidate as well as each incumbent (implies
    /// --profile): when it is first shown as the previous attempt, its
    /// summary goes beside its result (seconds of profiling each).
    #[arg(long)]
    pub profile_every: bool,
    /// At the end, run the winner under these compute-sanitizer tools
    /// (memcheck, racecheck, initcheck, synccheck; comma-separated) at
    /// the task's smoke sizes (CUDA): any error marks it unsafe.
    #[arg(long, value_name = "TOOLS", value_delimiter = ',')]
    pub sanitize_winner: Vec<String>,
    /// Seed of the ensemble's model choice.
    #[arg(long)]
    pub rng_seed: Option<u64>,
    /// Evaluate on the workers serving this NATS JetStream server (`kevo
    /// worker --nats URL` on each GPU host) instead of this host's device;
    /// the run scores against their device model's ceilings.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// The namespace of the queues on that server (default kevo).
    #[arg(long, value_name = "NAME")]
    pub nats_namespace: Option<String>,
    /// One evaluation worker per local device: `all`, or devices by index
    /// or name substring (`0,1`), all of one model. The answers of an
    /// iteration (--candidates-per-iteration) are evaluated on them at once.
    #[arg(long, value_name = "DEVICES", value_delimiter = ',')]
    pub devices: Option<Vec<String>>,
    /// Let --devices name devices of different models (refused otherwise):
    /// each evaluation is scored against its own device's ceilings, so
    /// fractions compare across them and times do not.
    #[arg(long)]
    pub mixed_devices: bool,
    /// How an ensemble (several --llm models) picks each call's model:
    /// `weights` (in proportion to `spec=weight`, the default), `ucb` (a
    /// UCB1 bandit on the relative gain each model's candidates brought
    /// over their parents) or `ucb-per-dollar` (that gain per dollar).
    #[arg(long, value_name = "CHOICE")]
    pub model_choice: Option<kevo_proposer::ModelChoice>,
    /// A model that evolves the prompt: every --meta-every proposals it
    /// reads the guidance sections of the system prompt with the recent
    /// candidates and their outcomes, and edits the sections; each variant
    /// is kept with the best score of the kernels it produced, and
    /// proposals sample the variants. Its tokens and cost count in the
    /// budget.
    #[arg(long, value_name = "SPEC")]
    pub meta_prompter: Option<String>,
    /// Proposals between two meta-prompter calls (default 8).
    #[arg(long, value_name = "N")]
    pub meta_every: Option<u32>,
    /// Start from this kernel instead of the task's seed kernel.
    #[arg(long)]
    pub seed_kernel: Option<PathBuf>,
    /// one-plus-one (one incumbent, the default), map-elites (an archive
    /// over kernel descriptors) or islands (populations with ring
    /// migration).
    #[arg(long, value_enum)]
    pub strategy: Option<StrategyName>,
    /// map-elites: parent-selection weights, e.g.
    /// "uniform=0.25,fitness=0.25,curiosity=0.5,island=0".
    #[arg(long, value_name = "MIX")]
    pub selection: Option<String>,
    /// map-elites and islands: how many islands.
    #[arg(long, value_name = "N")]
    pub islands: Option<u32>,
    /// map-elites and islands: elites other than the parent shown to the
    /// proposer.
    #[arg(long, value_name = "K")]
    pub elites_shown: Option<usize>,
    /// map-elites and islands: kernels from other cells or islands shown.
    #[arg(long, value_name = "K")]
    pub inspirations: Option<usize>,
    /// map-elites: hints per prompt at most.
    #[arg(long, value_name = "K")]
    pub hints: Option<usize>,
    /// islands: members an island keeps.
    #[arg(long, value_name = "N")]
    pub population: Option<usize>,
    /// islands: generations between ring migrations.
    #[arg(long, value_name = "M")]
    pub migration_interval: Option<u32>,
    /// islands: probability that the parent is the island's best.
    #[arg(long, value_name = "P")]
    pub exploit: Option<f64>,
    /// map-elites and islands: seed of the strategy's random choices.
    #[arg(long, value_name = "S")]
    pub strategy_seed: Option<u64>,
    /// The user prompt's limit in tokens (characters / 4): other elites
    /// and inspirations beyond it are left out, inspirations first
    /// (default 16000).
    #[arg(long, value_name = "TOKENS")]
    pub context_budget: Option<usize>,
    /// How a challenger is found better than what it would replace:
    /// noise-aware (the default: re-measured with it, interleaved, and
    /// promoted only if the gain is significant) or strict (Metal-Sci's
    /// rule: a strictly greater score, measured once).
    #[arg(long, value_enum)]
    pub promotion: Option<PromotionName>,
    /// noise-aware: interleaved rounds of a re-measurement (default 5).
    #[arg(long, value_name = "N")]
    pub remeasure_rounds: Option<u32>,
    /// At the end, re-measure the K best candidates and the seed
    /// together and take the best of that as the winner (0: the in-run
    /// best). Default 3 with noise-aware promotion, 0 with strict.
    #[arg(long, value_name = "K")]
    pub final_remeasure: Option<u32>,
    /// Before the search keeps a candidate (promotes it, or makes it an
    /// elite or island member), evaluate it at the task's validation
    /// sizes, which no prompt shows: it must be correct there and not
    /// slower than the seed by more than --validate-max-slowdown.
    /// Rejected candidates are stored with the reason; the model is told
    /// only "fails on unseen sizes".
    #[arg(long)]
    pub validate: bool,
    /// --validate: the most a candidate may be slower than the seed at a
    /// validation size (time ratio, default 1.5).
    #[arg(long, value_name = "FACTOR")]
    pub validate_max_slowdown: Option<f64>,
    /// A proposed kernel that declares tunable parameters (`// kevo: tune`)
    /// is tuned: this many configurations are evaluated and the fastest
    /// correct one is the candidate (default 8; 0: off, and the prompt
    /// does not offer it).
    #[arg(long, value_name = "K")]
    pub tune_best_of: Option<u32>,
    /// The strategy that picks those configurations: exhaustive, random,
    /// local or tpe (default).
    #[arg(long, value_name = "STRATEGY")]
    pub tune_strategy: Option<kevo_tune::StrategyKind>,
}

impl RunFlags {
    /// The keys these flags set, group by group.
    pub fn layer(&self) -> Result<FlagLayer> {
        let mut l = FlagLayer::default();
        self.task_keys(&mut l)?;
        self.device.apply(&mut l)?;
        self.evaluation_keys(&mut l);
        self.model_keys(&mut l)?;
        self.worker_keys(&mut l);
        self.prompt_keys(&mut l);
        self.budget_keys(&mut l);
        self.promotion_keys(&mut l);
        self.tune_keys(&mut l);
        self.strategy_keys(&mut l)?;
        Ok(l)
    }

    /// What is searched: the task, its sizes, the kernel to start from.
    fn task_keys(&self, l: &mut FlagLayer) -> Result<()> {
        l.set(self.task.clone(), "task", "--task", |c| &mut c.task);
        l.set(self.sizes, "sizes", "--sizes", |c| &mut c.sizes);
        l.set(
            self.seed_kernel.as_deref().map(absolute).transpose()?,
            "seed_kernel",
            "--seed-kernel",
            |c| &mut c.seed_kernel,
        );
        Ok(())
    }

    /// How each candidate is evaluated beyond the device flags.
    fn evaluation_keys(&self, l: &mut FlagLayer) {
        l.set(
            self.no_fast_math.then_some(false),
            "device.fast_math",
            "--no-fast-math",
            |c| &mut c.device.fast_math,
        );
        l.set(
            self.profile.then_some(true),
            "device.profile",
            "--profile",
            |c| &mut c.device.profile,
        );
        l.set(
            (!self.sanitize_winner.is_empty()).then(|| self.sanitize_winner.clone()),
            "device.sanitize_winner",
            "--sanitize-winner",
            |c| &mut c.device.sanitize_winner,
        );
        l.set(
            self.profile_every.then_some(true),
            "device.profile_every",
            "--profile-every",
            |c| &mut c.device.profile_every,
        );
        l.set(
            self.timeout,
            "limits.candidate_timeout_s",
            "--timeout",
            |c| &mut c.limits.candidate_timeout_s,
        );
    }

    /// The models, how they are called and how many calls at once.
    fn model_keys(&self, l: &mut FlagLayer) -> Result<()> {
        l.set(
            (!self.llm.is_empty()).then(|| self.llm.clone()),
            "llm.models",
            "--llm",
            |c| &mut c.llm.models,
        );
        l.set(self.analyst.clone(), "llm.analyst", "--analyst", |c| {
            &mut c.llm.analyst
        });
        l.set(
            self.llm_config.as_deref().map(absolute).transpose()?,
            "llm.providers",
            "--llm-config",
            |c| &mut c.llm.providers,
        );
        l.set(self.llm_timeout, "llm.timeout_s", "--llm-timeout", |c| {
            &mut c.llm.timeout_s
        });
        l.set(self.llm_retries, "llm.retries", "--llm-retries", |c| {
            &mut c.llm.retries
        });
        l.set(
            self.accept_unknown_cost.then_some(true),
            "llm.accept_unknown_cost",
            "--accept-unknown-cost",
            |c| &mut c.llm.accept_unknown_cost,
        );
        l.set(
            self.record.as_deref().map(absolute).transpose()?,
            "llm.record",
            "--record",
            |c| &mut c.llm.record,
        );
        l.set(self.concurrency, "llm.concurrency", "--concurrency", |c| {
            &mut c.llm.concurrency
        });
        l.set(
            self.candidates_per_iteration,
            "llm.candidates_per_iteration",
            "--candidates-per-iteration",
            |c| &mut c.llm.candidates_per_iteration,
        );
        l.set(
            self.batch_poll_s,
            "llm.batch_poll_s",
            "--batch-poll-s",
            |c| &mut c.llm.batch_poll_s,
        );
        l.set(
            self.edit_mode.map(|m| match m {
                EditModeArg::Full => EditModeName::Full,
                EditModeArg::Diff => EditModeName::Diff,
            }),
            "llm.edit_mode",
            "--edit-mode",
            |c| &mut c.llm.edit_mode,
        );
        l.set(self.rng_seed, "llm.seed", "--rng-seed", |c| &mut c.llm.seed);
        Ok(())
    }

    /// Where evaluations run: local devices or a NATS server's workers.
    fn worker_keys(&self, l: &mut FlagLayer) {
        l.set(self.devices.clone(), "device.devices", "--devices", |c| {
            &mut c.device.devices
        });
        l.set(
            self.mixed_devices.then_some(true),
            "device.mixed_devices",
            "--mixed-devices",
            |c| &mut c.device.mixed_devices,
        );
        l.set(self.nats.clone(), "device.nats", "--nats", |c| {
            &mut c.device.nats
        });
        l.set(
            self.nats_namespace.clone(),
            "device.nats_namespace",
            "--nats-namespace",
            |c| &mut c.device.nats_namespace,
        );
    }

    /// How an ensemble picks its model, and the meta-prompter.
    fn prompt_keys(&self, l: &mut FlagLayer) {
        l.set(
            self.model_choice,
            "llm.model_choice",
            "--model-choice",
            |c| &mut c.llm.model_choice,
        );
        l.set(
            self.meta_prompter.clone(),
            "llm.meta_prompter",
            "--meta-prompter",
            |c| &mut c.llm.meta_prompter,
        );
        l.set(self.meta_every, "llm.meta_every", "--meta-every", |c| {
            &mut c.llm.meta_every
        });
    }

    /// When the search stops, and what a prompt may hold.
    fn budget_keys(&self, l: &mut FlagLayer) {
        l.set(self.iterations, "budget.iterations", "--iterations", |c| {
            &mut c.budget.iterations
        });
        l.set(self.max_wall_s, "budget.max_wall_s", "--max-wall-s", |c| {
            &mut c.budget.max_wall_s
        });
        l.set(
            self.max_cost_usd,
            "budget.max_cost_usd",
            "--max-cost-usd",
            |c| &mut c.budget.max_cost_usd,
        );
        l.set(
            self.target_score,
            "budget.target_score",
            "--target-score",
            |c| &mut c.budget.target_score,
        );
        l.set(
            self.context_budget,
            "prompt.context_budget_tokens",
            "--context-budget",
            |c| &mut c.prompt.context_budget_tokens,
        );
    }

    /// How a challenger is found better, and validated before it is kept.
    fn promotion_keys(&self, l: &mut FlagLayer) {
        l.set(
            self.promotion.map(|p| match p {
                PromotionName::NoiseAware => "noise-aware".to_string(),
                PromotionName::Strict => "strict".to_string(),
            }),
            "promotion.rule",
            "--promotion",
            |c| &mut c.promotion.rule,
        );
        l.set(
            self.remeasure_rounds,
            "promotion.rounds",
            "--remeasure-rounds",
            |c| &mut c.promotion.rounds,
        );
        l.set(
            self.final_remeasure,
            "promotion.final_remeasure",
            "--final-remeasure",
            |c| &mut c.promotion.final_remeasure,
        );
        l.set(
            self.validate.then_some(true),
            "promotion.validate",
            "--validate",
            |c| &mut c.promotion.validate,
        );
        l.set(
            self.validate_max_slowdown,
            "promotion.validate_max_slowdown",
            "--validate-max-slowdown",
            |c| &mut c.promotion.validate_max_slowdown,
        );
    }

    /// Tuning of proposed kernels that declare parameters.
    fn tune_keys(&self, l: &mut FlagLayer) {
        l.set(self.tune_best_of, "tune.best_of", "--tune-best-of", |c| {
            &mut c.tune.best_of
        });
        l.set(
            self.tune_strategy,
            "tune.strategy",
            "--tune-strategy",
            |c| &mut c.tune.strategy,
        );
    }

    fn strategy_keys(&self, l: &mut FlagLayer) -> Result<()> {
        let mut put = |key: &str, flag: &str, value: Option<toml::Value>| {
            if let Some(v) = value {
                l.strategy.insert(key.into(), v);
                l.named.push((format!("strategy.{key}"), flag.into()));
            }
        };
        let int = |v: Option<u64>| v.map(|v| toml::Value::Integer(v as i64));
        put(
            "name",
            "--strategy",
            self.strategy.map(|s| {
                toml::Value::String(
                    match s {
                        StrategyName::OnePlusOne => "one-plus-one",
                        StrategyName::MapElites => "map-elites",
                        StrategyName::Islands => "islands",
                    }
                    .into(),
                )
            }),
        );
        let selection = match &self.selection {
            Some(mix) => {
                let mix = kevo_strategy::SelectionMix::parse(mix)
                    .map_err(|e| anyhow!("--selection: {e}"))?;
                Some(toml::Value::try_from(mix).map_err(|e| anyhow!("--selection: {e}"))?)
            }
            None => None,
        };
        put("selection", "--selection", selection);
        put("islands", "--islands", int(self.islands.map(u64::from)));
        put(
            "elites_shown",
            "--elites-shown",
            int(self.elites_shown.map(|v| v as u64)),
        );
        put(
            "inspirations",
            "--inspirations",
            int(self.inspirations.map(|v| v as u64)),
        );
        put("hints", "--hints", int(self.hints.map(|v| v as u64)));
        put(
            "population",
            "--population",
            int(self.population.map(|v| v as u64)),
        );
        put(
            "migration_interval",
            "--migration-interval",
            int(self.migration_interval.map(u64::from)),
        );
        put("exploit", "--exploit", self.exploit.map(toml::Value::Float));
        put("rng_seed", "--strategy-seed", int(self.strategy_seed));
        Ok(())
    }
}
