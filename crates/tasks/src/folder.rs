//! User-defined tasks: a folder with a `task.toml` that declares, as data,
//! everything a built-in task has in Rust (buffers, launches, checks and
//! the reference), next to its brief and kernels. This module reads and
//! validates such a folder into a [`FolderTask`] definition; every mistake
//! is an error naming the file, the key and what was expected, before
//! anything is compiled or measured.
//!
//! ```toml
//! name = "scale"
//! kernels = ["scale"]
//! dims = ["N"]
//! ceiling = "bandwidth"
//! work = "8 * N"
//! default_seed = 7
//! brief = "brief.md"
//! steps = "n_steps"             # the launches of stage "step" run this often (default 1)
//! ping_pong = [["u", "v"]]      # pairs that swap after every step
//!
//! [dialects.cuda]
//! seed = "seed.cu"
//! signature = "signature.cu"
//!
//! [derived]
//! HALF = "N / 2"
//!
//! [[buffers]]
//! name = "x"
//! type = "f32"                  # f16 f32 f64 i32 u32 i64 u8, or vectors: f32x4
//! length = "N"                  # elements, an expression of dims and derived
//! role = "input"                # input, output, inout, scratch
//! init = { uniform = [-1.0, 1.0] }   # normal, integers, constant, "iota", "zero", npy
//! # structure = { upper = "N" }  # optional: the buffer is square N x N matrices,
//! #                              # upper or lower triangular, or symmetric
//!
//! [[scalars]]
//! name = "a"
//! type = "f32"
//! value = "2.5"                 # may use dims, derived and `step`
//!
//! [[launches]]
//! kernel = "scale"
//! grid = ["N"]                  # threads per dimension
//! block = { default = [256] }   # or { fixed = [...] }
//! args = ["x", "y", "a"]
//! stage = "step"                # "setup" (once, before), "step", "finish" (once, after)
//!
//! [check.y]
//! rtol = 1e-5
//! atol = 1e-6
//! within = 1.0                  # fraction of elements that must be within
//! cosine = 0.999                # optional floor on the cosine similarity
//! peak_error = 1e-2             # optional: no element off by more than this
//!                               # fraction of the reference's largest |value|
//! atol_rms = 4e-5               # optional: atol grows by this fraction of the
//!                               # reference's root mean square
//!
//! [reference]
//! command = ["python3", "reference.py"]   # or kernel = {...}, golden = "dir"
//! ```
//!
//! An optional top-level `provenance = "FILE.json"` (before the first
//! table) names a JSON file of the folder that every run on the task
//! records in its settings' provenance: a KernelBench import's problem,
//! baselines and tolerance derivation travel with the runs that way.
//!
//! The reference is one of: `kernel = { cuda = "reference.cu", ... }`, run
//! by the evaluator on the device; `command = [...]`, run in the folder on
//! the coordinator once per (size, inputs) with `KEVO_INPUTS` (a directory
//! of `NAME.npy`, one per buffer that starts with data), `KEVO_OUTPUTS`
//! (where it writes `NAME.npy` per checked output), `KEVO_SIZE` and
//! `KEVO_<DIM>` for every dimension and derived value; or `golden = "dir"`,
//! `dir/SET/SIZE_LABEL/NAME.npy` for seed-independent inputs.
//!
//! Sizes (`[sizes.smoke]`, `[sizes.full]`, optional `[sizes.large]`) are
//! written as for the built-in tasks: `in_distribution`, `held_out` and,
//! for `kevo evolve --validate`, `validation = [{ label, dims }, ...]`
//! (sizes never shown, distinct from the others); `regime` and
//! `work_note` are optional, and so is `min_traffic` (bandwidth tasks:
//! the bytes any correct kernel must move, an expression of the dims,
//! where `work` counts more; the plausibility rule holds kernels to it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::expr::Expr;
use crate::spec::TaskSpec;

/// A task folder that does not define a usable task: the file, the key and
/// what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {key}: {message}")]
pub struct FolderError {
    pub file: String,
    pub key: String,
    pub message: String,
}

/// Element types of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    F16,
    F32,
    F64,
    I32,
    U32,
    I64,
    U8,
}

impl Scalar {
    fn parse(text: &str) -> Option<Scalar> {
        Some(match text {
            "f16" => Scalar::F16,
            "f32" => Scalar::F32,
            "f64" => Scalar::F64,
            "i32" => Scalar::I32,
            "u32" => Scalar::U32,
            "i64" => Scalar::I64,
            "u8" => Scalar::U8,
            _ => return None,
        })
    }

    pub fn bytes(self) -> usize {
        match self {
            Scalar::U8 => 1,
            Scalar::F16 => 2,
            Scalar::F32 | Scalar::I32 | Scalar::U32 => 4,
            Scalar::F64 | Scalar::I64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::F32 | Scalar::F64)
    }
}

/// A buffer's element: a scalar or a short vector of them (`f32x4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementType {
    pub scalar: Scalar,
    pub lanes: u8,
}

const TYPES: &str = "f16, f32, f64, i32, u32, i64, u8, or a vector such as f32x4 (2, 3 or 4 lanes)";

impl ElementType {
    fn parse(text: &str) -> Option<ElementType> {
        let (scalar, lanes) = match text.split_once('x') {
            Some((s, l)) => (s, l.parse::<u8>().ok().filter(|l| (2..=4).contains(l))?),
            None => (text, 1),
        };
        Some(ElementType {
            scalar: Scalar::parse(scalar)?,
            lanes,
        })
    }

    pub fn bytes(self) -> usize {
        self.scalar.bytes() * usize::from(self.lanes)
    }
}

/// What a buffer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read-only input, restored before every run.
    Input,
    /// Written by the kernels, checked; starts as a sentinel (NaN).
    Output,
    /// Starts with data, written by the kernels, checked.
    Inout,
    /// Working memory: starts as a sentinel, not checked.
    Scratch,
}

/// How a buffer starts, drawn from the input seed where random.
#[derive(Debug, Clone, PartialEq)]
pub enum Init {
    Uniform {
        low: f64,
        high: f64,
    },
    Normal {
        mean: f64,
        std: f64,
    },
    Integers {
        low: i64,
        high: i64,
    },
    Constant(f64),
    Iota,
    Zero,
    /// A `.npy` file of the folder, read when the folder loads: the
    /// buffer's bytes, and how many scalars they hold (the buffer's
    /// length times its lanes must match at every size).
    Npy {
        file: String,
        data: std::sync::Arc<Vec<u8>>,
        scalars: u64,
    },
}

#[derive(Debug, Clone)]
pub struct BufferDef {
    pub name: String,
    pub element: ElementType,
    pub length: Expr,
    pub role: Role,
    pub init: Option<Init>,
    /// Drawn values shaped into square matrices of a kind, for problems
    /// whose kernels may rely on it (a triangular matmul skips the zero
    /// half): drawn unshaped, such a problem would be another problem.
    pub structure: Option<Structure>,
}

/// Square matrices of one kind, stored row by row, one after another.
#[derive(Debug, Clone)]
pub struct Structure {
    pub kind: StructureKind,
    /// The matrices' order (rows = columns), an expression of the dims.
    pub order: Expr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StructureKind {
    /// Zero below the diagonal.
    Upper,
    /// Zero above the diagonal.
    Lower,
    /// Below the diagonal, the mirror of above it.
    Symmetric,
}

/// A by-value argument.
#[derive(Debug, Clone)]
pub struct ScalarDef {
    pub name: String,
    pub scalar: Scalar,
    /// Over dims, derived values and `step` (last).
    pub value: Expr,
}

/// Whether the candidate may choose a launch's block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockDef {
    Default([u32; 3]),
    Fixed([u32; 3]),
}

#[derive(Debug, Clone)]
pub struct LaunchDef {
    /// Index into the task's kernels.
    pub kernel: usize,
    /// Threads per dimension (1 to 3 expressions).
    pub grid: Vec<Expr>,
    pub block: BlockDef,
    /// Buffer or scalar names, in the entry point's parameter order.
    pub args: Vec<String>,
    pub stage: Stage,
}

/// When a launch runs: once before the steps, in every step, or once after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Setup,
    Step,
    Finish,
}

/// How an output buffer is compared with the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckDef {
    pub atol: f64,
    pub rtol: f64,
    /// The fraction of elements that must be within `atol + rtol * |ref|`.
    pub within: f64,
    /// A floor on the cosine similarity of output and reference.
    pub cosine: Option<f64>,
    /// A ceiling on every element's error, as a fraction of the reference's
    /// largest magnitude. `within` < 1 lets a share of elements be anything
    /// the cosine floor tolerates (0.1% zeroed passes a floor of 0.999);
    /// this bounds those too, while accumulation-order error (about 1e-5 of
    /// the peak for fp32 sums of 10^4 terms) stays far below 1e-2.
    pub peak_error: Option<f64>,
    /// More absolute slack: this fraction of the reference's root mean
    /// square, taken at every comparison. An element's bound then scales
    /// with its own magnitude and, near zero, with the output's typical
    /// one: the same bound serves sizes whose outputs differ in scale
    /// (a product's grows with the square root of its length).
    pub atol_rms: f64,
    /// Bit-exact (integer outputs always are).
    pub exact: bool,
}

/// Where the expected outputs come from.
#[derive(Debug, Clone, PartialEq)]
pub enum ReferenceDef {
    /// A kernel per dialect (dialect -> source), run by kevo on the device
    /// with the same launches.
    Kernel(BTreeMap<String, String>),
    /// A program that reads the inputs as .npy files and writes the
    /// expected outputs as .npy, run once per (size, input seed).
    Command(Vec<String>),
    /// Expected outputs as .npy files under this directory of the folder
    /// (`DIR/SET/SIZE_LABEL/OUTPUT.npy`), for inputs that do not depend on the
    /// seed (npy, constant, iota, zero).
    Golden(String),
}

/// A validated task folder.
#[derive(Debug, Clone)]
pub struct FolderTask {
    pub root: PathBuf,
    /// Every file of the folder, as validated (what is hashed and shipped).
    pub files: std::sync::Arc<FolderFiles>,
    pub spec: TaskSpec,
    pub brief: String,
    /// Dialect name ("cuda", "opencl", "metal", "triton") -> (seed, signature).
    pub dialects: BTreeMap<String, (String, String)>,
    /// Derived quantities, in order, over the dims and earlier ones.
    pub derived: Vec<(String, Expr)>,
    pub buffers: Vec<BufferDef>,
    pub scalars: Vec<ScalarDef>,
    pub launches: Vec<LaunchDef>,
    /// How often the step launches run, over dims and derived values.
    pub steps: Expr,
    /// Buffer pairs whose roles swap after every step: a name in a pair
    /// means the buffer that holds that state at the time.
    pub ping_pong: Vec<[String; 2]>,
    /// Output buffer name -> its check.
    pub checks: BTreeMap<String, CheckDef>,
    pub reference: ReferenceDef,
    /// `provenance = "FILE"`: a JSON file of the folder (where the task
    /// came from, its baselines) that every run on it records, so a
    /// table of results needs the store alone.
    pub provenance: Option<serde_json::Value>,
}

impl FolderTask {
    /// Read and validate the task folder at `root`.
    pub fn load(root: &Path) -> Result<FolderTask, FolderError> {
        let files = read_folder(root)?;
        FolderTask::from_files(root, std::sync::Arc::new(files))
    }
}

/// The files of a task folder: relative path ('/'-separated) -> bytes.
/// A folder is read once, whole, so that what is validated, hashed,
/// shipped to a confined worker and evaluated is one and the same set.
pub type FolderFiles = BTreeMap<String, Vec<u8>>;

/// A task folder holds kernels, a brief, small inputs and a reference
/// program; more than this is a mistake (a data directory in the folder),
/// and all of it would be hashed and shipped to every worker.
pub const MAX_FOLDER_BYTES: u64 = 256 << 20;

mod code;
mod compare;
mod load;
pub mod npy;
mod program;
mod read;
mod screen;

pub use code::{
    COMMAND_TIMEOUT, ExpectedOutputs, FolderCode, ReferenceError, folder_hash, input_fingerprint,
};
pub use read::read_folder;
pub use screen::NullCandidate;

#[cfg(test)]
mod tests;
