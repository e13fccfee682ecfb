//! What `kevo runs`, `kevo show`, `kevo show RUN --config` and `kevo
//! export RUN` show of runs, read from the store as plain values (and, for
//! `--json`, as JSON): the command line only prints them.

mod json;
mod listing;
mod load;
mod stored;
#[cfg(test)]
mod tests;

pub use json::{FAILURE_LINES, size_json};
pub use listing::{ListedRun, list_runs, runs_json, shown_status};
pub use load::{RunView, Suspicion, load};
pub use stored::{StoredSettings, settings, winner};

/// Why a run could not be shown. The store's and the search loop's errors
/// pass through unchanged, so their messages read as they always did.
#[derive(Debug, thiserror::Error)]
pub enum RunViewError {
    #[error(transparent)]
    Store(#[from] kevo_store::StoreError),
    #[error(transparent)]
    Evolve(#[from] kevo_evolve::EvolveError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// `kevo export` of a run without a correct candidate.
    #[error("run {run} has no correct candidate")]
    NoCorrectCandidate { run: String },
}
