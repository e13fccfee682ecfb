//! The kevo evaluator: candidate source + task + sizes -> [`Evaluation`].
//!
//! It follows the Metal-Sci protocol, hardened against kernels that try to
//! pass without doing the work: per size, every buffer is restored and every
//! guard region re-armed before each run (outside the timed region); a
//! random number of warm-up runs; at least 10 timed runs on the device clock
//! around the whole launch sequence, repeated until their spread is small;
//! then one separate verification run on freshly drawn inputs whose outputs
//! were pre-filled with NaN. Every run's guards are checked, the first timed
//! run's outputs are checked against the reference and every later timed
//! run's outputs are compared with them on the device, so a kernel that is
//! right only on some launches fails. The first wrong size stops the
//! evaluation; the score is the geometric mean of achieved / ceiling and
//! exists only if every size passed and none ran faster than the hardware
//! allows.
//!
//! The evaluator's parts: `config` (how candidates are evaluated),
//! `evaluate` (one candidate: its source checked and compiled, its module
//! and kernels checked, then every size), `size_run` (the per-size protocol
//! above, one step per sentence), `launches` (the task's launches with
//! concrete blocks), `inputs` (problems and references, cached and prepared
//! ahead), `pristine` (the device copies every run is restored from),
//! `device` (the device side of a size and the evaluator's own kernels) and
//! `vendor` (vendor library baselines, timed by the same protocol).

mod ahead;
mod cache;
mod candidate;
mod config;
mod device;
mod evaluate;
mod inputs;
pub mod json_f64;
mod launches;
mod outcome;
pub mod placement;
mod pristine;
mod secret;
mod size_run;
pub mod source_rules;
mod vendor;

use std::sync::Arc;

use device::Utility;
use kevo_backend::{Backend, BackendError};
use kevo_roofline::Ceilings;
use kevo_tasks::{Problem, Reference, Task};

use ahead::CacheKey;
use pristine::PristineCache;

pub use cache::LruCache;
pub use candidate::{Candidate, normalised_sha256, source_sha256};
pub use config::EvalConfig;
pub use evaluate::Stage;
pub use kevo_backend::KernelInfo;
pub use outcome::*;
pub use placement::{
    CACHE_LEVEL_SUSPICIOUS_FACTOR, CACHE_RESIDENT_SUSPICIOUS_FRACTION, LevelFraction,
    SUSPICIOUS_FRACTION,
};
pub use secret::{InputSecret, ParseSecretError};
pub use vendor::{VendorBaseline, VendorRun, VendorSize, ratio_text};

/// Evaluates candidates on one backend. Inputs and CPU references are cached
/// across candidates, so a second candidate of the same task pays for neither.
pub struct Evaluator<B: Backend> {
    backend: B,
    ceilings: Ceilings,
    /// The ceilings "suspicious" is judged against: `ceilings` raised by
    /// every re-measurement this process made (scores keep `ceilings`, so
    /// a run's scores share one denominator).
    bounds: Ceilings,
    config: EvalConfig,
    problems: LruCache<CacheKey, Arc<Problem>>,
    references: LruCache<CacheKey, Reference>,
    /// Initial buffer contents kept on the device across candidates, so a
    /// warm candidate uploads nothing (saxpy 64M: 1 GiB per candidate).
    pristine: PristineCache,
    /// The evaluator's own device kernels (guards, compares, scrub),
    /// compiled on first use.
    utility: Option<Utility>,
    /// Host buffers for downloads, reused across candidates: a fresh 256 MiB
    /// allocation costs ~60k page faults on first touch.
    scratch: Vec<Vec<u8>>,
    evaluations: u64,
    /// The next evaluation's verification inputs and references, being
    /// prepared on spare cores (GPU devices only).
    ahead: ahead::Ahead,
    /// The verification seed (an index into the pool) of the next
    /// evaluation, where the caller chose it: a supervisor that computes a
    /// folder task's expected outputs ships only the seed it asks for.
    next_verify_index: Option<u64>,
}

impl<B: Backend> Drop for Evaluator<B> {
    fn drop(&mut self) {
        self.pristine.clear(&mut self.backend);
        if let Some(u) = self.utility.take() {
            u.release(&mut self.backend);
        }
    }
}

impl<B: Backend> Evaluator<B> {
    pub fn new(backend: B, ceilings: Ceilings, mut config: EvalConfig) -> Self {
        let half = config.cache_bytes / 2;
        config.inputs_secret.get_or_insert_with(InputSecret::draw);
        Evaluator {
            backend,
            bounds: ceilings.clone(),
            ceilings,
            config,
            problems: LruCache::new(half),
            references: LruCache::new(half),
            pristine: PristineCache::default(),
            utility: None,
            scratch: Vec::new(),
            evaluations: 0,
            ahead: ahead::Ahead::default(),
            next_verify_index: None,
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    pub fn ceilings(&self) -> &Ceilings {
        &self.ceilings
    }

    pub fn config(&self) -> &EvalConfig {
        &self.config
    }

    /// The secret this evaluator's inputs are drawn from (recorded with a
    /// run's provenance; `KEVO_INPUTS_SECRET` reproduces it).
    pub fn inputs_secret(&self) -> InputSecret {
        self.config
            .inputs_secret
            .expect("set when the evaluator starts")
    }

    /// The seed of `task`'s timed inputs in this evaluator.
    pub fn timed_seed(&self, task: &Task) -> u64 {
        self.inputs_secret().timed_seed(task.default_seed())
    }

    /// The seed of `task`'s verification inputs number `k` of the pool.
    pub fn verify_seed(&self, task: &Task, k: u64) -> u64 {
        self.inputs_secret().verify_seed(task.default_seed(), k)
    }

    /// The utility kernels, compiled once.
    pub(crate) fn utility(&mut self) -> Result<&Utility, BackendError> {
        if self.utility.is_none() {
            self.utility = Some(Utility::new(&mut self.backend)?);
        }
        Ok(self.utility.as_ref().expect("set above"))
    }

    /// Verify the next evaluation on the pool's seed `index` (modulo the
    /// pool) instead of the next in rotation. The timed inputs stay those
    /// of [`Evaluator::timed_seed`]; a verification seed never equals it.
    pub fn verify_next_on(&mut self, index: u64) {
        self.next_verify_index = Some(index);
    }
}

/// exp(mean(ln(max(f, 1e-12)))): the 1e-12 floor only protects the logarithm.
pub fn geometric_mean(fractions: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = fractions
        .into_iter()
        .fold((0.0, 0usize), |(s, n), f| (s + f.max(1e-12).ln(), n + 1));
    if n == 0 {
        f64::NAN
    } else {
        (sum / n as f64).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometric_mean_matches_hand_values() {
        assert!((geometric_mean([0.5, 0.5, 0.5]) - 0.5).abs() < 1e-12);
        assert!((geometric_mean([0.25, 1.0]) - 0.5).abs() < 1e-12);
        // A zero fraction collapses the mean but stays finite.
        assert!(geometric_mean([0.0, 1.0]) > 0.0);
        assert!(geometric_mean(std::iter::empty()).is_nan());
    }

    #[test]
    fn time_stats_take_the_median() {
        let t = TimeStats::from_samples(vec![3.0, 1.0, 2.0, 10.0, 4.0]);
        assert_eq!((t.median_s, t.min_s, t.max_s), (3.0, 1.0, 10.0));
        let t = TimeStats::from_samples(vec![1.0, 2.0]);
        assert_eq!(t.median_s, 1.5);
    }

    #[test]
    fn time_stats_report_quartiles_and_a_robust_spread() {
        // One outlier moves min-max, not the interquartile range.
        let t = TimeStats::from_samples(vec![1.0, 1.0, 1.0, 1.0, 1.02, 1.0, 1.0, 1.0, 1.0, 9.0]);
        assert_eq!(t.q1_s, 1.0);
        assert!((t.q3_s - 1.0).abs() < 1e-12, "{}", t.q3_s);
        assert!(t.spread < 0.01, "{}", t.spread);
        let t = TimeStats::from_samples(vec![1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((t.q1_s, t.q3_s), (2.0, 4.0));
        assert!((t.spread - 2.0 / 3.0).abs() < 1e-12);
    }
}
