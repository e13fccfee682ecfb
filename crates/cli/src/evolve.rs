//! `kevo evolve`, `kevo runs`, `kevo show` and `kevo export`.
// Table headers pass their titles through the same width specifiers as the
// rows below them, which keeps the columns aligned by construction.
#![allow(clippy::print_literal)]

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kevo_evolve::{Environment, Event, EvolveOptions};
use kevo_store::{RunId, Store};
use kevo_strategy::{Archive, Axis, CellElite, LEVELS};
use kevo_worker::WorkerCommand;

use crate::settings::{ConfigFileArg, RunFlags};

#[derive(Args)]
pub struct StoreArgs {
    /// Workspace directory: the SQLite store and the run directories.
    #[arg(long, default_value = ".kevo", env = "KEVO_WORKSPACE")]
    pub workspace: PathBuf,
    /// A store other than the workspace's SQLite file, e.g. postgres://host/db.
    #[arg(long, env = "KEVO_STORE")]
    pub store: Option<String>,
}

impl StoreArgs {
    pub async fn open(&self) -> Result<Store> {
        Ok(match &self.store {
            Some(url) => Store::open(url).await?,
            None => Store::open_workspace(&self.workspace).await?,
        })
    }
}

#[derive(Args)]
pub struct EvolveArgs {
    #[command(flatten)]
    run: RunFlags,
    #[command(flatten)]
    config: ConfigFileArg,
    /// Start with the settings of a stored run (its recording file left
    /// out); --config and flags given as well win over them.
    #[arg(long, value_name = "RUN")]
    config_from: Option<String>,
    /// Show this kernel of the task in every prompt as a reference
    /// implementation from another dialect or device (KForge's
    /// cross-platform reference): a file (.cu, .cl or .metal), or a stored
    /// run's id (its best kernel).
    #[arg(long, value_name = "FILE|RUN", conflicts_with = "resume")]
    reference_kernel: Option<String>,
    /// Continue a run from its last completed step, with its stored
    /// settings.
    #[arg(long, conflicts_with_all = ["task", "llm", "record", "config", "config_from"])]
    resume: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
    /// Print only the final summary.
    #[arg(long)]
    quiet: bool,
    /// Print progress and the summary as JSON lines.
    #[arg(long)]
    json: bool,
}

/// The options of a new run: stored run, file and flags layered, the seed
/// kernel read, and what a run needs beyond `eval`'s settings checked.
async fn new_run_options(args: &EvolveArgs, store: &Store) -> Result<EvolveOptions> {
    let (from_run, stored_start) = match &args.config_from {
        Some(run) => {
            let (layer, start) = crate::settings::from_run(store, run).await?;
            (Some(layer), start)
        }
        None => (None, None),
    };
    let config = crate::settings::effective(from_run, &args.config, args.run.layer()?)?;
    let mut options = config.to_options()?;
    if options.llm.is_empty() {
        bail!("no model: give --llm SPEC, or `models` under [llm] in the config file");
    }
    options.start_source = match &config.seed_kernel {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read seed kernel {}", p.display()))?,
        ),
        None => stored_start,
    };
    if let Some(reference) = &args.reference_kernel {
        options.reference_kernel = Some(reference_kernel(reference, store).await?);
    }
    Ok(options)
}

/// `--reference-kernel FILE|RUN`: a kernel file (its dialect from the
/// extension), else a stored run's best kernel (its dialect the run's).
async fn reference_kernel(
    reference: &str,
    store: &Store,
) -> Result<kevo_proposer::ReferenceKernel> {
    let path = Path::new(reference);
    if path.is_file() {
        let dialect = match path.extension().and_then(|e| e.to_str()) {
            Some("cu") => kevo_backend::Dialect::Cuda,
            Some("cl") => kevo_backend::Dialect::OpenCl,
            Some("metal") => kevo_backend::Dialect::Metal,
            _ => bail!(
                "--reference-kernel {reference}: name a .cu, .cl or .metal file (its dialect \
                 comes from the extension), or a run id"
            ),
        };
        let source = std::fs::read_to_string(path)
            .with_context(|| format!("--reference-kernel: cannot read {reference}"))?;
        return Ok(kevo_proposer::ReferenceKernel {
            dialect,
            origin: path
                .file_name()
                .map_or(reference.to_string(), |n| n.to_string_lossy().into_owned()),
            source,
        });
    }
    let id = RunId(reference.to_string());
    let info = store.run(&id).await.with_context(|| {
        format!("--reference-kernel {reference}: neither a file nor a stored run")
    })?;
    let best = store
        .best_candidate(&id)
        .await?
        .with_context(|| format!("--reference-kernel: run {reference} has no correct candidate"))?;
    let dialect = match info.backend.as_str() {
        "cuda" => kevo_backend::Dialect::Cuda,
        "metal" => kevo_backend::Dialect::Metal,
        "triton" => kevo_backend::Dialect::Triton,
        _ => kevo_backend::Dialect::OpenCl,
    };
    Ok(kevo_proposer::ReferenceKernel {
        dialect,
        origin: format!("the best kernel of run {reference} on {}", info.device),
        source: best.candidate.source,
    })
}

/// Live progress: a spinner line with iteration, best score, speedup, last
/// outcome, tokens and cost; JSON lines with --json; nothing with --quiet.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    json: bool,
    quiet: bool,
    iterations: u32,
    /// Iterations finished in this session, for the throughput.
    done_in_session: u32,
    /// The run's id once it is known, for the signal handler.
    run: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// Whether iteration lines show throughput and the device's busy
    /// share (not for `kevo tell`'s single iteration).
    pace: bool,
}

impl Progress {
    pub(crate) fn new(json: bool, quiet: bool) -> Self {
        let bar = (!json && !quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos}/{len} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            // Retry and wait notices go above the bar, not through it.
            let above = bar.clone();
            kevo_proposer::notice::set_sink(move |line| above.println(format!("kevo: {line}")));
            bar
        });
        Progress {
            bar,
            json,
            quiet,
            iterations: 0,
            done_in_session: 0,
            run: Default::default(),
            pace: true,
        }
    }

    /// For one iteration at a time (`kevo tell`): no throughput.
    pub(crate) fn single(mut self) -> Self {
        self.pace = false;
        self
    }

    fn line(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None if !self.quiet && !self.json => eprintln!("{text}"),
            None => {}
        }
    }
}

impl kevo_evolve::Observer for Progress {
    fn on(&mut self, event: &Event) {
        if let Event::Created { run } | Event::Started { run, .. } = event {
            *self.run.lock().unwrap_or_else(|e| e.into_inner()) = Some(run.clone());
        }
        if self.json {
            if let Ok(text) = serde_json::to_string(event) {
                println!("{text}");
            }
            return;
        }
        match event {
            // Printed with the seed's result, in `Started`.
            Event::Created { .. } => {}
            Event::Batch {
                batch,
                status,
                done,
                total,
            } => {
                let text = format!("batch {batch}: {status}, {done} of {total} answered");
                match &self.bar {
                    Some(bar) => bar.set_message(text),
                    None => self.line(text),
                }
            }
            Event::Started {
                run,
                task,
                device,
                backend,
                resumed_from,
                iterations,
                sandbox,
            } => {
                self.iterations = *iterations;
                if let Some(bar) = &self.bar {
                    bar.set_length(u64::from(*iterations));
                    bar.set_position(u64::from(resumed_from.unwrap_or(0)));
                }
                let how = match resumed_from {
                    Some(k) => format!("resuming after iteration {k}"),
                    None => "new run".into(),
                };
                self.line(format!("run {run}: {task} on {device} ({backend}), {how}"));
                self.line(format!("sandbox: {sandbox}"));
            }
            Event::Seed { score, wall_s } => {
                self.line(format!("seed: score {score:.4} ({wall_s:.2} s)"))
            }
            Event::Iteration {
                iteration,
                outcomes,
                scores,
                promoted,
                best_score,
                speedup,
                input_tokens,
                output_tokens,
                cost_usd,
                unknown_cost_calls,
                unknown_usage_calls,
                verdicts,
                in_flight,
                queued,
                evaluating_s,
                session_s,
                models,
                prompt_variant,
                arms,
                ..
            } => {
                let last = outcomes
                    .iter()
                    .zip(scores)
                    .map(|(o, s)| match s {
                        Some(s) => format!("{o} {s:.4}"),
                        None => o.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let mark = if *promoted { " NEW BEST" } else { "" };
                // "re-measured over 5 interleaved rounds: ... (within noise,
                // not promoted)": why an apparent gain did or did not count.
                let mark = verdicts
                    .iter()
                    .fold(mark.to_string(), |m, v| format!("{m} | {v}"));
                self.done_in_session += 1;
                // Throughput and the device's busy share, this session.
                let pace = if self.pace && *session_s > 0.0 {
                    format!(
                        " | {:.1}/min, device busy {:.0}%{}",
                        f64::from(self.done_in_session) * 60.0 / session_s,
                        100.0 * evaluating_s / session_s,
                        match (*in_flight, *queued) {
                            (0, 0) => String::new(),
                            (n, 0) => format!(", {n} in flight"),
                            (n, q) => format!(", {n} in flight, {q} waiting for the device"),
                        }
                    )
                } else {
                    String::new()
                };
                // Which model answered and which prompt variant asked, and
                // the bandit's tally: "model b (ucb: a 3 calls mean 0.00,
                // b 9 calls mean 0.21)".
                let mut who = Vec::new();
                if !models.is_empty() {
                    who.push(format!("model {}", models.join(", ")));
                }
                if let Some(v) = prompt_variant {
                    who.push(format!("prompt v{v}"));
                }
                if !arms.is_empty() {
                    who.push(format!(
                        "ucb: {}",
                        arms.iter()
                            .map(|a| format!(
                                "{} {} calls mean {:.3}{}",
                                a.model,
                                a.calls,
                                a.mean_reward,
                                if a.cost_usd > 0.0 {
                                    format!(" ${:.2}", a.cost_usd)
                                } else {
                                    String::new()
                                }
                            ))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                let who = if who.is_empty() {
                    String::new()
                } else {
                    format!(" | {}", who.join(" | "))
                };
                let msg = format!(
                    "best {best_score:.4} ({speedup:.2}x seed) | last: {last}{mark}{who} | tokens {input_tokens}+{output_tokens}{} | {}{pace}",
                    match unknown_usage_calls {
                        0 => String::new(),
                        n => format!(" + unknown ({n} call(s) without usable counts)"),
                    },
                    cost_text(*cost_usd, *unknown_cost_calls)
                );
                match &self.bar {
                    Some(bar) => {
                        bar.set_position(u64::from(*iteration));
                        bar.set_message(msg.clone());
                        if *promoted || !verdicts.is_empty() {
                            bar.println(format!("iteration {iteration}: {msg}"));
                        }
                    }
                    None if self.iterations == 0 => {
                        self.line(format!("iteration {iteration}: {msg}"))
                    }
                    None => self.line(format!("iteration {iteration}/{}: {msg}", self.iterations)),
                }
            }
            Event::MetaPrompt {
                iteration,
                parent,
                variant,
                applied,
                rejected,
                diagnosis,
                failed,
            } => {
                let what = match (variant, failed) {
                    (_, Some(why)) => format!("no answer ({why}); the prompt stays as it is"),
                    (Some(v), None) => {
                        format!("variant {v} from {parent}, edited {}", applied.join(", "))
                    }
                    (None, None) => format!("no edit applied to variant {parent}"),
                };
                let mut text = format!("meta-prompter before proposal {iteration}: {what}");
                if !rejected.is_empty() {
                    text.push_str(&format!(
                        "; {} edit(s) rejected: {}",
                        rejected.len(),
                        rejected.join("; ")
                    ));
                }
                if !diagnosis.is_empty() {
                    let short: String = diagnosis.chars().take(200).collect();
                    text.push_str(&format!("\n  diagnosis: {}", short.replace('\n', " ")));
                }
                match &self.bar {
                    Some(bar) => bar.println(text),
                    None => self.line(text),
                }
            }
            Event::HeldOut(h) => self.line(format!(
                "held-out {}: winner {}; seed {}; Φ = {:.4}{}",
                h.size,
                h.winner_roofline
                    .clone()
                    .unwrap_or_else(|| h.winner_outcome.clone()),
                h.seed_fraction
                    .map(|f| format!("{:.1}% of the same ceiling", f * 100.0))
                    .unwrap_or_else(|| h.seed_outcome.clone()),
                h.phi,
                h.speedup
                    .map(|s| format!(", {s:.2}x the seed"))
                    .unwrap_or_default()
            )),
            Event::Finished(_) => {
                if let Some(bar) = &self.bar {
                    bar.finish_and_clear();
                }
            }
        }
    }
}

/// The first SIGINT (Ctrl-C) or SIGTERM, by name.
pub(crate) async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // No handler could be installed: never report a signal.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

pub fn evolve(args: EvolveArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = args.store.open().await?;
        let env = Environment {
            store,
            workspace: args.store.workspace.clone(),
            worker: WorkerCommand::current_exe()?,
            in_flight: Default::default(),
        };
        let mut progress = Progress::new(args.json, args.quiet);
        let run_id = progress.run.clone();
        if let Some(run) = &args.resume {
            *run_id.lock().unwrap_or_else(|e| e.into_inner()) = Some(run.clone());
        }
        let session = async {
            Ok::<_, anyhow::Error>(match &args.resume {
            Some(run) => Some(kevo_evolve::resume(run, &env, &mut progress).await?),
            None => {
                let options = new_run_options(&args, &env.store).await?;
                if options.is_external() {
                    if options.concurrency > 1 {
                        bail!("--concurrency has no effect with --llm external: `kevo ask RUN --n K` hands out K prompts");
                    }
                    let run = kevo_evolve::create(options, &env, &mut progress).await?;
                    if !args.json {
                        println!("run {run}: the seed is evaluated; the run waits for proposals");
                        println!("next: kevo ask {run}");
                    }
                    None
                } else {
                    Some(kevo_evolve::start(options, &env, &mut progress).await?)
                }
            }
        })
        };
        let summary = tokio::select! {
            result = session => result?,
            signal = interrupted() => {
                // The session future is dropped: in-flight model calls are
                // abandoned (a cmd: proposer's processes killed), workers
                // stopped, the heartbeat ended. A second signal exits at once.
                tokio::spawn(async {
                    interrupted().await;
                    eprintln!("kevo: second {} signal; exiting now", "interrupt");
                    std::process::exit(130);
                });
                let run = run_id.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let reason = format!("interrupted by {signal}");
                if let Some(run) = &run {
                    let abandoned = kevo_evolve::interrupt(&env, run, &reason).await?;
                    if abandoned > 0 {
                        eprintln!("kevo: {abandoned} model call(s) abandoned and stored");
                    }
                    eprintln!("kevo: run {run} {reason}; continue it with `kevo evolve --resume {run}`");
                } else {
                    eprintln!("kevo: {reason} before the run started");
                }
                return Ok(ExitCode::from(130));
            }
        };
        let Some(summary) = summary else {
            return Ok(ExitCode::SUCCESS);
        };
        if !args.json {
            print_summary(&summary);
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The end-of-run summary, as `kevo evolve` and `kevo finish` print it.
pub(crate) fn print_summary(summary: &kevo_evolve::Summary) {
    println!(
        "run {} ({}): {}",
        summary.run, summary.task, summary.stop_reason
    );
    println!(
        "in-distribution: seed {:.4} -> best {:.4} ({:.2}x{}), found at iteration {}",
        summary.seed_score,
        summary.best_score,
        summary.speedup,
        match &summary.final_pick {
            Some(p) if p.confirmation.is_some() && p.unconfirmed.is_none() =>
                ", confirmed against the seed on fresh rounds",
            Some(_) => ", the seed kept: nothing to measure against itself",
            None => "",
        },
        summary.best_iteration
    );
    if let Some(pick) = &summary.final_pick {
        println!("{}", pick.describe());
    }
    if let Some(h) = &summary.held_out {
        println!(
            "held-out {}: Φ = {:.4}{}, {} (seed: {})",
            h.size,
            h.phi,
            h.winner_roofline
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default(),
            h.speedup
                .map(|s| format!("{s:.2}x the seed"))
                .unwrap_or_else(|| h.winner_outcome.clone()),
            h.seed_outcome
        );
        if let (Some(v), Some(why)) = (h.verdict, &h.verdict_reason) {
            println!("held-out verdict: {v} ({why})");
        }
    }
    if let Some(safety) = &summary.safety {
        println!("winner under compute-sanitizer: {}", safety.line());
    }
    println!(
        "spent: {}, {}, {:.1} s",
        tokens_text(
            summary.spent.input_tokens,
            summary.spent.output_tokens,
            summary.unknown_usage_calls
        ),
        cost_text(summary.spent.cost_usd, summary.unknown_cost_calls),
        summary.spent.wall_s
    );
    println!(
        "promotion: {}; re-measurement: {}",
        summary.promotion,
        summary
            .remeasure
            .describe()
            .unwrap_or_else(|| "none".into())
    );
    if let Some(v) = &summary.validation {
        println!(
            "validation: {} candidate(s) checked before being kept, {} rejected ({:.2} s device, {:.1} s wall)",
            v.checked, v.rejected, v.device_s, v.wall_s
        );
    }
    for line in &summary.suspicious {
        println!("SUSPICIOUS (never scored): {line}");
    }
    println!("winner: kevo export {}", summary.run);
}

fn score(s: Option<f64>) -> String {
    s.map(|s| format!("{s:.4}")).unwrap_or_else(|| "-".into())
}

pub fn runs(store: StoreArgs, json: bool) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = store.open().await?;
        let runs = store.list_runs().await?;
        // A run whose process died (kill -9, a crash) is still `running`
        // in the store; without a recent heartbeat it is shown as `dead`
        // (resumable like an interrupted one).
        let now = chrono::Utc::now();
        let shown = |r: &kevo_store::RunListing| {
            if r.status == kevo_store::RunStatus::Running && !r.is_alive(now) {
                "dead"
            } else {
                r.status.as_str()
            }
        };
        if json {
            let values = runs
                .iter()
                .map(|r| {
                    let mut v = serde_json::to_value(r)?;
                    v["status"] = serde_json::json!(shown(r));
                    Ok(v)
                })
                .collect::<Result<Vec<_>, serde_json::Error>>()?;
            println!("{}", serde_json::to_string_pretty(&values)?);
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "{:<28} {:<10} {:<8} {:<6} {:<12} {:>5} {:>8} {:>8} {:>9}  {:<19}  {}",
            "run",
            "task",
            "backend",
            "sizes",
            "status",
            "iter",
            "best",
            "speedup",
            "cost $",
            "held-out",
            "device"
        );
        for r in runs {
            println!(
                "{:<28} {:<10} {:<8} {:<6} {:<12} {:>5} {:>8} {:>8} {:>9.4}  {:<19}  {}",
                r.id.0,
                r.task,
                r.backend,
                r.size_set.to_string(),
                shown(&r),
                r.last_iteration
                    .map(|i| i.to_string())
                    .unwrap_or_else(|| "-".into()),
                score(r.best_score),
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

/// A cost that says when part of it is unknown: "$0.0000" alone would
/// claim a local or unpriced model cost nothing; with nothing known it
/// says so.
fn cost_text(usd: f64, unknown_calls: u64) -> String {
    match unknown_calls {
        0 => format!("${usd:.4}"),
        n if usd == 0.0 => format!("cost not tracked ({n} call(s) without a known cost)"),
        n => format!("${usd:.4} + unknown ({n} call(s) without a known cost)"),
    }
}

/// Token counts that say when calls reported none: "0 input + 0 output
/// tokens" would claim a `cmd:` or replay proposer used no tokens.
fn tokens_text(input: u64, output: u64, unknown_calls: u64) -> String {
    match unknown_calls {
        0 => format!("{input} input + {output} output tokens"),
        n if input + output == 0 => format!("tokens not tracked ({n} call(s) reported none)"),
        n => format!("{input} input + {output} output tokens + {n} call(s) that reported none"),
    }
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
        "kevo {}{task}; {} driver {} ({}); ceilings {:.1} GB/s, {:.0} GFLOP/s ({}){seeds}",
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
        let store = store.open().await?;
        let id = RunId(run.to_string());
        let info = store.run(&id).await?;
        let history = store.history(&id).await?;
        let best = store.best_candidate(&id).await?;
        let held_out = store.held_out_results(&id).await?;
        let remeasurements = store.remeasurements(&id).await?;
        let proposals = store.proposals(&id).await?;
        let abandoned: Vec<_> = store
            .llm_calls(&id)
            .await?
            .into_iter()
            .filter(kevo_evolve::is_abandoned)
            .collect();
        let checkpoint = store.last_checkpoint(&id).await?;
        let strategy = match &checkpoint {
            Some(cp) => kevo_evolve::stored_strategy(&info.strategy, cp)?,
            None => None,
        };
        // The ensemble's choices (with a bandit, its arms) and the prompt
        // variants, as the last checkpoint holds them.
        let ensemble = checkpoint.as_ref().and_then(kevo_evolve::stored_ensemble);
        let arms = ensemble
            .as_ref()
            .map(kevo_evolve::arm_stats)
            .unwrap_or_default();
        let prompt_archive = checkpoint
            .as_ref()
            .and_then(kevo_evolve::stored_prompt_archive);
        let variant_of: HashMap<i64, u32> = prompt_archive
            .iter()
            .flat_map(|a| &a.variants)
            .flat_map(|v| v.candidates.iter().map(move |c| (*c, v.id)))
            .collect();
        // Which ensemble member answered each iteration's proposals.
        let mut answered_by: HashMap<u32, Vec<String>> = HashMap::new();
        if ensemble.is_some() {
            for c in store.llm_calls(&id).await? {
                if c.call.purpose == "propose" && c.call.response.is_some() {
                    answered_by
                        .entry(c.iteration)
                        .or_default()
                        .push(c.call.provider.clone());
                }
            }
        }
        // Every iteration's per-size numbers (its first in-distribution
        // evaluation), the last iteration's included: no prompt shows it.
        let mut measured: HashMap<i64, kevo_eval::Evaluation> = HashMap::new();
        for c in history.iter().filter_map(|h| h.candidate_id) {
            if measured.contains_key(&c.0) {
                continue;
            }
            let first = store
                .evaluations_of(c)
                .await?
                .into_iter()
                .find(|e| e.kind == kevo_store::EvaluationKind::InDistribution)
                .and_then(|e| e.evaluation().ok());
            if let Some(e) = first {
                measured.insert(c.0, e);
            }
        }
        if json {
            let history: Vec<serde_json::Value> = history
                .iter()
                .map(|h| {
                    let mut v = serde_json::to_value(h).unwrap_or_default();
                    let sizes = h
                        .candidate_id
                        .and_then(|c| measured.get(&c.0))
                        .map(|e| e.sizes.iter().map(size_json).collect::<Vec<_>>());
                    if let (Some(o), Some(sizes)) = (v.as_object_mut(), sizes) {
                        o.insert("sizes".into(), serde_json::Value::Array(sizes));
                    }
                    v
                })
                .collect();
            let value = serde_json::json!({
                "run": info, "history": history, "best": best, "held_out": held_out,
                "cross": store.cross_evaluations(&id).await?,
                "remeasurements": remeasurements,
                "validations": store.validations(&id).await?,
                "proposals": proposals.iter().map(|p| serde_json::json!({
                    "id": p.id, "status": p.status, "asked_after": p.asked_after,
                    "batch": p.batch, "iteration": p.iteration, "reason": p.reason,
                    "asked_at": p.asked_at, "closed_at": p.closed_at,
                })).collect::<Vec<_>>(),
                "abandoned_calls": abandoned,
                "archive": strategy.as_ref().map(|s| s.archive()),
                "strategy_state": strategy.as_ref().map(|s| s.state()),
                "model_choice": info.config["model_choice"],
                "models": arms,
                "prompt_archive": prompt_archive,
            });
            println!("{}", serde_json::to_string_pretty(&value)?);
            return Ok(ExitCode::SUCCESS);
        }
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
            "score",
            // (1+1) keeps only a new best; the other strategies keep
            // archive and island members.
            if info.strategy == "one_plus_one" {
                "new best"
            } else {
                "kept"
            },
            "reason"
        );
        for h in &history {
            let mut by = Vec::new();
            if h.iteration > 0
                && let Some(models) = answered_by.get(&h.iteration)
            {
                by.push(format!("model {}", models.join(", ")));
            }
            if let Some(v) = h.candidate_id.and_then(|c| variant_of.get(&c.0)) {
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
            if let Some(e) = h.candidate_id.and_then(|c| measured.get(&c.0)) {
                for s in &e.sizes {
                    println!("{:>11}{}", "", size_text(s));
                }
            }
        }
        if let Some(s) = &strategy {
            print_archive(&s.archive());
        }
        if !arms.is_empty() {
            print_arms(info.config["model_choice"].as_str().unwrap_or("ucb"), &arms);
        }
        if let Some(a) = &prompt_archive {
            print_prompt_archive(a, info.config["meta_prompt"]["every"].as_u64());
        }
        // Prompts handed out (ask/tell, batches) and not answered.
        for p in proposals
            .iter()
            .filter(|p| p.status != kevo_store::ProposalStatus::Answered)
        {
            println!(
                "proposal {} ({}{}), asked after iteration {}{}",
                p.id,
                p.status,
                p.batch
                    .as_ref()
                    .map(|b| format!(", batch {b}"))
                    .unwrap_or_default(),
                p.asked_after,
                p.reason
                    .as_ref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            );
        }
        for c in &abandoned {
            println!(
                "iteration {}: a model call to {} {}",
                c.iteration,
                c.call.provider,
                c.call.error.as_deref().unwrap_or_default()
            );
        }
        // Candidates that ran faster than the hardware allows: never
        // scored, and worth a look (a reward hack or a wrong ceiling).
        for h in history
            .iter()
            .filter(|h| h.outcome_kind.as_deref() == Some("suspicious"))
        {
            let Some(c) = h.candidate_id else { continue };
            for e in store.evaluations_of(c).await? {
                if let Ok(kevo_eval::Evaluation {
                    outcome: kevo_eval::Outcome::Suspicious { size, reason, .. },
                    ..
                }) = e.evaluation()
                {
                    println!(
                        "SUSPICIOUS: iteration {} candidate {} at size {size}: {reason}",
                        h.iteration, c.0
                    );
                }
            }
        }
        if let Some(b) = &best {
            println!(
                "winner: candidate {} from iteration {} ({}), score {}",
                b.candidate.id.0,
                b.candidate.iteration,
                b.candidate
                    .model
                    .as_deref()
                    .or(b.candidate.provider.as_deref())
                    .unwrap_or("?"),
                score(b.evaluation.score)
            );
            if let Ok(e) = b.evaluation.evaluation() {
                for s in &e.sizes {
                    println!(
                        "  {:<16} {:>10.4} ms  {:>9.2} {}  {}",
                        s.label,
                        s.time.median_s * 1e3,
                        s.achieved,
                        s.unit,
                        s.roofline_text()
                    );
                }
            }
        }
        for h in &held_out {
            // The size's fraction with its ceiling and level, from the
            // stored evaluation (older rows without it say what it is of).
            let evaluation = store
                .evaluations_of(h.candidate_id)
                .await?
                .into_iter()
                .find(|e| e.id == h.evaluation_id)
                .and_then(|e| e.evaluation().ok());
            let roofline = match evaluation.as_ref().and_then(|e| e.sizes.first()) {
                Some(s) => s.roofline_text(),
                None => format!(
                    "fraction {} of the task's DRAM or FP32 roofline",
                    score(h.fraction)
                ),
            };
            println!(
                "held-out ({}): candidate {} {}: Φ {} ({roofline}), speedup {}",
                h.role.as_str(),
                h.candidate_id.0,
                h.outcome_kind,
                score(h.phi),
                score(h.speedup)
            );
        }
        if let Some(v) = verdict_line(info.summary.as_ref()) {
            println!("{v}");
        }
        for c in store.cross_evaluations(&id).await? {
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
        for v in store.validations(&id).await? {
            println!(
                "validation (iteration {}): candidate {} {}: {}",
                v.iteration,
                v.candidate_id.0,
                if v.passed { "passed" } else { "rejected" },
                v.reason
            );
        }
        Ok(ExitCode::SUCCESS)
    })
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
        "{:<12} {:.4} ms ({:.4}-{:.4} over {} runs)  {}",
        s.label,
        s.time.median_s * 1e3,
        s.time.min_s * 1e3,
        s.time.max_s * 1e3,
        s.time.samples_s.len(),
        s.roofline_text()
    )
}

/// The same as JSON: times in ms with their spread, achieved rate, fraction
/// of the scored ceiling.
fn size_json(s: &kevo_eval::SizeResult) -> serde_json::Value {
    let finite = |x: f64| x.is_finite().then_some(x);
    serde_json::json!({
        "label": s.label,
        "correct": s.correct,
        "median_ms": finite(s.time.median_s * 1e3),
        "min_ms": finite(s.time.min_s * 1e3),
        "max_ms": finite(s.time.max_s * 1e3),
        "runs": s.time.samples_s.len(),
        "achieved": finite(s.achieved),
        "unit": s.unit,
        "fraction": finite(s.fraction),
    })
}

/// The strategy's population: MAP-Elites as memory x algorithm grids, one
/// per coordination level that has an elite; islands as their members.
fn print_archive(archive: &Archive) {
    match archive {
        Archive::Incumbent(e) => println!("incumbent: candidate {} score {:.4}", e.id, e.score),
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

/// A level name cut to fit a grid column.
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

fn short(name: &str) -> String {
    name.chars().take(16).collect()
}

/// `kevo show RUN --config`: the run's settings as a config file.
pub fn show_config(run: &str, store: StoreArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = store.open().await?;
        let info = store.run(&RunId(run.to_string())).await?;
        if info.strategy == "tune" {
            // A tuning run has no evolution settings: its own, as stored.
            println!("# run {run} is a `kevo tune` run; its settings as stored:");
            println!("{}", serde_json::to_string_pretty(&info.config)?);
            return Ok(ExitCode::SUCCESS);
        }
        let options = kevo_evolve::stored_options(&info)?;
        println!("# the settings of run {run}");
        if options.start_source.is_some() {
            println!(
                "# started from a kernel of its own (not the task's seed): `--config-from {run}` keeps it"
            );
        }
        print!("{}", kevo_evolve::RunConfig::from_options(&options).to_toml());
        Ok(ExitCode::SUCCESS)
    })
}

pub fn export(run: &str, out: Option<&Path>, store: StoreArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = store.open().await?;
        let id = RunId(run.to_string());
        let best = store
            .best_candidate(&id)
            .await?
            .with_context(|| format!("run {run} has no correct candidate"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spend_says_what_was_not_tracked() {
        assert_eq!(tokens_text(10, 20, 0), "10 input + 20 output tokens");
        assert_eq!(
            tokens_text(0, 0, 6),
            "tokens not tracked (6 call(s) reported none)"
        );
        assert_eq!(
            tokens_text(10, 20, 2),
            "10 input + 20 output tokens + 2 call(s) that reported none"
        );
        assert_eq!(cost_text(0.5, 0), "$0.5000");
        assert_eq!(
            cost_text(0.0, 6),
            "cost not tracked (6 call(s) without a known cost)"
        );
        assert_eq!(
            cost_text(0.25, 1),
            "$0.2500 + unknown (1 call(s) without a known cost)"
        );
    }
}
