//! Strategies that choose the next configuration to evaluate from what
//! the evaluations so far returned. Every strategy proposes only valid
//! configurations it has not seen, and returns None when none is left;
//! the tuner stops at the budget or then.
//!
//! - exhaustive: every valid configuration in order (small spaces);
//! - random: uniform over the unseen ones;
//! - local: greedy neighbourhood search from the best configuration so far
//!   (one parameter one value up or down), restarting at random when every
//!   neighbour of every good configuration is seen;
//! - tpe: a tree-structured Parzen estimator (Bergstra et al. 2011) over
//!   the value indices: after a few random configurations, the good quarter
//!   and the rest are modelled per parameter by smoothed histograms `l`
//!   and `g`, and of a sample drawn from `l` the configuration with the
//!   highest `l/g` is evaluated next.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use kevo_strategy::Rng;
use serde::{Deserialize, Serialize};

use crate::space::{Configuration, TuningSpace};

/// One evaluated configuration: its score (higher is better), None when it
/// failed (did not compile, faulted, was wrong or suspicious).
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub configuration: Configuration,
    pub score: Option<f64>,
}

/// A search over a tuning space.
pub trait Search {
    /// The next configuration to evaluate, given everything evaluated so
    /// far (in order); None when every valid configuration is seen.
    fn next(&mut self, space: &TuningSpace, seen: &[Observation]) -> Option<Configuration>;
}

/// The strategies, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StrategyKind {
    Exhaustive,
    Random,
    Local,
    Tpe,
}

impl StrategyKind {
    pub const ALL: [StrategyKind; 4] = [
        StrategyKind::Exhaustive,
        StrategyKind::Random,
        StrategyKind::Local,
        StrategyKind::Tpe,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Exhaustive => "exhaustive",
            StrategyKind::Random => "random",
            StrategyKind::Local => "local",
            StrategyKind::Tpe => "tpe",
        }
    }

    /// A fresh search of this kind; `seed` fixes its random choices.
    pub fn build(self, seed: u64) -> Box<dyn Search + Send> {
        match self {
            StrategyKind::Exhaustive => Box::new(Exhaustive),
            StrategyKind::Random => Box::new(RandomSearch {
                rng: Rng::new(seed),
            }),
            StrategyKind::Local => Box::new(LocalSearch {
                rng: Rng::new(seed),
            }),
            StrategyKind::Tpe => Box::new(Tpe::new(seed)),
        }
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for StrategyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        StrategyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown tuning strategy `{s}` (one of {})",
                    StrategyKind::ALL.map(StrategyKind::name).join(", ")
                )
            })
    }
}

fn seen_set(seen: &[Observation]) -> HashSet<&Configuration> {
    seen.iter().map(|o| &o.configuration).collect()
}

fn random_unseen(
    rng: &mut Rng,
    space: &TuningSpace,
    seen: &[Observation],
) -> Option<Configuration> {
    let set = seen_set(seen);
    let unseen: Vec<&Configuration> = space.unseen(&set).collect();
    (!unseen.is_empty()).then(|| unseen[rng.below(unseen.len())].clone())
}

/// Successful observations, best first (ties: the earlier first).
fn ranked(seen: &[Observation]) -> Vec<(&Configuration, f64)> {
    let mut ok: Vec<(&Configuration, f64)> = seen
        .iter()
        .filter_map(|o| {
            o.score
                .filter(|s| s.is_finite())
                .map(|s| (&o.configuration, s))
        })
        .collect();
    ok.sort_by(|a, b| b.1.total_cmp(&a.1));
    ok
}

/// Every valid configuration, in the space's order.
pub struct Exhaustive;

impl Search for Exhaustive {
    fn next(&mut self, space: &TuningSpace, seen: &[Observation]) -> Option<Configuration> {
        let set = seen_set(seen);
        space.unseen(&set).next().cloned()
    }
}

/// Uniform over the unseen valid configurations.
pub struct RandomSearch {
    rng: Rng,
}

impl Search for RandomSearch {
    fn next(&mut self, space: &TuningSpace, seen: &[Observation]) -> Option<Configuration> {
        random_unseen(&mut self.rng, space, seen)
    }
}

/// Greedy neighbourhood search: an unseen neighbour of the best
/// configuration that has one; a random restart when none has.
pub struct LocalSearch {
    rng: Rng,
}

impl Search for LocalSearch {
    fn next(&mut self, space: &TuningSpace, seen: &[Observation]) -> Option<Configuration> {
        let set = seen_set(seen);
        for (c, _) in ranked(seen) {
            let fresh: Vec<Configuration> = space
                .neighbours(c)
                .into_iter()
                .filter(|n| !set.contains(n))
                .collect();
            if !fresh.is_empty() {
                return Some(fresh[self.rng.below(fresh.len())].clone());
            }
        }
        random_unseen(&mut self.rng, space, seen)
    }
}

/// Tree-structured Parzen estimator over value indices.
pub struct Tpe {
    rng: Rng,
    /// Random configurations before the model is used.
    pub startup: usize,
    /// The fraction of successful observations that counts as good.
    pub gamma: f64,
    /// Configurations drawn from `l` per proposal.
    pub draws: usize,
}

impl Tpe {
    pub fn new(seed: u64) -> Self {
        Tpe {
            rng: Rng::new(seed),
            startup: 6,
            gamma: 0.25,
            draws: 24,
        }
    }
}

/// A smoothed histogram over `k` ordered values: a uniform prior of weight
/// one plus, for each point, a discretised Gaussian around it whose width
/// shrinks as points accumulate (Scott's rule, at least half a step).
fn parzen(points: &[usize], k: usize) -> Vec<f64> {
    let mut density = vec![1.0 / k as f64; k];
    if !points.is_empty() {
        let width = (k as f64 / 4.0 * (points.len() as f64).powf(-0.2)).max(0.5);
        for &x in points {
            let kernel: Vec<f64> = (0..k)
                .map(|i| (-0.5 * ((i as f64 - x as f64) / width).powi(2)).exp())
                .collect();
            let total: f64 = kernel.iter().sum();
            for (d, w) in density.iter_mut().zip(kernel) {
                *d += w / total;
            }
        }
    }
    let total: f64 = density.iter().sum();
    density.iter_mut().for_each(|d| *d /= total);
    density
}

impl Search for Tpe {
    fn next(&mut self, space: &TuningSpace, seen: &[Observation]) -> Option<Configuration> {
        let ranked = ranked(seen);
        if seen.len() < self.startup || ranked.len() < 2 {
            return random_unseen(&mut self.rng, space, seen);
        }
        let good_count = ((self.gamma * ranked.len() as f64).ceil() as usize).max(1);
        let good: Vec<&Configuration> = ranked[..good_count].iter().map(|(c, _)| *c).collect();
        // The rest, and every failure: a configuration that does not work is
        // as bad as one can be.
        let mut bad: Vec<&Configuration> = ranked[good_count..].iter().map(|(c, _)| *c).collect();
        bad.extend(
            seen.iter()
                .filter(|o| !o.score.is_some_and(f64::is_finite))
                .map(|o| &o.configuration),
        );
        let models: Vec<(Vec<f64>, Vec<f64>)> = space
            .parameters()
            .iter()
            .enumerate()
            .map(|(d, p)| {
                let column =
                    |set: &[&Configuration]| set.iter().map(|c| c.0[d]).collect::<Vec<_>>();
                (
                    parzen(&column(&good), p.values.len()),
                    parzen(&column(&bad), p.values.len()),
                )
            })
            .collect();
        let ratio = |c: &Configuration| -> f64 {
            c.0.iter()
                .zip(&models)
                .map(|(&i, (l, g))| l[i].ln() - g[i].ln())
                .sum()
        };
        let set = seen_set(seen);
        let mut best: Option<(Configuration, f64)> = None;
        for _ in 0..self.draws {
            let c = Configuration(
                models
                    .iter()
                    .map(|(l, _)| self.rng.weighted(l).expect("positive weights"))
                    .collect(),
            );
            if set.contains(&c) || !space.is_valid(&c) {
                continue;
            }
            let r = ratio(&c);
            if best.as_ref().is_none_or(|(_, b)| r > *b) {
                best = Some((c, r));
            }
        }
        if let Some((c, _)) = best {
            return Some(c);
        }
        // Every draw was seen or invalid (the good region is exhausted, or
        // the constraints cut most of the box): the best unseen by l/g.
        space
            .unseen(&set)
            .map(|c| (c, ratio(c)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| c.clone())
    }
}

#[cfg(test)]
mod tests;
