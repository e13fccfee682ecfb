//! The device side of `--agent-tools`: a proposal's compile, check, time,
//! profile and show calls, run on a worker of the run's own (started on
//! the first call, sandboxed and checked like every candidate) at the
//! sizes the model may see.
//!
//! The run's evaluation pool is busy evaluating other proposals' answers
//! while a conversation goes on (`--concurrency`), so the tools have their
//! own worker; calls of concurrent conversations take turns on it, and
//! none runs while the run scores a candidate ([`ToolBench::hold`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kevo_backend::Dialect;
use kevo_eval::{Candidate, Evaluation, Outcome};
use kevo_proposer::BoxFuture;
use kevo_proposer::tools::{HostCall, Shown, ToolBudget, ToolHost, ToolReply};
use kevo_strategy::promotion::median;
use kevo_tasks::{Size, SizeSet, Task};
use kevo_worker::{Worker, WorkerCommand};

/// Lines of compiler output a reply keeps.
const DIAGNOSTIC_LINES: usize = 40;

/// A template (`// kevo: tune` lines) runs as its first valid
/// configuration, named in the reply: a model that writes one (as the
/// prompts' tuning section invites) gets an answer, not a refusal that
/// costs it a call. The source of that configuration, and the note.
fn first_configuration(template: &str) -> Result<(String, String), String> {
    let space = match kevo_tune::TuningSpace::parse(template) {
        Ok(Some(space)) => space,
        Ok(None) => return Err("the template declares no parameter".into()),
        Err(e) => return Err(format!("the template's tune lines: {e}")),
    };
    let Some(first) = space.valid().first() else {
        return Err("no configuration of the template meets its require lines".into());
    };
    let note = format!(
        "(a template: this ran its first configuration, {}, of {}; to try others, write their \
values in place of the tune lines. An answer that is a template is tuned over all of them.)",
        space.describe(first),
        space.valid().len()
    );
    Ok((space.instantiate(template, first), note))
}

/// `call` with its kernel source replaced by `source`.
fn with_source(call: &HostCall, source: String) -> HostCall {
    match call {
        HostCall::Compile { .. } => HostCall::Compile { source },
        HostCall::Check { .. } => HostCall::Check { source },
        HostCall::Time { sizes, .. } => HostCall::Time {
            source,
            sizes: sizes.clone(),
        },
        HostCall::Profile { size, .. } => HostCall::Profile {
            source,
            size: size.clone(),
        },
        HostCall::Show { which } => HostCall::Show { which: *which },
    }
}

/// The kernel source a call runs, if it runs one.
fn call_source(call: &HostCall) -> Option<&str> {
    match call {
        HostCall::Compile { source }
        | HostCall::Check { source }
        | HostCall::Time { source, .. }
        | HostCall::Profile { source, .. } => Some(source),
        HostCall::Show { .. } => None,
    }
}

/// The tools' worker: the run's, with inputs of its own. A kernel tried
/// through the tools never sees the run's inputs, so `check` is no oracle
/// for the inputs it will be scored on (a table of answers for them).
fn tools_worker_config(options: &crate::EvolveOptions) -> kevo_worker::WorkerConfig {
    options
        .worker_config()
        .with_inputs_secret(Some(kevo_eval::InputSecret::draw()))
}

/// What every proposal's tools share: the worker, the task, the sizes.
pub(super) struct ToolBench {
    pub(super) budget: ToolBudget,
    task: &'static Task,
    dialect: Dialect,
    command: WorkerCommand,
    config: kevo_worker::WorkerConfig,
    worker: Mutex<Option<Worker>>,
    /// Offered to `time` and `profile`: the smoke sizes, and the run's
    /// own with `run_sizes`. Never the held-out or validation sizes.
    sizes: Vec<Size>,
    /// `check` runs here: the smoke sizes.
    check_sizes: Vec<Size>,
    /// Sizes `show` may print: the smoke and the run's own, which every
    /// prompt shows anyway.
    public: Vec<String>,
}

impl ToolBench {
    /// The bench of a run with `options`, on a worker like the run's own.
    pub(super) fn shared(
        budget: ToolBudget,
        task: &'static Task,
        dialect: Dialect,
        options: &crate::EvolveOptions,
        env: &super::base::Environment,
    ) -> Arc<ToolBench> {
        Arc::new(ToolBench::new(
            budget,
            task,
            dialect,
            env.worker.clone(),
            tools_worker_config(options),
            &task.sizes(options.sizes).in_distribution,
        ))
    }

    pub(super) fn new(
        budget: ToolBudget,
        task: &'static Task,
        dialect: Dialect,
        command: WorkerCommand,
        config: kevo_worker::WorkerConfig,
        run_sizes: &[Size],
    ) -> ToolBench {
        let check_sizes = task.sizes(SizeSet::Smoke).in_distribution;
        let mut sizes = check_sizes.clone();
        if budget.run_sizes {
            for s in run_sizes {
                if !sizes.iter().any(|t| t.label == s.label) {
                    sizes.push(s.clone());
                }
            }
        }
        let public = check_sizes
            .iter()
            .chain(run_sizes)
            .map(|s| s.label.clone())
            .collect();
        ToolBench {
            budget,
            task,
            dialect,
            command,
            config,
            worker: Mutex::new(None),
            sizes,
            check_sizes,
            public,
        }
    }

    /// `source` evaluated at `sizes` on the tools' worker, and the seconds
    /// it took once the worker was free (another conversation's call may
    /// hold it: waiting is not charged). The worker is started on first
    /// use. Blocking.
    fn evaluate(
        &self,
        source: &str,
        sizes: &[Size],
        timeout: Duration,
    ) -> Result<(Evaluation, f64), String> {
        let mut guard = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        let started = Instant::now();
        if guard.is_none() {
            let worker = Worker::start(self.command.clone(), self.config.clone())
                .map_err(|e| format!("the tools' worker cannot start: {e}"))?;
            *guard = Some(worker);
        }
        let worker = guard.as_mut().expect("started above");
        let candidate = Candidate::new(source.to_string(), self.dialect);
        let e = worker.evaluate_candidate(self.task, &candidate, sizes, timeout);
        Ok((e, started.elapsed().as_secs_f64()))
    }

    /// The tools' worker, held while the run scores a candidate: under
    /// `--concurrency` a conversation's `time` would otherwise share the
    /// device (or PoCL's cores) with a scored measurement and skew it.
    pub(super) fn hold(&self) -> std::sync::MutexGuard<'_, Option<Worker>> {
        self.worker.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The labels of the sizes `time` and `profile` may name.
    pub(super) fn size_labels(&self) -> Vec<String> {
        self.sizes.iter().map(|s| s.label.clone()).collect()
    }

    fn sizes_named(&self, labels: &[String]) -> Vec<Size> {
        labels
            .iter()
            .filter_map(|l| self.sizes.iter().find(|s| &s.label == l).cloned())
            .collect()
    }
}

/// One proposal's tools: the bench, and the kernels `show` and `time`
/// refer to.
pub(super) struct ProposalTools {
    pub(super) bench: Arc<ToolBench>,
    pub(super) parent: (String, Evaluation),
    pub(super) incumbent: (String, Evaluation),
    pub(super) elites: Vec<(String, Evaluation)>,
    pub(super) timeout: Duration,
}

impl ToolHost for ProposalTools {
    fn sizes(&self) -> Vec<String> {
        self.bench.sizes.iter().map(|s| s.label.clone()).collect()
    }

    fn elites(&self) -> usize {
        self.elites.len()
    }

    fn can_profile(&self) -> bool {
        self.bench.dialect == Dialect::Cuda && kevo_worker::profiler::find_ncu().is_some()
    }

    fn parent_source(&self) -> String {
        self.parent.0.clone()
    }

    fn kernel_file(&self) -> String {
        format!("kernel.{}", self.bench.dialect.extension())
    }

    fn run<'a>(&'a self, call: &'a HostCall, limit: Duration) -> BoxFuture<'a, ToolReply> {
        Box::pin(async move {
            let template = call_source(call).filter(|s| kevo_tune::is_template(s));
            let (call, note) = match template.map(first_configuration) {
                None => (call.clone(), None),
                Some(Ok((source, note))) => (with_source(call, source), Some(note)),
                Some(Err(why)) => {
                    return ToolReply {
                        text: why,
                        failed: true,
                        device_s: 0.0,
                    };
                }
            };
            let (mut text, failed, device_s) =
                tokio::task::block_in_place(|| self.run_blocking(&call, limit));
            if let Some(note) = note {
                text = format!("{note}\n{text}");
            }
            ToolReply {
                text,
                failed,
                device_s,
            }
        })
    }
}

impl ProposalTools {
    /// The reply, whether it failed, and the worker seconds it took; each
    /// evaluation gets the candidate's time limit or what is left of
    /// `limit`, whichever is less.
    fn run_blocking(&self, call: &HostCall, limit: Duration) -> (String, bool, f64) {
        let bench = &self.bench;
        let used = std::cell::Cell::new(0.0);
        let evaluated = |source: &str, sizes: &[Size]| {
            let left = limit.saturating_sub(Duration::from_secs_f64(used.get()));
            let (e, s) = bench.evaluate(source, sizes, self.timeout.min(left))?;
            used.set(used.get() + s);
            Ok::<Evaluation, String>(e)
        };
        let (text, failed) = match call {
            HostCall::Compile { source } => {
                // The smallest check size: compiling is what is reported.
                match evaluated(source, &bench.check_sizes[..1]) {
                    Ok(e) => compiled(&e),
                    Err(e) => (e, true),
                }
            }
            HostCall::Check { source } => match evaluated(source, &bench.check_sizes) {
                Ok(e) => checked(&e),
                Err(e) => (e, true),
            },
            HostCall::Time { source, sizes } => {
                let sizes = bench.sizes_named(sizes);
                let mut rounds = Vec::new();
                // Rounds alternate which kernel runs first (c i, i c, c i)
                // while another round fits what is left of the limit.
                let failure = loop {
                    let k = rounds.len();
                    if k == TIME_ROUNDS
                        || (k > 0 && used.get() * (k as f64 + 1.0) / k as f64 > limit.as_secs_f64())
                    {
                        break None;
                    }
                    let incumbent_first = k % 2 == 1;
                    let pair = if incumbent_first {
                        evaluated(&self.incumbent.0, &sizes)
                            .and_then(|i| Ok((evaluated(source, &sizes)?, i)))
                    } else {
                        evaluated(source, &sizes)
                            .and_then(|c| Ok((c, evaluated(&self.incumbent.0, &sizes)?)))
                    };
                    match pair {
                        Ok((c, _)) if !c.outcome.is_correct() => break Some(checked(&c)),
                        Ok(p) => rounds.push(p),
                        Err(e) => break Some((e, true)),
                    }
                };
                failure.unwrap_or_else(|| (timed(&rounds), false))
            }
            HostCall::Profile { source, size } => {
                let started = Instant::now();
                let reply = self.profiled(source, size);
                used.set(used.get() + started.elapsed().as_secs_f64());
                reply
            }
            HostCall::Show { which } => {
                let (source, evaluation) = match which {
                    Shown::Parent => &self.parent,
                    Shown::Incumbent => &self.incumbent,
                    Shown::Elite(i) => &self.elites[*i],
                };
                (shown(source, evaluation, &bench.public), false)
            }
        };
        (text, failed, used.get())
    }

    fn profiled(&self, source: &str, size: &str) -> (String, bool) {
        let bench = &self.bench;
        let Some(size) = bench.sizes.iter().find(|s| s.label == size) else {
            return (format!("size {size} is not offered"), true);
        };
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => return (format!("no directory for the profile: {e}"), true),
        };
        let report = dir.path().join("tool.ncu-rep");
        // Not beside a tool evaluation: the worker is held meanwhile.
        let _worker = bench.worker.lock().unwrap_or_else(|p| p.into_inner());
        match kevo_worker::profiler::profile_task(
            &bench.command,
            bench.config.clone(),
            bench.task,
            source,
            size,
            &report,
        ) {
            Ok(p) => (p.summary(), false),
            Err(e) => (format!("the profile failed: {e}"), true),
        }
    }
}

/// The compile tool's reply: the diagnostics, or the kernels' facts.
fn compiled(e: &Evaluation) -> (String, bool) {
    if let Outcome::CompileError { .. } = &e.outcome {
        let detail = e
            .outcome
            .failure_detail(DIAGNOSTIC_LINES)
            .unwrap_or_else(|| e.outcome.summary());
        return (format!("did not compile:\n{detail}"), true);
    }
    let facts: Vec<String> = e.kernels.iter().filter_map(|k| k.facts_line()).collect();
    let mut text = format!("compiled in {:.2} s", e.wall.compile_s);
    if facts.is_empty() {
        text.push_str(" (the backend reports no register or occupancy figures)");
    } else {
        text.push_str(":\n");
        text.push_str(&facts.join("\n"));
    }
    (text, false)
}

/// The check tool's reply: pass, or the first failure with its size.
fn checked(e: &Evaluation) -> (String, bool) {
    // Correctness only: a score from one timing on the tools' worker is
    // no measure to compare with the incumbent's (`time` is).
    let head = if e.outcome.is_correct() {
        "correct at every check size".to_string()
    } else {
        e.outcome.summary()
    };
    let mut lines = vec![head];
    if let Some(detail) = e.outcome.failure_detail(DIAGNOSTIC_LINES) {
        lines.push(detail);
    }
    for s in &e.sizes {
        lines.push(format!(
            "{}: {} ({} {:.3e}{})",
            s.label,
            if s.correct { "correct" } else { "WRONG" },
            s.metric,
            s.error,
            s.tolerance
                .map(|t| format!(", tolerance {t:.3e}"))
                .unwrap_or_default()
        ));
    }
    (lines.join("\n"), !e.outcome.is_correct())
}

/// Rounds of the time tool: the candidate and the incumbent measured in
/// turn this many times, so that a drift of the device (clocks, PoCL's
/// shared cores) shows as a spread of the ratio, not as a gain.
const TIME_ROUNDS: usize = 3;

/// The time tool's reply: per size, both medians over the rounds with
/// the spread of one round, and the ratio of each round's medians (their
/// median, and the range when there were several), measured in one call
/// on one worker.
fn timed(rounds: &[(Evaluation, Evaluation)]) -> String {
    let Some((first, first_incumbent)) = rounds.first() else {
        return "nothing was timed".into();
    };
    // A wrong kernel is answered as `check` answers it, never timed: say
    // so, or a model takes a timing for an unchecked result.
    let mut lines = vec!["correct at every size timed, in every round".to_string()];
    for c in &first.sizes {
        let pairs: Vec<(f64, f64, f64, f64)> = rounds
            .iter()
            .filter_map(|(cand, inc)| {
                let c = cand.sizes.iter().find(|s| s.label == c.label)?;
                let i = inc.sizes.iter().find(|s| s.label == c.label)?;
                Some((
                    c.time.median_s,
                    c.time.spread,
                    i.time.median_s,
                    i.time.spread,
                ))
            })
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let yours = median(pairs.iter().map(|p| p.0).collect());
        let theirs = median(pairs.iter().map(|p| p.2).collect());
        let ratios: Vec<f64> = pairs.iter().map(|p| p.2 / p.0).collect();
        let ratio = median(ratios.clone());
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().copied().fold(0.0, f64::max);
        // The roofline share at the median time, from the first round's.
        let fraction = c.fraction * c.time.median_s / yours.max(f64::MIN_POSITIVE);
        // One direction throughout: a speedup (the incumbent's time over
        // yours, above 1 when yours is faster), the median of the rounds'
        // ratios, which need not be the ratio of the two medians shown.
        let direction = if ratio >= 1.0 { "faster" } else { "slower" };
        let rounds_text = if ratios.len() > 1 {
            format!(
                "median of {} interleaved rounds' ratios, {lo:.2}x to {hi:.2}x",
                ratios.len()
            )
        } else {
            "one round".to_string()
        };
        lines.push(format!(
            "{}: yours {} (spread {:.1}%, {:.1}% of the roofline), incumbent {} (spread {:.1}%): speedup {ratio:.2}x, yours {direction} ({rounds_text}; above 1 is faster)",
            c.label,
            micros(yours),
            pairs[0].1 * 100.0,
            fraction * 100.0,
            micros(theirs),
            pairs[0].3 * 100.0,
        ));
    }
    if !first_incumbent.outcome.is_correct() {
        lines.push(format!(
            "(the incumbent: {})",
            first_incumbent.outcome.summary()
        ));
    }
    lines.join("\n")
}

fn micros(s: f64) -> String {
    format!("{:.2} us", s * 1e6)
}

/// The show tool's reply: the source and its stored evaluation at the
/// `public` sizes (whatever else a stored evaluation holds stays out).
fn shown(source: &str, e: &Evaluation, public: &[String]) -> String {
    let sizes: Vec<String> = e
        .sizes
        .iter()
        .filter(|s| public.contains(&s.label))
        .map(|s| {
            format!(
                "{}: {} ({:.1}% of the roofline)",
                s.label,
                micros(s.time.median_s),
                s.fraction * 100.0
            )
        })
        .collect();
    format!("{}\n{}\n\n{source}", e.outcome.summary(), sizes.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_never_draw_the_runs_inputs() {
        let mut options = crate::EvolveOptions::new("saxpy", &[], 1);
        let run = kevo_eval::InputSecret::draw();
        options.inputs_secret = Some(run);
        assert_eq!(options.worker_config().eval.inputs_secret, Some(run));
        let tools = tools_worker_config(&options).eval.inputs_secret;
        assert!(tools.is_some_and(|t| t != run), "{tools:?}");
    }
}
