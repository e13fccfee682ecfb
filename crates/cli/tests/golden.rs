//! The golden searches: recorded runs on a device whose clock is fixed
//! (`KEVO_FIXED_DEVICE_TIMES=1`: PoCL computes every output, each launch
//! reports `factor x (2 us + 0.5 ns per thread)`, the factor written in
//! the kernel's source as `kevo-fixed-time: F`), so every median, ratio,
//! promotion, archive and final pick is the same on every machine. Each
//! run's history, decisions, re-measurements, held-out verdict and last
//! checkpoint are compared with the file of the same name under
//! tests/golden/. A change that alters a search's behaviour fails here;
//! one that means to (a new decision rule, a reworded reason) rewrites the
//! files with `KEVO_GOLDEN_UPDATE=1` and shows the difference in its diff.
//!
//! The same eight answers drive (1+1) under the strict and the
//! noise-aware rule, MAP-Elites, islands, and an ask/tell run.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{OPENCL_SMOKE, opencl_available, succeeded};
use kevo_store::{CandidateId, RunId, Store};
use serde_json::{Value, json};

/// A kernel's body inside saxpy's signature, with its fixed-time factor.
fn kernel(factor: &str, body: &str) -> String {
    format!(
        "// kevo-fixed-time: {factor}\n__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {{\n    uint i = get_global_id(0);\n    if (i >= N) return;\n{body}\n}}"
    )
}

/// The eight answers, in order: each a reason to decide something.
fn answers() -> Vec<(&'static str, String)> {
    vec![
        // Twice as fast as the seed: promoted.
        (
            "fma, twice as fast",
            kernel("0.5", "    y[i] = fma(a, x[i], y[i]);"),
        ),
        ("a typo", kernel("0.4", "    y[i] = a * x[i] + y[i]")),
        // Slower than the incumbent: kept out.
        (
            "mad, slower",
            kernel("0.55", "    y[i] = mad(a, x[i], y[i]);"),
        ),
        ("forgets y", kernel("0.1", "    y[i] = a * x[i];")),
        // Twice as fast again: promoted.
        (
            "a register, four times the seed",
            kernel("0.25", "    float xi = x[i];\n    y[i] = a * xi + y[i];"),
        ),
        // 4% slower than that: not better.
        (
            "operands swapped",
            kernel("0.26", "    y[i] = y[i] + x[i] * a;"),
        ),
        // The fifth answer again, indented further: a duplicate.
        (
            "the register again",
            kernel(
                "0.25",
                "        float xi = x[i];\n        y[i] = a * xi + y[i];",
            ),
        ),
        // Faster than any ceiling measured on the fixed clock: suspicious.
        (
            "impossibly fast",
            kernel("0.0001", "    y[i] = y[i] + a * x[i];"),
        ),
    ]
}

fn response(note: &str, source: &str) -> String {
    format!("{note}.\n\n```opencl\n{source}\n```\n")
}

/// The answers as an ordered replay recording.
fn replay_file(dir: &Path) -> PathBuf {
    let path = dir.join("answers.jsonl");
    let lines: Vec<String> = answers()
        .iter()
        .enumerate()
        .map(|(k, (note, source))| {
            json!({
                "kevo_replay": 1,
                "key": "",
                "request": {"system": "", "user": format!("golden proposal {}", k + 1)},
                "completion": {
                    "text": response(note, source),
                    "usage": {"input_tokens": 0, "output_tokens": 1},
                    "cost_usd": 0.0,
                    "latency_ms": 0,
                    "model": "golden",
                    "provider": "replay",
                    "finish_reason": "stop"
                }
            })
            .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// kevo on the fixed clock, with a cache of its own.
fn kevo(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(args)
        .arg("--workspace")
        .arg(dir.join("ws"))
        .env("KEVO_FIXED_DEVICE_TIMES", "1")
        .env("KEVO_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap()
}

/// `kevo evolve` on saxpy at the smoke sizes with `extra` settings.
fn evolve_args(llm: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["evolve", "--task", "saxpy"]
        .iter()
        .chain(&OPENCL_SMOKE)
        .map(|s| s.to_string())
        .collect();
    args.extend(
        ["--iterations", "8", "--concurrency", "1", "--llm", llm]
            .iter()
            .map(|s| s.to_string()),
    );
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn the_run(dir: &Path) -> RunId {
    let runs: Vec<_> = std::fs::read_dir(dir.join("ws/runs")).unwrap().collect();
    assert_eq!(runs.len(), 1, "one run per workspace");
    RunId(runs[0].as_ref().unwrap().file_name().into_string().unwrap())
}

/// A float as text with 6 significant digits: the fixed clock makes every
/// figure exact, but a change of summation order may move the last bits.
fn rounded(x: f64) -> Value {
    if x.is_finite() {
        Value::String(format!("{x:.6e}"))
    } else {
        Value::String(x.to_string())
    }
}

/// Every float in `v` rounded (see [`rounded`]), the run's name (it ends
/// in random characters) written `<run>`, a wrong result's figures left
/// out; timestamps and seconds on the
/// host's clock, which nothing fixes, left out.
fn stable(v: Value, run: &str) -> Value {
    const VOLATILE: &[&str] = &[
        "created_at",
        "wall_s",
        "finished_at",
        "started_at",
        "measured_at",
        "latency_ms",
        // Seconds the evaluations took on the host's clock, not the device's.
        "device_s",
    ];
    match v {
        Value::Number(n) if n.is_f64() => rounded(n.as_f64().unwrap()),
        // A wrong result's error and tolerance depend on the run's random
        // inputs: only where it went wrong is fixed.
        Value::String(text) if text.starts_with("wrong result at size") => {
            let at = text.split(':').next().unwrap_or_default();
            Value::String(format!("{at}: <error on this run's inputs>"))
        }
        Value::String(text) => Value::String(text.replace(run, "<run>")),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| stable(v, run)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .filter(|(k, _)| !VOLATILE.contains(&k.as_str()) && !k.ends_with("wall_s"))
                .map(|(k, v)| (k, stable(v, run)))
                .collect(),
        ),
        other => other,
    }
}

/// What a run decided, read from its store: per proposal the candidate
/// (by its source's first line and id), outcome, score, promotion,
/// incumbent, island, cell and reason; the re-measurements; the held-out
/// result; the last checkpoint's incumbent, strategy state and generator.
async fn decisions(ws: &Path, run: &RunId) -> Value {
    let store = Store::open_workspace(ws).await.unwrap();
    let mut history = Vec::new();
    for h in store.history(run).await.unwrap() {
        let source = match h.candidate_id {
            Some(id) => store.candidate_source(id).await.unwrap(),
            None => String::new(),
        };
        history.push(json!({
            "iteration": h.iteration,
            "candidate": h.candidate_id.map(|CandidateId(id)| id),
            "first_line": source.lines().next().unwrap_or_default(),
            "outcome": h.outcome_kind,
            "score": h.score,
            "promoted": h.promoted,
            "incumbent": h.incumbent_id.map(|CandidateId(id)| id),
            "island": h.island,
            "cell": h.cell,
            "reason": h.reason,
        }));
    }
    let remeasured: Vec<Value> = store
        .remeasurements(run)
        .await
        .unwrap()
        .into_iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let held_out: Vec<Value> = store
        .held_out_results(run)
        .await
        .unwrap()
        .into_iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let last = store.last_checkpoint(run).await.unwrap().unwrap();
    let info = store.run(run).await.unwrap();
    store.close().await;
    let got = json!({
        "history": history,
        "remeasurements": remeasured,
        "held_out": held_out,
        "checkpoint": {
            "iteration": last.iteration,
            "incumbent": last.incumbent.map(|CandidateId(id)| id),
            "previous": last.previous.map(|CandidateId(id)| id),
            "strategy_state": last.strategy_state,
            "rng_state": last.rng_state,
        },
        "status": info.status,
        "summary": info.summary,
    });
    stable(got, &run.0)
}

/// Compares `got` with tests/golden/`name`.json (or writes it, with
/// `KEVO_GOLDEN_UPDATE=1`).
fn compare(name: &str, got: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(got).unwrap() + "\n";
    if std::env::var_os("KEVO_GOLDEN_UPDATE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (KEVO_GOLDEN_UPDATE=1 writes it)", path.display()));
    if want != text {
        let first = want
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(text.lines().count()));
        let around = |t: &str| -> String {
            t.lines()
                .skip(first.saturating_sub(3))
                .take(8)
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "{name}: the search decided differently from {} (first difference at line {}):\n--- golden\n{}\n--- now\n{}",
            path.display(),
            first + 1,
            around(&want),
            around(&text)
        );
    }
}

/// One recorded search with `extra` settings, compared with its golden
/// file; its folder (the workspace is `ws` in it) and run, for more checks.
fn golden_search(name: &str, extra: &[&str]) -> Option<(tempfile::TempDir, RunId)> {
    if !opencl_available() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let replay = replay_file(dir.path());
    let llm = format!("replay:{}", replay.display());
    let args = evolve_args(&llm, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeded(kevo(dir.path(), &args));
    let run = the_run(dir.path());
    let got = runtime().block_on(decisions(&dir.path().join("ws"), &run));
    compare(name, &got);
    Some((dir, run))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn golden_one_plus_one_strict() {
    golden_search("one_plus_one_strict", &["--promotion", "strict"]);
}

/// Also what a user reads of it: `kevo show` and the report, as
/// snapshots (a compile error, a wrong result and promotions in one run).
#[test]
fn golden_one_plus_one_noise_aware() {
    let searched = golden_search("one_plus_one_noise_aware", &["--promotion", "noise-aware"]);
    if let Some((dir, run)) = searched {
        crate::what_a_user_sees::show_and_report(dir.path(), &run, |args| kevo(dir.path(), args));
    }
}

#[test]
fn golden_map_elites() {
    golden_search("map_elites", &["--strategy", "map-elites"]);
}

#[test]
fn golden_islands() {
    golden_search("islands", &["--strategy", "islands", "--islands", "2"]);
}

/// The same answers told one at a time through `kevo ask` / `kevo tell`,
/// then `kevo finish`.
#[test]
fn golden_ask_tell() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let args = evolve_args("external", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeded(kevo(dir.path(), &args));
    let run = the_run(dir.path());
    for (note, source) in answers() {
        let asked: Vec<Value> = serde_json::from_str(&succeeded(kevo(
            dir.path(),
            &["ask", &run.0, "--n", "1", "--json"],
        )))
        .unwrap();
        let id = asked[0]["proposal"].as_i64().unwrap().to_string();
        let answer = dir.path().join("answer.md");
        std::fs::write(&answer, response(note, &source)).unwrap();
        let answer = answer.display().to_string();
        succeeded(kevo(
            dir.path(),
            &["tell", &run.0, &id, &answer, "--model", "golden"],
        ));
    }
    succeeded(kevo(dir.path(), &["finish", &run.0]));
    let got = runtime().block_on(decisions(&dir.path().join("ws"), &run));
    compare("ask_tell", &got);
}
