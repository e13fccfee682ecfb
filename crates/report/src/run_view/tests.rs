//! [`load`] against a real store: a SQLite workspace in a temporary folder
//! holding a run of two iterations, one of them suspicious.

use kevo_eval::Evaluation;
use kevo_store::{
    Checkpoint, IterationRecord, NewCandidate, NewDecision, NewEvaluation, NewRun, Proposal, RunId,
    Spent, Store,
};
use kevo_tasks::SizeSet;
use serde_json::{Value, json};

use super::{RunViewError, StoredSettings, Suspicion, load, settings, winner};

/// An evaluation of saxpy at one size, 2 ms, with `outcome`.
fn evaluation(outcome: Value) -> Evaluation {
    serde_json::from_value(json!({
        "task": "saxpy", "device": "dev", "backend": "opencl",
        "outcome": outcome,
        "sizes": [{
            "label": "64K", "correct": true, "metric": "max_abs", "error": 0.0,
            "tolerance": 1e-5, "work": 1e6, "achieved": 0.5, "ceiling": 1.0,
            "fraction": 0.5, "unit": "GB/s", "work_note": "",
            "time": {"median_s": 0.002, "min_s": 0.001, "max_s": 0.003,
                     "samples_s": [0.001, 0.002, 0.003]},
        }],
        "wall": {"compile_s": 0, "inputs_s": 0, "reference_s": 0, "device_s": 0,
                 "check_s": 0, "total_s": 1},
    }))
    .unwrap()
}

/// Iteration `iteration`: one candidate of `source`, evaluated as given.
fn iteration(iteration: u32, source: &str, evaluation: Evaluation) -> IterationRecord {
    IterationRecord {
        iteration,
        proposals: vec![Proposal {
            llm_calls: Vec::new(),
            candidate: Some(NewCandidate {
                source: source.into(),
                parents: Vec::new(),
                island: None,
                cell: None,
                descriptors: None,
                provider: Some("seed".into()),
                model: None,
            }),
            evaluation: Some(NewEvaluation {
                evaluation,
                reused_from: None,
            }),
            decision: NewDecision {
                promoted: iteration == 0,
                incumbent: None,
                island: None,
                cell: None,
                reason: "test".into(),
            },
        }],
        checkpoint: Checkpoint {
            incumbent: None,
            previous: None,
            rng_state: None,
            strategy_state: None,
            spent: Spent::default(),
        },
    }
}

/// A run whose seed is correct and whose first proposal is suspicious.
async fn stored_run(store: &Store) -> RunId {
    let run = store
        .create_run(&NewRun {
            task: "saxpy".into(),
            backend: "opencl".into(),
            device: "dev".into(),
            size_set: SizeSet::Smoke,
            strategy: "tune".into(),
            config: json!({"model_choice": "ucb"}),
            rng_state: None,
        })
        .await
        .unwrap();
    let correct = evaluation(json!({"status": "correct", "score": 0.5}));
    store
        .record_iteration(&run, &iteration(0, "seed", correct))
        .await
        .unwrap();
    let hack = json!({"status": "suspicious", "size": "64K", "reason": "too fast", "score": 9.0});
    store
        .record_iteration(&run, &iteration(1, "hack", evaluation(hack)))
        .await
        .unwrap();
    run
}

#[tokio::test]
async fn a_run_is_loaded_with_its_measurements_suspicions_and_winner() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_workspace(dir.path()).await.unwrap();
    let run = stored_run(&store).await;

    let view = load(&store, run.clone()).await.unwrap();
    assert_eq!(view.history.len(), 2);
    let seed = view.history[0].candidate_id.unwrap();
    let hack = view.history[1].candidate_id.unwrap();
    assert_eq!(view.measured[&seed.0].sizes[0].label, "64K");
    assert_eq!(
        view.suspicious,
        vec![Suspicion {
            iteration: 1,
            candidate: hack,
            size: "64K".into(),
            reason: "too fast".into(),
        }]
    );
    assert_eq!(view.best.as_ref().map(|b| b.candidate.id), Some(seed));

    let shown = view.to_json();
    assert_eq!(shown["history"][0]["sizes"][0]["median_ms"], json!(2.0));
    assert_eq!(shown["history"][0]["sizes"][0]["runs"], json!(3));
    assert_eq!(shown["model_choice"], json!("ucb"));
    assert!(shown["archive"].is_null());

    assert_eq!(winner(&store, &run).await.unwrap().candidate.source, "seed");
    assert!(matches!(
        settings(&store, &run).await.unwrap(),
        StoredSettings::Tune { .. }
    ));
    let missing = load(&store, RunId("nope".into())).await.unwrap_err();
    assert!(matches!(missing, RunViewError::Store(_)), "{missing}");
}
