//! MAP-Elites and islands end to end on PoCL with a scripted `cmd:`
//! proposer (tests/strategies/propose.py) that answers with a different
//! variant depending on the parent it is shown: which cells and islands
//! fill, what the prompts held (parent, elites, inspirations, hints; never
//! the held-out size), duplicates not evaluated again, and a run killed
//! with SIGKILL and resumed that ends with the archive an uninterrupted
//! strategy reaches on the same measurements (each run is replayed
//! through a fresh strategy from its stored candidates and scores).
//!
//! On OpenCL (PoCL in CI) by default; `KEVO_TEST_BACKEND=cuda` runs them on
//! CUDA, with `KEVO_BIN` and `KEVO_REPO` naming the kevo binary and the
//! repository where the build's paths do not exist (the device machine).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{kill_after_iteration, opencl_available};
use kevo_store::{CandidateId, RunId, Store};
use kevo_strategy::{
    Descriptors, Elite, Judge, Judgement, Remeasured, Scored, StepOutcome, StrategyConfig,
};

fn kevo(cache: &Path) -> Command {
    let bin = std::env::var("KEVO_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kevo").into());
    let mut c = Command::new(bin);
    c.env("KEVO_CACHE_DIR", cache);
    c
}

fn root() -> PathBuf {
    match std::env::var_os("KEVO_REPO") {
        Some(repo) => PathBuf::from(repo),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
    }
}

/// "opencl" unless `KEVO_TEST_BACKEND` says "cuda".
fn backend() -> String {
    std::env::var("KEVO_TEST_BACKEND").unwrap_or_else(|_| "opencl".into())
}

fn available() -> bool {
    backend() == "cuda" || opencl_available()
}

fn evolve_args(ws: &str, iterations: u32, strategy: &[&str]) -> Vec<String> {
    let proposer = root().join("crates/cli/tests/strategies/propose.py");
    let backend = backend();
    let mut args: Vec<String> = [
        "evolve",
        "--task",
        "saxpy",
        "--backend",
        &backend,
        "--sizes",
        "smoke",
        "--max-timed-runs",
        "10",
        "--workspace",
        ws,
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend([
        "--llm".into(),
        format!("cmd:{}", proposer.display()),
        "--iterations".into(),
        iterations.to_string(),
    ]);
    args.extend(strategy.iter().map(|s| s.to_string()));
    // The slow start kernel: every variant beats it, so islands have
    // something better than the seed to send each other. On a GPU the
    // variants are launch-bound at these sizes, so its start kernel is
    // slower by far (tests/strategies/start_slow.cu says why).
    args.extend([
        "--seed-kernel".into(),
        root()
            .join(match backend.as_str() {
                "cuda" => "crates/cli/tests/strategies/start_slow.cu",
                _ => "examples/replay/opencl/start_slow.cl",
            })
            .display()
            .to_string(),
    ]);
    // Promotions are what these tests sample, not how they are decided:
    // 2 interleaved rounds instead of 5 (the slow start kernel made
    // re-measurement most of a run's time on PoCL).
    args.extend(["--remeasure-rounds".into(), "2".into()]);
    args
}

fn show(cache: &Path, ws: &str, run: &str) -> serde_json::Value {
    let out = kevo(cache)
        .args(["show", run, "--workspace", ws, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `kevo show RUN` as a person reads it.
fn show_text(cache: &Path, ws: &str, run: &str) -> String {
    let out = kevo(cache)
        .args(["show", run, "--workspace", ws])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run_of(stdout: &[u8]) -> String {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "finished")
        .and_then(|v| v["run"].as_str().map(String::from))
        .expect("a finished event")
}

/// Run to the end; the run's id.
fn run_to_end(cache: &Path, args: &[String]) -> String {
    let out = kevo(cache).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    run_of(&out.stdout)
}

/// Start, SIGKILL once iteration `at` is stored, resume to the end.
fn killed_and_resumed(cache: &Path, ws: &str, args: &[String], at: u64) -> String {
    let run = kill_after_iteration(kevo(cache).args(args), at);
    let out = kevo(cache)
        .args(["evolve", "--resume", &run, "--workspace", ws, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(run_of(&out.stdout), run);
    run
}

/// Feed the run's stored candidates, iteration by iteration, to a fresh
/// strategy of the run's configuration: every candidate's parent and
/// island must be what the fresh strategy selects, every decision what it
/// decides, and its final state the one the run stored.
fn replay(ws: &str, run: &str, stored_state: &serde_json::Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = Store::open_workspace(Path::new(ws)).await.unwrap();
        let id = RunId(run.to_string());
        let info = store.run(&id).await.unwrap();
        let config: StrategyConfig =
            serde_json::from_value(info.config["strategy"].clone()).unwrap();
        let rows = store.history(&id).await.unwrap();
        // Whose duplicate a candidate is: the run directory's history.
        let history: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(Path::new(ws).join("runs").join(run).join("history.json"))
                .unwrap(),
        )
        .unwrap();
        let duplicate_of = |id: i64| {
            history
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h["candidate"] == id)
                .and_then(|h| h["duplicate_of"].as_i64())
        };
        let scored = |row: &kevo_store::HistoryRow, cell: Option<String>| Scored {
            id: row.candidate_id.unwrap().0,
            score: row.score,
            outcome: serde_json::from_value::<StepOutcome>(
                row.outcome_kind.clone().unwrap().into(),
            )
            .unwrap(),
            descriptors: cell.and_then(|c| c.parse::<Descriptors>().ok()),
            duplicate_of: duplicate_of(row.candidate_id.unwrap().0),
        };
        let seed_row = rows.iter().find(|r| r.iteration == 0).unwrap();
        let seed = store
            .candidate(seed_row.candidate_id.unwrap())
            .await
            .unwrap();
        let mut strategy = config.start(&scored(seed_row, seed.cell.clone())).unwrap();
        // The run's promotion re-measurements, judged again here by the
        // documented rule from their stored rounds.
        let promotions: Vec<(i64, i64, Remeasured)> = store
            .remeasurements(&id)
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.remeasurement.purpose == kevo_store::RemeasurePurpose::Promotion)
            .map(|r| {
                let m = &r.remeasurement;
                let (c, h) = (m.candidates[0].0, m.candidates[1].0);
                let rounds = serde_json::from_value(m.rounds.clone()).unwrap();
                let interleaved = kevo_evolve::Interleaved {
                    rounds,
                    spend: Default::default(),
                };
                (c, h, interleaved.pair([c, h]))
            })
            .collect();
        // Each candidate's single first score: what the gate compares.
        let first: std::collections::HashMap<i64, f64> = rows
            .iter()
            .filter_map(|r| Some((r.candidate_id?.0, r.score?)))
            .collect();
        let last = rows.iter().map(|r| r.iteration).max().unwrap();
        for k in 1..=last {
            let selection = strategy.select();
            let mut batch = Vec::new();
            let mut kept = Vec::new();
            for row in rows.iter().filter(|r| r.iteration == k) {
                let Some(cid) = row.candidate_id else {
                    continue;
                };
                let c = store.candidate(CandidateId(cid.0)).await.unwrap();
                assert_eq!(c.parents, [CandidateId(selection.parent)], "iteration {k}");
                assert_eq!(c.island, selection.island.map(i64::from), "iteration {k}");
                batch.push(scored(row, c.cell.clone()));
                kept.push(row.promoted);
            }
            if batch.is_empty() {
                continue;
            }
            let d = strategy.decide(
                k,
                &selection,
                &batch,
                &mut StoredJudge {
                    promotions: &promotions,
                    first: &first,
                },
            );
            let decided: Vec<bool> = d.placements.iter().map(|p| p.kept).collect();
            assert_eq!(decided, kept, "iteration {k}");
        }
        assert_eq!(&strategy.state(), stored_state, "the run's final state");
    });
}

/// The noise-aware rule applied to a run's stored re-measurements; a
/// challenger that appears better (its single first score above the
/// holder's) and was not re-measured fails the test.
struct StoredJudge<'a> {
    promotions: &'a [(i64, i64, Remeasured)],
    first: &'a std::collections::HashMap<i64, f64>,
}

impl Judge for StoredJudge<'_> {
    fn judge(&mut self, challenger: Elite, holder: Elite) -> Judgement {
        let holder_single = self.first.get(&holder.id).copied().unwrap_or(holder.score);
        if challenger.score <= holder_single {
            return Judgement::not_better(challenger, holder);
        }
        let (_, _, m) = self
            .promotions
            .iter()
            .find(|(c, h, _)| (*c, *h) == (challenger.id, holder.id))
            .unwrap_or_else(|| {
                panic!(
                    "candidate {} appeared better than {} and was not re-measured",
                    challenger.id, holder.id
                )
            });
        kevo_strategy::promotion::noise_aware_judgement(challenger, holder, m)
    }
}

fn prompts(ws: &str, run: &str) -> Vec<String> {
    let dir = Path::new(ws).join("runs").join(run);
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("_prompt.md"))
        .collect();
    found.sort();
    found
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

fn cells(shown: &serde_json::Value) -> Vec<(String, String)> {
    let mut cells: Vec<(String, String)> = shown["archive"]["elites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let cell: Descriptors = serde_json::from_value(c["cell"].clone()).unwrap();
            (cell.to_string(), c["elite"]["id"].to_string())
        })
        .collect();
    cells.sort();
    cells
}

#[test]
fn map_elites_fills_a_cell_per_variant_and_resumes_exactly() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let strategy = [
        "--strategy",
        "map-elites",
        "--selection",
        "uniform=1",
        "--elites-shown",
        "1",
        "--inspirations",
        "2",
        "--strategy-seed",
        "5",
    ];
    let ws = dir.path().join("a").display().to_string();
    let run = run_to_end(&cache, &evolve_args(&ws, 7, &strategy));
    let shown = show(&cache, &ws, &run);
    assert_eq!(shown["run"]["strategy"], "map_elites");
    // One cell per memory construct; the fast scalar variant took the
    // start kernel's cell from it.
    let filled = cells(&shown);
    let labels: Vec<&str> = filled.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(
        labels,
        ["m0-a0-c0", "m1-a0-c0", "m2-a0-c0", "m3-a0-c0"],
        "{filled:?}"
    );
    let seed_id = shown["history"][0]["candidate_id"].to_string();
    assert_ne!(
        filled[0].1, seed_id,
        "the start kernel's cell has a faster elite"
    );
    // Proposals past the four variants repeat one: not evaluated again.
    let run_dir = Path::new(&ws).join("runs").join(&run);
    let kept_history: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("history.json")).unwrap())
            .unwrap();
    assert!(
        kept_history
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["duplicate_of"].is_i64()),
        "{kept_history}"
    );
    for row in shown["history"].as_array().unwrap() {
        if row["reason"]
            .as_str()
            .unwrap_or("")
            .starts_with("duplicate of candidate")
        {
            assert_eq!(row["promoted"], false, "a duplicate was kept: {row}");
        }
    }
    // What the prompts held.
    let texts = prompts(&ws, &run);
    assert_eq!(texts.len(), 7);
    assert!(texts[0].contains("## Baseline") && texts[0].contains("## Hints from the search"));
    assert!(
        texts
            .iter()
            .any(|t| t.contains("## Other elites of the search"))
    );
    assert!(texts.iter().any(|t| t.contains("## Inspirations")));
    // Before any child the hints point to empty neighbouring cells, one
    // level up on an axis, in the dialect's words.
    let first_hints = texts[0]
        .split("## Hints from the search")
        .nth(1)
        .expect("hints in the first prompt");
    assert!(
        [
            "consider vectorised memory access",
            "consider fusing work",
            "consider work-group cooperation"
        ]
        .iter()
        .any(|h| first_hints.contains(h)),
        "{first_hints}"
    );
    for t in &texts {
        assert!(!t.contains("128K"), "the held-out size reached a prompt");
    }
    replay(&ws, &run, &shown["strategy_state"]);
    // `kevo show` prints the grid.
    let text = show_text(&cache, &ws, &run);
    assert!(text.contains("archive: 4 of 64 cells"), "{text}");
    assert!(text.contains("coordination c0"), "{text}");

    // Killed after iteration 3 and resumed: the same cells with the same
    // sources, and exactly the strategy its own measurements lead to.
    let ws_b = dir.path().join("b").display().to_string();
    let run_b = killed_and_resumed(&cache, &ws_b, &evolve_args(&ws_b, 7, &strategy), 3);
    let shown_b = show(&cache, &ws_b, &run_b);
    replay(&ws_b, &run_b, &shown_b["strategy_state"]);
    let sources = |ws: &str, shown: &serde_json::Value| -> Vec<(String, String)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let store = Store::open_workspace(Path::new(ws)).await.unwrap();
            let mut out = Vec::new();
            for (cell, id) in cells(shown) {
                let c = store
                    .candidate(CandidateId(id.parse().unwrap()))
                    .await
                    .unwrap();
                out.push((cell, c.source));
            }
            out
        })
    };
    assert_eq!(sources(&ws_b, &shown_b), sources(&ws, &shown));
}

#[test]
fn islands_sample_every_island_keep_children_home_and_resume_exactly() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let strategy = [
        "--strategy",
        "islands",
        "--islands",
        "2",
        "--migration-interval",
        "1",
        "--population",
        "4",
        "--strategy-seed",
        "11",
    ];
    let ws = dir.path().join("a").display().to_string();
    let run = run_to_end(&cache, &evolve_args(&ws, 6, &strategy));
    let shown = show(&cache, &ws, &run);
    assert_eq!(shown["run"]["strategy"], "islands");
    replay(&ws, &run, &shown["strategy_state"]);
    let history = shown["history"].as_array().unwrap();
    let islands: Vec<i64> = history
        .iter()
        .filter(|r| r["iteration"].as_u64() > Some(0))
        .map(|r| r["island"].as_i64().unwrap())
        .collect();
    assert_eq!(islands, [0, 1, 0, 1, 0, 1], "every island in turn");
    let state = &shown["strategy_state"];
    assert_eq!(state["migrations"], 3);
    let members = state["islands"].as_array().unwrap();
    // The last migration ended the run: each island's best is on the next
    // island too (it migrated, or came from there); unless every best is
    // still the seed (on a GPU the start kernel's busy loop costs little),
    // some member arrived by migration.
    let seed = &state["seed"]["id"];
    let mut all_seed = true;
    for (i, island) in members.iter().enumerate() {
        let best = &island[0]["elite"]["id"];
        all_seed &= best == seed;
        let next = members[(i + 1) % members.len()].as_array().unwrap();
        assert!(
            next.iter().any(|m| &m["elite"]["id"] == best),
            "island {i}'s best is not on the next island: {state}"
        );
    }
    let migrants = members
        .iter()
        .flat_map(|i| i.as_array().unwrap())
        .filter(|m| m["from"].is_u64())
        .count();
    assert!(all_seed || migrants > 0, "no migrant arrived: {state}");
    for island in members {
        let ids: Vec<i64> = island
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["elite"]["id"].as_i64().unwrap())
            .collect();
        let mut unique = ids.clone();
        unique.dedup();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            ids.len(),
            "a member twice on one island: {ids:?}"
        );
    }
    let texts = prompts(&ws, &run);
    assert!(
        texts.iter().any(|t| t.contains("## Inspirations")),
        "other islands' bests"
    );
    let text = show_text(&cache, &ws, &run);
    assert!(
        text.contains("islands: 2") && text.contains("island 1:"),
        "{text}"
    );

    let ws_b = dir.path().join("b").display().to_string();
    let run_b = killed_and_resumed(&cache, &ws_b, &evolve_args(&ws_b, 6, &strategy), 3);
    let shown_b = show(&cache, &ws_b, &run_b);
    replay(&ws_b, &run_b, &shown_b["strategy_state"]);
    let islands_b: Vec<i64> = shown_b["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["iteration"].as_u64() > Some(0))
        .map(|r| r["island"].as_i64().unwrap())
        .collect();
    assert_eq!(
        islands_b, islands,
        "the island assignment survives the kill"
    );
}
