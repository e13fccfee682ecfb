//! `kevo cross RUN`: a run's winner and its seed evaluated together, in one
//! session, on another device or backend than the run's (KernelFoundry's
//! hardware-awareness question: does a kernel found on one device keep its
//! lead on another?), stored with the run.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use kevo_backend::Dialect;
use kevo_store::{CandidateId, HeldOutRole, NewCrossEvaluation, RunId};
use kevo_tasks::SizeSet;
use kevo_worker::{Worker, WorkerCommand};

use crate::evolve::StoreArgs;
use crate::settings::{self, ConfigFileArg, DeviceArgs};

#[derive(Args)]
pub struct CrossArgs {
    /// The run whose winner and seed to evaluate.
    pub run: String,
    #[command(flatten)]
    pub device: DeviceArgs,
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

/// The dialect a run's backend compiles ("cuda", "opencl").
fn dialect_of(backend: &str) -> Option<Dialect> {
    match backend {
        "cuda" => Some(Dialect::Cuda),
        "opencl" => Some(Dialect::OpenCl),
        "triton" => Some(Dialect::Triton),
        _ => None,
    }
}

pub fn cross(args: CrossArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store = runtime.block_on(args.store.open())?;
    let id = RunId(args.run.clone());
    let (info, seed_id, winner_id) = runtime.block_on(async {
        let info = store.run(&id).await?;
        let history = store.history(&id).await?;
        let seed = history
            .iter()
            .find(|h| h.iteration == 0)
            .and_then(|h| h.candidate_id)
            .with_context(|| format!("run {} has no seed stored", args.run))?;
        // The finished run's winner (after its final re-measurement), else
        // its best so far.
        let winner = match info
            .summary
            .as_ref()
            .and_then(|s| s["best_candidate"].as_i64())
        {
            Some(w) => CandidateId(w),
            None => {
                store
                    .best_candidate(&id)
                    .await?
                    .with_context(|| format!("run {} has no correct candidate", args.run))?
                    .candidate
                    .id
            }
        };
        anyhow::Ok((info, seed, winner))
    })?;
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
    // A CUDA run on an OpenCL device runs translations (kevo-translate);
    // any other pairing of languages is refused.
    let translate = match dialect_of(&info.backend) {
        Some(run_dialect) if run_dialect == device.dialect => false,
        Some(Dialect::Cuda) if device.dialect == Dialect::OpenCl => true,
        Some(run_dialect) => bail!(
            "run {} holds {run_dialect} kernels; {} on {} runs {}, and only CUDA kernels are translated (to OpenCL); pick a device with --backend {} and --platform/--device",
            args.run,
            device.backend,
            device.name,
            device.dialect,
            info.backend
        ),
        None => false,
    };
    let (seed_src, winner_src, translated) = if translate {
        let seed = kevo_translate::cuda_to_opencl(&seed_src)
            .with_context(|| format!("the seed of run {} cannot run through OpenCL", args.run))?;
        let winner = kevo_translate::cuda_to_opencl(&winner_src).with_context(|| {
            format!(
                "the winner (candidate {}) of run {} cannot run through OpenCL",
                winner_id.0, args.run
            )
        })?;
        (seed.clone(), winner.clone(), Some((seed, winner)))
    } else {
        (seed_src, winner_src, None)
    };
    let sizes = task.sizes(size_set).in_distribution;
    let timeout = std::time::Duration::from_secs_f64(args.timeout.unwrap_or(60.0));
    let seed = worker.evaluate(task.name(), &seed_src, &sizes, timeout);
    let winner = worker.evaluate(task.name(), &winner_src, &sizes, timeout);
    let session = format!(
        "{}-cross-{}",
        args.run,
        chrono::Utc::now().format("%Y%m%d-%H%M%S")
    );
    let rows = vec![
        NewCrossEvaluation {
            candidate_id: seed_id,
            role: HeldOutRole::Seed,
            session: session.clone(),
            evaluation: seed.clone(),
            translated_source: translated.as_ref().map(|t| t.0.clone()),
        },
        NewCrossEvaluation {
            candidate_id: winner_id,
            role: HeldOutRole::Winner,
            session: session.clone(),
            evaluation: winner.clone(),
            translated_source: translated.as_ref().map(|t| t.1.clone()),
        },
    ];
    runtime.block_on(store.record_cross(&id, &rows))?;
    let speedup = match (winner.outcome.score(), seed.outcome.score()) {
        (Some(w), Some(s)) if s > 0.0 => Some(w / s),
        _ => None,
    };
    // A search's summary has its speedup; a tuning run's, the best and the
    // seed's scores.
    let in_run = info.summary.as_ref().and_then(|s| {
        s["speedup"].as_f64().or_else(|| {
            match (s["best_score"].as_f64(), s["seed_score"].as_f64()) {
                (Some(b), Some(seed)) if seed > 0.0 => Some(b / seed),
                _ => None,
            }
        })
    });
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "run": args.run, "session": session,
                "device": device.name, "backend": device.backend,
                "seed": seed, "winner": winner,
                "speedup": speedup, "speedup_in_run": in_run,
                "translated_from": translated.as_ref().map(|_| info.backend.clone()),
            }))?
        );
    } else {
        println!(
            "run {} ({} on {}), winner {} and seed on {} ({}), {} sizes:",
            args.run, info.task, info.device, winner_id.0, device.name, device.backend, size_set
        );
        if translated.is_some() {
            println!(
                "  both translated from CUDA to OpenCL C (the translations are stored with the results)"
            );
        }
        println!("  seed:   {}", seed.outcome.summary());
        println!("  winner: {}", winner.outcome.summary());
        match speedup {
            Some(s) => println!(
                "  winner / seed here: {s:.2}x{}",
                in_run
                    .map(|r| format!(" (in the run, on {}: {r:.2}x)", info.device))
                    .unwrap_or_default()
            ),
            None => println!("  no ratio: the seed or the winner is not correct here"),
        }
        println!(
            "stored with the run as session {session} (kevo show {})",
            args.run
        );
    }
    Ok(if winner.outcome.is_correct() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
