//! `kevo tune`: search the configurations of a tunable kernel. Each
//! configuration is instantiated as an ordinary kernel and evaluated by the
//! isolated worker with the same checks and score as any candidate; every
//! trial is stored as an iteration of a run (strategy `tune`), and a
//! configuration already measured for this task, size set and device is
//! served from the store instead of measured again. At the end the best
//! configuration and the task's naive seed are measured at the held-out
//! size in one session.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kevo_eval::Evaluation;
use kevo_store::{
    CandidateId, CandidateRef, Checkpoint, HeldOutRole, IterationRecord, NewCandidate, NewDecision,
    NewEvaluation, NewHeldOut, NewRun, Proposal, Spent, source_sha256,
};
use kevo_tasks::{SizeSet, Task};
use kevo_tune::{Budget, Configuration, Step, StrategyKind, TuningSpace};
use kevo_worker::{Worker, WorkerCommand};
use serde_json::{Value, json};

use crate::evolve::StoreArgs;
use crate::settings::{ConfigFileArg, DeviceArgs};

#[derive(Args)]
pub struct TuneArgs {
    /// Task name (see `kevo tasks`) or a task folder (`./my-task`, see `kevo task new`); or the config file's `task`.
    #[arg(long)]
    task: Option<String>,
    /// The tunable kernel (`// kevo: tune NAME V1 V2 ...` lines); the task's
    /// tunable variant of its seed when absent.
    #[arg(long)]
    kernel: Option<PathBuf>,
    /// exhaustive, random, local (neighbourhood search) or tpe (a
    /// tree-structured Parzen estimator).
    #[arg(long, default_value = "tpe")]
    strategy: StrategyKind,
    /// Configurations to evaluate (cached ones count too, so a strategy
    /// chooses the same whatever the store holds). Default: every valid one
    /// for exhaustive, 32 otherwise.
    #[arg(long, value_name = "N")]
    budget: Option<usize>,
    /// Stop starting configurations after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    budget_s: Option<f64>,
    /// Seed of the strategy's random choices.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Size table: smoke, full (default) or large.
    #[arg(long)]
    sizes: Option<SizeSet>,
    /// Measure every configuration, even those the store has measured.
    #[arg(long)]
    no_cache: bool,
    /// Skip the held-out measurement of the best configuration.
    #[arg(long)]
    no_held_out: bool,
    /// Where to write the best configuration's kernel (default: in the
    /// workspace, `tuned/RUN.EXT`).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Hard wall-clock limit per configuration in seconds (default as for
    /// `kevo eval`).
    #[arg(long)]
    timeout: Option<f64>,
    /// Compile without fast math.
    #[arg(long)]
    no_fast_math: bool,
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    config: ConfigFileArg,
    #[command(flatten)]
    store: StoreArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One configuration's result as reported.
struct Row {
    index: usize,
    configuration: Configuration,
    evaluation: Evaluation,
    /// The stored evaluation it was served from, when cached.
    cached_from: Option<i64>,
    candidate: CandidateId,
}

pub fn tune(args: TuneArgs) -> Result<ExitCode> {
    let settings = crate::settings::evaluation_settings(
        &args.config,
        args.task.as_deref(),
        args.sizes,
        args.timeout,
        args.no_fast_math,
        &args.device,
    )?;
    let Some(task_name) = settings.task.clone() else {
        bail!("give --task NAME (or `task` in the config file)");
    };
    let task: &'static Task = kevo_tasks::resolve(&task_name)?;
    let size_set = settings.sizes.unwrap_or(SizeSet::Full);
    let given = crate::read_kernel(&args.kernel)?;
    if let Some(b) = args.budget_s
        && !(b.is_finite() && b > 0.0)
    {
        bail!("--budget-s: must be a positive number of seconds, not {b}");
    }
    if args.budget == Some(0) {
        bail!("--budget: must be at least 1");
    }

    // A given template is checked before any device is opened: a mistake
    // in a declaration costs nothing.
    let parse = |template: &str, name: &str| -> Result<TuningSpace> {
        TuningSpace::parse(template)
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?
            .with_context(|| {
                format!(
                    "{name} declares no parameter: add `// kevo: tune NAME V1 V2 ...` lines \
                     (or evaluate it with `kevo eval`)"
                )
            })
    };
    let given_space = match (&given, &args.kernel) {
        (Some(s), Some(p)) => Some(parse(s, &p.display().to_string())?),
        _ => None,
    };

    let config = settings.worker_config()?;
    // What, besides the source, decides a measurement: a stored one is
    // reused only if it was taken with the same compile options, timing
    // and declared ceilings.
    // Not the inputs' secret: a measurement of the same source under the
    // same settings is reused whatever inputs it was taken on.
    let measured_with = json!({
        "eval": kevo_eval::EvalConfig { inputs_secret: None, ..config.eval.clone() },
        "timing": config.timing,
        "declared_ceilings": config.declared_ceilings,
    });
    let mut worker = Worker::start(WorkerCommand::current_exe()?, config)?;
    let device = worker.device().clone();
    let (template, space) = match (given, given_space) {
        (Some(s), Some(space)) => (s, space),
        _ => {
            let template = task
                .tunable(device.dialect)
                .with_context(|| {
                    format!(
                        "task {} has no {} tunable kernel",
                        task.name(),
                        device.dialect
                    )
                })?
                .to_string();
            let space = parse(
                &template,
                &format!("{}'s tunable {} seed", task.name(), device.dialect),
            )?;
            (template, space)
        }
    };
    let kernel_name = match &args.kernel {
        Some(p) => p.display().to_string(),
        None => format!("{}'s tunable {} seed", task.name(), device.dialect),
    };
    let seed_source = task
        .seed(device.dialect)
        .with_context(|| format!("task {} has no {} seed", task.name(), device.dialect))?
        .to_string();
    let budget = Budget {
        evaluations: Some(args.budget.unwrap_or(match args.strategy {
            StrategyKind::Exhaustive => space.valid().len(),
            _ => 32,
        })),
        seconds: args.budget_s,
    };
    let plan = task.sizes(size_set);
    let timeout = match settings.limits.candidate_timeout_s {
        Some(s) => Duration::from_secs_f64(s),
        None => crate::default_timeout(task, size_set, &plan.in_distribution, worker.ceilings()),
    };

    let runtime = tokio::runtime::Runtime::new()?;
    let store = runtime.block_on(args.store.open())?;
    let run = runtime.block_on(store.create_run(&NewRun {
        task: task.name().to_string(),
        backend: device.backend.clone(),
        device: device.name.clone(),
        size_set,
        strategy: "tune".into(),
        config: json!({
            "tune": {
                "strategy": args.strategy,
                "seed": args.seed,
                "budget": budget,
                "kernel": kernel_name,
                "template": template,
                "cache": !args.no_cache,
            },
            "task": task.name(),
            "sizes": size_set,
            "measured_with": measured_with.clone(),
            // As an evolve run records them: how the worker was confined,
            // and what the result depends on besides the settings.
            "sandbox_in_force": worker.sandbox(),
            "provenance": {
                "kevo": kevo_evolve::VERSION,
                "task": {"name": task.name(), "content_hash": task.content_hash()},
                "device": worker.device(),
                "ceilings": worker.ceilings(),
                "seeds": {
                    "inputs_secret": worker.inputs_secret(),
                    "task_seed": task.default_seed(),
                    "strategy": args.seed,
                },
            },
        }),
        rng_state: None,
    }))?;
    if !args.json {
        println!("sandbox: {}", worker.sandbox().summary());
        println!(
            "tune {} on {} ({}), sizes {size_set}: {} parameters, {} of {} configurations valid; \
             strategy {}, budget {}{}; run {run}",
            task.name(),
            device.name,
            device.backend,
            space.parameters().len(),
            space.valid().len(),
            space.total(),
            args.strategy,
            budget.evaluations.unwrap_or(0),
            args.budget_s
                .map(|s| format!(" or {s} s"))
                .unwrap_or_default(),
        );
    }

    // The naive seed, measured in this session: the baseline of the speedups.
    let baseline = worker.evaluate(task.name(), &seed_source, &plan.in_distribution, timeout);
    let mut incumbent: Option<(CandidateId, f64)> = None;
    let mut seed_record = record(&seed_source, "seed", None, baseline.clone().into(), 0);
    seed_record.proposals[0].decision = NewDecision {
        promoted: false,
        incumbent: None,
        island: None,
        cell: None,
        reason: "baseline: the task's naive seed".into(),
    };
    seed_record.checkpoint.incumbent = None;
    let seed_id = runtime.block_on(store.record_iteration(&run, &seed_record))?[0]
        .candidate
        .context("the seed was stored without a candidate")?;

    let bar = (!args.json).then(|| {
        let bar = ProgressBar::new(budget.evaluations.unwrap_or(0).min(space.valid().len()) as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} {msg}")
                .expect("a valid template"),
        );
        bar
    });
    // Which runs measured with our settings, asked once per run.
    let mut settings_of_run: std::collections::HashMap<String, bool> = Default::default();
    let mut same_settings =
        |stored: kevo_store::StoredEvaluation, ours: &Value| -> Result<Option<(i64, Evaluation)>> {
            let candidate = runtime.block_on(store.candidate(stored.candidate_id))?;
            let run_id = candidate.run_id.0.clone();
            let same = match settings_of_run.get(&run_id) {
                Some(same) => *same,
                None => {
                    let info = runtime.block_on(store.run(&candidate.run_id))?;
                    let same = info.config.get("measured_with") == Some(ours);
                    settings_of_run.insert(run_id, same);
                    same
                }
            };
            Ok(same
                .then(|| stored.evaluation().ok().map(|e| (stored.id.0, e)))
                .flatten())
        };
    let started = Instant::now();
    let mut search = args.strategy.build(args.seed);
    let mut failure: Option<anyhow::Error> = None;
    let (trials, stop) = kevo_tune::run(&space, search.as_mut(), budget, |c, index| {
        let source = space.instantiate(&template, c);
        let cached = if args.no_cache {
            None
        } else {
            match runtime.block_on(store.find_measurement(
                task.name(),
                &device.backend,
                &device.name,
                size_set,
                &source_sha256(&source),
            )) {
                Ok(found) => match found.map(|s| same_settings(s, &measured_with)) {
                    Some(Ok(hit)) => hit,
                    Some(Err(e)) => {
                        failure = Some(e);
                        return Step::Break;
                    }
                    None => None,
                },
                Err(e) => {
                    failure = Some(e.into());
                    return Step::Break;
                }
            }
        };
        let (evaluation, cached_from) = match cached {
            Some((id, evaluation)) => (evaluation, Some(id)),
            None => (
                worker.evaluate(task.name(), &source, &plan.in_distribution, timeout),
                None,
            ),
        };
        // Only a correct configuration competes: a suspicious one (beyond
        // the roofline) must not win a search.
        let score = evaluation.outcome.score();
        let promoted = score.is_some_and(|s| incumbent.is_none_or(|(_, b)| s > b));
        let mut r = record(
            &source,
            "tuner",
            Some(args.strategy.name()),
            NewEvaluation {
                evaluation: evaluation.clone(),
                reused_from: cached_from.map(kevo_store::EvaluationId),
            },
            index as u32 + 1,
        );
        let reason = match score {
            Some(_) if promoted => "best configuration so far".to_string(),
            Some(_) => "not better".to_string(),
            None => format!("failed: {}", evaluation.outcome.kind()),
        };
        let kept = if promoted {
            CandidateRef::Proposal(0)
        } else {
            incumbent
                .map(|(id, _)| id.into())
                .unwrap_or(CandidateRef::Proposal(0))
        };
        r.proposals[0].decision = NewDecision {
            promoted,
            incumbent: (promoted || incumbent.is_some()).then_some(kept),
            island: None,
            cell: None,
            reason: format!("{}: {reason}", space.describe(c)),
        };
        r.checkpoint.incumbent = (promoted || incumbent.is_some()).then_some(kept);
        r.checkpoint.spent.wall_s = started.elapsed().as_secs_f64();
        let stored = match runtime.block_on(store.record_iteration(&run, &r)) {
            Ok(ids) => ids[0].candidate.expect("a candidate was recorded"),
            Err(e) => {
                failure = Some(e.into());
                return Step::Break;
            }
        };
        if let Some(s) = score.filter(|_| promoted) {
            incumbent = Some((stored, s));
        }
        if let Some(bar) = &bar {
            bar.inc(1);
            bar.set_message(match incumbent {
                Some((_, s)) => format!("best {s:.4}"),
                None => "no correct configuration yet".into(),
            });
        }
        Step::Scored(
            score,
            Row {
                index,
                configuration: c.clone(),
                evaluation,
                cached_from,
                candidate: stored,
            },
        )
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    if let Some(e) = failure {
        let _ = runtime.block_on(store.mark_failed(&run, &format!("{e:#}")));
        return Err(e.context(format!("tuning run {run} stopped")));
    }
    let best_index = kevo_tune::best(&trials);
    let rows: Vec<Row> = trials.into_iter().map(|t| t.detail).collect();
    // The single-measurement best is a maximum of noisy figures (a dozen
    // of heat2d's 24 within 2% of each other on an H200): the top few are
    // chosen again on interleaved rounds and the choice confirmed against
    // the seed on fresh ones.
    let confirmed = best_index.map(|_| {
        confirm_top(
            &rows,
            &mut |source: &str| {
                worker.evaluate(task.name(), source, &plan.in_distribution, timeout)
            },
            &|c| space.instantiate(&template, c),
            &seed_source,
        )
    });
    let best = match &confirmed {
        Some((ranked, c)) => c.chosen.map(|i| ranked[i]).or(best_index),
        None => None,
    }
    .map(|i| &rows[i]);
    let confirmation = confirmed.as_ref().and_then(|(_, c)| c.confirmation());

    // The held-out gate: the best configuration and the seed, one session.
    let mut held_out = None;
    if let (Some(best), false) = (best, args.no_held_out) {
        let size = plan.held_out.clone();
        let limit = timeout.max(Duration::from_secs(60));
        let source = space.instantiate(&template, &best.configuration);
        let winner = worker.evaluate(task.name(), &source, std::slice::from_ref(&size), limit);
        let seed = worker.evaluate(
            task.name(),
            &seed_source,
            std::slice::from_ref(&size),
            limit,
        );
        let fraction = |e: &Evaluation| {
            e.outcome
                .is_correct()
                .then(|| e.sizes.first().map(|s| s.fraction))
                .flatten()
        };
        let (wf, sf) = (fraction(&winner), fraction(&seed));
        let speedup = match (wf, sf) {
            (Some(w), Some(s)) if s > 0.0 => Some(w / s),
            _ => None,
        };
        let session = format!("{run}-held-out");
        for (id, role, evaluation, frac, speed) in [
            (seed_id, HeldOutRole::Seed, &seed, sf, Some(1.0)),
            (best.candidate, HeldOutRole::Winner, &winner, wf, speedup),
        ] {
            runtime.block_on(store.record_held_out(
                &run,
                &NewHeldOut {
                    candidate_id: id,
                    role,
                    evaluation: evaluation.clone(),
                    session: Some(session.clone()),
                    phi: Some(frac.unwrap_or(0.0)),
                    fraction: frac,
                    speedup: if frac.is_some() { speed } else { None },
                },
            ))?;
        }
        let (verdict, verdict_reason) = kevo_evolve::verdict::classify(false, &winner, &seed);
        held_out = Some(json!({
            "verdict": verdict,
            "verdict_reason": verdict_reason,
            "size": size.label,
            "fraction": wf,
            "seed_fraction": sf,
            "speedup": speedup,
            "outcome": winner.outcome.kind(),
            "seed_outcome": seed.outcome.kind(),
        }));
    }

    let written = match best {
        Some(best) => {
            let path = match &args.out {
                Some(p) => p.clone(),
                None => {
                    let dir = args.store.workspace.join("tuned");
                    std::fs::create_dir_all(&dir)
                        .with_context(|| format!("cannot create {}", dir.display()))?;
                    dir.join(format!("{run}.{}", device.dialect.extension()))
                }
            };
            std::fs::write(&path, space.instantiate(&template, &best.configuration))
                .with_context(|| format!("cannot write {}", path.display()))?;
            Some(path)
        }
        None => None,
    };
    let baseline_score = baseline.outcome.score();
    let summary = json!({
        "stop": stop,
        "evaluations": rows.len(),
        "measured": rows.iter().filter(|r| r.cached_from.is_none()).count(),
        "best": best.map(|b| space.describe(&b.configuration)),
        "best_score": best.and_then(|b| b.evaluation.outcome.score()),
        "seed_score": baseline_score,
        "confirmed": confirmation_json(confirmation.as_ref()),
        "speedup": confirmation.as_ref().filter(|c| c.holds()).map_or(1.0, |c| c.median),
        "held_out": held_out,
        "wall_s": started.elapsed().as_secs_f64(),
    });
    runtime.block_on(store.mark_finished(&run, &summary))?;

    if args.json {
        let report = json!({
            "run": run.as_str(),
            "task": task.name(),
            "device": device.name,
            "backend": device.backend,
            "sizes": size_set,
            "strategy": args.strategy,
            "seed": args.seed,
            "budget": budget,
            "stop": stop,
            "space": {
                "parameters": space.parameters(),
                "constraints": space.requirements().iter().map(|r| json!({
                    "line": r.line, "text": r.constraint.text()
                })).collect::<Vec<_>>(),
                "valid": space.valid().len(),
                "total": space.total(),
            },
            "seed_kernel": evaluation_json(&baseline),
            "trials": rows.iter().map(|r| {
                let mut v = evaluation_json(&r.evaluation);
                v["index"] = json!(r.index);
                v["configuration"] = assignments(&space, &r.configuration);
                v["cached_from"] = json!(r.cached_from);
                v["candidate"] = json!(r.candidate.0);
                v
            }).collect::<Vec<_>>(),
            "best": best.map(|b| json!({
                "configuration": assignments(&space, &b.configuration),
                "score": b.evaluation.outcome.score(),
                "speedup_over_seed": match (b.evaluation.outcome.score(), baseline_score) {
                    (Some(b), Some(s)) if s > 0.0 => Some(b / s),
                    _ => None,
                },
                "kernel": written.as_ref().map(|p| p.display().to_string()),
                "held_out": held_out,
                "confirmed": confirmation_json(confirmation.as_ref()),
            })),
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&space, &rows, &baseline);
        println!(
            "{} configurations in {:.1} s ({} measured, {} from the store); stopped: {}",
            rows.len(),
            started.elapsed().as_secs_f64(),
            rows.iter().filter(|r| r.cached_from.is_none()).count(),
            rows.iter().filter(|r| r.cached_from.is_some()).count(),
            match stop {
                kevo_tune::Stop::Exhausted => "every valid configuration evaluated",
                kevo_tune::Stop::Evaluations => "budget of evaluations spent",
                kevo_tune::Stop::Seconds => "budget of seconds spent",
                kevo_tune::Stop::Interrupted => "interrupted",
            }
        );
        match best {
            Some(b) => {
                let score = b.evaluation.outcome.score().unwrap_or(0.0);
                println!(
                    "best: {}  score {score:.4} (one measurement){}",
                    space.describe(&b.configuration),
                    match baseline_score {
                        Some(s) if s > 0.0 => format!(", the naive seed {s:.4}"),
                        _ => format!(", the naive seed: {}", baseline.outcome.summary()),
                    }
                );
                println!("{}", confirmation_line(confirmation.as_ref()));
                if let Some(h) = &held_out {
                    println!(
                        "held-out {}: {}",
                        h["size"].as_str().unwrap_or("?"),
                        match (h["fraction"].as_f64(), h["speedup"].as_f64()) {
                            (Some(f), Some(s)) =>
                                format!("fraction {f:.4}, {s:.2}x the naive seed"),
                            (Some(f), None) => format!("fraction {f:.4}"),
                            _ => format!(
                                "{} (the best configuration fails the held-out size)",
                                h["outcome"]
                            ),
                        }
                    );
                    if let (Some(v), Some(why)) =
                        (h["verdict"].as_str(), h["verdict_reason"].as_str())
                    {
                        println!("held-out verdict: {v} ({why})");
                    }
                }
                if let Some(p) = &written {
                    println!("kernel: {}", p.display());
                }
            }
            None => println!("no configuration was correct"),
        }
    }
    Ok(if best.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Configurations chosen again among: the best few by their single
/// measurement.
const CONFIRM_TOP: usize = 3;

/// The top [`CONFIRM_TOP`] correct rows (indices into `rows`, best first)
/// and their pick-and-confirm against the seed.
fn confirm_top(
    rows: &[Row],
    evaluate: &mut dyn FnMut(&str) -> Evaluation,
    instantiate: &dyn Fn(&Configuration) -> String,
    seed_source: &str,
) -> (Vec<usize>, kevo_evolve::Confirmed) {
    let score = |i: usize| {
        rows[i]
            .evaluation
            .outcome
            .score()
            .unwrap_or(f64::NEG_INFINITY)
    };
    let mut ranked: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].evaluation.outcome.score().is_some())
        .collect();
    ranked.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
    ranked.truncate(CONFIRM_TOP);
    let sources: Vec<String> = ranked
        .iter()
        .map(|&i| instantiate(&rows[i].configuration))
        .collect();
    let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
    let rounds = kevo_strategy::promotion::DEFAULT_ROUNDS;
    let confirmed = kevo_evolve::pick_and_confirm(&refs, seed_source, rounds, &mut |s| {
        Ok::<_, std::convert::Infallible>(evaluate(s))
    });
    let confirmed = match confirmed {
        Ok(c) => c,
        Err(never) => match never {},
    };
    (ranked, confirmed)
}

fn confirmation_json(c: Option<&kevo_evolve::Confirmation>) -> Value {
    match c {
        Some(c) => json!({
            "speedup": c.median,
            "low": c.low,
            "high": c.high,
            "level": c.level,
            "rounds": c.rounds,
            "ratios": c.ratios,
            "holds": c.holds(),
            "failure": c.failure,
        }),
        None => Value::Null,
    }
}

/// "confirmed: 1.04x the naive seed (93.8% interval 1.02-1.05) over 5
/// fresh rounds", or why nothing is.
fn confirmation_line(c: Option<&kevo_evolve::Confirmation>) -> String {
    match c {
        Some(c) if c.holds() => format!("confirmed against the naive seed: {}", c.describe()),
        Some(c) => format!(
            "not confirmed faster than the naive seed beyond the interval: {} (1.00x: the seed stands)",
            c.describe()
        ),
        None => format!(
            "not confirmed: none of the best {CONFIRM_TOP} beat the naive seed on interleaved rounds (1.00x)"
        ),
    }
}

/// One iteration holding one candidate (no parents: configurations are
/// instances of the template, not descendants of each other).
fn record(
    source: &str,
    provider: &str,
    model: Option<&str>,
    evaluation: NewEvaluation,
    iteration: u32,
) -> IterationRecord {
    IterationRecord {
        iteration,
        proposals: vec![Proposal {
            llm_calls: Vec::new(),
            candidate: Some(NewCandidate {
                source: source.to_string(),
                parents: Vec::new(),
                island: None,
                cell: None,
                descriptors: None,
                provider: Some(provider.to_string()),
                model: model.map(String::from),
            }),
            evaluation: Some(evaluation),
            decision: NewDecision {
                promoted: false,
                incumbent: None,
                island: None,
                cell: None,
                reason: String::new(),
            },
        }],
        checkpoint: Checkpoint {
            incumbent: None,
            previous: Some(CandidateRef::Proposal(0)),
            rng_state: None,
            strategy_state: None,
            spent: Spent::default(),
        },
    }
}

fn assignments(space: &TuningSpace, c: &Configuration) -> Value {
    space
        .assignments(c)
        .into_iter()
        .map(|(n, v)| (n, json!(v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn evaluation_json(e: &Evaluation) -> Value {
    json!({
        "outcome": e.outcome.kind(),
        "summary": e.outcome.summary(),
        "score": e.outcome.score(),
        "fractions": e.sizes.iter().map(|s| json!({
            "size": s.label, "fraction": s.fraction, "median_s": s.time.median_s,
        })).collect::<Vec<_>>(),
    })
}

/// Best first, failures last (in the order they were tried).
fn print_table(space: &TuningSpace, rows: &[Row], baseline: &Evaluation) {
    let labels: Vec<String> = baseline
        .sizes
        .iter()
        .map(|s| s.label.clone())
        .chain(
            rows.iter()
                .flat_map(|r| r.evaluation.sizes.iter().map(|s| s.label.clone())),
        )
        .fold(Vec::new(), |mut v, l| {
            if !v.contains(&l) {
                v.push(l);
            }
            v
        });
    let mut order: Vec<&Row> = rows.iter().collect();
    order.sort_by(|a, b| {
        let s = |r: &Row| r.evaluation.outcome.score().unwrap_or(f64::NEG_INFINITY);
        s(b).total_cmp(&s(a)).then(a.index.cmp(&b.index))
    });
    let width = rows
        .iter()
        .map(|r| space.describe(&r.configuration).len())
        .max()
        .unwrap_or(13)
        .max("configuration".len());
    let mut header = format!("{:>4}  {:<width$}  {:>8}", "#", "configuration", "score");
    for l in &labels {
        header.push_str(&format!("  {:>9}", l));
    }
    header.push_str("  outcome");
    println!("{header}");
    let line = |index: String, name: String, e: &Evaluation, cached: bool| {
        let mut s = format!(
            "{index:>4}  {name:<width$}  {:>8}",
            e.outcome
                .score()
                .map(|s| format!("{s:.4}"))
                .unwrap_or_else(|| "-".into())
        );
        for l in &labels {
            let f = e.sizes.iter().find(|s| &s.label == l).filter(|s| s.correct);
            s.push_str(&format!(
                "  {:>9}",
                f.map(|s| format!("{:.4}", s.fraction))
                    .unwrap_or_else(|| "-".into())
            ));
        }
        s.push_str(&format!(
            "  {}{}",
            if e.outcome.is_correct() {
                "correct".to_string()
            } else {
                e.outcome.summary()
            },
            if cached { " (stored)" } else { "" }
        ));
        println!("{s}");
    };
    for r in order {
        line(
            (r.index + 1).to_string(),
            space.describe(&r.configuration),
            &r.evaluation,
            r.cached_from.is_some(),
        );
    }
    line("seed".into(), "(naive seed)".into(), baseline, false);
}
