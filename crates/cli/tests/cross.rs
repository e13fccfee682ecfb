//! `kevo cross` of a CUDA run onto an OpenCL device (PoCL here, NVIDIA's
//! OpenCL on a GPU machine): the seed and the winner run as translations
//! to OpenCL C, the result says so, and the translations are stored with
//! the results; a winner that cannot be translated is refused with the
//! construct and its line, and nothing is stored. The CUDA run is written
//! into the store directly, as a GPU machine would have left it.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::opencl_available;
use kevo_eval::{Evaluation, Outcome, WallTimes};
use kevo_store::{
    CandidateRef, Checkpoint, IterationRecord, NewCandidate, NewDecision, NewRun, Proposal, RunId,
    Spent, Store,
};
use kevo_tasks::SizeSet;

fn kevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
}

fn on_h100(score: f64) -> Evaluation {
    Evaluation {
        task: "saxpy".into(),
        device: "NVIDIA H100 80GB HBM3".into(),
        backend: kevo_backend::BackendName::Cuda,
        outcome: Outcome::Correct { score },
        sizes: Vec::new(),
        wall: WallTimes::default(),
        kernels: Vec::new(),
        source_sha: None,
    }
}

fn step(iteration: u32, source: &str, score: f64, parent: Option<CandidateRef>) -> IterationRecord {
    IterationRecord {
        iteration,
        proposals: vec![Proposal {
            llm_calls: Vec::new(),
            candidate: Some(NewCandidate {
                source: source.into(),
                parents: parent.into_iter().collect(),
                island: None,
                cell: None,
                descriptors: None,
                provider: Some(if iteration == 0 { "seed" } else { "replay" }.into()),
                model: None,
            }),
            evaluation: Some(on_h100(score).into()),
            decision: NewDecision {
                promoted: true,
                incumbent: Some(CandidateRef::Proposal(0)),
                island: None,
                cell: None,
                reason: if iteration == 0 { "seed" } else { "better" }.into(),
            },
        }],
        checkpoint: Checkpoint {
            incumbent: Some(CandidateRef::Proposal(0)),
            previous: parent,
            rng_state: None,
            strategy_state: None,
            spent: Spent::default(),
        },
    }
}

/// A CUDA saxpy run in workspace `ws`: the CUDA seed, then `winner`.
fn cuda_run(ws: &Path, winner: &str) -> String {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = Store::open_workspace(ws).await.unwrap();
        let run = store
            .create_run(&NewRun {
                task: "saxpy".into(),
                backend: "cuda".into(),
                device: "NVIDIA H100 80GB HBM3".into(),
                size_set: SizeSet::Smoke,
                strategy: "one_plus_one".into(),
                config: serde_json::json!({}),
                rng_state: None,
            })
            .await
            .unwrap();
        let seed_source = kevo_tasks::by_name("saxpy")
            .unwrap()
            .seed(kevo_backend::Dialect::Cuda)
            .unwrap();
        let seed = store
            .record_iteration(&run, &step(0, seed_source, 0.5, None))
            .await
            .unwrap()[0]
            .candidate
            .unwrap();
        store
            .record_iteration(&run, &step(1, winner, 0.6, Some(seed.into())))
            .await
            .unwrap();
        let RunId(id) = run;
        id
    })
}

#[test]
fn a_cuda_run_crosses_onto_opencl_as_stored_translations() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let winner = include_str!("trust/saxpy_float2.cu");
    let run = cuda_run(&ws, winner);
    let ws_s = ws.display().to_string();
    let crossed = kevo()
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .args(["cross", &run, "--backend", "opencl", "--ceilings", "20,100"])
        .args(["--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    assert!(
        crossed.status.success(),
        "{}",
        String::from_utf8_lossy(&crossed.stderr)
    );
    let c: serde_json::Value = serde_json::from_slice(&crossed.stdout).unwrap();
    assert_eq!(c["translated_from"], "cuda", "{c}");
    assert_eq!(c["backend"], "opencl", "{c}");
    for role in ["seed", "winner"] {
        assert_eq!(c[role]["outcome"]["status"], "correct", "{role}: {c}");
    }
    // Stored with the run, translations included.
    let shown = kevo()
        .args(["show", &run, "--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let cross = shown["cross"].as_array().unwrap();
    assert_eq!(cross.len(), 2, "{shown}");
    let winner_row = cross.iter().find(|r| r["role"] == "winner").unwrap();
    let translated = winner_row["translated_source"].as_str().unwrap();
    assert!(
        translated.contains("__kernel void saxpy(__global const float* restrict x"),
        "{translated}"
    );
    assert!(
        translated.contains("((__global const float2*)(x))[i]"),
        "{translated}"
    );
    assert_eq!(
        translated,
        kevo_translate::cuda_to_opencl(winner).unwrap(),
        "the stored text is what ran"
    );
    let text = kevo()
        .args(["show", &run, "--workspace", &ws_s])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("winner on "), "{text}");
    assert!(text.contains("translated to OpenCL C"), "{text}");
}

#[test]
fn a_cuda_winner_without_a_translation_is_refused_and_nothing_is_stored() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let run = cuda_run(&ws, include_str!("trust/saxpy_warp_shuffle.cu"));
    let ws_s = ws.display().to_string();
    let crossed = kevo()
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .args(["cross", &run, "--backend", "opencl", "--ceilings", "20,100"])
        .args(["--workspace", &ws_s])
        .output()
        .unwrap();
    assert!(!crossed.status.success());
    let err = String::from_utf8_lossy(&crossed.stderr);
    assert!(
        err.contains("cannot run through OpenCL") && err.contains("line 5: `__shfl_sync`"),
        "{err}"
    );
    let shown = kevo()
        .args(["show", &run, "--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["cross"].as_array().unwrap().len(), 0, "{shown}");
}

/// `kevo translate` prints (or writes) the translation `kevo cross` runs,
/// and refuses what it cannot translate with the line and the construct.
#[test]
fn kevo_translate_writes_the_translation_or_names_what_it_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.path().join("saxpy.cl");
    let done = kevo()
        .arg("translate")
        .arg(root.join("tests/trust/saxpy_float2.cu"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        kevo_translate::cuda_to_opencl(include_str!("trust/saxpy_float2.cu")).unwrap()
    );
    let refused = kevo()
        .arg("translate")
        .arg(root.join("tests/trust/saxpy_warp_shuffle.cu"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(refused.stdout.is_empty());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("saxpy_warp_shuffle.cu cannot be translated to OpenCL C: line 5: `__shfl_sync` has no OpenCL C 1.2 translation: warp shuffles"),
        "{err}"
    );
}
