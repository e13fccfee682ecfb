//! The errors a tuning session can end in, each worded as `kevo tune`
//! reports it.

use std::path::PathBuf;

use kevo_backend::Dialect;
use kevo_store::{RunId, StoreError};
use kevo_tune::DeclarationError;
use kevo_worker::WorkerError;

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// A time budget that is not a positive number of seconds.
    #[error("--budget-s: must be a positive number of seconds, not {0}")]
    BudgetSeconds(f64),
    /// A budget of no configuration.
    #[error("--budget: must be at least 1")]
    NoBudget,
    /// A tuning declaration kevo cannot use; `name` says whose.
    #[error("{name}: {error}")]
    Declaration {
        name: String,
        error: DeclarationError,
    },
    /// A kernel with nothing to tune.
    #[error(
        "{name} declares no parameter: add `// kevo: tune NAME V1 V2 ...` lines \
         (or evaluate it with `kevo eval`)"
    )]
    NoParameter { name: String },
    #[error("task {task} has no {dialect} tunable kernel")]
    NoTunable { task: String, dialect: Dialect },
    #[error("task {task} has no {dialect} seed")]
    NoSeed { task: String, dialect: Dialect },
    #[error(transparent)]
    Worker(#[from] WorkerError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The async runtime the store runs on could not be started.
    #[error(transparent)]
    Runtime(std::io::Error),
    #[error("the seed was stored without a candidate")]
    SeedNotStored,
    /// The store failed during the search; the run is marked failed.
    #[error("tuning run {run} stopped")]
    Stopped {
        run: RunId,
        #[source]
        source: StoreError,
    },
    #[error("cannot create {}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}", path.display())]
    WriteKernel {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An error and its sources, ": "-separated (as `{:#}` of an
/// `anyhow::Error` prints them): what a failed run's stored reason says.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
