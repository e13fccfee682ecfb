//! `kevo ask`, `kevo tell` and `kevo finish`: a run driven from outside
//! (`kevo evolve --llm external`), one prompt at a time; `tell --defer`
//! keeps answers on a host without the device, `tell --deferred` evaluates
//! them where it is.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use kevo_evolve::Environment;
use kevo_worker::WorkerCommand;

use crate::evolve::{StoreArgs, print_summary};
use crate::progress::Progress;

pub(crate) async fn environment(store: &StoreArgs) -> Result<Environment> {
    Ok(Environment {
        store: store.open_existing().await?,
        workspace: store.workspace.clone(),
        worker: WorkerCommand::current_exe()?,
        in_flight: Default::default(),
    })
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
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

/// `kevo tell`'s arguments.
#[derive(clap::Args)]
pub struct TellArgs {
    /// The run; with --deferred and no run, every run with kept answers.
    #[arg(required_unless_present = "deferred")]
    run: Option<String>,
    /// The proposal id `kevo ask` printed.
    #[arg(required_unless_present = "deferred")]
    proposal: Option<i64>,
    /// The response: markdown with the kernel in a code block (or
    /// SEARCH/REPLACE edits in diff mode); `-` reads stdin.
    #[arg(required_unless_present = "deferred")]
    response: Option<PathBuf>,
    /// Who answered, stored with the call (default "external").
    #[arg(long)]
    model: Option<String>,
    /// Keep the answer without evaluating it: checked for code and
    /// stored with its proposal, for `--deferred` on the device's host.
    #[arg(long, conflicts_with = "deferred")]
    defer: bool,
    /// Evaluate and record every answer kept with --defer, in the
    /// order the prompts were asked.
    #[arg(long, conflicts_with_all = ["proposal", "response", "model"])]
    deferred: bool,
    #[command(flatten)]
    store: StoreArgs,
    #[arg(long)]
    json: bool,
}

/// `kevo tell`: one answer evaluated now or kept (--defer), or the kept
/// answers evaluated (--deferred).
pub fn tell_command(args: TellArgs) -> Result<ExitCode> {
    let TellArgs {
        run,
        proposal,
        response,
        model,
        defer,
        deferred,
        store,
        json,
    } = args;
    if deferred {
        return tell_deferred(run.as_deref(), store, json);
    }
    let (Some(run), Some(proposal), Some(response)) = (run, proposal, response) else {
        bail!("kevo tell needs RUN PROPOSAL RESPONSE, or --deferred");
    };
    let answer = Answer {
        proposal,
        response: &response,
        model: model.as_deref(),
    };
    match defer {
        true => self::defer(&run, answer, store, json),
        false => tell(&run, answer, store, json),
    }
}

/// One answer brought to `kevo tell`.
pub struct Answer<'a> {
    pub proposal: i64,
    /// A file, or `-` for stdin.
    pub response: &'a Path,
    pub model: Option<&'a str>,
}

/// What the run waits for after an answer, as a command to type.
fn next_step(run: &str, next: &kevo_evolve::Next) -> String {
    match next {
        kevo_evolve::Next::Ask => format!("kevo ask {run}"),
        kevo_evolve::Next::Finish { reason, pending: 0 } => {
            format!("kevo finish {run} ({reason})")
        }
        kevo_evolve::Next::Finish { reason, pending } => {
            format!("answer the {pending} pending proposal(s), then kevo finish {run} ({reason})")
        }
    }
}

pub fn tell(run: &str, answer: Answer<'_>, store: StoreArgs, json: bool) -> Result<ExitCode> {
    let text = read_response(answer.response)?;
    runtime()?.block_on(async {
        let env = environment(&store).await?;
        let mut progress = Progress::new(json, false).single();
        let resolved = env.store.resolve_run(run).await?;
        let run = resolved.0.as_str();
        let proposal = answer.proposal;
        let told =
            kevo_evolve::tell(run, proposal, &text, answer.model, &env, &mut progress).await?;
        if !json {
            let (iteration, next) = (told.iteration, next_step(run, &told.next));
            println!("proposal {proposal} is iteration {iteration} of run {run}; next: {next}");
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `kevo tell --defer`: keep the answer, evaluate nothing.
pub fn defer(run: &str, answer: Answer<'_>, store: StoreArgs, json: bool) -> Result<ExitCode> {
    let text = read_response(answer.response)?;
    runtime()?.block_on(async {
        let env = environment(&store).await?;
        let resolved = env.store.resolve_run(run).await?;
        let run = resolved.0.as_str();
        let proposal = answer.proposal;
        let kept = kevo_evolve::defer(run, proposal, &text, answer.model, &env).await?;
        if json {
            let out = serde_json::json!({
                "run": run,
                "proposal": proposal,
                "told_at": kept.answer.told_at,
                "waiting": kept.waiting,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!(
                "proposal {proposal}'s answer is kept ({} of run {run} wait to be evaluated); on a host with the run's device: kevo tell {run} --deferred",
                kept.waiting
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `kevo tell RUN --deferred`: evaluate and record the kept answers of
/// RUN, or of every run that has some. A run that fails does not stop
/// the others; the command then fails naming it.
pub fn tell_deferred(run: Option<&str>, store: StoreArgs, json: bool) -> Result<ExitCode> {
    runtime()?.block_on(async {
        let env = environment(&store).await?;
        let runs = match run {
            Some(run) => vec![env.store.resolve_run(run).await?.0],
            None => kevo_evolve::runs_with_deferred(&env).await?,
        };
        if runs.is_empty() {
            println!("no run has answers kept with --defer");
        }
        let mut reports = Vec::new();
        let mut failed = Vec::new();
        for run in &runs {
            let mut progress = Progress::new(json, false).single();
            match kevo_evolve::tell_deferred(run, &env, &mut progress).await {
                Ok((recorded, told)) => {
                    if !json {
                        print_recorded(run, &recorded, &told);
                    }
                    reports.push(deferred_json(run, &recorded, None));
                }
                Err(e) => {
                    eprintln!("kevo: run {run}: {e}");
                    reports.push(deferred_json(run, &[], Some(e.to_string())));
                    failed.push(run.clone());
                }
            }
        }
        if json {
            println!("{}", serde_json::to_string_pretty(&reports)?);
        }
        if !failed.is_empty() {
            bail!(
                "the kept answers of {} run(s) were not all recorded: {}",
                failed.len(),
                failed.join(", ")
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn print_recorded(run: &str, recorded: &[(i64, u32)], told: &kevo_evolve::Told) {
    if recorded.is_empty() {
        println!("run {run} has no answer kept with --defer");
    }
    for (proposal, iteration) in recorded {
        println!("proposal {proposal} is iteration {iteration} of run {run}");
    }
    println!("next: {}", next_step(run, &told.next));
}

fn deferred_json(run: &str, recorded: &[(i64, u32)], error: Option<String>) -> serde_json::Value {
    serde_json::json!({
        "run": run,
        "recorded": recorded
            .iter()
            .map(|(p, k)| serde_json::json!({"proposal": p, "iteration": k}))
            .collect::<Vec<_>>(),
        "error": error,
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
