//! KernelBench problems as kevo task folders.
//!
//! KernelBench's problems are PyTorch modules (`Model`, `get_inputs`,
//! `get_init_inputs`, sizes as module-level constants). `kevo kernelbench
//! import` turns each into a task folder that kevo's own evaluator runs:
//!
//! - a probe (python/probe.py, run by an interpreter with torch) builds the
//!   module, reads every input's and weight's shape and distribution, the
//!   output's shape and statistics, sizes where the batch changes, a screen
//!   against null candidates, torch's flop count, and (on the device) the
//!   eager and torch.compile times that are the speedup's baselines;
//! - the folder ([`write_folder`]) declares the inputs and weights as
//!   buffers that kevo fills itself from the fitted distributions with a
//!   new seed for every verification (KernelBench reuses one input), the
//!   output with a check that binds every element (bit for bit for
//!   integers and selections, else within tau (|ref| + rms(ref)), tau
//!   derived per problem from honest float32 variants and kept below the
//!   narrower types' errors) in place of KernelBench's 1e-2, and the
//!   PyTorch module itself as the reference command (python/reference.py),
//!   which loads the same weights;
//! - the screen ([`Screen`]) drops problems that a null candidate passes,
//!   whose output does not depend on the input or is nearly constant, that
//!   are not deterministic, or whose eager time is under 10 µs, where
//!   launch overhead dominates.
//!
//! The problems themselves are read from the user's checkout or package;
//! none is part of kevo.

mod discover;
mod folder;
mod probe;
mod screen;
mod summary;

pub use discover::{Problem, discover, parse_selection};
pub use folder::{FolderOptions, KernelBenchMeta, Written, write_folder};
pub use probe::{
    Constant, Distribution, PROBE_PY, Probe, ProbeOptions, ProbedCheck, ProbedInput, ProbedOutput,
    ProbedScreen, ProbedSize, ProbedState, ProbedTolerance, Timing, VariantError, probe,
};
pub use screen::{Flag, Screen, SurveyEntry, read_survey, screen, survey_flags};
pub use summary::{FAST_P, ProblemResult, Summary, summarize};

/// The reference command's source, written into every imported folder.
pub const REFERENCE_PY: &str = include_str!("../python/reference.py");

/// Eager times under this are dominated by launch overhead (10 µs).
pub const MIN_BASELINE_MS: f64 = 0.010;

/// The fewest elements of each output a size may check. A kernel wrong on
/// a share p of the elements (a sparsity guess, a skipped batch row)
/// passes n checked ones with probability (1 - p)^n: at 1024 a share of
/// 0.5% slips through 0.6% of the time, at 128 (a smoke size of batch 2)
/// 53%. A smoke size below it is replaced by the full size; a full size
/// below it is flagged.
pub const MIN_CHECKED_ELEMENTS: u64 = 1024;

/// The fewest elements of any output at `size`.
pub(crate) fn fewest_output_elements(size: &ProbedSize) -> u64 {
    size.outputs
        .iter()
        .map(|shape| shape.iter().product::<u64>())
        .min()
        .unwrap_or(0)
}

#[derive(Debug, thiserror::Error)]
pub enum KernelBenchError {
    #[error("{path}: {message}")]
    Io {
        path: std::path::PathBuf,
        message: String,
    },
    #[error(
        "cannot run `{python}` ({message}); name an interpreter that has torch and numpy with --python"
    )]
    Python { python: String, message: String },
    #[error("probing {problem} failed:\n{message}")]
    Probe {
        problem: std::path::PathBuf,
        message: String,
    },
    #[error("{0}")]
    Source(String),
    #[error("{problem}: {message}")]
    Unsupported { problem: String, message: String },
}
