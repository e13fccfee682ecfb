//! brief.md of a folder: the problem as the proposer is shown it, its
//! arguments, and how a kernel is checked and scored.

use std::fmt::Write as _;

use super::{Buffer, ShapeOf, constant_text, identifier, numel, shape_in};
use crate::discover::Problem;
use crate::probe::Probe;

/// brief.md's text for `problem`, whose kernel takes `buffers`.
pub(super) fn brief(
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
        "\n## How it is checked and scored\n\n- Inputs and weights are drawn anew for every verification seed, from distributions fitted to the problem's own generators (weights that start constant, such as a norm's scale of 1, are drawn around that value, so no step can be skipped), and the reference is the module itself, run on them in float32 (TF32 off).\n- Every output element is checked: bit for bit where the output is integer or picks input values (a ReLU, a max), else within a bound that scales with the element's own magnitude plus a small share of the output's root mean square, derived from honest float32 variants of the module and below what float16, bfloat16 or TF32 arithmetic would give: compute and store in float32 (task.toml's [check]).\n- {}",
        if compute_bound {
            "The score is achieved FP32 FLOP/s (torch's flop count of the module) against the device's peak."
        } else {
            "The score is achieved bandwidth (every input and weight the output depends on read once, every output written once) against the device's peak."
        }
    );
    s
}
