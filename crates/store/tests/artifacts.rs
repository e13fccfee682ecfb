//! Run directories: names, contents, and atomic replacement.

mod common;

use kevo_store::RunId;
use kevo_store::artifacts::{RunDir, write_atomic};
use serde_json::json;

#[test]
fn writes_the_metal_sci_layout() {
    let ws = tempfile::tempdir().unwrap();
    let run = RunId::from("saxpy-20260101-120000-abcdef");
    let dir = RunDir::create(ws.path(), &run, ".cu").unwrap();
    assert_eq!(dir.path(), ws.path().join("runs").join(run.as_str()));

    let seed_eval = common::correct("saxpy", 0.5);
    dir.write_seed("__global__ void saxpy() {}").unwrap();
    dir.write_result(0, &seed_eval).unwrap();
    dir.write_prompt(1, "SYSTEM TEXT", "USER TEXT").unwrap();
    dir.write_response(1, "RESPONSE").unwrap();
    dir.write_reasoning(1, "REASONING").unwrap();
    dir.write_candidate(1, "CANDIDATE").unwrap();
    dir.write_result(1, &common::wrong_nan("saxpy")).unwrap();
    dir.write_candidate(12, "TWELVE").unwrap();
    dir.write_best("BEST", &seed_eval).unwrap();
    dir.write_history(&json!([{"iteration": 0, "score": 0.5}]))
        .unwrap();
    dir.write_summary(&json!({"task": "saxpy", "best_score": 0.5}))
        .unwrap();

    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "00_result.json",
            "00_seed.cu",
            "01_candidate.cu",
            "01_prompt.md",
            "01_reasoning.md",
            "01_response.md",
            "01_result.json",
            "12_candidate.cu",
            "best.cu",
            "best_result.json",
            "history.json",
            "summary.json",
        ],
        "no temporary files are left behind"
    );
    let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
    assert_eq!(read("01_response.md"), "RESPONSE");
    let prompt = read("01_prompt.md");
    assert!(prompt.contains("SYSTEM TEXT") && prompt.contains("USER TEXT"));
    assert!(prompt.find("SYSTEM TEXT") < prompt.find("USER TEXT"));
    let result: kevo_eval::Evaluation = serde_json::from_str(&read("best_result.json")).unwrap();
    assert_eq!(result, seed_eval);
    let wrong: serde_json::Value = serde_json::from_str(&read("01_result.json")).unwrap();
    assert_eq!(wrong["outcome"]["status"], "wrong_result");
    let summary: serde_json::Value = serde_json::from_str(&read("summary.json")).unwrap();
    assert_eq!(summary["best_score"], 0.5);
}

#[test]
fn rewrites_replace_whole_files() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("best.cl");
    write_atomic(&path, &vec![b'a'; 1 << 20]).unwrap();
    write_atomic(&path, b"short").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"short");
    assert_eq!(std::fs::read_dir(ws.path()).unwrap().count(), 1);
}

#[test]
fn refuses_bad_names() {
    let ws = tempfile::tempdir().unwrap();
    assert!(RunDir::create(ws.path(), &RunId::from("../escape"), "cu").is_err());
    assert!(RunDir::create(ws.path(), &RunId::from("ok"), "c/u").is_err());
    assert!(RunDir::create(ws.path(), &RunId::from("ok"), "").is_err());
    let err = write_atomic(&ws.path().join("missing/dir/file"), b"x").unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}
