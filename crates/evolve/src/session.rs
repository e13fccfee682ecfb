mod asktell;
mod batched;

pub use asktell::{Asked, ask, create, finish, tell};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kevo_backend::Dialect;
use kevo_descriptors::{Descriptors, Features};
use kevo_eval::{Evaluation, Outcome, WallTimes};
use kevo_proposer::{
    Accounting, Attempt, ChatRequest, Completion, DeviceBrief, EnsembleState, Extraction,
    HistoryEntry, PromptBuilder, Provider, ProviderConfig, ProviderError, StepOutcome, UserContext,
    evaluated_entry, step_outcome,
};
use kevo_store::artifacts::RunDir;
use kevo_store::{
    CandidateId, CandidateRef, Checkpoint, Decided, EvaluationId, HeldOutRole, NewCandidate,
    NewDecision, NewEvaluation, NewHeldOut, NewLlmCall, NewRemeasurement, NewRun, NewValidation,
    ProposalId, Proposed, RemeasurePurpose, RunId, Spent, Store, StoreError, source_sha256,
};
use kevo_strategy::{
    Decision, Elite, Judge, Judgement, NoiseAwareJudge, OnePlusOne, Promotion, Scored, Selection,
    Strategy, StrictJudge,
};
use kevo_tasks::Task;
use kevo_worker::{Worker, WorkerCommand, WorkerError};
use serde::{Deserialize, Serialize};

use crate::options::EvolveOptions;
use crate::remeasure::{FinalEntry, FinalPick, Interleaved, RemeasureSpend};

/// The end-of-run pick re-measures only candidates whose in-run score is
/// at least this share of the best's: one kernel's score moved by 50%
/// between evaluations on a CPU OpenCL device (see
/// kevo_strategy::promotion), so a candidate 4x below cannot win. In the
/// demo's run (214 s on a loaded 2-core machine) re-measuring a correct
/// kernel 3000x slower took about 115 s.
const FINAL_PICK_MIN_SHARE: f64 = 0.25;

/// Where a run lives and how workers are started.
pub struct Environment {
    pub store: Store,
    /// Run directories (human-readable artifacts) go under `<workspace>/runs`.
    pub workspace: PathBuf,
    pub worker: WorkerCommand,
    /// Model calls under way, so that a run stopped by a signal stores
    /// what it was asking ([`interrupt`]).
    pub in_flight: InFlightCalls,
}

/// Model calls a session has sent and not yet got back.
#[derive(Clone, Default)]
pub struct InFlightCalls(Arc<std::sync::Mutex<Vec<InFlightCall>>>);

struct InFlightCall {
    /// The batch of calls it belongs to (one prompt's proposals).
    token: u64,
    /// "propose", or "analysis" for the performance analyst's.
    purpose: &'static str,
    run: RunId,
    iteration: u32,
    provider: String,
    system: String,
    user: String,
    sent: Instant,
}

impl InFlightCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<InFlightCall>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many calls are under way.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A proposal call as stored, before its answer is known: what was asked
/// of whom, and how long it took; counts and cost unknown.
fn proposal_call(provider: String, system: &str, user: &str, latency_s: f64) -> NewLlmCall {
    NewLlmCall {
        purpose: "propose".into(),
        provider,
        model: String::new(),
        prompt_system: system.to_string(),
        prompt_user: user.to_string(),
        response: None,
        reasoning: None,
        input_tokens: None,
        output_tokens: None,
        reasoning_tokens: None,
        cost_usd: None,
        latency_s,
        error: None,
    }
}

/// `call` with what `completion` says: model, answer, reasoning, counts
/// (unknown, not 0, when the server gave none) and cost.
fn with_answer(mut call: NewLlmCall, completion: &Completion) -> NewLlmCall {
    call.model = completion.model.clone();
    call.response = Some(completion.text.clone());
    call.reasoning = completion.reasoning.clone();
    let known = completion.usage_unknown.is_none();
    call.input_tokens = known.then_some(completion.usage.input_tokens);
    call.output_tokens = known.then_some(completion.usage.output_tokens);
    call.reasoning_tokens = completion.usage.reasoning_tokens;
    call.cost_usd = completion.cost_usd;
    call
}

/// The purpose under which meta-prompter calls are stored.
pub const META_PURPOSE: &str = "meta-prompt";

/// Failed attempts whose feedback the meta-prompter sees (the latest):
/// each is up to 800 characters of compile log or mismatch.
const META_FAILURES_SHOWN: usize = 3;

/// Analyst failures in a row after which a run stops asking it: a
/// misconfigured endpoint would otherwise cost every prompt its retries.
const ANALYST_GIVE_UP: u32 = 3;

/// One prompt's model calls as they came back, each with its latency; an
/// error when every call hit a budget stop.
type Calls = Result<Vec<(Result<Completion, ProviderError>, f64)>, EvolveError>;

/// How the error of a call abandoned by [`interrupt`] begins.
pub const ABANDONED: &str = "abandoned after";

/// Whether a stored call was abandoned in flight by [`interrupt`].
pub fn is_abandoned(call: &kevo_store::StoredLlmCall) -> bool {
    call.candidate_id.is_none()
        && call
            .call
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with(ABANDONED))
}

/// Ends a run stopped from outside (SIGINT, SIGTERM) once its session
/// future has been dropped: the model calls it had in flight are stored as
/// abandoned (tokens unknown: they may have been billed), and the run is
/// marked interrupted with `reason`, resumable. Returns how many calls were
/// abandoned.
pub async fn interrupt(env: &Environment, run: &str, reason: &str) -> Result<usize, EvolveError> {
    let run = RunId(run.to_string());
    let abandoned: Vec<InFlightCall> = {
        let mut calls = env.in_flight.lock();
        let (mine, others) = calls.drain(..).partition(|c| c.run == run);
        *calls = others;
        mine
    };
    let mut by_iteration: std::collections::BTreeMap<u32, Vec<NewLlmCall>> = Default::default();
    for c in &abandoned {
        let waited = c.sent.elapsed().as_secs_f64();
        by_iteration
            .entry(c.iteration)
            .or_default()
            .push(NewLlmCall {
                purpose: c.purpose.into(),
                error: Some(format!("{ABANDONED} {waited:.1} s: {reason}")),
                ..proposal_call(c.provider.clone(), &c.system, &c.user, waited)
            });
    }
    for (iteration, calls) in &by_iteration {
        env.store
            .record_abandoned_calls(&run, *iteration, calls)
            .await?;
    }
    env.store.mark_interrupted(&run, reason).await?;
    Ok(abandoned.len())
}

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
    #[error(
        "the answer to proposal {proposal} holds nothing to evaluate: {reason}; nothing was stored"
    )]
    NoCodeInAnswer { proposal: i64, reason: String },
}

/// Progress of a run, for live display or JSON lines.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The run is stored (before its seed is evaluated): from here on it
    /// can be resumed by this id.
    Created {
        run: String,
    },
    /// A batch of prompts (`batch:` models) was submitted, is running or
    /// ended: the provider's status, requests answered and in all.
    Batch {
        batch: String,
        status: String,
        done: u64,
        total: u64,
    },
    Started {
        run: String,
        task: String,
        device: String,
        backend: String,
        resumed_from: Option<u32>,
        iterations: u32,
        /// The worker's confinement, one line (see kevo_sandbox::Status).
        sandbox: String,
    },
    Seed {
        score: f64,
        wall_s: f64,
    },
    Iteration {
        iteration: u32,
        outcomes: Vec<String>,
        scores: Vec<Option<f64>>,
        promoted: bool,
        best_score: f64,
        speedup: f64,
        input_tokens: u64,
        output_tokens: u64,
        cost_usd: f64,
        /// Calls of this session whose cost is unknown (no price, or no
        /// usable token counts): `cost_usd` leaves them out.
        unknown_cost_calls: u64,
        /// Calls of this session without usable token counts: the token
        /// figures leave them out.
        unknown_usage_calls: u64,
        wall_s: f64,
        /// The verdicts of this iteration's re-measurements ("... (within
        /// noise, not promoted)"); empty under strict promotion.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        verdicts: Vec<String>,
        /// Prompts whose model calls are still out (`--concurrency`),
        /// answered ones waiting for the device excluded.
        #[serde(default)]
        in_flight: u32,
        /// Answers that arrived and wait for the device.
        #[serde(default)]
        queued: u32,
        /// Wall seconds of this session spent evaluating: over the
        /// session's wall time, the device's busy share.
        #[serde(default)]
        evaluating_s: f64,
        /// Wall seconds of this session so far.
        #[serde(default)]
        session_s: f64,
        /// The models that answered this iteration (ensemble members).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        models: Vec<String>,
        /// The prompt variant its prompt used (`--meta-prompter`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_variant: Option<u32>,
        /// The model bandit's arms after it (`--model-choice ucb`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        arms: Vec<ArmStat>,
    },
    /// The meta-prompter edited the prompt before proposal `iteration`.
    MetaPrompt {
        iteration: u32,
        parent: u32,
        /// The new variant, None when no edit applied.
        variant: Option<u32>,
        applied: Vec<String>,
        rejected: Vec<String>,
        diagnosis: String,
        /// Why there was no answer (the call failed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<String>,
    },
    HeldOut(HeldOutSummary),
    Finished(Box<Summary>),
}

/// One model of a bandit-choosing ensemble, as progress and `kevo show`
/// report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmStat {
    pub model: String,
    /// Calls chosen for it (in flight included).
    pub calls: u64,
    pub rewarded: u64,
    /// Mean reward (relative gain over the parent) per rewarded call.
    pub mean_reward: f64,
    pub cost_usd: f64,
}

/// The arms of an ensemble state, empty without a bandit.
pub fn arm_stats(state: &EnsembleState) -> Vec<ArmStat> {
    let Some(b) = &state.bandit else {
        return Vec::new();
    };
    b.arms
        .iter()
        .enumerate()
        .map(|(i, a)| ArmStat {
            model: state
                .labels
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("model {i}")),
            calls: a.pulls,
            rewarded: a.rewarded,
            mean_reward: a.mean(false),
            cost_usd: a.cost_usd,
        })
        .collect()
}

/// The ensemble state a checkpoint stored (None for one model).
pub fn stored_ensemble(checkpoint: &kevo_store::StoredCheckpoint) -> Option<EnsembleState> {
    serde_json::from_value(checkpoint.rng_state.clone()?).ok()
}

/// The prompt archive a checkpoint stored (`--meta-prompter` runs).
pub fn stored_prompt_archive(
    checkpoint: &kevo_store::StoredCheckpoint,
) -> Option<kevo_proposer::prompt::meta::PromptArchive> {
    let state: StrategyState = serde_json::from_value(checkpoint.strategy_state.clone()?).ok()?;
    state.prompts
}

pub trait Observer {
    fn on(&mut self, event: &Event);
}

impl<F: FnMut(&Event)> Observer for F {
    fn on(&mut self, event: &Event) {
        self(event)
    }
}

/// The held-out gate: the incumbent and the seed at the held-out size,
/// measured in one session; only their ratio compares across sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutSummary {
    pub size: String,
    pub seed_outcome: String,
    pub winner_outcome: String,
    pub seed_fraction: Option<f64>,
    pub winner_fraction: Option<f64>,
    /// Φ = the winner's fraction of the ceiling times its correctness.
    pub phi: f64,
    /// The winner's fraction over the seed's, same session.
    pub speedup: Option<f64>,
    /// The winner's held-out size against its ceilings, every fraction
    /// with its level ("397% of DRAM 19.0 GB/s, 52% of L2 ...").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner_roofline: Option<String>,
    /// Generalises, held-out regression, overfit or seed kept (None in
    /// summaries stored before it was), and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::HeldOutVerdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub run: String,
    pub task: String,
    pub device: String,
    pub backend: String,
    pub iterations: u32,
    pub stop_reason: String,
    pub seed_score: f64,
    pub best_score: f64,
    /// best / seed, in-distribution, measured in this run.
    pub speedup: f64,
    pub best_candidate: i64,
    pub best_iteration: u32,
    pub held_out: Option<HeldOutSummary>,
    pub spent: Spent,
    /// Candidates that ran faster than the hardware allows (never scored):
    /// "iteration N candidate C at size S: reason".
    #[serde(default)]
    pub suspicious: Vec<String>,
    /// Calls of the last session whose cost is unknown; `spent.cost_usd`
    /// leaves them out.
    #[serde(default)]
    pub unknown_cost_calls: u64,
    /// Calls of the last session that reported no token counts (`cmd:`,
    /// replay, servers without usage); `spent`'s tokens leave them out.
    #[serde(default)]
    pub unknown_usage_calls: u64,
    /// The promotion rule in force ("noise-aware", "strict").
    #[serde(default)]
    pub promotion: String,
    /// Evaluations spent re-measuring (promotions and the final pick),
    /// counted apart from the candidates' own.
    #[serde(default)]
    pub remeasure: RemeasureSpend,
    /// The end-of-run re-measurement of the best few and the seed; when
    /// present, `best_candidate` is its winner, and `best_score` and
    /// `speedup` are its medians, measured in one session.
    #[serde(default)]
    pub final_pick: Option<FinalPick>,
    /// The validation gate's tally, with `--validate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationState>,
    /// The winner under compute-sanitizer (`--sanitize-winner`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety: Option<crate::verdict::Safety>,
}

/// Where a run's candidates are evaluated: its own isolated worker, or the
/// workers serving a NATS JetStream queue (`--nats`), which evaluate with
/// the run's settings on their device.
enum Evaluator {
    /// One worker per local device (`--devices`), all of one device model.
    Local(Vec<Worker>),
    Remote(Box<RemoteRun>),
}

struct RemoteRun {
    remote: kevo_dispatch::RemoteEvaluator,
    /// What the run scores against: its declared ceilings, else the
    /// workers' own.
    ceilings: kevo_roofline::Ceilings,
    settings: serde_json::Value,
}

/// The devices of `--devices` (`all`, or indices or name substrings) as
/// selectors on `base`'s platform; empty `devices` is `base` itself.
/// `all` lists the devices of `backend`, which must be named.
pub fn device_selectors(
    backend: kevo_runtimes::BackendKind,
    base: &kevo_backend::DeviceSelector,
    devices: &[String],
) -> Result<Vec<kevo_backend::DeviceSelector>, String> {
    let selectors: Vec<kevo_backend::DeviceSelector> = match devices {
        [] => vec![base.clone()],
        [all] if all == "all" => {
            let kind = match backend {
                kevo_runtimes::BackendKind::Auto => {
                    return Err("`all` needs --backend cuda or --backend opencl".into());
                }
                k => k,
            };
            let listed = kevo_runtimes::list()
                .into_iter()
                .find(|(k, _)| *k == kind)
                .map(|(_, l)| l)
                .unwrap_or_else(|| Err(format!("{kind} is not built in")))
                .map_err(|e| format!("all: {e}"))?;
            listed
                .into_iter()
                .map(|(selector, _)| selector)
                .filter(|s| base.platform.is_none() || s.platform == base.platform)
                .collect()
        }
        some => some
            .iter()
            .map(|d| kevo_backend::DeviceSelector {
                platform: base.platform.clone(),
                device: Some(d.clone()),
            })
            .collect(),
    };
    if selectors.is_empty() {
        return Err("`all` found no device".into());
    }
    Ok(selectors)
}

/// Whether workers on devices of these `models` may serve one run: an
/// error when they differ and `mixed` was not asked for (times and scores
/// of different models do not compare), else a note to print when they
/// differ.
pub fn one_model(models: &[&str], mixed: bool) -> Result<Option<String>, String> {
    let mut distinct: Vec<&str> = Vec::new();
    for m in models {
        if !distinct.contains(m) {
            distinct.push(m);
        }
    }
    match (distinct.len(), mixed) {
        (0 | 1, _) => Ok(None),
        (_, false) => Err(format!(
            "they are devices of different models ({}); scores of different devices do not compare, so a run uses one model (--mixed-devices allows it)",
            distinct.join(", ")
        )),
        (_, true) => Ok(Some(format!(
            "--mixed-devices: this run evaluates on {}; each evaluation is scored against its own device's ceilings, so its fractions compare and its times do not",
            distinct.join(", ")
        ))),
    }
}

impl Evaluator {
    /// The run's local workers: one, or one per device of `--devices`, all
    /// of one device model (scores of different models do not compare)
    /// unless `--mixed-devices`.
    fn local(options: &EvolveOptions, env: &Environment) -> Result<Evaluator, EvolveError> {
        let selectors = device_selectors(options.backend, &options.selector, &options.devices)
            .map_err(EvolveError::Devices)?;
        let mut workers: Vec<Worker> = Vec::with_capacity(selectors.len());
        for selector in selectors {
            let mut config = options.worker_config();
            config.selector = selector;
            let command = env.worker.clone();
            let worker = tokio::task::block_in_place(|| Worker::start(command, config))?;
            workers.push(worker);
        }
        let models: Vec<&str> = workers.iter().map(|w| w.device().name.as_str()).collect();
        if let Some(mixed) =
            one_model(&models, options.mixed_devices).map_err(EvolveError::Devices)?
        {
            eprintln!("kevo: {mixed}");
        }
        Ok(Evaluator::Local(workers))
    }

    async fn remote(
        options: &EvolveOptions,
        nats: &crate::NatsOptions,
    ) -> Result<Evaluator, EvolveError> {
        if options.profile || options.profile_every || !options.sanitize_winner.is_empty() {
            return Err(EvolveError::Dispatch(
                "--profile, --profile-every and --sanitize-winner need the device on this host; a run with --nats evaluates on remote workers".into(),
            ));
        }
        let namespace =
            kevo_dispatch::Namespace::new(&nats.namespace).map_err(EvolveError::Dispatch)?;
        let backend = match options.backend {
            kevo_runtimes::BackendKind::Auto => None,
            b => Some(b.to_string()),
        };
        let remote = kevo_dispatch::RemoteEvaluator::connect(
            &nats.url,
            &namespace,
            backend.as_deref(),
            options.selector.device.as_deref(),
        )
        .await
        .map_err(|e| EvolveError::Dispatch(e.to_string()))?;
        let ceilings = match options.declared_ceilings {
            Some(d) => d.ceilings(),
            None => remote.worker().ceilings.clone(),
        };
        let settings = serde_json::to_value(options.worker_config()).map_err(|source| {
            EvolveError::Serialize {
                what: "the evaluation settings",
                source,
            }
        })?;
        Ok(Evaluator::Remote(Box::new(RemoteRun {
            remote,
            ceilings,
            settings,
        })))
    }

    /// Each local worker's device name and ceilings; the remote worker's
    /// for a run over NATS.
    fn devices(&self) -> Vec<serde_json::Value> {
        let entry = |d: &kevo_backend::DeviceInfo, c: &kevo_roofline::Ceilings| serde_json::json!({"name": d.name, "ceilings": c});
        match self {
            Evaluator::Local(w) => w.iter().map(|w| entry(w.device(), w.ceilings())).collect(),
            Evaluator::Remote(r) => vec![entry(&r.remote.worker().device, &r.ceilings)],
        }
    }

    fn device(&self) -> &kevo_backend::DeviceInfo {
        match self {
            Evaluator::Local(w) => w[0].device(),
            Evaluator::Remote(r) => &r.remote.worker().device,
        }
    }

    fn ceilings(&self) -> &kevo_roofline::Ceilings {
        match self {
            Evaluator::Local(w) => w[0].ceilings(),
            Evaluator::Remote(r) => &r.ceilings,
        }
    }

    fn sandbox(&self) -> &kevo_worker::kevo_sandbox::Status {
        match self {
            Evaluator::Local(w) => w[0].sandbox(),
            Evaluator::Remote(r) => &r.remote.worker().sandbox,
        }
    }

    /// Evaluations that can run at once: the local workers, or (remote)
    /// as many as the queue's workers take.
    fn parallel(&self) -> usize {
        match self {
            Evaluator::Local(w) => w.len(),
            Evaluator::Remote(_) => usize::MAX,
        }
    }

    /// Several sources evaluated at once, each on the next free worker;
    /// the results in `sources` order.
    fn evaluate_many(
        &mut self,
        task: &Task,
        sources: &[String],
        sizes: &[kevo_tasks::Size],
        timeout: Duration,
    ) -> Result<Vec<Evaluation>, EvolveError> {
        match self {
            Evaluator::Local(workers) => Ok(tokio::task::block_in_place(|| {
                let next = std::sync::atomic::AtomicUsize::new(0);
                let results: Vec<std::sync::Mutex<Option<Evaluation>>> = sources
                    .iter()
                    .map(|_| std::sync::Mutex::new(None))
                    .collect();
                std::thread::scope(|scope| {
                    for w in workers.iter_mut() {
                        let (next, results) = (&next, &results);
                        scope.spawn(move || {
                            loop {
                                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let Some(source) = sources.get(i) else { break };
                                let e = w.evaluate(task.name(), source, sizes, timeout);
                                *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                            }
                        });
                    }
                });
                results
                    .into_iter()
                    .map(|r| {
                        r.into_inner()
                            .unwrap_or_else(|p| p.into_inner())
                            .expect("every source was taken by a worker")
                    })
                    .collect()
            })),
            Evaluator::Remote(r) => tokio::task::block_in_place(|| {
                let (remote, settings) = (&r.remote, &r.settings);
                tokio::runtime::Handle::current().block_on(async {
                    let jobs = sources.iter().map(|source| async move {
                        remote
                            .evaluate(
                                &kevo_dispatch::Request {
                                    task: task.name(),
                                    task_hash: task.content_hash(),
                                    source,
                                    sizes,
                                    timeout,
                                    settings,
                                },
                                &mut |line| eprintln!("kevo: {line}"),
                            )
                            .await
                    });
                    futures::future::join_all(jobs)
                        .await
                        .into_iter()
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .map_err(|e| EvolveError::Dispatch(e.to_string())),
        }
    }

    /// One evaluation; an error only when the queue cannot be reached
    /// (a failing candidate is an outcome, never an error).
    fn evaluate(
        &mut self,
        task: &Task,
        source: &str,
        sizes: &[kevo_tasks::Size],
        timeout: Duration,
    ) -> Result<Evaluation, EvolveError> {
        match self {
            Evaluator::Local(w) => Ok(tokio::task::block_in_place(|| {
                w[0].evaluate(task.name(), source, sizes, timeout)
            })),
            Evaluator::Remote(_) => {
                let mut one = self.evaluate_many(task, &[source.to_string()], sizes, timeout)?;
                Ok(one.pop().expect("one source, one evaluation"))
            }
        }
    }
}

/// What a checkpoint needs beyond the store's own columns.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct StrategyState {
    history: Vec<HistoryEntry>,
    /// When the last proposal produced no evaluable source (no code,
    /// rejected edits), the reason shown to the proposer next time.
    previous_failure: Option<String>,
    seed_wall_s: f64,
    best_iteration: u32,
    /// The strategy's whole state ([`Strategy::state`]); runs checkpointed
    /// before strategies stored it are (1+1) runs rebuilt from the
    /// checkpoint's incumbent and previous candidate.
    #[serde(default)]
    search: Option<serde_json::Value>,
    /// Re-measurement spent on promotions so far.
    #[serde(default)]
    remeasure: RemeasureSpend,
    /// The validation gate's baseline and tally (`--validate`).
    #[serde(default)]
    validation: ValidationState,
    /// The prompt variants and their sampling (`--meta-prompter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prompts: Option<kevo_proposer::prompt::meta::PromptArchive>,
}

/// The validation gate so far: the seed's times at the validation sizes
/// (what a candidate may be at most `max_slowdown` times) and what the
/// gate spent and rejected.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ValidationState {
    /// The seed's median seconds at each validation size, by label.
    pub seed_times: Vec<(String, f64)>,
    /// The seed's whole evaluation time there (the gate's timeout is
    /// derived from it).
    pub seed_wall_s: f64,
    /// Candidates evaluated by the gate, and those it rejected.
    pub checked: u32,
    pub rejected: u32,
    pub device_s: f64,
    pub wall_s: f64,
}

impl StrategyState {
    /// The checkpoint's strategy state. Plain data of numbers and strings:
    /// serialising it cannot fail.
    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The strategy as a run's checkpoint stored it (`strategy` is the run's
/// stored strategy name), for `kevo show`; None for a run checkpointed
/// before strategies stored their state.
pub fn stored_strategy(
    strategy: &str,
    checkpoint: &kevo_store::StoredCheckpoint,
) -> Result<Option<Box<dyn Strategy>>, EvolveError> {
    let state: StrategyState = match &checkpoint.strategy_state {
        Some(v) => {
            serde_json::from_value(v.clone()).map_err(|e| kevo_strategy::StrategyError::State {
                name: strategy.to_string(),
                reason: e.to_string(),
            })?
        }
        None => return Ok(None),
    };
    Ok(match &state.search {
        Some(search) => Some(kevo_strategy::restore(strategy, search)?),
        None => None,
    })
}

/// Start a new run.
pub async fn start(
    options: EvolveOptions,
    env: &Environment,
    observer: &mut dyn Observer,
) -> Result<Summary, EvolveError> {
    let task = kevo_tasks::resolve(&options.task)?;
    if options.candidates_per_iteration == 0 {
        return Err(EvolveError::NoCandidatesPerIteration);
    }
    if options.is_external() {
        return Err(EvolveError::ExternalStart);
    }
    let mut session = Session::open(options, task, env, None).await?;
    observer.on(&Event::Created {
        run: session.run.0.clone(),
    });
    session.run_seed(observer).await?;
    session.run_loop(observer).await
}

/// Continue a run from its last completed step.
pub async fn resume(
    run: &str,
    env: &Environment,
    observer: &mut dyn Observer,
) -> Result<Summary, EvolveError> {
    let run_id = RunId(run.to_string());
    let info = env.store.run(&run_id).await?;
    let options = stored_options(&info)?;
    if options.is_external() {
        return Err(EvolveError::ExternalRun {
            run: run.to_string(),
        });
    }
    let task = kevo_tasks::resolve(&options.task)?;
    // A run scores one problem: a task folder edited since the run began is
    // another problem. (A built-in task's hash also covers kevo's own task
    // code, which a kevo upgrade may change without changing the problem;
    // its runs resume as before.)
    if let Some(started) = info.config["provenance"]["task"]["content_hash"].as_str()
        && task.folder().is_some()
        && started != task.content_hash()
    {
        return Err(EvolveError::Resume {
            run: run.to_string(),
            reason: format!(
                "its task `{}` is version {started}, but `{}` now defines version {}: the \
                 problem changed since the run began; start a new run",
                task.name(),
                options.task,
                task.content_hash()
            ),
        });
    }
    let (_, checkpoint) = env.store.resume_run(&run_id).await?;
    let mut session = Session::open(options, task, env, Some(run_id)).await?;
    match checkpoint {
        None => session.run_seed(observer).await?,
        Some(cp) => session.restore(cp).await?,
    }
    session.run_loop(observer).await
}

/// The options a run was started with, as stored.
pub fn stored_options(info: &kevo_store::RunInfo) -> Result<EvolveOptions, EvolveError> {
    serde_json::from_value(info.config.clone()).map_err(|e| EvolveError::Resume {
        run: info.id.0.clone(),
        reason: format!("its stored settings are unreadable: {e}"),
    })
}

struct Session<'e> {
    options: EvolveOptions,
    task: &'static Task,
    /// The run's sizes, resolved once from the task and the size set.
    plan: kevo_tasks::SizePlan,
    env: &'e Environment,
    run: RunId,
    dir: RunDir,
    worker: Evaluator,
    dialect: Dialect,
    provider: Arc<dyn Provider>,
    /// The batch endpoint of a `batch:` model.
    batch: Option<Arc<kevo_proposer::BatchProvider>>,
    accounting: Accounting,
    prompts: PromptBuilder<'static>,
    /// Set once the seed is recorded (its id is the strategy's start).
    strategy: Option<Box<dyn Strategy>>,
    /// The run's candidates by the SHA-256 of their normalised source
    /// (the first of each), for duplicate detection.
    normalised: HashMap<String, i64>,
    /// What the seed uses, against which candidates' algorithmic
    /// structure is placed (set with the seed).
    seed_features: Option<Features>,
    state: StrategyState,
    /// Sources and in-distribution evaluations by candidate id.
    sources: HashMap<i64, String>,
    evaluations: HashMap<i64, Evaluation>,
    /// Profile summaries of incumbents (`--profile`), by candidate.
    profiles: HashMap<i64, String>,
    /// Why profiling stopped (no CUDA, no ncu, ncu failed): said once.
    profiling_off: Option<String>,
    /// Wall seconds spent profiling: the profiles', never a score's.
    profiling_s: f64,
    /// The performance analyst (`--analyst`).
    analyst: Option<Arc<dyn Provider>>,
    /// Its recommendations, by the candidate it analysed.
    analyses: HashMap<i64, String>,
    /// Its failures in a row (see [`ANALYST_GIVE_UP`]).
    analyst_failures: u32,
    /// The meta-prompter (`--meta-prompter`).
    meta_prompter: Option<Arc<dyn Provider>>,
    /// Meta-prompter answers stored after the checkpoint a resumed run
    /// started from (None: the call failed): used in order instead of
    /// asking again.
    meta_answers: std::collections::VecDeque<Option<String>>,
    /// Evaluations of this iteration's sources made at once, by source
    /// SHA-256 ([`Session::prefetch`]).
    prefetched: HashMap<String, Evaluation>,
    /// A failed meta-prompter call was reported (once per session).
    meta_failed_said: bool,
    /// Events raised while building a prompt, published with the next
    /// iteration's.
    pending_events: Vec<Event>,
    /// The last completed iteration.
    iteration: u32,
    /// Wall time spent evaluating in this session (candidates,
    /// re-measurements, held-out): the device's busy share of the wall.
    evaluating: Duration,
    /// Prompts whose calls are out (with `--concurrency` above 1), and
    /// of those the ones whose answers arrived and wait to be evaluated.
    in_flight: u32,
    arrived: Arc<std::sync::atomic::AtomicU32>,
    spent_before: Spent,
    started: Instant,
    timeout: Duration,
    resumed_from: Option<u32>,
    /// The pending proposal (ask/tell, batch) the iteration being
    /// recorded answers: marked answered in its transaction.
    answering: Option<ProposalId>,
    /// Writes the run's heartbeat while this session lives.
    heartbeat: tokio::task::AbortHandle,
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

/// Tasks aborted when dropped: a model call must not outlive the session
/// that sent it (a `cmd:` proposer's processes end with its future).
struct AbortOnDrop<T>(Vec<tokio::task::JoinHandle<T>>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

/// Write `run`'s heartbeat now and every few seconds until aborted, so
/// `kevo runs` can tell a live run from one whose process died.
fn start_heartbeat(store: &kevo_store::Store, run: &RunId) -> tokio::task::AbortHandle {
    let store = store.clone();
    let run = run.clone();
    tokio::spawn(async move {
        let every = Duration::from_secs(kevo_store::HEARTBEAT_INTERVAL_S as u64);
        loop {
            let _ = store.heartbeat(&run).await;
            tokio::time::sleep(every).await;
        }
    })
    .abort_handle()
}

/// The run's stored configuration: the options as given, and what was in
/// force when it started (the worker's sandbox layers), so a result can be
/// judged later by how it was obtained.
fn run_config(
    options: &EvolveOptions,
    task: &Task,
    worker: &Evaluator,
) -> Result<serde_json::Value, EvolveError> {
    let mut config = serde_json::to_value(options).map_err(|source| EvolveError::Serialize {
        what: "the run's settings",
        source,
    })?;
    if let Some(map) = config.as_object_mut() {
        map.insert(
            "sandbox_in_force".into(),
            serde_json::to_value(worker.sandbox()).unwrap_or_default(),
        );
        // What the result depends on besides the settings: the build, the
        // task's definition, the device and driver, the ceilings with their
        // source, and the seeds of the random choices.
        map.insert(
            "provenance".into(),
            serde_json::json!({
                "kevo": crate::VERSION,
                "task": {"name": task.name(), "content_hash": task.content_hash()},
                "device": worker.device(),
                "ceilings": worker.ceilings(),
                // Every local worker's device and ceilings (several with
                // --devices; of different models with --mixed-devices).
                "workers": worker.devices(),
                "seeds": {
                    "inputs_secret": options.inputs_secret,
                    "task_seed": task.default_seed(),
                    "ensemble": options.rng_seed,
                    "strategy": match &options.strategy {
                        kevo_strategy::StrategyConfig::OnePlusOne => None,
                        kevo_strategy::StrategyConfig::MapElites(c) => Some(c.rng_seed),
                        kevo_strategy::StrategyConfig::Islands(c) => Some(c.rng_seed),
                    },
                },
            }),
        );
    }
    Ok(config)
}

impl<'e> Session<'e> {
    async fn open(
        mut options: EvolveOptions,
        task: &'static Task,
        env: &'e Environment,
        existing: Option<RunId>,
    ) -> Result<Session<'e>, EvolveError> {
        // A run's inputs come from a secret drawn when it is created and
        // stored with its settings; a run stored without one (made before
        // inputs were secret) draws a fresh one each time it is opened.
        if options.inputs_secret.is_none() {
            options.inputs_secret = Some(
                kevo_eval::InputSecret::from_env_or_draw()
                    .map_err(|e| EvolveError::InputsSecret(e.to_string()))?,
            );
        }
        if options.validation.enabled && task.sizes(options.sizes).validation.is_empty() {
            return Err(EvolveError::NoValidationSizes {
                task: task.name().to_string(),
                set: options.sizes.to_string(),
            });
        }
        let worker = match &options.nats {
            None => Evaluator::local(&options, env)?,
            Some(nats) => Evaluator::remote(&options, nats).await?,
        };
        let device = worker.device().clone();
        let dialect = device.dialect;
        let provider_config = match &options.llm_config {
            Some(p) => ProviderConfig::load(p)?,
            None => ProviderConfig::default(),
        }
        .with_overrides(options.llm_timeout_s, options.llm_retries)?
        .with_model_choice(options.rng_seed, options.model_choice);
        let accounting = match options.max_cost_usd {
            Some(usd) => Accounting::with_budget(usd),
            None => Accounting::new(),
        };
        accounting.set_accept_unknown_cost(options.accept_unknown_cost);
        let mut provider =
            kevo_proposer::build(&options.llm_spec(), &provider_config, &accounting)?;
        if let Some(path) = &options.record {
            provider = Arc::new(kevo_proposer::Recording::new(provider, path)?);
        }
        if options.model_choice.is_bandit() && provider.ensemble_state().is_none() {
            return Err(EvolveError::BanditNeedsEnsemble {
                choice: options.model_choice.to_string(),
                model: provider.label(),
            });
        }
        let batch = kevo_proposer::build_batch(&options.llm_spec(), &provider_config, &accounting)?;
        // The analyst shares the accounting: its calls count in the budget
        // and stop at it like the generator's.
        let analyst = match &options.analyst {
            Some(spec) => {
                let mut analyst = kevo_proposer::build(spec, &provider_config, &accounting)?;
                if let Some(path) = options.analyst_record() {
                    analyst = Arc::new(kevo_proposer::Recording::new(analyst, &path)?);
                }
                Some(analyst)
            }
            None => None,
        };
        let meta_prompter = match &options.meta_prompt {
            Some(meta) => {
                if provider.label() == "external" || batch.is_some() {
                    return Err(EvolveError::MetaPrompter(
                        "a run whose answers come from outside (external, batch:) is not meta-prompted: its prompts leave before their variant's outcome is known".into(),
                    ));
                }
                if meta.every == 0 {
                    return Err(EvolveError::MetaPrompter(
                        "--meta-every must be at least 1".into(),
                    ));
                }
                let mut m = kevo_proposer::build(&meta.prompter, &provider_config, &accounting)?;
                if let Some(path) = options.meta_record() {
                    m = Arc::new(kevo_proposer::Recording::new(m, &path)?);
                }
                Some(m)
            }
            None => None,
        };
        let brief = DeviceBrief {
            name: device.name.clone(),
            ceilings: worker.ceilings().clone(),
            info: Some(device.clone()),
        };
        let mut prompts = PromptBuilder::new(task, dialect, options.sizes, brief)?
            .with_edit_mode(options.edit_mode)
            .with_fast_math(options.fast_math)
            .with_history_len(options.prompt.history_len)
            .with_stagnation(options.prompt.stagnation)
            .with_tuning(options.tune.best_of)
            .with_reference(options.reference_kernel.clone());
        if let Some(dir) = &options.prompt.templates {
            prompts = prompts.with_templates(kevo_proposer::Templates::with_overrides(dir)?);
        }
        if let Some(tokens) = options.context_budget_tokens {
            prompts = prompts.with_context_budget(tokens);
        }
        let run = match existing {
            Some(run) => run,
            None => {
                env.store
                    .create_run(&NewRun {
                        task: task.name().to_string(),
                        backend: device.backend.clone(),
                        device: device.name.clone(),
                        size_set: options.sizes,
                        strategy: options.strategy.stored_name().into(),
                        config: run_config(&options, task, &worker)?,
                        rng_state: provider
                            .ensemble_state()
                            .map(|s| serde_json::to_value(s).unwrap_or_default()),
                    })
                    .await?
            }
        };
        let dir = RunDir::create(&env.workspace, &run, dialect.extension())?;
        let heartbeat = start_heartbeat(&env.store, &run);
        Ok(Session {
            plan: task.sizes(options.sizes),
            options,
            task,
            env,
            run,
            dir,
            worker,
            dialect,
            provider,
            batch,
            accounting,
            prompts,
            strategy: None,
            seed_features: None,
            normalised: HashMap::new(),
            state: StrategyState::default(),
            sources: HashMap::new(),
            evaluations: HashMap::new(),
            profiles: HashMap::new(),
            profiling_off: None,
            profiling_s: 0.0,
            analyst,
            analyses: HashMap::new(),
            analyst_failures: 0,
            meta_prompter,
            meta_answers: Default::default(),
            meta_failed_said: false,
            prefetched: HashMap::new(),
            pending_events: Vec::new(),
            iteration: 0,
            evaluating: Duration::ZERO,
            in_flight: 0,
            arrived: Default::default(),
            spent_before: Spent::default(),
            started: Instant::now(),
            timeout: Duration::from_secs(60),
            resumed_from: None,
            answering: None,
            heartbeat,
        })
    }

    fn evaluate(
        &mut self,
        source: &str,
        sizes: &[kevo_tasks::Size],
        timeout: Duration,
    ) -> Result<Evaluation, EvolveError> {
        let started = Instant::now();
        let e = self.worker.evaluate(self.task, source, sizes, timeout);
        self.evaluating += started.elapsed();
        e
    }

    fn spent(&self) -> Spent {
        let t = self.accounting.totals().all;
        Spent {
            input_tokens: self.spent_before.input_tokens + t.usage.input_tokens,
            output_tokens: self.spent_before.output_tokens + t.usage.output_tokens,
            reasoning_tokens: self.spent_before.reasoning_tokens
                + t.usage.reasoning_tokens.unwrap_or(0),
            cost_usd: self.spent_before.cost_usd + t.cost_usd,
            wall_s: self.spent_before.wall_s + self.started.elapsed().as_secs_f64(),
        }
    }

    fn rng_state(&self) -> Option<serde_json::Value> {
        self.provider
            .ensemble_state()
            .and_then(|s| serde_json::to_value(s).ok())
    }

    /// Evaluate and record the seed (iteration 0). A seed that is not
    /// correct aborts the run with the reason.
    async fn run_seed(&mut self, observer: &mut dyn Observer) -> Result<(), EvolveError> {
        let source = match &self.options.start_source {
            Some(s) => s.clone(),
            None => self
                .task
                .seed(self.dialect)
                .ok_or_else(|| EvolveError::NoSeed {
                    task: self.task.name().to_string(),
                    dialect: self.dialect,
                })?
                .to_string(),
        };
        let sizes = self.plan.in_distribution.clone();
        // The seed gets a generous limit; candidates get one derived from it.
        let seed_limit =
            Duration::from_secs_f64(self.options.timeout_s.unwrap_or(600.0).max(600.0));
        let evaluation = self.evaluate(&source, &sizes, seed_limit)?;
        self.dir.write_seed(&source)?;
        self.dir.write_result(0, &evaluation)?;
        let Some(score) = evaluation.outcome.score() else {
            return Err(self.seed_failed(evaluation.outcome.summary()).await);
        };
        self.state.seed_wall_s = evaluation.wall.total_s;
        self.timeout = self.candidate_timeout();
        if self.meta_prompter.is_some() {
            let start = self.prompts.default_guidance()?;
            self.state.prompts = Some(kevo_proposer::prompt::meta::PromptArchive::new(
                &start,
                self.options.rng_seed,
            ));
        }
        let mut validations = Vec::new();
        if self.options.validation.enabled {
            let sizes = self.plan.validation.clone();
            let v = self.evaluate(&source, &sizes, seed_limit)?;
            if !v.outcome.is_correct() {
                let reason = format!(
                    "at its validation sizes, which --validate needs it to pass: {}",
                    v.outcome.summary()
                );
                return Err(self.seed_failed(reason).await);
            }
            let gate = &mut self.state.validation;
            gate.seed_times = v
                .sizes
                .iter()
                .map(|s| (s.label.clone(), s.time.median_s))
                .collect();
            gate.seed_wall_s = v.wall.total_s;
            validations.push(NewValidation {
                candidate: CandidateRef::Proposal(0),
                passed: true,
                reason: "the seed: the baseline at the validation sizes".into(),
                device_s: v.wall.device_s,
                wall_s: v.wall.total_s,
                evaluation: v,
            });
        }
        let features = Features::of(&source, self.dialect);
        let analysis = kevo_descriptors::analyse(&source, self.dialect, &features);
        let seed_cell = analysis.descriptors;
        self.seed_features = Some(features);
        let proposed = [Proposed {
            llm_calls: Vec::new(),
            candidate: Some(NewCandidate {
                source: source.clone(),
                parents: Vec::new(),
                island: None,
                cell: Some(seed_cell.to_string()),
                descriptors: serde_json::to_value(&analysis).ok(),
                provider: Some("seed".into()),
                model: None,
            }),
            evaluation: Some(NewEvaluation::from(evaluation.clone())),
        }];
        let (rng_state, spent) = (self.rng_state(), self.spent());
        let state = &mut self.state;
        let config = &self.options.strategy;
        let mut strategy = None;
        let env = self.env;
        let ids = env
            .store
            .record_iteration_with(&self.run, 0, &proposed, |ids| {
                let id = ids[0].expect("the seed is a candidate");
                state
                    .history
                    .push(evaluated_entry(0, id.0, &evaluation.outcome, true));
                // The seed has a score, the one thing starting can need.
                let started = config.start(&Scored {
                    id: id.0,
                    score: Some(score),
                    outcome: StepOutcome::Correct,
                    descriptors: Some(seed_cell),
                    duplicate_of: None,
                });
                state.search = started.as_ref().ok().map(|s| s.state());
                strategy = Some(started);
                Decided {
                    decisions: vec![NewDecision {
                        promoted: true,
                        incumbent: Some(CandidateRef::Stored(id)),
                        island: None,
                        cell: None,
                        reason: "the seed is the first incumbent".into(),
                    }],
                    checkpoint: Checkpoint {
                        incumbent: Some(CandidateRef::Stored(id)),
                        previous: Some(CandidateRef::Stored(id)),
                        rng_state,
                        strategy_state: Some(state.to_json()),
                        spent,
                    },
                    remeasurements: Vec::new(),
                    validations,
                    answers: None,
                }
            })
            .await?;
        let id = ids[0].candidate.map(|c| c.0).unwrap_or_default();
        self.normalised.insert(normalised_sha(&source), id);
        self.sources.insert(id, source.clone());
        self.evaluations.insert(id, evaluation.clone());
        self.strategy = Some(strategy.expect("the seed iteration decided")?);
        self.dir.write_best(&source, &evaluation)?;
        self.write_history()?;
        observer.on(&Event::Started {
            run: self.run.0.clone(),
            task: self.task.name().into(),
            device: self.worker.device().name.clone(),
            backend: self.worker.device().backend.clone(),
            resumed_from: None,
            iterations: self.options.iterations,
            sandbox: self.worker.sandbox().summary(),
        });
        observer.on(&Event::Seed {
            score,
            wall_s: evaluation.wall.total_s,
        });
        Ok(())
    }

    /// The run marked failed because its seed is not correct (`reason`),
    /// and the error that says so (or the store's, if marking failed).
    async fn seed_failed(&self, reason: String) -> EvolveError {
        if let Err(e) = self
            .env
            .store
            .mark_failed(&self.run, &format!("seed failed: {reason}"))
            .await
        {
            return e.into();
        }
        EvolveError::SeedFailed {
            task: self.task.name().to_string(),
            reason,
        }
    }

    fn candidate_timeout(&self) -> Duration {
        match self.options.timeout_s {
            Some(s) => Duration::from_secs_f64(s),
            None => kevo_worker::timeout_from_seed(
                self.state.seed_wall_s,
                10.0,
                Duration::from_secs(30),
            ),
        }
    }

    async fn load(&mut self, id: CandidateId) -> Result<(), EvolveError> {
        if self.sources.contains_key(&id.0) {
            return Ok(());
        }
        let source = self.env.store.candidate_source(id).await?;
        let evaluation = self
            .env
            .store
            .evaluations_of(id)
            .await?
            .into_iter()
            .find(|e| e.kind == kevo_store::EvaluationKind::InDistribution)
            .ok_or_else(|| EvolveError::Resume {
                run: self.run.0.clone(),
                reason: format!("candidate {} has no stored evaluation", id.0),
            })?
            .evaluation()
            .map_err(|source| EvolveError::StoredEvaluation {
                candidate: id.0,
                source,
            })?;
        self.sources.insert(id.0, source);
        self.evaluations.insert(id.0, evaluation);
        Ok(())
    }

    /// Continue from a stored checkpoint: strategy, history, spend, RNG
    /// state, and the proposer fast-forwarded past the calls already made.
    async fn restore(&mut self, cp: kevo_store::StoredCheckpoint) -> Result<(), EvolveError> {
        let run_name = self.run.0.clone();
        let bad = |reason: String| EvolveError::Resume {
            run: run_name.clone(),
            reason,
        };
        let state: StrategyState = cp
            .strategy_state
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| bad(format!("unreadable strategy state: {e}")))?
            .unwrap_or_default();
        let incumbent = cp
            .incumbent
            .ok_or_else(|| bad("the checkpoint has no incumbent".into()))?;
        let previous = cp.previous.unwrap_or(incumbent);
        let history = self.env.store.history(&self.run).await?;
        let seed = history
            .iter()
            .find(|h| h.iteration == 0)
            .and_then(|h| h.candidate_id)
            .ok_or_else(|| bad("the seed was never recorded".into()))?;
        for id in [seed, incumbent, previous] {
            self.load(id).await?;
        }
        self.seed_features = Some(Features::of(&self.sources[&seed.0], self.dialect));
        for id in history.iter().filter_map(|h| h.candidate_id) {
            let source = self.env.store.candidate_source(id).await?;
            self.normalised
                .entry(normalised_sha(&source))
                .or_insert(id.0);
        }
        self.strategy = Some(match &state.search {
            Some(search) => kevo_strategy::restore(self.options.strategy.stored_name(), search)?,
            None => {
                let score_of = |s: &Self, id: CandidateId| s.evaluations[&id.0].outcome.score();
                let seed_score = score_of(self, seed)
                    .ok_or_else(|| bad("the stored seed has no score".into()))?;
                let incumbent_score = score_of(self, incumbent)
                    .ok_or_else(|| bad("the stored incumbent has no score".into()))?;
                Box::new(OnePlusOne::restore(
                    Elite {
                        id: seed.0,
                        score: seed_score,
                    },
                    Elite {
                        id: incumbent.0,
                        score: incumbent_score,
                    },
                    previous.0,
                    cp.iteration,
                ))
            }
        });
        self.state = state;
        self.timeout = self.candidate_timeout();
        self.iteration = cp.iteration;
        self.spent_before = cp.spent;
        self.resumed_from = Some(cp.iteration);
        if let Some(rng) = &cp.rng_state {
            let s: EnsembleState = serde_json::from_value(rng.clone())
                .map_err(|e| bad(format!("unreadable RNG state: {e}")))?;
            self.provider.restore_ensemble_state(&s)?;
        }
        // Every call that ended, failed ones included (a recording holds
        // them too); not the abandoned ones, which never did.
        let ended: Vec<kevo_store::StoredLlmCall> = self
            .env
            .store
            .llm_calls(&self.run)
            .await?
            .into_iter()
            .filter(|c| !is_abandoned(c))
            .collect();
        let served = |purpose: &str| -> Vec<(String, ChatRequest)> {
            ended
                .iter()
                .filter(|c| match purpose {
                    "analysis" | META_PURPOSE => c.call.purpose == purpose,
                    _ => c.call.purpose != "analysis" && c.call.purpose != META_PURPOSE,
                })
                .map(|c| {
                    (
                        c.call.provider.clone(),
                        ChatRequest::new(c.call.prompt_system.clone(), c.call.prompt_user.clone()),
                    )
                })
                .collect()
        };
        self.provider.fast_forward(&served("propose"))?;
        if let Some(analyst) = &self.analyst {
            analyst.fast_forward(&served("analysis"))?;
        }
        if let Some(prompter) = &self.meta_prompter {
            prompter.fast_forward(&served(META_PURPOSE))?;
        }
        // Meta-prompter calls stored after the checkpoint's archive was
        // written are answers paid for and not applied: the resumed run
        // applies them in order instead of asking again.
        let applied = self.state.prompts.as_ref().map_or(0, |a| a.meta_calls) as usize;
        self.meta_answers = ended
            .iter()
            .filter(|c| c.call.purpose == META_PURPOSE)
            .skip(applied)
            .map(|c| c.call.response.clone())
            .collect();
        for c in ended
            .iter()
            .filter(|c| c.call.purpose == "analysis" || c.call.purpose == META_PURPOSE)
        {
            // Recommendations already paid for are not asked again.
            if let (Some(id), Some(answer)) = (c.candidate_id, &c.call.response)
                && let Some(r) = kevo_proposer::recommendation(answer)
            {
                self.analyses.insert(id.0, r);
            }
            // Made after the checkpoint was written (stored under the
            // iteration recorded last when they were made): not in its
            // spent figures.
            if c.iteration >= cp.iteration {
                self.spent_before.input_tokens += c.call.input_tokens.unwrap_or(0);
                self.spent_before.output_tokens += c.call.output_tokens.unwrap_or(0);
                self.spent_before.reasoning_tokens += c.call.reasoning_tokens.unwrap_or(0);
                self.spent_before.cost_usd += c.call.cost_usd.unwrap_or(0.0);
            }
        }
        Ok(())
    }

    fn write_history(&self) -> Result<(), EvolveError> {
        self.dir.write_history(&self.state.history)?;
        Ok(())
    }

    /// Why the loop stops before iteration `next`, if it does.
    fn stop_reason(&self, next: u32) -> Option<String> {
        let strategy = self.strategy.as_ref()?;
        if next > self.options.iterations {
            return Some(format!("{} iterations done", self.options.iterations));
        }
        if let Some(target) = self.options.target_score
            && strategy.best().score >= target
        {
            return Some(format!("target score {target} reached"));
        }
        let spent = self.spent();
        if let Some(limit) = self.options.max_wall_s
            && spent.wall_s >= limit
        {
            return Some(format!("wall-time limit of {limit:.0} s reached"));
        }
        if let Some(cap) = self.options.max_cost_usd
            && spent.cost_usd >= cap
        {
            return Some(format!("cost cap of ${cap:.2} reached"));
        }
        None
    }

    async fn run_loop(&mut self, observer: &mut dyn Observer) -> Result<Summary, EvolveError> {
        if self.resumed_from.is_some() {
            observer.on(&Event::Started {
                run: self.run.0.clone(),
                task: self.task.name().into(),
                device: self.worker.device().name.clone(),
                backend: self.worker.device().backend.clone(),
                resumed_from: self.resumed_from,
                iterations: self.options.iterations,
                sandbox: self.worker.sandbox().summary(),
            });
        }
        let stopped = if let Some(batch) = self.batch.clone() {
            self.run_batched(batch, observer).await
        } else if self.options.concurrency > 1 {
            self.run_concurrently(observer).await
        } else {
            self.run_sequentially(observer).await
        };
        let stop_reason = match stopped {
            Ok(reason) => reason,
            Err(e) => {
                let _ = self
                    .env
                    .store
                    .mark_interrupted(&self.run, &e.to_string())
                    .await;
                return Err(e);
            }
        };
        self.finish(stop_reason, observer).await
    }

    /// The end of a run: the final pick among the best few, the held-out
    /// gate, the summary stored and the run marked finished.
    async fn finish(
        &mut self,
        stop_reason: String,
        observer: &mut dyn Observer,
    ) -> Result<Summary, EvolveError> {
        let final_pick = self.final_pick().await?;
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let (seed, mut best) = (strategy.seed(), strategy.best());
        let mut speedup = strategy.speedup();
        let mut best_iteration = self.state.best_iteration;
        if let Some(pick) = &final_pick
            && let Some(w) = pick.candidates.iter().find(|e| e.candidate == pick.winner)
        {
            best = Elite {
                id: w.candidate,
                score: w.remeasured.unwrap_or(best.score),
            };
            best_iteration = w.iteration;
            speedup = pick.speedup.unwrap_or(speedup);
        }
        if final_pick.as_ref().is_some_and(FinalPick::changed) {
            self.dir
                .write_best(&self.sources[&best.id], &self.evaluations[&best.id])?;
        }
        let held_out = self.held_out(best.id).await?;
        observer.on(&Event::HeldOut(held_out.clone()));
        let safety = self.sanitize_winner(best.id);
        let suspicious = self.suspicious().await?;
        // Calls of earlier sessions (a resume, ask/tell) count too: from
        // the store, which holds every answered call.
        let answered: Vec<_> = self
            .env
            .store
            .llm_calls(&self.run)
            .await?
            .into_iter()
            .filter(|c| c.call.error.is_none() && c.call.response.is_some())
            .collect();
        let totals = self.accounting.totals().all;
        let unknown_cost_calls = totals.unpriced_calls.max(
            answered
                .iter()
                .filter(|c| c.call.cost_usd.is_none())
                .count() as u64,
        );
        let unknown_usage_calls = totals.usage_unknown_calls.max(
            answered
                .iter()
                .filter(|c| c.call.input_tokens.is_none())
                .count() as u64,
        );
        let summary = Summary {
            run: self.run.0.clone(),
            task: self.task.name().into(),
            device: self.worker.device().name.clone(),
            backend: self.worker.device().backend.clone(),
            iterations: self.iteration,
            stop_reason,
            seed_score: seed.score,
            best_score: best.score,
            speedup,
            best_candidate: best.id,
            best_iteration,
            held_out: Some(held_out),
            safety,
            spent: self.spent(),
            suspicious,
            unknown_cost_calls,
            unknown_usage_calls,
            promotion: self.options.promotion.name().into(),
            remeasure: self.state.remeasure,
            final_pick,
            validation: self
                .options
                .validation
                .enabled
                .then(|| self.state.validation.clone()),
        };
        let value = serde_json::to_value(&summary).map_err(|source| EvolveError::Serialize {
            what: "the run's summary",
            source,
        })?;
        self.dir.write_summary(&value)?;
        self.env.store.mark_finished(&self.run, &value).await?;
        // Prompts handed out and not answered (ask/tell, a batch the
        // budget stopped) are given up.
        let pending: Vec<ProposalId> = self
            .env
            .store
            .proposals(&self.run)
            .await?
            .into_iter()
            .filter(|p| p.status == kevo_store::ProposalStatus::Pending)
            .map(|p| p.id)
            .collect();
        self.env
            .store
            .withdraw_proposals(
                &self.run,
                &pending,
                "the run finished before it was answered",
            )
            .await?;
        observer.on(&Event::Finished(Box::new(summary.clone())));
        Ok(summary)
    }

    /// The run's candidates that ran faster than the hardware allows:
    /// "iteration N candidate C at size S: reason". Read from the history,
    /// so candidates of sessions before a resume are listed too.
    async fn suspicious(&mut self) -> Result<Vec<String>, EvolveError> {
        let entries: Vec<(u32, i64)> = self
            .state
            .history
            .iter()
            .filter(|h| h.outcome == StepOutcome::Suspicious)
            .filter_map(|h| h.candidate.map(|c| (h.iteration, c)))
            .collect();
        let mut lines = Vec::with_capacity(entries.len());
        for (iteration, candidate) in entries {
            self.load(CandidateId(candidate)).await?;
            if let Outcome::Suspicious { size, reason, .. } = &self.evaluations[&candidate].outcome
            {
                lines.push(format!(
                    "iteration {iteration} candidate {candidate} at size {size}: {reason}"
                ));
            }
        }
        Ok(lines)
    }

    /// What the proposer is shown: the parent's source and evaluation,
    /// the previous attempt from it (or why the last proposal gave
    /// nothing to evaluate), and whether the parent is still the seed.
    /// Every candidate the selection names is loaded first.
    async fn prompt_context(
        &mut self,
        selection: &Selection,
    ) -> Result<PromptContext, EvolveError> {
        let named = [selection.parent]
            .into_iter()
            .chain(selection.previous)
            .chain(selection.elites.iter().copied())
            .chain(selection.inspirations.iter().copied());
        for id in named.collect::<Vec<_>>() {
            self.load(CandidateId(id)).await?;
        }
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let (seed, best) = (strategy.seed().id, strategy.best());
        let (best, best_score) = (best.id, best.score);
        let incumbent = selection.parent;
        let incumbent_profile = self.profile(incumbent);
        let role = if incumbent == seed {
            "seed"
        } else if incumbent == best {
            "incumbent"
        } else {
            "parent"
        };
        let analysis = self
            .analysis(incumbent, incumbent_profile.as_deref(), role)
            .await?;
        let incumbent_source = self.sources[&incumbent].clone();
        let incumbent_evaluation = self.evaluations[&incumbent].clone();
        let mut previous_profile = None;
        let previous = match &self.state.previous_failure {
            // The last proposal gave nothing to evaluate: tell the proposer
            // why, against the source it was asked to improve.
            Some(reason) => Some((
                incumbent_source.clone(),
                Evaluation::without_sizes(
                    &incumbent_evaluation.task,
                    &incumbent_evaluation.device,
                    &incumbent_evaluation.backend,
                    Outcome::NoCode {
                        reason: reason.clone(),
                    },
                    WallTimes::default(),
                ),
            )),
            // Before the first attempt from this parent it is the only
            // baseline.
            None => selection.previous.map(|p| {
                // With --profile-every, a correct attempt is profiled when
                // it is first shown, so the proposer sees why it was slow.
                if self.options.profile_every
                    && p != incumbent
                    && self.evaluations[&p].outcome.score().is_some()
                {
                    previous_profile = self.profile(p);
                }
                (self.sources[&p].clone(), self.evaluations[&p].clone())
            }),
        };
        let shown = |ids: &[i64]| -> Vec<(String, Evaluation)> {
            ids.iter()
                .map(|id| (self.sources[id].clone(), self.evaluations[id].clone()))
                .collect()
        };
        let previous_rejected = self.state.previous_failure.is_none()
            && selection.previous.is_some_and(|p| {
                self.state.history.iter().any(|h| {
                    h.candidate == Some(p) && h.outcome == StepOutcome::RejectedByValidation
                })
            });
        Ok(PromptContext {
            previous_rejected,
            incumbent,
            incumbent_profile,
            previous_profile,
            analysis,
            incumbent_source,
            incumbent_evaluation,
            previous,
            incumbent_is_seed: incumbent == seed,
            incumbent_is_best: incumbent == best,
            incumbent_score: (incumbent == best).then_some(best_score),
            elites: shown(&selection.elites),
            inspirations: shown(&selection.inspirations),
            prompt_variant: None,
        })
    }

    /// One prompt at a time until a stop rule holds; the reason.
    async fn run_sequentially(
        &mut self,
        observer: &mut dyn Observer,
    ) -> Result<String, EvolveError> {
        loop {
            let next = self.iteration + 1;
            if let Some(reason) = self.stop_reason(next) {
                return Ok(reason);
            }
            match self.run_iteration(next, observer).await {
                Ok(()) => self.iteration = next,
                Err(EvolveError::Provider(e)) if e.is_budget_stop() => return Ok(e.to_string()),
                Err(e) => return Err(e),
            }
        }
    }

    /// The steady-state loop of `--concurrency K`: up to K prompts' calls
    /// in flight; a freed slot gets a prompt built from the archive as it
    /// is then; each answer is evaluated, decided and stored as the next
    /// iteration as soon as it arrives. Iterations are numbered in arrival
    /// order, so the store stays dense: a kill loses only the calls in
    /// flight, which the resumed run issues again. No call is issued past
    /// a budget; calls already out when a budget stops the run are waited
    /// for and recorded.
    async fn run_concurrently(
        &mut self,
        observer: &mut dyn Observer,
    ) -> Result<String, EvolveError> {
        let slots = self.options.concurrency.max(1);
        let mut flights: tokio::task::JoinSet<(u64, Calls)> = tokio::task::JoinSet::new();
        let mut waiting: HashMap<u64, (Selection, PromptContext, ChatRequest)> = HashMap::new();
        let mut next_flight = 0u64;
        let mut stop: Option<String> = None;
        let arrived = self.arrived.clone();
        loop {
            while stop.is_none() && self.in_flight < slots {
                let next = self.iteration + self.in_flight + 1;
                if let Some(reason) = self.stop_reason(next) {
                    stop = Some(reason);
                    break;
                }
                let (selection, context, request) = self.next_prompt(next).await?;
                let calls = self.issue(next, &request);
                let id = next_flight;
                next_flight += 1;
                let arrived = arrived.clone();
                flights.spawn(async move {
                    let calls = calls.await;
                    arrived.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    (id, calls)
                });
                waiting.insert(id, (selection, context, request));
                self.in_flight += 1;
            }
            let Some(joined) = flights.join_next().await else {
                break;
            };
            let (id, calls) = joined?;
            arrived.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            self.in_flight -= 1;
            let (selection, context, request) =
                waiting.remove(&id).expect("every flight is waited for");
            let completions = match calls {
                Ok(c) => c,
                Err(EvolveError::Provider(e)) if e.is_budget_stop() => {
                    stop.get_or_insert_with(|| e.to_string());
                    continue;
                }
                Err(e) => return Err(e),
            };
            let k = self.iteration + 1;
            self.dir.write_prompt(k, &request.system, &request.user)?;
            self.conclude(k, &request, &context, &selection, completions, observer)
                .await?;
            self.iteration = k;
        }
        Ok(stop.unwrap_or_else(|| format!("{} iterations done", self.options.iterations)))
    }

    /// One iteration in stages: prompt, model calls, extraction and
    /// evaluation, decision and storage, artifacts and event.
    async fn run_iteration(
        &mut self,
        k: u32,
        observer: &mut dyn Observer,
    ) -> Result<(), EvolveError> {
        let (selection, context, request) = self.next_prompt(k).await?;
        self.dir.write_prompt(k, &request.system, &request.user)?;
        let completions = self.issue(k, &request).await?;
        self.conclude(k, &request, &context, &selection, completions, observer)
            .await
    }

    /// Stage 1: the strategy's selection, its context and the request of
    /// proposal `k` (with `--meta-prompter`, after the meta-prompter's
    /// turn when one is due, with a sampled prompt variant).
    async fn next_prompt(
        &mut self,
        k: u32,
    ) -> Result<(Selection, PromptContext, ChatRequest), EvolveError> {
        self.meta_step(k).await?;
        let selection = self
            .strategy
            .as_deref_mut()
            .expect("seed evaluated")
            .select();
        let mut context = self.prompt_context(&selection).await?;
        context.prompt_variant = self.state.prompts.as_mut().map(|a| a.sample());
        let request = self.request(&context, &selection)?;
        Ok((selection, context, request))
    }

    /// The meta-prompter's turn before proposal `k`, every `every`
    /// proposals: it is shown the fittest variant's guidance, the archive,
    /// and the last `every` proposals with their variants and failures,
    /// and its edits make a new variant. A failed call leaves the archive
    /// as it is (said once); a budget stop is the generator's to report.
    /// The call is stored (purpose "meta-prompt"); after a resume, answers
    /// stored after the checkpoint are used instead of asking again.
    async fn meta_step(&mut self, k: u32) -> Result<(), EvolveError> {
        let (Some(meta), Some(prompter)) = (&self.options.meta_prompt, self.meta_prompter.clone())
        else {
            return Ok(());
        };
        let every = meta.every.max(1);
        if k <= 1 || !(k - 1).is_multiple_of(every) {
            return Ok(());
        }
        let Some(archive) = &self.state.prompts else {
            return Ok(());
        };
        if archive.meta_calls >= (k - 1) / every {
            return Ok(());
        }
        let parent = archive.best().id;
        let variant_of: HashMap<i64, u32> = archive
            .variants
            .iter()
            .flat_map(|v| v.candidates.iter().map(move |c| (*c, v.id)))
            .collect();
        let proposals: Vec<&HistoryEntry> = self
            .state
            .history
            .iter()
            .filter(|h| h.iteration > 0)
            .collect();
        let entries: Vec<HistoryEntry> = proposals
            [proposals.len().saturating_sub(every as usize)..]
            .iter()
            .map(|h| (*h).clone())
            .collect();
        let mut recent = Vec::with_capacity(entries.len());
        let mut failures_shown = 0;
        for e in entries.iter().rev() {
            let mut feedback = None;
            if let Some(c) = e.candidate
                && e.outcome != StepOutcome::Correct
                && failures_shown < META_FAILURES_SHOWN
            {
                self.load(CandidateId(c)).await?;
                feedback = self.prompts.meta_feedback(&self.evaluations[&c])?;
                failures_shown += usize::from(feedback.is_some());
            }
            recent.push(kevo_proposer::prompt::meta::MetaAttempt {
                line: kevo_proposer::history_line(e),
                variant: e.candidate.and_then(|c| variant_of.get(&c).copied()),
                feedback,
            });
        }
        recent.reverse();
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let archive = self.state.prompts.as_ref().expect("checked above");
        let request = self
            .prompts
            .meta_request(&kevo_proposer::prompt::meta::MetaContext {
                archive,
                parent,
                recent: &recent,
                seed_score: strategy.seed().score,
                best_score: strategy.best().score,
            })?;
        let answer = match self.meta_answers.pop_front() {
            Some(stored) => stored.ok_or_else(|| "the stored call had failed".to_string()),
            None => match self.ask_meta_prompter(&prompter, &request).await? {
                Some(answer) => answer,
                // A budget stop: no call was made, and the generator's
                // next call stops the run with the same reason.
                None => return Ok(()),
            },
        };
        let archive = self.state.prompts.as_mut().expect("checked above");
        let event = match answer {
            Ok(text) => {
                let (variant, rejected) = archive.add_edited(parent, k, &text).map_err(|e| {
                    EvolveError::MetaPrompter(format!("variant {parent} is unreadable: {e}"))
                })?;
                let new = variant.and_then(|v| archive.get(v));
                Event::MetaPrompt {
                    iteration: k,
                    parent,
                    variant,
                    applied: new.map(|v| v.edited.clone()).unwrap_or_default(),
                    rejected: rejected.iter().map(|r| r.to_string()).collect(),
                    diagnosis: new.map(|v| v.diagnosis.clone()).unwrap_or_default(),
                    failed: None,
                }
            }
            Err(reason) => {
                archive.add_failed();
                Event::MetaPrompt {
                    iteration: k,
                    parent,
                    variant: None,
                    applied: Vec::new(),
                    rejected: Vec::new(),
                    diagnosis: String::new(),
                    failed: Some(reason),
                }
            }
        };
        self.pending_events.push(event);
        Ok(())
    }

    /// One meta-prompter call, registered while in flight and stored as it
    /// returns; the answer, or why there is none; None when a budget
    /// stopped it before it was made.
    async fn ask_meta_prompter(
        &mut self,
        prompter: &Arc<dyn Provider>,
        request: &ChatRequest,
    ) -> Result<Option<Result<String, String>>, EvolveError> {
        static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let token = (u64::MAX >> 1) - TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sent = Instant::now();
        self.env.in_flight.lock().push(InFlightCall {
            token,
            purpose: META_PURPOSE,
            run: self.run.clone(),
            iteration: self.iteration,
            provider: prompter.label(),
            system: request.system.clone(),
            user: request.user.clone(),
            sent,
        });
        let result = prompter.complete(request).await;
        self.env.in_flight.lock().retain(|c| c.token != token);
        let asked = NewLlmCall {
            purpose: META_PURPOSE.into(),
            ..proposal_call(
                prompter.label(),
                &request.system,
                &request.user,
                sent.elapsed().as_secs_f64(),
            )
        };
        let (call, answer) = match result {
            Ok(c) => (with_answer(asked, &c), Ok(c.text)),
            Err(e) => {
                if e.is_budget_stop() {
                    return Ok(None);
                }
                (
                    NewLlmCall {
                        error: Some(e.to_string()),
                        ..asked
                    },
                    Err(e.to_string()),
                )
            }
        };
        self.env
            .store
            .record_llm_call(&self.run, None, self.iteration, &call)
            .await?;
        if let Err(reason) = &answer
            && !self.meta_failed_said
        {
            eprintln!(
                "kevo: the meta-prompter gave no answer ({reason}); the prompt stays as it is"
            );
            self.meta_failed_said = true;
        }
        Ok(Some(answer))
    }

    /// Stages 3 to 6 for iteration `k`'s answers.
    async fn conclude(
        &mut self,
        k: u32,
        request: &ChatRequest,
        context: &PromptContext,
        selection: &Selection,
        completions: Vec<(Result<Completion, ProviderError>, f64)>,
        observer: &mut dyn Observer,
    ) -> Result<(), EvolveError> {
        let tried = self
            .try_completions(k, request, context, selection, completions)
            .await?;
        let decided = self.decide_and_record(k, context, selection, tried).await?;
        self.publish(k, decided, observer)
    }

    /// The profile summary of candidate `id` (an incumbent, or with
    /// `--profile-every` an attempt, about to be shown), profiling it the
    /// first time (`--profile`): under Nsight
    /// Compute at the largest in-distribution size, the report and the
    /// summary kept in the run directory. The first failure turns
    /// profiling off for the run, said once; the run goes on.
    fn profile(&mut self, id: i64) -> Option<String> {
        if !(self.options.profile || self.options.profile_every) {
            return None;
        }
        if let Some(p) = self.profiles.get(&id) {
            return Some(p.clone());
        }
        if self.profiling_off.is_some() {
            return None;
        }
        let result = if self.dialect != Dialect::Cuda {
            Err("--profile needs the CUDA backend (Nsight Compute profiles CUDA kernels)".into())
        } else {
            let size = self
                .plan
                .in_distribution
                .last()
                .expect("a size plan has sizes")
                .clone();
            let report = self.dir.path().join(format!("profile_{id}.ncu-rep"));
            let config = self.options.worker_config();
            tokio::task::block_in_place(|| {
                kevo_worker::profiler::profile_task(
                    &self.env.worker,
                    config,
                    self.task,
                    &self.sources[&id],
                    &size,
                    &report,
                )
            })
            .map_err(|e| e.to_string())
        };
        match result {
            Ok(p) => {
                self.profiling_s += p.profiling_s;
                let summary = p.summary();
                // The run directory keeps what the model was shown; a
                // failed write loses only that copy.
                let _ = std::fs::write(
                    self.dir.path().join(format!("profile_{id}.txt")),
                    format!(
                        "{summary}

(profiled in {:.1} s; {:.1} s of profiling in this run so far)
",
                        p.profiling_s, self.profiling_s
                    )
                    .as_bytes(),
                );
                self.profiles.insert(id, summary.clone());
                Some(summary)
            }
            Err(reason) => {
                eprintln!("kevo: no profiles in this run: {reason}");
                self.profiling_off = Some(reason);
                None
            }
        }
    }

    /// The winner run under each `--sanitize-winner` tool at the task's
    /// smoke sizes (CUDA): unsafe on any error a tool reports. None when
    /// no tool was asked for.
    fn sanitize_winner(&mut self, id: i64) -> Option<crate::verdict::Safety> {
        if self.options.sanitize_winner.is_empty() {
            return None;
        }
        let tools = self.options.sanitize_winner.join(",");
        if self.dialect != Dialect::Cuda {
            return Some(crate::verdict::Safety::not_checked(
                &tools,
                "compute-sanitizer checks CUDA kernels; this run is not on CUDA".into(),
            ));
        }
        let sizes = self.task.sizes(kevo_tasks::SizeSet::Smoke).in_distribution;
        let mut checks = Vec::new();
        for name in &self.options.sanitize_winner {
            let tool: kevo_worker::sanitizer::SanitizerTool = match name.parse() {
                Ok(t) => t,
                Err(e) => {
                    checks.push((name.clone(), Err(e)));
                    continue;
                }
            };
            let started = Instant::now();
            let result = tokio::task::block_in_place(|| {
                kevo_worker::sanitizer::sanitized_evaluation(
                    &self.env.worker,
                    self.options.worker_config(),
                    tool,
                    &kevo_worker::sanitizer::SanitizeRequest {
                        task: self.task.name(),
                        source: &self.sources[&id],
                        sizes: &sizes,
                        // The sanitizer slows kernels 10-100x.
                        timeout: self.timeout * 20,
                        log_dir: self.dir.path(),
                    },
                )
            });
            self.evaluating += started.elapsed();
            checks.push((
                name.clone(),
                result.map(|e| e.outcome).map_err(|e| e.to_string()),
            ));
        }
        let safety = crate::verdict::Safety::from_checks(&checks);
        eprintln!(
            "kevo: winner under compute-sanitizer ({tools}): {}",
            safety.line()
        );
        Some(safety)
    }

    /// The performance analyst's recommendation about candidate `id` (a
    /// kernel about to be shown for improvement as `role`), asked the
    /// first time (`--analyst`). Analysing the kernel the next prompt
    /// builds on, once, rather than every proposal: a losing candidate is
    /// never improved upon, and (1+1) shows one incumbent for many
    /// iterations. The call is stored as it returns (purpose "analysis",
    /// tied to `id`), with its prompt and answer in the run directory. A
    /// failed call, or an answer with no recommendation, leaves the prompt
    /// without one; after [`ANALYST_GIVE_UP`] in a row the run stops
    /// asking, said once.
    async fn analysis(
        &mut self,
        id: i64,
        profile: Option<&str>,
        role: &str,
    ) -> Result<Option<String>, EvolveError> {
        let Some(analyst) = self.analyst.clone() else {
            return Ok(None);
        };
        if let Some(a) = self.analyses.get(&id) {
            return Ok(Some(a.clone()));
        }
        if self.analyst_failures >= ANALYST_GIVE_UP {
            return Ok(None);
        }
        let request = self
            .prompts
            .analyst_request(&kevo_proposer::AnalystContext {
                source: &self.sources[&id],
                evaluation: &self.evaluations[&id],
                profile,
                role,
            })?;
        static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let token = u64::MAX - TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sent = Instant::now();
        self.env.in_flight.lock().push(InFlightCall {
            token,
            purpose: "analysis",
            run: self.run.clone(),
            iteration: self.iteration,
            provider: analyst.label(),
            system: request.system.clone(),
            user: request.user.clone(),
            sent,
        });
        let result = analyst.complete(&request).await;
        self.env.in_flight.lock().retain(|c| c.token != token);
        let asked = NewLlmCall {
            purpose: "analysis".into(),
            ..proposal_call(
                analyst.label(),
                &request.system,
                &request.user,
                sent.elapsed().as_secs_f64(),
            )
        };
        let (call, failure) = match &result {
            Ok(c) => {
                let recommendation = kevo_proposer::recommendation(&c.text);
                // The run directory keeps what was asked and answered; a
                // failed write loses only that copy.
                let _ = self.dir.write_analysis(
                    id,
                    &request.system,
                    &request.user,
                    &c.text,
                    recommendation.as_deref(),
                );
                if let Some(r) = recommendation {
                    self.analyses.insert(id, r);
                }
                let failure = (!self.analyses.contains_key(&id))
                    .then(|| "its answer held no recommendation".to_string());
                (with_answer(asked, c), failure)
            }
            Err(e) => (
                NewLlmCall {
                    error: Some(e.to_string()),
                    ..asked
                },
                // A budget stop is the budget's: the generator's call
                // stops the run.
                (!e.is_budget_stop()).then(|| e.to_string()),
            ),
        };
        self.env
            .store
            .record_llm_call(&self.run, Some(CandidateId(id)), self.iteration, &call)
            .await?;
        if let Some(reason) = failure {
            self.analyst_failures += 1;
            if self.analyst_failures == 1 {
                eprintln!(
                    "kevo: the analyst gave no recommendation about candidate {id} ({reason}); the prompt goes without one"
                );
            }
            if self.analyst_failures == ANALYST_GIVE_UP {
                eprintln!(
                    "kevo: the analyst failed {ANALYST_GIVE_UP} times in a row; this run asks it no more"
                );
            }
        } else if result.is_ok() {
            self.analyst_failures = 0;
        }
        Ok(self.analyses.get(&id).cloned())
    }

    /// The request for a selection and its context, with its prompt
    /// variant's guidance.
    fn request(
        &self,
        context: &PromptContext,
        selection: &Selection,
    ) -> Result<ChatRequest, EvolveError> {
        let guidance = match (context.prompt_variant, &self.state.prompts) {
            (Some(v), Some(archive)) => {
                let variant = archive.get(v).ok_or_else(|| {
                    EvolveError::MetaPrompter(format!("the archive has no variant {v}"))
                })?;
                Some(
                    kevo_proposer::prompt::guidance::Guidance::parse(&variant.guidance).map_err(
                        |e| EvolveError::MetaPrompter(format!("variant {v} is unreadable: {e}")),
                    )?,
                )
            }
            _ => None,
        };
        let hints: Vec<String> = selection
            .hints
            .iter()
            .map(|h| hint_text(h, self.dialect))
            .collect();
        let request = self.prompts.request_with(
            &UserContext {
                previous: context
                    .previous
                    .as_ref()
                    .map(|(source, evaluation)| Attempt { source, evaluation }),
                incumbent: Attempt {
                    source: &context.incumbent_source,
                    evaluation: &context.incumbent_evaluation,
                },
                incumbent_is_seed: context.incumbent_is_seed,
                incumbent_is_best: context.incumbent_is_best,
                incumbent_score: context.incumbent_score,
                history: &self.state.history,
                elites: &attempts(&context.elites),
                inspirations: &attempts(&context.inspirations),
                hints: &hints,
                incumbent_profile: context.incumbent_profile.as_deref(),
                previous_profile: context.previous_profile.as_deref(),
                analysis: context.analysis.as_deref(),
                previous_rejected: context.previous_rejected,
            },
            guidance.as_ref(),
        )?;
        Ok(request)
    }

    /// Stage 2: the calls of one prompt (concurrently, with their
    /// latencies; a budget stop of every call ends the run) as a future
    /// that owns what it needs, so that several prompts' calls can be in
    /// flight at once. They are registered until they return; if the
    /// future is dropped instead (a signal), `interrupt` stores them as
    /// abandoned under iteration `k`.
    fn issue(
        &self,
        k: u32,
        request: &ChatRequest,
    ) -> impl std::future::Future<Output = Calls> + Send + 'static {
        static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let token = TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = self.options.candidates_per_iteration.max(1) as usize;
        let sent = Instant::now();
        let in_flight = self.env.in_flight.clone();
        in_flight.lock().extend((0..n).map(|_| InFlightCall {
            token,
            purpose: "propose",
            run: self.run.clone(),
            iteration: k,
            provider: self.provider.label(),
            system: request.system.clone(),
            user: request.user.clone(),
            sent,
        }));
        let handles = AbortOnDrop(
            (0..n)
                .map(|_| {
                    let p = self.provider.clone();
                    let r = request.clone();
                    tokio::spawn(async move {
                        let t = Instant::now();
                        let res = p.complete(&r).await;
                        (res, t.elapsed().as_secs_f64())
                    })
                })
                .collect(),
        );
        async move {
            let mut handles = handles;
            let mut joined = Vec::with_capacity(n);
            for h in handles.0.iter_mut() {
                joined.push(h.await);
            }
            in_flight.lock().retain(|c| c.token != token);
            let completions: Vec<(Result<Completion, ProviderError>, f64)> =
                joined.into_iter().collect::<Result<_, _>>()?;
            if let Some((Err(e), _)) = completions.first()
                && e.is_budget_stop()
                && completions.iter().all(|(r, _)| r.is_err())
            {
                return Err(EvolveError::Provider(e.clone()));
            }
            Ok(completions)
        }
    }

    /// With several workers (`--devices`, or remote ones), the new sources
    /// of an iteration's answers are evaluated at once, before the answers
    /// are taken one by one (which then find their evaluation here): the
    /// same sources, checks and limits, in parallel. Templates, and
    /// sources this run has measured, are left to the sequential path.
    async fn prefetch(
        &mut self,
        context: &PromptContext,
        completions: &[(Result<Completion, ProviderError>, f64)],
    ) -> Result<(), EvolveError> {
        self.prefetched.clear();
        if self.worker.parallel() < 2 || completions.len() < 2 {
            return Ok(());
        }
        let mut fresh: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (result, _) in completions {
            let Ok(completion) = result else { continue };
            let Extraction::Code { source, .. } = kevo_proposer::extract(
                &completion.text,
                &self
                    .prompts
                    .extract_options(Some(&context.incumbent_source)),
            ) else {
                continue;
            };
            if kevo_tune::is_template(&source) {
                continue;
            }
            let normalised = normalised_sha(&source);
            if self.normalised.contains_key(&normalised) || !seen.insert(normalised) {
                continue;
            }
            if self
                .env
                .store
                .find_evaluation(&self.run, &source_sha256(&source))
                .await?
                .is_some()
            {
                continue;
            }
            fresh.push(source);
        }
        if fresh.len() < 2 {
            return Ok(());
        }
        let started = Instant::now();
        let sizes = self.sizes();
        let evaluations = self
            .worker
            .evaluate_many(self.task, &fresh, &sizes, self.timeout)?;
        self.evaluating += started.elapsed();
        for (source, e) in fresh.into_iter().zip(evaluations) {
            self.prefetched.insert(source_sha256(&source), e);
        }
        Ok(())
    }

    /// Stage 3: each response's call record, its source extracted, and the
    /// source evaluated unless this run already measured it. The first
    /// proposal's response, source and result go to the run directory.
    async fn try_completions(
        &mut self,
        k: u32,
        request: &ChatRequest,
        context: &PromptContext,
        selection: &Selection,
        completions: Vec<(Result<Completion, ProviderError>, f64)>,
    ) -> Result<Vec<Tried>, EvolveError> {
        self.prefetch(context, &completions).await?;
        let mut tried: Vec<Tried> = Vec::with_capacity(completions.len());
        for (j, (result, latency)) in completions.into_iter().enumerate() {
            let mut call = proposal_call(
                self.provider.label(),
                &request.system,
                &request.user,
                latency,
            );
            let completion = match result {
                Err(e) => {
                    call.error = Some(e.to_string());
                    tried.push(Tried::nothing(
                        call,
                        StepOutcome::Skipped,
                        format!("the proposer failed: {e}"),
                    ));
                    continue;
                }
                Ok(c) => c,
            };
            let mut call = with_answer(call, &completion);
            // An ensemble's call is stored under the member that answered.
            if let Some(member) = &completion.member {
                call.provider = member.clone();
            }
            if j == 0 {
                self.dir.write_response(k, &completion.text)?;
                if let Some(r) = &completion.reasoning {
                    self.dir.write_reasoning(k, r)?;
                }
            }
            let extraction = kevo_proposer::extract(
                &completion.text,
                &self
                    .prompts
                    .extract_options(Some(&context.incumbent_source)),
            );
            let source = match extraction {
                Extraction::Code { source, .. } => source,
                other => {
                    let reason = other
                        .failure_reason()
                        .unwrap_or_else(|| "no code in the response".into());
                    let outcome = match other {
                        Extraction::NoCode { .. } => StepOutcome::NoCode,
                        _ => StepOutcome::EditRejected,
                    };
                    tried.push(Tried::nothing(call, outcome, reason));
                    continue;
                }
            };
            let note = kevo_proposer::prompt::attempt_note(&completion.text, &source);
            let tune_seed = self.options.rng_seed ^ (u64::from(k) << 16) ^ j as u64;
            let (source, (evaluation, reused_from, duplicate)) = if kevo_tune::is_template(&source)
            {
                self.tune_template(source, &tried, tune_seed).await?
            } else {
                let result = self.evaluate_once(&source, &tried).await?;
                (source, result)
            };
            if j == 0 {
                // A tuned template's candidate is its best instance.
                self.dir.write_candidate(k, &source)?;
            }
            if j == 0 {
                self.dir.write_result(k, &evaluation)?;
            }
            let analysis = self
                .seed_features
                .as_ref()
                .map(|seed| kevo_descriptors::analyse(&source, self.dialect, seed));
            tried.push(Tried {
                call,
                result: TriedResult::Evaluated(Box::new(EvaluatedProposal {
                    candidate: NewCandidate {
                        source,
                        parents: vec![CandidateRef::Stored(CandidateId(selection.parent))],
                        island: selection.island.map(i64::from),
                        cell: analysis.as_ref().map(|a| a.descriptors.to_string()),
                        descriptors: analysis.as_ref().and_then(|a| serde_json::to_value(a).ok()),
                        provider: Some(completion.provider.clone()),
                        model: Some(completion.model.clone()),
                    },
                    descriptors: analysis.map(|a| a.descriptors),
                    evaluation,
                    reused_from,
                    duplicate,
                    note,
                })),
            });
        }
        Ok(tried)
    }

    /// A proposed template (`// kevo: tune` lines) is tuned best-of-k: the
    /// tuning strategy picks up to `tune.best_of` configurations, each is
    /// instantiated and evaluated like any candidate (a configuration this
    /// run measured before costs nothing), and the fastest correct one,
    /// annotated with the table of what was tried, becomes the candidate
    /// with its evaluation, so everything downstream (decision, prompts,
    /// held-out gate, export) sees an ordinary kernel. A template whose
    /// declarations do not parse, or tuning turned off, fails as a compile
    /// error naming the line; with no correct configuration, the first
    /// configuration's failure stands.
    async fn tune_template(
        &mut self,
        template: String,
        batch: &[Tried],
        seed: u64,
    ) -> Result<(String, EvaluatedOnce), EvolveError> {
        let refuse = |this: &Self, message: String| {
            let device = this.worker.device();
            let log = format!("candidate.{}: error: {message}", this.dialect.extension());
            Evaluation::without_sizes(
                this.task.name(),
                &device.name,
                &device.backend,
                kevo_eval::Outcome::CompileError {
                    diagnostics: kevo_backend::CompileDiagnostics::from_log(log),
                    message,
                },
                kevo_eval::WallTimes::default(),
            )
        };
        let best_of = self.options.tune.best_of as usize;
        if best_of == 0 {
            let message = "the kernel declares tunable parameters (`// kevo: tune`), and tuning \
                           is off in this run (tune.best_of = 0): define the values yourself"
                .to_string();
            let e = refuse(self, message);
            return Ok((template, (e, None, None)));
        }
        let space = match kevo_tune::TuningSpace::parse(&template) {
            Ok(Some(space)) => space,
            Ok(None) => unreachable!("is_template found a tune line"),
            Err(e) => {
                let e = refuse(self, e.to_string());
                return Ok((template, (e, None, None)));
            }
        };
        let mut search = self.options.tune.strategy.build(seed);
        let mut seen: Vec<kevo_tune::Observation> = Vec::new();
        let mut tried: Vec<(kevo_tune::Configuration, EvaluatedOnce)> = Vec::new();
        while tried.len() < best_of {
            let Some(c) = search.next(&space, &seen) else {
                break;
            };
            let instance = space.instantiate(&template, &c);
            let result = self.evaluate_once(&instance, batch).await?;
            seen.push(kevo_tune::Observation {
                configuration: c.clone(),
                score: result.0.outcome.score(),
            });
            tried.push((c, result));
        }
        let best = tried
            .iter()
            .enumerate()
            .filter_map(|(i, (_, r))| r.0.outcome.score().map(|s| (i, s)))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(i, _)| i)
            .unwrap_or(0);
        let mut order: Vec<usize> = (0..tried.len()).collect();
        order.sort_by(|&a, &b| {
            let s = |i: usize| tried[i].1.0.outcome.score().unwrap_or(f64::NEG_INFINITY);
            s(b).total_cmp(&s(a)).then(a.cmp(&b))
        });
        let mut table = format!(
            "kevo tuned this kernel: {} of its {} valid configurations evaluated ({}), best first:",
            tried.len(),
            space.valid().len(),
            self.options.tune.strategy
        );
        for i in order {
            let (c, (e, _, _)) = &tried[i];
            let verdict = match e.outcome.score() {
                Some(score) => format!("score {score:.4}"),
                None => {
                    let summary = e.outcome.summary();
                    let short: String = summary.chars().take(120).collect();
                    short.replace('\n', " ")
                }
            };
            table.push_str(&format!("\n  {}  {verdict}", space.describe(c)));
        }
        let (c, result) = tried.swap_remove(best);
        Ok((space.instantiate_annotated(&template, &c, &table), result))
    }

    /// `source`'s evaluation: the stored one if this run measured the
    /// same source before, that of an earlier candidate whose source is
    /// the same up to comments and whitespace, one of this batch's, or a
    /// new measurement; with the candidate it duplicates, if any.
    async fn evaluate_once(
        &mut self,
        source: &str,
        batch: &[Tried],
    ) -> Result<EvaluatedOnce, EvolveError> {
        let sha = source_sha256(source);
        if let Some(stored) = self.env.store.find_evaluation(&self.run, &sha).await?
            && let Ok(e) = stored.evaluation()
        {
            let of = Duplicate::Stored(stored.candidate_id.0);
            return Ok((e, Some(stored.id), Some(of)));
        }
        let normalised = normalised_sha(source);
        if let Some(&id) = self.normalised.get(&normalised) {
            self.load(CandidateId(id)).await?;
            return Ok((
                self.evaluations[&id].clone(),
                None,
                Some(Duplicate::Stored(id)),
            ));
        }
        let earlier = batch.iter().enumerate().find_map(|(j, t)| match &t.result {
            TriedResult::Evaluated(e) if normalised_sha(&e.candidate.source) == normalised => {
                Some((e.evaluation.clone(), j))
            }
            _ => None,
        });
        Ok(match earlier {
            Some((e, j)) => (e, None, Some(Duplicate::InBatch(j))),
            None => match self.prefetched.remove(&sha) {
                Some(e) => (e, None, None),
                None => (
                    self.evaluate(source, &self.sizes(), self.timeout)?,
                    None,
                    None,
                ),
            },
        })
    }

    /// Stages 4 and 5: the candidates are stored and get their ids, the
    /// strategy decides on those ids, and the decisions, history and
    /// checkpoint are stored with them in one transaction.
    async fn decide_and_record(
        &mut self,
        k: u32,
        context: &PromptContext,
        selection: &Selection,
        tried: Vec<Tried>,
    ) -> Result<DecidedIteration, EvolveError> {
        let outcomes = tried.iter().map(Tried::outcome).collect();
        let duplicates: Vec<Option<Duplicate>> = tried
            .iter()
            .map(|t| match &t.result {
                TriedResult::Evaluated(e) => e.duplicate,
                TriedResult::Nothing { .. } => None,
            })
            .collect();
        let cells: Vec<Option<Descriptors>> = tried
            .iter()
            .map(|t| match &t.result {
                TriedResult::Evaluated(e) => e.descriptors,
                TriedResult::Nothing { .. } => None,
            })
            .collect();
        let notes: Vec<Option<String>> = tried
            .iter()
            .map(|t| match &t.result {
                TriedResult::Evaluated(e) => e.note.clone(),
                TriedResult::Nothing { .. } => None,
            })
            .collect();
        let scores = tried.iter().map(Tried::score).collect();
        // The reason shown to the proposer next time when nothing of this
        // iteration could be evaluated (the last one that has a reason).
        let any_candidate = tried.iter().any(|t| t.candidate().is_some());
        let failure = tried.iter().rev().find_map(|t| match &t.result {
            TriedResult::Nothing {
                outcome: StepOutcome::NoCode | StepOutcome::EditRejected,
                reason,
            } => Some(reason.clone()),
            _ => None,
        });
        let failures: Vec<(StepOutcome, String)> = tried
            .iter()
            .filter_map(|t| match &t.result {
                TriedResult::Nothing { outcome, reason } => Some((*outcome, reason.clone())),
                TriedResult::Evaluated(_) => None,
            })
            .collect();
        let mut provisional = provisional_batch(&tried);
        // Judge the batch; with --validate, validate what the strategy
        // would keep and judge again without what failed, until all it
        // keeps has passed (each candidate is validated at most once, and
        // pairs already re-measured are not measured again).
        let mut judged = None;
        let mut gate = Gate::default();
        loop {
            judged = self
                .judge_batch(k, selection, &provisional, &tried, judged.take())
                .await?;
            if !self.options.validation.enabled {
                break;
            }
            let fresh: Vec<i64> = self
                .probe_kept(k, selection, &provisional, judged.as_ref())?
                .into_iter()
                .filter(|id| gate.checked.insert(*id))
                .collect();
            if fresh.is_empty() {
                break;
            }
            let mut rejected_any = false;
            for p in fresh {
                let j = (-p - 1) as usize;
                let source = tried[j]
                    .candidate()
                    .map(|c| c.source.clone())
                    .unwrap_or_default();
                let v = self.validate(&source)?;
                let gate_state = &mut self.state.validation;
                gate_state.checked += 1;
                gate_state.device_s += v.device_s;
                gate_state.wall_s += v.wall_s;
                if !v.passed {
                    gate_state.rejected += 1;
                    rejected_any = true;
                    gate.rejected.insert(j, v.reason.clone());
                    if let Some(c) = provisional.iter_mut().find(|c| c.id == p) {
                        c.score = None;
                        c.outcome = StepOutcome::RejectedByValidation;
                    }
                }
                gate.validations.push(NewValidation {
                    candidate: CandidateRef::Proposal(j),
                    ..v
                });
            }
            if !rejected_any {
                break;
            }
        }
        let rejected = gate.rejected;
        let validations = gate.validations;
        self.reward_models(selection, &tried, &rejected);
        let models: Vec<String> = match self.provider.ensemble_state() {
            Some(_) => tried
                .iter()
                .filter(|t| t.call.response.is_some())
                .map(|t| t.call.provider.clone())
                .collect(),
            None => Vec::new(),
        };
        let proposed: Vec<Proposed> = tried.into_iter().map(Tried::into_proposed).collect();
        let verdicts: Vec<String> = judged
            .iter()
            .flat_map(|j| &j.measured)
            .map(|m| m.verdict.clone())
            .collect();

        let (rng_state, spent) = (self.rng_state(), self.spent());
        let answers = self.answering.take();
        let strategy = self.strategy.as_deref_mut().expect("seed evaluated");
        let state = &mut self.state;
        let mut decision: Option<Decision> = None;
        let env = self.env;
        let ids = env
            .store
            .record_iteration_with(&self.run, k, &proposed, |ids| {
                // Whose duplicate each proposal is, by stored id.
                let duplicate_of = |j: usize| match duplicates[j] {
                    Some(Duplicate::Stored(id)) => Some(id),
                    Some(Duplicate::InBatch(e)) => ids[e].map(|i| i.0),
                    None => None,
                };
                let batch: Vec<Scored> = proposed
                    .iter()
                    .zip(ids)
                    .zip(&cells)
                    .enumerate()
                    .filter_map(|(j, ((p, id), cell))| {
                        let e = &p.evaluation.as_ref()?.evaluation;
                        let (score, outcome) = match rejected.contains_key(&j) {
                            true => (None, StepOutcome::RejectedByValidation),
                            false => (e.outcome.score(), step_outcome(&e.outcome)),
                        };
                        Some(Scored {
                            id: (*id)?.0,
                            score,
                            outcome,
                            descriptors: *cell,
                            duplicate_of: duplicate_of(j),
                        })
                    })
                    .collect();
                // Stored ids back to the provisional ones the batch was
                // judged under.
                let provisional_of: HashMap<i64, i64> = ids
                    .iter()
                    .enumerate()
                    .filter_map(|(j, id)| Some((id.as_ref()?.0, provisional_id(j))))
                    .collect();
                let stored_of = |p: i64| {
                    ids.iter()
                        .enumerate()
                        .find(|(j, _)| provisional_id(*j) == p)
                        .and_then(|(_, id)| id.map(|i| i.0))
                        .unwrap_or(p)
                };
                decision = (!batch.is_empty()).then(|| match &judged {
                    None => strategy.decide(k, selection, &batch, &mut StrictJudge),
                    Some(judged) => strategy.decide(
                        k,
                        selection,
                        &batch,
                        &mut ReplayJudge {
                            table: &judged.table,
                            provisional_of: &provisional_of,
                        },
                    ),
                });
                let remeasurements = judged
                    .iter()
                    .flat_map(|j| &j.measured)
                    .map(|m| NewRemeasurement {
                        purpose: RemeasurePurpose::Promotion,
                        candidates: vec![
                            CandidateId(stored_of(m.challenger)),
                            CandidateId(stored_of(m.holder)),
                        ],
                        verdict: m.verdict.clone(),
                        rounds: serde_json::to_value(&m.interleaved.rounds).unwrap_or_default(),
                        evaluations: m.interleaved.spend.evaluations as u32,
                        device_s: m.interleaved.spend.device_s,
                        wall_s: m.interleaved.spend.wall_s,
                    })
                    .collect();
                // Proposals without a candidate first, then the decided
                // ones, each in proposal order.
                for (outcome, _) in &failures {
                    state
                        .history
                        .push(HistoryEntry::without_candidate(k, *outcome));
                }
                let note_of = |id: i64| {
                    ids.iter()
                        .position(|i| i.is_some_and(|i| i.0 == id))
                        .and_then(|j| notes[j].clone())
                };
                for s in &batch {
                    state.history.push(HistoryEntry {
                        iteration: k,
                        candidate: Some(s.id),
                        outcome: s.outcome,
                        score: s.score,
                        promoted: decision.as_ref().is_some_and(|d| d.kept(s.id)),
                        new_best: Some(
                            decision
                                .as_ref()
                                .is_some_and(|d| d.improved && d.best.id == s.id),
                        ),
                        duplicate_of: s.duplicate_of,
                        note: note_of(s.id),
                    });
                }
                state.previous_failure = if any_candidate { None } else { failure };
                if let (Some(archive), Some(v)) = (&mut state.prompts, context.prompt_variant) {
                    // A duplicate is the variant's answer, not a new kernel
                    // of its: listed, with no fitness.
                    for s in &batch {
                        let fresh = s.duplicate_of.is_none();
                        archive.credit(v, s.id, s.score.filter(|_| fresh));
                    }
                }
                if decision.as_ref().is_some_and(|d| d.improved) {
                    state.best_iteration = k;
                }
                state.search = Some(strategy.state());
                let mut failure_reasons = failures.iter().map(|(_, r)| r.clone());
                let decisions = ids
                    .iter()
                    .enumerate()
                    .map(
                        |(j, id)| match (id, id.and_then(|i| decision.as_ref()?.placement(i.0))) {
                            (Some(_), Some(p)) => NewDecision {
                                promoted: p.kept,
                                incumbent: Some(CandidateRef::Stored(CandidateId(
                                    strategy.best().id,
                                ))),
                                island: p.island.map(i64::from),
                                cell: p.cell.map(|c| c.to_string()),
                                reason: match rejected.get(&j) {
                                    Some(why) => format!("rejected by validation: {why}"),
                                    None => p.reason.clone(),
                                },
                            },
                            _ => NewDecision {
                                promoted: false,
                                incumbent: Some(CandidateRef::Stored(CandidateId(
                                    context.incumbent,
                                ))),
                                island: selection.island.map(i64::from),
                                cell: None,
                                reason: match id {
                                    None => failure_reasons.next().unwrap_or_default(),
                                    Some(_) => String::new(),
                                },
                            },
                        },
                    )
                    .collect();
                Decided {
                    decisions,
                    remeasurements,
                    validations,
                    answers,
                    checkpoint: Checkpoint {
                        incumbent: Some(CandidateRef::Stored(CandidateId(strategy.best().id))),
                        previous: batch
                            .last()
                            .map(|c| CandidateRef::Stored(CandidateId(c.id)))
                            .or(Some(CandidateRef::Stored(CandidateId(selection.parent)))),
                        rng_state,
                        strategy_state: Some(state.to_json()),
                        spent,
                    },
                }
            })
            .await?;
        for (p, id) in proposed.into_iter().zip(&ids) {
            if let (Some(c), Some(e), Some(id)) = (p.candidate, p.evaluation, id.candidate) {
                self.normalised
                    .entry(normalised_sha(&c.source))
                    .or_insert(id.0);
                self.sources.insert(id.0, c.source);
                self.evaluations.insert(id.0, e.evaluation);
            }
        }
        Ok(DecidedIteration {
            models,
            prompt_variant: context.prompt_variant,
            promoted: decision.is_some_and(|d| d.improved),
            outcomes,
            scores,
            verdicts,
        })
    }

    /// What each answered call of this iteration earned its model, told
    /// to the provider (an ensemble choosing by bandit learns from it):
    /// the relative gain of its candidate over the parent it was asked to
    /// improve; 0 for no code, rejected edits, wrong or suspicious
    /// results, a validation rejection, or a duplicate of a kernel this
    /// run already had. Failed calls are the ensemble's to count.
    fn reward_models(
        &self,
        selection: &Selection,
        tried: &[Tried],
        rejected: &HashMap<usize, String>,
    ) {
        let parent = self
            .evaluations
            .get(&selection.parent)
            .and_then(|e| e.outcome.score());
        for (j, t) in tried.iter().enumerate() {
            if t.call.response.is_none() {
                continue;
            }
            let reward = match &t.result {
                TriedResult::Evaluated(e)
                    if e.duplicate.is_none() && !rejected.contains_key(&j) =>
                {
                    kevo_proposer::bandit::improvement(e.evaluation.outcome.score(), parent)
                }
                _ => 0.0,
            };
            self.provider
                .reward(&t.call.provider, reward, t.call.cost_usd.unwrap_or(0.0));
        }
    }

    /// Stage 6: the run directory's best kernel and history, and the
    /// iteration's event.
    fn publish(
        &mut self,
        k: u32,
        decided: DecidedIteration,
        observer: &mut dyn Observer,
    ) -> Result<(), EvolveError> {
        let best = self.strategy.as_deref().expect("seed evaluated").best();
        if decided.promoted {
            self.dir
                .write_best(&self.sources[&best.id], &self.evaluations[&best.id])?;
        }
        self.write_history()?;
        let spent = self.spent();
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let totals = self.accounting.totals().all;
        let queued = self
            .arrived
            .load(std::sync::atomic::Ordering::Relaxed)
            .min(self.in_flight);
        for event in std::mem::take(&mut self.pending_events) {
            observer.on(&event);
        }
        let arms = self
            .provider
            .ensemble_state()
            .map(|s| arm_stats(&s))
            .unwrap_or_default();
        observer.on(&Event::Iteration {
            models: decided.models,
            prompt_variant: decided.prompt_variant,
            arms,
            iteration: k,
            outcomes: decided.outcomes,
            scores: decided.scores,
            promoted: decided.promoted,
            best_score: best.score,
            speedup: strategy.speedup(),
            input_tokens: spent.input_tokens,
            output_tokens: spent.output_tokens,
            cost_usd: spent.cost_usd,
            unknown_cost_calls: totals.unpriced_calls,
            unknown_usage_calls: totals.usage_unknown_calls,
            wall_s: spent.wall_s,
            verdicts: decided.verdicts,
            in_flight: self.in_flight - queued,
            queued,
            evaluating_s: self.evaluating.as_secs_f64(),
            session_s: self.started.elapsed().as_secs_f64(),
        });
        Ok(())
    }

    fn sizes(&self) -> Vec<kevo_tasks::Size> {
        self.plan.in_distribution.clone()
    }

    /// Evaluate `sources` together over `rounds` interleaved rounds at the
    /// in-distribution sizes, with the full protocol (checks included); a
    /// candidate that fails a round is not run again.
    fn remeasure(&mut self, sources: &[&str], rounds: u32) -> Result<Interleaved, EvolveError> {
        let sizes = self.sizes();
        let timeout = self.timeout;
        crate::remeasure::interleave(sources, rounds, &mut |source| {
            self.evaluate(source, &sizes, timeout)
        })
    }

    /// The provisional ids a copy of the strategy keeps from `batch`,
    /// deciding as the real decision will: on `judged`'s answers under the
    /// noise-aware rule, strictly otherwise.
    fn probe_kept(
        &self,
        k: u32,
        selection: &Selection,
        batch: &[Scored],
        judged: Option<&Judged>,
    ) -> Result<Vec<i64>, EvolveError> {
        if batch.iter().all(|c| c.score.is_none()) {
            return Ok(Vec::new());
        }
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let mut probe = kevo_strategy::restore(strategy.name(), &strategy.state())?;
        let same = HashMap::new();
        let decision = match judged {
            None => probe.decide(k, selection, batch, &mut StrictJudge),
            Some(j) => probe.decide(
                k,
                selection,
                batch,
                &mut ReplayJudge {
                    table: &j.table,
                    provisional_of: &same,
                },
            ),
        };
        Ok(decision
            .placements
            .iter()
            .filter(|p| p.kept)
            .map(|p| p.id)
            .collect())
    }

    /// The validation gate on one candidate: evaluated at the validation
    /// sizes, it passes when correct there and at most `max_slowdown`
    /// times the seed's time at each. The caller names the candidate.
    fn validate(&mut self, source: &str) -> Result<NewValidation, EvolveError> {
        let sizes = self.plan.validation.clone();
        let limit = kevo_worker::timeout_from_seed(
            self.state.validation.seed_wall_s,
            10.0,
            Duration::from_secs(30),
        )
        .max(self.timeout);
        let e = self.evaluate(source, &sizes, limit)?;
        let max = self.options.validation.max_slowdown;
        let verdict = match e.outcome.is_correct() {
            false => Err(format!("at a validation size: {}", e.outcome.summary())),
            true => {
                let ratios: Vec<(&str, f64)> = e
                    .sizes
                    .iter()
                    .filter_map(|s| {
                        let (_, seed) = self
                            .state
                            .validation
                            .seed_times
                            .iter()
                            .find(|(l, _)| *l == s.label)?;
                        Some((s.label.as_str(), s.time.median_s / seed))
                    })
                    .collect();
                let worst = ratios
                    .iter()
                    .copied()
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .unwrap_or(("", 1.0));
                match worst.1 > max || !worst.1.is_finite() {
                    true => Err(format!(
                        "{:.2}x the seed's time at validation size `{}` (at most {max}x allowed)",
                        worst.1, worst.0
                    )),
                    false => Ok(format!(
                        "correct at the validation sizes, at most {:.2}x the seed's time there",
                        worst.1
                    )),
                }
            }
        };
        let (passed, reason) = match verdict {
            Ok(r) => (true, r),
            Err(r) => (false, r),
        };
        Ok(NewValidation {
            candidate: CandidateRef::Proposal(0),
            passed,
            reason,
            device_s: e.wall.device_s,
            wall_s: e.wall.total_s,
            evaluation: e,
        })
    }

    /// Under the noise-aware rule, decide `batch` once on a copy of the
    /// strategy, re-measuring every challenger that appears better than
    /// what it would replace; the answers are replayed when the strategy
    /// decides for real. None under the strict rule.
    async fn judge_batch(
        &mut self,
        k: u32,
        selection: &Selection,
        batch: &[Scored],
        tried: &[Tried],
        prior: Option<Judged>,
    ) -> Result<Option<Judged>, EvolveError> {
        let Promotion::NoiseAware { rounds } = self.options.promotion else {
            return Ok(None);
        };
        let Judged {
            mut table,
            mut measured,
        } = prior.unwrap_or_default();
        let already = measured.len();
        if batch.iter().all(|c| c.score.is_none()) {
            return Ok(Some(Judged { table, measured }));
        }
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let held: Vec<i64> = held_ids(strategy);
        let mut probe = kevo_strategy::restore(strategy.name(), &strategy.state())?;
        for id in &held {
            self.load(CandidateId(*id)).await?;
        }
        // The queue of a distributed run failing mid-judgement: the
        // decision is abandoned and the error returned.
        let mut unreachable: Option<EvolveError> = None;
        // Holders are gated by their single first evaluation, as the
        // challengers are by theirs.
        let first_score: HashMap<i64, f64> = held
            .iter()
            .filter_map(|id| Some((*id, self.evaluations.get(id)?.outcome.score()?)))
            .collect();
        {
            let mut judge = RecordingJudge {
                inner: NoiseAwareJudge {
                    first_score,
                    measure: |c: Elite, h: Elite| {
                        // A provisional id is a proposal of `tried`; any
                        // other is held by the strategy, loaded above.
                        let source = |s: &Self, id: i64| match id {
                            p if p < 0 => tried[(-p - 1) as usize]
                                .candidate()
                                .map(|c| c.source.clone())
                                .unwrap_or_default(),
                            id => s.sources[&id].clone(),
                        };
                        let (a, b) = (source(self, c.id), source(self, h.id));
                        let m = match self.remeasure(&[&a, &b], rounds) {
                            Ok(m) => m,
                            Err(e) => {
                                unreachable.get_or_insert(e);
                                return Interleaved::default().pair([c.id, h.id]);
                            }
                        };
                        let pair = m.pair([c.id, h.id]);
                        measured.push(Measured {
                            challenger: c.id,
                            holder: h.id,
                            interleaved: m,
                            verdict: String::new(),
                        });
                        pair
                    },
                },
                table: &mut table,
            };
            probe.decide(k, selection, batch, &mut judge);
        }
        if let Some(e) = unreachable {
            return Err(e);
        }
        for m in &mut measured[already..] {
            m.verdict = table
                .get(&(m.challenger, m.holder))
                .and_then(|j| j.note.clone())
                .unwrap_or_default();
            let discarded = m.interleaved.discarded();
            if !discarded.is_empty() {
                m.verdict = format!(
                    "{}; rounds {discarded:?} discarded: faster than the hardware allows",
                    m.verdict
                );
            }
            self.state.remeasure.add(&m.interleaved.spend);
        }
        Ok(Some(Judged { table, measured }))
    }

    /// The candidates the final pick re-measures, best in-run score first:
    /// the `k` best not far below the best, and the strategy's best.
    fn final_ranked(&self, k: usize, seed_id: i64, in_run_best: Elite) -> Vec<(i64, u32, f64)> {
        let mut ranked: Vec<(i64, u32, f64)> = Vec::new();
        for h in &self.state.history {
            if let (Some(id), Some(score), None) = (h.candidate, h.score, h.duplicate_of)
                && score.is_finite()
                && id != seed_id
                && !ranked.iter().any(|r| r.0 == id)
            {
                ranked.push((id, h.iteration, score));
            }
        }
        ranked.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        // A candidate far below the best cannot win the pick: its
        // re-measurement would cost device time (the slowest kernels
        // cost the most) and change nothing.
        let top = ranked
            .first()
            .map_or(in_run_best.score, |r| r.2.max(in_run_best.score));
        ranked.retain(|r| r.2 >= top * FINAL_PICK_MIN_SHARE);
        ranked.truncate(k);
        // The strategy's best competes even if re-measured scores moved it
        // out of the top k by in-run score.
        if in_run_best.id != seed_id && !ranked.iter().any(|r| r.0 == in_run_best.id) {
            let entry = self
                .state
                .history
                .iter()
                .find(|h| h.candidate == Some(in_run_best.id))
                .map(|h| {
                    (
                        in_run_best.id,
                        h.iteration,
                        h.score.unwrap_or(in_run_best.score),
                    )
                });
            ranked.extend(entry);
        }
        ranked
    }

    /// The end-of-run pick: the `final_remeasure` best candidates by
    /// in-run score and the seed, re-measured together; the winner is the
    /// best median among those that passed every round. None when
    /// disabled or when nothing but the seed scored.
    async fn final_pick(&mut self) -> Result<Option<FinalPick>, EvolveError> {
        let k = self.options.final_remeasure as usize;
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let (seed, in_run_best) = (strategy.seed(), strategy.best());
        let mut ranked = self.final_ranked(k, seed.id, in_run_best);
        if k == 0 || ranked.is_empty() {
            return Ok(None);
        }
        ranked.push((seed.id, 0, seed.score));
        for (id, _, _) in &ranked {
            self.load(CandidateId(*id)).await?;
        }
        let rounds = match self.options.promotion {
            Promotion::NoiseAware { rounds } => rounds,
            Promotion::Strict => kevo_strategy::promotion::DEFAULT_ROUNDS,
        };
        let sources: Vec<String> = ranked.iter().map(|r| self.sources[&r.0].clone()).collect();
        let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
        let m = self.remeasure(&refs, rounds)?;
        let candidates: Vec<FinalEntry> = ranked
            .iter()
            .enumerate()
            .map(|(i, (id, iteration, score))| FinalEntry {
                candidate: *id,
                iteration: *iteration,
                in_run_score: *score,
                remeasured: m.median(i),
                failure: m.failure(i),
            })
            .collect();
        let winner = candidates
            .iter()
            .filter_map(|e| e.remeasured.map(|s| (e.candidate, s)))
            .fold(None::<(i64, f64)>, |best, c| match best {
                Some(b) if b.1 >= c.1 => Some(b),
                _ => Some(c),
            })
            .map(|(id, _)| id)
            .unwrap_or(in_run_best.id);
        // The speedup is measured apart from the rounds that chose the
        // winner: the winner and the seed again, on fresh rounds.
        let chosen = winner;
        let confirm_rounds = if winner == seed.id {
            None
        } else {
            let (w, s) = (
                self.sources[&winner].clone(),
                self.sources[&seed.id].clone(),
            );
            Some(self.remeasure(&[&w, &s], rounds)?)
        };
        let confirmation = confirm_rounds
            .as_ref()
            .map(crate::remeasure::Confirmation::of);
        let held = confirmation.as_ref().is_none_or(|c| c.holds());
        let (winner, unconfirmed, speedup) = match &confirmation {
            Some(c) if held => (winner, None, Some(c.median)),
            Some(_) => (seed.id, Some(winner), Some(1.0)),
            None => (winner, None, Some(1.0)),
        };
        let pick = FinalPick {
            rounds,
            candidates,
            winner,
            in_run_best: in_run_best.id,
            speedup,
            confirmation,
            unconfirmed,
            discarded_rounds: m.discarded(),
        };
        let candidates = ranked.iter().map(|r| CandidateId(r.0)).collect();
        self.record_interleaved(RemeasurePurpose::Final, candidates, pick.describe(), &m)
            .await?;
        if let Some(c) = &confirm_rounds {
            self.record_confirmation(chosen, seed.id, c).await?;
        }
        Ok(Some(pick))
    }

    /// Stores the winner-against-seed rounds of the final pick.
    async fn record_confirmation(
        &mut self,
        winner: i64,
        seed: i64,
        m: &Interleaved,
    ) -> Result<(), EvolveError> {
        let c = crate::remeasure::Confirmation::of(m);
        let verdict = format!("candidate {winner} against the seed: {}", c.describe());
        let candidates = vec![CandidateId(winner), CandidateId(seed)];
        self.record_interleaved(RemeasurePurpose::Confirm, candidates, verdict, m)
            .await
    }

    /// Stores a re-measurement of the run's end and counts its spend.
    async fn record_interleaved(
        &mut self,
        purpose: RemeasurePurpose,
        candidates: Vec<CandidateId>,
        verdict: String,
        m: &Interleaved,
    ) -> Result<(), EvolveError> {
        self.env
            .store
            .record_remeasurement(
                &self.run,
                self.iteration,
                &NewRemeasurement {
                    purpose,
                    candidates,
                    verdict,
                    rounds: serde_json::to_value(&m.rounds).unwrap_or_default(),
                    evaluations: m.spend.evaluations as u32,
                    device_s: m.spend.device_s,
                    wall_s: m.spend.wall_s,
                },
            )
            .await?;
        self.state.remeasure.add(&m.spend);
        Ok(())
    }

    /// The held-out gate: the incumbent and the seed at the held-out size in
    /// one session. Stored, reported, and never shown to the proposer.
    async fn held_out(&mut self, winner_id: i64) -> Result<HeldOutSummary, EvolveError> {
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let seed_id = strategy.seed().id;
        let size = self.plan.held_out.clone();
        let session = format!("{}-held-out-{}", self.run.0, self.iteration);
        let limit = self.timeout.max(Duration::from_secs(60));
        let winner_src = self.sources[&winner_id].clone();
        let seed_src = self.sources[&seed_id].clone();
        let winner = self.evaluate(&winner_src, std::slice::from_ref(&size), limit)?;
        // A seed kept is not measured against itself ("seed kept" beside
        // "0.89x the seed"): one evaluation serves both roles.
        let seed = if winner_id == seed_id {
            winner.clone()
        } else {
            self.evaluate(&seed_src, std::slice::from_ref(&size), limit)?
        };
        let fraction = |e: &Evaluation| {
            e.outcome
                .is_correct()
                .then(|| e.sizes.first().map(|s| s.fraction))
                .flatten()
        };
        let (wf, sf) = (fraction(&winner), fraction(&seed));
        let speedup = match (wf, sf) {
            _ if winner_id == seed_id => wf.map(|_| 1.0),
            (Some(w), Some(s)) if s > 0.0 => Some(w / s),
            _ => None,
        };
        for (id, role, evaluation, frac, speed) in [
            (seed_id, HeldOutRole::Seed, &seed, sf, Some(1.0)),
            (winner_id, HeldOutRole::Winner, &winner, wf, speedup),
        ] {
            self.env
                .store
                .record_held_out(
                    &self.run,
                    &NewHeldOut {
                        candidate_id: CandidateId(id),
                        role,
                        evaluation: evaluation.clone(),
                        session: Some(session.clone()),
                        phi: Some(frac.unwrap_or(0.0)),
                        fraction: frac,
                        speedup: if frac.is_some() { speed } else { None },
                    },
                )
                .await?;
        }
        let (verdict, verdict_reason) =
            crate::verdict::classify(winner_id == seed_id, &winner, &seed);
        Ok(HeldOutSummary {
            verdict: Some(verdict),
            verdict_reason: Some(verdict_reason),
            size: size.label,
            seed_outcome: seed.outcome.summary(),
            winner_outcome: winner.outcome.summary(),
            seed_fraction: sf,
            winner_fraction: wf,
            phi: wf.unwrap_or(0.0),
            speedup,
            winner_roofline: winner
                .outcome
                .is_correct()
                .then(|| winner.sizes.first().map(|s| s.roofline_text()))
                .flatten(),
        })
    }
}

/// The id a proposal is judged under before the store gives it one:
/// negative, so it never meets a stored id.
/// An evaluation, the stored one it reuses, and the candidate it duplicates.
type EvaluatedOnce = (Evaluation, Option<EvaluationId>, Option<Duplicate>);

fn provisional_id(proposal: usize) -> i64 {
    -(proposal as i64) - 1
}

/// The batch a strategy will decide on, under provisional ids, in
/// proposal order: the same candidates, scores and duplicates as the
/// batch built once the store has given ids.
fn provisional_batch(tried: &[Tried]) -> Vec<Scored> {
    tried
        .iter()
        .enumerate()
        .filter_map(|(j, t)| match &t.result {
            TriedResult::Evaluated(e) => Some(Scored {
                id: provisional_id(j),
                score: e.evaluation.outcome.score(),
                outcome: step_outcome(&e.evaluation.outcome),
                descriptors: e.descriptors,
                duplicate_of: e.duplicate.map(|d| match d {
                    Duplicate::Stored(id) => id,
                    Duplicate::InBatch(i) => provisional_id(i),
                }),
            }),
            TriedResult::Nothing { .. } => None,
        })
        .collect()
}

/// What the noise-aware rule found about an iteration's batch: every
/// judgement the strategy asked for, by (challenger, holder) under
/// provisional ids, and the re-measurements made for them.
#[derive(Default)]
struct Judged {
    table: HashMap<(i64, i64), Judgement>,
    measured: Vec<Measured>,
}

struct Measured {
    challenger: i64,
    holder: i64,
    interleaved: Interleaved,
    verdict: String,
}

/// Answers a strategy's questions from a table judged beforehand (the
/// strategy asks the same questions again once the candidates have ids).
struct ReplayJudge<'a> {
    table: &'a HashMap<(i64, i64), Judgement>,
    provisional_of: &'a HashMap<i64, i64>,
}

impl Judge for ReplayJudge<'_> {
    fn judge(&mut self, challenger: Elite, holder: Elite) -> Judgement {
        let p = |id: i64| self.provisional_of.get(&id).copied().unwrap_or(id);
        match self.table.get(&(p(challenger.id), p(holder.id))) {
            Some(j) => j.clone(),
            // The strategy decides the same way twice, so this is not
            // reached; if it were, nothing unmeasured is promoted.
            None => Judgement {
                better: false,
                challenger_score: challenger.score,
                holder_score: holder.score,
                note: Some("not re-measured, not promoted".into()),
            },
        }
    }
}

/// Records every judgement of an inner judge and asks it once per pair.
struct RecordingJudge<'t, J> {
    inner: J,
    table: &'t mut HashMap<(i64, i64), Judgement>,
}

impl<J: Judge> Judge for RecordingJudge<'_, J> {
    fn judge(&mut self, challenger: Elite, holder: Elite) -> Judgement {
        let key = (challenger.id, holder.id);
        if let Some(j) = self.table.get(&key) {
            return j.clone();
        }
        let j = self.inner.judge(challenger, holder);
        self.table.insert(key, j.clone());
        j
    }
}

/// What the validation gate found in one iteration: the proposals it
/// rejected (by position, with the reason), its evaluations, and the
/// provisional ids it has checked.
#[derive(Default)]
struct Gate {
    rejected: HashMap<usize, String>,
    validations: Vec<NewValidation>,
    checked: std::collections::HashSet<i64>,
}

/// Shown candidates as the prompt takes them.
fn attempts(shown: &[(String, Evaluation)]) -> Vec<Attempt<'_>> {
    shown
        .iter()
        .map(|(source, evaluation)| Attempt { source, evaluation })
        .collect()
}

/// Every candidate a strategy holds (its archive, best and seed): those a
/// challenger can be compared with.
fn held_ids(strategy: &dyn Strategy) -> Vec<i64> {
    let mut ids: Vec<i64> = match strategy.archive() {
        kevo_strategy::Archive::Incumbent(e) => vec![e.id],
        kevo_strategy::Archive::Grid(cells) => cells.iter().map(|c| c.elite.id).collect(),
        kevo_strategy::Archive::Islands(islands) => {
            islands.iter().flatten().map(|e| e.id).collect()
        }
    };
    ids.extend([strategy.best().id, strategy.seed().id]);
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// A strategy's hint in words: the suggestion and why it is made.
fn hint_text(hint: &kevo_strategy::Hint, dialect: Dialect) -> String {
    let why = match hint.reason {
        kevo_strategy::HintReason::Improved { .. } => format!(
            "children of kernels like this one improved when they moved toward {}",
            hint.axis.level_name(hint.level)
        ),
        kevo_strategy::HintReason::Unexplored => format!(
            "no kernel of the search uses {} together with this one's other traits yet",
            hint.axis.level_name(hint.level)
        ),
    };
    format!("{} ({why}).", hint.axis.suggestion(hint.level, dialect))
}

/// What the proposer is shown in one iteration (see
/// [`Session::prompt_context`]).
struct PromptContext {
    /// The strategy's parent for this iteration's proposals.
    incumbent: i64,
    /// Its profile summary, with `--profile`.
    incumbent_profile: Option<String>,
    /// The previous attempt's, with `--profile-every`.
    previous_profile: Option<String>,
    /// The analyst's recommendation about it, with `--analyst`.
    analysis: Option<String>,
    incumbent_source: String,
    incumbent_evaluation: Evaluation,
    previous: Option<(String, Evaluation)>,
    incumbent_is_seed: bool,
    /// The parent is the run's best so far (always so for (1+1)).
    incumbent_is_best: bool,
    /// The score the search holds for the incumbent when it is the best:
    /// its re-measured median after a noise-aware promotion.
    incumbent_score: Option<f64>,
    /// Other elites and inspirations the strategy chose, with their
    /// evaluations.
    elites: Vec<(String, Evaluation)>,
    inspirations: Vec<(String, Evaluation)>,
    /// The previous attempt was rejected by the validation gate.
    previous_rejected: bool,
    /// The prompt variant of the request (`--meta-prompter`).
    prompt_variant: Option<u32>,
}

/// One proposal of an iteration after extraction and evaluation.
struct Tried {
    call: NewLlmCall,
    result: TriedResult,
}

enum TriedResult {
    /// No candidate: the proposer failed, or its response held no usable
    /// source; `reason` is stored with the decision.
    Nothing {
        outcome: StepOutcome,
        reason: String,
    },
    /// Boxed: an evaluation is large, and most batches are short.
    Evaluated(Box<EvaluatedProposal>),
}

/// An earlier candidate whose source a proposal repeats (up to comments and
/// whitespace): stored, or an earlier proposal of the same batch.
#[derive(Debug, Clone, Copy)]
enum Duplicate {
    Stored(i64),
    InBatch(usize),
}

/// SHA-256 of a source normalised (comments and whitespace runs): the key
/// of duplicate detection.
fn normalised_sha(source: &str) -> String {
    source_sha256(&kevo_descriptors::normalised(source))
}

struct EvaluatedProposal {
    /// Repeats an earlier candidate: not measured again.
    duplicate: Option<Duplicate>,
    candidate: NewCandidate,
    /// Its cell, also stored (as JSON) with the candidate.
    descriptors: Option<Descriptors>,
    evaluation: Evaluation,
    reused_from: Option<EvaluationId>,
    /// What the response says it changed, for the history line.
    note: Option<String>,
}

impl Tried {
    fn nothing(call: NewLlmCall, outcome: StepOutcome, reason: String) -> Self {
        Tried {
            call,
            result: TriedResult::Nothing { outcome, reason },
        }
    }

    fn candidate(&self) -> Option<&NewCandidate> {
        match &self.result {
            TriedResult::Evaluated(e) => Some(&e.candidate),
            TriedResult::Nothing { .. } => None,
        }
    }

    /// The outcome's name, as the iteration event reports it.
    fn outcome(&self) -> String {
        match &self.result {
            TriedResult::Nothing { outcome, .. } => outcome.name().to_string(),
            TriedResult::Evaluated(e) => e.evaluation.outcome.kind().to_string(),
        }
    }

    fn score(&self) -> Option<f64> {
        match &self.result {
            TriedResult::Nothing { .. } => None,
            TriedResult::Evaluated(e) => e.evaluation.outcome.score(),
        }
    }

    fn into_proposed(self) -> Proposed {
        match self.result {
            TriedResult::Nothing { .. } => Proposed {
                llm_calls: vec![self.call],
                candidate: None,
                evaluation: None,
            },
            TriedResult::Evaluated(e) => Proposed {
                llm_calls: vec![self.call],
                candidate: Some(e.candidate),
                evaluation: Some(NewEvaluation {
                    evaluation: e.evaluation,
                    reused_from: e.reused_from,
                }),
            },
        }
    }
}

/// What an iteration's event reports of its decision.
struct DecidedIteration {
    promoted: bool,
    /// The ensemble members that answered, in proposal order.
    models: Vec<String>,
    prompt_variant: Option<u32>,
    /// Per proposal, in order.
    outcomes: Vec<String>,
    scores: Vec<Option<f64>>,
    /// Re-measurement verdicts, in the order they were measured.
    verdicts: Vec<String>,
}

#[cfg(test)]
mod device_tests {
    use super::*;

    #[test]
    fn devices_of_one_model_serve_a_run_and_of_several_only_when_asked() {
        assert_eq!(one_model(&["H100", "H100"], false), Ok(None));
        let refused = one_model(&["H100", "A100", "H100"], false).unwrap_err();
        assert!(refused.contains("H100, A100"), "{refused}");
        assert!(refused.contains("--mixed-devices"), "{refused}");
        let note = one_model(&["H100", "A100"], true).unwrap().unwrap();
        assert!(note.contains("own device's ceilings"), "{note}");
    }

    #[test]
    fn devices_name_selectors_on_the_runs_platform() {
        let base = kevo_backend::DeviceSelector {
            platform: Some("Portable".into()),
            device: Some("7".into()),
        };
        let none = device_selectors(kevo_runtimes::BackendKind::Opencl, &base, &[]).unwrap();
        assert_eq!(none, vec![base.clone()]);
        let two = device_selectors(
            kevo_runtimes::BackendKind::Opencl,
            &base,
            &["0".into(), "1".into()],
        )
        .unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(two[1].device.as_deref(), Some("1"));
        assert_eq!(two[1].platform.as_deref(), Some("Portable"));
        let auto = device_selectors(kevo_runtimes::BackendKind::Auto, &base, &["all".into()]);
        assert!(auto.unwrap_err().contains("--backend"));
    }
}
