//! The tuning loop: ask the strategy, evaluate, tell, until the budget is
//! spent or the space is. Evaluation is the caller's (a worker, the store's
//! cache, a synthetic objective in tests), so the same loop serves
//! `kevo tune`, best-of-k inside evolution and the strategy benchmarks.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::search::{Observation, Search};
use crate::space::{Configuration, TuningSpace};

/// When to stop. Every trial counts against `evaluations`, a cached one
/// too, so a strategy makes the same choices whatever the cache holds;
/// `seconds` bounds the wall time (a cached trial costs next to none).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Budget {
    pub evaluations: Option<usize>,
    pub seconds: Option<f64>,
}

impl Budget {
    pub fn evaluations(n: usize) -> Self {
        Budget {
            evaluations: Some(n),
            seconds: None,
        }
    }
}

/// One evaluated configuration and what the evaluation returned.
#[derive(Debug, Clone)]
pub struct Trial<T> {
    pub configuration: Configuration,
    pub score: Option<f64>,
    pub detail: T,
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Every valid configuration was evaluated.
    Exhausted,
    Evaluations,
    Seconds,
    /// The evaluation callback asked to stop (an interrupt, a failed store).
    Interrupted,
}

/// What the evaluation callback returns: the score (None: the
/// configuration failed) and anything the caller wants kept with the
/// trial; `Break` stops the loop without recording a trial.
pub enum Step<T> {
    Scored(Option<f64>, T),
    Break,
}

/// Run `search` over `space` within `budget`. Returns the trials in order
/// and why it stopped.
pub fn run<T>(
    space: &TuningSpace,
    search: &mut dyn Search,
    budget: Budget,
    mut evaluate: impl FnMut(&Configuration, usize) -> Step<T>,
) -> (Vec<Trial<T>>, Stop) {
    let start = Instant::now();
    let mut trials: Vec<Trial<T>> = Vec::new();
    let mut seen: Vec<Observation> = Vec::new();
    loop {
        if trials.len() >= space.valid().len() {
            return (trials, Stop::Exhausted);
        }
        if budget.evaluations.is_some_and(|n| trials.len() >= n) {
            return (trials, Stop::Evaluations);
        }
        if budget
            .seconds
            .is_some_and(|s| start.elapsed() >= Duration::from_secs_f64(s.max(0.0)))
        {
            return (trials, Stop::Seconds);
        }
        let Some(configuration) = search.next(space, &seen) else {
            return (trials, Stop::Exhausted);
        };
        debug_assert!(space.is_valid(&configuration));
        match evaluate(&configuration, trials.len()) {
            Step::Scored(score, detail) => {
                let score = score.filter(|s| s.is_finite());
                seen.push(Observation {
                    configuration: configuration.clone(),
                    score,
                });
                trials.push(Trial {
                    configuration,
                    score,
                    detail,
                });
            }
            Step::Break => return (trials, Stop::Interrupted),
        }
    }
}

/// The index of the best trial (the earliest among equals), if any
/// succeeded.
pub fn best<T>(trials: &[Trial<T>]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, t) in trials.iter().enumerate() {
        if let Some(s) = t.score
            && best.is_none_or(|(_, b)| s > b)
        {
            best = Some((i, s));
        }
    }
    best.map(|(i, _)| i)
}
