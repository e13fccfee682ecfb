//! Run configuration files: every setting of a run in one TOML file.
//!
//! Settings come in layers, each a partial [`RunConfig`]: kevo's defaults,
//! then a stored run's settings (`--config-from RUN`), then a file
//! (`--config FILE`), then the command line's flags. A later layer wins
//! key by key; a later layer that names another strategy replaces the
//! whole `[strategy]` table, since the settings of one strategy mean
//! nothing to another. Every layer is checked on its own first, so a
//! mistake is reported where it was made: a file's line and key, or the
//! flag.
//!
//! Relative paths in a file are relative to the file's directory, as a
//! file that names `seed.cu` beside it means; on the command line they are
//! relative to the working directory.

use std::fmt;
use std::path::{Path, PathBuf};

use kevo_proposer::{EditMode, StagnationParams};
use kevo_runtimes::BackendKind;
use kevo_strategy::{Promotion, StrategyConfig};
use kevo_tasks::SizeSet;
use kevo_worker::kevo_sandbox::{self, Layer};
use serde::{Deserialize, Serialize};

use crate::options::{EvolveOptions, PromptOptions};

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

/// Where a layer came from, for error messages.
#[derive(Debug, Clone)]
pub enum Origin {
    /// A file, with its text (for line numbers); `prefix` is the table
    /// the settings sit under (a sweep file's `base`), if not the top.
    File {
        path: PathBuf,
        text: String,
        prefix: Option<String>,
    },
    /// The command line; each key with the flag that set it.
    Flags { flags: Vec<(String, String)> },
    /// A stored run's settings.
    Run { run: String },
}

/// A setting that is wrong, and where it was given.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    /// `file.toml:12`, `--concurrency`, `run 3f2a…`, or `the settings`.
    pub place: String,
    /// The dotted key, where one is to blame.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) if !self.place.starts_with("--") => {
                write!(f, "{}: key `{key}`: {}", self.place, self.message)
            }
            _ => write!(f, "{}: {}", self.place, self.message),
        }
    }
}

/// A checked layer: its keys as a TOML table, and where it came from.
#[derive(Debug, Clone)]
pub struct ConfigLayer {
    table: toml::Table,
    origin: Origin,
}

/// Keys whose values are paths: resolved against a file's directory.
const PATH_KEYS: &[&str] = &[
    "seed_kernel",
    "llm.providers",
    "llm.record",
    "prompt.templates",
    "sandbox.allow_read",
    "sandbox.allow_write",
];

impl ConfigLayer {
    /// A layer from a TOML file: syntax, keys, types and values are checked
    /// here, with the file's line in every message.
    pub fn from_file(path: &Path) -> Result<ConfigLayer, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            place: path.display().to_string(),
            key: None,
            message: format!("cannot read the config file: {e}"),
        })?;
        Self::from_text(path, text)
    }

    /// A layer from TOML text said to come from `path`.
    pub fn from_text(path: &Path, text: String) -> Result<ConfigLayer, ConfigError> {
        let deserializer = toml::Deserializer::parse(&text).map_err(|e| {
            let line = e.span().map(|s| line_at(&text, s.start));
            located_in(path, None, line, e.message().trim().to_string())
        })?;
        let raw: toml::Table = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let inner = e.into_inner();
            let line = inner.span().map(|s| line_at(&text, s.start));
            located_in(path, None, line, inner.message().trim().to_string())
        })?;
        Self::from_table_in_file(path, &text, "", raw)
    }

    /// A layer from `table`, which sits under `prefix` (empty: the top) in
    /// the file `path` whose text is `text`.
    pub fn from_table_in_file(
        path: &Path,
        text: &str,
        prefix: &str,
        mut table: toml::Table,
    ) -> Result<ConfigLayer, ConfigError> {
        if let Some(dir) = path.parent() {
            for key in PATH_KEYS {
                absolutize(&mut table, key, dir);
            }
            absolutize_replays(&mut table, dir);
        }
        let layer = ConfigLayer {
            table,
            origin: Origin::File {
                path: path.to_path_buf(),
                text: text.to_string(),
                prefix: (!prefix.is_empty()).then(|| prefix.to_string()),
            },
        };
        layer.check()?;
        Ok(layer)
    }

    /// A layer from the command line's flags: `flags` names the flag that
    /// set each key, for messages.
    pub fn from_flags(
        table: toml::Table,
        flags: Vec<(String, String)>,
    ) -> Result<ConfigLayer, ConfigError> {
        let layer = ConfigLayer {
            table,
            origin: Origin::Flags { flags },
        };
        layer.check()?;
        Ok(layer)
    }

    /// The settings a stored run was made with, as a layer. Its recording
    /// file is left out: a new run must not append to another's record.
    pub fn from_run(run: &str, options: &EvolveOptions) -> Result<ConfigLayer, ConfigError> {
        let mut config = RunConfig::from_options(options);
        config.llm.record = None;
        let table = toml::Table::try_from(&config).map_err(|e| ConfigError {
            place: format!("run {run}"),
            key: None,
            message: e.to_string(),
        })?;
        Ok(ConfigLayer {
            table,
            origin: Origin::Run { run: run.into() },
        })
    }

    fn check(&self) -> Result<(), ConfigError> {
        layer_parse(&self.table).map_err(|(key, message)| self.error(key, message))?;
        Ok(())
    }

    /// An error about `key` in this layer, placed at its line or flag.
    fn error(&self, key: Option<String>, message: String) -> ConfigError {
        let place = match &self.origin {
            Origin::File { path, text, prefix } => {
                let full = |k: &str| match prefix {
                    Some(p) => format!("{p}.{k}"),
                    None => k.to_string(),
                };
                match key.as_deref().and_then(|k| key_line(text, &full(k))) {
                    Some(line) => format!("{}:{line}", path.display()),
                    None => path.display().to_string(),
                }
            }
            Origin::Flags { flags } => key
                .as_deref()
                .and_then(|k| {
                    flags
                        .iter()
                        .find(|(key, _)| k == key || k.starts_with(&format!("{key}.")))
                        .or_else(|| {
                            flags
                                .iter()
                                .find(|(key, _)| key.starts_with(&format!("{k}.")))
                        })
                })
                .map(|(_, flag)| flag.clone())
                .unwrap_or_else(|| "the command line".into()),
            Origin::Run { run } => format!("the settings of run {run}"),
        };
        ConfigError {
            place,
            key,
            message,
        }
    }

    /// Whether this layer sets `key` (dotted).
    fn sets(&self, key: &str) -> bool {
        lookup(&self.table, key).is_some()
    }
}

/// Layers merged in order (later wins), checked as a whole: the effective
/// settings, defaults not yet filled in.
pub fn merge(layers: &[ConfigLayer]) -> Result<RunConfig, ConfigError> {
    let mut merged = toml::Table::new();
    for layer in layers {
        let mut table = layer.table.clone();
        if let Some(toml::Value::Table(strategy)) = table.remove("strategy") {
            let earlier = merged
                .get("strategy")
                .and_then(|s| s.get("name"))
                .and_then(|n| n.as_str());
            let later = strategy.get("name").and_then(|n| n.as_str());
            match (earlier, later) {
                (Some(a), Some(b)) if a != b => {
                    merged.insert("strategy".into(), toml::Value::Table(strategy));
                }
                _ => overlay(&mut merged, "strategy", toml::Value::Table(strategy)),
            }
        }
        for (key, value) in table {
            overlay(&mut merged, &key, value);
        }
    }
    // Blame the last layer that set the key.
    let blame = |key: Option<String>, message: String| match key
        .as_deref()
        .and_then(|k| layers.iter().rev().find(|l| l.sets(k)))
    {
        Some(layer) => layer.error(key, message),
        None => ConfigError {
            place: "the settings".into(),
            key,
            message,
        },
    };
    check_strategy_table(&merged, true).map_err(|(k, m)| blame(k, m))?;
    let config = parse_table(&merged).map_err(|(k, m)| blame(k, m))?;
    config.check().map_err(|(k, m)| blame(Some(k), m))?;
    Ok(config)
}

/// The key `key` of `into` set to `value`, tables merged key by key.
pub(crate) fn overlay(into: &mut toml::Table, key: &str, value: toml::Value) {
    match (into.get_mut(key), value) {
        (Some(toml::Value::Table(existing)), toml::Value::Table(new)) => {
            for (k, v) in new {
                overlay(existing, &k, v);
            }
        }
        (_, value) => {
            into.insert(key.to_string(), value);
        }
    }
}

fn lookup<'t>(table: &'t toml::Table, key: &str) -> Option<&'t toml::Value> {
    let mut parts = key.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

fn absolutize(table: &mut toml::Table, key: &str, dir: &Path) {
    let (section, name) = match key.split_once('.') {
        Some((s, n)) => (Some(s), n),
        None => (None, key),
    };
    let target = match section {
        Some(s) => match table.get_mut(s).and_then(|v| v.as_table_mut()) {
            Some(t) => t,
            None => return,
        },
        None => table,
    };
    let resolve = |v: &mut toml::Value| {
        if let Some(p) = v.as_str() {
            let path = Path::new(p);
            if path.is_relative() {
                *v = toml::Value::String(dir.join(path).display().to_string());
            }
        }
    };
    match target.get_mut(name) {
        Some(toml::Value::Array(items)) => items.iter_mut().for_each(resolve),
        Some(v) => resolve(v),
        None => {}
    }
}

/// One layer's keys parsed and checked on their own. A layer may set
/// strategy keys without naming the strategy (another layer names it):
/// those are checked to belong to some strategy here, and as a whole once
/// merged.
fn layer_parse(table: &toml::Table) -> Result<RunConfig, (Option<String>, String)> {
    check_strategy_table(table, false)?;
    let mut table = table.clone();
    if table
        .get("strategy")
        .and_then(|s| s.as_table())
        .is_some_and(|s| !s.contains_key("name"))
    {
        table.remove("strategy");
    }
    let config = parse_table(&table)?;
    config.check().map_err(|(k, m)| (Some(k), m))?;
    Ok(config)
}

/// The analyst is one model answering at once: not an ensemble, not a
/// batch (answers within hours), not `external` (nobody to ask).
fn check_analyst(spec: &str) -> Result<(), String> {
    check_helper_model(spec, "analyst")
}

/// A model kevo calls itself between proposals (`role`: the analyst, the
/// meta-prompter) is one model that answers at once.
pub(crate) fn check_helper_model(spec: &str, role: &str) -> Result<(), String> {
    let specs = kevo_proposer::parse_specs(spec).map_err(|e| e.to_string())?;
    match specs.as_slice() {
        [one] => match one.kind {
            kevo_proposer::SpecKind::External => Err(format!(
                "`external` cannot be the {role}: the {role} is called by kevo"
            )),
            kevo_proposer::SpecKind::Batch { .. } => Err(format!(
                "a `batch:` model answers within hours; the {role} must answer before the next prompt"
            )),
            _ => Ok(()),
        },
        _ => Err(format!(
            "names {} models; the {role} is one model",
            specs.len()
        )),
    }
}

/// `replay:FILE` models of a file name FILE relative to the file too
/// (`#mode` and `=weight` kept). A `cmd:` command is left as written: it
/// runs in the working directory, as on the command line.
fn absolutize_replays(table: &mut toml::Table, dir: &Path) {
    let Some(llm) = table.get_mut("llm").and_then(|l| l.as_table_mut()) else {
        return;
    };
    if let Some(toml::Value::Array(models)) = llm.get_mut("models") {
        for model in models {
            absolutize_replay(model, dir);
        }
    }
    for helper in ["analyst", "meta_prompter"] {
        if let Some(model) = llm.get_mut(helper) {
            absolutize_replay(model, dir);
        }
    }
}

/// A `replay:FILE[#mode][=weight]` spec with FILE made absolute against
/// `dir`; any other value is left as it is.
fn absolutize_replay(model: &mut toml::Value, dir: &Path) {
    let Some(spec) = model.as_str() else { return };
    let Some(rest) = spec.trim().strip_prefix("replay:") else {
        return;
    };
    let (body, weight) = match rest.rsplit_once('=') {
        Some((b, w)) if w.trim().parse::<f64>().is_ok() => (b, format!("={w}")),
        _ => (rest, String::new()),
    };
    let (file, mode) = match body.rsplit_once('#') {
        Some((f, m)) => (f, format!("#{m}")),
        None => (body, String::new()),
    };
    if Path::new(file).is_relative() {
        *model = toml::Value::String(format!("replay:{}{mode}{weight}", dir.join(file).display()));
    }
}

/// A merged or single table parsed, errors as (key, message).
fn parse_table(table: &toml::Table) -> Result<RunConfig, (Option<String>, String)> {
    serde_path_to_error::deserialize(toml::Value::Table(table.clone())).map_err(
        |e: serde_path_to_error::Error<toml::de::Error>| {
            let key = e.path().to_string();
            let key = (key != "." && !key.is_empty()).then_some(key);
            (key, e.into_inner().message().trim().to_string())
        },
    )
}

/// The strategy's own keys: a table without a name, or keys of another
/// strategy than the one named, say which strategy they belong to.
fn check_strategy_table(
    table: &toml::Table,
    require_name: bool,
) -> Result<(), (Option<String>, String)> {
    let Some(strategy) = table.get("strategy").and_then(|s| s.as_table()) else {
        return Ok(());
    };
    let name = match strategy.get("name") {
        Some(toml::Value::String(name)) => name.as_str(),
        Some(_) => {
            return Err((
                Some("strategy.name".into()),
                "must be a string: one-plus-one, map-elites or islands".into(),
            ));
        }
        None if !require_name => "",
        None => {
            let key = strategy.keys().next().map(|k| format!("strategy.{k}"));
            return Err((
                key,
                "the strategy has no name: set `name` in [strategy] (one-plus-one, map-elites or islands) or give --strategy".into(),
            ));
        }
    };
    // Each strategy's keys, from its settings as written (not a list
    // kept by hand beside the structs).
    let keys_of = |config: StrategyConfig| -> Vec<String> {
        toml::Table::try_from(&config)
            .map(|t| t.keys().filter(|k| *k != "name").cloned().collect())
            .unwrap_or_default()
    };
    let map_elites = keys_of(StrategyConfig::MapElites(Default::default()));
    let islands = keys_of(StrategyConfig::Islands(Default::default()));
    let allowed: &[String] = match name {
        // Unnamed here: any strategy's key.
        "" | "one-plus-one" => &[],
        "map-elites" => &map_elites,
        "islands" => &islands,
        other => {
            return Err((
                Some("strategy.name".into()),
                format!("`{other}` is not a strategy (one-plus-one, map-elites, islands)"),
            ));
        }
    };
    for key in strategy.keys().filter(|k| *k != "name") {
        if allowed.contains(key) {
            continue;
        }
        let belongs: Vec<&str> = [("map-elites", &map_elites), ("islands", &islands)]
            .iter()
            .filter(|(_, keys)| keys.contains(key))
            .map(|(n, _)| *n)
            .collect();
        if name.is_empty() && !belongs.is_empty() {
            continue;
        }
        let message = if belongs.is_empty() {
            format!("`{key}` is not a setting of any strategy")
        } else {
            format!(
                "applies to {} only, not to {name}; choose the strategy with `name` or --strategy",
                belongs.join(" or ")
            )
        };
        return Err((Some(format!("strategy.{key}")), message));
    }
    Ok(())
}

fn located_in(
    path: &Path,
    key: Option<String>,
    line: Option<usize>,
    message: String,
) -> ConfigError {
    ConfigError {
        place: match line {
            Some(line) => format!("{}:{line}", path.display()),
            None => path.display().to_string(),
        },
        key,
        message,
    }
}

/// The 1-based line of byte `offset` in `text`.
pub(crate) fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The line where dotted `key` is written in TOML `text`.
pub(crate) fn key_line(text: &str, key: &str) -> Option<usize> {
    let parts: Vec<&str> = key
        .split('.')
        .map(|part| part.split('[').next().unwrap_or(part))
        .collect();
    key_parts_line(text, &parts)
}

/// The line where the key of these parts (which may hold dots) is written.
pub(crate) fn key_parts_line(text: &str, parts: &[&str]) -> Option<usize> {
    let parsed = toml::de::DeTable::parse(text).ok()?;
    let mut table = parsed.get_ref();
    let mut span = None;
    for &part in parts {
        let (k, v) = table.iter().find(|(k, _)| k.get_ref().as_ref() == part)?;
        span = Some(k.span());
        match v.get_ref() {
            toml::de::DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    span.map(|s| line_at(text, s.start))
}

fn positive(key: &str, v: Option<f64>, what: &str) -> Result<(), (String, String)> {
    match v {
        Some(v) if !(v.is_finite() && v > 0.0) => Err((
            key.into(),
            format!("must be a positive number{what}, not {v}"),
        )),
        _ => Ok(()),
    }
}

fn non_negative(key: &str, v: Option<f64>, what: &str) -> Result<(), (String, String)> {
    match v {
        Some(v) if !(v.is_finite() && v >= 0.0) => Err((
            key.into(),
            format!("must be a non-negative number{what}, not {v}"),
        )),
        _ => Ok(()),
    }
}

fn at_least_one<T: Into<u64> + Copy>(key: &str, v: Option<T>) -> Result<(), (String, String)> {
    match v {
        Some(v) if v.into() == 0 => Err((key.into(), "must be at least 1".into())),
        _ => Ok(()),
    }
}

impl RunConfig {
    /// Values in range; (key, message) for the first that is not.
    fn check(&self) -> Result<(), (String, String)> {
        const SECONDS: &str = " of seconds";
        const GIB: &str = " of GiB";
        if let Some(task) = &self.task {
            kevo_tasks::resolve(task).map_err(|e| ("task".into(), e.to_string()))?;
        }
        if let Some(c) = &self.device.ceilings {
            positive(
                "device.ceilings.bandwidth_gbs",
                Some(c.bandwidth_gbs),
                " of GB/s",
            )?;
            positive(
                "device.ceilings.fp32_gflops",
                Some(c.fp32_gflops),
                " of GFLOPS",
            )?;
        }
        non_negative("timing.target_spread", self.timing.target_spread, "")?;
        if let Some(n) = self.timing.max_timed_runs
            && n < 10
        {
            return Err((
                "timing.max_timed_runs".into(),
                format!("must be at least 10 (medians and quartiles need them), not {n}"),
            ));
        }
        positive(
            "limits.candidate_timeout_s",
            self.limits.candidate_timeout_s,
            SECONDS,
        )?;
        positive(
            "limits.compile_timeout_s",
            self.limits.compile_timeout_s,
            SECONDS,
        )?;
        non_negative(
            "limits.compile_memory_gib",
            self.limits.compile_memory_gib,
            GIB,
        )?;
        non_negative(
            "limits.worker_memory_gib",
            self.limits.worker_memory_gib,
            GIB,
        )?;
        if self.sandbox.required == Some(true) && self.sandbox.enabled == Some(false) {
            return Err((
                "sandbox.required".into(),
                "a sandbox cannot be required and disabled at once".into(),
            ));
        }
        if let Some(models) = &self.llm.models {
            if models.is_empty() {
                return Err(("llm.models".into(), "names no model".into()));
            }
            kevo_proposer::parse_specs(&models.join(","))
                .map_err(|e| ("llm.models".to_string(), e.to_string()))?;
        }
        for tool in self.device.sanitize_winner.iter().flatten() {
            tool.parse::<kevo_worker::sanitizer::SanitizerTool>()
                .map_err(|m| ("device.sanitize_winner".to_string(), m))?;
        }
        if let Some(analyst) = &self.llm.analyst {
            check_analyst(analyst).map_err(|m| ("llm.analyst".to_string(), m))?;
        }
        if let Some(m) = &self.llm.meta_prompter {
            check_helper_model(m, "meta-prompter")
                .map_err(|m| ("llm.meta_prompter".to_string(), m))?;
        }
        at_least_one("llm.meta_every", self.llm.meta_every)?;
        if self.llm.model_choice.is_some_and(|c| c.is_bandit())
            && let Some(models) = &self.llm.models
            && kevo_proposer::parse_specs(&models.join(",")).is_ok_and(|s| s.len() < 2)
        {
            return Err((
                "llm.model_choice".into(),
                "a bandit chooses among several models: name at least two in llm.models (--llm a,b)"
                    .into(),
            ));
        }
        positive("llm.timeout_s", self.llm.timeout_s, SECONDS)?;
        at_least_one("llm.concurrency", self.llm.concurrency)?;
        at_least_one(
            "llm.candidates_per_iteration",
            self.llm.candidates_per_iteration,
        )?;
        positive("llm.batch_poll_s", self.llm.batch_poll_s, SECONDS)?;
        if self.llm.record.is_some()
            && let Some(models) = &self.llm.models
            && models.iter().any(|m| {
                let m = m.trim_start();
                m.starts_with("batch:") || m == "external" || m.starts_with("external=")
            })
        {
            return Err((
                "llm.record".into(),
                "records live model calls; `external` and `batch:` models make none".into(),
            ));
        }
        positive("budget.max_wall_s", self.budget.max_wall_s, SECONDS)?;
        non_negative("budget.max_cost_usd", self.budget.max_cost_usd, " of USD")?;
        if let Some(t) = self.budget.target_score
            && !t.is_finite()
        {
            return Err((
                "budget.target_score".into(),
                format!("must be a number, not {t}"),
            ));
        }
        at_least_one(
            "prompt.context_budget_tokens",
            self.prompt.context_budget_tokens.map(|v| v as u64),
        )?;
        if let Some(gap) = self.prompt.stagnation_gap
            && !(gap.is_finite() && (0.0..1.0).contains(&gap))
        {
            return Err((
                "prompt.stagnation_gap".into(),
                format!("must be a fraction from 0 to below 1 (0.15 = within 15 %), not {gap}"),
            ));
        }
        self.promotion_rule()
            .map_err(|message| ("promotion".to_string(), message))?;
        if let Some(f) = self.promotion.validate_max_slowdown
            && !(f.is_finite() && f >= 1.0)
        {
            return Err((
                "promotion.validate_max_slowdown".into(),
                format!(
                    "must be a time ratio of at least 1 (1.5 = up to 50 % slower than the seed), not {f}"
                ),
            ));
        }
        match &self.strategy {
            Some(StrategyConfig::MapElites(c)) => {
                at_least_one("strategy.islands", Some(c.islands))?;
                let s = &c.selection;
                let weights = [s.uniform, s.fitness, s.curiosity, s.island];
                if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0))
                    || weights.iter().sum::<f64>() <= 0.0
                {
                    return Err((
                        "strategy.selection".into(),
                        "weights must be non-negative numbers, not all 0".into(),
                    ));
                }
                if !(c.decay.is_finite() && c.decay > 0.0 && c.decay <= 1.0) {
                    return Err((
                        "strategy.decay".into(),
                        format!("must be in (0, 1], not {}", c.decay),
                    ));
                }
            }
            Some(StrategyConfig::Islands(c)) => {
                at_least_one("strategy.islands", Some(c.islands))?;
                at_least_one("strategy.population", Some(c.population as u64))?;
                at_least_one("strategy.migration_interval", Some(c.migration_interval))?;
                if !(0.0..=1.0).contains(&c.exploit) {
                    return Err((
                        "strategy.exploit".into(),
                        format!("must be a probability between 0 and 1, not {}", c.exploit),
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The promotion rule and the final re-measurement these settings give.
    fn promotion_rule(&self) -> Result<(Promotion, u32), String> {
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

    fn options_for(&self, task: String) -> Result<EvolveOptions, ConfigError> {
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
        o.backend = self.device.backend.unwrap_or(BackendKind::Auto);
        o.selector = kevo_backend::DeviceSelector {
            platform: self.device.platform.clone(),
            device: self.device.device.clone(),
        };
        o.declared_ceilings = self.device.ceilings.map(|c| kevo_worker::DeclaredCeilings {
            bandwidth_gbs: c.bandwidth_gbs,
            fp32_gflops: c.fp32_gflops,
        });
        o.fast_math = self.device.fast_math.unwrap_or(true);
        o.devices = self.device.devices.clone().unwrap_or_default();
        o.mixed_devices = self.device.mixed_devices.unwrap_or(false);
        o.triton_python = self.device.triton_python.clone();
        o.nats = self.device.nats.clone().map(|url| crate::NatsOptions {
            url,
            namespace: self
                .device
                .nats_namespace
                .clone()
                .unwrap_or_else(|| "kevo".into()),
        });
        o.profile = self.device.profile.unwrap_or(false);
        o.profile_every = self.device.profile_every.unwrap_or(false);
        o.sanitize_winner = self.device.sanitize_winner.clone().unwrap_or_default();
        o.sizes = self.sizes.unwrap_or(SizeSet::Full);
        o.timing = kevo_worker::TimingOptions {
            cuda_graph: self.timing.cuda_graph.unwrap_or(true),
            flush_l2: self.timing.flush_l2.unwrap_or(false),
            target_spread: Some(self.timing.target_spread.unwrap_or(DEFAULT_TARGET_SPREAD)),
            max_timed_runs: Some(self.timing.max_timed_runs.unwrap_or(DEFAULT_MAX_TIMED_RUNS)),
        };
        let gib = |v: f64| (v * f64::from(1u32 << 30)) as u64;
        let defaults = kevo_worker::Limits::default();
        o.limits = kevo_worker::Limits {
            compile_memory_bytes: self
                .limits
                .compile_memory_gib
                .map(|v| gib(v).max(64 << 20))
                .unwrap_or(defaults.compile_memory_bytes),
            worker_memory_bytes: self
                .limits
                .worker_memory_gib
                .map(gib)
                .unwrap_or(defaults.worker_memory_bytes),
            compile_timeout_s: self
                .limits
                .compile_timeout_s
                .unwrap_or(defaults.compile_timeout_s),
        };
        o.timeout_s = self.limits.candidate_timeout_s;
        o.sandbox = kevo_sandbox::Options {
            enabled: self.sandbox.enabled.unwrap_or(true),
            required: self.sandbox.required.unwrap_or(false),
            skip: self.sandbox.skip.clone().unwrap_or_default(),
            readable: self.sandbox.allow_read.clone().unwrap_or_default(),
            writable: self.sandbox.allow_write.clone().unwrap_or_default(),
            ..Default::default()
        };
        o.llm_config = self.llm.providers.clone();
        o.llm_timeout_s = self.llm.timeout_s;
        o.llm_retries = self.llm.retries;
        o.accept_unknown_cost = self.llm.accept_unknown_cost.unwrap_or(false);
        o.record = self.llm.record.clone();
        o.analyst = self.llm.analyst.clone();
        o.concurrency = self.llm.concurrency.unwrap_or(1);
        o.candidates_per_iteration = self.llm.candidates_per_iteration.unwrap_or(1);
        o.batch_poll_s = self.llm.batch_poll_s.unwrap_or(o.batch_poll_s);
        o.edit_mode = match self.llm.edit_mode {
            Some(EditModeName::Diff) => EditMode::SearchReplace,
            _ => EditMode::FullSource,
        };
        o.rng_seed = self.llm.seed.unwrap_or(o.rng_seed);
        o.model_choice = self.llm.model_choice.unwrap_or_default();
        o.meta_prompt = self
            .llm
            .meta_prompter
            .clone()
            .map(|prompter| crate::MetaPromptOptions {
                prompter,
                every: self.llm.meta_every.unwrap_or(crate::DEFAULT_META_EVERY),
            });
        o.max_wall_s = self.budget.max_wall_s;
        o.max_cost_usd = self.budget.max_cost_usd;
        o.target_score = self.budget.target_score;
        o.prompt = PromptOptions {
            templates: self.prompt.templates.clone(),
            history_len: self.prompt.history.unwrap_or(o.prompt.history_len),
            stagnation: StagnationParams {
                window: self
                    .prompt
                    .stagnation_window
                    .unwrap_or(o.prompt.stagnation.window),
                gap: self
                    .prompt
                    .stagnation_gap
                    .unwrap_or(o.prompt.stagnation.gap),
            },
        };
        o.context_budget_tokens = self.prompt.context_budget_tokens;
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
        Ok(o)
    }

    /// Every setting of `options`, written out: what `kevo config show`
    /// and `kevo show RUN --config` print. A run started from a kernel
    /// file has its source stored, not the path, so `seed_kernel` is left
    /// out.
    pub fn from_options(o: &EvolveOptions) -> RunConfig {
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

/// The default `timing.target_spread`: timed runs repeat until
/// (q3 - q1) / median is at most 1 % ...
pub const DEFAULT_TARGET_SPREAD: f64 = 0.01;
/// ... or 50 runs were timed.
pub const DEFAULT_MAX_TIMED_RUNS: usize = 50;

#[cfg(test)]
mod tests;
