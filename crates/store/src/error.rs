//! Errors of the run store. Every message names the database (with any
//! password redacted) or the record involved, because the reader is usually
//! someone deciding whether a run can be resumed.

use crate::model::{CandidateId, ProposalId, ProposalStatus, RunId, RunStatus};

/// Anything that went wrong while opening or using a [`crate::Store`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The location string could not be understood.
    #[error("invalid run store location `{target}`: {reason}")]
    InvalidTarget { target: String, reason: String },

    /// The database could not be opened or reached: a corrupt or unreadable
    /// SQLite file, a server that is down, bad credentials. Nothing was
    /// written.
    #[error("cannot open the run store at {location}: {message}")]
    Open { location: String, message: String },

    /// The schema could not be brought up to date.
    #[error("cannot migrate the run store at {location}: {message}")]
    Migrate { location: String, message: String },

    /// The database was written by a newer kevo; this one would misread it.
    #[error(
        "the run store at {location} has schema version {found}, newer than the {known} this \
         kevo knows; upgrade kevo to use it"
    )]
    SchemaTooNew {
        location: String,
        found: i64,
        known: i64,
    },

    /// A statement failed. `what` says which operation.
    #[error("run store ({location}): {what}: {cause}")]
    Database {
        location: String,
        what: &'static str,
        cause: sqlx::Error,
    },

    #[error("no run `{0}` in the run store")]
    RunNotFound(RunId),

    /// A run id prefix that more than one run starts with.
    #[error("`{prefix}` names {} runs ({}); give more of the id", matches.len(), matches.join(", "))]
    AmbiguousRun {
        prefix: String,
        matches: Vec<String>,
    },

    #[error("no candidate {0} in the run store")]
    CandidateNotFound(CandidateId),

    /// The iteration was already recorded: recording it again would
    /// evaluate or count a candidate twice.
    #[error("run `{run}` already has iteration {iteration} recorded")]
    IterationExists { run: RunId, iteration: u32 },

    /// Iterations must be recorded in increasing order.
    #[error("run `{run}`: iteration {iteration} is not after the last recorded iteration {last}")]
    IterationOutOfOrder {
        run: RunId,
        iteration: u32,
        last: u32,
    },

    /// No such proposal in the run.
    #[error("run `{run}` has no proposal {id}")]
    ProposalNotFound { run: RunId, id: ProposalId },

    /// The proposal was already answered or withdrawn.
    #[error("proposal {id} of run `{run}` is {status}{}", .iteration.map(|i| format!(" (iteration {i})")).unwrap_or_default())]
    ProposalClosed {
        run: RunId,
        id: ProposalId,
        status: ProposalStatus,
        iteration: Option<u32>,
    },

    /// The proposal's answer was already told with `--defer` and waits to
    /// be evaluated.
    #[error(
        "proposal {id} of run `{run}` already has an answer told at {told_at} that waits to be \
         evaluated: `kevo tell {run} --deferred` on a host with the run's device records it"
    )]
    AnswerDeferred {
        run: RunId,
        id: ProposalId,
        told_at: chrono::DateTime<chrono::Utc>,
    },

    /// The run is not in a state that allows the operation.
    #[error("run `{run}` is {status}: {why}")]
    RunStatus {
        run: RunId,
        status: RunStatus,
        why: &'static str,
    },

    /// The run is being run by a live process (its heartbeat is recent):
    /// resuming it too would record its iterations twice.
    #[error(
        "run `{run}` is running in another process (its heartbeat is {age_s} s old); stop that \
         process first, or, if it died, resume once its heartbeat is more than {stale_s} s old"
    )]
    RunAlive {
        run: RunId,
        age_s: i64,
        stale_s: i64,
    },

    /// The record handed to the store contradicts itself (a reference to a
    /// proposal without a candidate, a promotion of nothing, ...).
    #[error("invalid record: {0}")]
    InvalidRecord(String),

    /// A stored value could not be read back (an unknown status, a value
    /// out of range).
    #[error("run store ({location}): unreadable stored value: {message}")]
    Corrupt { location: String, message: String },

    #[error("cannot encode {what} as JSON: {cause}")]
    Json {
        what: &'static str,
        cause: serde_json::Error,
    },

    #[error("{path}: {cause}")]
    Io {
        path: std::path::PathBuf,
        cause: std::io::Error,
    },
}

impl StoreError {
    /// The underlying database error, if this is one; lets callers react to
    /// specific conditions (a constraint, a lost connection).
    pub fn as_database(&self) -> Option<&sqlx::Error> {
        match self {
            StoreError::Database { cause, .. } => Some(cause),
            _ => None,
        }
    }
}
