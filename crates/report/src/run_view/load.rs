//! Reads everything `kevo show` prints about one run from the store, once,
//! into a [`RunView`].

use std::collections::HashMap;

use kevo_eval::{Evaluation, Outcome};
use kevo_evolve::ArmStat;
use kevo_proposer::prompt::meta::PromptArchive;
use kevo_store::{
    BestCandidate, CandidateId, EvaluationKind, HeldOutResult, HistoryRow, RunId, RunInfo, Store,
    StoredCheckpoint, StoredCrossEvaluation, StoredLlmCall, StoredProposal, StoredRemeasurement,
    StoredValidation,
};
use kevo_strategy::Archive;

use super::RunViewError;

/// What `kevo show` shows of a run.
#[derive(Debug, Clone)]
pub struct RunView {
    pub id: RunId,
    pub info: RunInfo,
    pub history: Vec<HistoryRow>,
    pub best: Option<BestCandidate>,
    /// The held-out results, each with its stored evaluation when readable.
    pub held_out: Vec<(HeldOutResult, Option<Evaluation>)>,
    pub remeasurements: Vec<StoredRemeasurement>,
    pub proposals: Vec<StoredProposal>,
    /// Model calls abandoned by an interrupted run.
    pub abandoned: Vec<StoredLlmCall>,
    /// The strategy's population as the last checkpoint holds it.
    pub archive: Option<Archive>,
    /// The strategy's state as the last checkpoint holds it.
    pub strategy_state: Option<serde_json::Value>,
    /// With a bandit, the ensemble's arms.
    pub arms: Vec<ArmStat>,
    pub prompt_archive: Option<PromptArchive>,
    /// The prompt variant that produced each candidate.
    pub variant_of: HashMap<i64, u32>,
    /// Which ensemble member answered each iteration's proposals.
    pub answered_by: HashMap<u32, Vec<String>>,
    /// Each iteration's tool conversations (`--agent-tools`).
    pub conversations: HashMap<u32, Vec<kevo_proposer::tools::Transcript>>,
    /// Each candidate's first in-distribution evaluation.
    pub measured: HashMap<i64, Evaluation>,
    /// Candidates that ran faster than the hardware allows.
    pub suspicious: Vec<Suspicion>,
    /// Evaluations on other devices (`kevo cross`).
    pub cross: Vec<StoredCrossEvaluation>,
    /// Evaluations at the validation sizes.
    pub validations: Vec<StoredValidation>,
}

/// A suspicious evaluation: never scored, and worth a look (a reward hack
/// or a wrong ceiling).
#[derive(Debug, Clone, PartialEq)]
pub struct Suspicion {
    pub iteration: u32,
    pub candidate: CandidateId,
    pub size: String,
    pub reason: String,
}

/// The strategy, ensemble and prompt variants as a checkpoint holds them.
struct FromCheckpoint {
    archive: Option<Archive>,
    strategy_state: Option<serde_json::Value>,
    arms: Vec<ArmStat>,
    prompt_archive: Option<PromptArchive>,
    has_ensemble: bool,
}

/// Reads run `run` as `kevo show` shows it.
pub async fn load(store: &Store, run: RunId) -> Result<RunView, RunViewError> {
    let id = run;
    let info = store.run(&id).await?;
    let history = store.history(&id).await?;
    let best = store.best_candidate(&id).await?;
    let held_out = held_out(store, &id).await?;
    let remeasurements = store.remeasurements(&id).await?;
    let proposals = store.proposals(&id).await?;
    let abandoned: Vec<_> = store
        .llm_calls(&id)
        .await?
        .into_iter()
        .filter(kevo_evolve::is_abandoned)
        .collect();
    let checkpoint = store.last_checkpoint(&id).await?;
    let stored = from_checkpoint(&info.strategy, checkpoint.as_ref())?;
    let variant_of: HashMap<i64, u32> = stored
        .prompt_archive
        .iter()
        .flat_map(|a| &a.variants)
        .flat_map(|v| v.candidates.iter().map(move |c| (*c, v.id)))
        .collect();
    let answered_by = if stored.has_ensemble {
        answered_by(store, &id).await?
    } else {
        HashMap::new()
    };
    let conversations = conversations(store, &id).await?;
    let measured = first_measurements(store, &history).await?;
    let suspicious = suspicious(store, &history).await?;
    let cross = store.cross_evaluations(&id).await?;
    let validations = store.validations(&id).await?;
    Ok(RunView {
        id,
        info,
        history,
        best,
        held_out,
        remeasurements,
        proposals,
        abandoned,
        archive: stored.archive,
        strategy_state: stored.strategy_state,
        arms: stored.arms,
        prompt_archive: stored.prompt_archive,
        variant_of,
        answered_by,
        conversations,
        measured,
        suspicious,
        cross,
        validations,
    })
}

/// The strategy (its population and state), the ensemble's choices (with
/// a bandit, its arms) and the prompt variants, as the last checkpoint
/// holds them.
fn from_checkpoint(
    strategy: &str,
    checkpoint: Option<&StoredCheckpoint>,
) -> Result<FromCheckpoint, RunViewError> {
    let strategy = match checkpoint {
        Some(cp) => kevo_evolve::stored_strategy(strategy, cp)?,
        None => None,
    };
    let ensemble = checkpoint.and_then(kevo_evolve::stored_ensemble);
    Ok(FromCheckpoint {
        archive: strategy.as_ref().map(|s| s.archive()),
        strategy_state: strategy.as_ref().map(|s| s.state()),
        arms: ensemble
            .as_ref()
            .map(kevo_evolve::arm_stats)
            .unwrap_or_default(),
        prompt_archive: checkpoint.and_then(kevo_evolve::stored_prompt_archive),
        has_ensemble: ensemble.is_some(),
    })
}

/// The held-out results, each with its evaluation (older rows may lack a
/// readable one).
async fn held_out(
    store: &Store,
    id: &RunId,
) -> Result<Vec<(HeldOutResult, Option<Evaluation>)>, RunViewError> {
    let mut held_out = Vec::new();
    for h in store.held_out_results(id).await? {
        let evaluation = store
            .evaluations_of(h.candidate_id)
            .await?
            .into_iter()
            .find(|e| e.id == h.evaluation_id)
            .and_then(|e| e.evaluation().ok());
        held_out.push((h, evaluation));
    }
    Ok(held_out)
}

/// Which ensemble member answered each iteration's proposals.
async fn answered_by(store: &Store, id: &RunId) -> Result<HashMap<u32, Vec<String>>, RunViewError> {
    let mut answered_by: HashMap<u32, Vec<String>> = HashMap::new();
    for c in store.llm_calls(id).await? {
        if c.call.purpose == "propose" && c.call.response.is_some() {
            answered_by
                .entry(c.iteration)
                .or_default()
                .push(c.call.provider.clone());
        }
    }
    Ok(answered_by)
}

/// The tool conversations of each iteration's proposals; a transcript
/// that does not read as one is left out.
async fn conversations(
    store: &Store,
    id: &RunId,
) -> Result<HashMap<u32, Vec<kevo_proposer::tools::Transcript>>, RunViewError> {
    let mut out: HashMap<u32, Vec<kevo_proposer::tools::Transcript>> = HashMap::new();
    for c in store.llm_calls(id).await? {
        if let Some(t) = c
            .call
            .transcript
            .and_then(|t| serde_json::from_value(t).ok())
        {
            out.entry(c.iteration).or_default().push(t);
        }
    }
    Ok(out)
}

/// Every iteration's per-size numbers: its candidate's first
/// in-distribution evaluation.
async fn first_measurements(
    store: &Store,
    history: &[HistoryRow],
) -> Result<HashMap<i64, Evaluation>, RunViewError> {
    let mut measured: HashMap<i64, Evaluation> = HashMap::new();
    for c in history.iter().filter_map(|h| h.candidate_id) {
        if measured.contains_key(&c.0) {
            continue;
        }
        let first = store
            .evaluations_of(c)
            .await?
            .into_iter()
            .find(|e| e.kind == EvaluationKind::InDistribution)
            .and_then(|e| e.evaluation().ok());
        if let Some(e) = first {
            measured.insert(c.0, e);
        }
    }
    Ok(measured)
}

/// The suspicious evaluations of the iterations whose outcome was
/// suspicious, in history order.
async fn suspicious(store: &Store, history: &[HistoryRow]) -> Result<Vec<Suspicion>, RunViewError> {
    let mut found = Vec::new();
    for h in history
        .iter()
        .filter(|h| h.outcome_kind.as_deref() == Some("suspicious"))
    {
        let Some(c) = h.candidate_id else { continue };
        for e in store.evaluations_of(c).await? {
            if let Ok(Evaluation {
                outcome: Outcome::Suspicious { size, reason, .. },
                ..
            }) = e.evaluation()
            {
                found.push(Suspicion {
                    iteration: h.iteration,
                    candidate: c,
                    size,
                    reason,
                });
            }
        }
    }
    Ok(found)
}
