//! The kernel signatures written into a folder (`signature.cu`, `.cl`,
//! `.py`): the argument order every candidate is held to.

use std::fmt::Write as _;

use super::{Buffer, c_type, constant_text, identifier, numel, scalar_argument, shape_in};
use crate::probe::{Constant, Probe};

pub(super) fn signature(
    probe: &Probe,
    buffers: &[Buffer],
    cuda: bool,
    kernels: &[String],
) -> String {
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
        // A constant the module turned into a parameter of the same name
        // (`self.constant = nn.Parameter(...)`): the kernel must use the
        // weight, which kevo draws anew, not the value it was built from.
        let weight = format!("w_{}", identifier(name));
        let shadowed = buffers.iter().any(|b| b.name == weight);
        let note = if shadowed {
            format!(
                "{name} = {}, only the value the module was built with: it uses its parameter {weight}, drawn anew",
                constant_text(value)
            )
        } else {
            format!("{name} = {}", constant_text(value))
        };
        params.push((format!("{ty} k_{}", identifier(name)), note));
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
pub(super) fn triton_signature(probe: &Probe, buffers: &[Buffer], kernels: &[String]) -> String {
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
