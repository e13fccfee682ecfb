//! kill -9 in the middle of writing: a child process records iterations in
//! a loop and is killed at an arbitrary moment, several times over. After
//! each kill the store must hold only whole iterations, everything the child
//! reported as committed, and a resume must continue right after the last
//! one without repeating any.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Kind, TestDb, correct};
use kevo_store::*;
use kevo_tasks::SizeSet;
use serde_json::json;

const TARGET: &str = "KEVO_STORE_CRASH_TARGET";
const SCHEMA: &str = "KEVO_STORE_CRASH_SCHEMA";
const RUN: &str = "KEVO_STORE_CRASH_RUN";

fn record(iteration: u32) -> IterationRecord {
    // Large enough that a transaction takes a while, so kills land inside.
    let source = format!(
        "/* iteration {iteration} */\n{}",
        "// padding\n".repeat(20_000)
    );
    IterationRecord {
        iteration,
        proposals: vec![Proposal {
            llm_calls: vec![NewLlmCall {
                purpose: "propose".into(),
                provider: "openai".into(),
                model: "gpt-test".into(),
                prompt_system: "system".into(),
                prompt_user: source.clone(),
                response: Some(source.clone()),
                reasoning: None,
                input_tokens: Some(10),
                output_tokens: Some(10),
                reasoning_tokens: None,
                cost_usd: Some(0.01),
                latency_s: 1.0,
                error: None,
                transcript: None,
            }],
            candidate: Some(NewCandidate {
                source,
                parents: vec![],
                island: None,
                cell: None,
                descriptors: None,
                provider: Some("openai".into()),
                model: Some("gpt-test".into()),
            }),
            evaluation: Some(correct("saxpy", 0.5).into()),
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
            previous: Some(CandidateRef::Proposal(0)),
            rng_state: Some(json!({"step": iteration})),
            strategy_state: None,
            spent: Spent {
                cost_usd: 0.01 * f64::from(iteration + 1),
                ..Spent::default()
            },
        },
    }
}

/// The writer. Does nothing when run as an ordinary test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_writer_child() {
    let Ok(target) = std::env::var(TARGET) else {
        return;
    };
    let mut options = StoreOptions::new(Target::parse(&target).unwrap());
    options.pg_schema = std::env::var(SCHEMA).ok();
    let store = Store::open_with(options).await.unwrap();
    let run = RunId(std::env::var(RUN).unwrap());
    let (_, checkpoint) = store.resume_run(&run).await.unwrap();
    let mut next = checkpoint.map(|c| c.iteration + 1).unwrap_or(0);
    loop {
        store.record_iteration(&run, &record(next)).await.unwrap();
        println!("committed {next}");
        next += 1;
    }
}

/// The iteration number of a "committed N" line; libtest may print its own
/// text before it on the same line.
fn committed(line: &str) -> Option<u32> {
    let at = line.find("committed ")?;
    Some(line[at + "committed ".len()..].trim().parse().unwrap())
}

async fn kill_9(db: &TestDb) {
    let run = db
        .store
        .create_run(&NewRun {
            task: "saxpy".into(),
            backend: "opencl".into(),
            device: "Test GPU".into(),
            size_set: SizeSet::Smoke,
            strategy: "one_plus_one".into(),
            config: json!({}),
            rng_state: None,
        })
        .await
        .unwrap();
    let target = match &db.options.target {
        Target::Sqlite(p) => p.display().to_string(),
        Target::Postgres(url) => url.clone(),
    };
    let mut last_reported: Option<u32> = None;
    for round in 0..4u64 {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "crash_writer_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TARGET, &target)
        .env(RUN, run.as_str())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        if let Some(schema) = &db.options.pg_schema {
            cmd.env(SCHEMA, schema);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = 0;
        while seen < 3 {
            let line = lines
                .next()
                .expect("the writer stopped before committing")
                .unwrap();
            if let Some(n) = committed(&line) {
                if let Some(prev) = last_reported {
                    assert_eq!(n, prev + 1, "an iteration was skipped or repeated");
                }
                last_reported = Some(n);
                seen += 1;
            }
        }
        // Kill at a different point of the next transaction each round.
        std::thread::sleep(Duration::from_micros(700 * round + 150));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // A commit the child sent just before dying may still be finishing
        // on the Postgres server; let it land (or not) before looking.
        if db.kind == Kind::Postgres {
            std::thread::sleep(Duration::from_millis(300));
        }
        // Lines printed before the kill but not read yet.
        for line in lines.map_while(Result::ok) {
            if let Some(n) = committed(&line) {
                last_reported = Some(n);
            }
        }

        let counts = db
            .scalars(&[
                "SELECT COUNT(*) FROM steps",
                "SELECT MAX(iteration) FROM steps",
                "SELECT COUNT(*) FROM candidates",
                "SELECT COUNT(*) FROM evaluations",
                "SELECT COUNT(*) FROM decisions",
                "SELECT COUNT(*) FROM llm_calls",
                "SELECT COUNT(DISTINCT source_sha256) FROM candidates",
            ])
            .await;
        let (steps, last) = (counts[0], counts[1]);
        assert_eq!(last, steps - 1, "steps are not contiguous");
        assert!(
            last >= i64::from(last_reported.unwrap()),
            "a reported commit is missing"
        );
        for (table, n) in ["candidates", "evaluations", "decisions", "llm_calls"]
            .iter()
            .zip(&counts[2..6])
        {
            assert_eq!(*n, steps, "{table} has rows of a partial iteration");
        }
        assert_eq!(counts[6], steps, "a candidate was recorded twice");
        // The next child resumes from what is stored, which may be one past
        // what was reported (committed, killed before printing).
        last_reported = Some(u32::try_from(last).unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_sqlite() {
    let db = TestDb::new(Kind::Sqlite).await;
    kill_9(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_postgres() {
    let db = TestDb::new(Kind::Postgres).await;
    kill_9(&db).await;
}
