//! Trust in the winner, end to end on PoCL with a replayed proposer: the
//! held-out verdict names a winner that is wrong only at the held-out size
//! "overfit" in the summary, `kevo show` and `kevo runs`, and no prompt
//! names that size; `--sanitize-winner` off CUDA says the winner was not
//! checked; with `--validate`, a candidate wrong only at a validation size
//! is never kept, and the proposer learns only that it fails on unseen
//! sizes.

use crate::common;

use common::opencl_available;
use std::path::{Path, PathBuf};
use std::process::Command;

fn kevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn json_lines(bytes: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `kevo evolve` of saxpy on PoCL from the slow start, the proposer
/// replaying `kernels` (one per iteration), in workspace `dir/ws`; its
/// `finished` event.
fn evolve_from_slow_start(dir: &Path, kernels: &[&Path], extra: &[&str]) -> serde_json::Value {
    let llm = common::replay_of(dir, kernels);
    let out = kevo()
        .env("KEVO_CACHE_DIR", dir.join("cache"))
        .args(common::EVOLVE_SAXPY_SMOKE)
        .args(["--ceilings", "20,100", "--llm", &llm])
        .args(["--iterations", &kernels.len().to_string()])
        .args(extra)
        .arg("--seed-kernel")
        .arg(root().join("examples/replay/opencl/start_slow.cl"))
        .args(["--json", "--workspace"])
        .arg(dir.join("ws"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out.stdout)
        .into_iter()
        .find(|e| e["event"] == "finished")
        .unwrap()
}

#[test]
fn a_winner_wrong_only_at_the_held_out_size_is_called_overfit() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let cheat = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/trust/wrong_at_128k.cl");
    let finished = evolve_from_slow_start(
        dir.path(),
        &[&cheat],
        &["--sanitize-winner", "memcheck,racecheck"],
    );
    // It beat the slow start in-distribution, so it is the winner...
    assert!(finished["speedup"].as_f64().unwrap() > 1.5, "{finished}");
    // ... and the held-out size shows what it is.
    let held = &finished["held_out"];
    assert_eq!(held["verdict"], "overfit", "{held}");
    assert!(
        held["verdict_reason"].as_str().unwrap().contains("128K"),
        "{held}"
    );
    // compute-sanitizer is CUDA's: on PoCL the winner is not checked, and
    // the summary says so rather than calling it safe.
    let safety = &finished["safety"];
    assert_eq!(safety["verdict"], "not checked", "{safety}");
    assert_eq!(safety["tools"], "memcheck,racecheck");
    let run = finished["run"].as_str().unwrap();
    let ws_s = ws.display().to_string();
    let listed = kevo()
        .args(["runs", "--workspace", &ws_s])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("overfit"), "{listed}");
    let listed_json = kevo()
        .args(["runs", "--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&listed_json.stdout).unwrap();
    assert_eq!(runs[0]["held_out_verdict"], "overfit");
    let shown = kevo()
        .args(["show", run, "--workspace", &ws_s])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("held-out verdict: overfit"), "{shown}");
    assert!(
        shown.contains("winner under compute-sanitizer: not checked"),
        "{shown}"
    );
    // `kevo cross` evaluates the winner and the seed together on a device
    // (here PoCL again) and stores them with the run.
    let crossed = kevo()
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .args(["cross", run, "--backend", "opencl", "--ceilings", "20,100"])
        .args(["--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    assert!(
        crossed.status.success(),
        "{}",
        String::from_utf8_lossy(&crossed.stderr)
    );
    let c: serde_json::Value = serde_json::from_slice(&crossed.stdout).unwrap();
    assert!(c["speedup"].as_f64().unwrap() > 1.5, "{c}");
    let shown = kevo()
        .args(["show", run, "--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let roles: Vec<&str> = shown["cross"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["seed", "winner"]);
    let missing = kevo()
        .args(["cross", "no-such-run", "--workspace", &ws_s])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("no-such-run"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
    // The held-out size chose nothing and reached no prompt.
    for entry in std::fs::read_dir(ws.join("runs").join(run)).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with("_prompt.md") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(!text.contains("128K"), "{}", path.display());
        }
    }
}

/// A kernel that drops the tail (wrong only at saxpy's smoke validation
/// size, N = 100003) beats the slow start in-distribution: without
/// `--validate` it wins; with it, it is rejected, never kept, and the next
/// prompt says only that it fails on unseen sizes; a correct fast kernel
/// after it passes the gate and wins.
#[test]
fn a_candidate_wrong_only_at_a_validation_size_is_never_kept() {
    if !opencl_available() {
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cheat = here.join("tests/trust/drops_the_tail.cl");
    let honest = root().join("examples/replay/opencl/4_faster.cl");
    // Without the gate the tail-dropping kernel is the winner.
    let plain = tempfile::tempdir().unwrap();
    let finished = evolve_from_slow_start(plain.path(), &[&cheat], &["--promotion", "strict"]);
    assert!(finished["speedup"].as_f64().unwrap() > 1.5, "{finished}");
    assert!(finished.get("validation").is_none(), "{finished}");

    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let finished = evolve_from_slow_start(dir.path(), &[&cheat, &honest], &["--validate"]);
    let run = finished["run"].as_str().unwrap();
    let gate = &finished["validation"];
    assert_eq!(gate["checked"], 2, "{gate}");
    assert_eq!(gate["rejected"], 1, "{gate}");
    // The honest kernel won; the cheat was never kept.
    assert!(finished["speedup"].as_f64().unwrap() > 1.5, "{finished}");
    assert_eq!(finished["best_iteration"], 2, "{finished}");
    let ws_s = ws.display().to_string();
    let shown = kevo()
        .args(["show", run, "--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let history = shown["history"].as_array().unwrap();
    let first = history.iter().find(|h| h["iteration"] == 1).unwrap();
    assert_eq!(first["promoted"], false, "{first}");
    assert!(
        first["reason"]
            .as_str()
            .unwrap()
            .starts_with("rejected by validation: at a validation size: wrong"),
        "{first}"
    );
    let validations = shown["validations"].as_array().unwrap();
    let verdicts: Vec<(u64, bool)> = validations
        .iter()
        .map(|v| {
            (
                v["iteration"].as_u64().unwrap(),
                v["passed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(verdicts, [(0, true), (1, false), (2, true)]);
    assert!(
        validations[1]["reason"]
            .as_str()
            .unwrap()
            .contains("100003"),
        "{}",
        validations[1]
    );
    let text = kevo()
        .args(["show", run, "--workspace", &ws_s])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("rejected by validation"), "{text}");
    // The proposer heard "fails on unseen sizes" and never the size.
    let mut prompts = Vec::new();
    for entry in std::fs::read_dir(ws.join("runs").join(run)).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with("_prompt.md") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(!text.contains("100003"), "{}", path.display());
            prompts.push((path, text));
        }
    }
    prompts.sort();
    assert_eq!(prompts.len(), 2);
    assert!(!prompts[0].1.contains("fails on unseen sizes"));
    assert!(
        prompts[1].1.contains("fails on unseen sizes"),
        "{}",
        prompts[1].1
    );
}

#[path = "../../worker/tests/common/tables.rs"]
mod tables;

/// A kernel that carries the answers for the inputs of nbody's public
/// seeds (every smoke size, the timed seed and the four verification
/// seeds inputs were drawn from before they came from a secret) and does
/// a third of the force loop: offered by the proposer, it is evaluated as
/// wrong (its tables match no input of the run) and the seed is kept.
#[test]
fn answers_tabulated_for_public_inputs_are_never_promoted() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sizes = kevo_tasks::by_name("nbody")
        .unwrap()
        .sizes(kevo_tasks::SizeSet::Smoke)
        .in_distribution;
    let cheat = dir.path().join("tabulated.cl");
    std::fs::write(&cheat, tables::tabulating_kernel("nbody", false, &sizes)).unwrap();
    let llm = common::replay_of(dir.path(), &[&cheat]);
    let out = kevo()
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .args(["evolve", "--task", "nbody"])
        .args(common::OPENCL_SMOKE)
        .args(["--ceilings", "20,100", "--llm", &llm, "--iterations", "1"])
        .args(["--json", "--workspace"])
        .arg(dir.path().join("ws"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out.stdout);
    let finished = events.iter().find(|e| e["event"] == "finished").unwrap();
    assert_eq!(finished["best_iteration"], 0, "{finished}");
    let run = finished["run"].as_str().unwrap();
    let shown = kevo()
        .args(["show", run, "--json", "--workspace"])
        .arg(dir.path().join("ws"))
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let history = shown["history"].as_array().unwrap();
    let offered = history.iter().find(|h| h["iteration"] == 1).unwrap();
    assert_eq!(offered["promoted"], false, "{offered}");
    assert_eq!(offered["outcome_kind"], "wrong_result", "{offered}");
}
