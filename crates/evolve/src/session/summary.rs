//! What a finished run reports: its summary and held-out result.

use kevo_store::Spent;
use serde::{Deserialize, Serialize};

use super::state::ValidationState;
use crate::{FinalPick, RemeasureSpend};

/// The held-out gate: the incumbent and the seed at the held-out size,
/// measured in one session; only their ratio compares across sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutSummary {
    pub size: String,
    pub seed_outcome: String,
    pub winner_outcome: String,
    pub seed_fraction: Option<f64>,
    pub winner_fraction: Option<f64>,
    /// Φ = the winner's fraction of the ceiling times its correctness.
    pub phi: f64,
    /// The winner's fraction over the seed's, same session.
    pub speedup: Option<f64>,
    /// The winner's held-out size against its ceilings, every fraction
    /// with its level ("397% of DRAM 19.0 GB/s, 52% of L2 ...").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner_roofline: Option<String>,
    /// Generalises, held-out regression, overfit or seed kept (None in
    /// summaries stored before it was), and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::HeldOutVerdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub run: String,
    pub task: String,
    pub device: String,
    pub backend: kevo_backend::BackendName,
    pub iterations: u32,
    pub stop_reason: String,
    pub seed_score: f64,
    pub best_score: f64,
    /// best / seed, in-distribution, measured in this run.
    pub speedup: f64,
    pub best_candidate: i64,
    pub best_iteration: u32,
    pub held_out: Option<HeldOutSummary>,
    pub spent: Spent,
    /// Candidates that ran faster than the hardware allows (never scored):
    /// "iteration N candidate C at size S: reason".
    #[serde(default)]
    pub suspicious: Vec<String>,
    /// Calls of the last session whose cost is unknown; `spent.cost_usd`
    /// leaves them out.
    #[serde(default)]
    pub unknown_cost_calls: u64,
    /// Calls of the last session that reported no token counts (`cmd:`,
    /// replay, servers without usage); `spent`'s tokens leave them out.
    #[serde(default)]
    pub unknown_usage_calls: u64,
    /// The promotion rule in force ("noise-aware", "strict").
    #[serde(default)]
    pub promotion: String,
    /// Evaluations spent re-measuring (promotions and the final pick),
    /// counted apart from the candidates' own.
    #[serde(default)]
    pub remeasure: RemeasureSpend,
    /// The end-of-run re-measurement of the best few and the seed; when
    /// present, `best_candidate` is its winner, and `best_score` and
    /// `speedup` are its medians, measured in one session.
    #[serde(default)]
    pub final_pick: Option<FinalPick>,
    /// The validation gate's tally, with `--validate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationState>,
    /// The winner under compute-sanitizer (`--sanitize-winner`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety: Option<crate::verdict::Safety>,
}
