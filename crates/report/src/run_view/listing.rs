//! `kevo runs`: the runs the store holds, each with the status it is shown
//! with (a run whose process died is `dead`).

use chrono::{DateTime, Utc};
use kevo_store::{RunListing, RunStatus, Store};
use serde_json::{Value, json};

use super::RunViewError;

/// A run as `kevo runs` lists it.
#[derive(Debug, Clone)]
pub struct ListedRun {
    pub listing: RunListing,
    /// The status shown: the stored one, or `dead`.
    pub status: &'static str,
}

/// A run whose process died (kill -9, a crash) is still `running` in the
/// store; without a recent heartbeat it is shown as `dead` (resumable like
/// an interrupted one).
pub fn shown_status(run: &RunListing, now: DateTime<Utc>) -> &'static str {
    if run.status == RunStatus::Running && !run.is_alive(now) {
        "dead"
    } else {
        run.status.as_str()
    }
}

/// Every run in the store, with the status it is shown with now.
pub async fn list_runs(store: &Store) -> Result<Vec<ListedRun>, RunViewError> {
    let runs = store.list_runs().await?;
    let now = Utc::now();
    Ok(runs
        .into_iter()
        .map(|listing| ListedRun {
            status: shown_status(&listing, now),
            listing,
        })
        .collect())
}

/// `kevo runs --json`: the stored listing of each run with its shown
/// status.
pub fn runs_json(runs: &[ListedRun]) -> Result<Value, RunViewError> {
    let values = runs
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(&r.listing)?;
            v["status"] = json!(r.status);
            Ok(v)
        })
        .collect::<Result<Vec<_>, serde_json::Error>>()?;
    Ok(Value::Array(values))
}
