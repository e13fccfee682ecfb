//! Run settings from the command line. Every flag is defined once, as a
//! field of a settings section in `kevo_evolve::config`; a command offers
//! the flags its [`FlagSet`] takes, and they become a layer over a config
//! file (`--config`) and a stored run's settings (`--config-from`). The
//! layering and every check live in `kevo_evolve::config`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{ArgMatches, Args, Command, FromArgMatches, ValueEnum};
use kevo_evolve::config::{
    ConfigLayer, RunConfig, StrategyFlags, settings_args, settings_from_matches,
};
use kevo_runtimes::BackendKind;
use kevo_tasks::SizeSet;

/// The settings flags a command offers: each is defined once, as a field
/// of a settings section (`kevo_evolve::config`), and `K` picks which.
pub struct SettingsFlags<K> {
    /// The keys the flags set; every other key is absent.
    pub config: RunConfig,
    pub strategy: StrategyFlags,
    /// `--dialect`, another way to name the backend.
    pub dialect: Option<DialectArg>,
    keys: std::marker::PhantomData<K>,
}

/// Which settings keys a command's flags may set.
pub trait FlagSet {
    fn takes(key: &str) -> bool;
}

/// Every settings flag: `evolve`, `config show`.
pub struct AllSettings;

impl FlagSet for AllSettings {
    fn takes(_: &str) -> bool {
        true
    }
}

/// The device, timing, limit and sandbox flags of the commands that
/// evaluate without searching (`eval`, `bench`, `tune`, `cross`, `task
/// check`, `kernelbench eval`). Their task, sizes and time limit are their
/// own flags, whose meaning differs by command.
pub struct EvaluationSettings;

impl FlagSet for EvaluationSettings {
    fn takes(key: &str) -> bool {
        matches!(
            key,
            "device.backend"
                | "device.triton_python"
                | "device.platform"
                | "device.device"
                | "device.ceilings"
                | "limits.compile_timeout_s"
                | "limits.compile_memory_gib"
                | "limits.worker_memory_gib"
        ) || key.starts_with("timing.")
            || key.starts_with("sandbox.")
    }
}

/// Every setting of a run that has a flag (`evolve`, `config show`).
pub type RunFlags = SettingsFlags<AllSettings>;
/// Device, timing, limit and sandbox flags (`eval`, `bench`, `tune`, ...).
pub type DeviceArgs = SettingsFlags<EvaluationSettings>;

impl<K> Default for SettingsFlags<K> {
    fn default() -> Self {
        SettingsFlags {
            config: RunConfig::default(),
            strategy: StrategyFlags::default(),
            dialect: None,
            keys: std::marker::PhantomData,
        }
    }
}

impl<K: FlagSet> Args for SettingsFlags<K> {
    fn augment_args(command: Command) -> Command {
        let dialect = clap::Arg::new("dialect")
            .long("dialect")
            .value_parser(clap::value_parser!(DialectArg))
            .conflicts_with("device.backend")
            .help(
                "The kernel language instead of a backend: cuda, opencl or triton (each picks the backend that runs it)",
            );
        settings_args()
            .into_iter()
            .filter(|arg| K::takes(arg.get_id().as_str()))
            .fold(command, |command, arg| command.arg(arg))
            .arg(dialect)
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}

impl<K: FlagSet> FromArgMatches for SettingsFlags<K> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let (config, strategy) = settings_from_matches(matches, K::takes)?;
        Ok(SettingsFlags {
            config,
            strategy,
            dialect: matches.get_one::<DialectArg>("dialect").copied(),
            keys: std::marker::PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl<K> SettingsFlags<K> {
    /// The layer these flags make, `extra` set over them (a command's own
    /// flags for the task, sizes and time limit), checked on its own.
    pub fn layer_with(&self, extra: impl FnOnce(&mut RunConfig)) -> Result<ConfigLayer> {
        let mut config = self.config.clone();
        extra(&mut config);
        let mut renamed = Vec::new();
        if let Some(dialect) = self.dialect {
            config.device.backend = Some(dialect.backend());
            renamed.push(("device.backend", "--dialect"));
        }
        Ok(ConfigLayer::from_flag_values(
            &config,
            &self.strategy,
            &renamed,
        )?)
    }

    /// The layer these flags make.
    pub fn layer(&self) -> Result<ConfigLayer> {
        self.layer_with(|_| {})
    }
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
    flags: ConfigLayer,
) -> Result<RunConfig> {
    let mut layers: Vec<ConfigLayer> = from_run.into_iter().collect();
    if let Some(path) = &file.config {
        layers.push(ConfigLayer::from_file(path)?);
    }
    layers.push(flags);
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
    let layer = device.layer_with(|c| {
        c.task = task.map(String::from);
        c.sizes = sizes;
        c.limits.candidate_timeout_s = timeout;
        c.device.fast_math = no_fast_math.then_some(false);
    })?;
    effective(None, file, layer)
}

/// The settings of run `run`, as a layer for `--config-from`, and the
/// kernel it started from (kept when no layer names another).
pub async fn from_run(
    store: &kevo_store::Store,
    run: &str,
) -> Result<(ConfigLayer, Option<String>)> {
    let id = store
        .resolve_run(run)
        .await
        .with_context(|| format!("--config-from {run}"))?;
    let run = id.0.as_str();
    let info = store
        .run(&id)
        .await
        .with_context(|| format!("--config-from {run}"))?;
    let options = kevo_evolve::stored_options(&info)?;
    Ok((
        ConfigLayer::from_run(run, &options)?,
        options.start_source.clone(),
    ))
}
