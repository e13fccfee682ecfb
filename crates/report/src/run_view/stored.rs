//! What `kevo show RUN --config` and `kevo export RUN` read of a run: its
//! settings as a config file, and its winning kernel.

use kevo_evolve::RunConfig;
use kevo_store::{BestCandidate, RunId, Store};

use super::RunViewError;

/// A run's settings, as `kevo show RUN --config` prints them.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredSettings {
    /// A tuning run has no evolution settings: its own, as stored.
    Tune { config: serde_json::Value },
    /// An evolution run's settings as a config file.
    Evolve {
        toml: String,
        /// Started from a kernel of its own, not the task's seed.
        own_start: bool,
    },
}

/// Reads run `run`'s settings.
pub async fn settings(store: &Store, run: &RunId) -> Result<StoredSettings, RunViewError> {
    let info = store.run(run).await?;
    if info.strategy == "tune" {
        return Ok(StoredSettings::Tune {
            config: info.config,
        });
    }
    let options = kevo_evolve::stored_options(&info)?;
    Ok(StoredSettings::Evolve {
        own_start: options.start_source.is_some(),
        toml: RunConfig::from_options(&options).to_toml(),
    })
}

/// The run's best candidate, which `kevo export` writes out.
pub async fn winner(store: &Store, run: &RunId) -> Result<BestCandidate, RunViewError> {
    store
        .best_candidate(run)
        .await?
        .ok_or_else(|| RunViewError::NoCorrectCandidate { run: run.0.clone() })
}
