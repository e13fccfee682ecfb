//! Layers of settings (a file, a stored run, the flags) and their merge: each
//! layer checked on its own, so a mistake is reported where it was made.

use std::fmt;
use std::path::{Path, PathBuf};

use super::sections::RunConfig;
use crate::config::check::check_strategy_table;
use crate::options::EvolveOptions;

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
    pub(super) table: toml::Table,
    pub(super) origin: Origin,
}

/// Keys whose values are paths: resolved against a file's directory.
pub(super) const PATH_KEYS: &[&str] = &[
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

    pub(super) fn check(&self) -> Result<(), ConfigError> {
        layer_parse(&self.table).map_err(|(key, message)| self.error(key, message))?;
        Ok(())
    }

    /// An error about `key` in this layer, placed at its line or flag.
    pub(super) fn error(&self, key: Option<String>, message: String) -> ConfigError {
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
    pub(super) fn sets(&self, key: &str) -> bool {
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

pub(super) fn lookup<'t>(table: &'t toml::Table, key: &str) -> Option<&'t toml::Value> {
    let mut parts = key.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

pub(super) fn absolutize(table: &mut toml::Table, key: &str, dir: &Path) {
    absolutize_with(table, key, |path| dir.join(path));
}

/// The path or paths at dotted `key` of `table`, each relative one
/// replaced by `resolve` of it.
pub(super) fn absolutize_with(
    table: &mut toml::Table,
    key: &str,
    resolve: impl Fn(&Path) -> PathBuf,
) {
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
    let resolve_value = |v: &mut toml::Value| {
        if let Some(p) = v.as_str() {
            let path = Path::new(p);
            if path.is_relative() {
                *v = toml::Value::String(resolve(path).display().to_string());
            }
        }
    };
    match target.get_mut(name) {
        Some(toml::Value::Array(items)) => items.iter_mut().for_each(resolve_value),
        Some(v) => resolve_value(v),
        None => {}
    }
}

/// One layer's keys parsed and checked on their own. A layer may set
/// strategy keys without naming the strategy (another layer names it):
/// those are checked to belong to some strategy here, and as a whole once
/// merged.
pub(super) fn layer_parse(table: &toml::Table) -> Result<RunConfig, (Option<String>, String)> {
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

/// `replay:FILE` models of a file name FILE relative to the file too
/// (`#mode` and `=weight` kept). A `cmd:` command is left as written: it
/// runs in the working directory, as on the command line.
pub(super) fn absolutize_replays(table: &mut toml::Table, dir: &Path) {
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
pub(super) fn absolutize_replay(model: &mut toml::Value, dir: &Path) {
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
pub(super) fn parse_table(table: &toml::Table) -> Result<RunConfig, (Option<String>, String)> {
    serde_path_to_error::deserialize(toml::Value::Table(table.clone())).map_err(
        |e: serde_path_to_error::Error<toml::de::Error>| {
            let key = e.path().to_string();
            let key = (key != "." && !key.is_empty()).then_some(key);
            (key, e.into_inner().message().trim().to_string())
        },
    )
}

pub(super) fn located_in(
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
