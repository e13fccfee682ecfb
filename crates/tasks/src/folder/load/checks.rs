//! Loading what a task folder's outputs are compared with: the `[check.*]`
//! tolerances of its outputs, and its reference (a kernel, a command or
//! golden files), whose golden outputs must cover whole size sets of fixed
//! inputs.

use std::collections::BTreeMap;

use super::Loader;
use super::file_key;
use super::raw::{RawCheck, RawFolder};
use crate::folder::{BufferDef, CheckDef, FolderError, FolderTask, Init, ReferenceDef, Role};

impl Loader<'_> {
    /// Output buffer name -> its check: at least one, and one for every
    /// output buffer.
    pub(super) fn checks(
        &self,
        raw: &BTreeMap<String, RawCheck>,
        buffers: &[BufferDef],
    ) -> Result<BTreeMap<String, CheckDef>, FolderError> {
        let mut checks = BTreeMap::new();
        for (name, c) in raw {
            checks.insert(name.clone(), self.check(name, c, buffers)?);
        }
        if checks.is_empty() {
            return Err(self.error(
                "check",
                "checks no buffer: add [check.NAME] for an output".into(),
            ));
        }
        for b in buffers {
            if b.role == Role::Output && !checks.contains_key(&b.name) {
                return Err(self.error(
                    "check",
                    format!("the output `{}` has no [check.{}]", b.name, b.name),
                ));
            }
        }
        Ok(checks)
    }

    /// The check of the output `name`: exact for integers, and otherwise
    /// exact or within tolerances that are numbers in range.
    fn check(
        &self,
        name: &str,
        c: &RawCheck,
        buffers: &[BufferDef],
    ) -> Result<CheckDef, FolderError> {
        let key = format!("check.{name}");
        let Some(b) = buffers.iter().find(|b| b.name == name) else {
            return Err(self.error(&key, "names no buffer of the task".into()));
        };
        if !matches!(b.role, Role::Output | Role::Inout) {
            return Err(self.error(&key, format!("`{name}` is not an output or inout buffer")));
        }
        let float = b.element.scalar.is_float();
        let exact = c.exact.unwrap_or(!float);
        if !float
            && (!exact
                || c.atol.is_some()
                || c.rtol.is_some()
                || c.cosine.is_some()
                || c.peak_error.is_some()
                || c.atol_rms.is_some())
        {
            return Err(self.error(
                &key,
                "an integer output is compared exactly: no atol, rtol, atol_rms, cosine or peak_error"
                    .into(),
            ));
        }
        if float && !exact && c.atol.is_none() && c.rtol.is_none() && c.atol_rms.is_none() {
            return Err(self.error(
                &key,
                "expected a tolerance: atol, rtol, atol_rms or several (or exact = true)".into(),
            ));
        }
        let within = self.check_ranges(&key, c, exact)?;
        Ok(CheckDef {
            atol: c.atol.unwrap_or(0.0),
            rtol: c.rtol.unwrap_or(0.0),
            within,
            cosine: c.cosine,
            peak_error: c.peak_error,
            atol_rms: c.atol_rms.unwrap_or(0.0),
            exact,
        })
    }

    /// Each number of the check at `key` in its range; the fraction that
    /// must be within (1 unless given).
    fn check_ranges(&self, key: &str, c: &RawCheck, exact: bool) -> Result<f64, FolderError> {
        let err =
            |field: &str, message: &str| self.error(&format!("{key}.{field}"), message.into());
        for (field, v) in [("atol", c.atol), ("rtol", c.rtol), ("atol_rms", c.atol_rms)] {
            if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                return Err(err(field, "expected a finite number >= 0"));
            }
        }
        let within = c.within.unwrap_or(1.0);
        if !(within > 0.0 && within <= 1.0) {
            return Err(err("within", "expected a fraction in (0, 1]"));
        }
        if c.cosine.is_some_and(|v| !(v > 0.0 && v <= 1.0)) {
            return Err(err("cosine", "expected a similarity floor in (0, 1]"));
        }
        for (field, given) in [
            ("peak_error", c.peak_error.is_some()),
            ("atol_rms", c.atol_rms.is_some()),
        ] {
            if exact && given {
                return Err(err(
                    field,
                    &format!("an exact check compares bits; it takes no {field}"),
                ));
            }
        }
        if c.peak_error.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
            return Err(err("peak_error", "expected a fraction of the peak > 0"));
        }
        Ok(within)
    }

    /// The reference: exactly one of kernel sources for offered dialects
    /// (each defining every entry point in `kernels`), a command, or a
    /// directory of golden files.
    pub(super) fn reference(
        &self,
        raw: &RawFolder,
        kernels: &[String],
    ) -> Result<ReferenceDef, FolderError> {
        let r = &raw.reference;
        match (&r.kernel, &r.command, &r.golden) {
            (Some(sources), None, None) => self.kernel_reference(raw, sources, kernels),
            (None, Some(command), None) => {
                if command.is_empty() {
                    return Err(self.error(
                        "reference.command",
                        "expected a program and its arguments".into(),
                    ));
                }
                Ok(ReferenceDef::Command(command.clone()))
            }
            (None, None, Some(dir)) => {
                let key = file_key(dir).unwrap_or_default();
                let prefix = format!("{key}/");
                if key.is_empty() || !self.files.keys().any(|k| k.starts_with(&prefix)) {
                    return Err(self.error(
                        "reference.golden",
                        format!("`{dir}` is not a directory of files in the task folder"),
                    ));
                }
                Ok(ReferenceDef::Golden(key))
            }
            _ => Err(self.error(
                "reference",
                "expected exactly one of kernel, command or golden".into(),
            )),
        }
    }

    /// A kernel reference: dialect -> the source of its file.
    fn kernel_reference(
        &self,
        raw: &RawFolder,
        files: &BTreeMap<String, String>,
        kernels: &[String],
    ) -> Result<ReferenceDef, FolderError> {
        let mut sources = BTreeMap::new();
        for (dialect, file) in files {
            let key = format!("reference.kernel.{dialect}");
            if !raw.dialects.contains_key(dialect) {
                return Err(self.error(&key, "not a dialect the task offers".into()));
            }
            let source = self.text(&key, file)?;
            for k in kernels {
                if !source.contains(k.as_str()) {
                    return Err(self.error(
                        &key,
                        format!("`{file}` does not define the entry point `{k}`"),
                    ));
                }
            }
            sources.insert(dialect.clone(), source);
        }
        Ok(ReferenceDef::Kernel(sources))
    }

    /// A golden reference in `dir`: fixed inputs only, and every size set
    /// covered in full or not at all, at least one of them.
    pub(super) fn check_golden(&self, task: &FolderTask, dir: &str) -> Result<(), FolderError> {
        for (i, b) in task.buffers.iter().enumerate() {
            if matches!(
                b.init,
                Some(Init::Uniform { .. } | Init::Normal { .. } | Init::Integers { .. })
            ) {
                return Err(self.error(
                    &format!("buffers[{i}].init"),
                    "a golden reference holds the outputs of fixed inputs, and a random \
                     start differs with every seed: use npy, constant, iota or zero, or a \
                     kernel or command reference"
                        .into(),
                ));
            }
        }
        // A size set is covered in full or not at all (its sizes are
        // scored together); evaluating an uncovered set is an error then.
        let mut covered = 0;
        for (set, plan) in &task.spec.sizes {
            let mut missing = Vec::new();
            let mut present = 0;
            for size in plan.all() {
                for name in task.checks.keys() {
                    let file = format!("{dir}/{set}/{}/{name}.npy", size.label);
                    if task.files.contains_key(&file) {
                        present += 1;
                    } else {
                        missing.push(file);
                    }
                }
            }
            if missing.is_empty() {
                covered += 1;
            } else if present > 0 {
                return Err(self.error(
                    "reference.golden",
                    format!(
                        "the {set} sizes are covered in part: `{}` is missing (a golden \
                         reference needs every checked output at every size of a set)",
                        missing[0]
                    ),
                ));
            }
        }
        if covered == 0 {
            return Err(self.error(
                "reference.golden",
                format!(
                    "no size set is covered: expected `{dir}/SET/SIZE_LABEL/OUTPUT.npy` \
                     (SET: smoke, full or large) for every size of a set and every checked \
                     output"
                ),
            ));
        }
        Ok(())
    }
}
