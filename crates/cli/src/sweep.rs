//! `kevo sweep FILE.toml`: every cell of the grid as an ordinary run, one
//! after another on the one device (two runs at once would time each
//! other's kernels), then the table that compares them.
// Table headers pass their titles through the same width specifiers as the
// rows below them.
#![allow(clippy::print_literal)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use kevo_evolve::sweep::{
    Cell, CellResult, CellState, GroupRow, SweepPlan, SweepState, group_rows,
};
use kevo_evolve::{Environment, Event, Observer};
use kevo_store::{RunId, RunStatus, Store};
use kevo_worker::WorkerCommand;

use crate::evolve::StoreArgs;
use crate::progress::Progress;

#[derive(Args)]
pub struct SweepArgs {
    /// The sweep: settings shared by every cell, axes, repeats (see
    /// examples/sweeps/).
    file: PathBuf,
    /// Only print the cells and their state, run nothing.
    #[arg(long, conflicts_with = "report")]
    plan: bool,
    /// Only print the table of what has run, run nothing.
    #[arg(long)]
    report: bool,
    /// Run again the cells whose run failed (a failed run is otherwise
    /// kept as the cell's result).
    #[arg(long)]
    retry_failed: bool,
    #[command(flatten)]
    store: StoreArgs,
    /// Print only the table.
    #[arg(long)]
    quiet: bool,
    /// Print the table as JSON (cells and groups).
    #[arg(long)]
    json: bool,
}

/// Passes events to the progress display, and saves the cell's run in the
/// sweep's state the moment the run exists, so a kill right after loses
/// nothing.
struct CellObserver<'a> {
    progress: &'a mut Progress,
    state: &'a mut SweepState,
    state_path: &'a std::path::Path,
    key: &'a str,
    options: serde_json::Value,
    save_error: Option<anyhow::Error>,
}

impl Observer for CellObserver<'_> {
    fn on(&mut self, event: &Event) {
        if let Event::Created { run } = event {
            self.state.cells.insert(
                self.key.to_string(),
                CellState {
                    run: Some(run.clone()),
                    options: self.options.clone(),
                    error: None,
                },
            );
            if let Err(e) = self.state.save(self.state_path) {
                self.save_error = Some(e.into());
            }
        }
        self.progress.on(event);
    }
}

pub fn sweep(args: SweepArgs) -> Result<ExitCode> {
    let plan = SweepPlan::load(&args.file)?;
    let state_path = SweepState::path(&args.store.workspace, &plan.name);
    let mut state = SweepState::load(&state_path)?;
    // Every cell's stored settings are checked before anything runs.
    for cell in &plan.cells {
        state.run_of(cell)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = args.store.open().await?;
        if args.plan {
            for (i, cell) in plan.cells.iter().enumerate() {
                let status = cell_status(&store, &state, &cell.key).await;
                println!("{:>3}  {:<60} {status}", i + 1, cell.key);
            }
            return Ok(ExitCode::SUCCESS);
        }
        let env = Environment {
            store,
            workspace: args.store.workspace.clone(),
            worker: WorkerCommand::current_exe()?,
            in_flight: Default::default(),
        };
        let mut all_ran = true;
        if !args.report {
            let mut sweeping = Sweeping {
                args: &args,
                plan: &plan,
                env: &env,
                state: &mut state,
                state_path: &state_path,
            };
            for (i, cell) in plan.cells.iter().enumerate() {
                match sweeping.cell(i, cell).await? {
                    CellEnd::Ran => {}
                    CellEnd::NotRun => all_ran = false,
                    CellEnd::Interrupted => return Ok(ExitCode::from(130)),
                }
            }
        }
        let mut results = Vec::new();
        for cell in &plan.cells {
            results.push(cell_result(&env.store, &state, &cell.key, &cell.group).await?);
        }
        let rows = group_rows(&results);
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "sweep": plan.name,
                    "cells": results,
                    "groups": rows,
                }))?
            );
        } else {
            print_table(&plan, &rows);
        }
        let finished = results.iter().all(|r| r.status == "finished");
        Ok(if finished && all_ran {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    })
}

/// How a cell's turn ended.
enum CellEnd {
    /// Ran now (to a result or an error stored as one), or finished
    /// earlier.
    Ran,
    /// Did not run to the end: failed now, or failed earlier and kept.
    NotRun,
    /// A signal stopped the sweep.
    Interrupted,
}

/// One sweep under way: its cells run one after another on one device.
struct Sweeping<'a> {
    args: &'a SweepArgs,
    plan: &'a SweepPlan,
    env: &'a Environment,
    state: &'a mut SweepState,
    state_path: &'a std::path::Path,
}

impl Sweeping<'_> {
    /// Cell `i`: skipped when finished (or failed, unless
    /// `--retry-failed`), else started or resumed as an ordinary run. A
    /// cell that cannot run is a result, not the end of the sweep.
    async fn cell(&mut self, i: usize, cell: &Cell) -> Result<CellEnd> {
        let (args, plan) = (self.args, self.plan);
        let say = |text: String| {
            if !args.quiet && !args.json {
                eprintln!(
                    "kevo sweep {}: cell {}/{} {}: {text}",
                    plan.name,
                    i + 1,
                    plan.cells.len(),
                    cell.key
                );
            }
        };
        let run = self.state.run_of(cell)?;
        if let Some(end) = self.ended_earlier(run.as_deref(), &say).await? {
            return Ok(end);
        }
        let env = self.env;
        let mut progress = Progress::new(false, args.quiet || args.json);
        let options = serde_json::to_value(&cell.options)?;
        let mut observer = CellObserver {
            progress: &mut progress,
            state: &mut *self.state,
            state_path: self.state_path,
            key: &cell.key,
            options,
            save_error: None,
        };
        let outcome = tokio::select! {
            result = async {
                match &run {
                    Some(r) => {
                        say(format!("resuming run {r}"));
                        kevo_evolve::resume(r, env, &mut observer).await
                    }
                    None => {
                        say("starting".into());
                        kevo_evolve::start(cell.options.clone(), env, &mut observer).await
                    }
                }
            } => result,
            signal = crate::evolve::interrupted() => {
                let run = self.state.run_of(cell)?;
                let reason = format!("interrupted by {signal}");
                if let Some(run) = &run {
                    kevo_evolve::interrupt(env, run, &reason).await?;
                }
                eprintln!(
                    "kevo sweep {}: {reason}; run it again to go on where it stopped",
                    plan.name
                );
                return Ok(CellEnd::Interrupted);
            }
        };
        if let Some(e) = observer.save_error.take() {
            return Err(e);
        }
        match outcome {
            Ok(summary) => {
                say(format!(
                    "run {} {}: {:.2}x in-distribution",
                    summary.run, summary.stop_reason, summary.speedup
                ));
                Ok(CellEnd::Ran)
            }
            Err(e) => {
                say(format!("failed: {e}"));
                self.keep_error(cell, &e)?;
                Ok(CellEnd::NotRun)
            }
        }
    }

    /// The end of a cell whose run finished earlier (skipped), or failed
    /// earlier and is kept (unless `--retry-failed`); None when it runs.
    async fn ended_earlier(
        &self,
        run: Option<&str>,
        say: &impl Fn(String),
    ) -> Result<Option<CellEnd>> {
        let Some(r) = run else { return Ok(None) };
        let status = self.env.store.run(&RunId(r.to_string())).await?.status;
        Ok(match status {
            RunStatus::Finished => {
                say(format!("run {r} finished earlier; skipped"));
                Some(CellEnd::Ran)
            }
            RunStatus::Failed if !self.args.retry_failed => {
                say(format!(
                    "run {r} failed earlier; kept (--retry-failed runs it again)"
                ));
                Some(CellEnd::NotRun)
            }
            _ => None,
        })
    }

    /// A cell that could not even create its run keeps the error as its
    /// state.
    fn keep_error(&mut self, cell: &Cell, e: &kevo_evolve::EvolveError) -> Result<()> {
        let entry = self.state.cells.entry(cell.key.clone()).or_default();
        if entry.run.is_none() {
            entry.options = serde_json::to_value(&cell.options)?;
            entry.error = Some(e.to_string());
            self.state.save(self.state_path)?;
        }
        Ok(())
    }
}

async fn cell_status(store: &Store, state: &SweepState, key: &str) -> String {
    match state.cells.get(key) {
        Some(CellState { run: Some(run), .. }) => match store.run(&RunId(run.clone())).await {
            Ok(info) => format!("{} (run {run})", info.status),
            Err(e) => format!("run {run}: {e}"),
        },
        Some(CellState { error: Some(e), .. }) => format!("could not start: {e}"),
        _ => "not started".into(),
    }
}

/// A cell's numbers from its stored run.
async fn cell_result(
    store: &Store,
    state: &SweepState,
    key: &str,
    group: &str,
) -> Result<CellResult> {
    let mut result = CellResult {
        key: key.into(),
        group: group.into(),
        status: "not started".into(),
        ..Default::default()
    };
    let Some(cell) = state.cells.get(key) else {
        return Ok(result);
    };
    let Some(run) = &cell.run else {
        if let Some(e) = &cell.error {
            result.status = format!("could not start: {e}");
        }
        return Ok(result);
    };
    let id = RunId(run.clone());
    let info = store.run(&id).await?;
    result.run = Some(run.clone());
    result.status = info.status.to_string();
    if let Some(summary) = info
        .summary
        .and_then(|s| serde_json::from_value::<kevo_evolve::Summary>(s).ok())
    {
        result.speedup = Some(summary.speedup);
        result.held_out_phi = summary.held_out.as_ref().map(|h| h.phi);
        result.held_out_speedup = summary.held_out.as_ref().and_then(|h| h.speedup);
        result.cost_usd = (summary.unknown_cost_calls == 0).then_some(summary.spent.cost_usd);
    }
    result.correct_rate = kevo_store::correct_rate(&store.history(&id).await?);
    Ok(result)
}

fn spread(s: &Option<kevo_evolve::sweep::Spread>, digits: usize) -> String {
    s.as_ref()
        .map(|s| s.describe(digits))
        .unwrap_or_else(|| "-".into())
}

fn print_table(plan: &SweepPlan, rows: &[GroupRow]) {
    println!(
        "sweep {} ({}): median (min-max) over finished repeats",
        plan.name,
        plan.file.display()
    );
    let width = rows.iter().map(|r| r.group.len()).max().unwrap_or(4).max(4);
    println!(
        "{:<width$}  {:>5}  {:>20}  {:>20}  {:>20}  {:>17}  {:>17}",
        "cell",
        "runs",
        "confirmed speedup",
        "held-out Φ",
        "held-out speedup",
        "correct",
        "cost USD"
    );
    for r in rows {
        println!(
            "{:<width$}  {:>5}  {:>20}  {:>20}  {:>20}  {:>17}  {:>17}",
            r.group,
            format!("{}/{}", r.finished, r.cells),
            spread(&r.speedup, 2),
            spread(&r.held_out_phi, 4),
            spread(&r.held_out_speedup, 2),
            spread(&r.correct_rate, 2),
            spread(&r.cost_usd, 3),
        );
    }
}
