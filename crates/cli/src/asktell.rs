//! `kevo ask`, `kevo tell` and `kevo finish`: a run driven from outside
//! (`kevo evolve --llm external`), one prompt at a time.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use kevo_evolve::Environment;
use kevo_worker::WorkerCommand;

use crate::evolve::{StoreArgs, print_summary};
use crate::progress::Progress;

async fn environment(store: &StoreArgs) -> Result<Environment> {
    Ok(Environment {
        store: store.open_existing().await?,
        workspace: store.workspace.clone(),
        worker: WorkerCommand::current_exe()?,
        in_flight: Default::default(),
    })
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

pub fn ask(run: &str, n: u32, store: StoreArgs, json: bool) -> Result<ExitCode> {
    if n == 0 {
        bail!("--n must be at least 1");
    }
    runtime()?.block_on(async {
        let env = environment(&store).await?;
        let resolved = env.store.resolve_run(run).await?;
        let run = resolved.0.as_str();
        let asked = kevo_evolve::ask(run, n, &env).await?;
        if json {
            println!("{}", serde_json::to_string_pretty(&asked)?);
            return Ok(ExitCode::SUCCESS);
        }
        for a in &asked {
            println!(
                "proposal {} (improves candidate {}, chosen by {}): {}",
                a.proposal,
                a.parent,
                a.how,
                a.prompt_file.display()
            );
        }
        if asked.len() < n as usize {
            println!(
                "{} of {n} prompts: the run's budget leaves room for no more",
                asked.len()
            );
        }
        if let Some(a) = asked.first() {
            println!("answer with: kevo tell {run} {} RESPONSE_FILE", a.proposal);
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The response: a file, or stdin for `-`.
fn read_response(path: &Path) -> Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the response from stdin")?;
        return Ok(text);
    }
    std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the response file {}", path.display()))
}

pub fn tell(
    run: &str,
    proposal: i64,
    response: &Path,
    model: Option<&str>,
    store: StoreArgs,
    json: bool,
) -> Result<ExitCode> {
    let text = read_response(response)?;
    runtime()?.block_on(async {
        let env = environment(&store).await?;
        let mut progress = Progress::new(json, false).single();
        let resolved = env.store.resolve_run(run).await?;
        let run = resolved.0.as_str();
        let told = kevo_evolve::tell(run, proposal, &text, model, &env, &mut progress).await?;
        if !json {
            let iteration = told.iteration;
            let next = match told.next {
                kevo_evolve::Next::Ask => format!("kevo ask {run}"),
                kevo_evolve::Next::Finish { reason, pending: 0 } => {
                    format!("kevo finish {run} ({reason})")
                }
                kevo_evolve::Next::Finish { reason, pending } => format!(
                    "answer the {pending} pending proposal(s), then kevo finish {run} ({reason})"
                ),
            };
            println!("proposal {proposal} is iteration {iteration} of run {run}; next: {next}");
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub fn finish(run: &str, store: StoreArgs, json: bool) -> Result<ExitCode> {
    runtime()?.block_on(async {
        let env = environment(&store).await?;
        let mut progress = Progress::new(json, false);
        let resolved = env.store.resolve_run(run).await?;
        let run = resolved.0.as_str();
        let summary = kevo_evolve::finish(run, &env, &mut progress).await?;
        if !json {
            print_summary(&summary);
        }
        Ok(ExitCode::SUCCESS)
    })
}
