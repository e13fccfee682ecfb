//! Writing a probed problem as a kevo task folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::discover::Problem;
use crate::probe::{Constant, Distribution, Probe, ProbedSize, Timing};
use crate::screen::Screen;
use crate::{KernelBenchError, REFERENCE_PY};

mod brief;
mod signature;
mod task_toml;

use brief::brief;
use task_toml::{Layout, Work, task_toml};

/// How folders are written.
#[derive(Debug, Clone)]
pub struct FolderOptions {
    /// The interpreter the reference command runs with.
    pub python: String,
    /// Seed kernels by dialect ("cuda", "opencl"): the problem's naive
    /// starting point, `DIR/<stem>.cu` and `DIR/<stem>.cl`.
    pub seeds: BTreeMap<String, String>,
    /// Kernels in sequence (`stage1`, `stage2`, ... sharing a scratch
    /// buffer); `None` decides from the ops forward() runs
    /// ([`crate::probe::stages_needed`]).
    pub stages: Option<usize>,
}

impl FolderOptions {
    pub fn new(python: &str) -> FolderOptions {
        FolderOptions {
            python: python.to_string(),
            seeds: BTreeMap::new(),
            stages: None,
        }
    }
}

/// What an import wrote for one problem.
#[derive(Debug, Clone)]
pub struct Written {
    pub task: String,
    pub dir: PathBuf,
    pub dialects: Vec<String>,
    /// Kernels launched in sequence (1: a single `forward`).
    pub stages: usize,
}

/// `kernelbench.json` in every imported folder: where the problem came
/// from, its screen and baselines (read by reports for speedup and
/// fast_p), and what the reference command needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelBenchMeta {
    pub level: u8,
    pub problem: String,
    pub torch: String,
    /// The device the baselines were timed on ("cpu" when not timed).
    pub device: String,
    pub eager_ms: Option<Timing>,
    pub compile_ms: Option<Timing>,
    pub flops: Option<u64>,
    pub screen: Screen,
    /// Per output, its check and how the probe derived it from honest
    /// and narrower variants of the module.
    #[serde(default)]
    pub tolerance: Vec<crate::probe::ProbedTolerance>,
    pub reference: ReferenceMeta,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceMeta {
    /// Constant name -> "int", "float" or "bool".
    pub globals: BTreeMap<String, String>,
    /// forward()'s arguments in order: a buffer, or a number as is.
    pub inputs: Vec<serde_json::Value>,
    /// state_dict key -> buffer.
    pub state: BTreeMap<String, String>,
    /// Output buffers in the order forward() returns them.
    pub outputs: Vec<String>,
    /// Size label -> shapes (inputs, state, outputs).
    pub sizes: BTreeMap<String, ProbedSize>,
}

/// A buffer of the folder, with the tensor it stands for.
struct Buffer {
    name: String,
    ty: &'static str,
    role: &'static str,
    init: Option<String>,
    /// Index of this tensor's shape in a size's inputs/outputs, or its
    /// state key.
    shape: ShapeOf,
    /// `upper`, `lower` or `symmetric`: square matrices of that kind on the
    /// last two axes (kevo's `structure`, of order `m_<name>`).
    structure: Option<String>,
}

enum ShapeOf {
    Input(usize),
    State(String),
    Output(usize),
}

fn element_type(dtype: &str, what: &str) -> Result<&'static str, String> {
    Ok(match dtype {
        "float32" => "f32",
        "float64" => "f64",
        "int32" => "i32",
        "int64" => "i64",
        "uint8" | "bool" => "u8",
        other => {
            return Err(format!(
                "{what} is {other}, which kevo's folders do not hold"
            ));
        }
    })
}

fn element_bytes(ty: &str) -> u64 {
    match ty {
        "f64" | "i64" => 8,
        "u8" => 1,
        _ => 4,
    }
}

fn c_type(ty: &str, cuda: bool) -> &'static str {
    match (ty, cuda) {
        ("f32", _) => "float",
        ("f64", _) => "double",
        ("i32", _) => "int",
        ("i64", true) => "long long",
        ("i64", false) => "long",
        ("u8", true) => "unsigned char",
        ("u8", false) => "uchar",
        _ => "float",
    }
}

/// `x` snapped to a round value within 2% of `scale` of it: a fitted
/// torch.randn's mean of 0.0075 and std of 0.9967 are 0 and 1.
fn snap(x: f64, scale: f64) -> f64 {
    let round = x.round();
    if (x - round).abs() <= 0.02 * scale.abs().max(1e-30) {
        round
    } else {
        x
    }
}

/// How kevo draws a tensor fitted as `d`. A float tensor that was
/// constant (a norm's weight of 1 and bias of 0, a single element) is drawn
/// around its value instead, so that a kernel cannot hard-code it or skip
/// the step that uses it. A normal fit of values that were never negative
/// is drawn uniformly over the values seen, so a positive-only input (a
/// log's argument) stays positive.
fn drawn(d: &Distribution, float: bool) -> Distribution {
    match d.clone() {
        Distribution::Constant { value, fit } if float => {
            let half = value.abs().max(1.0) * 0.5;
            Distribution::Uniform {
                low: value - half,
                high: value + half,
                fit,
            }
        }
        Distribution::Normal { mean, std, fit } if mean - 3.0 * std >= 0.0 => {
            Distribution::Uniform {
                low: (mean - 3.0 * std).max(0.0),
                high: mean + 3.0 * std,
                fit,
            }
        }
        other => other,
    }
}

fn init_toml(d: &Distribution) -> String {
    let d = &match d.clone() {
        Distribution::Uniform { low, high, fit } => Distribution::Uniform {
            low: snap(low, high - low),
            high: snap(high, high - low),
            fit,
        },
        Distribution::Normal { mean, std, fit } => Distribution::Normal {
            mean: snap(mean, std),
            std: snap(std, std),
            fit,
        },
        other => other,
    };
    match d {
        Distribution::Constant { value, .. } => format!("{{ constant = {value:?} }}"),
        Distribution::Integers { low, high, .. } => format!("{{ integers = [{low}, {high}] }}"),
        Distribution::Uniform { low, high, .. } => format!("{{ uniform = [{low:?}, {high:?}] }}"),
        Distribution::Normal { mean, std, .. } => format!("{{ normal = [{mean:?}, {std:?}] }}"),
    }
}

fn identifier(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// Names the candidate's C code cannot use for a parameter.
const RESERVED: &[&str] = &[
    "forward", "kernel", "float", "int", "double", "long", "char", "half", "bool", "auto",
    "register", "restrict", "const", "global", "local", "constant", "private", "signed",
    "unsigned",
];

/// The buffers of a probed problem: inputs, then the module's state, then
/// the outputs (the order of the kernel's parameters).
fn buffers(probe: &Probe) -> Result<Vec<Buffer>, String> {
    let mut out: Vec<Buffer> = Vec::new();
    for (k, input) in probe.inputs.iter().enumerate() {
        let (Some(dtype), Some(dist)) = (&input.dtype, &input.dist) else {
            continue;
        };
        let mut name = identifier(&input.name);
        if RESERVED.contains(&name.as_str()) || name.starts_with("out") || name.starts_with("w_") {
            name = format!("in_{name}");
        }
        out.push(Buffer {
            name,
            ty: element_type(dtype, &format!("input `{}`", input.name))?,
            role: "input",
            init: Some(init_toml(&drawn(dist, dtype.starts_with("float")))),
            shape: ShapeOf::Input(k),
            structure: input.structure.clone(),
        });
    }
    for state in &probe.state {
        out.push(Buffer {
            name: format!("w_{}", identifier(&state.name)),
            ty: element_type(&state.dtype, &format!("weight `{}`", state.name))?,
            role: "input",
            init: Some(init_toml(&drawn(
                &state.dist,
                state.dtype.starts_with("float"),
            ))),
            shape: ShapeOf::State(state.name.clone()),
            structure: None,
        });
    }
    for (k, output) in probe.outputs.iter().enumerate() {
        out.push(Buffer {
            name: if probe.outputs.len() == 1 {
                "out".into()
            } else {
                format!("out{k}")
            },
            ty: element_type(&output.dtype, "the output")?,
            role: "output",
            init: None,
            shape: ShapeOf::Output(k),
            structure: None,
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    for b in &out {
        if !seen.insert(b.name.clone()) {
            return Err(format!("two tensors are both named `{}`", b.name));
        }
    }
    Ok(out)
}

fn shape_in<'a>(size: &'a ProbedSize, of: &ShapeOf) -> Option<&'a Vec<u64>> {
    match of {
        ShapeOf::Input(k) => {
            // Shapes are listed for every forward() argument; numbers as [].
            size.inputs.get(*k)
        }
        ShapeOf::State(key) => size.state.get(key),
        ShapeOf::Output(k) => size.outputs.get(*k),
    }
}

fn numel(shape: &[u64]) -> u64 {
    shape.iter().product::<u64>().max(1)
}

/// The launch grid for an output shape: threads per dimension, the
/// innermost axis first, leading axes folded into the third.
fn grid_of(shape: &[u64]) -> [u64; 3] {
    match shape {
        [] => [1, 1, 1],
        [x] => [*x, 1, 1],
        [y, x] => [*x, *y, 1],
        [rest @ .., y, x] => [*x, *y, rest.iter().product::<u64>().max(1)],
    }
}

/// The integer constants usable as dims (non-negative, and the same kind
/// at every size).
fn int_dims(probe: &Probe) -> Vec<String> {
    probe
        .globals
        .iter()
        .filter(|(_, v)| matches!(v, Constant::Int(i) if *i >= 0))
        .map(|(k, _)| k.clone())
        .collect()
}

/// One size written for the folder: (set, role, label, probed size).
type PlannedSize = (&'static str, &'static str, String, ProbedSize);

/// The sizes written for the folder: (set, role, label, probed size).
fn size_plan(probe: &Probe) -> Vec<PlannedSize> {
    let ok = |key: &str| probe.sizes.get(key).filter(|s| s.error.is_none()).cloned();
    let full = ok("full").expect("the probe always reports the full size");
    let label = |s: &ProbedSize, fallback: &str| match &probe.batch {
        Some(b) => match s.globals.get(b) {
            Some(Constant::Int(v)) => format!("{}{v}", identifier(b)),
            _ => fallback.to_string(),
        },
        None => fallback.to_string(),
    };
    let mut plan = vec![("full", "in", label(&full, "full"), full.clone())];
    match ok("held_out") {
        Some(h) => plan.push(("full", "held", label(&h, "held-out"), h)),
        None => plan.push(("full", "held", "same-size".into(), full.clone())),
    }
    // A smoke size checks as many elements as any other: else the first
    // gate could pass a kernel that is wrong on a share of them.
    let enough = |s: &ProbedSize| crate::fewest_output_elements(s) >= crate::MIN_CHECKED_ELEMENTS;
    match (ok("smoke"), ok("smoke_held_out")) {
        (Some(s), Some(h)) if enough(&s) && enough(&h) => {
            plan.push(("smoke", "in", label(&s, "smoke"), s));
            plan.push(("smoke", "held", label(&h, "smoke-held-out"), h));
        }
        _ => {
            plan.push(("smoke", "in", label(&full, "full"), full.clone()));
            plan.push(("smoke", "held", "same-size".into(), full));
        }
    }
    plan
}

/// Write `problem` (probed as `probe`) as a task folder under `out`.
pub fn write_folder(
    problem: &Problem,
    probe: &Probe,
    screen: &Screen,
    out: &Path,
    options: &FolderOptions,
) -> Result<Written, KernelBenchError> {
    if options.seeds.is_empty() {
        return Err(unsupported(
            problem,
            "no seed kernel: give one as <seeds>/<problem>.cu or .cl".into(),
        ));
    }
    let buffers = buffers(probe).map_err(|m| unsupported(problem, m))?;
    let source = std::fs::read_to_string(&problem.path).map_err(|e| KernelBenchError::Io {
        path: problem.path.clone(),
        message: e.to_string(),
    })?;
    let task = problem.task_name();
    let dir = out.join(&task);
    std::fs::create_dir_all(&dir).map_err(|e| KernelBenchError::Io {
        path: dir.clone(),
        message: e.to_string(),
    })?;
    let layout = Layout::new(probe, options, buffers).map_err(|m| unsupported(problem, m))?;
    let work = Work::of(&layout);
    let (toml, dialects) = task_toml(problem, &task, &dir, &layout, &work, options)?;
    write(&dir.join("task.toml"), &toml)?;
    write(&dir.join("problem.py"), &source)?;
    write(&dir.join("reference.py"), REFERENCE_PY)?;
    write(
        &dir.join("brief.md"),
        &brief(
            problem,
            probe,
            &layout.buffers,
            &source,
            work.compute_bound,
            layout.stages,
        ),
    )?;
    let meta = metadata(problem, screen, &layout);
    write(
        &dir.join("kernelbench.json"),
        &serde_json::to_string_pretty(&meta).expect("metadata serialises"),
    )?;
    Ok(Written {
        task,
        dir,
        dialects,
        stages: layout.stages,
    })
}

/// The error for a problem kevo cannot write as a folder, and why.
fn unsupported(problem: &Problem, message: String) -> KernelBenchError {
    KernelBenchError::Unsupported {
        problem: problem.stem.clone(),
        message,
    }
}

/// kernelbench.json's content: where the problem came from, its screen
/// and baselines, and what the reference command needs.
fn metadata(problem: &Problem, screen: &Screen, layout: &Layout) -> KernelBenchMeta {
    let probe = layout.probe;
    KernelBenchMeta {
        level: problem.level,
        problem: problem.stem.clone(),
        torch: probe.torch.clone(),
        device: probe.device.clone(),
        eager_ms: probe.eager_ms.clone(),
        compile_ms: probe.compile_ms.clone(),
        flops: probe.flops,
        screen: screen.clone(),
        tolerance: probe.tolerance.clone(),
        reference: reference_meta(probe, &layout.buffers, &layout.plan),
    }
}

/// What reference.py needs to run the module on kevo's buffers: each
/// constant's kind, forward()'s arguments, the state's buffers, the
/// outputs, and every planned size's shapes by label.
fn reference_meta(probe: &Probe, buffers: &[Buffer], plan: &[PlannedSize]) -> ReferenceMeta {
    ReferenceMeta {
        globals: probe
            .globals
            .iter()
            .map(|(k, v)| {
                let kind = match v {
                    Constant::Bool(_) => "bool",
                    Constant::Int(_) => "int",
                    Constant::Float(_) => "float",
                };
                (k.clone(), kind.to_string())
            })
            .collect(),
        inputs: probe
            .inputs
            .iter()
            .enumerate()
            .map(|(k, i)| match &i.scalar {
                Some(v) => serde_json::json!({ "scalar": v }),
                None => {
                    let b = buffers
                        .iter()
                        .find(|b| matches!(b.shape, ShapeOf::Input(j) if j == k))
                        .map(|b| b.name.clone())
                        .unwrap_or_default();
                    serde_json::json!({ "buffer": b })
                }
            })
            .collect(),
        state: buffers
            .iter()
            .filter_map(|b| match &b.shape {
                ShapeOf::State(key) => Some((key.clone(), b.name.clone())),
                _ => None,
            })
            .collect(),
        outputs: buffers
            .iter()
            .filter(|b| b.role == "output")
            .map(|b| b.name.clone())
            .collect(),
        sizes: plan
            .iter()
            .map(|(_, _, label, size)| (label.clone(), size.clone()))
            .collect(),
    }
}

fn write(path: &Path, text: &str) -> Result<(), KernelBenchError> {
    std::fs::write(path, text).map_err(|e| KernelBenchError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A number forward() takes as is: its scalar type and value expression
/// (booleans as 1 and 0), the same in task.toml and the signature.
fn scalar_argument(value: &serde_json::Value) -> (&'static str, String) {
    match value {
        serde_json::Value::Bool(b) => ("i32", if *b { "1".into() } else { "0".into() }),
        v if v.is_i64() => ("i32", v.to_string()),
        v => ("f32", v.to_string()),
    }
}

fn constant_text(c: &Constant) -> String {
    match c {
        Constant::Bool(b) => b.to_string(),
        Constant::Int(i) => i.to_string(),
        Constant::Float(f) => format!("{f}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_fold_leading_axes_into_z() {
        assert_eq!(grid_of(&[]), [1, 1, 1]);
        assert_eq!(grid_of(&[7]), [7, 1, 1]);
        assert_eq!(grid_of(&[3, 5]), [5, 3, 1]);
        assert_eq!(grid_of(&[2, 3, 4, 5]), [5, 4, 6]);
    }

    #[test]
    fn fitted_distributions_snap_to_round_values() {
        let normal = Distribution::Normal {
            mean: 0.0075,
            std: 0.9967,
            fit: 0.98,
        };
        assert_eq!(init_toml(&normal), "{ normal = [0.0, 1.0] }");
        let uniform = Distribution::Uniform {
            low: 5.8e-6,
            high: 0.99999,
            fit: 0.99,
        };
        assert_eq!(init_toml(&uniform), "{ uniform = [0.0, 1.0] }");
        let weights = Distribution::Uniform {
            low: -0.0884,
            high: 0.0883,
            fit: 0.97,
        };
        assert_eq!(init_toml(&weights), "{ uniform = [-0.0884, 0.0883] }");
    }

    #[test]
    fn constant_weights_and_positive_inputs_are_drawn_so_no_kernel_can_skip_them() {
        let ones = Distribution::Constant {
            value: 1.0,
            fit: 1.0,
        };
        assert_eq!(init_toml(&drawn(&ones, true)), "{ uniform = [0.5, 1.5] }");
        let zeros = Distribution::Constant {
            value: 0.0,
            fit: 1.0,
        };
        assert_eq!(init_toml(&drawn(&zeros, true)), "{ uniform = [-0.5, 0.5] }");
        // An integer counter (num_batches_tracked) stays what it was.
        assert_eq!(init_toml(&drawn(&zeros, false)), "{ constant = 0.0 }");
        let positive = Distribution::Normal {
            mean: 10.0,
            std: 1.0,
            fit: 0.9,
        };
        assert_eq!(
            init_toml(&drawn(&positive, true)),
            "{ uniform = [7.0, 13.0] }"
        );
        let signed = Distribution::Normal {
            mean: 0.0,
            std: 1.0,
            fit: 0.9,
        };
        assert_eq!(drawn(&signed, true), signed);
    }

    #[test]
    fn scalar_arguments_have_one_type_in_the_folder_and_the_signature() {
        assert_eq!(
            scalar_argument(&serde_json::json!(3)),
            ("i32", "3".to_string())
        );
        assert_eq!(
            scalar_argument(&serde_json::json!(true)),
            ("i32", "1".to_string())
        );
        assert_eq!(
            scalar_argument(&serde_json::json!(0.5)),
            ("f32", "0.5".to_string())
        );
    }

    #[test]
    fn names_become_identifiers() {
        assert_eq!(identifier("linear.weight"), "linear_weight");
        assert_eq!(identifier("0.bias"), "_0_bias");
    }
}
