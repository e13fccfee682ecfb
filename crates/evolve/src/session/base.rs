//! The session: the run's fields, how it opens, and the small services every
//! stage uses.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kevo_backend::Dialect;
use kevo_descriptors::Features;
use kevo_eval::{Candidate, Evaluation};
use kevo_proposer::{Accounting, DeviceBrief, PromptBuilder, Provider, ProviderConfig};
use kevo_store::artifacts::RunDir;
use kevo_store::{NewRun, ProposalId, RunId, Spent, Store};
use kevo_strategy::Strategy;
use kevo_tasks::Task;
use kevo_worker::WorkerCommand;

use super::calls::InFlightCalls;
use super::error::EvolveError;
use super::events::Event;
use super::pool::EvaluationPool;
use super::state::StrategyState;
use crate::EvolveOptions;

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

pub(super) struct Session<'e> {
    pub(super) options: EvolveOptions,
    pub(super) task: &'static Task,
    /// The run's sizes, resolved once from the task and the size set.
    pub(super) plan: kevo_tasks::SizePlan,
    pub(super) env: &'e Environment,
    pub(super) run: RunId,
    pub(super) dir: RunDir,
    pub(super) pool: EvaluationPool,
    pub(super) dialect: Dialect,
    pub(super) provider: Arc<dyn Provider>,
    /// The batch endpoint of a `batch:` model.
    pub(super) batch: Option<Arc<kevo_proposer::BatchProvider>>,
    pub(super) accounting: Accounting,
    /// With `--agent-tools`: the tools' worker and budget, shared by every
    /// proposal's conversation.
    pub(super) tools: Option<Arc<super::tool_host::ToolBench>>,
    pub(super) prompts: PromptBuilder<'static>,
    /// Set once the seed is recorded (its id is the strategy's start).
    pub(super) strategy: Option<Box<dyn Strategy>>,
    /// The run's candidates by the SHA-256 of their normalised source
    /// (the first of each), for duplicate detection.
    pub(super) normalised: HashMap<String, i64>,
    /// What the seed uses, against which candidates' algorithmic
    /// structure is placed (set with the seed).
    pub(super) seed_features: Option<Features>,
    pub(super) state: StrategyState,
    /// Sources and in-distribution evaluations by candidate id.
    pub(super) sources: HashMap<i64, String>,
    pub(super) evaluations: HashMap<i64, Evaluation>,
    /// Profile summaries of incumbents (`--profile`), by candidate.
    pub(super) profiles: HashMap<i64, String>,
    /// Why profiling stopped (no CUDA, no ncu, ncu failed): said once.
    pub(super) profiling_off: Option<String>,
    /// Wall seconds spent profiling: the profiles', never a score's.
    pub(super) profiling_s: f64,
    /// The performance analyst (`--analyst`).
    pub(super) analyst: Option<Arc<dyn Provider>>,
    /// Its recommendations, by the candidate it analysed.
    pub(super) analyses: HashMap<i64, String>,
    /// Its failures in a row (see [`ANALYST_GIVE_UP`]).
    pub(super) analyst_failures: u32,
    /// The meta-prompter (`--meta-prompter`).
    pub(super) meta_prompter: Option<Arc<dyn Provider>>,
    /// Meta-prompter answers stored after the checkpoint a resumed run
    /// started from (None: the call failed): used in order instead of
    /// asking again.
    pub(super) meta_answers: std::collections::VecDeque<Option<String>>,
    /// Evaluations of this iteration's sources made at once, by source
    /// SHA-256 ([`Session::prefetch`]).
    pub(super) prefetched: HashMap<String, Evaluation>,
    /// A failed meta-prompter call was reported (once per session).
    pub(super) meta_failed_said: bool,
    /// Events raised while building a prompt, published with the next
    /// iteration's.
    pub(super) pending_events: Vec<Event>,
    /// The last completed iteration.
    pub(super) iteration: u32,
    /// Wall time spent evaluating in this session (candidates,
    /// re-measurements, held-out): the device's busy share of the wall.
    pub(super) evaluating: Duration,
    /// Prompts whose calls are out (with `--concurrency` above 1), and
    /// of those the ones whose answers arrived and wait to be evaluated.
    pub(super) in_flight: u32,
    pub(super) arrived: Arc<std::sync::atomic::AtomicU32>,
    pub(super) spent_before: Spent,
    pub(super) started: Instant,
    pub(super) timeout: Duration,
    pub(super) resumed_from: Option<u32>,
    /// The pending proposal (ask/tell, batch) the iteration being
    /// recorded answers: marked answered in its transaction.
    pub(super) answering: Option<ProposalId>,
    /// The error every call of the last iteration failed with, when no
    /// later call can succeed either (a refused key, a host that does not
    /// resolve): the loop stops and the run fails with it.
    pub(super) refused: Option<String>,
    /// Writes the run's heartbeat while this session lives.
    pub(super) heartbeat: tokio::task::AbortHandle,
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

/// Tasks aborted when dropped: a model call must not outlive the session
/// that sent it (a `cmd:` proposer's processes end with its future).
pub(super) struct AbortOnDrop<T>(pub(super) Vec<tokio::task::JoinHandle<T>>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

/// Write `run`'s heartbeat now and every few seconds until aborted, so
/// `kevo runs` can tell a live run from one whose process died.
pub(super) fn start_heartbeat(store: &kevo_store::Store, run: &RunId) -> tokio::task::AbortHandle {
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
pub(super) fn run_config(
    options: &EvolveOptions,
    task: &Task,
    pool: &EvaluationPool,
) -> Result<serde_json::Value, EvolveError> {
    let mut config = serde_json::to_value(options).map_err(|source| EvolveError::Serialize {
        what: "the run's settings",
        source,
    })?;
    if let Some(map) = config.as_object_mut() {
        map.insert(
            "sandbox_in_force".into(),
            serde_json::to_value(pool.sandbox()).unwrap_or_default(),
        );
        // What the result depends on besides the settings: the build, the
        // task's definition, the device and driver, the ceilings with their
        // source, and the seeds of the random choices.
        map.insert(
            "provenance".into(),
            serde_json::json!({
                "kevo": crate::VERSION,
                "task": {
                    "name": task.name(),
                    "content_hash": task.content_hash(),
                    // Where the task came from (a KernelBench import's
                    // problem and baselines); absent for most tasks.
                    "record": task.provenance_record(),
                },
                "device": pool.device(),
                "ceilings": pool.ceilings(),
                // Every local worker's device and ceilings (several with
                // --devices; of different models with --mixed-devices).
                "workers": pool.devices(),
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
    /// A session of a new run (`existing` none) or a stored one, evaluating
    /// on the run's device; with `recorded` (a stored run's settings) on
    /// no device, its device as that run recorded it: for commands that
    /// only write prompts and keep answers.
    pub(super) async fn open(
        mut options: EvolveOptions,
        task: &'static Task,
        env: &'e Environment,
        existing: Option<RunId>,
        recorded: Option<&serde_json::Value>,
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
        let run_name = existing
            .as_ref()
            .map(|r| r.0.as_str())
            .unwrap_or("a new run");
        // A run stored before its device was recorded in full falls back to
        // the device itself, as every command did before.
        let recorded = recorded.and_then(|config| EvaluationPool::recorded(run_name, config).ok());
        let pool = match (&options.nats, recorded) {
            (_, Some(pool)) => pool,
            (None, None) => EvaluationPool::local(&options, env)?,
            (Some(nats), None) => EvaluationPool::remote(&options, nats).await?,
        };
        let device = pool.device().clone();
        let dialect = device.dialect;
        let Proposers {
            provider,
            tool_budget,
            batch,
            accounting,
            analyst,
            meta_prompter,
        } = Proposers::build(&options)?;
        let prompts = prompt_builder(&options, task, &device, &pool)?;
        let run = match existing {
            Some(run) => run,
            None => create_run(env, &options, task, &pool, &provider).await?,
        };
        let dir = RunDir::create(&env.workspace, &run, dialect.extension())?;
        let heartbeat = start_heartbeat(&env.store, &run);
        Ok(Session {
            tools: tool_budget
                .map(|b| super::tool_host::ToolBench::shared(b, task, dialect, &options, env)),
            plan: task.sizes(options.sizes),
            options,
            task,
            env,
            run,
            dir,
            pool,
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
            refused: None,
            heartbeat,
        })
    }

    /// A stored source (the seed, a kept candidate) evaluated as a
    /// candidate in the run's dialect.
    pub(super) fn evaluate(
        &mut self,
        source: &str,
        sizes: &[kevo_tasks::Size],
        timeout: Duration,
    ) -> Result<Evaluation, EvolveError> {
        let candidate = Candidate::new(source.to_string(), self.dialect);
        self.evaluate_candidate(&candidate, sizes, timeout)
    }

    pub(super) fn evaluate_candidate(
        &mut self,
        candidate: &Candidate,
        sizes: &[kevo_tasks::Size],
        timeout: Duration,
    ) -> Result<Evaluation, EvolveError> {
        // No tool call runs on the device while a candidate is scored.
        let tools = self.tools.clone();
        let _device = tools.as_deref().map(super::tool_host::ToolBench::hold);
        let started = Instant::now();
        let e = self.pool.evaluate(self.task, candidate, sizes, timeout);
        self.evaluating += started.elapsed();
        e
    }

    pub(super) fn spent(&self) -> Spent {
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

    pub(super) fn rng_state(&self) -> Option<serde_json::Value> {
        self.provider
            .ensemble_state()
            .and_then(|s| serde_json::to_value(s).ok())
    }

    pub(super) fn candidate_timeout(&self) -> Duration {
        match self.options.timeout_s {
            Some(s) => Duration::from_secs_f64(s),
            None => kevo_worker::timeout_from_seed(
                self.state.seed_wall_s,
                10.0,
                Duration::from_secs(30),
            ),
        }
    }

    pub(super) fn write_history(&self) -> Result<(), EvolveError> {
        self.dir.write_history(&self.state.history)?;
        Ok(())
    }

    /// Why the loop stops before iteration `next`, if it does.
    pub(super) fn stop_reason(&self, next: u32) -> Option<String> {
        let strategy = self.strategy.as_ref()?;
        if let Some(error) = &self.refused {
            return Some(error.clone());
        }
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

    pub(super) fn sizes(&self) -> Vec<kevo_tasks::Size> {
        self.plan.in_distribution.clone()
    }
}

/// The models a run calls, and the accounting they share: the generator
/// (with its batch form where it has one), the analyst and the
/// meta-prompter.
struct Proposers {
    provider: Arc<dyn Provider>,
    /// `[agent_tools]` of the model settings, with `--agent-tools`.
    tool_budget: Option<kevo_proposer::tools::ToolBudget>,
    batch: Option<Arc<kevo_proposer::BatchProvider>>,
    accounting: Accounting,
    analyst: Option<Arc<dyn Provider>>,
    meta_prompter: Option<Arc<dyn Provider>>,
}

impl Proposers {
    fn build(options: &EvolveOptions) -> Result<Proposers, EvolveError> {
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
        // An `agent:` proposer always works with its tools.
        let tool_budget = match options.agent_tools || provider.agent().is_some() {
            // An external run's agent calls them through `kevo tool`.
            true if batch.is_some() => {
                return Err(EvolveError::AgentTools(
                    "a batch (batch:) has no conversation to offer tools in".into(),
                ));
            }
            true if options.nats.is_some() => {
                return Err(EvolveError::AgentTools(
                    "the tools run on a worker of this host; a run evaluated through --nats has no device here".into(),
                ));
            }
            true => Some(provider_config.agent_tools.clone()),
            false => None,
        };
        Ok(Proposers {
            provider,
            tool_budget,
            batch,
            accounting,
            analyst,
            meta_prompter,
        })
    }
}

/// The prompt builder for `task` on `device`, with the run's prompt
/// settings.
fn prompt_builder(
    options: &EvolveOptions,
    task: &'static Task,
    device: &kevo_backend::DeviceInfo,
    pool: &EvaluationPool,
) -> Result<PromptBuilder<'static>, EvolveError> {
    let brief = DeviceBrief {
        name: device.name.clone(),
        ceilings: pool.ceilings().clone(),
        info: Some(device.clone()),
    };
    let mut prompts = PromptBuilder::new(task, device.dialect, options.sizes, brief)?
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
    Ok(prompts)
}

/// A new run in the store, with the settings it was started with.
async fn create_run(
    env: &Environment,
    options: &EvolveOptions,
    task: &'static Task,
    pool: &EvaluationPool,
    provider: &Arc<dyn Provider>,
) -> Result<RunId, EvolveError> {
    let device = pool.device();
    let run = env
        .store
        .create_run(&NewRun {
            task: task.name().to_string(),
            backend: device.backend.to_string(),
            device: device.name.clone(),
            size_set: options.sizes,
            strategy: options.strategy.stored_name().into(),
            config: run_config(options, task, pool)?,
            rng_state: provider
                .ensemble_state()
                .map(|s| serde_json::to_value(s).unwrap_or_default()),
        })
        .await?;
    Ok(run)
}
