//! `--record FILE` then `--llm replay:FILE` on PoCL: the replayed run with
//! the same settings proposes the same candidates in the same order, with
//! the recorded failure failing again in its place. What can still differ
//! is what the device measures: timing noise can change a promotion, and
//! with it a later prompt's incumbent; the answers, sources and outcomes
//! of a `cmd:` run whose answers do not depend on the prompt do not.

use crate::common;

use common::{EVOLVE_SAXPY_SMOKE, opencl_available};
use std::path::Path;
use std::process::Command;

fn evolve(ws: &Path, llm: &str, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(EVOLVE_SAXPY_SMOKE)
        .args([
            "--iterations",
            "5",
            "--promotion",
            "strict",
            "--final-remeasure",
            "0",
            "--llm-retries",
            "0",
            "--llm",
            llm,
            "--workspace",
        ])
        .arg(ws)
        .args(extra)
        .current_dir(ws.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<_> = std::fs::read_dir(ws.join("runs")).unwrap().collect();
    assert_eq!(runs.len(), 1);
    runs[0].as_ref().unwrap().file_name().into_string().unwrap()
}

/// Per iteration: outcome, response, candidate source, and the decision's
/// reason (which holds measured scores, so it is not compared).
fn iterations(ws: &Path, run: &str) -> Vec<(String, String, String, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["show", run, "--json", "--workspace"])
        .arg(ws)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dir = ws.join("runs").join(run);
    let read = |name: String| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    v["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["iteration"].as_u64().unwrap() > 0)
        .map(|h| {
            let k = h["iteration"].as_u64().unwrap();
            (
                h["outcome_kind"].to_string(),
                read(format!("{k:02}_response.md")),
                read(format!("{k:02}_candidate.cl")),
                h["reason"].to_string(),
            )
        })
        .collect()
}

#[test]
fn a_recorded_run_replays_the_same_candidates_in_order() {
    if !opencl_available() {
        eprintln!("skipped: no OpenCL device");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    // Answers by call: a new kernel, a failed call, no code, a kernel
    // that does not compile, another new kernel.
    let agent = root.path().join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            r#"#!/bin/sh
cat >/dev/null
c='{dir}/count'
n=$(( $(cat "$c" 2>/dev/null || echo 0) + 1 ))
echo $n > "$c"
case $n in
2) echo "out of quota" >&2; exit 3 ;;
3) echo "I would rather not." ;;
4) printf 'Typo.\n```opencl\n__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {{ y[0] = }}\n```\n' ;;
*) printf 'Variant %s.\n```opencl\n__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {{\n    uint i = get_global_id(0);\n    if (i >= N) return;\n    y[i] = fma(a, x[i], y[i]) + 0.0f * (float)%s;\n}}\n```\n' $n $n ;;
esac
"#,
            dir = root.path().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();

    let (recorded_ws, replayed_ws) = (root.path().join("a"), root.path().join("b"));
    // A relative path: stored absolute, against the directory kevo ran in.
    let recording = root.path().join("run.jsonl");
    let run = evolve(
        &recorded_ws,
        &format!("cmd:{}", agent.display()),
        &["--record", "run.jsonl"],
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&recording)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "every call, the failed one included");
    assert!(
        lines[1]["error"].as_str().unwrap().contains("out of quota"),
        "{}",
        lines[1]
    );
    assert!(
        lines
            .iter()
            .all(|l| l["kevo_replay"] == 2 && l["key"].is_string())
    );
    assert!(lines[0]["completion"]["latency_ms"].is_number());

    let replayed = evolve(
        &replayed_ws,
        &format!("replay:{}", recording.display()),
        &[],
    );
    let (a, b) = (
        iterations(&recorded_ws, &run),
        iterations(&replayed_ws, &replayed),
    );
    assert_eq!(a.len(), 5);
    let outcomes: Vec<&str> = a.iter().map(|i| i.0.as_str()).collect();
    assert_eq!(
        outcomes,
        [
            "\"correct\"",
            "null",
            "null",
            "\"compile_error\"",
            "\"correct\""
        ],
        "{a:?}"
    );
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x.0, y.0, "iteration {}: the outcome", k + 1);
        assert_eq!(x.1, y.1, "iteration {}: the response", k + 1);
        assert_eq!(x.2, y.2, "iteration {}: the candidate", k + 1);
    }
    // Provenance: the build and the device the run was made with.
    let shown = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["show", &run, "--workspace"])
        .arg(&recorded_ws)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(&format!("made with: kevo {}", env!("CARGO_PKG_VERSION")))
            && shown.contains("(commit ")
            && shown.contains("; task saxpy (definition ")
            && shown.contains("ceilings")
            && shown.contains("; seeds ensemble 1801811567, inputs_secret ")
            && shown.contains(", task_seed "),
        "{shown}"
    );
    // The failed call fails again, saying it was recorded.
    assert!(
        a[1].3.contains("out of quota")
            && b[1].3.contains("recorded failure")
            && b[1].3.contains("out of quota"),
        "{:?} {:?}",
        a[1],
        b[1]
    );
}

#[test]
fn version_names_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let commit = text
        .trim()
        .strip_prefix(&format!("kevo {} (commit ", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{text}"
    );
}
