//! `kevo runs`, `kevo show` and the winning kernel of `kevo export`: what
//! the store holds about runs, as text or JSON. `kevo_report::run_view`
//! reads it; this module prints it.
// Table headers pass their titles through the same width specifiers as the
// rows below them, which keeps the columns aligned by construction.
#![allow(clippy::print_literal)]

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use kevo_report::run_view::{self, RunView, StoredSettings};
use kevo_store::RunId;
use kevo_strategy::{Archive, Axis, CellElite, LEVELS};

use crate::evolve::StoreArgs;
use crate::style::{Stream, Tone, paint};

fn score(s: Option<f64>) -> String {
    s.map(|s| format!("{s:.4}")).unwrap_or_else(|| "-".into())
}

pub fn runs(store: StoreArgs, json: bool) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        if !store.exists() {
            // Listing creates nothing: an empty folder stays empty.
            if json {
                println!("[]");
            }
            eprintln!("kevo: {}", store.no_store());
            return Ok(ExitCode::SUCCESS);
        }
        let opened = store.open().await?;
        let runs = run_view::list_runs(&opened).await?;
        if json {
            let values = run_view::runs_json(&runs)?;
            println!("{}", serde_json::to_string_pretty(&values)?);
            return Ok(ExitCode::SUCCESS);
        }
        if runs.is_empty() {
            eprintln!("kevo: no runs in {} yet", store.workspace.display());
            return Ok(ExitCode::SUCCESS);
        }
        // The winner's score names its measurement ("3.1024 re-measured");
        // the speedup is always the confirmed one, as in the summary.
        println!(
            "{:<28} {:<10} {:<8} {:<6} {:<12} {:>5} {:<18} {:>9} {:>9}  {:<19}  {}",
            "run",
            "task",
            "backend",
            "sizes",
            "status",
            "iter",
            "winner's score",
            "confirmed",
            "cost $",
            "held-out",
            "device"
        );
        for shown in runs {
            let r = &shown.listing;
            println!(
                "{:<28} {:<10} {:<8} {:<6} {:<12} {:>5} {:<18} {:>9} {:>9.4}  {:<19}  {}",
                r.id.0,
                r.task,
                r.backend,
                r.size_set.to_string(),
                shown.status,
                r.last_iteration
                    .map(|i| i.to_string())
                    .unwrap_or_else(|| "-".into()),
                r.best_score.map_or_else(
                    || "-".into(),
                    |s| format!("{s:.4} {}", r.best_score_measure)
                ),
                r.speedup.map_or_else(|| "-".into(), |x| format!("{x:.2}x")),
                r.cost_usd.unwrap_or(0.0),
                match (&r.held_out_verdict, &r.winner_safety) {
                    (Some(v), Some(s)) if s == "unsafe" => format!("{v}, unsafe"),
                    (Some(v), _) => v.clone(),
                    (None, _) => "-".into(),
                },
                r.device
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// "held-out verdict: overfit (the winner is correct at the scored sizes
/// but not at the held-out size: ...)", from a finished run's summary.
fn verdict_line(summary: Option<&serde_json::Value>) -> Option<String> {
    let summary = summary?;
    let held_out = &summary["held_out"];
    let verdict = held_out["verdict"].as_str()?;
    let mut line = match held_out["verdict_reason"].as_str() {
        Some(why) => format!("held-out verdict: {verdict} ({why})"),
        None => format!("held-out verdict: {verdict}"),
    };
    if let Ok(safety) =
        serde_json::from_value::<kevo_evolve::verdict::Safety>(summary["safety"].clone())
    {
        line.push_str(&format!(
            "\nwinner under compute-sanitizer: {}",
            safety.line()
        ));
    }
    Some(line)
}

/// How the run's workers were confined, from its stored configuration
/// (runs stored before the sandbox existed say so).
fn sandbox_line(config: &serde_json::Value) -> String {
    match serde_json::from_value::<kevo_worker::kevo_sandbox::Status>(
        config["sandbox_in_force"].clone(),
    ) {
        Ok(status) => status.summary(),
        Err(_) => "not recorded (run stored before workers were sandboxed)".into(),
    }
}

/// The build, driver and ceilings a run was made with.
fn provenance_line(config: &serde_json::Value) -> String {
    let p = &config["provenance"];
    if p.is_null() {
        return "not recorded (run stored before provenance was)".into();
    }
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_string();
    let task = match p["task"]["content_hash"].as_str() {
        Some(hash) => format!("; task {} (definition {hash})", text(&p["task"]["name"])),
        None => String::new(),
    };
    let seeds = match p["seeds"].as_object() {
        Some(seeds) => format!(
            "; seeds {}",
            seeds
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| match v.as_str() {
                    Some(text) => format!("{k} {text}"),
                    None => format!("{k} {v}"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => String::new(),
    };
    format!(
        "kevo {}{task}; {} driver {} ({}); ceilings {:.1} GB/s, {:.0} GFLOPS ({}){seeds}",
        text(&p["kevo"]),
        text(&p["device"]["name"]),
        text(&p["device"]["driver_version"]),
        text(&p["device"]["platform"]),
        p["ceilings"]["bandwidth_gbs"].as_f64().unwrap_or(f64::NAN),
        p["ceilings"]["fp32_gflops"].as_f64().unwrap_or(f64::NAN),
        serde_json::from_value::<kevo_roofline::CeilingSource>(p["ceilings"]["source"].clone())
            .map(|s| s.to_string())
            .unwrap_or_else(|_| "source not recorded".into()),
    )
}

// `kevo show` prints what the store holds, some of it written by a model
// endpoint (model names, errors, the model's reasons, prompt variants).
// From here to the end of this file `println!` escapes control characters
// (`\u001b`; JSON stays valid JSON): stores written before the provider
// layer cleaned replies may hold them.
macro_rules! println {
    () => {
        std::println!()
    };
    ($($arg:tt)*) => {
        std::println!("{}", kevo_proposer::sanitize::terminal(&format!($($arg)*)))
    };
}

pub fn show(run: &str, store: StoreArgs, json: bool) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = store.open_existing().await?;
        let run = store.resolve_run(run).await?;
        let view = run_view::load(&store, run).await?;
        if json {
            // Everything read, each iteration with its per-size numbers.
            println!("{}", serde_json::to_string_pretty(&view.to_json())?);
        } else {
            print_text(&view);
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The run's history and population, then what is open, suspicious,
/// kept and checked elsewhere.
fn print_text(view: &RunView) {
    print_heading(view);
    print_history(view);
    if let Some(archive) = &view.archive {
        print_archive(archive);
    }
    let config = &view.info.config;
    if !view.arms.is_empty() {
        print_arms(config["model_choice"].as_str().unwrap_or("ucb"), &view.arms);
    }
    if let Some(a) = &view.prompt_archive {
        print_prompt_archive(a, config["meta_prompt"]["every"].as_u64());
    }
    print_unanswered(view);
    print_suspicious(view);
    print_winner(view);
    print_held_out(view);
    if let Some(v) = verdict_line(view.info.summary.as_ref()) {
        println!("{v}");
    }
    print_elsewhere(view);
}

/// The run, how its workers were confined, what it was made with, and
/// the history table's header.
fn print_heading(view: &RunView) {
    let info = &view.info;
    println!(
        "run {} — {} on {} ({}), {} sizes, {}{}",
        info.id.0,
        info.task,
        info.device,
        info.backend,
        info.size_set,
        info.status.as_str(),
        info.status_reason
            .as_ref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default()
    );
    println!("sandbox: {}", sandbox_line(&info.config));
    println!("made with: {}", provenance_line(&info.config));
    println!(
        "{:>9} {:<15} {:>8} {:>8}  {}",
        "iteration",
        "outcome",
        // Each row's own evaluation; re-measurements are in the reasons.
        "in-run",
        // (1+1) keeps only a new best; the other strategies keep
        // archive and island members.
        if info.strategy == "one_plus_one" {
            "new best"
        } else {
            "kept"
        },
        "reason"
    );
}

/// Lines of a compiler log under a failed iteration: the first errors
/// with their excerpts.
const SHOWN_FAILURE_LINES: usize = 12;

/// One line per iteration (who answered, which prompt asked), each
/// with its per-size numbers, the last iteration's included: no prompt
/// shows it; under a failed one, why it failed.
fn print_history(view: &RunView) {
    for h in &view.history {
        let mut by = Vec::new();
        if h.iteration > 0
            && let Some(models) = view.answered_by.get(&h.iteration)
        {
            by.push(format!("model {}", models.join(", ")));
        }
        if let Some(v) = h.candidate_id.and_then(|c| view.variant_of.get(&c.0)) {
            by.push(format!("prompt v{v}"));
        }
        let by = if by.is_empty() {
            String::new()
        } else {
            format!(" [{}]", by.join(", "))
        };
        println!(
            "{:>9} {:<15} {:>8} {:>8}  {}{by}",
            h.iteration,
            h.outcome_kind.as_deref().unwrap_or("skipped"),
            score(h.score),
            if h.promoted { "yes" } else { "" },
            h.reason
        );
        if h.iteration > 0 {
            print_conversations(view.conversations.get(&h.iteration));
        }
        if let Some(e) = h.candidate_id.and_then(|c| view.measured.get(&c.0)) {
            for s in &e.sizes {
                println!("{:>11}{}", "", size_text(s));
            }
            if let Some(detail) = e.outcome.failure_detail(SHOWN_FAILURE_LINES) {
                let bar = paint(Stream::Stdout, Tone::Failed, "|");
                for line in detail.lines() {
                    println!("{:>11}{bar} {line}", "");
                }
            }
        }
    }
}

/// An iteration's tool conversations: the totals, then each call with
/// the first line of what it returned.
fn print_conversations(conversations: Option<&Vec<kevo_proposer::tools::Transcript>>) {
    for t in conversations.into_iter().flatten() {
        println!("{:>11}tools: {}", "", t.summary());
        for (i, turn) in t.turns.iter().enumerate() {
            for c in &turn.calls {
                let first = c.result.lines().next().unwrap_or("");
                let first: String = first.chars().take(100).collect();
                let mark = if c.refused.is_some() {
                    " (refused)"
                } else if c.is_error {
                    " (failed)"
                } else {
                    ""
                };
                println!("{:>13}turn {}: {}{mark}: {first}", "", i + 1, c.name);
            }
        }
    }
}

/// Prompts handed out (ask/tell, batches) and not answered, and model
/// calls an interruption abandoned.
fn print_unanswered(view: &RunView) {
    for p in view
        .proposals
        .iter()
        .filter(|p| p.status != kevo_store::ProposalStatus::Answered)
    {
        let kept = p.deferred.as_ref().map(|d| {
            format!(
                ", answer kept at {} to be evaluated (kevo tell {} --deferred)",
                d.told_at.format("%Y-%m-%d %H:%M:%S UTC"),
                p.run_id
            )
        });
        println!(
            "proposal {} ({}{}{}), asked after iteration {}{}",
            p.id,
            p.status,
            p.batch
                .as_ref()
                .map(|b| format!(", batch {b}"))
                .unwrap_or_default(),
            kept.unwrap_or_default(),
            p.asked_after,
            p.reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    for c in &view.abandoned {
        println!(
            "iteration {}: a model call to {} {}",
            c.iteration,
            c.call.provider,
            c.call.error.as_deref().unwrap_or_default()
        );
    }
}

/// Candidates that ran faster than the hardware allows: never scored,
/// and worth a look (a reward hack or a wrong ceiling).
fn print_suspicious(view: &RunView) {
    for s in &view.suspicious {
        println!(
            "{}: iteration {} candidate {} at size {}: {}",
            paint(Stream::Stdout, Tone::Warning, "SUSPICIOUS"),
            s.iteration,
            s.candidate.0,
            s.size,
            s.reason
        );
    }
}

/// The winner, its scores each named by its measurement, the run's
/// confirmed speedup, and its in-run per-size times with their spread.
fn print_winner(view: &RunView) {
    let Some(b) = &view.best else { return };
    let headline = view
        .info
        .summary
        .as_ref()
        .filter(|s| s["best_candidate"].as_i64() == Some(b.candidate.id.0))
        .and_then(kevo_report::Headline::of);
    let score = match headline.as_ref().and_then(|h| h.score_text()) {
        Some(text) => text,
        None => format!("{} in-run", score(b.evaluation.score)),
    };
    println!(
        "winner: {} ({}), score {score}",
        crate::printers::winner_name(b.candidate.id.0, b.candidate.iteration),
        b.candidate
            .model
            .as_deref()
            .or(b.candidate.provider.as_deref())
            .unwrap_or("?"),
    );
    if let Some(h) = &headline {
        println!("speedup: {}", h.speedup_text());
    }
    if let Ok(e) = b.evaluation.evaluation() {
        println!("  in-run, per size:");
        for s in &e.sizes {
            println!("  {}", size_text(s));
        }
    }
}

/// The held-out results. The size's fraction with its ceiling and
/// level, from the stored evaluation (older rows without it say what
/// it is of).
fn print_held_out(view: &RunView) {
    for (h, evaluation) in &view.held_out {
        let roofline = match evaluation.as_ref().and_then(|e| e.sizes.first()) {
            Some(s) => s.roofline_text(),
            None => format!(
                "fraction {} of the task's DRAM or FP32 roofline",
                score(h.fraction)
            ),
        };
        println!(
            "held-out ({}): candidate {} {}: Φ {} ({roofline}){}",
            h.role.as_str(),
            h.candidate_id.0,
            h.outcome_kind,
            score(h.phi),
            h.speedup
                .map(|x| format!(", {x:.2}x the seed at this size"))
                .unwrap_or_default()
        );
    }
}

/// Evaluations stored with the run after it: on other devices (`kevo
/// cross`) and at the validation sizes.
fn print_elsewhere(view: &RunView) {
    for c in &view.cross {
        let e = &c.cross.evaluation;
        println!(
            "cross ({}, {} on {}{}): candidate {} {}",
            c.cross.session,
            c.cross.role.as_str(),
            e.device,
            if c.cross.translated_source.is_some() {
                ", translated to OpenCL C"
            } else {
                ""
            },
            c.cross.candidate_id.0,
            e.outcome.summary()
        );
    }
    for v in &view.validations {
        println!(
            "validation (iteration {}): candidate {} {}: {}",
            v.iteration,
            v.candidate_id.0,
            if v.passed { "passed" } else { "rejected" },
            v.reason
        );
    }
}

/// One size of an iteration for `kevo show`: "64K  0.0123 ms
/// (0.0119-0.0131 over 10 runs)  48.0% of DRAM 21.4 GB/s", or "64K
/// wrong: max_abs 1.2e-2 (tolerance 1.0e-5)".
fn size_text(s: &kevo_eval::SizeResult) -> String {
    if !s.correct {
        return format!(
            "{:<12} wrong: {} {:.1e}{}",
            s.label,
            s.metric,
            s.error,
            s.tolerance
                .map(|t| format!(" (tolerance {t:.1e})"))
                .unwrap_or_default()
        );
    }
    format!(
        "{:<12} {:.4} ms (IQR {:.1}% of it; {:.4}-{:.4} over {} runs)  {}",
        s.label,
        s.time.median_s * 1e3,
        s.time.spread * 100.0,
        s.time.min_s * 1e3,
        s.time.max_s * 1e3,
        s.time.samples_s.len(),
        s.roofline_text()
    )
}

/// The strategy's population: MAP-Elites as memory x algorithm grids, one
/// per coordination level that has an elite; islands as their members.
fn print_archive(archive: &Archive) {
    match archive {
        Archive::Incumbent(e) => {
            println!("incumbent: candidate {}, kept score {:.4}", e.id, e.score)
        }
        Archive::Grid(cells) => {
            println!(
                "archive: {} of {} cells (#candidate score)",
                cells.len(),
                LEVELS.pow(3)
            );
            for c in 0..LEVELS {
                let level: Vec<&CellElite> =
                    cells.iter().filter(|e| e.cell.coordination == c).collect();
                if level.is_empty() {
                    continue;
                }
                println!("coordination c{c}: {}", Axis::Coordination.level_name(c));
                print!("{:<22}", "  memory \\ algorithm");
                for a in 0..LEVELS {
                    print!(" {:<16}", format!("a{a}"));
                }
                println!();
                for m in 0..LEVELS {
                    print!(
                        "{:<22}",
                        format!("  m{m} {}", short(Axis::Memory.level_name(m)))
                    );
                    for a in 0..LEVELS {
                        let text = level
                            .iter()
                            .find(|e| e.cell.memory == m && e.cell.algorithm == a)
                            .map_or(".".to_string(), |e| {
                                format!("#{} {:.4}", e.elite.id, e.elite.score)
                            });
                        print!(" {text:<16}");
                    }
                    println!();
                }
            }
            println!(
                "  algorithm: a0 {}, a1 {}, a2 {}, a3 {}",
                Axis::Algorithm.level_name(0),
                Axis::Algorithm.level_name(1),
                Axis::Algorithm.level_name(2),
                Axis::Algorithm.level_name(3)
            );
        }
        Archive::Islands(islands) => {
            println!(
                "islands: {} (members best first, #candidate score)",
                islands.len()
            );
            for (i, members) in islands.iter().enumerate() {
                let list: Vec<String> = members
                    .iter()
                    .map(|e| format!("#{} {:.4}", e.id, e.score))
                    .collect();
                println!("  island {i}: {}", list.join(", "));
            }
        }
    }
}

/// The model bandit's arms: calls, rewards and cost per model.
fn print_arms(choice: &str, arms: &[kevo_evolve::ArmStat]) {
    println!("models chosen by {choice} (reward: relative gain over the parent, 0 for a failure):");
    let width = arms.iter().map(|a| a.model.len()).max().unwrap_or(5).max(5);
    println!(
        "  {:<width$} {:>6} {:>9} {:>12} {:>9}",
        "model", "calls", "rewarded", "mean reward", "cost"
    );
    for a in arms {
        println!(
            "  {:<width$} {:>6} {:>9} {:>12.4} {:>9}",
            a.model,
            a.calls,
            a.rewarded,
            a.mean_reward,
            format!("${:.4}", a.cost_usd)
        );
    }
}

/// The prompt variants: lineage, use, fitness and the candidates each
/// produced, with the meta-prompter's diagnosis.
fn print_prompt_archive(archive: &kevo_proposer::prompt::meta::PromptArchive, every: Option<u64>) {
    println!(
        "prompt variants ({} meta-prompter call(s){}; fitness: best score of the kernels a variant produced):",
        archive.meta_calls,
        every
            .map(|n| format!(", every {n} proposals"))
            .unwrap_or_default()
    );
    for v in &archive.variants {
        let origin = match v.parent {
            None => "the starting guidance".to_string(),
            Some(p) => format!(
                "from v{p} before proposal {}, edited {}",
                v.created_at,
                v.edited.join(", ")
            ),
        };
        let best = match (v.fitness, v.best_candidate) {
            (Some(f), Some(c)) => format!("best {f:.4} (candidate {c})"),
            _ => "no correct kernel".to_string(),
        };
        let candidates = if v.candidates.is_empty() {
            String::new()
        } else {
            format!(
                "; candidates {}",
                v.candidates
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        println!(
            "  v{} ({origin}): {} proposal(s), {best}{candidates}",
            v.id, v.uses
        );
        if !v.diagnosis.is_empty() {
            let short: String = v.diagnosis.chars().take(300).collect();
            println!("     diagnosis: {}", short.replace('\n', " "));
        }
    }
    for r in &archive.rejected {
        println!("  last call's rejected edit: {r}");
    }
}

/// A level name cut to fit a grid column.
fn short(name: &str) -> String {
    name.chars().take(16).collect()
}

/// `kevo show RUN --config`: the run's settings as a config file.
pub fn show_config(run: &str, store: StoreArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = store.open_existing().await?;
        let resolved = store.resolve_run(run).await?;
        let run = resolved.0.as_str();
        match run_view::settings(&store, &RunId(run.to_string())).await? {
            StoredSettings::Tune { config } => {
                // A tuning run has no evolution settings: its own, as stored.
                println!("# run {run} is a `kevo tune` run; its settings as stored:");
                println!("{}", serde_json::to_string_pretty(&config)?);
            }
            StoredSettings::Evolve { toml, own_start } => {
                println!("# the settings of run {run}");
                if own_start {
                    println!(
                        "# started from a kernel of its own (not the task's seed): `--config-from {run}` keeps it"
                    );
                }
                print!("{toml}");
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub fn export(run: &str, out: Option<&Path>, store: StoreArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = store.open_existing().await?;
        let run = store.resolve_run(run).await?;
        let best = run_view::winner(&store, &run).await?;
        match out {
            Some(path) => {
                std::fs::write(path, &best.candidate.source)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                eprintln!(
                    "wrote candidate {} (score {}) to {}",
                    best.candidate.id.0,
                    score(best.evaluation.score),
                    path.display()
                );
            }
            None => print!("{}", best.candidate.source),
        }
        Ok(ExitCode::SUCCESS)
    })
}
