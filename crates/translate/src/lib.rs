//! CUDA C++ kernel source to OpenCL C 1.2, so a winner found with CUDA can
//! be measured through an OpenCL driver (`kevo cross RUN --backend opencl`,
//! e.g. NVIDIA's OpenCL on the same GPU).
//!
//! The translation is a token rewrite, not a compiler: it keeps the
//! author's layout, comments and line numbers, maps CUDA's built-ins to
//! OpenCL's (`threadIdx.x` -> `get_local_id(0)`, `__syncthreads()` ->
//! `barrier(...)`, `sqrtf` -> `sqrt`, `atomicAdd` -> `atomic_add`, ...),
//! and infers the one thing OpenCL C 1.2 needs that CUDA leaves out: the
//! address space of every pointer (`__global` for kernel arguments,
//! `__local` for `__shared__` arrays, private otherwise), following
//! pointers through local variables, casts and `__device__` function
//! calls. What it cannot translate faithfully it refuses with the line and
//! the construct (warp shuffles, templates, dynamic shared memory, ...)
//! rather than emit a kernel that would measure something else. A
//! translated kernel is still checked by the task like any other, so a
//! translation that compiles but computes differently fails as wrong.

mod lex;
mod rewrite;

pub use rewrite::cuda_to_opencl;

/// Why a CUDA source was not translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    #[error("line {line}: {construct} has no OpenCL C 1.2 translation: {why}")]
    Unsupported {
        line: u32,
        construct: String,
        why: String,
    },
    #[error(
        "line {line}: cannot tell which memory `{name}` points to ({why}); OpenCL C needs the address space of every pointer"
    )]
    UnknownSpace {
        line: u32,
        name: String,
        why: String,
    },
    #[error(
        "line {line}: `{name}` is given pointers to {first} memory and to {second} memory; OpenCL C 1.2 needs one address space per pointer"
    )]
    MixedSpaces {
        line: u32,
        name: String,
        first: &'static str,
        second: &'static str,
    },
}
