//! The settings, section by section: each field is at once a key of the
//! config file (its name), a command-line flag (`long`) and that flag's
//! help (its doc). Every key is optional, so one type serves a layer and
//! the merged result. A flag's clap id is its dotted key, which is how a
//! flag is traced back to the key it sets ([`super::flags`]).
//!
//! Adding a setting is one field here and one use where the run reads it
//! (docs/guide/settings.md shows one).

use std::path::PathBuf;

use clap::Args;
use kevo_runtimes::BackendKind;
use kevo_strategy::StrategyConfig;
use kevo_tasks::SizeSet;
use kevo_worker::kevo_sandbox::Layer;
use serde::{Deserialize, Serialize};

/// One layer of settings; every key optional (absent: the layer below
/// decides). As the effective configuration, every key with a value is
/// present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Task name (see `kevo tasks`) or a task folder (`./my-task`, see `kevo task new`).
    #[arg(id = "task", long = "task")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// `smoke` (small, for CPUs and CI), `full` (the paper's sizes, the
    /// default) or `large`.
    #[arg(id = "sizes", long = "sizes")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sizes: Option<SizeSet>,
    /// Start from this kernel instead of the task's seed kernel.
    #[arg(id = "seed_kernel", long = "seed-kernel")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_kernel: Option<PathBuf>,
    #[command(flatten)]
    pub device: DeviceSection,
    #[command(flatten)]
    pub timing: TimingSection,
    #[command(flatten)]
    pub limits: LimitsSection,
    #[command(flatten)]
    pub sandbox: SandboxSection,
    #[command(flatten)]
    pub llm: LlmSection,
    #[command(flatten)]
    pub budget: BudgetSection,
    #[command(flatten)]
    pub prompt: PromptSection,
    #[command(flatten)]
    pub promotion: PromotionSection,
    #[command(flatten)]
    pub tune: TuneSection,
    /// The strategy's table; its flags are [`super::StrategyFlags`], since
    /// which keys exist depends on the strategy named.
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<StrategyConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Device")]
pub struct DeviceSection {
    /// Which GPU runtime to use: auto (default), opencl, cuda, or triton
    /// (Triton kernels, compiled by Triton, run on a CUDA device).
    #[arg(id = "device.backend", long = "backend")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    /// The interpreter with Triton installed, for --dialect triton
    /// (default $KEVO_TRITON_PYTHON, then ~/.cache/kevo/triton-venv, made
    /// by `scripts/setup --triton`, then python3).
    #[arg(
        id = "device.triton_python",
        long = "triton-python",
        value_name = "PYTHON"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub triton_python: Option<String>,
    /// OpenCL platform, by index or name substring.
    #[arg(id = "device.platform", long = "platform")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// Device, by index or name substring.
    #[arg(id = "device.device", long = "device")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Score against these ceilings, `GBS,GFLOPS` (DRAM bandwidth in GB/s,
    /// FP32 peak in GFLOPS), instead of the datasheet entry or a measurement:
    /// for a MIG slice or a power-capped or clock-locked GPU.
    #[arg(id = "device.ceilings", long = "ceilings", value_name = "GBS,GFLOPS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceilings: Option<Ceilings>,
    /// Compile without fast math (the default matches Metal's fast math).
    #[arg(
        id = "device.fast_math",
        long = "no-fast-math",
        num_args = 0,
        default_missing_value = "false"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast_math: Option<bool>,
    /// Profile each new incumbent under NVIDIA Nsight Compute (CUDA only)
    /// and show the summary with its result in the next prompt (see `kevo
    /// eval --profile`); without ncu the run says so once and goes on.
    #[arg(
        id = "device.profile",
        long = "profile",
        num_args = 0,
        default_missing_value = "true"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<bool>,
    /// Profile every correct candidate as well as each incumbent (implies
    /// --profile): when it is first shown as the previous attempt, its
    /// summary goes beside its result (seconds of profiling each).
    #[arg(
        id = "device.profile_every",
        long = "profile-every",
        num_args = 0,
        default_missing_value = "true"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_every: Option<bool>,
    /// At the end, run the winner under these compute-sanitizer tools
    /// (memcheck, racecheck, initcheck, synccheck; comma-separated) at
    /// the task's smoke sizes (CUDA): any error marks it unsafe.
    #[arg(
        id = "device.sanitize_winner",
        long = "sanitize-winner",
        value_name = "TOOLS",
        value_delimiter = ','
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sanitize_winner: Option<Vec<String>>,
    /// Evaluate on the workers serving this NATS JetStream server (`kevo
    /// worker --nats URL` on each GPU host) instead of this host's device;
    /// the run scores against their device model's ceilings.
    #[arg(id = "device.nats", long = "nats", value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats: Option<String>,
    /// The namespace of the queues on that server (default kevo).
    #[arg(
        id = "device.nats_namespace",
        long = "nats-namespace",
        value_name = "NAME"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_namespace: Option<String>,
    /// One evaluation worker per local device: `all`, or devices by index
    /// or name substring (`0,1`), all of one model. The answers of an
    /// iteration (--candidates-per-iteration) are evaluated on them at once.
    #[arg(
        id = "device.devices",
        long = "devices",
        value_name = "DEVICES",
        value_delimiter = ','
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<String>>,
    /// Let --devices name devices of different models (refused otherwise):
    /// each evaluation is scored against its own device's ceilings, so
    /// fractions compare across them and times do not.
    #[arg(
        id = "device.mixed_devices",
        long = "mixed-devices",
        num_args = 0,
        default_missing_value = "true"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mixed_devices: Option<bool>,
}

/// Declared ceilings: `GBS,GFLOPS` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ceilings {
    pub bandwidth_gbs: f64,
    pub fp32_gflops: f64,
}

impl std::str::FromStr for Ceilings {
    type Err = String;

    fn from_str(text: &str) -> Result<Ceilings, String> {
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
            _ => Err(format!(
                "--ceilings must be two positive numbers, GB/s and GFLOPS, as in 3350,67000; got {text:?}"
            )),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Timing")]
pub struct TimingSection {
    /// CUDA: launch each kernel on a stream instead of replaying each size's
    /// launch sequence as one CUDA graph (the default: graphs keep launch
    /// jitter from dominating small sizes).
    #[arg(
        id = "timing.cuda_graph",
        long = "no-cuda-graph",
        num_args = 0,
        default_missing_value = "false"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_graph: Option<bool>,
    /// CUDA: flush the L2 cache before every timed run (outside the timing),
    /// so sizes that fit in L2 are not timed warm.
    #[arg(
        id = "timing.flush_l2",
        long = "flush-l2",
        num_args = 0,
        default_missing_value = "true"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flush_l2: Option<bool>,
    /// Repeat timed runs until (q3 - q1) / median is at most this (default
    /// 0.01).
    #[arg(id = "timing.target_spread", long = "target-spread")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_spread: Option<f64>,
    /// ... or until this many runs were timed (default 50, at least 10).
    #[arg(id = "timing.max_timed_runs", long = "max-timed-runs")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_timed_runs: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Limits")]
pub struct LimitsSection {
    /// Hard limit per candidate in seconds; default 10x the seed's
    /// evaluation, at least 30 s.
    #[arg(id = "limits.candidate_timeout_s", long = "timeout")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate_timeout_s: Option<f64>,
    /// Seconds a candidate's compilation may take (default 30).
    #[arg(id = "limits.compile_timeout_s", long = "compile-timeout")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile_timeout_s: Option<f64>,
    /// GiB of memory a compilation may add to the worker (default 4).
    #[arg(id = "limits.compile_memory_gib", long = "compile-memory-gib")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile_memory_gib: Option<f64>,
    /// GiB of memory the worker may add once its device is open; 0 (the
    /// default) is half the machine's memory.
    #[arg(id = "limits.worker_memory_gib", long = "worker-memory-gib")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_memory_gib: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Sandbox")]
pub struct SandboxSection {
    /// Run workers unconfined (the environment is still allow-listed): to
    /// measure the sandbox's cost or rule it out when a driver misbehaves.
    #[arg(
        id = "sandbox.enabled",
        long = "no-sandbox",
        num_args = 0,
        default_missing_value = "false"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Refuse to run unless every sandbox layer is in force (Landlock,
    /// a network namespace, no new privileges).
    #[arg(
        id = "sandbox.required",
        long = "require-sandbox",
        num_args = 0,
        default_missing_value = "true",
        conflicts_with = "sandbox.enabled"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Leave these sandbox layers out (namespaces, files, tcp, scopes, syscalls),
    /// comma-separated: to find the one a driver cannot live with. Each is
    /// reported as missing.
    #[arg(
        id = "sandbox.skip",
        long = "sandbox-skip",
        value_delimiter = ',',
        value_name = "LAYER"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<Vec<Layer>>,
    /// Let workers also read this directory or file (a driver or toolkit
    /// installed outside /usr, such as /opt/cuda); repeatable, reported.
    #[arg(
        id = "sandbox.allow_read",
        long = "sandbox-allow-read",
        value_name = "PATH"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_read: Option<Vec<PathBuf>>,
    /// Let workers also write this directory or file; repeatable, reported.
    #[arg(
        id = "sandbox.allow_write",
        long = "sandbox-allow-write",
        value_name = "PATH"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_write: Option<Vec<PathBuf>>,
}

/// How the proposer's answer is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum EditModeName {
    /// The proposer returns the whole kernel.
    Full,
    /// The proposer returns SEARCH/REPLACE edits to the incumbent.
    Diff,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Model")]
pub struct LlmSection {
    /// Model spec (see `kevo llm test --help`); repeat for a weighted ensemble.
    /// `external`: kevo calls no model; `kevo ask`/`kevo tell` drive the run.
    #[arg(id = "llm.models", long = "llm", value_name = "LLM")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<String>>,
    /// A second model, the performance analyst (any model spec, e.g.
    /// `openai:gpt-5-mini`): it reads each kernel the proposer is about
    /// to improve (source, per-size results, compiler facts, the profile
    /// with --profile) and recommends one change, which the proposer's
    /// next prompt shows. Its tokens and cost count in the budget.
    #[arg(id = "llm.analyst", long = "analyst", value_name = "SPEC")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analyst: Option<String>,
    /// Let the model try before it answers: each proposal is a tool
    /// conversation (OpenAI and Anthropic models) in which it may compile,
    /// check and time kernels at the smoke sizes, against the incumbent,
    /// on a worker of its own, then submits one. The tools and the
    /// per-proposal budget are the `[agent_tools]` section of --llm-config.
    #[arg(
        id = "llm.agent_tools",
        long = "agent-tools",
        num_args = 0,
        default_missing_value = "true"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_tools: Option<bool>,
    /// Provider configuration (TOML or JSON): endpoints, keys, prices.
    #[arg(
        id = "llm.providers",
        long = "llm-config",
        env = "KEVO_LLM_CONFIG",
        value_name = "LLM_CONFIG"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub providers: Option<PathBuf>,
    /// Seconds one model call attempt may take (default 300, or the
    /// provider configuration's `timeout_s`).
    #[arg(id = "llm.timeout_s", long = "llm-timeout", value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// Retries of a failed model call (default 4, or the provider
    /// configuration's `max_retries`).
    #[arg(id = "llm.retries", long = "llm-retries", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// With --max-cost-usd: run on when a call's cost is unknown (no price
    /// for the model, or no token counts from the server) instead of
    /// stopping because the cap cannot be enforced.
    #[arg(
        id = "llm.accept_unknown_cost",
        long = "accept-unknown-cost",
        num_args = 0,
        default_missing_value = "true"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accept_unknown_cost: Option<bool>,
    /// Append every exchange with the model (prompt key, request, answer
    /// with reasoning, tokens, cost and latency, or the error) to FILE in
    /// the replay format: `--llm replay:FILE` replays the run.
    #[arg(id = "llm.record", long = "record", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<PathBuf>,
    /// Prompts in flight at once: each answer is evaluated as soon as it
    /// arrives and a freed slot gets a prompt from the archive as it is
    /// then, so the device works while the model thinks (default 1: one
    /// prompt at a time).
    #[arg(id = "llm.concurrency", long = "concurrency")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Proposals per iteration; the best competes with the incumbent
    /// (default 1).
    #[arg(id = "llm.candidates_per_iteration", long = "candidates-per-iteration")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates_per_iteration: Option<u32>,
    /// Seconds between polls of a running batch (`--llm batch:...`, whose
    /// prompts go out `--concurrency` at a time through the provider's
    /// batch endpoint; default 60).
    #[arg(id = "llm.batch_poll_s", long = "batch-poll-s")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_poll_s: Option<f64>,
    /// full (the default) or diff.
    #[arg(id = "llm.edit_mode", long = "edit-mode", value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_mode: Option<EditModeName>,
    /// Seed of the ensemble's model choice.
    #[arg(id = "llm.seed", long = "rng-seed", value_name = "RNG_SEED")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// How an ensemble (several --llm models) picks each call's model:
    /// `weights` (in proportion to `spec=weight`, the default), `ucb` (a
    /// UCB1 bandit on the relative gain each model's candidates brought
    /// over their parents) or `ucb-per-dollar` (that gain per dollar).
    #[arg(id = "llm.model_choice", long = "model-choice", value_name = "CHOICE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_choice: Option<kevo_proposer::ModelChoice>,
    /// A model that evolves the prompt: every --meta-every proposals it
    /// reads the guidance sections of the system prompt with the recent
    /// candidates and their outcomes, and edits the sections; each variant
    /// is kept with the best score of the kernels it produced, and
    /// proposals sample the variants. Its tokens and cost count in the
    /// budget.
    #[arg(id = "llm.meta_prompter", long = "meta-prompter", value_name = "SPEC")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_prompter: Option<String>,
    /// Proposals between two meta-prompter calls (default 8).
    #[arg(id = "llm.meta_every", long = "meta-every", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_every: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Budget")]
pub struct BudgetSection {
    /// Proposals to make (default 10).
    #[arg(id = "budget.iterations", long = "iterations")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// Stop after this many seconds of wall time.
    #[arg(id = "budget.max_wall_s", long = "max-wall-s")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wall_s: Option<f64>,
    /// Stop once this much has been spent on the proposer (USD).
    #[arg(id = "budget.max_cost_usd", long = "max-cost-usd")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Stop once the incumbent's score reaches this.
    #[arg(id = "budget.target_score", long = "target-score")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_score: Option<f64>,
}

/// What a prompt holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Prompt")]
pub struct PromptSection {
    /// A directory of `.j2` files replacing kevo's templates of the same
    /// name.
    #[arg(id = "prompt.templates", long = "prompt-templates", value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<PathBuf>,
    /// Records of earlier attempts a prompt shows (default 8, as
    /// Metal-Sci).
    #[arg(id = "prompt.history", long = "history", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<usize>,
    /// The user prompt's limit in tokens (characters / 4): other elites
    /// and inspirations beyond it are left out, inspirations first
    /// (default 16000).
    #[arg(
        id = "prompt.context_budget_tokens",
        long = "context-budget",
        value_name = "TOKENS"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_budget_tokens: Option<usize>,
    /// The stagnation notice: shown when this many of the latest correct
    /// attempts (default 3) ...
    #[arg(
        id = "prompt.stagnation_window",
        long = "stagnation-window",
        value_name = "N"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stagnation_window: Option<usize>,
    /// ... all scored within this fraction below the incumbent (default
    /// 0.15).
    #[arg(
        id = "prompt.stagnation_gap",
        long = "stagnation-gap",
        value_name = "FRACTION"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stagnation_gap: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Promotion")]
pub struct PromotionSection {
    /// How a challenger is found better than what it would replace:
    /// noise-aware (the default: re-measured with it, interleaved, and
    /// promoted only if the gain is significant) or strict (Metal-Sci's
    /// rule: a strictly greater score, measured once).
    #[arg(id = "promotion.rule", long = "promotion", value_name = "PROMOTION", value_parser = ["noise-aware", "strict"])]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// noise-aware: interleaved rounds of a re-measurement (default 5).
    #[arg(id = "promotion.rounds", long = "remeasure-rounds", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
    /// At the end, re-measure the K best candidates and the seed
    /// together and take the best of that as the winner (0: the in-run
    /// best). Default 3 with noise-aware promotion, 0 with strict.
    #[arg(
        id = "promotion.final_remeasure",
        long = "final-remeasure",
        value_name = "K"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_remeasure: Option<u32>,
    /// Before the search keeps a candidate (promotes it, or makes it an
    /// elite or island member), evaluate it at the task's validation
    /// sizes, which no prompt shows: it must be correct there and not
    /// slower than the seed by more than --validate-max-slowdown.
    /// Rejected candidates are stored with the reason; the model is told
    /// only "fails on unseen sizes".
    #[arg(
        id = "promotion.validate",
        long = "validate",
        num_args = 0,
        default_missing_value = "true"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validate: Option<bool>,
    /// --validate: the most a candidate may be slower than the seed at a
    /// validation size (time ratio, default 1.5).
    #[arg(
        id = "promotion.validate_max_slowdown",
        long = "validate-max-slowdown",
        value_name = "FACTOR"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validate_max_slowdown: Option<f64>,
}

/// Best-of-k tuning of proposed kernels that declare tunable parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Tuning")]
pub struct TuneSection {
    /// A proposed kernel that declares tunable parameters (`// kevo: tune`)
    /// is tuned: this many configurations are evaluated and the fastest
    /// correct one is the candidate (default 8; 0: off, and the prompt
    /// does not offer it).
    #[arg(id = "tune.best_of", long = "tune-best-of", value_name = "K")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_of: Option<u32>,
    /// The strategy that picks those configurations: exhaustive, random,
    /// local or tpe (default).
    #[arg(id = "tune.strategy", long = "tune-strategy", value_name = "STRATEGY")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<kevo_tune::StrategyKind>,
}
