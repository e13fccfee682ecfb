//! The strategy's state as checkpointed, and how a stored run's strategy,
//! options and prompt archive are read back.

use kevo_proposer::{EnsembleState, HistoryEntry};
use kevo_strategy::Strategy;
use serde::{Deserialize, Serialize};

use super::error::EvolveError;
use crate::{EvolveOptions, RemeasureSpend};

/// What a checkpoint needs beyond the store's own columns.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct StrategyState {
    pub(super) history: Vec<HistoryEntry>,
    /// When the last proposal produced no evaluable source (no code,
    /// rejected edits), the reason shown to the proposer next time.
    pub(super) previous_failure: Option<String>,
    pub(super) seed_wall_s: f64,
    pub(super) best_iteration: u32,
    /// The strategy's whole state ([`Strategy::state`]); runs checkpointed
    /// before strategies stored it are (1+1) runs rebuilt from the
    /// checkpoint's incumbent and previous candidate.
    #[serde(default)]
    pub(super) search: Option<serde_json::Value>,
    /// Re-measurement spent on promotions so far.
    #[serde(default)]
    pub(super) remeasure: RemeasureSpend,
    /// The validation gate's baseline and tally (`--validate`).
    #[serde(default)]
    pub(super) validation: ValidationState,
    /// The prompt variants and their sampling (`--meta-prompter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) prompts: Option<kevo_proposer::prompt::meta::PromptArchive>,
}

/// The validation gate so far: the seed's times at the validation sizes
/// (what a candidate may be at most `max_slowdown` times) and what the
/// gate spent and rejected.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ValidationState {
    /// The seed's median seconds at each validation size, by label.
    pub seed_times: Vec<(String, f64)>,
    /// The seed's whole evaluation time there (the gate's timeout is
    /// derived from it).
    pub seed_wall_s: f64,
    /// Candidates evaluated by the gate, and those it rejected.
    pub checked: u32,
    pub rejected: u32,
    pub device_s: f64,
    pub wall_s: f64,
}

impl StrategyState {
    /// The checkpoint's strategy state. Plain data of numbers and strings:
    /// serialising it cannot fail.
    pub(super) fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The strategy as a run's checkpoint stored it (`strategy` is the run's
/// stored strategy name), for `kevo show`; None for a run checkpointed
/// before strategies stored their state.
pub fn stored_strategy(
    strategy: &str,
    checkpoint: &kevo_store::StoredCheckpoint,
) -> Result<Option<Box<dyn Strategy>>, EvolveError> {
    let state: StrategyState = match &checkpoint.strategy_state {
        Some(v) => {
            serde_json::from_value(v.clone()).map_err(|e| kevo_strategy::StrategyError::State {
                name: strategy.to_string(),
                reason: e.to_string(),
            })?
        }
        None => return Ok(None),
    };
    Ok(match &state.search {
        Some(search) => Some(kevo_strategy::restore(strategy, search)?),
        None => None,
    })
}

/// The options a run was started with, as stored.
pub fn stored_options(info: &kevo_store::RunInfo) -> Result<EvolveOptions, EvolveError> {
    serde_json::from_value(info.config.clone()).map_err(|e| EvolveError::Resume {
        run: info.id.0.clone(),
        reason: format!("its stored settings are unreadable: {e}"),
    })
}

/// The ensemble state a checkpoint stored (None for one model).
pub fn stored_ensemble(checkpoint: &kevo_store::StoredCheckpoint) -> Option<EnsembleState> {
    serde_json::from_value(checkpoint.rng_state.clone()?).ok()
}

/// The prompt archive a checkpoint stored (`--meta-prompter` runs).
pub fn stored_prompt_archive(
    checkpoint: &kevo_store::StoredCheckpoint,
) -> Option<kevo_proposer::prompt::meta::PromptArchive> {
    let state: StrategyState = serde_json::from_value(checkpoint.strategy_state.clone()?).ok()?;
    state.prompts
}
