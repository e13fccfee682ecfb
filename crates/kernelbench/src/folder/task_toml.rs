//! task.toml of a folder: the layout decided from the probe (kernels in
//! sequence, dims, sizes) and each of the file's sections in order.

use std::fmt::Write as _;
use std::path::Path;

use super::signature::{signature, triton_signature};
use super::{
    Buffer, FolderOptions, PlannedSize, ShapeOf, element_bytes, grid_of, identifier, int_dims,
    numel, scalar_argument, shape_in, size_plan, unsupported, write,
};
use crate::KernelBenchError;
use crate::discover::Problem;
use crate::probe::{Constant, Probe, ProbedCheck, ProbedSize};

/// What a folder is made of, decided before any of it is written, so a
/// problem kevo cannot import fails before its files appear.
pub(super) struct Layout<'a> {
    pub(super) probe: &'a Probe,
    pub(super) buffers: Vec<Buffer>,
    pub(super) plan: Vec<PlannedSize>,
    /// The integer constants usable as dims.
    dims: Vec<String>,
    /// Kernels launched in sequence (1: a single `forward`).
    pub(super) stages: usize,
    kernel_names: Vec<String>,
    /// Every size's dims by name, in the order the sizes list them.
    dim_names: Vec<String>,
    /// The first output among the buffers: its shape sets the grid.
    output_index: usize,
}

impl<'a> Layout<'a> {
    /// Plan the folder of `probe`; an error says why it cannot be one.
    pub(super) fn new(
        probe: &'a Probe,
        options: &FolderOptions,
        buffers: Vec<Buffer>,
    ) -> Result<Layout<'a>, String> {
        let plan = size_plan(probe);
        let dims = int_dims(probe);
        let stages = stage_count(options, &plan)?;
        let kernel_names = kernel_names(stages);
        let dim_names = dim_names(&dims, &buffers, stages, probe.flops.is_some())?;
        let output_index = buffers
            .iter()
            .position(|b| b.role == "output")
            .ok_or_else(|| String::from("the module returns no tensor"))?;
        Ok(Layout {
            probe,
            buffers,
            plan,
            dims,
            stages,
            kernel_names,
            dim_names,
            output_index,
        })
    }

    /// One size's value of every dim, in [`Layout::dim_names`]' order.
    fn size_dims(&self, s: &ProbedSize) -> Result<Vec<u64>, String> {
        let buffers = &self.buffers;
        let mut v = Vec::new();
        for d in &self.dims {
            match s.globals.get(d) {
                Some(Constant::Int(i)) if *i >= 0 => v.push(*i as u64),
                _ => {
                    return Err(format!("the constant `{d}` is not a size at every size"));
                }
            }
        }
        for b in buffers {
            let shape =
                shape_in(s, &b.shape).ok_or_else(|| format!("no shape for `{}`", b.name))?;
            v.push(numel(shape));
        }
        for b in buffers.iter().filter(|b| b.structure.is_some()) {
            // The matrices' order: the last axis (the probe saw it square).
            let shape = shape_in(s, &b.shape).expect("shaped above");
            v.push(shape.last().copied().unwrap_or(1));
        }
        let out_shape = shape_in(s, &buffers[self.output_index].shape)
            .cloned()
            .unwrap_or_default();
        v.extend(grid_of(&out_shape));
        if self.stages > 1 {
            // Room for two of the largest intermediate at once: one stage
            // reads one while it writes the other.
            v.push(2 * numel(&s.largest));
            v.extend(grid_of(&s.largest));
        }
        if self.probe.flops.is_some() {
            v.push(s.flops.unwrap_or(self.probe.flops.unwrap_or(0)).max(1));
        }
        Ok(v)
    }
}

/// Kernels in sequence: the option, else what forward()'s ops need, at
/// least 1. More than one needs the largest intermediate's shape at every
/// planned size, to size the scratch.
fn stage_count(options: &FolderOptions, plan: &[PlannedSize]) -> Result<usize, String> {
    let stages = options
        .stages
        .unwrap_or_else(|| crate::probe::stages_needed(&plan[0].3.ops))
        .max(1);
    if stages > 1
        && let Some((_, _, label, _)) = plan.iter().find(|(_, _, _, s)| s.largest.is_empty())
    {
        return Err(format!(
            "{stages} stages need the largest intermediate tensor's shape, which the probe did not see at size `{label}` (its torch cannot trace forward()); import it with --stages 1"
        ));
    }
    Ok(stages)
}

/// The kernels' names: `forward` alone, or `stage1` to `stage<n>`.
fn kernel_names(stages: usize) -> Vec<String> {
    if stages == 1 {
        vec!["forward".into()]
    } else {
        (1..=stages).map(|k| format!("stage{k}")).collect()
    }
}

/// The dims' names per size: the constants, then each buffer's length,
/// each structured matrix's order, the grid, the scratch and intermediate
/// grid where there are stages, and the flop count where torch has one.
/// A constant may not take a name kevo gives a size.
fn dim_names(
    dims: &[String],
    buffers: &[Buffer],
    stages: usize,
    flops_known: bool,
) -> Result<Vec<String>, String> {
    let mut dim_names: Vec<String> = dims.to_vec();
    for b in buffers {
        dim_names.push(format!("n_{}", b.name));
    }
    for b in buffers.iter().filter(|b| b.structure.is_some()) {
        dim_names.push(format!("m_{}", b.name));
    }
    dim_names.extend(["grid_x", "grid_y", "grid_z"].map(String::from));
    if stages > 1 {
        dim_names.extend(["n_scratch", "inter_x", "inter_y", "inter_z"].map(String::from));
    }
    if flops_known {
        dim_names.push("flop_count".into());
    }
    let mut unique = std::collections::BTreeSet::new();
    for d in &dim_names {
        if !unique.insert(d.clone()) {
            return Err(format!(
                "the constant `{d}` clashes with a name kevo gives a size"
            ));
        }
    }
    Ok(dim_names)
}

/// The work model: torch's flop count where it has one and the problem
/// does more than ~10 flops per byte, else the bytes every correct
/// kernel moves (read each input and weight once, write each output).
pub(super) struct Work {
    /// The bytes moved, as an expression over the buffers' lengths.
    bytes_expr: String,
    pub(super) compute_bound: bool,
}

impl Work {
    /// The work model of `layout`, decided at its full size.
    pub(super) fn of(layout: &Layout) -> Work {
        // The bytes a kernel must move: every buffer but the state no
        // output depends on (the probe changed it and nothing changed).
        let unread = &layout.probe.unread_state;
        let buffers: Vec<&Buffer> = layout
            .buffers
            .iter()
            .filter(|b| !matches!(&b.shape, ShapeOf::State(key) if unread.contains(key)))
            .collect();
        let bytes_expr = buffers
            .iter()
            .map(|b| format!("{} * n_{}", element_bytes(b.ty), b.name))
            .collect::<Vec<_>>()
            .join(" + ");
        let full = &layout.plan[0].3;
        let full_bytes: u64 = buffers
            .iter()
            .map(|b| element_bytes(b.ty) * shape_in(full, &b.shape).map(|s| numel(s)).unwrap_or(1))
            .sum();
        let compute_bound = layout
            .probe
            .flops
            .is_some_and(|f| f as f64 >= 10.0 * full_bytes as f64);
        Work {
            bytes_expr,
            compute_bound,
        }
    }
}

/// task.toml's text. Each dialect's seed and signature are written into
/// `dir` on the way, as their sections name them; returns the text and
/// the dialects written.
pub(super) fn task_toml(
    problem: &Problem,
    task: &str,
    dir: &Path,
    layout: &Layout,
    work: &Work,
    options: &FolderOptions,
) -> Result<(String, Vec<String>), KernelBenchError> {
    let mut toml = header(problem, task, layout, work);
    write_sizes(&mut toml, layout).map_err(|m| unsupported(problem, m))?;
    let dialects = write_dialects(&mut toml, dir, layout, options)?;
    write_buffers(&mut toml, layout);
    let args = write_scalars(&mut toml, layout).map_err(|m| unsupported(problem, m))?;
    write_launches(&mut toml, layout, &args);
    write_checks(&mut toml, layout);
    let _ = writeln!(
        toml,
        "[reference]\ncommand = [{:?}, \"reference.py\"]",
        options.python
    );
    Ok((toml, dialects))
}

/// The top of task.toml: where it came from, the kernels, the dims, the
/// work model and the defaults.
fn header(problem: &Problem, task: &str, layout: &Layout, work: &Work) -> String {
    let mut toml = String::new();
    let _ = writeln!(
        toml,
        "# KernelBench level {} problem {} ({}), imported by `kevo kernelbench import`.\n# The PyTorch module is problem.py; kernelbench.json holds the screen and baselines.",
        problem.level, problem.id, problem.stem
    );
    let _ = writeln!(toml, "name = {task:?}");
    let _ = writeln!(toml, "kernels = {:?}", layout.kernel_names);
    let _ = writeln!(toml, "dims = {:?}", layout.dim_names);
    let bytes_expr = &work.bytes_expr;
    if work.compute_bound {
        let _ = writeln!(toml, "ceiling = \"fp32\"\nwork = \"flop_count\"");
        let _ = writeln!(
            toml,
            "work_note = \"FLOPs as torch's flop counter counts the module\""
        );
    } else {
        let _ = writeln!(toml, "ceiling = \"bandwidth\"\nwork = {bytes_expr:?}");
        let _ = writeln!(
            toml,
            "work_note = \"bytes: every input and weight the output depends on read once, every output written once\""
        );
        let _ = writeln!(toml, "min_traffic = {bytes_expr:?}");
    }
    let _ = writeln!(toml, "default_seed = 42\nbrief = \"brief.md\"");
    // Every run records kernelbench.json (problem, baselines, tolerance
    // derivation): `kevo table --kernelbench` needs the store alone.
    let _ = writeln!(toml, "provenance = \"kernelbench.json\"\n");
    toml
}

/// `[sizes.smoke]` and `[sizes.full]`: each set's in-distribution and
/// held-out size from the plan.
fn write_sizes(toml: &mut String, layout: &Layout) -> Result<(), String> {
    for set in ["smoke", "full"] {
        let _ = writeln!(toml, "[sizes.{set}]");
        let row = |role: &str| {
            layout
                .plan
                .iter()
                .find(|(s, r, _, _)| *s == set && *r == role)
                .expect("planned")
        };
        let (_, _, label, size) = row("in");
        let _ = writeln!(
            toml,
            "in_distribution = [{{ label = {label:?}, dims = {:?} }}]",
            layout.size_dims(size)?
        );
        let (_, _, label, size) = row("held");
        let _ = writeln!(
            toml,
            "held_out = {{ label = {label:?}, dims = {:?} }}\n",
            layout.size_dims(size)?
        );
    }
    Ok(())
}

/// `[dialects.*]` for every dialect with a seed, writing its seed and
/// signature files; returns the dialects written.
fn write_dialects(
    toml: &mut String,
    dir: &Path,
    layout: &Layout,
    options: &FolderOptions,
) -> Result<Vec<String>, KernelBenchError> {
    let mut dialects = Vec::new();
    for (dialect, ext) in [("cuda", "cu"), ("opencl", "cl"), ("triton", "py")] {
        let Some(seed) = options.seeds.get(dialect) else {
            continue;
        };
        write(&dir.join(format!("seed.{ext}")), seed)?;
        let text = if dialect == "triton" {
            triton_signature(layout.probe, &layout.buffers, &layout.kernel_names)
        } else {
            signature(
                layout.probe,
                &layout.buffers,
                dialect == "cuda",
                &layout.kernel_names,
            )
        };
        write(&dir.join(format!("signature.{ext}")), &text)?;
        let _ = writeln!(
            toml,
            "[dialects.{dialect}]\nseed = \"seed.{ext}\"\nsignature = \"signature.{ext}\"\n"
        );
        dialects.push(dialect.to_string());
    }
    Ok(dialects)
}

/// `[[buffers]]`: every tensor, then the scratch where there are stages.
fn write_buffers(toml: &mut String, layout: &Layout) {
    for b in &layout.buffers {
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
    if layout.stages > 1 {
        let _ = writeln!(
            toml,
            "# Intermediates between stages: twice the largest tensor forward() makes.\n[[buffers]]\nname = \"scratch\"\ntype = \"f32\"\nlength = \"n_scratch\"\nrole = \"scratch\"\n"
        );
    }
}

/// `[[scalars]]`: each constant as `k_<name>` (by its dim's name where it
/// is one; ints must fit an i32), then each number forward() takes as
/// `a_<name>`. Returns every launch's arguments: the buffers, the
/// scratch, then these scalars.
fn write_scalars(toml: &mut String, layout: &Layout) -> Result<Vec<String>, String> {
    let mut args: Vec<String> = layout.buffers.iter().map(|b| b.name.clone()).collect();
    if layout.stages > 1 {
        args.push("scratch".into());
    }
    for (name, value) in &layout.probe.globals {
        let scalar = format!("k_{}", identifier(name));
        let (ty, expr) = match value {
            Constant::Int(i) if *i > i32::MAX as i64 => {
                return Err(format!(
                    "the constant `{name}` = {i} does not fit a kernel's int"
                ));
            }
            Constant::Int(i) if *i >= 0 && layout.dims.contains(name) => ("i32", name.clone()),
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
    for input in layout.probe.inputs.iter().filter(|i| i.scalar.is_some()) {
        let scalar = format!("a_{}", identifier(&input.name));
        let value = input.scalar.clone().unwrap_or_default();
        let (ty, text) = scalar_argument(&value);
        let _ = writeln!(
            toml,
            "[[scalars]]\nname = {scalar:?}\ntype = {ty:?}\nvalue = {text:?}\n"
        );
        args.push(scalar);
    }
    Ok(args)
}

/// The default block for a grid: 256 threads in one dimension, 16 x 16 in
/// two or more.
fn default_block(grid: [u64; 3]) -> &'static str {
    match grid {
        [_, 1, 1] => "[256]",
        [_, _, 1] => "[16, 16]",
        _ => "[16, 16, 1]",
    }
}

/// `[[launches]]`, one per kernel with the same `args`: every stage but
/// the last runs over the largest intermediate's shape, the last over the
/// output's.
fn write_launches(toml: &mut String, layout: &Layout, args: &[String]) {
    let kernel_names = &layout.kernel_names;
    let block = default_block(grid_of(&layout.probe.outputs[0].shape));
    for (k, kernel) in kernel_names.iter().enumerate() {
        let grid = if k + 1 < kernel_names.len() {
            "[\"inter_x\", \"inter_y\", \"inter_z\"]"
        } else {
            "[\"grid_x\", \"grid_y\", \"grid_z\"]"
        };
        let block = if k + 1 < kernel_names.len() {
            default_block(grid_of(&layout.plan[0].3.largest))
        } else {
            block
        };
        let _ = writeln!(
            toml,
            "[[launches]]\nkernel = {kernel:?}\ngrid = {grid}\nblock = {{ default = {block} }}\nargs = {args:?}\n"
        );
    }
}

/// `[check.<output>]` as the probe derived it ([`ProbedCheck`]): bit for
/// bit for integers and selections; else every element within tau of
/// (|ref| + rms(ref)), from honest variants, with the narrower ones it
/// rejects named in a comment.
fn write_checks(toml: &mut String, layout: &Layout) {
    let outputs = layout.buffers.iter().filter(|b| b.role == "output");
    for (k, b) in outputs.enumerate() {
        let _ = writeln!(toml, "[check.{}]", b.name);
        let check = layout.probe.tolerance.get(k).map(|t| &t.check);
        match check {
            Some(c) if !c.exact && b.ty.starts_with('f') => {
                let tau = c.tau.unwrap_or(DEFAULT_TAU);
                let _ = writeln!(toml, "{}", tolerance_comment(c, tau));
                let _ = writeln!(toml, "rtol = {tau:?}\natol_rms = {tau:?}\nwithin = 1.0\n");
            }
            Some(c) => {
                let why = c.why.as_deref().unwrap_or("an exact output");
                let _ = writeln!(toml, "# bit for bit: {why}\nexact = true\n");
            }
            None if b.ty.starts_with('f') => {
                let _ = writeln!(
                    toml,
                    "# no derivation recorded: every element within {DEFAULT_TAU:e} (|ref| + rms(ref))\nrtol = {DEFAULT_TAU:?}\natol_rms = {DEFAULT_TAU:?}\nwithin = 1.0\n"
                );
            }
            None => {
                let _ = writeln!(toml, "# integers compare exactly\nexact = true\n");
            }
        }
    }
}

/// The check's default tau where the probe recorded none (1e-5: above
/// fast-math exp's error and a naive float32 sum's over 10^4 terms, below
/// fp16's rounding).
const DEFAULT_TAU: f64 = 1e-5;

/// The comment above a tolerance check: what tau came from and what it
/// rejects.
fn tolerance_comment(c: &ProbedCheck, tau: f64) -> String {
    let honest = c
        .honest_worst
        .map_or("not finite".to_string(), |e| format!("{e:.2e}"));
    let narrow = c
        .narrow_least
        .map_or("none measured".to_string(), |e| format!("{e:.2e}"));
    let verdict = if c.separated {
        "every narrower variant fails it".to_string()
    } else if c.not_separated.is_empty() {
        "no narrower variant ran: dtype honesty is not checked here".to_string()
    } else {
        format!(
            "{} would pass it: dtype honesty is not checked for {}",
            c.not_separated.join(", "),
            if c.not_separated.len() == 1 {
                "it"
            } else {
                "them"
            }
        )
    };
    let terms = c.reduction_length.map_or(String::new(), |n| {
        format!(", about {n:.0} terms summed per element")
    });
    format!(
        "# every element within {tau:.2e} (|ref| + rms(ref)): derived from honest variants\n# (worst {honest}{terms}; kernelbench.json's tolerance); the least wrong narrower\n# variant (bf16, fp16, TF32) is off by {narrow}: {verdict}."
    )
}
