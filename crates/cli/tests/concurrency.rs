//! `kevo evolve --concurrency K` on PoCL with a `cmd:` proposer that sleeps
//! and logs every call: budgets hold exactly (no call issued past one,
//! every call that was out recorded), and a run killed with SIGKILL while
//! calls are in flight resumes with every iteration stored once and no
//! candidate evaluated twice.

use crate::common;

use common::{kill_after_iteration, opencl_available, resume_to_end};
use std::path::Path;
use std::process::Command;

fn kevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
}

fn calls_made(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .count()
}

fn args(ws: &str, llm: &str, extra: &[&str]) -> Vec<String> {
    let rest = [
        "--llm",
        llm,
        "--workspace",
        ws,
        "--promotion",
        "strict",
        "--json",
    ];
    let mut a: Vec<String> = common::EVOLVE_SAXPY_SMOKE
        .iter()
        .chain(&rest)
        .map(|s| s.to_string())
        .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn cache_env<'a>(cmd: &'a mut Command, dir: &Path) -> &'a mut Command {
    cmd.env("KEVO_CACHE_DIR", dir.join("cache"))
}

/// `kevo` with `args` run to the end; its output, or a failure with its
/// stderr.
fn succeed(args: Vec<String>, dir: &Path) -> std::process::Output {
    let out = cache_env(kevo().args(args), dir).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn run_of(ws: &str) -> String {
    let out = kevo()
        .args(["runs", "--workspace", ws, "--json"])
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    runs[0]["id"].as_str().unwrap().to_string()
}

/// Per stored run: the iterations of its history, the proposal calls
/// stored, and for each candidate after the seed how many fresh
/// in-distribution measurements it got.
struct Stored {
    iterations: Vec<u32>,
    calls: usize,
    abandoned: usize,
    fresh_measurements: Vec<usize>,
    summary: serde_json::Value,
}

fn stored(ws: &str, run: &str) -> Stored {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = kevo_store::Store::open_workspace(Path::new(ws))
            .await
            .unwrap();
        let id = kevo_store::RunId(run.to_string());
        let history = store.history(&id).await.unwrap();
        let calls = store.llm_calls(&id).await.unwrap();
        let mut fresh = Vec::new();
        for h in history.iter().filter(|h| h.iteration > 0) {
            let c = h.candidate_id.expect("every proposal gave a candidate");
            let evs = store.evaluations_of(c).await.unwrap();
            fresh.push(
                evs.iter()
                    .filter(|e| {
                        e.kind == kevo_store::EvaluationKind::InDistribution
                            && e.reused_from.is_none()
                    })
                    .count(),
            );
        }
        Stored {
            iterations: history.iter().map(|h| h.iteration).collect(),
            calls: calls
                .iter()
                .filter(|c| c.call.purpose == "propose" && !kevo_evolve::is_abandoned(c))
                .count(),
            abandoned: calls
                .iter()
                .filter(|c| kevo_evolve::is_abandoned(c))
                .count(),
            fresh_measurements: fresh,
            summary: store.run(&id).await.unwrap().summary.unwrap_or_default(),
        }
    })
}

#[test]
fn budgets_hold_under_concurrency() {
    if !opencl_available() {
        return;
    }
    // An iteration budget: exactly 6 calls although 4 may be out at once.
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws").display().to_string();
    let (llm, log) = common::saxpy_agent(dir.path(), 0.5);
    let out = succeed(
        args(&ws, &llm, &["--iterations", "6", "--concurrency", "4"]),
        dir.path(),
    );
    let run = run_of(&ws);
    let s = stored(&ws, &run);
    assert_eq!(s.iterations, (0..=6).collect::<Vec<u32>>());
    assert_eq!(calls_made(&log), 6, "no call past the budget");
    assert_eq!(s.calls, 6, "every call stored");
    assert_eq!(s.summary["iterations"], 6);
    // Several calls were out at once: some iteration event saw others in
    // flight or answered and waiting for the device, never more than the
    // 3 slots besides its own.
    let out_at_once: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "iteration")
        .map(|e| e["in_flight"].as_u64().unwrap() + e["queued"].as_u64().unwrap())
        .collect();
    assert!(
        out_at_once.iter().any(|&n| n >= 2) && out_at_once.iter().all(|&n| n <= 3),
        "{out_at_once:?}"
    );

    // A wall-time budget: once it passes no call is issued, and the calls
    // already out are waited for and stored; none is lost or abandoned.
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws").display().to_string();
    let (llm, log) = common::saxpy_agent(dir.path(), 1.0);
    succeed(
        args(
            &ws,
            &llm,
            &[
                "--iterations",
                "1000",
                "--concurrency",
                "3",
                "--max-wall-s",
                "4",
            ],
        ),
        dir.path(),
    );
    let s = stored(&ws, &run_of(&ws));
    let made = calls_made(&log);
    assert!((3..1000).contains(&made), "{made} calls");
    assert_eq!(s.calls, made, "every call that went out is stored");
    assert_eq!(s.abandoned, 0);
    assert_eq!(s.iterations.len(), made + 1, "one iteration per call");
    assert!(
        s.summary["stop_reason"]
            .as_str()
            .is_some_and(|r| r.contains("wall-time limit")),
        "{}",
        s.summary
    );
}

#[test]
fn a_concurrent_run_killed_with_sigkill_resumes_with_nothing_lost_or_measured_twice() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws").display().to_string();
    let (llm, log) = common::saxpy_agent(dir.path(), 0.4);
    let a = args(&ws, &llm, &["--iterations", "10", "--concurrency", "3"]);
    let run = kill_after_iteration(cache_env(kevo().args(&a), dir.path()), 3);
    let before = stored(&ws, &run);
    let done = *before.iterations.last().unwrap();
    assert!((3..10).contains(&done), "killed mid-run after {done}");
    assert_eq!(
        before.iterations,
        (0..=done).collect::<Vec<u32>>(),
        "stored iterations are dense"
    );

    resume_to_end(&ws, &run, dir.path());
    let after = stored(&ws, &run);
    assert_eq!(
        after.iterations,
        (0..=10).collect::<Vec<u32>>(),
        "every iteration exactly once"
    );
    assert!(
        after.fresh_measurements.iter().all(|&n| n == 1),
        "each candidate measured exactly once: {:?}",
        after.fresh_measurements
    );
    assert_eq!(after.calls, 10, "one stored call per iteration");
    // The calls in flight at the kill were lost with the process and
    // issued again by the resumed run.
    assert!(calls_made(&log) >= 10, "{}", calls_made(&log));
    assert_eq!(after.summary["iterations"], 10);
}
