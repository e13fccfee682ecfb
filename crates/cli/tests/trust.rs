//! Trust in the winner, end to end on PoCL with a replayed proposer: the
//! held-out verdict names a winner that is wrong only at the held-out size
//! "overfit" in the summary, `kevo show` and `kevo runs`, and no prompt
//! names that size; `--sanitize-winner` off CUDA says the winner was not
//! checked.

mod common;

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

#[test]
fn a_winner_wrong_only_at_the_held_out_size_is_called_overfit() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let cheat = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/trust/wrong_at_128k.cl");
    let llm = common::replay_of(dir.path(), &[cheat]);
    let out = kevo()
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .args(common::EVOLVE_SAXPY_SMOKE)
        .args(["--ceilings", "20,100", "--llm", &llm, "--iterations", "1"])
        .args(["--sanitize-winner", "memcheck,racecheck"])
        .arg("--seed-kernel")
        .arg(root().join("examples/replay/opencl/start_slow.cl"))
        .args(["--json", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out.stdout);
    let finished = events.iter().find(|e| e["event"] == "finished").unwrap();
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
