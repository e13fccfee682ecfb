//! The settings as command-line flags: every flag is a field of a section
//! ([`RunConfig`]) or of [`StrategyFlags`], whose clap id is the dotted key
//! it sets. From those definitions alone come the flags a command offers
//! ([`settings_args`]), the layer a command line makes, and which flag set
//! which key, for messages.

use std::ffi::OsString;

use clap::{ArgMatches, Args, Command, FromArgMatches};
use kevo_strategy::SelectionMix;
use serde::Serialize;

use super::layer::{ConfigError, ConfigLayer, PATH_KEYS};
use super::sections::RunConfig;

/// The strategy's flags. They are kept apart from [`RunConfig::strategy`]
/// because a strategy's table depends on its name: these keys go into the
/// layer as given, and the merge checks them against the strategy named.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Args)]
#[command(next_help_heading = "Strategy")]
pub struct StrategyFlags {
    /// one-plus-one (one incumbent, the default), map-elites (an archive
    /// over kernel descriptors) or islands (populations with ring
    /// migration).
    #[arg(id = "strategy.name", long = "strategy", value_name = "STRATEGY", value_parser = ["one-plus-one", "map-elites", "islands"])]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// map-elites: parent-selection weights, e.g.
    /// "uniform=0.25,fitness=0.25,curiosity=0.5,island=0".
    #[arg(id = "strategy.selection", long = "selection", value_name = "MIX", value_parser = SelectionMix::parse)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionMix>,
    /// map-elites and islands: how many islands.
    #[arg(id = "strategy.islands", long = "islands", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub islands: Option<u32>,
    /// map-elites and islands: elites other than the parent shown to the
    /// proposer.
    #[arg(id = "strategy.elites_shown", long = "elites-shown", value_name = "K")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elites_shown: Option<usize>,
    /// map-elites and islands: kernels from other cells or islands shown.
    #[arg(id = "strategy.inspirations", long = "inspirations", value_name = "K")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inspirations: Option<usize>,
    /// map-elites: hints per prompt at most.
    #[arg(id = "strategy.hints", long = "hints", value_name = "K")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hints: Option<usize>,
    /// islands: members an island keeps.
    #[arg(id = "strategy.population", long = "population", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub population: Option<usize>,
    /// islands: generations between ring migrations.
    #[arg(
        id = "strategy.migration_interval",
        long = "migration-interval",
        value_name = "M"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration_interval: Option<u32>,
    /// islands: probability that the parent is the island's best.
    #[arg(id = "strategy.exploit", long = "exploit", value_name = "P")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exploit: Option<f64>,
    /// map-elites and islands: seed of the strategy's random choices.
    #[arg(id = "strategy.rng_seed", long = "strategy-seed", value_name = "S")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rng_seed: Option<u64>,
}

/// Every settings flag, as clap arguments whose ids are the keys they set;
/// a flag with no value name of its own shows its name in capitals.
pub fn settings_args() -> Vec<clap::Arg> {
    let command = StrategyFlags::augment_args(RunConfig::augment_args(Command::new("settings")));
    command
        .get_arguments()
        .map(|arg| {
            let named = arg
                .get_value_names()
                .is_some_and(|names| names.iter().all(|n| n.as_str() != arg.get_id().as_str()));
            (arg, named)
        })
        .map(|(arg, named)| match arg.get_long() {
            Some(long) if !named && arg.get_action().takes_values() => {
                let name = long.to_uppercase().replace('-', "_");
                arg.clone().value_name(name)
            }
            _ => arg.clone(),
        })
        .collect()
}

/// A flag that takes no value: it sets its key to true, or to false for a
/// `--no-` flag.
pub(super) fn is_switch(arg: &clap::Arg) -> bool {
    arg.get_num_args().is_some_and(|n| n.max_values() == 0)
}

/// The flag (`--name`) among `args` that sets dotted `key`.
fn flag_of(args: &[clap::Arg], key: &str) -> Option<String> {
    args.iter()
        .find(|arg| arg.get_id().as_str() == key)
        .and_then(|arg| arg.get_long())
        .map(|long| format!("--{long}"))
}

/// The settings flags of `matches` whose keys `takes` accepts, read by
/// parsing them again with every settings flag defined: a command may
/// offer only some of the flags, and the derived readers expect all.
/// Values from the environment are read again the same way, and left out
/// when `takes` refuses their key.
pub fn settings_from_matches(
    matches: &ArgMatches,
    takes: impl Fn(&str) -> bool,
) -> Result<(RunConfig, StrategyFlags), clap::Error> {
    let args = settings_args();
    let mut argv: Vec<OsString> = Vec::new();
    for arg in &args {
        let id = arg.get_id().as_str();
        // Only ids the command defines may be asked about.
        if !takes(id) {
            continue;
        }
        let given = matches!(
            matches.value_source(id),
            Some(clap::parser::ValueSource::CommandLine)
        );
        let (true, Some(long)) = (given, arg.get_long()) else {
            continue;
        };
        if is_switch(arg) {
            argv.push(format!("--{long}").into());
            continue;
        }
        for value in matches.get_raw(id).into_iter().flatten() {
            let mut flag = OsString::from(format!("--{long}="));
            flag.push(value);
            argv.push(flag);
        }
    }
    // Values from the environment for flags the command does not take.
    let refused: Vec<String> = args
        .iter()
        .filter(|arg| arg.get_env().is_some() && !takes(arg.get_id().as_str()))
        .map(|arg| arg.get_id().to_string())
        .collect();
    let command = Command::new("settings").no_binary_name(true).args(args);
    let parsed = command.try_get_matches_from(argv)?;
    let config = without_keys(RunConfig::from_arg_matches(&parsed)?, &refused);
    let strategy = StrategyFlags::from_arg_matches(&parsed)?;
    Ok((config, strategy))
}

/// Every settings key with its flag and meaning, as Markdown: the
/// reference in docs/guide/settings.md (`kevo config keys`), written from
/// the definitions themselves.
pub fn settings_reference() -> String {
    let mut out = String::new();
    let mut section = "";
    for arg in settings_args() {
        let key = arg.get_id().as_str().to_string();
        let this = key.split_once('.').map(|(s, _)| s).unwrap_or("");
        if this != section || out.is_empty() {
            section = match this {
                "" => "",
                other => SECTION_NAMES
                    .iter()
                    .find(|s| **s == other)
                    .copied()
                    .unwrap_or("other"),
            };
            let title = match section {
                "" => "Top level".to_string(),
                name => format!("`[{name}]`"),
            };
            out.push_str(&format!(
                "\n## {title}\n\n| key | flag | meaning |\n|---|---|---|\n"
            ));
        }
        let flag = match (arg.get_long(), arg.get_value_names()) {
            (Some(long), Some(names)) if !is_switch(&arg) => {
                format!("`--{long} {}`", names[0])
            }
            (Some(long), _) => format!("`--{long}`"),
            (None, _) => String::new(),
        };
        let help = arg
            .get_help()
            .map(|h| h.to_string().replace('|', "\\|"))
            .unwrap_or_default();
        let name = key.split_once('.').map(|(_, k)| k).unwrap_or(&key);
        out.push_str(&format!("| `{name}` | {flag} | {help} |\n"));
    }
    out
}

const SECTION_NAMES: &[&str] = &[
    "device",
    "timing",
    "limits",
    "sandbox",
    "llm",
    "budget",
    "prompt",
    "promotion",
    "tune",
    "strategy",
];

/// `config` with the dotted `keys` unset.
fn without_keys(config: RunConfig, keys: &[String]) -> RunConfig {
    if keys.is_empty() {
        return config;
    }
    let Ok(mut table) = toml::Table::try_from(&config) else {
        return config;
    };
    for key in keys {
        match key.split_once('.') {
            Some((section, name)) => {
                if let Some(toml::Value::Table(t)) = table.get_mut(section) {
                    t.remove(name);
                }
            }
            None => {
                table.remove(key);
            }
        }
    }
    toml::Value::Table(table).try_into().unwrap_or(config)
}

impl ConfigLayer {
    /// The command line's settings as a layer: the keys `config` and
    /// `strategy` set, paths made absolute against the working directory
    /// (stored runs are resumed from any directory). `renamed` names a key
    /// set by another flag than its own (`--dialect` sets the backend).
    pub fn from_flag_values(
        config: &RunConfig,
        strategy: &StrategyFlags,
        renamed: &[(&str, &str)],
    ) -> Result<ConfigLayer, ConfigError> {
        let error = |message: String| ConfigError {
            place: "the command line".into(),
            key: None,
            message,
        };
        let mut table = toml::Table::try_from(config).map_err(|e| error(e.to_string()))?;
        let strategy = toml::Table::try_from(strategy).map_err(|e| error(e.to_string()))?;
        if !strategy.is_empty() {
            table.insert("strategy".into(), toml::Value::Table(strategy));
        }
        for key in PATH_KEYS {
            super::layer::absolutize_with(&mut table, key, |p| {
                std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
            });
        }
        let args = settings_args();
        let flags = leaf_keys(&table)
            .into_iter()
            .filter_map(|key| {
                let flag = match renamed.iter().find(|(k, _)| *k == key) {
                    Some((_, flag)) => Some(flag.to_string()),
                    None => flag_of(&args, &key),
                };
                flag.map(|flag| (key, flag))
            })
            .collect();
        ConfigLayer::from_flags(table, flags)
    }
}

/// The dotted keys a layer's table sets: a section's keys, and the top's
/// keys that are not sections.
fn leaf_keys(table: &toml::Table) -> Vec<String> {
    let mut keys = Vec::new();
    for (key, value) in table {
        match value {
            toml::Value::Table(section) => {
                keys.extend(section.keys().map(|k| format!("{key}.{k}")));
            }
            _ => keys.push(key.clone()),
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::merge;

    /// Values tried for a flag, in order, until one is accepted.
    const SAMPLES: &[&str] = &[
        "3",
        "12",
        "0.5",
        "4000",
        "20,100",
        "smoke",
        "opencl",
        "tpe",
        "ucb",
        "files",
        "memcheck",
        "uniform=1",
        "replay:answers.jsonl",
        "nats://127.0.0.1:4222",
        "heat2d",
    ];

    /// Flags a key needs beside its own to mean anything.
    fn companions(key: &str) -> Vec<&'static str> {
        match key {
            "device.nats_namespace" => vec!["--nats", "nats://127.0.0.1:4222"],
            "llm.meta_every" => vec!["--meta-prompter", "replay:answers.jsonl"],
            "strategy.population" | "strategy.migration_interval" | "strategy.exploit" => {
                vec!["--strategy", "islands"]
            }
            k if k.starts_with("strategy.") && k != "strategy.name" => {
                vec!["--strategy", "map-elites"]
            }
            _ => vec![],
        }
    }

    /// The settings `flags` give, written out as `kevo config show` does.
    fn shown(flags: &[String]) -> Result<toml::Table, String> {
        let command = Command::new("t").no_binary_name(true).args(settings_args());
        let matches = command
            .try_get_matches_from(flags)
            .map_err(|e| e.to_string())?;
        let (config, strategy) =
            settings_from_matches(&matches, |_| true).map_err(|e| e.to_string())?;
        let layer =
            ConfigLayer::from_flag_values(&config, &strategy, &[]).map_err(|e| e.to_string())?;
        let merged = merge(&[layer]).map_err(|e| e.to_string())?;
        let shown = merged.shown().map_err(|e| e.to_string())?;
        // What a file written by `config show` is read back as.
        let text = shown.to_toml();
        let again = ConfigLayer::from_text(std::path::Path::new("shown.toml"), text.clone())
            .and_then(|layer| merge(&[layer]))
            .map_err(|e| format!("{e}\n{text}"))?;
        assert_eq!(
            again.shown().unwrap(),
            shown,
            "{flags:?}: config show does not read back"
        );
        toml::Table::try_from(shown).map_err(|e| e.to_string())
    }

    fn lookup<'t>(table: &'t toml::Table, key: &str) -> Option<&'t toml::Value> {
        super::super::layer::lookup(table, key)
    }

    /// `kevo config show` round-trips every flag: each flag, alone (with
    /// the flags it needs), comes back out under its key with its value.
    #[test]
    fn every_flag_comes_back_under_its_key() {
        for arg in settings_args() {
            let key = arg.get_id().as_str().to_string();
            let long = format!("--{}", arg.get_long().expect("a settings flag is long"));
            let mut tried = Vec::new();
            let switch = is_switch(&arg);
            let values: Vec<Option<String>> = match (switch, arg.get_possible_values()) {
                (true, _) => vec![None],
                (false, possible) if !possible.is_empty() => possible
                    .iter()
                    .map(|p| Some(p.get_name().to_string()))
                    .collect(),
                _ => SAMPLES.iter().map(|s| Some(s.to_string())).collect(),
            };
            let found = values.into_iter().find_map(|value| {
                let mut flags: Vec<String> =
                    companions(&key).iter().map(|s| s.to_string()).collect();
                flags.push(long.clone());
                flags.extend(value.clone());
                match shown(&flags) {
                    Ok(table) => Some((flags, value, table)),
                    Err(e) => {
                        tried.push(e);
                        None
                    }
                }
            });
            let (flags, value, table) =
                found.unwrap_or_else(|| panic!("{long}: no value accepted: {tried:?}"));
            let out =
                lookup(&table, &key).unwrap_or_else(|| panic!("{flags:?}: `{key}` is not shown"));
            let Some(value) = value else {
                let expected = !long.starts_with("--no-");
                assert_eq!(
                    out.as_bool(),
                    Some(expected),
                    "{flags:?} shows {key} = {out}"
                );
                continue;
            };
            let text = match out {
                toml::Value::String(s) => s.clone(),
                toml::Value::Array(items) => items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(String::from)
                            .unwrap_or_else(|| i.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                toml::Value::Table(t) if key == "device.ceilings" => {
                    format!("{},{}", t["bandwidth_gbs"], t["fp32_gflops"])
                }
                other => other.to_string(),
            };
            let same = text == value
                || text.ends_with(&format!("/{value}"))
                || text.parse::<f64>().ok() == value.parse::<f64>().ok()
                    && text.parse::<f64>().is_ok()
                || key == "device.ceilings" && text == "20.0,100.0"
                || key == "strategy.selection" && out.is_table();
            assert!(same, "{flags:?} shows {key} = {out}, not {value}");
        }
    }

    /// What a command does not take is unset, whatever set it (an
    /// environment variable such as KEVO_LLM_CONFIG); the rest is kept.
    #[test]
    fn keys_a_command_does_not_take_are_unset() {
        let mut config = RunConfig::default();
        config.llm.providers = Some("/etc/providers.toml".into());
        config.device.backend = Some(kevo_runtimes::BackendKind::Opencl);
        let kept = without_keys(config, &["llm.providers".to_string()]);
        assert_eq!(kept.llm.providers, None);
        assert_eq!(
            kept.device.backend,
            Some(kevo_runtimes::BackendKind::Opencl)
        );
    }

    #[test]
    fn every_flag_id_is_a_key_a_file_may_set() {
        for arg in settings_args() {
            let key = arg.get_id().as_str();
            if key.starts_with("strategy.") {
                continue;
            }
            assert!(
                super::SECTION_NAMES
                    .contains(&key.split_once('.').map(|(s, _)| s).unwrap_or("device")),
                "{key}: no such section"
            );
            let table: toml::Table = match key.split_once('.') {
                Some((section, name)) => {
                    toml::from_str(&format!("[{section}]\n{name} = 1")).unwrap()
                }
                None => toml::from_str(&format!("{key} = 1")).unwrap(),
            };
            let error = super::super::layer::parse_table(&table)
                .err()
                .map(|(_, m)| m)
                .unwrap_or_default();
            assert!(!error.contains("unknown field"), "flag id {key}: {error}");
        }
    }
}
