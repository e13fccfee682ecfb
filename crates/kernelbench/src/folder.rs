//! Writing a probed problem as a kevo task folder.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::discover::Problem;
use crate::probe::{Constant, Distribution, Probe, ProbedSize, Timing};
use crate::screen::Screen;
use crate::{KernelBenchError, REFERENCE_PY};

/// How folders are written.
#[derive(Debug, Clone)]
pub struct FolderOptions {
    /// The interpreter the reference command runs with.
    pub python: String,
    /// Relative tolerance of the check (KernelBench: 1e-2 absolute and
    /// relative; here relative, with `within` of the elements).
    pub rtol: f64,
    /// The fraction of elements that must be within (KernelFoundry: 99%).
    pub within: f64,
    /// Floor on the cosine similarity of output and reference.
    pub cosine: f64,
    /// Ceiling on any element's error, as a fraction of the reference's
    /// largest magnitude: the elements `within` lets go stay bounded.
    pub peak_error: f64,
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
            rtol: 1e-2,
            within: 0.99,
            cosine: 0.999,
            peak_error: 1e-2,
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

/// The sizes written for the folder: (set, role, label, probed size).
fn size_plan(probe: &Probe) -> Vec<(&'static str, &'static str, String, ProbedSize)> {
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
    match (ok("smoke"), ok("smoke_held_out")) {
        (Some(s), Some(h)) => {
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
    let unsupported = |message: String| KernelBenchError::Unsupported {
        problem: problem.stem.clone(),
        message,
    };
    if options.seeds.is_empty() {
        return Err(unsupported(
            "no seed kernel: give one as <seeds>/<problem>.cu or .cl".into(),
        ));
    }
    let buffers = buffers(probe).map_err(unsupported)?;
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
    let plan = size_plan(probe);
    let dims = int_dims(probe);
    let stages = options
        .stages
        .unwrap_or_else(|| crate::probe::stages_needed(&plan[0].3.ops))
        .max(1);
    if stages > 1
        && let Some((_, _, label, _)) = plan.iter().find(|(_, _, _, s)| s.largest.is_empty())
    {
        return Err(unsupported(format!(
            "{stages} stages need the largest intermediate tensor's shape, which the probe did not see at size `{label}` (its torch cannot trace forward()); import it with --stages 1"
        )));
    }
    let kernel_names: Vec<String> = if stages == 1 {
        vec!["forward".into()]
    } else {
        (1..=stages).map(|k| format!("stage{k}")).collect()
    };
    // Per size: the constants, then each buffer's length, then the grid.
    let mut dim_names: Vec<String> = dims.clone();
    for b in &buffers {
        dim_names.push(format!("n_{}", b.name));
    }
    for b in buffers.iter().filter(|b| b.structure.is_some()) {
        dim_names.push(format!("m_{}", b.name));
    }
    dim_names.extend(["grid_x", "grid_y", "grid_z"].map(String::from));
    if stages > 1 {
        dim_names.extend(["n_scratch", "inter_x", "inter_y", "inter_z"].map(String::from));
    }
    let flops_known = probe.flops.is_some();
    if flops_known {
        dim_names.push("flop_count".into());
    }
    let mut unique = std::collections::BTreeSet::new();
    for d in &dim_names {
        if !unique.insert(d.clone()) {
            return Err(unsupported(format!(
                "the constant `{d}` clashes with a name kevo gives a size"
            )));
        }
    }
    let output_index = buffers
        .iter()
        .position(|b| b.role == "output")
        .ok_or_else(|| unsupported("the module returns no tensor".into()))?;
    let size_dims = |s: &ProbedSize| -> Result<Vec<u64>, KernelBenchError> {
        let mut v = Vec::new();
        for d in &dims {
            match s.globals.get(d) {
                Some(Constant::Int(i)) if *i >= 0 => v.push(*i as u64),
                _ => {
                    return Err(unsupported(format!(
                        "the constant `{d}` is not a size at every size"
                    )));
                }
            }
        }
        for b in &buffers {
            let shape = shape_in(s, &b.shape)
                .ok_or_else(|| unsupported(format!("no shape for `{}`", b.name)))?;
            v.push(numel(shape));
        }
        for b in buffers.iter().filter(|b| b.structure.is_some()) {
            // The matrices' order: the last axis (the probe saw it square).
            let shape = shape_in(s, &b.shape).expect("shaped above");
            v.push(shape.last().copied().unwrap_or(1));
        }
        let out_shape = shape_in(s, &buffers[output_index].shape)
            .cloned()
            .unwrap_or_default();
        v.extend(grid_of(&out_shape));
        if stages > 1 {
            // Room for two of the largest intermediate at once: one stage
            // reads one while it writes the other.
            v.push(2 * numel(&s.largest));
            v.extend(grid_of(&s.largest));
        }
        if flops_known {
            v.push(s.flops.unwrap_or(probe.flops.unwrap_or(0)).max(1));
        }
        Ok(v)
    };
    // The work model: torch's flop count where it has one and the problem
    // does more than ~10 flops per byte, else the bytes every correct
    // kernel moves (read each input and weight once, write each output).
    let bytes_expr = buffers
        .iter()
        .map(|b| format!("{} * n_{}", element_bytes(b.ty), b.name))
        .collect::<Vec<_>>()
        .join(" + ");
    let full = &plan[0].3;
    let full_bytes: u64 = buffers
        .iter()
        .map(|b| element_bytes(b.ty) * shape_in(full, &b.shape).map(|s| numel(s)).unwrap_or(1))
        .sum();
    let compute_bound = probe
        .flops
        .is_some_and(|f| f as f64 >= 10.0 * full_bytes as f64);
    let mut toml = String::new();
    let _ = writeln!(
        toml,
        "# KernelBench level {} problem {} ({}), imported by `kevo kernelbench import`.\n# The PyTorch module is problem.py; kernelbench.json holds the screen and baselines.",
        problem.level, problem.id, problem.stem
    );
    let _ = writeln!(toml, "name = {task:?}");
    let _ = writeln!(toml, "kernels = {kernel_names:?}");
    let _ = writeln!(toml, "dims = {:?}", dim_names);
    if compute_bound {
        let _ = writeln!(toml, "ceiling = \"fp32\"\nwork = \"flop_count\"");
        let _ = writeln!(
            toml,
            "work_note = \"FLOPs as torch's flop counter counts the module\""
        );
    } else {
        let _ = writeln!(toml, "ceiling = \"bandwidth\"\nwork = {bytes_expr:?}");
        let _ = writeln!(
            toml,
            "work_note = \"bytes: every input and weight read once, every output written once\""
        );
        let _ = writeln!(toml, "min_traffic = {bytes_expr:?}");
    }
    let _ = writeln!(toml, "default_seed = 42\nbrief = \"brief.md\"\n");
    for set in ["smoke", "full"] {
        let _ = writeln!(toml, "[sizes.{set}]");
        let row = |role: &str| {
            plan.iter()
                .find(|(s, r, _, _)| *s == set && *r == role)
                .expect("planned")
        };
        let (_, _, label, size) = row("in");
        let _ = writeln!(
            toml,
            "in_distribution = [{{ label = {label:?}, dims = {:?} }}]",
            size_dims(size)?
        );
        let (_, _, label, size) = row("held");
        let _ = writeln!(
            toml,
            "held_out = {{ label = {label:?}, dims = {:?} }}\n",
            size_dims(size)?
        );
    }
    let mut dialects = Vec::new();
    for (dialect, ext) in [("cuda", "cu"), ("opencl", "cl"), ("triton", "py")] {
        let Some(seed) = options.seeds.get(dialect) else {
            continue;
        };
        write(&dir.join(format!("seed.{ext}")), seed)?;
        let text = if dialect == "triton" {
            triton_signature(probe, &buffers, &kernel_names)
        } else {
            signature(probe, &buffers, dialect == "cuda", &kernel_names)
        };
        write(&dir.join(format!("signature.{ext}")), &text)?;
        let _ = writeln!(
            toml,
            "[dialects.{dialect}]\nseed = \"seed.{ext}\"\nsignature = \"signature.{ext}\"\n"
        );
        dialects.push(dialect.to_string());
    }
    for b in &buffers {
        let _ = writeln!(
            toml,
            "[[buffers]]\nname = {:?}\ntype = {:?}\nlength = \"n_{}\"\nrole = {:?}",
            b.name, b.ty, b.name, b.role
        );
        if let Some(init) = &b.init {
            let _ = writeln!(toml, "init = {init}");
        }
        if let Some(kind) = &b.structure {
            let _ = writeln!(toml, "structure = {{ {kind} = \"m_{}\" }}", b.name);
        }
        toml.push('\n');
    }
    let mut args: Vec<String> = buffers.iter().map(|b| b.name.clone()).collect();
    if stages > 1 {
        let _ = writeln!(
            toml,
            "# Intermediates between stages: twice the largest tensor forward() makes.\n[[buffers]]\nname = \"scratch\"\ntype = \"f32\"\nlength = \"n_scratch\"\nrole = \"scratch\"\n"
        );
        args.push("scratch".into());
    }
    for (name, value) in &probe.globals {
        let scalar = format!("k_{}", identifier(name));
        let (ty, expr) = match value {
            Constant::Int(i) if *i > i32::MAX as i64 => {
                return Err(unsupported(format!(
                    "the constant `{name}` = {i} does not fit a kernel's int"
                )));
            }
            Constant::Int(i) if *i >= 0 && dims.contains(name) => ("i32", name.clone()),
            Constant::Int(i) => ("i32", i.to_string()),
            Constant::Float(f) => ("f32", format!("{f:?}")),
            Constant::Bool(b) => ("i32", if *b { "1".into() } else { "0".into() }),
        };
        let _ = writeln!(
            toml,
            "[[scalars]]\nname = {scalar:?}\ntype = {ty:?}\nvalue = {expr:?}\n"
        );
        args.push(scalar);
    }
    for input in probe.inputs.iter().filter(|i| i.scalar.is_some()) {
        let scalar = format!("a_{}", identifier(&input.name));
        let value = input.scalar.clone().unwrap_or_default();
        let (ty, text) = scalar_argument(&value);
        let _ = writeln!(
            toml,
            "[[scalars]]\nname = {scalar:?}\ntype = {ty:?}\nvalue = {text:?}\n"
        );
        args.push(scalar);
    }
    let block = match grid_of(&probe.outputs[0].shape) {
        [_, 1, 1] => "[256]",
        [_, _, 1] => "[16, 16]",
        _ => "[16, 16, 1]",
    };
    for (k, kernel) in kernel_names.iter().enumerate() {
        // Every stage but the last runs over the largest intermediate's
        // shape; the last over the output's.
        let grid = if k + 1 < kernel_names.len() {
            "[\"inter_x\", \"inter_y\", \"inter_z\"]"
        } else {
            "[\"grid_x\", \"grid_y\", \"grid_z\"]"
        };
        let block = if k + 1 < kernel_names.len() {
            match grid_of(&plan[0].3.largest) {
                [_, 1, 1] => "[256]",
                [_, _, 1] => "[16, 16]",
                _ => "[16, 16, 1]",
            }
        } else {
            block
        };
        let _ = writeln!(
            toml,
            "[[launches]]\nkernel = {kernel:?}\ngrid = {grid}\nblock = {{ default = {block} }}\nargs = {args:?}\n"
        );
    }
    for b in buffers.iter().filter(|b| b.role == "output") {
        let _ = writeln!(toml, "[check.{}]", b.name);
        if b.ty.starts_with('f') {
            let absmax = probe
                .outputs
                .first()
                .and_then(|o| o.absmax)
                .unwrap_or(1.0)
                .max(1e-30);
            let _ = writeln!(
                toml,
                "# {}% of elements within a relative {}, a cosine floor of {}, no element\n# off by more than {} of the largest |reference|, and an absolute slack\n# of 1e-6 of the largest output ({absmax:.3e}) for zeros.",
                options.within * 100.0,
                options.rtol,
                options.cosine,
                options.peak_error
            );
            let _ = writeln!(
                toml,
                "rtol = {:?}\natol = {:?}\nwithin = {:?}\ncosine = {:?}\npeak_error = {:?}\n",
                options.rtol,
                absmax * 1e-6,
                options.within,
                options.cosine,
                options.peak_error
            );
        } else {
            let _ = writeln!(toml, "# integers compare exactly\nwithin = 1.0\n");
        }
    }
    let _ = writeln!(
        toml,
        "[reference]\ncommand = [{:?}, \"reference.py\"]",
        options.python
    );
    write(&dir.join("task.toml"), &toml)?;
    write(&dir.join("problem.py"), &source)?;
    write(&dir.join("reference.py"), REFERENCE_PY)?;
    write(
        &dir.join("brief.md"),
        &brief(problem, probe, &buffers, &source, compute_bound, stages),
    )?;
    let meta = KernelBenchMeta {
        level: problem.level,
        problem: problem.stem.clone(),
        torch: probe.torch.clone(),
        device: probe.device.clone(),
        eager_ms: probe.eager_ms.clone(),
        compile_ms: probe.compile_ms.clone(),
        flops: probe.flops,
        screen: screen.clone(),
        reference: ReferenceMeta {
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
        },
    };
    write(
        &dir.join("kernelbench.json"),
        &serde_json::to_string_pretty(&meta).expect("metadata serialises"),
    )?;
    Ok(Written {
        task,
        dir,
        dialects,
        stages,
    })
}

fn write(path: &Path, text: &str) -> Result<(), KernelBenchError> {
    std::fs::write(path, text).map_err(|e| KernelBenchError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn signature(probe: &Probe, buffers: &[Buffer], cuda: bool, kernels: &[String]) -> String {
    let full = probe.sizes.get("full");
    let mut params = Vec::new();
    for b in buffers {
        let shape = full
            .and_then(|s| shape_in(s, &b.shape))
            .map(|s| format!("{s:?}"))
            .unwrap_or_default();
        let ty = c_type(b.ty, cuda);
        let (space, constness) = match (cuda, b.role) {
            (true, "input") => ("", "const "),
            (true, _) => ("", ""),
            (false, "input") => ("__global ", "const "),
            (false, _) => ("__global ", ""),
        };
        params.push((
            format!("{space}{constness}{ty}* {}", b.name),
            format!("{} {shape}", b.role),
        ));
    }
    if kernels.len() > 1 {
        let largest = full.map(|s| s.largest.clone()).unwrap_or_default();
        params.push((
            format!("{}float* scratch", if cuda { "" } else { "__global " }),
            format!(
                "scratch, {} floats: twice the largest intermediate {largest:?}",
                2 * numel(&largest)
            ),
        ));
    }
    for (name, value) in &probe.globals {
        let ty = match value {
            Constant::Float(_) => "float",
            _ => "int",
        };
        params.push((
            format!("{ty} k_{}", identifier(name)),
            format!("{name} = {}", constant_text(value)),
        ));
    }
    for input in probe.inputs.iter().filter(|i| i.scalar.is_some()) {
        let (ty, _) = scalar_argument(input.scalar.as_ref().expect("filtered"));
        let c = if ty == "i32" { "int" } else { "float" };
        params.push((
            format!("{c} a_{}", identifier(&input.name)),
            "forward() argument".into(),
        ));
    }
    let mut s = String::from(
        "// Entry point (argument order is the contract; scalars are passed by value).\n// Shapes are at the full size; tensors are contiguous, row-major.\n",
    );
    if kernels.len() > 1 {
        let _ = writeln!(
            s,
            "// {} kernels run in this order, each with the same arguments; `scratch`\n// carries intermediates from one to the next.",
            kernels.len()
        );
    }
    let n = params.len();
    for kernel in kernels {
        s.push_str(&if cuda {
            format!("extern \"C\" __global__ void {kernel}(")
        } else {
            format!("__kernel void {kernel}(")
        });
        for (k, (p, note)) in params.iter().enumerate() {
            let sep = if k + 1 == n { ");" } else { "," };
            let _ = write!(s, "\n    {p}{sep}  // {note}");
        }
        s.push('\n');
    }
    if kernels.len() > 1 {
        s.push_str("// Launch: every stage but the last has one thread per element of the\n// largest intermediate; the last one thread per output element. A grid\n// is the shape, innermost axis first (x), leading axes folded into z.\n");
    } else {
        s.push_str("// Launch: one thread per output element by default: grid = the output's\n// shape, innermost axis first (x), leading axes folded into z.\n");
    }
    s
}

/// The Triton form of [`signature`]: the same parameters in the same
/// order, with Triton's types, for `@triton.jit` functions. The CUDA
/// signature stays the typed contract kevo reads; this one is what a
/// Triton author is shown.
fn triton_signature(probe: &Probe, buffers: &[Buffer], kernels: &[String]) -> String {
    // The CUDA signature's parameter lines, reused for names and notes.
    let cuda = signature(probe, buffers, true, kernels);
    let first = kernels.first().map(String::as_str).unwrap_or("kernel");
    let mut params: Vec<(String, String, String)> = Vec::new();
    let mut inside = false;
    for line in cuda.lines() {
        if line.contains(&format!("void {first}(")) {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        let (decl, note) = line.split_once("//").unwrap_or((line, ""));
        let decl = decl.trim().trim_end_matches([',', ';', ')']);
        let pointer = decl.contains('*');
        let words: Vec<&str> = decl
            .split(|c: char| c.is_whitespace() || c == '*')
            .filter(|w| !w.is_empty() && *w != "const")
            .collect();
        let Some((name, ty)) = words.split_last() else {
            continue;
        };
        let element = match ty.join(" ").as_str() {
            "double" => "fp64",
            "int" => "i32",
            "long long" => "i64",
            "unsigned char" => "u8",
            _ => "fp32",
        };
        let ty = if pointer {
            format!("*{element}")
        } else {
            element.to_string()
        };
        params.push((name.to_string(), ty, note.trim().to_string()));
        if line.trim_end().ends_with(';') || line.contains(");") {
            break;
        }
    }
    let mut s = String::from(
        "# Entry point for Triton (argument order and names are the contract;
# scalars arrive by value). Shapes are at the full size; tensors are
# contiguous, row-major. tl.constexpr parameters with defaults may follow.
import triton
import triton.language as tl
",
    );
    if kernels.len() > 1 {
        let _ = writeln!(
            s,
            "# {} kernels run in this order, each with the same arguments; `scratch`
# carries intermediates from one to the next.",
            kernels.len()
        );
    }
    for kernel in kernels {
        let _ = write!(
            s,
            "

@triton.jit
def {kernel}("
        );
        for (name, ty, note) in &params {
            let _ = write!(
                s,
                "
        {name},  # {ty}: {note}"
            );
        }
        s.push_str(
            "
        BLOCK: tl.constexpr = 1024):
    ...
",
        );
    }
    let _ = write!(
        s,
        "
# Launch: declare each kernel's grid in programs per axis over the
# integer scalars above and your constexprs, e.g.
#   # kevo: grid {first} = (cdiv(N, BLOCK),)
# where N stands for the number of outputs written from the constants.
"
    );
    s
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

fn brief(
    problem: &Problem,
    probe: &Probe,
    buffers: &[Buffer],
    source: &str,
    compute_bound: bool,
    stages: usize,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# KernelBench level {} problem {}: {}\n",
        problem.level, problem.id, problem.stem
    );
    let _ = writeln!(
        s,
        "Write a kernel that computes what this PyTorch module's forward() returns, for the inputs and weights kevo passes. The module, as the benchmark defines it:\n\n```python\n{}\n```\n",
        source.trim_end()
    );
    let _ = writeln!(s, "## The kernel's arguments\n");
    let full = probe.sizes.get("full");
    for b in buffers {
        let shape = full
            .and_then(|f| shape_in(f, &b.shape))
            .map(|s| format!("{s:?}"))
            .unwrap_or_default();
        let what = match &b.shape {
            ShapeOf::Input(k) => format!("forward() argument `{}`", probe.inputs[*k].name),
            ShapeOf::State(key) => format!("the module's `{key}` (state_dict)"),
            ShapeOf::Output(k) => format!("output {k} of forward()"),
        };
        let kind = match b.structure.as_deref() {
            Some("upper") => {
                " Upper triangular matrices on the last two axes: zero below the diagonal, as the problem's inputs are."
            }
            Some("lower") => {
                " Lower triangular matrices on the last two axes: zero above the diagonal, as the problem's inputs are."
            }
            Some("symmetric") => {
                " Symmetric matrices on the last two axes, as the problem's inputs are."
            }
            _ => "",
        };
        let _ = writeln!(
            s,
            "- `{}` ({}, {}): {what}, shape {shape} at the full size.{kind}",
            b.name, b.ty, b.role
        );
    }
    for (name, value) in &probe.globals {
        let _ = writeln!(
            s,
            "- `k_{}`: the constant `{name}` ({}).",
            identifier(name),
            constant_text(value)
        );
    }
    if stages > 1 {
        let largest = full.map(|f| f.largest.clone()).unwrap_or_default();
        let _ = writeln!(
            s,
            "- `scratch` (f32, scratch): {} floats at the full size, twice the largest intermediate tensor of forward() ({largest:?}); it starts as garbage.\n\nforward() reduces over the result of a matrix product or convolution, so the work is split into {stages} kernels, `stage1` to `stage{stages}`, launched in that order with the same arguments. Every stage but the last runs one thread per element of that largest intermediate; `stage{stages}` runs one thread per output element and writes the output. A stage may leave its result in `scratch` for the next; how the stages share the work is the kernel's choice.",
            2 * numel(&largest)
        );
    }
    let _ = match probe.batch.as_deref() {
        Some(b) => writeln!(
            s,
            "\nThe held-out size changes `{b}`; a kernel must read shapes from these arguments, not assume them."
        ),
        None => writeln!(
            s,
            "\nNo constant changes the batch alone, so the held-out size is the problem's own size. Read shapes from these arguments all the same."
        ),
    };
    let _ = writeln!(
        s,
        "\n## How it is checked and scored\n\n- Inputs and weights are drawn anew for every verification seed, from distributions fitted to the problem's own generators (weights that start constant, such as a norm's scale of 1, are drawn around that value, so no step can be skipped), and the reference is the module itself, run on them in float32 (TF32 off).\n- At least 99% of output elements must be within the relative tolerance, no element may be off by more than a share of the reference's largest magnitude (so the other 1% cannot be far off where the output is large), and the cosine similarity of output and reference must clear its floor (task.toml's [check]).\n- {}",
        if compute_bound {
            "The score is achieved FP32 FLOP/s (torch's flop count of the module) against the device's peak."
        } else {
            "The score is achieved bandwidth (every input and weight read once, every output written once) against the device's peak."
        }
    );
    s
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
