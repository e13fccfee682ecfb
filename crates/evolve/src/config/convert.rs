//! The merged settings as a run's options and a worker's configuration, and
//! back (a stored run's settings, `kevo config show`).

use kevo_proposer::{EditMode, StagnationParams};
use kevo_runtimes::BackendKind;
use kevo_strategy::Promotion;
use kevo_tasks::SizeSet;
use kevo_worker::kevo_sandbox;

use super::layer::ConfigError;
use super::sections::{
    BudgetSection, Ceilings, DeviceSection, EditModeName, LimitsSection, LlmSection,
    PromotionSection, PromptSection, RunConfig, SandboxSection, TimingSection, TuneSection,
};
use super::{DEFAULT_MAX_TIMED_RUNS, DEFAULT_TARGET_SPREAD};
use crate::options::{EvolveOptions, PromptOptions};

/// Top-level keys a stored run's settings never show: its task is
/// `EvolveOptions::task`, and a starting kernel is stored as source, not
/// as the path it was read from.
const UNSHOWN_KEYS: &[&str] = &["task", "seed_kernel"];

impl RunConfig {
    /// The promotion rule and the final re-measurement these settings give.
    pub(super) fn promotion_rule(&self) -> Result<(Promotion, u32), String> {
        let name = self.promotion.rule.as_deref().unwrap_or("noise-aware");
        let rule = Promotion::named(name, self.promotion.rounds).map_err(|e| match e {
            kevo_strategy::StrategyError::Setting { reason, .. } => reason,
            other => other.to_string(),
        })?;
        let default_final = match rule {
            Promotion::Strict => 0,
            Promotion::NoiseAware { .. } => crate::DEFAULT_FINAL_REMEASURE,
        };
        Ok((
            rule,
            self.promotion.final_remeasure.unwrap_or(default_final),
        ))
    }

    /// The run's options: every key left out takes kevo's default. Needs a
    /// task; a run also needs models (the caller checks, since `eval` and
    /// `bench` do not).
    pub fn to_options(&self) -> Result<EvolveOptions, ConfigError> {
        let task = self.task.clone().ok_or_else(|| ConfigError {
            place: "the settings".into(),
            key: Some("task".into()),
            message: "no task: give --task NAME or `task = \"NAME\"` in the config file".into(),
        })?;
        // A task folder by its absolute path, so that `--resume` finds it
        // from any directory.
        let task = match kevo_tasks::is_folder_reference(&task) {
            true => std::fs::canonicalize(&task)
                .map(|p| p.display().to_string())
                .unwrap_or(task),
            false => task,
        };
        self.options_for(task)
    }

    /// The options with every default filled in and no task (for printing
    /// settings that name none yet).
    pub fn options_without_task(&self) -> Result<EvolveOptions, ConfigError> {
        self.options_for(String::new())
    }

    /// The evaluation worker these settings describe (`eval` and `bench`,
    /// which may evaluate every task).
    /// Its inputs come from one secret per command (`KEVO_INPUTS_SECRET`
    /// names one to reproduce), shared by every worker the command starts.
    pub fn worker_config(&self) -> Result<kevo_worker::WorkerConfig, ConfigError> {
        let secret = kevo_eval::InputSecret::from_env_or_draw().map_err(|e| ConfigError {
            place: "KEVO_INPUTS_SECRET".into(),
            key: None,
            message: e.to_string(),
        })?;
        Ok(self
            .options_for(String::new())?
            .worker_config()
            .with_inputs_secret(Some(secret)))
    }

    pub(super) fn options_for(&self, task: String) -> Result<EvolveOptions, ConfigError> {
        let mut o = EvolveOptions::new(
            &task,
            self.llm.models.as_deref().unwrap_or_default(),
            self.budget.iterations.unwrap_or(10),
        );
        let promotion = self.promotion_rule().map_err(|message| ConfigError {
            place: "the settings".into(),
            key: Some("promotion".into()),
            message,
        })?;
        self.device.apply(&mut o);
        o.sizes = self.sizes.unwrap_or(SizeSet::Full);
        self.timing.apply(&mut o);
        self.limits.apply(&mut o);
        self.sandbox.apply(&mut o);
        self.llm.apply(&mut o);
        o.max_wall_s = self.budget.max_wall_s;
        o.max_cost_usd = self.budget.max_cost_usd;
        o.target_score = self.budget.target_score;
        self.prompt.apply(&mut o);
        o.tune = crate::TuneOptions {
            best_of: self.tune.best_of.unwrap_or(o.tune.best_of),
            strategy: self.tune.strategy.unwrap_or(o.tune.strategy),
        };
        (o.promotion, o.final_remeasure) = promotion;
        o.validation = crate::ValidationOptions {
            enabled: self.promotion.validate.unwrap_or(false),
            max_slowdown: self
                .promotion
                .validate_max_slowdown
                .unwrap_or(o.validation.max_slowdown),
        };
        o.strategy = self.strategy.clone().unwrap_or_default();
        o.settings = self.clone();
        o.settings.task = None;
        Ok(o)
    }

    /// Every setting of `options`, written out: what `kevo config show`
    /// and `kevo show RUN --config` print. A run started from a kernel
    /// file has its source stored, not the path, so `seed_kernel` is left
    /// out.
    pub fn from_options(o: &EvolveOptions) -> RunConfig {
        let written = Self::from_option_fields(o);
        // Keys the fields above do not carry come from the settings as
        // given, so that a new setting needs no line here.
        let (Ok(mut table), Ok(given)) = (
            toml::Table::try_from(&written),
            toml::Table::try_from(&o.settings),
        ) else {
            return written;
        };
        for (key, value) in given {
            match (table.get_mut(&key), value) {
                (Some(toml::Value::Table(section)), toml::Value::Table(keys)) => {
                    for (k, v) in keys {
                        section.entry(k).or_insert(v);
                    }
                }
                (None, value) if !UNSHOWN_KEYS.contains(&key.as_str()) => {
                    table.insert(key, value);
                }
                _ => {}
            }
        }
        toml::Value::Table(table).try_into().unwrap_or(written)
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self == &RunConfig::default()
    }

    fn from_option_fields(o: &EvolveOptions) -> RunConfig {
        let gib = |bytes: u64| bytes as f64 / f64::from(1u32 << 30);
        let (rule, rounds) = match o.promotion {
            Promotion::Strict => ("strict", None),
            Promotion::NoiseAware { rounds } => ("noise-aware", Some(rounds)),
        };
        RunConfig {
            task: Some(o.task.clone()),
            sizes: Some(o.sizes),
            seed_kernel: None,
            device: DeviceSection {
                backend: Some(o.backend),
                platform: o.selector.platform.clone(),
                device: o.selector.device.clone(),
                ceilings: o.declared_ceilings.map(|c| Ceilings {
                    bandwidth_gbs: c.bandwidth_gbs,
                    fp32_gflops: c.fp32_gflops,
                }),
                fast_math: Some(o.fast_math),
                profile: Some(o.profile),
                profile_every: Some(o.profile_every),
                sanitize_winner: Some(o.sanitize_winner.clone()),
                nats: o.nats.as_ref().map(|n| n.url.clone()),
                nats_namespace: o.nats.as_ref().map(|n| n.namespace.clone()),
                devices: (!o.devices.is_empty()).then(|| o.devices.clone()),
                mixed_devices: o.mixed_devices.then_some(true),
                triton_python: o.triton_python.clone(),
            },
            timing: TimingSection {
                cuda_graph: Some(o.timing.cuda_graph),
                flush_l2: Some(o.timing.flush_l2),
                target_spread: Some(o.timing.target_spread.unwrap_or(DEFAULT_TARGET_SPREAD)),
                max_timed_runs: Some(o.timing.max_timed_runs.unwrap_or(DEFAULT_MAX_TIMED_RUNS)),
            },
            limits: LimitsSection {
                candidate_timeout_s: o.timeout_s,
                compile_timeout_s: Some(o.limits.compile_timeout_s),
                compile_memory_gib: Some(gib(o.limits.compile_memory_bytes)),
                worker_memory_gib: Some(gib(o.limits.worker_memory_bytes)),
            },
            sandbox: SandboxSection {
                enabled: Some(o.sandbox.enabled),
                required: Some(o.sandbox.required),
                skip: Some(o.sandbox.skip.clone()),
                allow_read: Some(o.sandbox.readable.clone()),
                allow_write: Some(o.sandbox.writable.clone()),
            },
            llm: LlmSection {
                models: Some(o.llm.clone()),
                analyst: o.analyst.clone(),
                agent_tools: o.agent_tools.then_some(true),
                providers: o.llm_config.clone(),
                timeout_s: o.llm_timeout_s,
                retries: o.llm_retries,
                accept_unknown_cost: Some(o.accept_unknown_cost),
                record: o.record.clone(),
                concurrency: Some(o.concurrency),
                candidates_per_iteration: Some(o.candidates_per_iteration),
                batch_poll_s: Some(o.batch_poll_s),
                edit_mode: Some(match o.edit_mode {
                    EditMode::SearchReplace => EditModeName::Diff,
                    EditMode::FullSource => EditModeName::Full,
                }),
                seed: Some(o.rng_seed),
                model_choice: Some(o.model_choice),
                meta_prompter: o.meta_prompt.as_ref().map(|m| m.prompter.clone()),
                meta_every: o.meta_prompt.as_ref().map(|m| m.every),
            },
            budget: BudgetSection {
                iterations: Some(o.iterations),
                max_wall_s: o.max_wall_s,
                max_cost_usd: o.max_cost_usd,
                target_score: o.target_score,
            },
            prompt: PromptSection {
                templates: o.prompt.templates.clone(),
                history: Some(o.prompt.history_len),
                context_budget_tokens: o.context_budget_tokens,
                stagnation_window: Some(o.prompt.stagnation.window),
                stagnation_gap: Some(o.prompt.stagnation.gap),
            },
            promotion: PromotionSection {
                rule: Some(rule.into()),
                rounds,
                final_remeasure: Some(o.final_remeasure),
                validate: Some(o.validation.enabled),
                validate_max_slowdown: Some(o.validation.max_slowdown),
            },
            tune: TuneSection {
                best_of: Some(o.tune.best_of),
                strategy: Some(o.tune.strategy),
            },
            strategy: Some(o.strategy.clone()),
        }
    }

    /// What `kevo config show` prints for these merged settings: every
    /// default filled in, the task, starting kernel and models as given
    /// (any may still be missing).
    pub fn shown(&self) -> Result<RunConfig, ConfigError> {
        let mut shown = RunConfig::from_options(&self.options_without_task()?);
        shown.task = self.task.clone();
        shown.seed_kernel = self.seed_kernel.clone();
        shown.llm.models = self.llm.models.clone();
        Ok(shown)
    }

    /// These settings as TOML, with a comment naming the optional keys
    /// that are not set.
    pub fn to_toml(&self) -> String {
        let unset: Vec<&str> = [
            ("task", self.task.is_none()),
            ("device.platform", self.device.platform.is_none()),
            ("device.device", self.device.device.is_none()),
            ("device.ceilings", self.device.ceilings.is_none()),
            ("device.nats", self.device.nats.is_none()),
            (
                "limits.candidate_timeout_s",
                self.limits.candidate_timeout_s.is_none(),
            ),
            ("llm.models", self.llm.models.is_none()),
            ("llm.analyst", self.llm.analyst.is_none()),
            ("llm.meta_prompter", self.llm.meta_prompter.is_none()),
            ("llm.providers", self.llm.providers.is_none()),
            ("llm.timeout_s", self.llm.timeout_s.is_none()),
            ("llm.retries", self.llm.retries.is_none()),
            ("llm.record", self.llm.record.is_none()),
            ("budget.max_wall_s", self.budget.max_wall_s.is_none()),
            ("budget.max_cost_usd", self.budget.max_cost_usd.is_none()),
            ("budget.target_score", self.budget.target_score.is_none()),
            ("prompt.templates", self.prompt.templates.is_none()),
            (
                "prompt.context_budget_tokens",
                self.prompt.context_budget_tokens.is_none(),
            ),
        ]
        .into_iter()
        .filter(|(_, unset)| *unset)
        .map(|(k, _)| k)
        .collect();
        let body = toml::to_string_pretty(self).unwrap_or_else(|e| format!("# {e}\n"));
        let mut out = String::new();
        if !unset.is_empty() {
            out.push_str("# not set: ");
            out.push_str(&unset.join(", "));
            out.push('\n');
        }
        out.push_str(&body);
        out
    }
}

/// Each section sets its part of a run's options, every key left out
/// taking kevo's default.
impl DeviceSection {
    fn apply(&self, o: &mut EvolveOptions) {
        o.backend = self.backend.unwrap_or(BackendKind::Auto);
        o.selector = kevo_backend::DeviceSelector {
            platform: self.platform.clone(),
            device: self.device.clone(),
        };
        o.declared_ceilings = self.ceilings.map(|c| kevo_worker::DeclaredCeilings {
            bandwidth_gbs: c.bandwidth_gbs,
            fp32_gflops: c.fp32_gflops,
        });
        o.fast_math = self.fast_math.unwrap_or(true);
        o.devices = self.devices.clone().unwrap_or_default();
        o.mixed_devices = self.mixed_devices.unwrap_or(false);
        o.triton_python = self.triton_python.clone();
        o.nats = self.nats.clone().map(|url| crate::NatsOptions {
            url,
            namespace: self.nats_namespace.clone().unwrap_or_else(|| "kevo".into()),
        });
        o.profile = self.profile.unwrap_or(false);
        o.profile_every = self.profile_every.unwrap_or(false);
        o.sanitize_winner = self.sanitize_winner.clone().unwrap_or_default();
    }
}

impl TimingSection {
    fn apply(&self, o: &mut EvolveOptions) {
        o.timing = kevo_worker::TimingOptions {
            cuda_graph: self.cuda_graph.unwrap_or(true),
            flush_l2: self.flush_l2.unwrap_or(false),
            target_spread: Some(self.target_spread.unwrap_or(DEFAULT_TARGET_SPREAD)),
            max_timed_runs: Some(self.max_timed_runs.unwrap_or(DEFAULT_MAX_TIMED_RUNS)),
        };
    }
}

impl LimitsSection {
    /// Memory is given in GiB; a compile gets at least 64 MiB.
    fn apply(&self, o: &mut EvolveOptions) {
        let gib = |v: f64| (v * f64::from(1u32 << 30)) as u64;
        let defaults = kevo_worker::Limits::default();
        o.limits = kevo_worker::Limits {
            compile_memory_bytes: self
                .compile_memory_gib
                .map(|v| gib(v).max(64 << 20))
                .unwrap_or(defaults.compile_memory_bytes),
            worker_memory_bytes: self
                .worker_memory_gib
                .map(gib)
                .unwrap_or(defaults.worker_memory_bytes),
            compile_timeout_s: self.compile_timeout_s.unwrap_or(defaults.compile_timeout_s),
        };
        o.timeout_s = self.candidate_timeout_s;
    }
}

impl SandboxSection {
    fn apply(&self, o: &mut EvolveOptions) {
        o.sandbox = kevo_sandbox::Options {
            enabled: self.enabled.unwrap_or(true),
            required: self.required.unwrap_or(false),
            skip: self.skip.clone().unwrap_or_default(),
            readable: self.allow_read.clone().unwrap_or_default(),
            writable: self.allow_write.clone().unwrap_or_default(),
            ..Default::default()
        };
    }
}

impl LlmSection {
    fn apply(&self, o: &mut EvolveOptions) {
        o.llm_config = self.providers.clone();
        o.agent_tools = self.agent_tools.unwrap_or(false);
        o.llm_timeout_s = self.timeout_s;
        o.llm_retries = self.retries;
        o.accept_unknown_cost = self.accept_unknown_cost.unwrap_or(false);
        o.record = self.record.clone();
        o.analyst = self.analyst.clone();
        o.concurrency = self.concurrency.unwrap_or(1);
        o.candidates_per_iteration = self.candidates_per_iteration.unwrap_or(1);
        o.batch_poll_s = self.batch_poll_s.unwrap_or(o.batch_poll_s);
        o.edit_mode = match self.edit_mode {
            Some(EditModeName::Diff) => EditMode::SearchReplace,
            _ => EditMode::FullSource,
        };
        o.rng_seed = self.seed.unwrap_or(o.rng_seed);
        o.model_choice = self.model_choice.unwrap_or_default();
        o.meta_prompt = self
            .meta_prompter
            .clone()
            .map(|prompter| crate::MetaPromptOptions {
                prompter,
                every: self.meta_every.unwrap_or(crate::DEFAULT_META_EVERY),
            });
    }
}

impl PromptSection {
    fn apply(&self, o: &mut EvolveOptions) {
        o.prompt = PromptOptions {
            templates: self.templates.clone(),
            history_len: self.history.unwrap_or(o.prompt.history_len),
            stagnation: StagnationParams {
                window: self.stagnation_window.unwrap_or(o.prompt.stagnation.window),
                gap: self.stagnation_gap.unwrap_or(o.prompt.stagnation.gap),
            },
        };
        o.context_budget_tokens = self.context_budget_tokens;
    }
}
