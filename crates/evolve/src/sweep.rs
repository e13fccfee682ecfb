//! Sweeps: a grid of runs (tasks x models x strategies x repeats, any
//! setting as an axis) from one TOML file, each cell an ordinary resumable
//! run, and the table that compares them.
//!
//! ```toml
//! name = "strategies"            # the sweep's state file; default: file stem
//! config = "base.toml"           # optional settings file under [base]
//! repeats = 3                    # runs per cell (seeds differ), default 1
//! [base]                         # settings every cell shares
//! sizes = "smoke"
//! [axes]                         # one run per combination of values
//! task = ["saxpy", "heat2d"]
//! "strategy.name" = ["one-plus-one", "map-elites"]
//! "llm.models" = ["cmd:./a.sh", "cmd:./b.sh"]
//! ```
//!
//! Repeat r (from 0) adds r to the ensemble's seed and the strategy's seed,
//! so repeats differ in their random choices and nothing else. The state
//! file maps each cell to its run and the settings it was started with: a
//! restarted sweep skips finished cells, resumes interrupted ones, and
//! refuses a cell whose settings changed since its run started.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, ConfigLayer, merge};
use crate::options::EvolveOptions;

/// A wrong sweep file or state, with where.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    name: Option<String>,
    config: Option<PathBuf>,
    repeats: Option<u32>,
    #[serde(default)]
    base: Option<toml::Table>,
    axes: toml::Table,
}

/// One run of the grid.
#[derive(Debug, Clone)]
pub struct Cell {
    /// `task=saxpy strategy.name=islands #2`: unique in the sweep.
    pub key: String,
    /// The key without the repeat: cells of one group are compared as one.
    pub group: String,
    pub repeat: u32,
    pub options: EvolveOptions,
}

/// A sweep file expanded into its cells, in order (the first axis varies
/// slowest, repeats fastest).
#[derive(Debug, Clone)]
pub struct SweepPlan {
    pub name: String,
    pub file: PathBuf,
    pub axes: Vec<(String, Vec<String>)>,
    pub repeats: u32,
    pub cells: Vec<Cell>,
}

fn file_error(path: &Path, line: Option<usize>, message: impl Into<String>) -> SweepError {
    SweepError::File {
        path: match line {
            Some(l) => format!("{}:{l}", path.display()),
            None => path.display().to_string(),
        },
        message: message.into(),
    }
}

/// An axis value as a short label: strings bare, lists joined by `+`.
fn label(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(items) => items.iter().map(label).collect::<Vec<_>>().join("+"),
        toml::Value::Table(t) => {
            let rest = t
                .iter()
                .filter(|(k, _)| *k != "name")
                .map(|(k, v)| format!("{k}:{}", label(v)))
                .collect::<Vec<_>>()
                .join(",");
            match (t.get("name").map(label), rest.is_empty()) {
                (Some(name), true) => name,
                (Some(name), false) => format!("{name}({rest})"),
                (None, _) => rest,
            }
        }
        other => other.to_string(),
    }
}

/// `{"a": {"b": value}}` for key `a.b`.
fn nested(key: &str, value: toml::Value) -> toml::Table {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().unwrap_or(key);
    let mut table = toml::Table::new();
    table.insert(last.to_string(), value);
    for part in parts.into_iter().rev() {
        let mut outer = toml::Table::new();
        outer.insert(part.to_string(), toml::Value::Table(table));
        table = outer;
    }
    table
}

impl SweepPlan {
    /// Reads and expands `path`; every cell's settings are checked here,
    /// before anything runs.
    pub fn load(path: &Path) -> Result<SweepPlan, SweepError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| file_error(path, None, format!("cannot read the sweep file: {e}")))?;
        let deserializer = toml::Deserializer::parse(&text).map_err(|e| {
            let line = e.span().map(|s| crate::config::line_at(&text, s.start));
            file_error(path, line, e.message().trim())
        })?;
        let file: SweepFile = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let line = inner
                .span()
                .map(|s| crate::config::line_at(&text, s.start))
                .or_else(|| crate::config::key_line(&text, &key));
            file_error(
                path,
                line,
                format!("key `{key}`: {}", inner.message().trim()),
            )
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let name = file.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "sweep".into())
        });
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(file_error(
                path,
                crate::config::key_line(&text, "name"),
                format!("key `name`: `{name}` must be letters, digits, `-`, `_` or `.`"),
            ));
        }
        let repeats = file.repeats.unwrap_or(1);
        if repeats == 0 {
            return Err(file_error(
                path,
                crate::config::key_line(&text, "repeats"),
                "key `repeats`: must be at least 1",
            ));
        }
        let mut layers = Vec::new();
        if let Some(config) = &file.config {
            layers.push(ConfigLayer::from_file(&dir.join(config))?);
        }
        if let Some(base) = file.base.clone() {
            layers.push(ConfigLayer::from_table_in_file(path, &text, "base", base)?);
        }
        let mut axes: Vec<(String, Vec<toml::Value>)> = Vec::new();
        for (key, values) in &file.axes {
            let line = crate::config::key_parts_line(&text, &["axes", key]);
            let toml::Value::Array(values) = values else {
                return Err(file_error(
                    path,
                    line,
                    format!("axis `{key}`: give its values as a list"),
                ));
            };
            if values.is_empty() {
                return Err(file_error(
                    path,
                    line,
                    format!("axis `{key}` has no values"),
                ));
            }
            // A model axis may list single specs.
            let values = values
                .iter()
                .map(|v| match (key.as_str(), v) {
                    ("llm.models", toml::Value::String(_)) => toml::Value::Array(vec![v.clone()]),
                    _ => v.clone(),
                })
                .collect();
            axes.push((key.clone(), values));
        }
        // In the file's order (a TOML table is sorted by key).
        axes.sort_by_key(|(key, _)| crate::config::key_parts_line(&text, &["axes", key]));
        let mut cells = Vec::new();
        let mut combination = vec![0usize; axes.len()];
        let total: usize = axes.iter().map(|(_, v)| v.len()).product();
        for index in 0..total {
            // Mixed radix, the first axis slowest.
            let mut rest = index;
            for (i, (_, values)) in axes.iter().enumerate().rev() {
                combination[i] = rest % values.len();
                rest /= values.len();
            }
            let mut table = toml::Table::new();
            let mut flags = Vec::new();
            let mut parts = Vec::new();
            for (i, (key, values)) in axes.iter().enumerate() {
                let value = values[combination[i]].clone();
                parts.push(format!("{key}={}", label(&value)));
                flags.push((
                    key.clone(),
                    format!("{} axis `{key}` = {}", path.display(), value),
                ));
                for (k, v) in nested(key, value) {
                    crate::config::overlay(&mut table, &k, v);
                }
            }
            let group = if parts.is_empty() {
                "all".to_string()
            } else {
                parts.join(" ")
            };
            let mut cell_layers = layers.clone();
            cell_layers.push(ConfigLayer::from_flags(table, flags)?);
            let config = merge(&cell_layers)?;
            let mut options = config.to_options()?;
            if options.llm.is_empty() {
                return Err(file_error(
                    path,
                    None,
                    format!(
                        "cell {group}: no model: set `models` under [base.llm] or an axis `llm.models`"
                    ),
                ));
            }
            if let Some(seed_kernel) = &config.seed_kernel {
                options.start_source = Some(std::fs::read_to_string(seed_kernel).map_err(|e| {
                    file_error(
                        path,
                        None,
                        format!("cannot read seed kernel {}: {e}", seed_kernel.display()),
                    )
                })?);
            }
            for repeat in 0..repeats {
                let mut options = options.clone();
                options.rng_seed = options.rng_seed.wrapping_add(u64::from(repeat));
                match &mut options.strategy {
                    kevo_strategy::StrategyConfig::MapElites(c) => {
                        c.rng_seed = c.rng_seed.wrapping_add(u64::from(repeat))
                    }
                    kevo_strategy::StrategyConfig::Islands(c) => {
                        c.rng_seed = c.rng_seed.wrapping_add(u64::from(repeat))
                    }
                    kevo_strategy::StrategyConfig::OnePlusOne => {}
                }
                // Each cell records to a file of its own.
                if let Some(record) = &options.record {
                    let stem = record
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "record".into());
                    options.record =
                        Some(record.with_file_name(format!("{stem}.{:03}.jsonl", cells.len())));
                }
                let key = if repeats > 1 {
                    format!("{group} #{}", repeat + 1)
                } else {
                    group.clone()
                };
                cells.push(Cell {
                    key,
                    group: group.clone(),
                    repeat,
                    options,
                });
            }
        }
        Ok(SweepPlan {
            name,
            file: path.to_path_buf(),
            axes: axes
                .into_iter()
                .map(|(k, v)| (k, v.iter().map(label).collect()))
                .collect(),
            repeats,
            cells,
        })
    }
}

/// What a sweep has done so far: `<workspace>/sweeps/<name>.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SweepState {
    pub cells: BTreeMap<String, CellState>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CellState {
    /// The cell's run, once created.
    pub run: Option<String>,
    /// The settings the run was started with.
    pub options: serde_json::Value,
    /// Why the cell could not run (no run was created), if so.
    pub error: Option<String>,
}

impl SweepState {
    pub fn path(workspace: &Path, name: &str) -> PathBuf {
        workspace.join("sweeps").join(format!("{name}.json"))
    }

    pub fn load(path: &Path) -> Result<SweepState, SweepError> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| SweepError::File {
                path: path.display().to_string(),
                message: format!("the sweep's state is unreadable: {e}"),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SweepState::default()),
            Err(e) => Err(SweepError::File {
                path: path.display().to_string(),
                message: format!("cannot read the sweep's state: {e}"),
            }),
        }
    }

    /// Written whole to a temporary file and renamed over the old one: a
    /// kill leaves the old state or the new one, never half.
    pub fn save(&self, path: &Path) -> Result<(), SweepError> {
        let err = |e: std::io::Error| SweepError::File {
            path: path.display().to_string(),
            message: format!("cannot write the sweep's state: {e}"),
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).unwrap_or_default();
        std::fs::write(&tmp, text).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }

    /// The run of `cell`, checked against the settings it was started
    /// with: a sweep file edited since must not mix two experiments.
    pub fn run_of(&self, cell: &Cell) -> Result<Option<String>, SweepError> {
        let Some(state) = self.cells.get(&cell.key) else {
            return Ok(None);
        };
        let Some(run) = &state.run else {
            return Ok(None);
        };
        let now = serde_json::to_value(&cell.options).unwrap_or_default();
        if now != state.options {
            return Err(SweepError::File {
                path: cell.key.clone(),
                message: format!(
                    "this cell's settings changed since its run {run} started; \
                     give the sweep another `name` to start a new experiment"
                ),
            });
        }
        Ok(Some(run.clone()))
    }
}

/// One cell's result, as the table needs it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CellResult {
    pub key: String,
    pub group: String,
    pub run: Option<String>,
    /// finished, interrupted, failed, running, not started, or the error.
    pub status: String,
    pub speedup: Option<f64>,
    pub held_out_phi: Option<f64>,
    pub held_out_speedup: Option<f64>,
    /// Correct candidates over evaluated ones (the seed left out).
    pub correct_rate: Option<f64>,
    pub cost_usd: Option<f64>,
}

/// Median and range of some numbers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// `1.52 (1.40-1.61)`, or the one value.
    pub fn describe(&self, digits: usize) -> String {
        if self.n == 1 || self.min == self.max {
            format!("{:.digits$}", self.median)
        } else {
            format!(
                "{:.digits$} ({:.digits$}-{:.digits$})",
                self.median, self.min, self.max
            )
        }
    }
}

/// A row of the comparison: one group of cells, over its repeats.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupRow {
    pub group: String,
    pub finished: usize,
    pub cells: usize,
    pub speedup: Option<Spread>,
    pub held_out_phi: Option<Spread>,
    pub held_out_speedup: Option<Spread>,
    pub correct_rate: Option<Spread>,
    pub cost_usd: Option<Spread>,
}

/// The groups in the order of their first cell; numbers over finished
/// cells only.
pub fn group_rows(results: &[CellResult]) -> Vec<GroupRow> {
    let mut order: Vec<&str> = Vec::new();
    for r in results {
        if !order.contains(&r.group.as_str()) {
            order.push(&r.group);
        }
    }
    order
        .into_iter()
        .map(|group| {
            let cells: Vec<&CellResult> = results.iter().filter(|r| r.group == group).collect();
            let done: Vec<&&CellResult> = cells.iter().filter(|r| r.status == "finished").collect();
            let of =
                |f: fn(&CellResult) -> Option<f64>| Spread::of(done.iter().filter_map(|r| f(r)));
            GroupRow {
                group: group.to_string(),
                finished: done.len(),
                cells: cells.len(),
                speedup: of(|r| r.speedup),
                held_out_phi: of(|r| r.held_out_phi),
                held_out_speedup: of(|r| r.held_out_speedup),
                correct_rate: of(|r| r.correct_rate),
                cost_usd: of(|r| r.cost_usd),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
