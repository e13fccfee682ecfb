//! What a run reports as it goes: events for the progress display, the proposer
//! arms' statistics, the observer trait.

use kevo_proposer::EnsembleState;
use serde::{Deserialize, Serialize};

use super::summary::{HeldOutSummary, Summary};

/// Progress of a run, for live display or JSON lines.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The run is stored (before its seed is evaluated): from here on it
    /// can be resumed by this id.
    Created {
        run: String,
    },
    /// A batch of prompts (`batch:` models) was submitted, is running or
    /// ended: the provider's status, requests answered and in all.
    Batch {
        batch: String,
        status: String,
        done: u64,
        total: u64,
    },
    Started {
        run: String,
        task: String,
        device: String,
        backend: kevo_backend::BackendName,
        resumed_from: Option<u32>,
        iterations: u32,
        /// The worker's confinement, one line (see kevo_sandbox::Status).
        sandbox: String,
    },
    Seed {
        score: f64,
        wall_s: f64,
    },
    Iteration {
        iteration: u32,
        outcomes: Vec<String>,
        scores: Vec<Option<f64>>,
        promoted: bool,
        /// The best kept score, and the seed's multiple of it, as the
        /// search keeps them: `best_measure` says whether a re-measurement
        /// replaced the best's in-run score.
        best_score: f64,
        best_measure: kevo_store::Measure,
        speedup: f64,
        input_tokens: u64,
        output_tokens: u64,
        cost_usd: f64,
        /// Calls of this session whose cost is unknown (no price, or no
        /// usable token counts): `cost_usd` leaves them out.
        unknown_cost_calls: u64,
        /// Calls of this session without usable token counts: the token
        /// figures leave them out.
        unknown_usage_calls: u64,
        wall_s: f64,
        /// The verdicts of this iteration's re-measurements ("... (within
        /// noise, not promoted)"); empty under strict promotion.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        verdicts: Vec<String>,
        /// Prompts whose model calls are still out (`--concurrency`),
        /// answered ones waiting for the device excluded.
        #[serde(default)]
        in_flight: u32,
        /// Answers that arrived and wait for the device.
        #[serde(default)]
        queued: u32,
        /// Wall seconds of this session spent evaluating: over the
        /// session's wall time, the device's busy share.
        #[serde(default)]
        evaluating_s: f64,
        /// Wall seconds of this session so far.
        #[serde(default)]
        session_s: f64,
        /// The models that answered this iteration (ensemble members).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        models: Vec<String>,
        /// The prompt variant its prompt used (`--meta-prompter`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_variant: Option<u32>,
        /// The model bandit's arms after it (`--model-choice ucb`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        arms: Vec<ArmStat>,
    },
    /// The meta-prompter edited the prompt before proposal `iteration`.
    MetaPrompt {
        iteration: u32,
        parent: u32,
        /// The new variant, None when no edit applied.
        variant: Option<u32>,
        applied: Vec<String>,
        rejected: Vec<String>,
        diagnosis: String,
        /// Why there was no answer (the call failed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<String>,
    },
    HeldOut(HeldOutSummary),
    Finished(Box<Summary>),
}

/// One model of a bandit-choosing ensemble, as progress and `kevo show`
/// report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmStat {
    pub model: String,
    /// Calls chosen for it (in flight included).
    pub calls: u64,
    pub rewarded: u64,
    /// Mean reward (relative gain over the parent) per rewarded call.
    pub mean_reward: f64,
    pub cost_usd: f64,
}

/// The arms of an ensemble state, empty without a bandit.
pub fn arm_stats(state: &EnsembleState) -> Vec<ArmStat> {
    let Some(b) = &state.bandit else {
        return Vec::new();
    };
    b.arms
        .iter()
        .enumerate()
        .map(|(i, a)| ArmStat {
            model: state
                .labels
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("model {i}")),
            calls: a.pulls,
            rewarded: a.rewarded,
            mean_reward: a.mean(false),
            cost_usd: a.cost_usd,
        })
        .collect()
}

pub trait Observer {
    fn on(&mut self, event: &Event);
}

impl<F: FnMut(&Event)> Observer for F {
    fn on(&mut self, event: &Event) {
        self(event)
    }
}
