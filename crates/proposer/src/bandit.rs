//! Choosing among several models by what their candidates earned: UCB1
//! (Auer, Cesa-Bianchi, Fischer 2002) over per-call rewards, the
//! ShinkaEvolve idea for ensembles that should learn which model pays off
//! instead of keeping fixed weights.
//!
//! A call's reward is the improvement its candidate brought over its
//! parent (relative score gain, 0 for anything not better, wrong or
//! failed), optionally per dollar; means are taken relative to the best
//! arm's (see `ModelBandit::scale`). Searches run calls concurrently, so a
//! choice is made before earlier calls are rewarded: a call in flight
//! counts as a pull with no reward yet, which keeps a burst of choices from
//! all landing on one arm on the strength of a single early success. The
//! whole state is plain data, stored with each checkpoint, so a resumed run
//! chooses exactly as an uninterrupted one would.

use serde::{Deserialize, Serialize};

/// Relative gains above this count as this: one lucky 50x kernel (a seed
/// that was absurdly slow) must not pin the bandit to its model forever.
pub const MAX_REWARD: f64 = 1.0;

/// The exploration constant of UCB1's bonus sqrt(c * ln N / n); 2 is the
/// textbook value for rewards in [0, 1].
pub const EXPLORATION: f64 = 2.0;

/// The reward of one call: how much better its candidate scored than its
/// parent, relative, in [0, MAX_REWARD]; 0 when it was not correct, not
/// better, or there was no candidate.
pub fn improvement(score: Option<f64>, parent_score: Option<f64>) -> f64 {
    match (score, parent_score) {
        (Some(s), Some(p)) if s.is_finite() && p.is_finite() && p > 0.0 && s > p => {
            ((s - p) / p).min(MAX_REWARD)
        }
        (Some(s), None) if s.is_finite() && s > 0.0 => MAX_REWARD,
        _ => 0.0,
    }
}

/// What one model has done so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Arm {
    /// Calls chosen for this model, rewarded or not.
    pub pulls: u64,
    /// Calls whose reward came back.
    pub rewarded: u64,
    pub reward_sum: f64,
    pub cost_usd: f64,
}

impl Arm {
    pub fn pending(&self) -> u64 {
        self.pulls - self.rewarded
    }

    /// Mean reward of the rewarded calls, per dollar when `per_dollar`.
    pub fn mean(&self, per_dollar: bool) -> f64 {
        if self.rewarded == 0 {
            0.0
        } else if per_dollar && self.cost_usd > 0.0 {
            // Reward per dollar spent on the rewarded calls, in the same
            // units for every arm.
            self.reward_sum / self.cost_usd
        } else {
            self.reward_sum / self.rewarded as f64
        }
    }
}

/// UCB1 over the models of an ensemble, in spec order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelBandit {
    pub arms: Vec<Arm>,
    /// Divide rewards by cost (cheap models that improve as often win).
    pub per_dollar: bool,
}

impl ModelBandit {
    pub fn new(models: usize, per_dollar: bool) -> ModelBandit {
        ModelBandit {
            arms: vec![Arm::default(); models],
            per_dollar,
        }
    }

    /// The arm the next call goes to, counted as pulled: an arm never
    /// pulled first (in order), then the highest mean plus bonus, where a
    /// call in flight counts in the pulls and adds no reward. Ties go to
    /// the lower index, so the choice is a function of the state alone.
    pub fn choose(&mut self) -> usize {
        let arm = match self.arms.iter().position(|a| a.pulls == 0) {
            Some(untried) => untried,
            None => {
                let total: u64 = self.arms.iter().map(|a| a.pulls).sum();
                let ln = (total as f64).ln();
                let scale = self.scale();
                let value = |a: &Arm| {
                    let rewarded_mean = a.mean(self.per_dollar) / scale;
                    // Pending calls dilute the mean as if they earned 0.
                    let mean = rewarded_mean * a.rewarded as f64 / a.pulls as f64;
                    mean + (EXPLORATION * ln / a.pulls as f64).sqrt()
                };
                let mut best = 0;
                for (i, a) in self.arms.iter().enumerate() {
                    if value(a) > value(&self.arms[best]) {
                        best = i;
                    }
                }
                best
            }
        };
        self.arms[arm].pulls += 1;
        arm
    }

    /// Means are divided by the largest before the bonus is added. Relative
    /// gains are small (2-20 % is typical, far from the [0, 1] range UCB1's
    /// bonus is sized for), and per-dollar means have no fixed range at
    /// all; against the best arm's mean the gaps are what they are
    /// relatively, so the bandit commits after a few dozen calls rather
    /// than a few thousand.
    fn scale(&self) -> f64 {
        let max = self
            .arms
            .iter()
            .map(|a| a.mean(self.per_dollar))
            .fold(0.0f64, f64::max);
        if max > 0.0 { max } else { 1.0 }
    }

    /// A chosen call's outcome. Rewards are clamped to [0, MAX_REWARD]; a
    /// reward for an arm with nothing pending (a bug, or a state restored
    /// from elsewhere) is counted as a pull too rather than lost.
    pub fn reward(&mut self, arm: usize, reward: f64, cost_usd: f64) {
        let Some(a) = self.arms.get_mut(arm) else {
            return;
        };
        if a.pending() == 0 {
            a.pulls += 1;
        }
        a.rewarded += 1;
        a.reward_sum += if reward.is_finite() {
            reward.clamp(0.0, MAX_REWARD)
        } else {
            0.0
        };
        if cost_usd.is_finite() && cost_usd > 0.0 {
            a.cost_usd += cost_usd;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn improvement_is_the_relative_gain_clamped_and_zero_otherwise() {
        assert!((improvement(Some(1.2), Some(1.0)) - 0.2).abs() < 1e-12);
        assert_eq!(improvement(Some(50.0), Some(1.0)), MAX_REWARD);
        assert_eq!(improvement(Some(0.9), Some(1.0)), 0.0);
        assert_eq!(improvement(None, Some(1.0)), 0.0, "wrong or failed");
        assert_eq!(improvement(Some(f64::NAN), Some(1.0)), 0.0);
        assert_eq!(improvement(Some(1.0), Some(0.0)), 0.0);
    }

    /// Two scripted models: one improves its parent by 20 % every third
    /// call, the other never produces a working kernel. Within 60 calls the
    /// good one gets most of them, and the broken one keeps only the
    /// exploration UCB1 guarantees (logarithmic in the calls).
    #[test]
    fn converges_to_the_model_that_improves() {
        let mut b = ModelBandit::new(2, false);
        let mut calls = [0u32; 2];
        for _ in 0..60 {
            let arm = b.choose();
            calls[arm] += 1;
            let reward = if arm == 1 && calls[1] % 3 == 0 {
                0.2
            } else {
                0.0
            };
            b.reward(arm, reward, 0.01);
        }
        assert!(calls[1] >= 45, "{calls:?}");
        assert!(
            calls[0] >= 2,
            "the broken model is still tried now and then: {calls:?}"
        );
        // And from then on the good one is chosen.
        let mut more = b.clone();
        assert_eq!(more.choose(), 1);
    }

    #[test]
    fn calls_in_flight_spread_a_burst_of_choices() {
        let mut b = ModelBandit::new(3, false);
        // Everybody tried once; arm 0 earned a lot.
        for arm in 0..3 {
            assert_eq!(b.choose(), arm, "untried arms first, in order");
            b.reward(arm, if arm == 0 { 1.0 } else { 0.1 }, 0.0);
        }
        // Eight concurrent calls chosen before any reward: arm 0 leads but
        // its pending pulls dilute it, so the others get some.
        let burst: Vec<usize> = (0..8).map(|_| b.choose()).collect();
        let zeros = burst.iter().filter(|a| **a == 0).count();
        assert!((4..8).contains(&zeros), "{burst:?}");
        assert_eq!(b.arms.iter().map(Arm::pending).sum::<u64>(), 8);
    }

    #[test]
    fn per_dollar_prefers_the_cheap_model_that_improves_as_often() {
        let mut b = ModelBandit::new(2, true);
        for _ in 0..80 {
            let arm = b.choose();
            // Both improve by 10 % every call; model 0 costs 20x more.
            b.reward(arm, 0.1, if arm == 0 { 0.20 } else { 0.01 });
        }
        assert!(b.arms[1].pulls > 3 * b.arms[0].pulls, "{:?}", b.arms);
    }

    #[test]
    fn the_state_is_data_and_a_restored_bandit_chooses_the_same() {
        let mut b = ModelBandit::new(3, false);
        for k in 0..20 {
            let arm = b.choose();
            b.reward(arm, (k % 4) as f64 * 0.1 * (arm as f64 + 1.0), 0.0);
        }
        let pending = b.choose();
        let stored = serde_json::to_string(&b).unwrap();
        let mut restored: ModelBandit = serde_json::from_str(&stored).unwrap();
        assert_eq!(restored, b);
        for _ in 0..10 {
            assert_eq!(restored.choose(), b.choose());
        }
        // The pending call's reward still lands on its arm.
        restored.reward(pending, 0.5, 0.0);
        assert_eq!(
            restored.arms[pending].pending(),
            b.arms[pending].pending() - 1
        );
    }

    #[test]
    fn bad_rewards_are_clamped_not_trusted() {
        let mut b = ModelBandit::new(1, false);
        b.choose();
        b.reward(0, f64::INFINITY, f64::NAN);
        b.reward(0, -3.0, -1.0);
        b.reward(7, 1.0, 0.0);
        assert_eq!(b.arms[0].reward_sum, 0.0);
        assert_eq!(b.arms[0].rewarded, 2);
        assert_eq!(
            b.arms[0].pulls, 2,
            "a reward without a pending pull counts one"
        );
        assert_eq!(b.arms[0].cost_usd, 0.0);
    }
}
