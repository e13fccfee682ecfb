//! What the evaluating commands (`eval`, `bench`, `tune`, `task check`,
//! `kernelbench eval`) share: the kernel they evaluate (a file, or the
//! task's seed), its default time limit, and an evaluator in this process.

use std::path::PathBuf;

use anyhow::{Context, Result};
use kevo_eval::Evaluator;
use kevo_roofline::CeilingCache;
use kevo_tasks::{SizeSet, Task};
use kevo_worker::WorkerConfig;

/// The device a worker configuration names, opened in this process (no
/// worker process, no sandbox): `bench` times the evaluation itself this
/// way, `task check` the task's own reference and check.
pub(crate) fn open_evaluator(
    worker: &WorkerConfig,
) -> Result<Evaluator<Box<dyn kevo_backend::Backend>>> {
    let mut backend = kevo_runtimes::open(
        worker.backend,
        &worker.selector,
        worker.timing.open_options(),
    )?;
    let ceilings = match worker.declared_ceilings {
        Some(declared) => declared.ceilings(),
        None => kevo_roofline::ceilings(backend.as_mut(), &CeilingCache::default_location())
            .context("cannot determine the device's roofline ceilings")?,
    };
    Ok(Evaluator::new(backend, ceilings, worker.eval.clone()))
}

/// 14 runs (3 warm-up, 10 timed, 1 verification) of every size at 0.1% of
/// the roofline, and never less than 60 s: a seed is at 0.3% (hmc d32 on
/// the M1 Pro) or better in the Metal-Sci results.
pub(crate) fn default_timeout(
    task: &Task,
    set: SizeSet,
    sizes: &[kevo_tasks::Size],
    ceilings: &kevo_roofline::Ceilings,
) -> std::time::Duration {
    let ceiling = ceilings.for_kind(task.ceiling()) * 1e9;
    let slow_run_s: f64 = sizes.iter().map(|s| task.work(s) / (1e-3 * ceiling)).sum();
    // The limit covers generating inputs and CPU references too: at the
    // large sizes those take up to a few minutes (lj's held-out size did not
    // finish in 60 s on an H100 machine's 16 cores).
    let floor = match set {
        SizeSet::Large => 900,
        _ => 60,
    };
    // A folder's reference command runs before the clock starts (the
    // supervisor computes expected outputs, then sends the candidate).
    kevo_worker::timeout_from_seed(slow_run_s, 14.0, std::time::Duration::from_secs(floor))
}

/// A kernel file's text; a file that is not text fails the command.
pub(crate) fn read_kernel(path: &Option<PathBuf>) -> Result<Option<String>> {
    read_candidate(path)?
        .map(|c| c.map_err(|reason| anyhow::anyhow!("{reason}")))
        .transpose()
}

/// A candidate kernel file: its text, or why it is not text (a rejected
/// candidate, not a failed command). An unreadable file is an error.
pub(crate) fn read_candidate(
    path: &Option<PathBuf>,
) -> Result<Option<std::result::Result<String, String>>> {
    let Some(p) = path else { return Ok(None) };
    let bytes =
        std::fs::read(p).with_context(|| format!("cannot read kernel file {}", p.display()))?;
    Ok(Some(String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        format!(
            "{}: line {line}: not valid UTF-8 at byte {at}; kernel source must be text",
            p.display()
        )
    })))
}

/// The kernel given, else the task's seed in the device's dialect.
pub(crate) fn source_for(
    task: &Task,
    kernel: &Option<String>,
    dialect: kevo_backend::Dialect,
) -> Result<String> {
    match kernel {
        Some(s) => Ok(s.clone()),
        None => Ok(task
            .seed(dialect)
            .with_context(|| format!("task {} has no {dialect} seed kernel", task.name()))?
            .to_string()),
    }
}
