//! A task's metadata as data (`task.toml` next to its assets): name,
//! regime, entry points, what the size dimensions mean, ceiling, work model,
//! seed and size tables. Only what is genuinely code (host program, CPU
//! reference, check) stays Rust; see [`crate::TaskCode`].

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::expr::Expr;
use crate::{CeilingKind, Size, SizePlan, SizeSet};

/// Why a task definition was refused. `task` names the task (or the file
/// it came from) and `field` the offending entry.
#[derive(Debug, thiserror::Error)]
pub enum TaskDefinitionError {
    #[error("task definition {origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("task `{task}`: `{field}`: {message}")]
    Invalid {
        task: String,
        field: String,
        message: String,
    },
}

/// One named size dimension, with the value a size may leave it out for.
#[derive(Debug, Clone, PartialEq)]
pub struct Dim {
    pub name: String,
    pub default: Option<u64>,
}

/// The parsed `task.toml`.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    pub name: String,
    /// Metal-Sci regime, e.g. "R1 stencil".
    pub regime: String,
    /// Entry points, in the order `LaunchSpec::kernel` indexes.
    pub kernels: Vec<String>,
    pub dims: Vec<Dim>,
    pub ceiling: CeilingKind,
    /// The work model over `dims`; None when the task's code computes it
    /// (it depends on the inputs or on the code's constants).
    pub work: Option<Expr>,
    pub work_note: String,
    /// Bytes any correct kernel must move in one run, where the scored
    /// work model counts more (fft3d scores 96 B/cell, twice the 48 B/cell
    /// its three passes must stream): the plausibility rule checks this,
    /// so that a kernel as fast as the hardware allows is not called
    /// faster than it. None: the work model itself.
    pub min_traffic: Option<Expr>,
    pub default_seed: u64,
    pub sizes: BTreeMap<SizeSet, SizePlan>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: String,
    regime: String,
    kernels: Vec<String>,
    dims: Vec<String>,
    ceiling: CeilingKind,
    work: Option<String>,
    work_note: String,
    #[serde(default)]
    min_traffic: Option<String>,
    default_seed: u64,
    sizes: BTreeMap<SizeSet, SizePlan>,
}

impl TaskSpec {
    /// Parse and check a `task.toml`; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<TaskSpec, TaskDefinitionError> {
        let raw: RawSpec = toml::from_str(text).map_err(|e| TaskDefinitionError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        let invalid = |field: &str, message: String| TaskDefinitionError::Invalid {
            task: raw.name.clone(),
            field: field.to_string(),
            message,
        };
        if raw.name.is_empty()
            || !raw
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(invalid(
                "name",
                "must be non-empty ASCII letters, digits, `_` or `-`".into(),
            ));
        }
        if raw.kernels.is_empty() {
            return Err(invalid("kernels", "names no entry point".into()));
        }
        let dims = raw
            .dims
            .iter()
            .map(|d| parse_dim(d).map_err(|m| invalid("dims", m)))
            .collect::<Result<Vec<_>, _>>()?;
        if dims.is_empty() {
            return Err(invalid("dims", "names no dimension".into()));
        }
        let names: Vec<&str> = dims.iter().map(|d| d.name.as_str()).collect();
        let expression = |field: &str, text: Option<&str>| {
            text.map(|t| Expr::parse(t, &names).map_err(|m| invalid(field, m)))
                .transpose()
        };
        let work = expression("work", raw.work.as_deref())?;
        let min_traffic = expression("min_traffic", raw.min_traffic.as_deref())?;
        if min_traffic.is_some() && raw.ceiling != CeilingKind::Bandwidth {
            return Err(invalid(
                "min_traffic",
                "is a byte count: only bandwidth-bound tasks have one".into(),
            ));
        }
        for set in [SizeSet::Smoke, SizeSet::Full, SizeSet::Large] {
            let Some(plan) = raw.sizes.get(&set) else {
                return Err(invalid("sizes", format!("has no `{set}` table")));
            };
            let field = format!("sizes.{set}");
            if plan.in_distribution.is_empty() {
                return Err(invalid(&field, "has no in-distribution size".into()));
            }
            let mut labels = std::collections::BTreeSet::new();
            for s in plan.all() {
                if !labels.insert(s.label.as_str()) {
                    return Err(invalid(
                        &field,
                        format!("size label `{}` appears twice", s.label),
                    ));
                }
                check_dims(s, &dims).map_err(|m| invalid(&field, m))?;
            }
        }
        Ok(TaskSpec {
            name: raw.name,
            regime: raw.regime,
            kernels: raw.kernels,
            dims,
            ceiling: raw.ceiling,
            work,
            work_note: raw.work_note,
            min_traffic,
            default_seed: raw.default_seed,
            sizes: raw.sizes,
        })
    }

    /// The values of every dimension of `size`, defaults filled in, in
    /// the order of `dims`.
    pub fn dim_values(&self, size: &Size) -> Vec<f64> {
        dims_of(size, &self.dims)
            .into_iter()
            .map(|v| v as f64)
            .collect()
    }
}

fn parse_dim(text: &str) -> Result<Dim, String> {
    let (name, default) = match text.split_once('=') {
        Some((n, v)) => {
            let v = v
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("`{text}`: the default must be a whole number"))?;
            (n.trim(), Some(v))
        }
        None => (text.trim(), None),
    };
    if !crate::syntax::is_identifier(name) {
        return Err(format!("`{text}` is not a dimension name"));
    }
    Ok(Dim {
        name: name.to_string(),
        default,
    })
}

/// Every dimension of `size`, defaults filled in.
fn dims_of(size: &Size, dims: &[Dim]) -> Vec<u64> {
    dims.iter()
        .enumerate()
        .map(|(i, d)| size.dims.get(i).copied().or(d.default).unwrap_or_default())
        .collect()
}

fn check_dims(size: &Size, dims: &[Dim]) -> Result<(), String> {
    let required = dims.iter().take_while(|d| d.default.is_none()).count();
    if size.dims.len() < required || size.dims.len() > dims.len() {
        return Err(format!(
            "size `{}` has {} dimension(s); expected {}",
            size.label,
            size.dims.len(),
            if required == dims.len() {
                format!("{required}")
            } else {
                format!("{required} to {}", dims.len())
            }
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "toy"
regime = "R0 bandwidth"
kernels = ["k"]
dims = ["N", "R = 2"]
ceiling = "bandwidth"
work = "8 * N * R"
work_note = "8 B/element"
default_seed = 0x10
[sizes.smoke]
in_distribution = [{ label = "a", dims = [4] }]
held_out = { label = "b", dims = [8, 3] }
validation = [{ label = "c", dims = [5] }]
[sizes.full]
in_distribution = [{ label = "a", dims = [4] }]
held_out = { label = "b", dims = [8] }
[sizes.large]
in_distribution = [{ label = "a", dims = [4] }]
held_out = { label = "b", dims = [8] }
"#;

    #[test]
    fn a_definition_parses_with_defaults_filled_in() {
        let spec = TaskSpec::parse(GOOD, "toy.toml").unwrap();
        assert_eq!(spec.default_seed, 16);
        let plan = &spec.sizes[&SizeSet::Smoke];
        let values = spec.dim_values(&plan.in_distribution[0]);
        assert_eq!(values, vec![4.0, 2.0]);
        assert_eq!(spec.work.as_ref().unwrap().eval(&values), 64.0);
        assert_eq!(spec.dim_values(&plan.held_out), vec![8.0, 3.0]);
        assert_eq!(plan.validation, vec![crate::Size::new("c", &[5])]);
        let hidden: Vec<&str> = plan.hidden_labels().collect();
        assert_eq!(hidden, ["b", "c"]);
        assert!(spec.sizes[&SizeSet::Full].validation.is_empty());
    }

    #[test]
    fn bad_definitions_name_the_task_and_the_field() {
        for (from, to, needle) in [
            (
                "kernels = [\"k\"]",
                "kernels = []",
                "`kernels`: names no entry point",
            ),
            ("8 * N * R", "8 * N * Q", "`work`: unknown name `Q`"),
            (
                "dims = [8, 3]",
                "dims = [8, 3, 1]",
                "size `b` has 3 dimension(s); expected 1 to 2",
            ),
            (
                "label = \"b\", dims = [8, 3]",
                "label = \"a\", dims = [8]",
                "`a` appears twice",
            ),
            (
                "label = \"c\", dims = [5]",
                "label = \"b\", dims = [5]",
                "`b` appears twice",
            ),
            (
                "work_note = \"8 B/element\"",
                "work_note = \"8 B/element\"\nmin_traffic = \"4 * M\"",
                "`min_traffic`: unknown name `M`",
            ),
            ("[sizes.large]", "[sizes.huge]", "unknown variant `huge`"),
            (
                "\"R = 2\"",
                "\"R = two\"",
                "the default must be a whole number",
            ),
        ] {
            let text = GOOD.replacen(from, to, 1);
            let err = TaskSpec::parse(&text, "toy.toml").unwrap_err().to_string();
            assert!(err.contains(needle), "{from} -> {to}: {err}");
            assert!(err.contains("toy"), "{err}");
        }
    }
}
