//! `kevo evolve`: a new run, a resumed one, or one created for `kevo ask`
//! and `kevo tell` to drive; stopped cleanly by SIGINT or SIGTERM. Also
//! the end-of-run summary that `kevo finish` prints too.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use kevo_evolve::{Environment, EvolveOptions};
use kevo_store::Store;
use kevo_worker::WorkerCommand;

use crate::progress::Progress;
use crate::settings::{ConfigFileArg, RunFlags};
use crate::style::{Stream, Tone, paint};

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

    /// Whether there is a store to read: a workspace holds one once a run
    /// was stored there; a store URL is taken at its word.
    pub fn exists(&self) -> bool {
        match (
            &self.store,
            kevo_store::Target::default_for(&self.workspace),
        ) {
            (Some(_), _) => true,
            (None, kevo_store::Target::Sqlite(path)) => path.is_file(),
            (None, kevo_store::Target::Postgres(_)) => true,
        }
    }

    /// The store, for a command that reads runs: a workspace without one
    /// is an error that names it, and nothing is created there.
    pub async fn open_existing(&self) -> Result<Store> {
        if !self.exists() {
            bail!("{}", self.no_store());
        }
        self.open().await
    }

    /// Why there is nothing to read.
    pub fn no_store(&self) -> String {
        format!(
            "no runs: {} holds no kevo store (`kevo evolve` creates one; --workspace DIR or KEVO_WORKSPACE names another workspace)",
            self.workspace.display()
        )
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
    #[arg(long, conflicts_with_all = ["task", "llm.models", "llm.record", "config", "config_from"])]
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
    if options.llm.is_empty() && options.iterations == 0 {
        // Nothing to propose: the seed alone, evaluated, stored and scored.
        options.llm = vec!["none".into()];
    }
    if options.llm.is_empty() {
        bail!("no model: give --llm SPEC, or `models` under [llm] in the config file");
    }
    if options.iterations > 0 && options.llm.iter().any(|m| m.trim() == "none") {
        bail!(
            "--llm none is no model: it serves runs of no proposals (--iterations 0); this run asks for {}",
            options.iterations
        );
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
    let id = store.resolve_run(reference).await.with_context(|| {
        format!("--reference-kernel {reference}: neither a file nor a stored run")
    })?;
    let info = store.run(&id).await.with_context(|| {
        format!("--reference-kernel {reference}: neither a file nor a stored run")
    })?;
    let best = store
        .best_candidate(&id)
        .await?
        .with_context(|| format!("--reference-kernel: run {reference} has no correct candidate"))?;
    let dialect = crate::cross::dialect_of(&info.backend)
        .with_context(|| format!("--reference-kernel {reference}"))?;
    Ok(kevo_proposer::ReferenceKernel {
        dialect,
        origin: format!("the best kernel of run {reference} on {}", info.device),
        source: best.candidate.source,
    })
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
        let resume = match &args.resume {
            Some(name) => Some(env.store.resolve_run(name).await?.0),
            None => None,
        };
        if let Some(run) = &resume {
            *run_id.lock().unwrap_or_else(|e| e.into_inner()) = Some(run.clone());
        }
        let session = async {
            Ok::<_, anyhow::Error>(match &resume {
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
                // stopped, the heartbeat ended.
                return stop_interrupted(&env, &run_id, signal).await;
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

/// After a signal: a second one exits at once; the run (if it exists yet)
/// is marked interrupted, its abandoned model calls stored, and how to
/// resume it said. Exit status 130.
// The message passes a word through a width-free `{}` ("interrupt").
#[allow(clippy::print_literal)]
async fn stop_interrupted(
    env: &Environment,
    run_id: &std::sync::Mutex<Option<String>>,
    signal: &str,
) -> Result<ExitCode> {
    tokio::spawn(async {
        interrupted().await;
        eprintln!("kevo: second {} signal; exiting now", "interrupt");
        std::process::exit(130);
    });
    let run = run_id.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let reason = format!("interrupted by {signal}");
    if let Some(run) = &run {
        let abandoned = kevo_evolve::interrupt(env, run, &reason).await?;
        if abandoned > 0 {
            eprintln!("kevo: {abandoned} model call(s) abandoned and stored");
        }
        eprintln!("kevo: run {run} {reason}; continue it with `kevo evolve --resume {run}`");
    } else {
        eprintln!("kevo: {reason} before the run started");
    }
    Ok(ExitCode::from(130))
}

/// The end-of-run summary, as `kevo evolve` and `kevo finish` print it.
pub(crate) fn print_summary(summary: &kevo_evolve::Summary) {
    println!(
        "run {} ({}): {}",
        summary.run, summary.task, summary.stop_reason
    );
    // The headline first, then the winner's scores, each named by the
    // measurement it comes from (docs/guide/searching.md, "Which number
    // is which").
    let headline = serde_json::to_value(summary)
        .ok()
        .and_then(|v| kevo_report::Headline::of(&v));
    if let Some(h) = &headline {
        println!(
            "{} {}",
            paint(Stream::Stdout, Tone::Heading, "speedup:"),
            h.speedup_text()
        );
    }
    println!(
        "winner: {}, score {}",
        crate::printers::winner_name(summary.best_candidate, summary.best_iteration),
        headline
            .as_ref()
            .and_then(|h| h.score_text())
            .unwrap_or_else(|| format!("{:.4}", summary.best_score)),
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
        let label = paint(Stream::Stdout, Tone::Warning, "SUSPICIOUS");
        println!("{label} (never scored): {line}");
    }
    println!("the winning kernel: kevo export {}", summary.run);
}

/// A cost that says when part of it is unknown: "$0.0000" alone would
/// claim a local or unpriced model cost nothing; with nothing known it
/// says so.
pub(crate) fn cost_text(usd: f64, unknown_calls: u64) -> String {
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
