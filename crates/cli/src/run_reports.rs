//! Stored runs as reports: `kevo report RUN` (the run's self-contained
//! HTML report; crates/report renders it), `kevo table` (the results table
//! across runs), `kevo export` (the winning kernel, or steps as training
//! records) and `kevo serve` (the runs in the browser, live).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use kevo_report::RunData;

use crate::evolve::StoreArgs;

#[derive(Args)]
pub struct ReportArgs {
    /// The run to report (`kevo runs` lists them).
    pub run: String,
    /// Where to write: a file ending in .html, or a directory to write
    /// RUN.html into (default: the workspace's reports/ directory).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// The file a report of `run` goes to.
fn report_path(out: Option<&Path>, workspace: &Path, run: &str) -> PathBuf {
    let name = format!("{run}.html");
    match out {
        Some(p)
            if p.extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("html")) =>
        {
            p.to_path_buf()
        }
        Some(dir) => dir.join(name),
        None => workspace.join("reports").join(name),
    }
}

pub fn report(args: ReportArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (run, html) = runtime.block_on(async {
        let store = args.store.open_existing().await?;
        let run = store.resolve_run(&args.run).await?;
        let data = RunData::gather(&store, &run)
            .await
            .with_context(|| format!("reading run {}", run.0))?;
        anyhow::Ok((run, kevo_report::render_report(&data)))
    })?;
    let path = report_path(args.out.as_deref(), &args.store.workspace, &run.0);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, html).with_context(|| format!("cannot write {}", path.display()))?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_goes_to_a_named_file_a_directory_or_the_workspace() {
        let ws = Path::new("/w");
        assert_eq!(report_path(None, ws, "r1"), Path::new("/w/reports/r1.html"));
        assert_eq!(
            report_path(Some(Path::new("out/x.HTML")), ws, "r1"),
            Path::new("out/x.HTML")
        );
        assert_eq!(
            report_path(Some(Path::new("out")), ws, "r1"),
            Path::new("out/r1.html")
        );
    }
}

#[derive(Args)]
pub struct TableArgs {
    /// The runs to tabulate (default with --all: every run of the store).
    pub runs: Vec<String>,
    /// Every run of the store.
    #[arg(long, conflicts_with = "runs")]
    pub all: bool,
    /// text (aligned columns; the default on a terminal), md (the default
    /// otherwise), csv or json.
    #[arg(long, conflicts_with = "results")]
    pub format: Option<kevo_report::table::Format>,
    /// Metal-Sci's Table 3 view in Markdown: per task the seed's and the
    /// winner's fraction at every size and at the held-out size, the
    /// confirmed speedup with its interval, the winner beside the physical
    /// anchors and Metal-Sci's best on the M1 Pro, then the strategies
    /// compared at equal budget.
    #[arg(long)]
    pub results: bool,
    /// With --results: anchors measured on the runs' device, as `kevo
    /// eval --json` output (its vendor baselines: cuFFT, cuBLAS) or `kevo
    /// devices --measure --json` output (the FMA peak). Repeatable.
    #[arg(long, value_name = "FILE.json", requires = "results")]
    pub anchors: Vec<PathBuf>,
    /// KernelBench's metrics in Markdown, from the runs on imported
    /// problems (`kevo kernelbench import`): per run the kernel at the
    /// problem's size beside the eager and torch.compile baselines, then
    /// per level the correct rate, fast_p against the faster baseline and
    /// each, the geometric-mean speedup and the share of speed of light.
    #[arg(long, conflicts_with = "results")]
    pub kernelbench: bool,
    /// Only runs of this task.
    #[arg(long)]
    pub task: Option<String>,
    /// Only runs where this model proposed (a substring of provider:model).
    #[arg(long)]
    pub model: Option<String>,
    /// Only runs of this strategy (one_plus_one, map_elites, islands).
    #[arg(long)]
    pub strategy: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// The runs named, or every run with `all`.
async fn chosen_runs(
    store: &kevo_store::Store,
    runs: &[String],
    all: bool,
) -> Result<Vec<RunData>> {
    let ids: Vec<String> = if all {
        store
            .list_runs()
            .await?
            .into_iter()
            .map(|r| r.id.0)
            .collect()
    } else if runs.is_empty() {
        anyhow::bail!("name the runs (kevo runs lists them) or pass --all");
    } else {
        runs.to_vec()
    };
    let mut out = Vec::with_capacity(ids.len());
    for name in ids {
        let id = store.resolve_run(&name).await?;
        out.push(
            RunData::gather(store, &id)
                .await
                .with_context(|| format!("reading run {}", id.0))?,
        );
    }
    Ok(out)
}

pub fn table(args: TableArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let runs = runtime.block_on(async {
        let store = args.store.open_existing().await?;
        chosen_runs(&store, &args.runs, args.all).await
    })?;
    if args.results {
        return results(&args, runs);
    }
    if args.kernelbench {
        print!("{}", kevo_report::kernelbench::render(&runs));
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<_> = runs
        .iter()
        .map(kevo_report::table::RunRow::of)
        .filter(|r| args.task.as_ref().is_none_or(|t| &r.task == t))
        .filter(|r| args.strategy.as_ref().is_none_or(|s| &r.strategy == s))
        .filter(|r| {
            args.model
                .as_ref()
                .is_none_or(|m| r.models.contains(m.as_str()))
        })
        .collect();
    let format = args.format.unwrap_or_else(|| {
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            kevo_report::table::Format::Text
        } else {
            kevo_report::table::Format::Markdown
        }
    });
    print!("{}", kevo_report::table::render(&rows, format));
    Ok(ExitCode::SUCCESS)
}

/// `kevo table --results`: the chosen runs (the same filters) as kevo's
/// Table 3, with the anchors files beside them.
fn results(args: &TableArgs, runs: Vec<RunData>) -> Result<ExitCode> {
    let mut anchors = kevo_report::results::Anchors::default();
    for file in &args.anchors {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        anchors
            .add_json(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    }
    let runs: Vec<RunData> = runs
        .into_iter()
        .filter(|r| args.task.as_ref().is_none_or(|t| &r.info.task == t))
        .filter(|r| args.strategy.as_ref().is_none_or(|s| &r.info.strategy == s))
        .filter(|r| {
            args.model.as_ref().is_none_or(|m| {
                kevo_report::table::RunRow::of(r)
                    .models
                    .contains(m.as_str())
            })
        })
        .collect();
    print!("{}", kevo_report::results::render(&runs, &anchors));
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct ExportArgs {
    /// The run (`kevo runs` lists them); with --trajectories and --all,
    /// every run.
    pub run: Option<String>,
    /// Where to write the winning kernel (default: stdout).
    #[arg(long, conflicts_with_all = ["trajectories", "recording"])]
    pub out: Option<PathBuf>,
    /// Write the run's model exchanges as a recording that `--llm
    /// replay:FILE` serves again in the same order (what `--record` writes
    /// during a run; this also covers runs answered through `kevo tell`).
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "trajectories")]
    pub recording: Option<PathBuf>,
    /// Write the run's steps as JSON lines (schema kevo.trajectory/1:
    /// prompt, response, reasoning, a tool conversation's turns, kernel,
    /// feedback, score and reward fields, parent) instead of the winning
    /// kernel.
    #[arg(long, value_name = "FILE.jsonl")]
    pub trajectories: Option<PathBuf>,
    /// With --trajectories: every run of the store.
    #[arg(long, requires = "trajectories", conflicts_with = "run")]
    pub all: bool,
    /// With --trajectories: only steps whose kernel was correct.
    #[arg(long, requires = "trajectories")]
    pub correct_only: bool,
    /// With --trajectories: only steps that were kept.
    #[arg(long, requires = "trajectories")]
    pub promoted_only: bool,
    /// With --trajectories: only each run's best correct step.
    #[arg(long, requires = "trajectories")]
    pub best_only: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub fn export(args: ExportArgs) -> Result<ExitCode> {
    if let Some(path) = &args.recording {
        let run = args
            .run
            .as_deref()
            .context("name the run whose exchanges to export (kevo runs lists them)")?;
        return export_recording(run, path, &args.store);
    }
    let Some(path) = args.trajectories.clone() else {
        let run = args
            .run
            .as_deref()
            .context("name the run whose winner to export (kevo runs lists them)")?;
        return crate::show::export(run, args.out.as_deref(), args.store);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let runs = runtime.block_on(async {
        let store = args.store.open_existing().await?;
        let named: Vec<String> = args.run.iter().cloned().collect();
        chosen_runs(&store, &named, args.all).await
    })?;
    let filter = kevo_report::trajectories::Filter {
        correct_only: args.correct_only,
        promoted_only: args.promoted_only,
        best_only: args.best_only,
    };
    // Keys from the environment and key-shaped strings are replaced, as in
    // everything kevo stores and shows.
    let redactor = kevo_proposer::Redactor::from_process(Vec::new());
    let redact = |s: &str| redactor.text(s);
    let mut text = String::new();
    let mut count = 0;
    for run in &runs {
        for record in kevo_report::trajectories::trajectories(run, filter, &redact) {
            text.push_str(&serde_json::to_string(&record)?);
            text.push('\n');
            count += 1;
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!(
        "wrote {count} steps of {} run(s) to {}",
        runs.len(),
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// A run's proposing calls, in the order they were made, as replay lines:
/// the prompt, and the answer or the error the call ended with.
fn export_recording(run: &str, path: &Path, store: &StoreArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (run, calls) = runtime.block_on(async {
        let store = store.open_existing().await?;
        let run = store.resolve_run(run).await?;
        let calls = store.llm_calls(&run).await?;
        anyhow::Ok((run, calls))
    })?;
    let mut text = String::new();
    let mut count = 0;
    for stored in calls.iter().filter(|c| c.call.purpose == "propose") {
        let exchange = exchange_of(&stored.call);
        text.push_str(&serde_json::to_string(&exchange)?);
        text.push('\n');
        count += 1;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("wrote {count} exchanges of run {run} to {}", path.display());
    let conversations = calls
        .iter()
        .filter(|c| c.call.purpose == "propose" && c.call.transcript.is_some())
        .count();
    if conversations > 0 {
        eprintln!(
            "note: {conversations} of them were tool conversations (--agent-tools); a recording \
             keeps each one's final answer, so `--llm replay:` serves them as one-shot answers to \
             a run without --agent-tools. Their turns are in `kevo export --trajectories`."
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A stored call as the recording line `--record` would have written.
fn exchange_of(call: &kevo_store::NewLlmCall) -> kevo_proposer::Exchange {
    let request = kevo_proposer::ChatRequest::new(&call.prompt_system, &call.prompt_user);
    let Some(text) = &call.response else {
        let error = call.error.clone().unwrap_or_else(|| "no answer".into());
        let mut exchange = kevo_proposer::Exchange::new(&request, &completion_of(call, ""));
        exchange.completion = None;
        exchange.error = Some(error);
        return exchange;
    };
    kevo_proposer::Exchange::new(&request, &completion_of(call, text))
}

fn completion_of(call: &kevo_store::NewLlmCall, text: &str) -> kevo_proposer::Completion {
    let known = call.input_tokens.zip(call.output_tokens);
    kevo_proposer::Completion {
        text: text.to_string(),
        reasoning: call.reasoning.clone(),
        usage: kevo_proposer::Usage {
            input_tokens: known.map(|k| k.0).unwrap_or(0),
            output_tokens: known.map(|k| k.1).unwrap_or(0),
            reasoning_tokens: call.reasoning_tokens,
            cached_tokens: None,
        },
        cost_usd: call.cost_usd,
        latency: std::time::Duration::from_secs_f64(call.latency_s.max(0.0)),
        model: call.model.clone(),
        provider: call.provider.clone(),
        finish_reason: None,
        attempts: 1,
        usage_unknown: known
            .is_none()
            .then(|| "the stored call has no token counts".to_string()),
        member: None,
        tool_calls: Vec::new(),
        native: None,
    }
}

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on. The default is this machine only; any other
    /// address serves every run of the store, without login, to whoever
    /// reaches it.
    #[arg(long, default_value = "127.0.0.1:8477")]
    pub bind: std::net::SocketAddr,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub fn serve(args: ServeArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // Serving creates nothing: a workspace without a store is watched
        // until a run makes one.
        let source = if args.store.exists() {
            kevo_report::serve::Source::Open(args.store.open().await?)
        } else {
            eprintln!(
                "kevo: no runs in {} yet; the list fills in when a run starts there",
                args.store.workspace.display()
            );
            kevo_report::serve::Source::Workspace(args.store.workspace.clone())
        };
        if !args.bind.ip().is_loopback() {
            eprintln!(
                "{} serving on {}: every run of this store is readable, without login, by whoever reaches this address",
                crate::style::paint(crate::style::Stream::Stderr, crate::style::Tone::Warning, "warning:"),
                args.bind
            );
        }
        println!("serving the runs of {} at http://{}/ (Ctrl-C stops)", store_name(&args.store), args.bind);
        kevo_report::serve::serve(source, args.bind).await?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

fn store_name(store: &StoreArgs) -> String {
    match &store.store {
        Some(url) => kevo_store::redact_url(url),
        None => store.workspace.display().to_string(),
    }
}
