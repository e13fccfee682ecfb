//! What a tuning session stores: the run's record and settings, one
//! iteration per configuration, and the run's summary at the end.

use kevo_store::{
    CandidateRef, Checkpoint, IterationRecord, NewCandidate, NewDecision, NewEvaluation, NewRun,
    Proposal, Spent,
};
use kevo_worker::{Worker, WorkerConfig};
use serde_json::{Value, json};

use super::outcome::Tuned;
use super::session::Setup;
use crate::remeasure::Confirmation;

/// What, besides the source, decides a measurement: a stored one is
/// reused only if it was taken with the same compile options, timing and
/// declared ceilings. Not the inputs' secret: a measurement of the same
/// source under the same settings is reused whatever inputs it was taken
/// on.
pub(super) fn measured_with(config: &WorkerConfig) -> Value {
    json!({
        "eval": kevo_eval::EvalConfig { inputs_secret: None, ..config.eval.clone() },
        "timing": config.timing,
        "declared_ceilings": config.declared_ceilings,
    })
}

/// The new run's record: the tuning settings, and as an evolve run records
/// them, how the worker was confined and what the result depends on
/// besides the settings.
pub(super) fn new_run(t: &Setup, worker: &Worker) -> NewRun {
    let (task, device) = (t.task, worker.device());
    NewRun {
        task: task.name().to_string(),
        backend: device.backend.to_string(),
        device: device.name.clone(),
        size_set: t.size_set,
        strategy: "tune".into(),
        config: json!({
            "tune": {
                "strategy": t.strategy,
                "seed": t.seed,
                "budget": t.budget,
                "kernel": t.kernel.name,
                "template": t.kernel.template,
                "cache": t.cache,
            },
            "task": task.name(),
            "sizes": t.size_set,
            "measured_with": t.measured_with.clone(),
            "sandbox_in_force": worker.sandbox(),
            "provenance": {
                "kevo": crate::VERSION,
                "task": {"name": task.name(), "content_hash": task.content_hash()},
                "device": worker.device(),
                "ceilings": worker.ceilings(),
                "seeds": {
                    "inputs_secret": worker.inputs_secret(),
                    "task_seed": task.default_seed(),
                    "strategy": t.seed,
                },
            },
        }),
        rng_state: None,
    }
}

/// One iteration holding one candidate (no parents: configurations are
/// instances of the template, not descendants of each other).
pub(super) fn record(
    source: &str,
    provider: &str,
    model: Option<&str>,
    evaluation: NewEvaluation,
    iteration: u32,
) -> IterationRecord {
    IterationRecord {
        iteration,
        proposals: vec![Proposal {
            llm_calls: Vec::new(),
            candidate: Some(NewCandidate {
                source: source.to_string(),
                parents: Vec::new(),
                island: None,
                cell: None,
                descriptors: None,
                provider: Some(provider.to_string()),
                model: model.map(String::from),
            }),
            evaluation: Some(evaluation),
            decision: decision(false, None, String::new()),
        }],
        checkpoint: Checkpoint {
            incumbent: None,
            previous: Some(CandidateRef::Proposal(0)),
            rng_state: None,
            strategy_state: None,
            spent: Spent::default(),
        },
    }
}

/// A decision outside islands and cells.
pub(super) fn decision(
    promoted: bool,
    incumbent: Option<CandidateRef>,
    reason: String,
) -> NewDecision {
    NewDecision {
        promoted,
        incumbent,
        island: None,
        cell: None,
        reason,
    }
}

/// The run's stored summary.
pub(super) fn summary(o: &Tuned) -> Value {
    let best = o.best();
    let confirmation = o.confirmation.as_ref();
    json!({
        "stop": o.stop,
        "evaluations": o.rows.len(),
        "measured": o.measured(),
        "best": best.map(|b| o.space.describe(&b.configuration)),
        "best_score": best.and_then(|b| b.evaluation.outcome.score()),
        "seed_score": o.baseline.outcome.score(),
        "confirmed": confirmation_json(confirmation),
        "speedup": confirmation.filter(|c| c.holds()).map_or(1.0, |c| c.median),
        "held_out": o.held_out,
        "wall_s": o.started.elapsed().as_secs_f64(),
    })
}

/// A confirmation against the seed as stored and printed; null when none.
pub fn confirmation_json(c: Option<&Confirmation>) -> Value {
    match c {
        Some(c) => json!({
            "speedup": c.median,
            "low": c.low,
            "high": c.high,
            "level": c.level,
            "rounds": c.rounds,
            "ratios": c.ratios,
            "holds": c.holds(),
            "failure": c.failure,
        }),
        None => Value::Null,
    }
}
