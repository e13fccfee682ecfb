//! What the store keeps, as Rust types: records to write (`New*`,
//! [`IterationRecord`]) and rows read back (`Stored*`, listings, history).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use kevo_eval::Evaluation;
use kevo_tasks::SizeSet;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A run's id: `<task>-<yyyymmdd>-<hhmmss>-<6 hex>`. Readable in a directory
/// listing and unique across machines that share one server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(pub String);

impl RunId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for RunId {
    fn from(s: &str) -> Self {
        RunId(s.to_string())
    }
}

macro_rules! int_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

int_id!(
    /// A candidate's id, unique across all runs of a store.
    CandidateId
);
int_id!(
    /// An evaluation's id.
    EvaluationId
);
int_id!(
    /// An LLM call's id.
    LlmCallId
);
int_id!(
    /// A decision's id.
    DecisionId
);
int_id!(
    /// A held-out result's id.
    HeldOutId
);
int_id!(
    /// A proposal's id (ask/tell and batch runs), unique across all runs
    /// of a store.
    ProposalId
);

/// Where a run stands. A run killed without a chance to say so stays
/// `Running`; `resume` accepts that as well as `Interrupted` and `Failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    Finished,
    Failed,
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "running" => Ok(RunStatus::Running),
            "finished" => Ok(RunStatus::Finished),
            "failed" => Ok(RunStatus::Failed),
            "interrupted" => Ok(RunStatus::Interrupted),
            other => Err(format!("unknown run status `{other}`")),
        }
    }
}

/// Which sizes an evaluation ran on. Held-out evaluations are kept apart so
/// that no query used for search can see them by accident.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvaluationKind {
    InDistribution,
    HeldOut,
}

impl EvaluationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EvaluationKind::InDistribution => "in_distribution",
            EvaluationKind::HeldOut => "held_out",
        }
    }
}

impl FromStr for EvaluationKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "in_distribution" => Ok(EvaluationKind::InDistribution),
            "held_out" => Ok(EvaluationKind::HeldOut),
            other => Err(format!("unknown evaluation kind `{other}`")),
        }
    }
}

/// Which candidate of a run a held-out result is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldOutRole {
    /// The task's seed kernel: the baseline the winner is compared with.
    Seed,
    /// The run's final best candidate.
    Winner,
}

impl HeldOutRole {
    pub fn as_str(self) -> &'static str {
        match self {
            HeldOutRole::Seed => "seed",
            HeldOutRole::Winner => "winner",
        }
    }
}

impl FromStr for HeldOutRole {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "seed" => Ok(HeldOutRole::Seed),
            "winner" => Ok(HeldOutRole::Winner),
            other => Err(format!("unknown held-out role `{other}`")),
        }
    }
}

/// What is known when a run starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    pub task: String,
    pub backend: String,
    pub device: String,
    pub size_set: SizeSet,
    /// "one_plus_one", later "map_elites", "islands".
    pub strategy: String,
    /// Model specs, iteration and cost budgets, seeds: enough to understand
    /// and repeat the run.
    pub config: Value,
    /// The generator state the run starts from.
    pub rng_state: Option<Value>,
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub id: RunId,
    pub created_at: DateTime<Utc>,
    pub task: String,
    pub backend: String,
    pub device: String,
    pub size_set: SizeSet,
    pub strategy: String,
    pub config: Value,
    pub status: RunStatus,
    /// Why the run failed or was interrupted.
    pub status_reason: Option<String>,
    pub rng_state: Option<Value>,
    pub finished_at: Option<DateTime<Utc>>,
    pub summary: Option<Value>,
}

/// How often a running run writes its heartbeat.
pub const HEARTBEAT_INTERVAL_S: i64 = 2;
/// A running run without a heartbeat for this long has lost its process.
pub const HEARTBEAT_STALE_S: i64 = 10;

/// One line of `kevo list`.
/// Which measurement a score or speedup comes from. Every output names
/// it, as one kernel has up to three scores: a demo's winner measured
/// 3.38 in its iteration, 2.92 after the promotion gate's rounds and 3.10
/// in the final pick, and its speedup over the seed 104.85x to 123.43x.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Measure {
    /// The candidate's own single evaluation in its iteration: what the
    /// history, the lineage and the proposer see.
    InRun,
    /// The median of interleaved rounds: the promotion gate's (the search
    /// keeps it from then on) or the final pick's (the winner's score).
    #[serde(rename = "re-measured")]
    Remeasured,
    /// The winner over the seed on fresh interleaved rounds, apart from
    /// the rounds that chose it: the run's speedup.
    Confirmed,
}

impl Measure {
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::InRun => "in-run",
            Measure::Remeasured => "re-measured",
            Measure::Confirmed => "confirmed",
        }
    }

    /// How a finished run's summary measured its `best_score`: the final
    /// pick's median of the winner where it has one; without a pick, the
    /// noise-aware gate's median (a challenger is promoted only on one)
    /// when it re-measured anything, else the in-run score.
    pub fn of_summary_score(summary: &Value) -> Measure {
        let pick = &summary["final_pick"];
        let winner = pick["winner"].as_i64();
        let remeasured = match pick["candidates"].as_array() {
            Some(c) => c
                .iter()
                .any(|e| e["candidate"].as_i64() == winner && e["remeasured"].is_f64()),
            None => {
                summary["promotion"] == "noise-aware"
                    && summary["remeasure"]["remeasurements"].as_u64() > Some(0)
            }
        };
        if remeasured {
            Measure::Remeasured
        } else {
            Measure::InRun
        }
    }
}

fn in_run() -> Measure {
    Measure::InRun
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunListing {
    pub id: RunId,
    pub created_at: DateTime<Utc>,
    pub task: String,
    pub backend: String,
    pub device: String,
    pub size_set: SizeSet,
    pub strategy: String,
    pub status: RunStatus,
    pub finished_at: Option<DateTime<Utc>>,
    /// The last completed iteration (0 once the seed is in); None before.
    pub last_iteration: Option<u32>,
    /// Candidates stored, the seed included.
    pub candidates: u64,
    /// The winner's score: a finished run's winner as its summary reports
    /// it, else the best in-run score so far; None while nothing is correct.
    pub best_score: Option<f64>,
    /// Which measurement `best_score` is.
    #[serde(default = "in_run")]
    pub best_score_measure: Measure,
    /// A finished run's confirmed speedup over the seed.
    #[serde(default)]
    pub speedup: Option<f64>,
    /// Spend recorded in the last checkpoint.
    pub cost_usd: Option<f64>,
    /// The last sign of life of the process running it (`running` only).
    #[serde(default)]
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// The process that wrote it (see [`crate::lease`]).
    #[serde(default)]
    pub heartbeat_holder: Option<String>,
    /// How the winner did at the held-out size, from the finished run's
    /// summary ("generalises", "held-out regression", "overfit", "seed
    /// kept"); None before the run finished.
    #[serde(default)]
    pub held_out_verdict: Option<String>,
    /// The winner under compute-sanitizer ("safe", "unsafe", "not
    /// checked"), when the run asked (`--sanitize-winner`).
    #[serde(default)]
    pub winner_safety: Option<String>,
}

/// A reference to a candidate from inside an [`IterationRecord`]: either one
/// already stored, or the candidate of a proposal of the same record (whose
/// id does not exist until the record is written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CandidateRef {
    Stored(CandidateId),
    /// Index into [`IterationRecord::proposals`].
    Proposal(usize),
}

impl From<CandidateId> for CandidateRef {
    fn from(id: CandidateId) -> Self {
        CandidateRef::Stored(id)
    }
}

/// A kernel source to store. Its SHA-256 is computed by the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewCandidate {
    pub source: String,
    /// In the order the strategy chose them. Proposal refs must point to an
    /// earlier proposal of the same record.
    pub parents: Vec<CandidateRef>,
    pub island: Option<i64>,
    /// Descriptor key of a MAP-Elites cell.
    pub cell: Option<String>,
    pub descriptors: Option<Value>,
    /// Who wrote it: an LLM provider, "seed", "tuner", ...
    pub provider: Option<String>,
    pub model: Option<String>,
}

/// One request to a language model, failed or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewLlmCall {
    /// "propose" for proposals; other purposes (analysis) later.
    pub purpose: String,
    pub provider: String,
    pub model: String,
    pub prompt_system: String,
    pub prompt_user: String,
    pub response: Option<String>,
    pub reasoning: Option<String>,
    /// None when the provider did not report it: unknown is not zero.
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    pub latency_s: f64,
    pub error: Option<String>,
    /// A tool conversation's turns and calls (`--agent-tools`), as JSON;
    /// None for a one-shot call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<serde_json::Value>,
}

/// An in-distribution evaluation of a proposal's candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEvaluation {
    pub evaluation: Evaluation,
    /// Set when this is a copy of an earlier evaluation of the same source
    /// (found with `find_evaluation`) rather than a new measurement.
    pub reused_from: Option<EvaluationId>,
}

impl From<Evaluation> for NewEvaluation {
    fn from(evaluation: Evaluation) -> Self {
        NewEvaluation {
            evaluation,
            reused_from: None,
        }
    }
}

/// What the strategy decided about one proposal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewDecision {
    pub promoted: bool,
    /// The incumbent after the decision (of `island`/`cell` when given).
    pub incumbent: Option<CandidateRef>,
    pub island: Option<i64>,
    pub cell: Option<String>,
    pub reason: String,
}

/// One proposal of an iteration: the calls that produced it, the candidate
/// (None when nothing usable came back), its evaluation and the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// Linked to the candidate when there is one.
    pub llm_calls: Vec<NewLlmCall>,
    pub candidate: Option<NewCandidate>,
    pub evaluation: Option<NewEvaluation>,
    pub decision: NewDecision,
}

/// One proposal of an iteration before the strategy has decided on it
/// (see [`crate::Store::record_iteration_with`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposed {
    /// Linked to the candidate when there is one.
    pub llm_calls: Vec<NewLlmCall>,
    pub candidate: Option<NewCandidate>,
    pub evaluation: Option<NewEvaluation>,
}

/// What a strategy decided about an iteration once its candidates had
/// ids: one decision per proposal, in order, and where the run continues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decided {
    pub decisions: Vec<NewDecision>,
    pub checkpoint: Checkpoint,
    /// Re-measurements made to decide this iteration's promotions, stored
    /// with it.
    #[serde(default)]
    pub remeasurements: Vec<NewRemeasurement>,
    /// Validation-gate evaluations made to decide this iteration, stored
    /// with it.
    #[serde(default)]
    pub validations: Vec<NewValidation>,
    /// The pending proposal this iteration answers (ask/tell, batch): it
    /// is marked answered in the iteration's transaction, so an answer is
    /// stored once. Recording fails if it is not pending.
    #[serde(default)]
    pub answers: Option<ProposalId>,
}

/// A prompt handed out to be answered later: by `kevo tell` or a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewProposal {
    pub system: String,
    pub user: String,
    /// The strategy's selection the prompt was built from.
    pub selection: Value,
}

/// Where a proposal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProposalStatus {
    /// Handed out; no answer recorded.
    Pending,
    /// Its answer is iteration `iteration` of the run.
    Answered,
    /// Given up (its batch failed or expired, or the run finished first).
    Withdrawn,
}

impl ProposalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ProposalStatus::Pending => "pending",
            ProposalStatus::Answered => "answered",
            ProposalStatus::Withdrawn => "withdrawn",
        }
    }
}

impl fmt::Display for ProposalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProposalStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pending" => Ok(ProposalStatus::Pending),
            "answered" => Ok(ProposalStatus::Answered),
            "withdrawn" => Ok(ProposalStatus::Withdrawn),
            other => Err(format!("unknown proposal status `{other}`")),
        }
    }
}

/// A stored proposal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredProposal {
    pub id: ProposalId,
    pub run_id: RunId,
    /// The run's last recorded iteration when it was asked.
    pub asked_after: u32,
    pub proposal: NewProposal,
    pub status: ProposalStatus,
    /// The provider's batch job it was submitted in.
    pub batch: Option<String>,
    /// The iteration its answer became.
    pub iteration: Option<u32>,
    /// Why it was withdrawn.
    pub reason: Option<String>,
    pub asked_at: DateTime<Utc>,
    pub closed_at: Option<DateTime<Utc>>,
    /// Its answer, told with `kevo tell --defer` and not yet evaluated.
    #[serde(default)]
    pub deferred: Option<DeferredAnswer>,
}

/// An answer kept with its pending proposal until a host with the run's
/// device evaluates it (`kevo tell --defer`, then `kevo tell --deferred`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeferredAnswer {
    pub text: String,
    /// Who answered, if the teller said.
    pub model: Option<String>,
    pub told_at: DateTime<Utc>,
}

/// Why candidates were re-measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemeasurePurpose {
    /// A challenger against the candidate it would replace.
    Promotion,
    /// The best few of a run at its end, to pick the winner.
    Final,
    /// The picked winner against the seed on fresh rounds: the speedup a
    /// run reports, measured apart from the rounds that chose it.
    Confirm,
}

impl RemeasurePurpose {
    pub fn as_str(self) -> &'static str {
        match self {
            RemeasurePurpose::Promotion => "promotion",
            RemeasurePurpose::Final => "final",
            RemeasurePurpose::Confirm => "confirm",
        }
    }
}

impl FromStr for RemeasurePurpose {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "promotion" => Ok(RemeasurePurpose::Promotion),
            "final" => Ok(RemeasurePurpose::Final),
            "confirm" => Ok(RemeasurePurpose::Confirm),
            other => Err(format!("unknown re-measurement purpose `{other}`")),
        }
    }
}

/// Candidates timed again together, interleaved, in one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRemeasurement {
    pub purpose: RemeasurePurpose,
    /// A promotion's challenger first, then the candidate it would
    /// replace; a final re-measurement's candidates in in-run rank order.
    pub candidates: Vec<CandidateId>,
    /// The outcome in words ("score ratio 1.120x (95% lower bound 1.081x): significant").
    pub verdict: String,
    /// Every round's scores and per-size medians, as the session wrote
    /// them.
    pub rounds: Value,
    /// Spend, apart from the candidates' own evaluations.
    pub evaluations: u32,
    pub device_s: f64,
    pub wall_s: f64,
}

/// One candidate evaluated at the task's validation sizes before the
/// search kept it (`--validate`), or the seed's baseline there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewValidation {
    /// In an iteration's record a proposal of it may be named.
    pub candidate: CandidateRef,
    /// Kept; false: "rejected by validation", with `reason`.
    pub passed: bool,
    /// Why it was rejected (wrong, failed, or too slow at which size), or
    /// what it was compared with.
    pub reason: String,
    /// The evaluation at the validation sizes.
    pub evaluation: Evaluation,
    pub device_s: f64,
    pub wall_s: f64,
}

/// A stored validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredValidation {
    pub id: i64,
    pub run_id: RunId,
    pub iteration: u32,
    pub candidate_id: CandidateId,
    pub passed: bool,
    pub reason: String,
    pub evaluation: Evaluation,
    pub device_s: f64,
    pub wall_s: f64,
    pub created_at: DateTime<Utc>,
}

/// A stored re-measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRemeasurement {
    pub id: i64,
    pub run_id: RunId,
    pub iteration: u32,
    #[serde(flatten)]
    pub remeasurement: NewRemeasurement,
    pub created_at: DateTime<Utc>,
}

/// Cumulative spend of a run up to a checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    pub cost_usd: f64,
    pub wall_s: f64,
}

/// Where a run continues from after this iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub incumbent: Option<CandidateRef>,
    /// The last candidate evaluated (shown to the proposer next).
    pub previous: Option<CandidateRef>,
    pub rng_state: Option<Value>,
    /// Anything else a strategy needs to continue (archive, islands).
    pub strategy_state: Option<Value>,
    pub spent: Spent,
}

/// Everything one iteration produced, written in one transaction: after a
/// crash the store holds all of it or none of it. Iteration 0 is the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationRecord {
    pub iteration: u32,
    /// One for (1+1); several when a strategy proposes in batches.
    pub proposals: Vec<Proposal>,
    pub checkpoint: Checkpoint,
}

impl IterationRecord {
    /// The record as what was proposed and what was decided about it.
    pub fn split(&self) -> (Vec<Proposed>, Decided) {
        let proposed = self
            .proposals
            .iter()
            .map(|p| Proposed {
                llm_calls: p.llm_calls.clone(),
                candidate: p.candidate.clone(),
                evaluation: p.evaluation.clone(),
            })
            .collect();
        let decided = Decided {
            decisions: self.proposals.iter().map(|p| p.decision.clone()).collect(),
            checkpoint: self.checkpoint.clone(),
            remeasurements: Vec::new(),
            validations: Vec::new(),
            answers: None,
        };
        (proposed, decided)
    }
}

/// Ids given to what one proposal wrote, in the order of
/// [`IterationRecord::proposals`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposalIds {
    pub candidate: Option<CandidateId>,
    pub evaluation: Option<EvaluationId>,
    pub llm_calls: Vec<LlmCallId>,
    pub decision: DecisionId,
}

/// The last completed step of a run, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredCheckpoint {
    pub run_id: RunId,
    pub iteration: u32,
    pub incumbent: Option<CandidateId>,
    pub previous: Option<CandidateId>,
    pub rng_state: Option<Value>,
    pub strategy_state: Option<Value>,
    pub spent: Spent,
    pub created_at: DateTime<Utc>,
}

/// A candidate as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredCandidate {
    pub id: CandidateId,
    pub run_id: RunId,
    pub iteration: u32,
    pub parents: Vec<CandidateId>,
    pub island: Option<i64>,
    pub cell: Option<String>,
    pub descriptors: Option<Value>,
    pub source: String,
    pub source_sha256: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// An evaluation as stored. `json` is the [`Evaluation`] exactly as
/// serde_json wrote it; see [`StoredEvaluation::evaluation`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvaluation {
    pub id: EvaluationId,
    pub candidate_id: CandidateId,
    pub kind: EvaluationKind,
    pub outcome_kind: String,
    pub score: Option<f64>,
    pub device: String,
    pub backend: String,
    pub json: Value,
    pub reused_from: Option<EvaluationId>,
    pub created_at: DateTime<Utc>,
}

impl StoredEvaluation {
    /// The typed evaluation. Fails only if the stored JSON was written by
    /// an `Evaluation` type this build cannot read (an older or newer kevo);
    /// `json`, `outcome_kind` and `score` are usable either way.
    pub fn evaluation(&self) -> Result<Evaluation, serde_json::Error> {
        serde_json::from_value(self.json.clone())
    }
}

/// A run's best candidate with the evaluation that makes it the best.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestCandidate {
    pub candidate: StoredCandidate,
    pub evaluation: StoredEvaluation,
}

/// One row of a run's history: one per proposal, in iteration order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRow {
    pub iteration: u32,
    pub candidate_id: Option<CandidateId>,
    /// None when the proposal had no evaluation (skipped).
    pub outcome_kind: Option<String>,
    pub score: Option<f64>,
    pub promoted: bool,
    pub incumbent_id: Option<CandidateId>,
    pub island: Option<i64>,
    pub cell: Option<String>,
    pub reason: String,
}

/// Correct proposals over evaluated ones, the seed left out: a run's
/// correct rate as the sweep table and `kevo table` report it. None before
/// anything after the seed was evaluated.
pub fn correct_rate(history: &[HistoryRow]) -> Option<f64> {
    let evaluated: Vec<&HistoryRow> = history
        .iter()
        .filter(|h| h.iteration > 0 && h.outcome_kind.is_some())
        .collect();
    let correct = evaluated
        .iter()
        .filter(|h| h.outcome_kind.as_deref() == Some("correct"))
        .count();
    (!evaluated.is_empty()).then(|| correct as f64 / evaluated.len() as f64)
}

/// An LLM call as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredLlmCall {
    pub id: LlmCallId,
    pub run_id: RunId,
    pub candidate_id: Option<CandidateId>,
    pub iteration: u32,
    pub call: NewLlmCall,
    pub created_at: DateTime<Utc>,
}

/// A held-out measurement to record: the evaluation on the held-out size
/// and the figures derived from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewHeldOut {
    pub candidate_id: CandidateId,
    pub role: HeldOutRole,
    pub evaluation: Evaluation,
    /// Rows measured together share a session; only their ratios compare.
    pub session: Option<String>,
    /// Fraction of ceiling times correctness.
    pub phi: Option<f64>,
    pub fraction: Option<f64>,
    /// This candidate's fraction over the seed's in the same session.
    pub speedup: Option<f64>,
}

/// A run's candidate evaluated on another device or backend (`kevo
/// cross`); rows of one session were measured together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewCrossEvaluation {
    pub candidate_id: CandidateId,
    pub role: HeldOutRole,
    pub session: String,
    pub evaluation: Evaluation,
    /// The source that ran when it is a translation of the candidate's
    /// (a CUDA kernel measured through OpenCL); None when it ran as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translated_source: Option<String>,
}

/// A cross-device result as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredCrossEvaluation {
    pub id: i64,
    pub run_id: RunId,
    #[serde(flatten)]
    pub cross: NewCrossEvaluation,
    pub created_at: DateTime<Utc>,
}

/// A held-out result as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutResult {
    pub id: HeldOutId,
    pub run_id: RunId,
    pub candidate_id: CandidateId,
    pub role: HeldOutRole,
    pub evaluation_id: EvaluationId,
    pub outcome_kind: String,
    pub session: Option<String>,
    pub phi: Option<f64>,
    pub fraction: Option<f64>,
    pub speedup: Option<f64>,
    pub created_at: DateTime<Utc>,
}

impl RunListing {
    /// Whether a `running` run's process still lives: its heartbeat is
    /// recent (`now` minus at most [`HEARTBEAT_STALE_S`]) and its holder
    /// is not known to have ended (on this machine that is known at once).
    /// Runs stored before heartbeats existed have none and count as not
    /// alive.
    pub fn is_alive(&self, now: DateTime<Utc>) -> bool {
        self.status == RunStatus::Running
            && self
                .heartbeat_at
                .is_some_and(|h| (now - h).num_seconds() <= HEARTBEAT_STALE_S)
            && !self
                .heartbeat_holder
                .as_deref()
                .is_some_and(crate::lease::holder_is_gone)
    }
}
