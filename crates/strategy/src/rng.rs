//! The strategies' random numbers: SplitMix64, one u64 of state, so a
//! checkpoint holds the generator exactly and a resumed run draws the
//! same numbers an uninterrupted one would.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n; n must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "below(0)");
        (self.unit() * n as f64) as usize % n
    }

    /// An index drawn with probability proportional to its weight; None
    /// when no weight is positive and finite.
    pub fn weighted(&mut self, weights: &[f64]) -> Option<usize> {
        let usable = |w: f64| if w.is_finite() && w > 0.0 { w } else { 0.0 };
        let total: f64 = weights.iter().map(|w| usable(*w)).sum();
        if total <= 0.0 {
            return None;
        }
        let mut x = self.unit() * total;
        for (i, w) in weights.iter().enumerate() {
            let w = usable(*w);
            if x < w {
                return Some(i);
            }
            x -= w;
        }
        weights.iter().rposition(|w| usable(*w) > 0.0)
    }

    /// Up to `k` distinct items of `items`, in drawn order.
    pub fn sample<T: Clone>(&mut self, items: &[T], k: usize) -> Vec<T> {
        let mut pool: Vec<T> = items.to_vec();
        let mut out = Vec::with_capacity(k.min(pool.len()));
        while out.len() < k && !pool.is_empty() {
            out.push(pool.swap_remove(self.below(pool.len())));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_numbers_and_a_copy_continues_them() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let first: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        assert_eq!(first, (0..5).map(|_| b.next_u64()).collect::<Vec<_>>());
        let saved: Rng = serde_json::from_value(serde_json::to_value(&a).unwrap()).unwrap();
        let mut c = saved;
        assert_eq!(a.next_u64(), c.next_u64());
        assert_ne!(Rng::new(8).next_u64(), Rng::new(7).next_u64());
    }

    #[test]
    fn weighted_draws_follow_the_weights_and_skip_unusable_ones() {
        let mut r = Rng::new(1);
        let mut counts = [0usize; 4];
        for _ in 0..10_000 {
            counts[r.weighted(&[1.0, 3.0, 0.0, f64::NAN]).unwrap()] += 1;
        }
        assert_eq!((counts[2], counts[3]), (0, 0));
        let ratio = counts[1] as f64 / counts[0] as f64;
        assert!((2.7..3.3).contains(&ratio), "{counts:?}");
        assert_eq!(r.weighted(&[0.0, -1.0]), None);
        let s = r.sample(&[1, 2, 3, 4, 5], 3);
        assert_eq!(s.len(), 3);
        assert!(s.iter().all(|x| (1..=5).contains(x)));
        assert_eq!(s.iter().collect::<std::collections::BTreeSet<_>>().len(), 3);
    }
}
