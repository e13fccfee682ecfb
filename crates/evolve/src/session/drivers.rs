//! The entry points that drive a session: start a run, resume one, interrupt
//! one (ask/tell is in asktell.rs).

use kevo_store::{NewLlmCall, RunId};

use super::base::{Environment, Session};
use super::calls::{ABANDONED, InFlightCall, proposal_call};
use super::error::EvolveError;
use super::events::{Event, Observer};
use super::state::stored_options;
use super::summary::Summary;
use crate::EvolveOptions;

/// Start a new run.
pub async fn start(
    options: EvolveOptions,
    env: &Environment,
    observer: &mut dyn Observer,
) -> Result<Summary, EvolveError> {
    let task = kevo_tasks::resolve(&options.task)?;
    if options.candidates_per_iteration == 0 {
        return Err(EvolveError::NoCandidatesPerIteration);
    }
    if options.is_external() {
        return Err(EvolveError::ExternalStart);
    }
    let mut session = Session::open(options, task, env, None, None).await?;
    observer.on(&Event::Created {
        run: session.run.0.clone(),
    });
    session.run_seed(observer).await?;
    session.run_loop(observer).await
}

/// Continue a run from its last completed step.
pub async fn resume(
    run: &str,
    env: &Environment,
    observer: &mut dyn Observer,
) -> Result<Summary, EvolveError> {
    let run_id = RunId(run.to_string());
    let info = env.store.run(&run_id).await?;
    let options = stored_options(&info)?;
    if options.is_external() {
        return Err(EvolveError::ExternalRun {
            run: run.to_string(),
        });
    }
    let task = kevo_tasks::resolve(&options.task)?;
    // A run scores one problem: a task folder edited since the run began is
    // another problem. (A built-in task's hash also covers kevo's own task
    // code, which a kevo upgrade may change without changing the problem;
    // its runs resume as before.)
    if let Some(started) = info.config["provenance"]["task"]["content_hash"].as_str()
        && task.folder().is_some()
        && started != task.content_hash()
    {
        return Err(EvolveError::Resume {
            run: run.to_string(),
            reason: format!(
                "its task `{}` is version {started}, but `{}` now defines version {}: the \
                 problem changed since the run began; start a new run",
                task.name(),
                options.task,
                task.content_hash()
            ),
        });
    }
    let (_, checkpoint) = env.store.resume_run(&run_id).await?;
    let mut session = Session::open(options, task, env, Some(run_id), None).await?;
    match checkpoint {
        None => session.run_seed(observer).await?,
        Some(cp) => session.restore(cp).await?,
    }
    session.run_loop(observer).await
}

/// Ends a run stopped from outside (SIGINT, SIGTERM) once its session
/// future has been dropped: the model calls it had in flight are stored as
/// abandoned (tokens unknown: they may have been billed), and the run is
/// marked interrupted with `reason`, resumable. Returns how many calls were
/// abandoned.
pub async fn interrupt(env: &Environment, run: &str, reason: &str) -> Result<usize, EvolveError> {
    let run = RunId(run.to_string());
    let abandoned: Vec<InFlightCall> = {
        let mut calls = env.in_flight.lock();
        let (mine, others) = calls.drain(..).partition(|c| c.run == run);
        *calls = others;
        mine
    };
    let mut by_iteration: std::collections::BTreeMap<u32, Vec<NewLlmCall>> = Default::default();
    for c in &abandoned {
        let waited = c.sent.elapsed().as_secs_f64();
        by_iteration
            .entry(c.iteration)
            .or_default()
            .push(NewLlmCall {
                purpose: c.purpose.into(),
                error: Some(format!("{ABANDONED} {waited:.1} s: {reason}")),
                transcript: None,
                ..proposal_call(c.provider.clone(), &c.system, &c.user, waited)
            });
    }
    for (iteration, calls) in &by_iteration {
        env.store
            .record_abandoned_calls(&run, *iteration, calls)
            .await?;
    }
    env.store.mark_interrupted(&run, reason).await?;
    Ok(abandoned.len())
}
