//! The errors a run can end in.

use kevo_backend::Dialect;
use kevo_store::StoreError;
use kevo_worker::WorkerError;

#[derive(Debug, thiserror::Error)]
pub enum EvolveError {
    #[error(transparent)]
    Task(#[from] kevo_tasks::ResolveError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Worker(#[from] WorkerError),
    #[error("proposer: {0}")]
    Provider(#[from] kevo_proposer::ProviderError),
    #[error("prompt: {0}")]
    Prompt(#[from] kevo_proposer::PromptError),
    /// The seed must be correct: there is nothing to improve on otherwise.
    #[error("the seed kernel of {task} is not correct on this device: {reason}")]
    SeedFailed { task: String, reason: String },
    /// `--validate` on a task whose size set declares no validation size.
    #[error(
        "--validate needs validation sizes, and task {task} declares none in its `{set}` size set (add `validation = [...]` to `[sizes.{set}]` of its task.toml, or run without --validate)"
    )]
    NoValidationSizes { task: String, set: String },
    #[error("run {run} cannot be resumed: {reason}")]
    Resume { run: String, reason: String },
    #[error("KEVO_INPUTS_SECRET: {0}")]
    InputsSecret(String),
    #[error("--candidates-per-iteration must be at least 1")]
    NoCandidatesPerIteration,
    /// `--model-choice ucb` with one model: there is nothing to choose.
    #[error(
        "--model-choice {choice} chooses among several models, and this run names one ({model}): give --llm a list, e.g. --llm openai:gpt-5,anthropic:claude-sonnet-4-5"
    )]
    BanditNeedsEnsemble { choice: String, model: String },
    /// The NATS queue of `--nats` could not be used.
    #[error("--nats: {0}")]
    Dispatch(String),
    /// The local devices of `--devices` cannot serve one run.
    #[error("--devices: {0}")]
    Devices(String),
    /// `--meta-prompter` without a proposal interval, or a bad spec.
    #[error("--meta-prompter: {0}")]
    MetaPrompter(String),
    /// `--agent-tools` where no conversation or no local device can serve.
    #[error("--agent-tools: {0}")]
    AgentTools(String),
    #[error("{task} has no {dialect} seed")]
    NoSeed { task: String, dialect: Dialect },
    #[error("the stored evaluation of candidate {candidate} is unreadable: {source}")]
    StoredEvaluation {
        candidate: i64,
        source: serde_json::Error,
    },
    #[error("could not serialise {what}: {source}")]
    Serialize {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("strategy: {0}")]
    Strategy(#[from] kevo_strategy::StrategyError),
    /// A model call's task panicked or was cancelled.
    #[error("proposer task failed: {0}")]
    ProposerTask(#[from] tokio::task::JoinError),
    /// ask/tell/finish on a run that calls its own model.
    #[error(
        "{run} calls its own model; `kevo ask`, `kevo tell` and `kevo finish` drive only runs created with `--llm external`"
    )]
    NotExternal { run: String },
    /// resume of a run that takes its proposals from outside.
    #[error(
        "run {run} takes its proposals from outside (--llm external): hand prompts out with `kevo ask {run}`, answer with `kevo tell {run} ID FILE`, end it with `kevo finish {run}`"
    )]
    ExternalRun { run: String },
    #[error("a run with --llm external is created by `create` (it waits for `ask`), not `start`")]
    ExternalStart,
    #[error("run {run} is finished: it takes no more proposals or answers")]
    RunFinished { run: String },
    /// A budget leaves no room for another prompt.
    #[error(
        "run {run} hands out no more prompts: {reason} ({pending} pending); answer pending ones with `kevo tell`, or score the winner on the held-out size with `kevo finish {run}`"
    )]
    NothingToAsk {
        run: String,
        reason: String,
        pending: u32,
    },
    /// The model never answered, or no later call could succeed: the run
    /// is stored as failed with the reason, and can be resumed.
    #[error(
        "run {run} failed: {reason} (stored as failed; `kevo evolve --resume {run}` continues it once the cause is fixed)"
    )]
    RunFailed { run: String, reason: String },
    #[error(
        "the answer to proposal {proposal} holds nothing to evaluate: {reason}; nothing was stored"
    )]
    NoCodeInAnswer { proposal: i64, reason: String },
    /// An evaluation asked of a session opened without the run's device.
    #[error(
        "this host evaluates nothing for run {run}: its device ({device}) is only recorded here; evaluate on a host that has it"
    )]
    NoDeviceHere { run: String, device: String },
    /// A run's recorded device cannot be read back.
    #[error("run {run}'s recorded device is unreadable: {reason}")]
    RecordedDevice { run: String, reason: String },
}
