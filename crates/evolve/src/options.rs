use std::path::PathBuf;

use kevo_backend::DeviceSelector;
use kevo_proposer::EditMode;
use kevo_runtimes::BackendKind;
use kevo_tasks::SizeSet;
use serde::{Deserialize, Serialize};

/// Everything that defines a run; stored with it, so `resume` continues
/// with exactly the same settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvolveOptions {
    pub task: String,
    pub backend: BackendKind,
    #[serde(default)]
    pub selector: DeviceSelector,
    pub sizes: SizeSet,
    /// Model specs; several form a weighted ensemble.
    pub llm: Vec<String>,
    /// Provider configuration file (endpoints, prices); keys never stored.
    pub llm_config: Option<PathBuf>,
    pub iterations: u32,
    /// Proposals per iteration (λ); the best competes with the incumbent.
    pub candidates_per_iteration: u32,
    pub max_wall_s: Option<f64>,
    pub max_cost_usd: Option<f64>,
    /// Stop once the incumbent's score reaches this.
    pub target_score: Option<f64>,
    /// Hard limit per candidate; default: 10x the seed's evaluation, at least 30 s.
    pub timeout_s: Option<f64>,
    pub edit_mode: EditMode,
    pub fast_math: bool,
    /// Profile each new incumbent under Nsight Compute (CUDA only) at the
    /// largest in-distribution size and show the summary with its result
    /// in the next prompt; the time is the profile's, not the score's.
    #[serde(default)]
    pub profile: bool,
    /// Profile every correct candidate too (`--profile-every`), when it is
    /// first shown as the previous attempt, its summary beside its result.
    #[serde(default)]
    pub profile_every: bool,
    /// `--agent-tools`: each proposal is a tool conversation (see
    /// `kevo_proposer::tools`), budgeted by `[agent_tools]` in the model
    /// settings.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agent_tools: bool,
    /// `--sanitize-winner memcheck,racecheck`: the winner runs under these
    /// compute-sanitizer tools at the smoke sizes at the end (CUDA); any
    /// error marks it unsafe in the summary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sanitize_winner: Vec<String>,
    /// A kernel of the task from another dialect or device, shown in every
    /// prompt as a reference implementation (`--reference-kernel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_kernel: Option<kevo_proposer::ReferenceKernel>,
    /// `--analyst SPEC`: a second model that reads each kernel the
    /// generator is about to improve (its source, results, compiler facts
    /// and profile) and recommends one change, shown in the generator's
    /// prompt; its calls count in the budget like the generator's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyst: Option<String>,
    /// Seed of the ensemble's model choice.
    pub rng_seed: u64,
    /// The secret the run's inputs are drawn from (`kevo_eval::InputSecret`):
    /// drawn when the run is created (or read from `KEVO_INPUTS_SECRET`) and
    /// kept with it, so a resumed run and every worker see the same inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs_secret: Option<kevo_eval::InputSecret>,
    /// Start from this kernel instead of the task's seed (kept in the run,
    /// so a resume needs nothing else).
    #[serde(default)]
    pub start_source: Option<String>,
    /// Launch mode, cache flush and timed-run counts.
    #[serde(default)]
    pub timing: kevo_worker::TimingOptions,
    /// Compile timeout and memory limits of the evaluation worker.
    #[serde(default)]
    pub limits: kevo_worker::Limits,
    /// Ceilings declared with `--ceilings`, kept so a resumed run scores
    /// against the same roofline.
    #[serde(default)]
    pub declared_ceilings: Option<kevo_worker::DeclaredCeilings>,
    /// Whether workers are confined, and whether that is required.
    #[serde(default)]
    pub sandbox: kevo_worker::kevo_sandbox::Options,
    /// `--llm-timeout`: seconds per model call attempt, over the config file.
    #[serde(default)]
    pub llm_timeout_s: Option<f64>,
    /// `--llm-retries`: retries per model call, over the config file.
    #[serde(default)]
    pub llm_retries: Option<u32>,
    /// With `max_cost_usd`: run on when a call's cost is unknown instead
    /// of stopping because the cap cannot be enforced.
    #[serde(default)]
    pub accept_unknown_cost: bool,
    /// The search strategy and its settings; runs stored before there was
    /// a choice are (1+1).
    #[serde(default)]
    pub strategy: kevo_strategy::StrategyConfig,
    /// `--context-budget`: the user prompt's limit in tokens (estimated
    /// as characters / 4); elites and inspirations beyond it are left
    /// out. None: the prompt builder's default (16 000).
    #[serde(default)]
    pub context_budget_tokens: Option<usize>,
    /// `--promotion`: how a challenger is found better (see
    /// kevo_strategy::promotion). Runs stored before there was a choice
    /// used the strict rule and resume with it.
    #[serde(default = "strict_promotion")]
    pub promotion: kevo_strategy::Promotion,
    /// `--final-remeasure K`: at the end, the K best candidates and the
    /// seed are re-measured interleaved and the winner is the best of
    /// that re-measurement; 0 (the default of runs stored before it
    /// existed) keeps the in-run best.
    #[serde(default)]
    pub final_remeasure: u32,
    /// `--validate`: the validation gate before anything is kept. Off in
    /// runs stored before it existed.
    #[serde(default)]
    pub validation: ValidationOptions,
    /// `--concurrency K`: proposals in flight at once. Each one's prompt is
    /// built from the archive as it is when its slot frees, and each answer
    /// is evaluated and decided as soon as it arrives (in arrival order), so
    /// the device works while the model thinks. 1 (runs stored before it
    /// existed) is the synchronous loop.
    #[serde(default = "one")]
    pub concurrency: u32,
    /// `--record FILE`: every exchange with the model (answers and failed
    /// calls) appended to FILE in the replay format; stored absolute, so a
    /// resumed run appends to the same file.
    #[serde(default)]
    pub record: Option<PathBuf>,
    /// `--batch-poll-s`: seconds between polls of a `batch:` model's
    /// running batch.
    #[serde(default = "default_batch_poll_s")]
    pub batch_poll_s: f64,
    /// Prompt templates, history length and the stagnation rule.
    #[serde(default)]
    pub prompt: PromptOptions,
    /// How a proposed kernel that declares tunable parameters is tuned.
    #[serde(default)]
    pub tune: TuneOptions,
    /// `--model-choice`: how an ensemble (several `--llm` models) picks
    /// the model of each call: fixed weights (runs stored before there was
    /// a choice) or a UCB1 bandit on the improvements each model brought.
    #[serde(default)]
    pub model_choice: kevo_proposer::ModelChoice,
    /// `--meta-prompter SPEC --meta-every N`: the prompt's guidance
    /// sections evolve with the kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta_prompt: Option<MetaPromptOptions>,
    /// `--nats URL`: evaluate on the workers serving that NATS JetStream
    /// queue instead of this host's device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nats: Option<NatsOptions>,
    /// `--devices 0,1,...`: one evaluation worker per local device (by
    /// index or name substring), all of one model; an iteration's answers
    /// are evaluated on them at once. Empty: the one device of `selector`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// `--mixed-devices`: let `--devices` name devices of different
    /// models. Each evaluation is then scored against its own device's
    /// ceilings, so fractions compare but times do not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mixed_devices: bool,
    /// `--triton-python`: the interpreter with Triton installed, for the
    /// triton backend; `None` is kevo_triton's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton_python: Option<String>,
    /// The merged settings as given (no defaults filled in), stored with
    /// the run: a setting added since the fields above is read from here
    /// (`settings.section.key.unwrap_or(DEFAULT)`) and shown by
    /// `kevo config show` and `kevo show RUN --config` without a line of
    /// conversion. Empty in runs stored before it was kept.
    #[serde(default, skip_serializing_if = "crate::config::RunConfig::is_empty")]
    pub settings: crate::config::RunConfig,
}

/// The evaluation queue of a distributed run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NatsOptions {
    pub url: String,
    /// Queues and buckets are named under this (`kevo` by default).
    pub namespace: String,
}

/// Meta-prompt evolution: every `every` proposals the `prompter` model
/// reads the current guidance sections with the recent candidates and
/// their outcomes and edits the sections; each variant is kept in the
/// run's prompt archive with the best score of the kernels it produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetaPromptOptions {
    /// The meta-prompter's model spec (one model).
    pub prompter: String,
    /// Proposals between two meta-prompter calls.
    pub every: u32,
}

/// Proposals between meta-prompter calls when `--meta-every` is not given:
/// enough outcomes to diagnose (KernelFoundry edits every few generations).
pub const DEFAULT_META_EVERY: u32 = 8;

/// The validation gate: before the search keeps a candidate, it is
/// evaluated at the task's validation sizes (never shown to the proposer)
/// and must be correct there and at most `max_slowdown` times the seed's
/// time at each of them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ValidationOptions {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default = "default_max_slowdown")]
    pub max_slowdown: f64,
}

/// 1.5: well outside timing noise (a few percent), well inside the
/// collapses the gate is for (Metal-Sci's fft3d winner ran at 0.23x the
/// seed at a size it had not seen).
pub const DEFAULT_VALIDATE_MAX_SLOWDOWN: f64 = 1.5;

fn default_max_slowdown() -> f64 {
    DEFAULT_VALIDATE_MAX_SLOWDOWN
}

impl Default for ValidationOptions {
    fn default() -> Self {
        ValidationOptions {
            enabled: false,
            max_slowdown: DEFAULT_VALIDATE_MAX_SLOWDOWN,
        }
    }
}

/// Best-of-k tuning of proposed templates (`// kevo: tune` lines): the
/// tuning strategy picks up to `best_of` configurations, each is evaluated
/// like any candidate, and the fastest correct one becomes the candidate.
/// Runs stored before this existed take the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TuneOptions {
    /// Configurations per template; 0 turns tuning off (the prompt does
    /// not offer it and a template fails as a compile error).
    #[serde(default = "default_best_of")]
    pub best_of: u32,
    #[serde(default = "default_tune_strategy")]
    pub strategy: kevo_tune::StrategyKind,
}

/// Eight configurations: enough for TPE to leave its random start (six)
/// on the small spaces a model declares, at eight evaluations' cost.
pub const DEFAULT_TUNE_BEST_OF: u32 = 8;

fn default_best_of() -> u32 {
    DEFAULT_TUNE_BEST_OF
}

fn default_tune_strategy() -> kevo_tune::StrategyKind {
    kevo_tune::StrategyKind::Tpe
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            best_of: default_best_of(),
            strategy: default_tune_strategy(),
        }
    }
}

/// How prompts are written; runs stored before these were settable used
/// the defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptOptions {
    /// A directory whose `.j2` files replace kevo's templates of the same
    /// name (absolute, read when the run starts or resumes).
    #[serde(default)]
    pub templates: Option<PathBuf>,
    /// History records shown (8, as Metal-Sci).
    #[serde(default = "default_history_len")]
    pub history_len: usize,
    /// The stagnation notice's window and gap (3 attempts within 15 %).
    #[serde(default)]
    pub stagnation: kevo_proposer::StagnationParams,
}

impl Default for PromptOptions {
    fn default() -> Self {
        PromptOptions {
            templates: None,
            history_len: default_history_len(),
            stagnation: Default::default(),
        }
    }
}

fn default_history_len() -> usize {
    8
}

fn one() -> u32 {
    1
}

fn strict_promotion() -> kevo_strategy::Promotion {
    kevo_strategy::Promotion::Strict
}

/// The default `--final-remeasure`: the three best, enough to catch a
/// lucky in-run best without re-measuring the whole run.
pub const DEFAULT_FINAL_REMEASURE: u32 = 3;

impl EvolveOptions {
    pub fn new(task: &str, llm: &[String], iterations: u32) -> Self {
        EvolveOptions {
            task: task.to_string(),
            backend: BackendKind::Auto,
            selector: DeviceSelector::default(),
            sizes: SizeSet::Full,
            llm: llm.to_vec(),
            llm_config: None,
            iterations,
            candidates_per_iteration: 1,
            max_wall_s: None,
            max_cost_usd: None,
            target_score: None,
            timeout_s: None,
            edit_mode: EditMode::FullSource,
            fast_math: true,
            profile: false,
            profile_every: false,
            agent_tools: false,
            sanitize_winner: Vec::new(),
            reference_kernel: None,
            analyst: None,
            rng_seed: 0x6B65_766F,
            inputs_secret: None,
            start_source: None,
            timing: kevo_worker::TimingOptions::default(),
            limits: kevo_worker::Limits::default(),
            declared_ceilings: None,
            llm_timeout_s: None,
            llm_retries: None,
            accept_unknown_cost: false,
            sandbox: Default::default(),
            strategy: Default::default(),
            context_budget_tokens: None,
            promotion: Default::default(),
            concurrency: 1,
            record: None,
            batch_poll_s: default_batch_poll_s(),
            final_remeasure: DEFAULT_FINAL_REMEASURE,
            validation: ValidationOptions::default(),
            prompt: PromptOptions::default(),
            tune: TuneOptions::default(),
            model_choice: Default::default(),
            meta_prompt: None,
            nats: None,
            devices: Vec::new(),
            mixed_devices: false,
            triton_python: None,
            settings: Default::default(),
        }
    }

    /// The evaluation worker these settings describe.
    pub fn worker_config(&self) -> kevo_worker::WorkerConfig {
        kevo_worker::WorkerConfig::new(self.backend, self.selector.clone())
            .with_compile(kevo_backend::CompileOptions {
                fast_math: self.fast_math,
                ..Default::default()
            })
            .with_timing(self.timing)
            .with_limits(self.limits.clone())
            .with_declared_ceilings(self.declared_ceilings)
            .with_sandbox(self.sandbox.clone())
            .with_triton_python(self.triton_python.clone())
            .with_inputs_secret(self.inputs_secret)
    }

    /// Where the analyst's exchanges are recorded with `--record FILE`:
    /// beside it as `STEM.analyst.EXT` (`--analyst replay:` that file
    /// replays them), so the proposer's recording stays one model's.
    pub fn analyst_record(&self) -> Option<PathBuf> {
        let path = self.record.as_ref()?;
        self.analyst.as_ref()?;
        let stem = path.file_stem()?.to_string_lossy();
        let name = match path.extension() {
            Some(ext) => format!("{stem}.analyst.{}", ext.to_string_lossy()),
            None => format!("{stem}.analyst"),
        };
        Some(path.with_file_name(name))
    }

    /// Where the meta-prompter's exchanges are recorded with `--record
    /// FILE`: beside it as `STEM.meta.EXT`.
    pub fn meta_record(&self) -> Option<PathBuf> {
        let path = self.record.as_ref()?;
        self.meta_prompt.as_ref()?;
        let stem = path.file_stem()?.to_string_lossy();
        let name = match path.extension() {
            Some(ext) => format!("{stem}.meta.{}", ext.to_string_lossy()),
            None => format!("{stem}.meta"),
        };
        Some(path.with_file_name(name))
    }

    /// The ensemble spec string the proposer parses.
    pub fn llm_spec(&self) -> String {
        self.llm.join(",")
    }

    /// Whether the run's proposals come from outside (`--llm external`):
    /// `kevo ask` and `kevo tell` drive it.
    pub fn is_external(&self) -> bool {
        kevo_proposer::parse_specs(&self.llm_spec()).is_ok_and(|specs| {
            specs
                .iter()
                .any(|s| s.kind == kevo_proposer::SpecKind::External)
        })
    }
}

/// A batch answers within hours; a poll a minute costs nothing and adds
/// at most a minute.
fn default_batch_poll_s() -> f64 {
    60.0
}
