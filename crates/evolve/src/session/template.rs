//! A proposed template (`// kevo: tune` lines) tuned best-of-k within an
//! iteration: its configurations evaluated like any candidate, the
//! leaders re-measured together so that one lucky run does not pick the
//! answer, and the winner annotated with the table of what was tried.

use kevo_eval::Evaluation;
use kevo_strategy::Promotion;

use super::base::Session;
use super::error::EvolveError;
use super::extract::Candidate;
use super::values::{EvaluatedOnce, Tried};

/// How many of the best configurations are re-measured together: single
/// evaluations of one body varied from 0.62 to 1.07 across configurations
/// on a shared 2-core CPU, so the single best is often not the best.
const FINALISTS: usize = 3;

/// What tuning found for one configuration.
struct TriedConfiguration {
    configuration: kevo_tune::Configuration,
    result: EvaluatedOnce,
    /// Median score over the interleaved re-measurement of the finalists,
    /// with the lowest and highest round.
    remeasured: Option<(f64, f64, f64)>,
}

impl Session<'_> {
    /// A proposed template is tuned best-of-k: the tuning strategy picks
    /// up to `tune.best_of` configurations, each is instantiated and
    /// evaluated like any candidate (a configuration this run measured
    /// before costs nothing). Under noise-aware promotion the best
    /// [`FINALISTS`] are then re-measured together over the promotion's
    /// rounds and the best median wins; under strict promotion the best
    /// single score does. The winner, annotated with the table of what was
    /// tried, becomes the candidate with its evaluation, so everything
    /// downstream (decision, prompts, held-out gate, export) sees an
    /// ordinary kernel. A template whose declarations do not parse, or
    /// tuning turned off, fails as a compile error naming the line; with
    /// no correct configuration, the first configuration's failure stands.
    pub(super) async fn tune_template(
        &mut self,
        template: Candidate,
        batch: &[Tried],
        seed: u64,
    ) -> Result<(Candidate, EvaluatedOnce), EvolveError> {
        let best_of = self.options.tune.best_of as usize;
        if best_of == 0 {
            let message = "the kernel declares tunable parameters (`// kevo: tune`), and tuning \
                           is off in this run (tune.best_of = 0): define the values yourself";
            let e = self.refusal(message.to_string());
            return Ok((template, (e, None, None)));
        }
        let space = match kevo_tune::TuningSpace::parse(&template.source) {
            Ok(Some(space)) => space,
            Ok(None) => unreachable!("is_template found a tune line"),
            Err(e) => {
                let e = self.refusal(e.to_string());
                return Ok((template, (e, None, None)));
            }
        };
        let mut search = self.options.tune.strategy.build(seed);
        let mut seen: Vec<kevo_tune::Observation> = Vec::new();
        let mut tried: Vec<TriedConfiguration> = Vec::new();
        while tried.len() < best_of {
            let Some(c) = search.next(&space, &seen) else {
                break;
            };
            let instance = Candidate::new(space.instantiate(&template.source, &c), self.dialect);
            let result = self.evaluate_once(&instance, batch).await?;
            seen.push(kevo_tune::Observation {
                configuration: c.clone(),
                score: result.0.outcome.score(),
            });
            tried.push(TriedConfiguration {
                configuration: c,
                result,
                remeasured: None,
            });
        }
        let order = best_first(&tried);
        let rounds = self.remeasure_finalists(&space, &template.source, &order, &mut tried)?;
        let table = self.tuning_table(&space, &tried, &order, rounds);
        let best = winner(&tried, &order);
        let chosen = tried.swap_remove(best);
        let source = space.instantiate_annotated(&template.source, &chosen.configuration, &table);
        Ok((Candidate::new(source, self.dialect), chosen.result))
    }

    /// A compile error for a template kevo refuses to tune.
    fn refusal(&self, message: String) -> Evaluation {
        let device = self.pool.device();
        let log = format!("candidate.{}: error: {message}", self.dialect.extension());
        Evaluation::without_sizes(
            self.task.name(),
            &device.name,
            device.backend,
            kevo_eval::Outcome::CompileError {
                diagnostics: kevo_backend::CompileDiagnostics::from_log(log),
                message,
            },
            kevo_eval::WallTimes::default(),
        )
    }

    /// Under noise-aware promotion, the best [`FINALISTS`] correct
    /// configurations evaluated again together over the promotion's rounds
    /// (their spend counted with the run's re-measurements); the rounds
    /// run, or None when nothing was re-measured.
    fn remeasure_finalists(
        &mut self,
        space: &kevo_tune::TuningSpace,
        template: &str,
        order: &[usize],
        tried: &mut [TriedConfiguration],
    ) -> Result<Option<u32>, EvolveError> {
        let Promotion::NoiseAware { rounds } = self.options.promotion else {
            return Ok(None);
        };
        let finalists: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| tried[i].result.0.outcome.score().is_some())
            .take(FINALISTS)
            .collect();
        if finalists.len() < 2 {
            return Ok(None);
        }
        let sources: Vec<String> = finalists
            .iter()
            .map(|&i| space.instantiate(template, &tried[i].configuration))
            .collect();
        let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
        let m = self.remeasure(&refs, rounds)?;
        self.state.remeasure.add(&m.spend);
        for (k, &i) in finalists.iter().enumerate() {
            let scores = m.scores(k);
            tried[i].remeasured = m.median(k).map(|median| {
                let lo = scores.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (median, lo, hi)
            });
        }
        Ok(Some(rounds))
    }

    /// The table shown with the winner: every configuration, best first,
    /// with its single score and, for the finalists, the re-measured
    /// median and range.
    fn tuning_table(
        &self,
        space: &kevo_tune::TuningSpace,
        tried: &[TriedConfiguration],
        order: &[usize],
        rounds: Option<u32>,
    ) -> String {
        let mut table = format!(
            "kevo tuned this kernel: {} of its {} valid configurations evaluated ({}), best first",
            tried.len(),
            space.valid().len(),
            self.options.tune.strategy
        );
        match rounds {
            Some(r) => table.push_str(&format!(
                "; the leaders were re-measured together over {r} interleaved rounds and the best median chosen (a single evaluation varies from run to run):"
            )),
            None => table.push(':'),
        }
        for &i in order {
            let t = &tried[i];
            let verdict = match t.result.0.outcome.score() {
                Some(score) => format!("score {score:.4}"),
                None => {
                    let summary = t.result.0.outcome.summary();
                    let short: String = summary.chars().take(120).collect();
                    short.replace('\n', " ")
                }
            };
            let again = t.remeasured.map_or(String::new(), |(median, lo, hi)| {
                format!("; re-measured median {median:.4} ({lo:.4}-{hi:.4})")
            });
            table.push_str(&format!(
                "\n  {}  {verdict}{again}",
                space.describe(&t.configuration)
            ));
        }
        table
    }
}

/// Configurations by their single score, best first (failures last, ties
/// to the earlier).
fn best_first(tried: &[TriedConfiguration]) -> Vec<usize> {
    let score = |i: usize| {
        tried[i]
            .result
            .0
            .outcome
            .score()
            .unwrap_or(f64::NEG_INFINITY)
    };
    let mut order: Vec<usize> = (0..tried.len()).collect();
    order.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
    order
}

/// The configuration that wins: the best re-measured median where the
/// leaders were re-measured, else the best single score, else the first
/// (whose failure then stands).
fn winner(tried: &[TriedConfiguration], order: &[usize]) -> usize {
    let remeasured = order
        .iter()
        .copied()
        .filter_map(|i| tried[i].remeasured.map(|(m, _, _)| (i, m)))
        .fold(None::<(usize, f64)>, |best, c| match best {
            Some(b) if b.1 >= c.1 => Some(b),
            _ => Some(c),
        });
    match remeasured {
        Some((i, _)) => i,
        None if order
            .first()
            .is_some_and(|&i| tried[i].result.0.outcome.score().is_some()) =>
        {
            order[0]
        }
        None => 0,
    }
}
