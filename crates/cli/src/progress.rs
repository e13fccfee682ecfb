//! The live progress of a run (`kevo evolve`, `kevo tell`, `kevo sweep`):
//! a spinner line on a terminal, plain lines otherwise, JSON lines with
//! `--json`.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use crate::style::{Stream, Tone, paint};
use kevo_evolve::Event;

use crate::evolve::cost_text;

/// Live progress: a spinner line with iteration, best score, speedup, last
/// outcome, tokens and cost; JSON lines with --json; nothing with --quiet.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    json: bool,
    quiet: bool,
    iterations: u32,
    /// Iterations finished in this session, for the throughput.
    done_in_session: u32,
    /// The run's id once it is known, for the signal handler.
    pub(crate) run: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// Whether iteration lines show throughput and the device's busy
    /// share (not for `kevo tell`'s single iteration).
    pace: bool,
}

impl Progress {
    pub(crate) fn new(json: bool, quiet: bool) -> Self {
        let bar = (!json && !quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos}/{len} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            // Retry and wait notices go above the bar, not through it.
            let above = bar.clone();
            kevo_proposer::notice::set_sink(move |line| above.println(format!("kevo: {line}")));
            bar
        });
        Progress {
            bar,
            json,
            quiet,
            iterations: 0,
            done_in_session: 0,
            run: Default::default(),
            pace: true,
        }
    }

    /// For one iteration at a time (`kevo tell`): no throughput.
    pub(crate) fn single(mut self) -> Self {
        self.pace = false;
        self
    }

    fn line(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None if !self.quiet && !self.json => eprintln!("{text}"),
            None => {}
        }
    }
}

impl kevo_evolve::Observer for Progress {
    fn on(&mut self, event: &Event) {
        if let Event::Created { run } | Event::Started { run, .. } = event {
            *self.run.lock().unwrap_or_else(|e| e.into_inner()) = Some(run.clone());
        }
        if self.json {
            if let Ok(text) = serde_json::to_string(event) {
                println!("{text}");
            }
            return;
        }
        match event {
            // Printed with the seed's result, in `Started`.
            Event::Created { .. } => {}
            Event::Batch {
                batch,
                status,
                done,
                total,
            } => {
                let text = format!("batch {batch}: {status}, {done} of {total} answered");
                match &self.bar {
                    Some(bar) => bar.set_message(text),
                    None => self.line(text),
                }
            }
            Event::Started { .. } => self.started(event),
            Event::Seed { score, wall_s } => {
                self.line(format!("seed: score {score:.4} in-run ({wall_s:.2} s)"))
            }
            Event::Iteration { .. } => self.iteration(event),
            Event::MetaPrompt { .. } => self.meta_prompt(event),
            Event::HeldOut(h) => self.line(format!(
                "held-out {}: winner {}; seed {}; Φ = {:.4}{}",
                h.size,
                h.winner_roofline
                    .clone()
                    .unwrap_or_else(|| h.winner_outcome.clone()),
                h.seed_fraction
                    .map(|f| format!("{:.1}% of the same ceiling", f * 100.0))
                    .unwrap_or_else(|| h.seed_outcome.clone()),
                h.phi,
                h.speedup
                    .map(|s| format!(", {s:.2}x the seed"))
                    .unwrap_or_default()
            )),
            Event::Finished(_) => {
                if let Some(bar) = &self.bar {
                    bar.finish_and_clear();
                }
            }
        }
    }
}

impl Progress {
    /// The run, its device and whether it is new or resumed; the bar's
    /// length and position.
    fn started(&mut self, event: &Event) {
        let Event::Started {
            run,
            task,
            device,
            backend,
            resumed_from,
            iterations,
            sandbox,
        } = event
        else {
            return;
        };
        self.iterations = *iterations;
        if let Some(bar) = &self.bar {
            bar.set_length(u64::from(*iterations));
            bar.set_position(u64::from(resumed_from.unwrap_or(0)));
        }
        let how = match resumed_from {
            Some(k) => format!("resuming after iteration {k}"),
            None => "new run".into(),
        };
        self.line(format!("run {run}: {task} on {device} ({backend}), {how}"));
        self.line(format!("sandbox: {sandbox}"));
    }

    /// An iteration's line: the best so far, the last outcomes, who
    /// answered, the spend and the pace. On a terminal it updates the
    /// bar, and a new best or a verdict is also printed above it.
    fn iteration(&mut self, event: &Event) {
        let Event::Iteration {
            iteration,
            outcomes,
            scores,
            promoted,
            best_score,
            best_measure,
            speedup,
            input_tokens,
            output_tokens,
            cost_usd,
            unknown_cost_calls,
            unknown_usage_calls,
            verdicts,
            in_flight,
            queued,
            evaluating_s,
            session_s,
            models,
            prompt_variant,
            arms,
            ..
        } = event
        else {
            return;
        };
        let last = outcomes
            .iter()
            .zip(scores)
            .map(|(o, s)| match s {
                Some(s) => format!("{o} {s:.4}"),
                None => o.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ");
        let mark = if *promoted {
            format!(" {}", paint(Stream::Stderr, Tone::Good, "NEW BEST"))
        } else {
            String::new()
        };
        // "re-measured over 5 interleaved rounds: ... (within noise,
        // not promoted)": why an apparent gain did or did not count.
        let mark = verdicts.iter().fold(mark, |m, v| format!("{m} | {v}"));
        self.done_in_session += 1;
        let pace = self.pace_text(*session_s, *evaluating_s, (*in_flight, *queued));
        let who = who_text(models, *prompt_variant, arms);
        let msg = format!(
            "best {best_score:.4} {best_measure} ({speedup:.2}x the seed) | last (in-run): {last}{mark}{who} | tokens {input_tokens}+{output_tokens}{} | {}{pace}",
            match unknown_usage_calls {
                0 => String::new(),
                n => format!(" + unknown ({n} call(s) without usable counts)"),
            },
            cost_text(*cost_usd, *unknown_cost_calls)
        );
        match &self.bar {
            Some(bar) => {
                bar.set_position(u64::from(*iteration));
                bar.set_message(msg.clone());
                if *promoted || !verdicts.is_empty() {
                    bar.println(format!("iteration {iteration}: {msg}"));
                }
            }
            None if self.iterations == 0 => self.line(format!("iteration {iteration}: {msg}")),
            None => self.line(format!("iteration {iteration}/{}: {msg}", self.iterations)),
        }
    }

    /// Throughput and the device's busy share, this session: " | 2.0/min,
    /// device busy 85%, 2 in flight".
    fn pace_text(
        &self,
        session_s: f64,
        evaluating_s: f64,
        (in_flight, queued): (u32, u32),
    ) -> String {
        if !(self.pace && session_s > 0.0) {
            return String::new();
        }
        format!(
            " | {:.1}/min, device busy {:.0}%{}",
            f64::from(self.done_in_session) * 60.0 / session_s,
            100.0 * evaluating_s / session_s,
            match (in_flight, queued) {
                (0, 0) => String::new(),
                (n, 0) => format!(", {n} in flight"),
                (n, q) => format!(", {n} in flight, {q} waiting for the device"),
            }
        )
    }

    /// What the meta-prompter did before a proposal, with its diagnosis.
    fn meta_prompt(&mut self, event: &Event) {
        let Event::MetaPrompt {
            iteration,
            parent,
            variant,
            applied,
            rejected,
            diagnosis,
            failed,
        } = event
        else {
            return;
        };
        let what = match (variant, failed) {
            (_, Some(why)) => format!("no answer ({why}); the prompt stays as it is"),
            (Some(v), None) => {
                format!("variant {v} from {parent}, edited {}", applied.join(", "))
            }
            (None, None) => format!("no edit applied to variant {parent}"),
        };
        let mut text = format!("meta-prompter before proposal {iteration}: {what}");
        if !rejected.is_empty() {
            text.push_str(&format!(
                "; {} edit(s) rejected: {}",
                rejected.len(),
                rejected.join("; ")
            ));
        }
        if !diagnosis.is_empty() {
            let short: String = diagnosis.chars().take(200).collect();
            text.push_str(&format!("\n  diagnosis: {}", short.replace('\n', " ")));
        }
        match &self.bar {
            Some(bar) => bar.println(text),
            None => self.line(text),
        }
    }
}

/// Which model answered and which prompt variant asked, and the bandit's
/// tally: " | model b | ucb: a 3 calls mean 0.000, b 9 calls mean 0.210".
fn who_text(
    models: &[String],
    prompt_variant: Option<u32>,
    arms: &[kevo_evolve::ArmStat],
) -> String {
    let mut who = Vec::new();
    if !models.is_empty() {
        who.push(format!("model {}", models.join(", ")));
    }
    if let Some(v) = prompt_variant {
        who.push(format!("prompt v{v}"));
    }
    if !arms.is_empty() {
        who.push(format!(
            "ucb: {}",
            arms.iter()
                .map(|a| format!(
                    "{} {} calls mean {:.3}{}",
                    a.model,
                    a.calls,
                    a.mean_reward,
                    if a.cost_usd > 0.0 {
                        format!(" ${:.2}", a.cost_usd)
                    } else {
                        String::new()
                    }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if who.is_empty() {
        String::new()
    } else {
        format!(" | {}", who.join(" | "))
    }
}
