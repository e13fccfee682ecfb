//! A compile-time check that every public store future is `Send`: callers
//! spawn them on tokio's multi-threaded runtime (the heartbeat, a session's
//! flights), so a future that stopped being `Send` would break them.

use serde_json::Value;

use super::{Store, StoreOptions};
use crate::model::*;
use kevo_tasks::SizeSet;

fn send<T: Send>(_: T) {}

/// Never called: it only has to compile.
#[allow(dead_code, clippy::too_many_arguments)]
fn every_public_future_is_send(
    store: &Store,
    options: StoreOptions,
    run: &RunId,
    new_run: &NewRun,
    calls: &[NewLlmCall],
    call: &NewLlmCall,
    record: &IterationRecord,
    proposed: &[Proposed],
    decided: Decided,
    proposals: &[NewProposal],
    ids: &[ProposalId],
    value: &Value,
    held_out: &NewHeldOut,
    remeasurement: &NewRemeasurement,
    validation: &NewValidation,
    cross: &[NewCrossEvaluation],
) {
    send(Store::open("x"));
    send(Store::open_workspace(std::path::Path::new("x")));
    send(Store::open_with(options));
    send(store.close());
    send(store.create_run(new_run));
    send(store.run(run));
    send(store.list_runs());
    send(store.mark_finished(run, value));
    send(store.mark_failed(run, "x"));
    send(store.heartbeat(run));
    send(store.mark_interrupted(run, "x"));
    send(store.resume_run(run));
    send(store.record_abandoned_calls(run, 1, calls));
    send(store.record_llm_call(run, Some(CandidateId(1)), 1, call));
    send(store.record_iteration(run, record));
    send(store.record_iteration_with(run, 1, proposed, move |_| decided));
    send(store.add_proposals(run, 1, proposals, Some(value)));
    send(store.proposal(run, ProposalId(1)));
    send(store.proposals(run));
    send(store.set_proposal_batch(run, ids, "x"));
    send(store.withdraw_proposals(run, ids, "x"));
    send(store.last_checkpoint(run));
    send(store.history(run));
    send(store.candidate(CandidateId(1)));
    send(store.candidate_source(CandidateId(1)));
    send(store.evaluations_of(CandidateId(1)));
    send(store.find_evaluation(run, "x"));
    send(store.find_measurement("t", "b", "d", SizeSet::Smoke, "x"));
    send(store.best_candidate(run));
    send(store.llm_calls(run));
    send(store.record_held_out(run, held_out));
    send(store.record_remeasurement(run, 1, remeasurement));
    send(store.record_validation(run, 1, validation));
    send(store.validations(run));
    send(store.record_cross(run, cross));
    send(store.cross_evaluations(run));
    send(store.remeasurements(run));
    send(store.held_out_results(run));
}
