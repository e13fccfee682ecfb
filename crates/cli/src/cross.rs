//! `kevo cross RUN`: a run's winner and its seed evaluated together, in one
//! session, on another device or backend than the run's (KernelFoundry's
//! hardware-awareness question: does a kernel found on one device keep its
//! lead on another?), stored with the run.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use kevo_backend::{BackendName, Dialect};
use kevo_store::{CandidateId, HeldOutRole, NewCrossEvaluation, RunId, Store};
use kevo_tasks::SizeSet;
use kevo_worker::{Worker, WorkerCommand};

use crate::evolve::StoreArgs;
use crate::settings::{self, ConfigFileArg, DeviceArgs};

#[derive(Args)]
pub struct CrossArgs {
    /// The run whose winner and seed to evaluate.
    pub run: String,
    #[command(flatten)]
    pub device: Box<DeviceArgs>,
    /// The sizes to evaluate at (default: the run's size set; always its
    /// in-distribution sizes).
    #[arg(long)]
    pub sizes: Option<SizeSet>,
    /// Hard limit per candidate in seconds (default 60).
    #[arg(long)]
    pub timeout: Option<f64>,
    #[command(flatten)]
    pub store: StoreArgs,
    #[arg(long)]
    pub json: bool,
}

/// The dialect a stored run's backend ("cuda", "opencl", "triton")
/// compiles; any other name is an error naming the known ones.
pub fn dialect_of(backend: &str) -> Result<Dialect> {
    Ok(backend.parse::<BackendName>()?.dialect())
}

pub fn cross(args: CrossArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store = runtime.block_on(args.store.open_existing())?;
    let id = runtime.block_on(store.resolve_run(&args.run))?;
    let (info, seed_id, winner_id) = runtime.block_on(seed_and_winner(&store, &id))?;
    let (seed_src, winner_src) = runtime.block_on(async {
        anyhow::Ok((
            store.candidate_source(seed_id).await?,
            store.candidate_source(winner_id).await?,
        ))
    })?;
    let task = kevo_tasks::resolve(&info.task)?;
    let size_set = args.sizes.unwrap_or(info.size_set);
    let settings = settings::evaluation_settings(
        &ConfigFileArg::default(),
        Some(&info.task),
        Some(size_set),
        args.timeout,
        false,
        &args.device,
    )?;
    let mut worker = Worker::start(WorkerCommand::current_exe()?, settings.worker_config()?)?;
    let device = worker.device().clone();
    let (seed_src, winner_src, translated) =
        if needs_translation(&args.run, &info.backend, &device)? {
            let (seed, winner) = translated(&args.run, (&seed_src, &winner_src), winner_id)?;
            (seed.clone(), winner.clone(), Some((seed, winner)))
        } else {
            (seed_src, winner_src, None)
        };
    let sizes = task.sizes(size_set).in_distribution;
    let timeout = std::time::Duration::from_secs_f64(args.timeout.unwrap_or(60.0));
    let seed = worker.evaluate(task, &seed_src, &sizes, timeout);
    let winner = worker.evaluate(task, &winner_src, &sizes, timeout);
    let session = format!(
        "{}-cross-{}",
        args.run,
        chrono::Utc::now().format("%Y%m%d-%H%M%S")
    );
    let rows = cross_rows(
        &session,
        (seed_id, &seed),
        (winner_id, &winner),
        &translated,
    );
    runtime.block_on(store.record_cross(&id, &rows))?;
    let result = CrossResult {
        session,
        device,
        size_set,
        seed,
        winner,
        winner_id,
        translated: translated.is_some(),
    };
    result.print(&args, &info)?;
    Ok(if result.winner.outcome.is_correct() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The two results as stored with the run, each with the translation it
/// ran (if any).
fn cross_rows(
    session: &str,
    (seed_id, seed): (CandidateId, &kevo_eval::Evaluation),
    (winner_id, winner): (CandidateId, &kevo_eval::Evaluation),
    translated: &Option<(String, String)>,
) -> Vec<NewCrossEvaluation> {
    vec![
        NewCrossEvaluation {
            candidate_id: seed_id,
            role: HeldOutRole::Seed,
            session: session.to_string(),
            evaluation: seed.clone(),
            translated_source: translated.as_ref().map(|t| t.0.clone()),
        },
        NewCrossEvaluation {
            candidate_id: winner_id,
            role: HeldOutRole::Winner,
            session: session.to_string(),
            evaluation: winner.clone(),
            translated_source: translated.as_ref().map(|t| t.1.clone()),
        },
    ]
}

/// The run, its seed, and its winner: the finished run's (after its final
/// re-measurement), else its best so far.
async fn seed_and_winner(
    store: &Store,
    id: &RunId,
) -> Result<(kevo_store::RunInfo, CandidateId, CandidateId)> {
    let info = store.run(id).await?;
    let history = store.history(id).await?;
    let seed = history
        .iter()
        .find(|h| h.iteration == 0)
        .and_then(|h| h.candidate_id)
        .with_context(|| format!("run {} has no seed stored", id.0))?;
    let winner = match info
        .summary
        .as_ref()
        .and_then(|s| s["best_candidate"].as_i64())
    {
        Some(w) => CandidateId(w),
        None => {
            store
                .best_candidate(id)
                .await?
                .with_context(|| format!("run {} has no correct candidate", id.0))?
                .candidate
                .id
        }
    };
    Ok((info, seed, winner))
}

/// Whether the run's kernels must be translated for `device`: a CUDA run
/// on an OpenCL device runs translations (kevo-translate); any other
/// pairing of languages is refused.
fn needs_translation(
    run: &str,
    run_backend: &str,
    device: &kevo_backend::DeviceInfo,
) -> Result<bool> {
    let run_dialect = dialect_of(run_backend).with_context(|| format!("run {run}"))?;
    Ok(match run_dialect {
        d if d == device.dialect => false,
        Dialect::Cuda if device.dialect == Dialect::OpenCl => true,
        _ => bail!(
            "run {} holds {run_dialect} kernels; {} on {} runs {}, and only CUDA kernels are translated (to OpenCL); pick a device with --backend {} and --platform/--device",
            run,
            device.backend,
            device.name,
            device.dialect,
            run_backend
        ),
    })
}

/// The seed and the winner translated from CUDA to OpenCL C.
fn translated(
    run: &str,
    (seed_src, winner_src): (&str, &str),
    winner_id: CandidateId,
) -> Result<(String, String)> {
    let seed = kevo_translate::cuda_to_opencl(seed_src)
        .with_context(|| format!("the seed of run {run} cannot run through OpenCL"))?;
    let winner = kevo_translate::cuda_to_opencl(winner_src).with_context(|| {
        format!(
            "the winner (candidate {}) of run {run} cannot run through OpenCL",
            winner_id.0
        )
    })?;
    Ok((seed, winner))
}

/// The seed and the winner as evaluated here, stored as `session`.
struct CrossResult {
    session: String,
    device: kevo_backend::DeviceInfo,
    size_set: SizeSet,
    seed: kevo_eval::Evaluation,
    winner: kevo_eval::Evaluation,
    winner_id: CandidateId,
    translated: bool,
}

impl CrossResult {
    /// The winner's score over the seed's, here.
    fn speedup(&self) -> Option<f64> {
        match (self.winner.outcome.score(), self.seed.outcome.score()) {
            (Some(w), Some(s)) if s > 0.0 => Some(w / s),
            _ => None,
        }
    }

    /// Both results and the ratio here beside the run's own, as JSON or
    /// text.
    fn print(&self, args: &CrossArgs, info: &kevo_store::RunInfo) -> Result<()> {
        let (device, speedup) = (&self.device, self.speedup());
        let in_run = speedup_in_run(info.summary.as_ref());
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "run": args.run, "session": self.session,
                    "device": device.name, "backend": device.backend,
                    "seed": self.seed, "winner": self.winner,
                    "speedup": speedup, "speedup_in_run": in_run,
                    "translated_from": self.translated.then(|| info.backend.clone()),
                }))?
            );
            return Ok(());
        }
        println!(
            "run {} ({} on {}), winner {} and seed on {} ({}), {} sizes:",
            args.run,
            info.task,
            info.device,
            self.winner_id.0,
            device.name,
            device.backend,
            self.size_set
        );
        if self.translated {
            println!(
                "  both translated from CUDA to OpenCL C (the translations are stored with the results)"
            );
        }
        println!("  seed:   {}", self.seed.outcome.summary());
        println!("  winner: {}", self.winner.outcome.summary());
        match speedup {
            Some(s) => println!(
                "  winner / seed here, one evaluation each: {s:.2}x{}",
                match info.summary.as_ref().and_then(kevo_report::Headline::of) {
                    Some(h) => format!(
                        " (the run's speedup on {}: {})",
                        info.device,
                        h.speedup_text()
                    ),
                    None => in_run
                        .map(|r| format!(" (the run's, on {}: {r:.2}x)", info.device))
                        .unwrap_or_default(),
                }
            ),
            None => println!("  no ratio: the seed or the winner is not correct here"),
        }
        println!(
            "stored with the run as session {} (kevo show {})",
            self.session, args.run
        );
        Ok(())
    }
}

/// The winner's speedup in the run: a search's summary has it; a tuning
/// run's, the best and the seed's scores.
fn speedup_in_run(summary: Option<&serde_json::Value>) -> Option<f64> {
    summary.and_then(|s| {
        s["speedup"].as_f64().or_else(|| {
            match (s["best_score"].as_f64(), s["seed_score"].as_f64()) {
                (Some(b), Some(seed)) if seed > 0.0 => Some(b / seed),
                _ => None,
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_runs_backend_gives_its_dialect_or_an_error_naming_the_known_ones() {
        assert_eq!(dialect_of("cuda").unwrap(), Dialect::Cuda);
        assert_eq!(dialect_of("triton").unwrap(), Dialect::Triton);
        for stored in ["auto", "metal", ""] {
            let err = dialect_of(stored).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("unknown backend `{stored}` (known backends: opencl, cuda, triton)")
            );
        }
    }
}
