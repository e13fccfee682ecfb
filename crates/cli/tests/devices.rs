//! `--devices`: one evaluation worker per local device, the answers of an
//! iteration evaluated on them at once. PoCL has one device, which two
//! workers can share (each is its own process); devices of different
//! models are refused.

use crate::common;

use common::opencl_available;
use std::process::Command;

#[test]
fn two_local_workers_evaluate_an_iterations_answers() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let (agent, calls) = common::saxpy_agent(dir.path(), 0.0);
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(common::EVOLVE_SAXPY_SMOKE)
        .args(["--llm", &agent, "--iterations", "2"])
        .args(["--candidates-per-iteration", "4", "--devices", "0,0"])
        .args(["--promotion", "strict", "--final-remeasure", "0", "--json"])
        .arg("--workspace")
        .arg(&ws)
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(calls).unwrap().lines().count(),
        8,
        "four answers per iteration"
    );
    // Every answer was evaluated: eight candidates besides the seed, each
    // with its own evaluation (the agent's variants all differ).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = kevo_store::Store::open_workspace(&ws).await.unwrap();
        let runs = store.list_runs().await.unwrap();
        let history = store.history(&runs[0].id).await.unwrap();
        let candidates: Vec<_> = history.iter().filter_map(|h| h.candidate_id).collect();
        assert_eq!(candidates.len(), 9, "{history:?}");
        for c in candidates {
            let e: Vec<_> = store
                .evaluations_of(c)
                .await
                .unwrap()
                .into_iter()
                .filter(|e| e.kind == kevo_store::EvaluationKind::InDistribution)
                .collect();
            assert_eq!(e.len(), 1, "candidate {}", c.0);
            assert!(e[0].evaluation().unwrap().outcome.score().is_some());
        }
        // The provenance names every worker's device and ceilings.
        let info = store.run(&runs[0].id).await.unwrap();
        let workers = info.config["provenance"]["workers"].as_array().unwrap();
        assert_eq!(workers.len(), 2, "{}", info.config["provenance"]);
        assert!(workers[1]["ceilings"]["bandwidth_gbs"].as_f64().unwrap() > 0.0);
    });
    // The stored settings name the devices, so a resume uses them too.
    let config = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["runs", "--json", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&config.stdout).unwrap();
    let run = runs[0]["id"].as_str().unwrap();
    let shown = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["show", run, "--config", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    let settings: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(
        settings["device"]["devices"],
        toml::Value::Array(vec!["0".into(), "0".into()]),
        "{text}"
    );
}
