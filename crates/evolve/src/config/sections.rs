//! The settings, section by section, as a config file writes them: every key
//! optional, so one type serves a layer and the merged result.

use std::path::PathBuf;

use kevo_runtimes::BackendKind;
use kevo_strategy::StrategyConfig;
use kevo_tasks::SizeSet;
use kevo_worker::kevo_sandbox::Layer;
use serde::{Deserialize, Serialize};

/// One layer of settings; every key optional (absent: the layer below
/// decides). As the effective configuration, every key with a value is
/// present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Task name (see `kevo tasks`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// smoke, full or large.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sizes: Option<SizeSet>,
    /// Start from this kernel file instead of the task's seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_kernel: Option<PathBuf>,
    pub device: DeviceSection,
    pub timing: TimingSection,
    pub limits: LimitsSection,
    pub sandbox: SandboxSection,
    pub llm: LlmSection,
    pub budget: BudgetSection,
    pub prompt: PromptSection,
    pub promotion: PromotionSection,
    pub tune: TuneSection,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<StrategyConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeviceSection {
    /// auto, opencl, cuda or triton (Triton kernels on a CUDA device).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    /// The interpreter with Triton installed, for the triton backend
    /// (default `$KEVO_TRITON_PYTHON`, then `~/.cache/kevo/triton-venv`,
    /// then `python3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub triton_python: Option<String>,
    /// OpenCL platform, by index or name substring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// Device, by index or name substring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Declared ceilings instead of the datasheet or a measurement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceilings: Option<Ceilings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast_math: Option<bool>,
    /// Profile each new incumbent under Nsight Compute (CUDA) and show the
    /// summary in the next prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<bool>,
    /// Profile every correct candidate as well as each incumbent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_every: Option<bool>,
    /// compute-sanitizer tools the winner runs under at the end (CUDA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sanitize_winner: Option<Vec<String>>,
    /// Evaluate on the workers serving this NATS JetStream server
    /// (`kevo worker --nats URL` on the GPU hosts) instead of here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats: Option<String>,
    /// The queues' namespace on that server (default "kevo").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_namespace: Option<String>,
    /// One evaluation worker per local device ("all", or indices or name
    /// substrings), all of one model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<String>>,
    /// Whether `devices` may be of different models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mixed_devices: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ceilings {
    pub bandwidth_gbs: f64,
    pub fp32_gflops: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimingSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_graph: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flush_l2: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_spread: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_timed_runs: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSection {
    /// Hard limit per candidate; absent: 10x the seed's evaluation, at
    /// least 30 s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate_timeout_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile_timeout_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile_memory_gib: Option<f64>,
    /// 0: half the machine's memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_memory_gib: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<Vec<Layer>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_read: Option<Vec<PathBuf>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_write: Option<Vec<PathBuf>>,
}

/// How the proposer's answer is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EditModeName {
    /// The whole kernel.
    Full,
    /// SEARCH/REPLACE edits to the parent.
    Diff,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmSection {
    /// Model specs; `spec=weight` for a weighted ensemble.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<String>>,
    /// The performance analyst's model spec (one model, no ensemble).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analyst: Option<String>,
    /// Provider configuration file (endpoints, prices; keys from the
    /// environment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub providers: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accept_unknown_cost: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates_per_iteration: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_poll_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_mode: Option<EditModeName>,
    /// Seed of the ensemble's model choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// How an ensemble picks each call's model: "weights", "ucb" or
    /// "ucb-per-dollar".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_choice: Option<kevo_proposer::ModelChoice>,
    /// The meta-prompter's model spec: the prompt's guidance sections
    /// evolve with the kernels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_prompter: Option<String>,
    /// Proposals between two meta-prompter calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_every: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetSection {
    /// Proposals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wall_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_score: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromptSection {
    /// A directory of `.j2` files replacing kevo's templates of the same
    /// name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_budget_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stagnation_window: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stagnation_gap: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromotionSection {
    /// noise-aware or strict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
    /// Default 3 with noise-aware promotion, 0 with strict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_remeasure: Option<u32>,
    /// Check a candidate at the task's validation sizes before it is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validate: Option<bool>,
    /// The most a kept candidate may be slower than the seed at a
    /// validation size (default 1.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validate_max_slowdown: Option<f64>,
}

/// Best-of-k tuning of proposed kernels that declare tunable parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TuneSection {
    /// Configurations evaluated per template (default 8); 0 turns tuning off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_of: Option<u32>,
    /// exhaustive, random, local or tpe (default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<kevo_tune::StrategyKind>,
}
