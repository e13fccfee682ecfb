//! The run store against real databases: every test body runs on SQLite and
//! on PostgreSQL.

mod common;

use std::time::Duration;

use common::{Kind, TestDb, correct, runtime_error, wrong_nan};
use kevo_store::*;
use kevo_tasks::SizeSet;
use serde_json::json;

fn new_run(task: &str) -> NewRun {
    NewRun {
        task: task.into(),
        backend: "opencl".into(),
        device: "Test GPU".into(),
        size_set: SizeSet::Smoke,
        strategy: "one_plus_one".into(),
        config: json!({
            "models": [{"provider": "openai", "model": "gpt-test", "effort": "high"}],
            "iterations": 10,
            "budget": {"usd": 5.0, "tokens": 2_000_000},
            "seed": 42
        }),
        rng_state: Some(json!({"chacha": [1, 2, 3], "word_pos": "18446744073709551615"})),
    }
}

fn llm_call(user: &str, response: Option<&str>, error: Option<&str>) -> NewLlmCall {
    NewLlmCall {
        purpose: "propose".into(),
        provider: "openai".into(),
        model: "gpt-test".into(),
        prompt_system: "You write OpenCL kernels.".into(),
        prompt_user: user.into(),
        response: response.map(Into::into),
        reasoning: response.map(|_| "thinking about coalescing".into()),
        input_tokens: Some(1200),
        output_tokens: response.map(|_| 800),
        reasoning_tokens: None,
        cost_usd: Some(0.0125),
        latency_s: 3.5,
        error: error.map(Into::into),
        // A tool conversation's record, with a NUL byte that PostgreSQL's
        // TEXT would refuse raw: it round-trips as JSON text.
        transcript: response.map(|r| {
            json!({"turns": [{"text": r, "calls": [{"name": "check", "result": "a\u{0}b é"}]}],
                   "ended": "submitted"})
        }),
    }
}

fn candidate(source: &str, parents: Vec<CandidateRef>) -> NewCandidate {
    NewCandidate {
        source: source.into(),
        parents,
        island: None,
        cell: None,
        descriptors: None,
        provider: Some("openai".into()),
        model: Some("gpt-test".into()),
    }
}

fn decision(promoted: bool, incumbent: CandidateRef, reason: &str) -> NewDecision {
    NewDecision {
        promoted,
        incumbent: Some(incumbent),
        island: None,
        cell: None,
        reason: reason.into(),
    }
}

fn checkpoint(incumbent: CandidateRef, previous: Option<CandidateRef>, n: u64) -> Checkpoint {
    Checkpoint {
        incumbent: Some(incumbent),
        previous,
        rng_state: Some(json!({"state": n})),
        strategy_state: None,
        spent: Spent {
            input_tokens: 1200 * n,
            output_tokens: 800 * n,
            reasoning_tokens: 0,
            cost_usd: 0.0125 * n as f64,
            wall_s: 10.0 * n as f64,
        },
    }
}

/// The seed, evaluated: iteration 0, promoted by definition.
fn seed_record(task: &str, score: f64) -> IterationRecord {
    let mut c = candidate("__kernel void saxpy() { /* seed */ }", vec![]);
    c.provider = Some("seed".into());
    c.model = None;
    IterationRecord {
        iteration: 0,
        proposals: vec![Proposal {
            llm_calls: vec![],
            candidate: Some(c),
            evaluation: Some(correct(task, score).into()),
            decision: decision(true, CandidateRef::Proposal(0), "seed"),
        }],
        checkpoint: checkpoint(
            CandidateRef::Proposal(0),
            Some(CandidateRef::Proposal(0)),
            0,
        ),
    }
}

/// A new run of `task` with its seed recorded (scored `score`).
async fn seeded_run(store: &Store, task: &str, score: f64) -> (RunId, CandidateId) {
    let run = store.create_run(&new_run(task)).await.unwrap();
    let seed = store
        .record_iteration(&run, &seed_record(task, score))
        .await
        .unwrap()[0]
        .candidate
        .unwrap();
    (run, seed)
}

/// One proposal evaluated against `incumbent`.
fn step(
    iteration: u32,
    source: &str,
    evaluation: kevo_eval::Evaluation,
    incumbent: CandidateId,
    promoted: bool,
) -> IterationRecord {
    let new_incumbent = if promoted {
        CandidateRef::Proposal(0)
    } else {
        incumbent.into()
    };
    IterationRecord {
        iteration,
        proposals: vec![Proposal {
            llm_calls: vec![llm_call(
                &format!("improve iteration {iteration}"),
                Some(&format!("```opencl\n{source}\n```")),
                None,
            )],
            candidate: Some(candidate(source, vec![incumbent.into()])),
            evaluation: Some(evaluation.into()),
            decision: decision(
                promoted,
                new_incumbent,
                if promoted { "better" } else { "not better" },
            ),
        }],
        checkpoint: checkpoint(
            new_incumbent,
            Some(CandidateRef::Proposal(0)),
            u64::from(iteration),
        ),
    }
}

async fn lifecycle(db: &TestDb) {
    let store = &db.store;
    let run = store.create_run(&new_run("saxpy")).await.unwrap();
    assert!(run.as_str().starts_with("saxpy-"), "{run}");

    let info = store.run(&run).await.unwrap();
    assert_eq!(info.status, RunStatus::Running);
    assert_eq!(info.config, new_run("saxpy").config);
    assert_eq!(info.rng_state, new_run("saxpy").rng_state);
    assert_eq!(info.size_set, SizeSet::Smoke);
    assert!(info.finished_at.is_none() && info.summary.is_none());

    // Iteration 0: the seed.
    let ids = store
        .record_iteration(&run, &seed_record("saxpy", 0.5))
        .await
        .unwrap();
    let seed = ids[0].candidate.unwrap();
    assert!(ids[0].evaluation.is_some() && ids[0].llm_calls.is_empty());

    // 1: wrong (NaN error), kept out.
    let ids = store
        .record_iteration(&run, &step(1, "/* v1 */", wrong_nan("saxpy"), seed, false))
        .await
        .unwrap();
    let c1 = ids[0].candidate.unwrap();

    // 2: the model call failed; nothing to evaluate.
    let skipped = IterationRecord {
        iteration: 2,
        proposals: vec![Proposal {
            llm_calls: vec![llm_call("improve", None, Some("HTTP 529 overloaded"))],
            candidate: None,
            evaluation: None,
            decision: NewDecision {
                promoted: false,
                incumbent: Some(seed.into()),
                island: None,
                cell: None,
                reason: "skipped: model error".into(),
            },
        }],
        checkpoint: checkpoint(seed.into(), Some(c1.into()), 2),
    };
    let ids = store.record_iteration(&run, &skipped).await.unwrap();
    assert_eq!(ids[0].candidate, None);
    assert_eq!(ids[0].llm_calls.len(), 1);

    // 3: better, promoted.
    let ids = store
        .record_iteration(
            &run,
            &step(3, "/* v3 */", correct("saxpy", 0.7), seed, true),
        )
        .await
        .unwrap();
    let c3 = ids[0].candidate.unwrap();

    let history = store.history(&run).await.unwrap();
    let summary: Vec<_> = history
        .iter()
        .map(|h| {
            (
                h.iteration,
                h.outcome_kind.as_deref(),
                h.score,
                h.promoted,
                h.incumbent_id,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, Some("correct"), Some(0.5), true, Some(seed)),
            (1, Some("wrong_result"), None, false, Some(seed)),
            (2, None, None, false, Some(seed)),
            (3, Some("correct"), Some(0.7), true, Some(c3)),
        ]
    );
    assert_eq!(history[2].reason, "skipped: model error");

    let best = store.best_candidate(&run).await.unwrap().unwrap();
    assert_eq!(best.candidate.id, c3);
    assert_eq!(best.candidate.source, "/* v3 */");
    assert_eq!(best.candidate.parents, vec![seed]);
    assert_eq!(best.evaluation.score, Some(0.7));
    assert_eq!(
        best.evaluation.evaluation().unwrap(),
        correct("saxpy", 0.7),
        "a correct evaluation reads back exactly"
    );
    assert_eq!(store.candidate_source(c1).await.unwrap(), "/* v1 */");
    let c = store.candidate(seed).await.unwrap();
    assert_eq!(c.iteration, 0);
    assert_eq!(c.provider.as_deref(), Some("seed"));
    assert_eq!(c.source_sha256, source_sha256(&c.source));

    // The NaN evaluation is stored with its kind, no score, and its NaN.
    let wrong = store
        .find_evaluation(&run, &source_sha256("/* v1 */"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(wrong.outcome_kind, "wrong_result");
    assert_eq!(wrong.score, None);
    assert_eq!(wrong.candidate_id, c1);
    match wrong.evaluation().unwrap().outcome {
        kevo_eval::Outcome::WrongResult { value, .. } => assert!(value.is_nan()),
        other => panic!("expected a wrong result, got {other:?}"),
    }
    assert!(
        store
            .find_evaluation(&run, &source_sha256("never seen"))
            .await
            .unwrap()
            .is_none()
    );

    let calls = store.llm_calls(&run).await.unwrap();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].candidate_id, Some(c1));
    assert_eq!(
        calls[0].call,
        llm_call(
            "improve iteration 1",
            Some("```opencl\n/* v1 */\n```"),
            None
        )
    );
    assert_eq!(calls[1].candidate_id, None);
    assert_eq!(calls[1].call.error.as_deref(), Some("HTTP 529 overloaded"));
    assert_eq!(calls[1].call.output_tokens, None);

    // Held-out gate: seed and winner, one session.
    store
        .record_held_out(
            &run,
            &NewHeldOut {
                candidate_id: seed,
                role: HeldOutRole::Seed,
                evaluation: correct("saxpy", 0.4),
                session: Some("s1".into()),
                phi: Some(0.4),
                fraction: Some(0.4),
                speedup: None,
            },
        )
        .await
        .unwrap();
    store
        .record_held_out(
            &run,
            &NewHeldOut {
                candidate_id: c3,
                role: HeldOutRole::Winner,
                evaluation: correct("saxpy", 0.6),
                session: Some("s1".into()),
                phi: Some(0.6),
                fraction: Some(0.6),
                speedup: Some(1.5),
            },
        )
        .await
        .unwrap();
    let held = store.held_out_results(&run).await.unwrap();
    assert_eq!(held.len(), 2);
    assert_eq!(held[1].role, HeldOutRole::Winner);
    assert_eq!(held[1].speedup, Some(1.5));
    assert_eq!(held[1].outcome_kind, "correct");
    // Held-out numbers never leak into what the search reads.
    assert_eq!(store.history(&run).await.unwrap(), history);
    assert_eq!(
        store
            .best_candidate(&run)
            .await
            .unwrap()
            .unwrap()
            .evaluation
            .score,
        Some(0.7)
    );
    let kinds: Vec<_> = store
        .evaluations_of(c3)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        vec![EvaluationKind::InDistribution, EvaluationKind::HeldOut]
    );

    let summary =
        json!({"task": "saxpy", "seed_score": 0.5, "best_score": 0.7, "improvement": 1.4});
    store.mark_finished(&run, &summary).await.unwrap();
    let info = store.run(&run).await.unwrap();
    assert_eq!(info.status, RunStatus::Finished);
    assert_eq!(info.summary, Some(summary));
    assert!(info.finished_at.unwrap() >= info.created_at);

    // A finished run neither grows nor resumes.
    let err = store
        .record_iteration(&run, &step(4, "/* v4 */", correct("saxpy", 0.9), c3, true))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::RunStatus {
                status: RunStatus::Finished,
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        store.resume_run(&run).await.unwrap_err(),
        StoreError::RunStatus { .. }
    ));
    assert!(matches!(
        store.mark_failed(&run, "late").await.unwrap_err(),
        StoreError::RunStatus { .. }
    ));

    let listing = store.list_runs().await.unwrap();
    assert_eq!(listing.len(), 1);
    let l = &listing[0];
    assert_eq!(l.id, run);
    assert_eq!(l.status, RunStatus::Finished);
    assert_eq!(l.last_iteration, Some(3));
    assert_eq!(l.candidates, 3);
    assert_eq!(l.best_score, Some(0.7));
    assert!((l.cost_usd.unwrap() - 0.0375).abs() < 1e-12);

    let missing = RunId::from("nope");
    assert!(matches!(
        store.run(&missing).await,
        Err(StoreError::RunNotFound(_))
    ));
    assert!(matches!(
        store.history(&missing).await,
        Err(StoreError::RunNotFound(_))
    ));
    assert!(matches!(
        store.candidate(CandidateId(987_654)).await,
        Err(StoreError::CandidateNotFound(_))
    ));
}

async fn atomic_iterations(db: &TestDb) {
    let store = &db.store;
    let run = store.create_run(&new_run("saxpy")).await.unwrap();
    let other = store.create_run(&new_run("saxpy")).await.unwrap();
    let seed = store
        .record_iteration(&run, &seed_record("saxpy", 0.5))
        .await
        .unwrap()[0]
        .candidate
        .unwrap();
    let other_seed = store
        .record_iteration(&other, &seed_record("saxpy", 0.5))
        .await
        .unwrap()[0]
        .candidate
        .unwrap();
    let before = db.row_counts().await;

    // The database rejects the second proposal's parent after the first
    // proposal's rows (and the second's candidate) were already written.
    let mut bad = step(1, "/* a */", correct("saxpy", 0.6), seed, false);
    let mut second = bad.proposals[0].clone();
    second.candidate = Some(candidate("/* b */", vec![CandidateId(9_999_999).into()]));
    bad.proposals.push(second);
    let err = store.record_iteration(&run, &bad).await.unwrap_err();
    assert!(matches!(err, StoreError::Database { .. }), "{err}");
    assert_eq!(
        db.row_counts().await,
        before,
        "a failed iteration left rows behind"
    );

    // An incumbent from another run is refused inside the transaction.
    let cross = step(1, "/* c */", correct("saxpy", 0.6), other_seed, false);
    let err = store.record_iteration(&run, &cross).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidRecord(_)), "{err}");
    assert_eq!(db.row_counts().await, before);

    // An evaluation of another task.
    let wrong_task = step(1, "/* d */", correct("heat2d", 0.6), seed, false);
    assert!(matches!(
        store.record_iteration(&run, &wrong_task).await.unwrap_err(),
        StoreError::InvalidRecord(_)
    ));
    // Contradictory records are refused before anything is written.
    let mut orphan = step(1, "/* e */", correct("saxpy", 0.6), seed, false);
    orphan.proposals[0].candidate = None;
    assert!(matches!(
        store.record_iteration(&run, &orphan).await.unwrap_err(),
        StoreError::InvalidRecord(_)
    ));
    let mut dangling = step(1, "/* f */", correct("saxpy", 0.6), seed, false);
    dangling.checkpoint.incumbent = Some(CandidateRef::Proposal(3));
    assert!(matches!(
        store.record_iteration(&run, &dangling).await.unwrap_err(),
        StoreError::InvalidRecord(_)
    ));
    let mut nan_cost = step(1, "/* g */", correct("saxpy", 0.6), seed, false);
    nan_cost.checkpoint.spent.cost_usd = f64::NAN;
    assert!(matches!(
        store.record_iteration(&run, &nan_cost).await.unwrap_err(),
        StoreError::InvalidRecord(_)
    ));
    assert_eq!(db.row_counts().await, before);

    // A cancelled write (the future dropped mid-way, as on Ctrl-C) commits
    // nothing either: either it finished or it left no trace.
    let big = "x".repeat(512 * 1024);
    let slow = step(1, &big, correct("saxpy", 0.6), seed, false);
    let cancelled = tokio::time::timeout(
        Duration::from_micros(200),
        store.record_iteration(&run, &slow),
    )
    .await;
    let after = db.row_counts().await;
    match cancelled {
        Ok(result) => {
            result.unwrap();
            assert_ne!(after, before);
            assert!(
                store
                    .last_checkpoint(&run)
                    .await
                    .unwrap()
                    .unwrap()
                    .iteration
                    == 1
            );
        }
        Err(_) => {
            if after != before {
                // The commit raced the cancellation and won: then it is whole.
                assert_eq!(
                    store
                        .last_checkpoint(&run)
                        .await
                        .unwrap()
                        .unwrap()
                        .iteration,
                    1
                );
                assert_eq!(store.history(&run).await.unwrap().len(), 2);
            }
        }
    }

    // The store is still usable after all of this.
    let next = store
        .last_checkpoint(&run)
        .await
        .unwrap()
        .unwrap()
        .iteration
        + 1;
    store
        .record_iteration(
            &run,
            &step(next, "/* ok */", correct("saxpy", 0.6), seed, true),
        )
        .await
        .unwrap();
}

async fn resume_round_trip(db: &TestDb) {
    let store = &db.store;
    let run = store.create_run(&new_run("heat2d")).await.unwrap();
    assert_eq!(store.last_checkpoint(&run).await.unwrap(), None);

    let seed = store
        .record_iteration(&run, &seed_record("heat2d", 0.3))
        .await
        .unwrap()[0]
        .candidate
        .unwrap();
    let mut one = step(1, "/* one */", runtime_error("heat2d"), seed, false);
    let rng = json!({"chacha20": {"seed": [7, 7, 7, 7], "stream": 0, "word_pos": "340282366920938463463374607431768211455"}});
    let strategy_state = json!({"archive": {"2-1-3": 17}, "islands": [[1, 2], [3]]});
    one.checkpoint.rng_state = Some(rng.clone());
    one.checkpoint.strategy_state = Some(strategy_state.clone());
    one.checkpoint.spent = Spent {
        input_tokens: 9_000_000_000,
        output_tokens: 123_456,
        reasoning_tokens: 7,
        cost_usd: 12.345678901234,
        wall_s: 3600.25,
    };
    let c1 = store.record_iteration(&run, &one).await.unwrap()[0]
        .candidate
        .unwrap();
    store.mark_interrupted(&run, "SIGINT").await.unwrap();
    let info = store.run(&run).await.unwrap();
    assert_eq!(info.status, RunStatus::Interrupted);
    assert_eq!(info.status_reason.as_deref(), Some("SIGINT"));

    // Another process opens the store and resumes.
    let again = db.reopen().await.unwrap();
    let (info, cp) = again.resume_run(&run).await.unwrap();
    assert_eq!(info.status, RunStatus::Running);
    assert_eq!(info.status_reason, None);
    let cp = cp.unwrap();
    assert_eq!(cp.run_id, run);
    assert_eq!(cp.iteration, 1);
    assert_eq!(cp.incumbent, Some(seed));
    assert_eq!(cp.previous, Some(c1));
    assert_eq!(cp.rng_state, Some(rng));
    assert_eq!(cp.strategy_state, Some(strategy_state));
    assert_eq!(cp.spent, one.checkpoint.spent);
    assert_eq!(store.last_checkpoint(&run).await.unwrap(), Some(cp.clone()));

    // The step that was already recorded cannot be recorded again...
    let err = again.record_iteration(&run, &one).await.unwrap_err();
    assert!(
        matches!(err, StoreError::IterationExists { iteration: 1, .. }),
        "{err}"
    );
    let err = again
        .record_iteration(&run, &seed_record("heat2d", 0.3))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::IterationOutOfOrder {
                iteration: 0,
                last: 1,
                ..
            }
        ),
        "{err}"
    );

    // ...and a source proposed again is not measured again: the earlier
    // evaluation is found and copied, marked as a copy.
    let earlier = again
        .find_evaluation(&run, &source_sha256("/* one */"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(earlier.outcome_kind, "runtime_error");
    let mut two = step(2, "/* one */", earlier.evaluation().unwrap(), seed, false);
    two.proposals[0].evaluation.as_mut().unwrap().reused_from = Some(earlier.id);
    let ids = again.record_iteration(&run, &two).await.unwrap();
    let copy = again
        .evaluations_of(ids[0].candidate.unwrap())
        .await
        .unwrap();
    assert_eq!(copy[0].reused_from, Some(earlier.id));
    assert_eq!(
        again
            .find_evaluation(&run, &source_sha256("/* one */"))
            .await
            .unwrap()
            .unwrap()
            .id,
        earlier.id,
        "the original measurement is the one found"
    );

    // A run killed without being marked is still `running`: resumable too.
    let (_, cp) = again.resume_run(&run).await.unwrap();
    assert_eq!(cp.unwrap().iteration, 2);
    again.mark_failed(&run, "out of budget").await.unwrap();
    let (_, cp) = again.resume_run(&run).await.unwrap();
    assert_eq!(cp.unwrap().iteration, 2);
    again.close().await;
}

async fn listing(db: &TestDb) {
    let store = &db.store;
    assert!(store.list_runs().await.unwrap().is_empty());
    let a = store.create_run(&new_run("saxpy")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let b = store.create_run(&new_run("nbody")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let c = store.create_run(&new_run("lbm")).await.unwrap();

    let seed = store
        .record_iteration(&a, &seed_record("saxpy", 0.25))
        .await
        .unwrap()[0]
        .candidate
        .unwrap();
    store
        .record_iteration(&a, &step(1, "/* a1 */", correct("saxpy", 0.5), seed, true))
        .await
        .unwrap();
    store
        .record_iteration(&b, &seed_record("nbody", 0.0))
        .await
        .unwrap();
    store.mark_failed(&c, "device lost").await.unwrap();

    let runs = store.list_runs().await.unwrap();
    let ids: Vec<_> = runs.iter().map(|r| r.id.clone()).collect();
    assert_eq!(ids, vec![c.clone(), b.clone(), a.clone()], "newest first");
    let (rc, rb, ra) = (&runs[0], &runs[1], &runs[2]);
    assert_eq!(
        (ra.task.as_str(), ra.last_iteration, ra.candidates),
        ("saxpy", Some(1), 2)
    );
    assert_eq!(ra.best_score, Some(0.5));
    assert_eq!(ra.status, RunStatus::Running);
    assert_eq!(
        (rb.last_iteration, rb.candidates, rb.best_score),
        (Some(0), 1, Some(0.0))
    );
    assert_eq!(
        (rc.last_iteration, rc.candidates, rc.best_score),
        (None, 0, None)
    );
    assert_eq!(rc.status, RunStatus::Failed);
    assert_eq!(rc.cost_usd, None);
    assert_eq!(
        store.run(&c).await.unwrap().status_reason.as_deref(),
        Some("device lost")
    );
}

async fn idempotent_migrations(db: &TestDb) {
    let run = db.store.create_run(&new_run("saxpy")).await.unwrap();
    db.store
        .record_iteration(&run, &seed_record("saxpy", 0.5))
        .await
        .unwrap();
    // Opening again (twice, at the same time) applies nothing and loses nothing.
    let (s1, s2) = tokio::join!(db.reopen(), db.reopen());
    let (s1, s2) = (s1.unwrap(), s2.unwrap());
    assert_eq!(s1.schema_version(), db.store.schema_version());
    assert_eq!(s1.history(&run).await.unwrap().len(), 1);
    assert_eq!(s2.list_runs().await.unwrap().len(), 1);
    let applied = db.scalar("SELECT COUNT(*) FROM _sqlx_migrations").await;
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite"))
        .unwrap()
        .count() as i64;
    assert_eq!(applied, files, "every migration, once each");
    s1.close().await;
    s2.close().await;
}

async fn schema_too_new(db: &TestDb) {
    let blob = match db.kind {
        Kind::Sqlite => "X'00'",
        Kind::Postgres => "'\\x00'::bytea",
    };
    db.exec(&format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99990101000000, 'from the future', TRUE, {blob}, 0)"
    ))
    .await;
    let err = db.reopen().await.unwrap_err();
    match &err {
        StoreError::SchemaTooNew {
            found,
            known,
            location,
        } => {
            assert_eq!(*found, 99990101000000);
            assert_eq!(*known, db.store.schema_version());
            assert_eq!(location, db.store.location());
        }
        other => panic!("expected SchemaTooNew, got {other}"),
    }
    assert!(err.to_string().contains("upgrade kevo"), "{err}");
}

async fn text_with_nul(db: &TestDb) {
    // Postgres rejects NUL in text and JSON; a response containing one must
    // not abort the iteration, and both backends must store the same thing.
    let store = &db.store;
    let (run, seed) = seeded_run(store, "saxpy", 0.5).await;
    let mut rec = step(1, "/* nul \0 here */", runtime_error("saxpy"), seed, false);
    rec.proposals[0].llm_calls[0].response = Some("bad\0byte".into());
    let mut ev = runtime_error("saxpy");
    ev.outcome = kevo_eval::Outcome::RuntimeError {
        size: None,
        fault: None,
        message: "driver said \0".into(),
    };
    rec.proposals[0].evaluation = Some(ev.into());
    let ids = store.record_iteration(&run, &rec).await.unwrap();
    let c = store.candidate(ids[0].candidate.unwrap()).await.unwrap();
    assert_eq!(c.source, "/* nul \u{FFFD} here */");
    // The hash is of what was evaluated, so the lookup by the original works.
    assert!(
        store
            .find_evaluation(&run, &source_sha256("/* nul \0 here */"))
            .await
            .unwrap()
            .is_some()
    );
    let calls = store.llm_calls(&run).await.unwrap();
    assert_eq!(calls[0].call.response.as_deref(), Some("bad\u{FFFD}byte"));
}

async fn islands_and_cells(db: &TestDb) {
    // A population strategy: several proposals per iteration, each placed
    // on an island and in a cell, one a child of another.
    let store = &db.store;
    let (run, seed) = seeded_run(store, "saxpy", 0.5).await;
    let mut p0 = step(1, "/* island 0 */", correct("saxpy", 0.6), seed, true)
        .proposals
        .remove(0);
    let c = p0.candidate.as_mut().unwrap();
    c.island = Some(0);
    c.cell = Some("1-0-2".into());
    c.descriptors = Some(json!({"memory": 1, "structure": 0, "parallelism": 2}));
    p0.decision.island = Some(0);
    p0.decision.cell = Some("1-0-2".into());
    let mut p1 = step(1, "/* island 1 */", correct("saxpy", 0.55), seed, true)
        .proposals
        .remove(0);
    let c = p1.candidate.as_mut().unwrap();
    c.island = Some(1);
    c.cell = Some("0-0-1".into());
    c.parents = vec![seed.into(), CandidateRef::Proposal(0)];
    p1.decision.island = Some(1);
    p1.decision.incumbent = Some(CandidateRef::Proposal(1));
    let rec = IterationRecord {
        iteration: 1,
        proposals: vec![p0, p1],
        checkpoint: Checkpoint {
            incumbent: Some(CandidateRef::Proposal(0)),
            previous: Some(CandidateRef::Proposal(1)),
            rng_state: None,
            strategy_state: Some(json!({"islands": 2})),
            spent: Spent::default(),
        },
    };
    let ids = store.record_iteration(&run, &rec).await.unwrap();
    let (a, b) = (ids[0].candidate.unwrap(), ids[1].candidate.unwrap());
    let cb = store.candidate(b).await.unwrap();
    assert_eq!(cb.parents, vec![seed, a]);
    assert_eq!((cb.island, cb.cell.as_deref()), (Some(1), Some("0-0-1")));
    let ca = store.candidate(a).await.unwrap();
    assert_eq!(
        ca.descriptors,
        Some(json!({"memory": 1, "structure": 0, "parallelism": 2}))
    );
    let history = store.history(&run).await.unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(history[1].island, Some(0));
    assert_eq!(history[2].incumbent_id, Some(b));
    let cp = store.last_checkpoint(&run).await.unwrap().unwrap();
    assert_eq!((cp.incumbent, cp.previous), (Some(a), Some(b)));
}

async fn heartbeats_and_abandoned_calls(db: &TestDb) {
    let store = &db.store;
    let run = store.create_run(&new_run("saxpy")).await.unwrap();
    let listed = || async { store.list_runs().await.unwrap().remove(0) };
    let now = chrono::Utc::now();
    assert!(!listed().await.is_alive(now), "no heartbeat yet");
    store.heartbeat(&run).await.unwrap();
    let l = listed().await;
    assert!(l.is_alive(chrono::Utc::now()));
    assert!(l.heartbeat_holder.is_some());
    let later = chrono::Utc::now() + chrono::Duration::seconds(HEARTBEAT_STALE_S + 1);
    assert!(!l.is_alive(later), "a stale heartbeat is a dead run");
    // While its holder lives, the run cannot be resumed by another process.
    let err = store.resume_run(&run).await.unwrap_err();
    assert!(matches!(err, StoreError::RunAlive { .. }), "{err}");
    assert!(
        err.to_string().contains("running in another process"),
        "{err}"
    );
    // A holder that ended on this machine: dead at once, resumable.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let mine = kevo_store::lease::this_process();
    let (boot, rest) = mine.split_once('/').unwrap();
    let start = rest.split_once('/').unwrap().1;
    db.exec(&format!(
        "UPDATE runs SET heartbeat_holder = '{boot}/{pid}/{start}' WHERE id = '{}'",
        run.0
    ))
    .await;
    assert!(!listed().await.is_alive(chrono::Utc::now()));
    store.resume_run(&run).await.unwrap();
    // Calls in flight when the run stopped: stored, tied to no candidate.
    let call = llm_call(
        "the prompt",
        None,
        Some("abandoned after 3.0 s: interrupted by SIGINT"),
    );
    store
        .record_abandoned_calls(&run, 1, &[call.clone(), call])
        .await
        .unwrap();
    let calls = store.llm_calls(&run).await.unwrap();
    assert_eq!(calls.len(), 2);
    assert!(
        calls
            .iter()
            .all(|c| c.candidate_id.is_none() && c.iteration == 1)
    );
}

/// A call made between iterations about a stored candidate (the
/// performance analyst's) is stored on its own, tied to that candidate,
/// with its counts; a latency that is not a number is refused.
async fn single_calls(db: &TestDb) {
    let store = &db.store;
    let (run, seed) = seeded_run(store, "saxpy", 0.5).await;
    let mut call = llm_call("analyse the seed", Some("use float4"), None);
    call.purpose = "analysis".into();
    call.input_tokens = Some(900);
    call.cost_usd = Some(0.002);
    let id = store
        .record_llm_call(&run, Some(seed), 0, &call)
        .await
        .unwrap();
    let calls = store.llm_calls(&run).await.unwrap();
    let stored = calls.iter().find(|c| c.id == id).unwrap();
    assert_eq!(stored.candidate_id, Some(seed));
    assert_eq!(stored.iteration, 0);
    assert_eq!(stored.call, call);
    call.latency_s = f64::NAN;
    let err = store
        .record_llm_call(&run, Some(seed), 0, &call)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("latency"), "{err}");
    assert_eq!(store.llm_calls(&run).await.unwrap().len(), calls.len());
}

/// Cross-device evaluations are stored by session with the run's
/// candidates, and refused for another run's.
async fn cross_evaluations(db: &TestDb) {
    let store = &db.store;
    let (run, seed) = seeded_run(store, "saxpy", 0.5).await;
    let mut on_other = correct("saxpy", 0.4);
    on_other.device = "NVIDIA H200".into();
    let rows = vec![
        NewCrossEvaluation {
            candidate_id: seed,
            role: HeldOutRole::Seed,
            session: "s1".into(),
            evaluation: on_other.clone(),
            translated_source: None,
        },
        NewCrossEvaluation {
            candidate_id: seed,
            role: HeldOutRole::Winner,
            session: "s1".into(),
            evaluation: on_other.clone(),
            translated_source: Some("__kernel void saxpy() {}".into()),
        },
    ];
    store.record_cross(&run, &rows).await.unwrap();
    let stored = store.cross_evaluations(&run).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0].cross, rows[0]);
    assert_eq!(stored[1].cross, rows[1], "the translation is kept");
    let (other, _) = seeded_run(store, "saxpy", 0.5).await;
    let err = store.record_cross(&other, &rows).await.unwrap_err();
    assert!(err.to_string().contains("belongs to run"), "{err}");
    assert_eq!(store.cross_evaluations(&other).await.unwrap().len(), 0);
}

/// Validations are stored with the iteration that made them (a proposal
/// named by position) or alone (the seed's baseline), and read back in
/// order; one naming a proposal without a candidate is refused.
async fn validations(db: &TestDb) {
    let store = &db.store;
    let (run, seed) = seeded_run(store, "saxpy", 0.5).await;
    let at_validation = correct("saxpy", 0.45);
    let baseline = NewValidation {
        candidate: seed.into(),
        passed: true,
        reason: "the seed's baseline".into(),
        evaluation: at_validation.clone(),
        device_s: 0.25,
        wall_s: 1.5,
    };
    store.record_validation(&run, 0, &baseline).await.unwrap();
    let (mut proposed, _) = step(1, "/* a */", correct("saxpy", 0.7), seed, false).split();
    proposed.push(Proposed {
        llm_calls: vec![llm_call("improve", None, Some("HTTP 500"))],
        candidate: None,
        evaluation: None,
    });
    let rejected = NewValidation {
        candidate: CandidateRef::Proposal(0),
        passed: false,
        reason: "wrong at validation size `100003`".into(),
        ..baseline.clone()
    };
    let decided = |validations: Vec<NewValidation>| Decided {
        decisions: vec![
            decision(false, seed.into(), "rejected by validation"),
            decision(false, seed.into(), "the proposer failed"),
        ],
        checkpoint: checkpoint(seed.into(), None, 1),
        remeasurements: Vec::new(),
        validations,
        answers: None,
    };
    let bad = NewValidation {
        candidate: CandidateRef::Proposal(1),
        ..rejected.clone()
    };
    let err = store
        .record_iteration_with(&run, 1, &proposed, |_| decided(vec![bad]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("proposal 1"), "{err}");
    let ids = store
        .record_iteration_with(&run, 1, &proposed, |_| decided(vec![rejected.clone()]))
        .await
        .unwrap();
    let stored = store.validations(&run).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!((stored[0].candidate_id, stored[0].iteration), (seed, 0));
    assert!(stored[0].passed);
    assert_eq!(stored[0].evaluation, at_validation);
    assert_eq!(stored[1].candidate_id, ids[0].candidate.unwrap());
    assert_eq!(stored[1].iteration, 1);
    assert!(!stored[1].passed);
    assert_eq!(stored[1].reason, rejected.reason);
    let (other, _) = seeded_run(store, "saxpy", 0.5).await;
    let err = store
        .record_validation(&other, 0, &baseline)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("belongs to run"), "{err}");
}

/// A strategy decides on the ids the store gave the iteration's
/// candidates, inside the transaction; what it decides is checked like any
/// record, and a refused decision leaves nothing of the iteration behind.
async fn decisions_on_stored_ids(db: &TestDb) {
    let store = &db.store;
    let (run, seed) = seeded_run(store, "saxpy", 0.5).await;
    let (proposed, _) = step(1, "/* a */", correct("saxpy", 0.7), seed, false).split();
    let mut proposed = proposed;
    proposed.push(Proposed {
        llm_calls: vec![llm_call("improve", None, Some("HTTP 500"))],
        candidate: None,
        evaluation: None,
    });
    let before = db.row_counts().await;

    // Deciding wrongly: one decision for two proposals.
    let err = store
        .record_iteration_with(&run, 1, &proposed, |ids| Decided {
            decisions: vec![decision(true, ids[0].unwrap().into(), "better")],
            checkpoint: checkpoint(ids[0].unwrap().into(), None, 1),
            remeasurements: Vec::new(),
            validations: Vec::new(),
            answers: None,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidRecord(m) if m.contains("1 decisions for 2 proposals")),
        "{err}"
    );
    // Promoting the proposal that has no candidate.
    let err = store
        .record_iteration_with(&run, 1, &proposed, |_| Decided {
            decisions: vec![
                decision(false, seed.into(), "not better"),
                decision(true, seed.into(), "?"),
            ],
            checkpoint: checkpoint(seed.into(), None, 1),
            remeasurements: Vec::new(),
            validations: Vec::new(),
            answers: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidRecord(_)), "{err}");
    assert_eq!(
        db.row_counts().await,
        before,
        "a refused decision left the candidates it was shown behind"
    );

    let mut shown = Vec::new();
    let ids = store
        .record_iteration_with(&run, 1, &proposed, |ids| {
            shown = ids.to_vec();
            let winner = ids[0].unwrap();
            Decided {
                decisions: vec![
                    decision(true, winner.into(), "better"),
                    decision(false, winner.into(), "the proposer failed"),
                ],
                checkpoint: checkpoint(winner.into(), Some(winner.into()), 1),
                remeasurements: vec![remeasurement(
                    RemeasurePurpose::Promotion,
                    vec![winner, seed],
                )],
                validations: Vec::new(),
                answers: None,
            }
        })
        .await
        .unwrap();
    assert_eq!(shown.len(), 2);
    assert_eq!(shown[1], None, "the failed proposal has no candidate");
    assert_eq!(
        shown,
        ids.iter().map(|i| i.candidate).collect::<Vec<_>>(),
        "the strategy saw the ids that were stored"
    );
    let winner = shown[0].unwrap();
    assert!(winner.0 > seed.0);
    let cp = store.last_checkpoint(&run).await.unwrap().unwrap();
    assert_eq!(
        (cp.iteration, cp.incumbent, cp.previous),
        (1, Some(winner), Some(winner))
    );
    let history = store.history(&run).await.unwrap();
    let last: Vec<(Option<CandidateId>, bool, Option<CandidateId>)> = history[1..]
        .iter()
        .map(|h| (h.candidate_id, h.promoted, h.incumbent_id))
        .collect();
    assert_eq!(
        last,
        vec![
            (Some(winner), true, Some(winner)),
            (None, false, Some(winner))
        ]
    );

    // The promotion's re-measurement came with the iteration; a final
    // one is stored on its own, and one naming another run's candidate is
    // refused without a trace.
    let final_pick = remeasurement(RemeasurePurpose::Final, vec![winner, seed]);
    store
        .record_remeasurement(&run, 1, &final_pick)
        .await
        .unwrap();
    let (other_run, other_seed) = seeded_run(store, "saxpy", 0.5).await;
    let err = store
        .record_remeasurement(
            &run,
            1,
            &remeasurement(RemeasurePurpose::Final, vec![winner, other_seed]),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&other_run.0), "{err}");
    let err = store
        .record_remeasurement(&run, 1, &remeasurement(RemeasurePurpose::Final, vec![]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("at least one candidate"), "{err}");
    // The pick's winner confirmed against the seed on fresh rounds.
    let confirm = remeasurement(RemeasurePurpose::Confirm, vec![winner, seed]);
    store.record_remeasurement(&run, 1, &confirm).await.unwrap();
    let stored = store.remeasurements(&run).await.unwrap();
    assert_eq!(stored.len(), 3);
    assert_eq!(stored[0].iteration, 1);
    assert_eq!(
        stored[0].remeasurement,
        remeasurement(RemeasurePurpose::Promotion, vec![winner, seed])
    );
    assert_eq!(stored[1].remeasurement, final_pick);
    assert_eq!(stored[2].remeasurement, confirm);
    assert!(store.remeasurements(&other_run).await.unwrap().is_empty());
}

/// Proposals handed out (ask/tell, batch) are answered once, inside the
/// answering iteration's transaction; asking advances the checkpoint's
/// strategy state; withdrawn and unknown proposals are refused.
async fn proposals_answered_once(db: &TestDb) {
    let store = &db.store;
    let (run, seed) = seeded_run(store, "saxpy", 0.5).await;
    let asked = |n: usize| -> Vec<NewProposal> {
        (0..n)
            .map(|i| NewProposal {
                system: "system".into(),
                user: format!("prompt {i}"),
                selection: json!({"parent": seed.0, "how": "incumbent"}),
            })
            .collect()
    };
    let advanced = json!({"search": {"round": 3}});
    let ids = store
        .add_proposals(&run, 0, &asked(3), Some(&advanced))
        .await
        .unwrap();
    assert_eq!(ids.len(), 3);
    let cp = store.last_checkpoint(&run).await.unwrap().unwrap();
    assert_eq!(cp.strategy_state.as_ref(), Some(&advanced));
    // No checkpoint at iteration 5: nothing is stored.
    let err = store
        .add_proposals(&run, 5, &asked(1), Some(&advanced))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("iteration 5"), "{err}");
    assert_eq!(store.proposals(&run).await.unwrap().len(), 3);

    let p = store.proposal(&run, ids[1]).await.unwrap();
    assert_eq!(p.status, ProposalStatus::Pending);
    assert_eq!((p.asked_after, p.proposal.user.as_str()), (0, "prompt 1"));
    store
        .set_proposal_batch(&run, &ids[..2], "openai:batch_1")
        .await
        .unwrap();
    assert_eq!(
        store.proposal(&run, ids[0]).await.unwrap().batch.as_deref(),
        Some("openai:batch_1")
    );

    let answer = |iteration: u32, id: ProposalId, parent: CandidateId| {
        let (proposed, mut decided) = step(
            iteration,
            &format!("/* answer {iteration} */"),
            correct("saxpy", 0.6),
            parent,
            false,
        )
        .split();
        decided.answers = Some(id);
        (proposed, decided)
    };
    let (proposed, decided) = answer(1, ids[1], seed);
    store
        .record_iteration_with(&run, 1, &proposed, |_| decided)
        .await
        .unwrap();
    let p = store.proposal(&run, ids[1]).await.unwrap();
    assert_eq!((p.status, p.iteration), (ProposalStatus::Answered, Some(1)));
    assert!(p.closed_at.is_some());

    // Answering it again stores nothing of the second iteration.
    let before = db.row_counts().await;
    let (proposed, decided) = answer(2, ids[1], seed);
    let err = store
        .record_iteration_with(&run, 2, &proposed, |_| decided)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::ProposalClosed {
                iteration: Some(1),
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("answered (iteration 1)"), "{err}");
    assert_eq!(db.row_counts().await, before);
    // Another run's proposal, or none at all.
    let (other, other_seed) = seeded_run(store, "saxpy", 0.5).await;
    let err = store.proposal(&other, ids[0]).await.unwrap_err();
    assert!(matches!(err, StoreError::ProposalNotFound { .. }), "{err}");
    let (proposed, decided) = answer(1, ids[0], other_seed);
    let err = store
        .record_iteration_with(&other, 1, &proposed, |_| decided)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::ProposalNotFound { .. }), "{err}");

    // An answer kept to be evaluated later (`kevo tell --defer`): stored
    // with the pending proposal, once; not for a closed one.
    let kept = store
        .defer_answer(&run, ids[2], "```c\n/* kept */\n```", Some("a model"))
        .await
        .unwrap();
    let p = store.proposal(&run, ids[2]).await.unwrap();
    assert_eq!(p.status, ProposalStatus::Pending);
    assert_eq!(p.deferred.as_ref(), Some(&kept));
    assert_eq!(kept.model.as_deref(), Some("a model"));
    assert!(kept.text.contains("/* kept */"));
    let err = store
        .defer_answer(&run, ids[2], "another", None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::AnswerDeferred { .. }), "{err}");
    assert!(err.to_string().contains("--deferred"), "{err}");
    assert!(
        store
            .proposal(&run, ids[2])
            .await
            .unwrap()
            .deferred
            .unwrap()
            .text
            == kept.text,
        "the first answer is kept"
    );
    let err = store
        .defer_answer(&run, ids[1], "late", None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::ProposalClosed { .. }), "{err}");
    let err = store
        .defer_answer(&run, ProposalId(9999), "lost", None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::ProposalNotFound { .. }), "{err}");
    assert!(
        store
            .proposal(&run, ids[0])
            .await
            .unwrap()
            .deferred
            .is_none()
    );

    store
        .withdraw_proposals(&run, &[ids[0]], "its batch expired")
        .await
        .unwrap();
    let p = store.proposal(&run, ids[0]).await.unwrap();
    assert_eq!(p.status, ProposalStatus::Withdrawn);
    assert_eq!(p.reason.as_deref(), Some("its batch expired"));
    let err = store
        .withdraw_proposals(&run, &[ids[0]], "again")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not pending"), "{err}");
    let statuses: Vec<ProposalStatus> = store
        .proposals(&run)
        .await
        .unwrap()
        .iter()
        .map(|p| p.status)
        .collect();
    assert_eq!(
        statuses,
        [
            ProposalStatus::Withdrawn,
            ProposalStatus::Answered,
            ProposalStatus::Pending
        ]
    );
    // A finished run takes no new proposals.
    store.mark_finished(&run, &json!({})).await.unwrap();
    let err = store
        .add_proposals(&run, 1, &asked(1), None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::RunStatus { .. }), "{err}");
}

fn remeasurement(purpose: RemeasurePurpose, candidates: Vec<CandidateId>) -> NewRemeasurement {
    NewRemeasurement {
        purpose,
        candidates,
        verdict: "score ratio 1.120x (95% lower bound 1.081x): significant".into(),
        rounds: serde_json::json!([{"scores": [0.56, 0.5]}, {"scores": [0.55, 0.49]}]),
        evaluations: 4,
        device_s: 0.25,
        wall_s: 0.5,
    }
}

/// The tuning cache: a source measured in one run is found from any other
/// run of the same task, size set, device and backend, and nowhere else.
async fn measurement_cache(db: &TestDb) {
    let store = &db.store;
    let (run, seed) = seeded_run(store, "saxpy", 0.5).await;
    store
        .record_iteration(
            &run,
            &step(1, "/* faulty */", runtime_error("saxpy"), seed, false),
        )
        .await
        .unwrap();
    let find = |task: &'static str, device: &'static str, set: SizeSet, source: &'static str| async move {
        store
            .find_measurement(task, "opencl", device, set, &source_sha256(source))
            .await
            .unwrap()
    };
    let seed_source = "__kernel void saxpy() { /* seed */ }";
    let hit = find("saxpy", "Test GPU", SizeSet::Smoke, seed_source)
        .await
        .expect("measured in the other run");
    assert_eq!((hit.candidate_id, hit.score), (seed, Some(0.5)));
    assert!(
        find("saxpy", "Other GPU", SizeSet::Smoke, seed_source)
            .await
            .is_none()
    );
    assert!(
        find("saxpy", "Test GPU", SizeSet::Full, seed_source)
            .await
            .is_none()
    );
    assert!(
        find("heat2d", "Test GPU", SizeSet::Smoke, seed_source)
            .await
            .is_none()
    );
    assert!(
        find("saxpy", "Test GPU", SizeSet::Smoke, "/* faulty */")
            .await
            .is_none(),
        "a runtime error is measured again"
    );
    // A later run that reused the measurement: the original is served.
    let (other, other_seed) = seeded_run(store, "saxpy", 0.6).await;
    let mut reuse = step(1, "/* v2 */", correct("saxpy", 0.7), other_seed, true);
    reuse.proposals[0].evaluation.as_mut().unwrap().reused_from = Some(hit.id);
    store.record_iteration(&other, &reuse).await.unwrap();
    let again = find("saxpy", "Test GPU", SizeSet::Smoke, "/* v2 */").await;
    assert!(again.is_none(), "a copy is not a measurement");
    // The latest measurement wins: the second run's seed measured 0.6.
    let latest = find("saxpy", "Test GPU", SizeSet::Smoke, seed_source)
        .await
        .unwrap();
    assert_eq!((latest.candidate_id, latest.score), (other_seed, Some(0.6)));
}

both_backends!(
    lifecycle,
    atomic_iterations,
    resume_round_trip,
    listing,
    idempotent_migrations,
    schema_too_new,
    text_with_nul,
    islands_and_cells,
    heartbeats_and_abandoned_calls,
    single_calls,
    cross_evaluations,
    validations,
    decisions_on_stored_ids,
    proposals_answered_once,
    measurement_cache,
);

// ------------------------------------------------------- backend-specific

#[tokio::test]
async fn corrupt_sqlite_file_is_reported_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kevo.db");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(&path, &garbage).unwrap();
    let err = Store::open(path.to_str().unwrap()).await.unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(path.to_str().unwrap()), "{msg}");
    assert!(msg.contains("not a database"), "{msg}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        garbage,
        "the file was modified"
    );
}

#[tokio::test]
async fn sqlite_database_with_a_damaged_header_keeps_its_data() {
    // A real store whose header is then overwritten: opening fails, and
    // once the header is restored every run is still there.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kevo.db");
    let store = Store::open(path.to_str().unwrap()).await.unwrap();
    let run = store.create_run(&new_run("saxpy")).await.unwrap();
    store.close().await;
    let original = std::fs::read(&path).unwrap();
    let mut damaged = original.clone();
    damaged[..16].copy_from_slice(b"definitely not!!");
    std::fs::write(&path, &damaged).unwrap();
    let err = Store::open(path.to_str().unwrap()).await.unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), damaged);
    std::fs::write(&path, &original).unwrap();
    let store = Store::open(path.to_str().unwrap()).await.unwrap();
    assert_eq!(store.run(&run).await.unwrap().task, "saxpy");
}

#[tokio::test]
async fn sqlite_path_that_is_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let err = Store::open(dir.path().to_str().unwrap()).await.unwrap_err();
    assert!(
        err.to_string().contains(dir.path().to_str().unwrap()),
        "{err}"
    );
}

#[tokio::test]
async fn sqlite_default_location_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_workspace(dir.path()).await.unwrap();
    assert_eq!(store.backend_name(), "sqlite");
    assert!(dir.path().join("kevo.db").is_file());
    let mode = db_journal_mode(&dir.path().join("kevo.db")).await;
    assert_eq!(mode, "wal");
}

#[tokio::test]
async fn a_workspace_of_the_earlier_layout_keeps_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let earlier = dir.path().join(".kevo/kevo.db");
    std::fs::create_dir_all(earlier.parent().unwrap()).unwrap();
    let store = Store::open_with(StoreOptions::new(Target::Sqlite(earlier.clone())))
        .await
        .unwrap();
    let run = store.create_run(&new_run("saxpy")).await.unwrap();
    store.close().await;
    let reopened = Store::open_workspace(dir.path()).await.unwrap();
    assert_eq!(reopened.run(&run).await.unwrap().id, run);
    assert!(!dir.path().join("kevo.db").exists(), "no second store");
}

async fn db_journal_mode(path: &std::path::Path) -> String {
    use sqlx::Connection;
    let mut c = sqlx::SqliteConnection::connect_with(
        &sqlx::sqlite::SqliteConnectOptions::new().filename(path),
    )
    .await
    .unwrap();
    sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut c)
        .await
        .unwrap()
}

#[tokio::test]
async fn postgres_down_names_the_redacted_url() {
    // Port 1 has no server: the connection is refused at once.
    let url = "postgres://postgres:hunter2@127.0.0.1:1/test";
    let started = std::time::Instant::now();
    let err = Store::open(url).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let msg = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{msg}");
    assert!(
        msg.contains("postgres://postgres:***@127.0.0.1:1/test"),
        "{msg}"
    );
    assert!(!msg.contains("hunter2"), "{msg}");
    assert!(!format!("{err:?}").contains("hunter2"));
}

#[tokio::test]
async fn postgres_missing_database_names_the_url() {
    let base = common::postgres_url();
    let url = match base.rfind('/') {
        Some(i) => format!("{}/kevo_no_such_database", &base[..i]),
        None => panic!("unexpected URL {base}"),
    };
    let err = Store::open(&url).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{msg}");
    assert!(msg.contains("kevo_no_such_database"), "{msg}");
}

#[tokio::test]
async fn unsupported_location() {
    let err = Store::open("mysql://root:pw@localhost/db")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidTarget { .. }));
    assert!(!err.to_string().contains("pw@"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_open_sqlite() {
    // Two processes starting on a fresh workspace at once both migrate.
    for _ in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kevo.db");
        let p = path.to_str().unwrap();
        let (a, b, c) = tokio::join!(Store::open(p), Store::open(p), Store::open(p));
        for s in [a, b, c] {
            let s = s.unwrap();
            assert!(s.list_runs().await.unwrap().is_empty());
            s.close().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_open_postgres() {
    for _ in 0..5 {
        let schema = common::unique_schema();
        let _guard = common::SchemaGuard {
            url: common::postgres_url(),
            schema: schema.clone(),
        };
        let open = || {
            let mut options = StoreOptions::new(Target::Postgres(common::postgres_url()));
            options.pg_schema = Some(schema.clone());
            Store::open_with(options)
        };
        let (a, b, c) = tokio::join!(open(), open(), open());
        for s in [a, b, c] {
            let s = s.unwrap();
            assert!(s.list_runs().await.unwrap().is_empty());
            s.close().await;
        }
    }
}
