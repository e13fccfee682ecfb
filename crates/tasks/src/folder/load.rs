//! Validating a task folder's files into a [`FolderTask`]: the task.toml
//! read and split into the built-in schema and the folder's own keys, then
//! one step per part of the task (dialects, derived values, buffers,
//! scalars, launches, ping-pong pairs, checks, the reference), in the order
//! their mistakes are reported. The steps on buffers, launches and checks
//! have their own files below.

mod buffers;
mod checks;
mod launches;
mod raw;

use std::collections::BTreeMap;
use std::path::Path;

use super::read::file_key;
use super::{FolderError, FolderFiles, FolderTask, ReferenceDef};
use crate::expr::Expr;
use crate::spec::TaskSpec;
use crate::syntax::is_identifier;
use raw::{RawDialect, RawFolder};

/// The keys of a folder's task.toml that are the built-in tasks' schema.
const SPEC_KEYS: &[&str] = &[
    "name",
    "regime",
    "kernels",
    "dims",
    "ceiling",
    "work",
    "work_note",
    "min_traffic",
    "default_seed",
    "sizes",
];

const DIALECTS: &[&str] = &["cuda", "opencl", "metal", "triton"];

impl FolderTask {
    /// Validate a folder's files (read by [`super::read_folder`], or
    /// shipped to a worker); `root` only names the folder in errors.
    pub fn from_files(
        root: &Path,
        files: std::sync::Arc<FolderFiles>,
    ) -> Result<FolderTask, FolderError> {
        let load = Loader {
            files: &files,
            shown: root.join("task.toml").display().to_string(),
        };
        let (spec, raw) = load.task_toml()?;
        let brief = load.text("brief", &raw.brief)?;
        let dialects = load.dialects(&raw.dialects, &spec.kernels)?;
        let derived = load.derived(&spec, &raw.derived)?;
        let names = spec
            .dims
            .iter()
            .map(|d| d.name.as_str())
            .chain(derived.iter().map(|(name, _)| name.as_str()))
            .collect();
        let scope = Scope { load: &load, names };
        let buffers = scope.buffers(&raw.buffers)?;
        let scalars = scope.scalars(&raw.scalars, &buffers)?;
        let launches = scope.launches(&raw.launches, &spec.kernels, &buffers, &scalars)?;
        let steps = scope.expr("steps", raw.steps.as_deref().unwrap_or("1"), &[])?;
        load.check_ping_pong(&raw.ping_pong, &buffers)?;
        load.check_everything_launched(&spec.kernels, &buffers, &launches)?;
        let checks = load.checks(&raw.check, &buffers)?;
        let reference = load.reference(&raw, &spec.kernels)?;
        let provenance = match &raw.provenance {
            Some(name) => Some(
                serde_json::from_str(&load.text("provenance", name)?)
                    .map_err(|e| load.error("provenance", format!("`{name}` is not JSON: {e}")))?,
            ),
            None => None,
        };
        let task = FolderTask {
            root: root.to_path_buf(),
            files: files.clone(),
            spec,
            brief,
            dialects,
            derived,
            buffers,
            scalars,
            launches,
            steps,
            ping_pong: raw.ping_pong.clone(),
            checks,
            reference,
            provenance,
        };
        task.check_sizes()?;
        if let ReferenceDef::Golden(dir) = &task.reference {
            load.check_golden(&task, dir)?;
        }
        Ok(task)
    }
}

/// What every step needs: the folder's files, and the task.toml's path as
/// errors show it.
struct Loader<'a> {
    files: &'a FolderFiles,
    shown: String,
}

/// The names expressions may use: the dims, then the derived values in the
/// order they resolved.
struct Scope<'a> {
    load: &'a Loader<'a>,
    names: Vec<&'a str>,
}

impl Scope<'_> {
    /// The expression `text` at `key`, over the names and `extra`.
    fn expr(&self, key: &str, text: &str, extra: &[&str]) -> Result<Expr, FolderError> {
        let all: Vec<&str> = self.names.iter().chain(extra).copied().collect();
        Expr::parse(text, &all).map_err(|m| self.load.error(key, m))
    }
}

impl<'a> Loader<'a> {
    /// A mistake at `key` of the task.toml.
    fn error(&self, key: &str, message: String) -> FolderError {
        FolderError {
            file: self.shown.clone(),
            key: key.to_string(),
            message,
        }
    }

    /// The folder's file `name`, which `key` gives.
    fn bytes(&self, key: &str, name: &str) -> Result<&'a Vec<u8>, FolderError> {
        file_key(name)
            .and_then(|k| self.files.get(&k))
            .ok_or_else(|| {
                self.error(
                    key,
                    format!("cannot read `{name}` in the task folder (no such file)"),
                )
            })
    }

    /// The folder's text file `name`, which `key` gives.
    fn text(&self, key: &str, name: &str) -> Result<String, FolderError> {
        String::from_utf8(self.bytes(key, name)?.clone())
            .map_err(|_| self.error(key, format!("`{name}` is not UTF-8 text")))
    }

    /// The task.toml as the built-in schema (with what a user task may
    /// leave out filled in) and the folder's own keys.
    fn task_toml(&self) -> Result<(TaskSpec, RawFolder), FolderError> {
        let text = match self.files.get("task.toml") {
            Some(bytes) => String::from_utf8(bytes.clone())
                .map_err(|_| self.error("task.toml", "is not UTF-8 text".into()))?,
            None => {
                return Err(self.error(
                    "task.toml",
                    "cannot read it (no such file); a task folder holds a task.toml".into(),
                ));
            }
        };
        let mut table: toml::Table = toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start].matches('\n').count() + 1)
                .unwrap_or(0);
            self.error(&format!("line {line}"), e.message().to_string())
        })?;
        let spec = self.spec(&mut table)?;
        let raw: RawFolder = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| self.error("task.toml", e.message().to_string()))?;
        Ok((spec, raw))
    }

    /// The built-in schema's keys, taken out of `table`: a user task's
    /// regime is "custom", its work note empty and its large sizes its full
    /// ones unless it says otherwise.
    fn spec(&self, table: &mut toml::Table) -> Result<TaskSpec, FolderError> {
        let mut spec_table = toml::Table::new();
        for key in SPEC_KEYS {
            if let Some(v) = table.remove(*key) {
                spec_table.insert(key.to_string(), v);
            }
        }
        spec_table
            .entry("regime")
            .or_insert_with(|| "custom".into());
        spec_table.entry("work_note").or_insert_with(|| "".into());
        if let Some(sizes) = spec_table.get_mut("sizes").and_then(|s| s.as_table_mut())
            && !sizes.contains_key("large")
            && let Some(full) = sizes.get("full").cloned()
        {
            sizes.insert("large".into(), full);
        }
        let spec_text = toml::to_string(&spec_table).expect("a TOML table serialises");
        TaskSpec::parse(&spec_text, &self.shown).map_err(|e| match e {
            crate::TaskDefinitionError::Invalid { field, message, .. } => {
                self.error(&field, message)
            }
            crate::TaskDefinitionError::Parse { message, .. } => self.error("task.toml", message),
        })
    }

    /// Dialect name -> (seed, signature): at least one known dialect, whose
    /// seed defines every entry point in `kernels`.
    fn dialects(
        &self,
        raw: &BTreeMap<String, RawDialect>,
        kernels: &[String],
    ) -> Result<BTreeMap<String, (String, String)>, FolderError> {
        if raw.is_empty() {
            return Err(self.error(
                "dialects",
                "offers no dialect: add [dialects.cuda] or [dialects.opencl] with seed and signature"
                    .into(),
            ));
        }
        let mut dialects = BTreeMap::new();
        for (name, d) in raw {
            if !DIALECTS.contains(&name.as_str()) {
                return Err(self.error(
                    &format!("dialects.{name}"),
                    format!("unknown dialect; expected one of {}", DIALECTS.join(", ")),
                ));
            }
            let seed = self.text(&format!("dialects.{name}.seed"), &d.seed)?;
            let signature = self.text(&format!("dialects.{name}.signature"), &d.signature)?;
            for k in kernels {
                if !seed.contains(k.as_str()) {
                    return Err(self.error(
                        &format!("dialects.{name}.seed"),
                        format!("`{}` does not define the entry point `{k}`", d.seed),
                    ));
                }
            }
            dialects.insert(name.clone(), (seed, signature));
        }
        Ok(dialects)
    }

    /// The derived values in an order each can be computed in. They may use
    /// the dims and each other in any order (a TOML table has none):
    /// resolve them as their names become known.
    fn derived(
        &self,
        spec: &TaskSpec,
        raw: &toml::Table,
    ) -> Result<Vec<(String, Expr)>, FolderError> {
        // Names an expression may use: dims, then derived values in order.
        let mut names: Vec<String> = spec.dims.iter().map(|d| d.name.clone()).collect();
        let mut derived = Vec::new();
        let mut pending: Vec<(&String, &toml::Value)> = raw.iter().collect();
        while !pending.is_empty() {
            let mut progress = false;
            let mut last_error = None;
            let mut still = Vec::new();
            for (name, value) in pending {
                let key = format!("derived.{name}");
                if !is_identifier(name) || names.contains(name) {
                    return Err(self.error(
                        &key,
                        "expected a new identifier (not a dimension's name)".into(),
                    ));
                }
                let Some(text) = value.as_str() else {
                    return Err(self.error(&key, "expected an expression as a string".into()));
                };
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                match Expr::parse(text, &refs) {
                    Ok(expr) => {
                        derived.push((name.clone(), expr));
                        names.push(name.clone());
                        progress = true;
                    }
                    Err(m) => {
                        last_error.get_or_insert((key, m));
                        still.push((name, value));
                    }
                }
            }
            if !progress {
                let (key, m) = last_error.expect("something is pending");
                return Err(self.error(
                    &key,
                    format!("{m} (or the derived values depend on each other in a circle)"),
                ));
            }
            pending = still;
        }
        Ok(derived)
    }
}
