//! A weighted ensemble: each call goes to one member, chosen with
//! probability proportional to its weight by a seeded RNG. The RNG is a
//! SplitMix64 whose whole state is one `u64`, so a checkpoint can store it
//! and a resumed run makes the same choices as an uninterrupted one.
//!
//! A failing member's error is returned as is; the ensemble does not fall
//! back to another member, because that would change which model the
//! strategy believes produced the candidate.

use std::sync::{Arc, Mutex};

use rand::distr::Distribution;
use rand::distr::weighted::WeightedIndex;
use serde::{Deserialize, Serialize};

use super::{BoxFuture, Provider};
use crate::error::ProviderError;
use crate::types::{ChatRequest, Completion};

/// SplitMix64 (Steele, Lea, Flood 2014): 64 bits of state, full period,
/// good enough to pick among a handful of models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SplitMix64(u64);

impl rand::RngCore for SplitMix64 {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// What a checkpoint stores to resume an ensemble exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnsembleState {
    pub rng: u64,
    /// Calls routed to each member so far, in spec order.
    pub picks: Vec<u64>,
}

pub struct Ensemble {
    members: Vec<(f64, Arc<dyn Provider>)>,
    dist: WeightedIndex<f64>,
    state: Mutex<(SplitMix64, Vec<u64>)>,
}

impl Ensemble {
    pub fn new(members: Vec<(f64, Arc<dyn Provider>)>, seed: u64) -> Result<Self, ProviderError> {
        if members.is_empty() {
            return Err(ProviderError::Config(
                "an ensemble needs at least one member".into(),
            ));
        }
        let dist = WeightedIndex::new(members.iter().map(|(w, _)| *w)).map_err(|e| {
            ProviderError::Config(format!(
                "ensemble weights {:?}: {e}",
                members.iter().map(|m| m.0).collect::<Vec<_>>()
            ))
        })?;
        let n = members.len();
        Ok(Ensemble {
            members,
            dist,
            state: Mutex::new((SplitMix64(seed), vec![0; n])),
        })
    }

    /// The member the next call goes to (advances the RNG).
    pub fn pick(&self) -> usize {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let i = self.dist.sample(&mut s.0);
        s.1[i] += 1;
        i
    }

    pub fn members(&self) -> impl Iterator<Item = (f64, String)> + '_ {
        self.members.iter().map(|(w, p)| (*w, p.label()))
    }
}

impl Provider for Ensemble {
    /// Each member skips the calls it answered (matched by label).
    fn fast_forward(&self, served: &[(String, ChatRequest)]) -> Result<(), ProviderError> {
        for (_, member) in &self.members {
            let label = member.label();
            let mine: Vec<(String, ChatRequest)> = served
                .iter()
                .filter(|(l, _)| *l == label)
                .cloned()
                .collect();
            member.fast_forward(&mine)?;
        }
        Ok(())
    }

    fn label(&self) -> String {
        self.members
            .iter()
            .map(|(w, p)| format!("{}={w}", p.label()))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        let i = self.pick();
        self.members[i].1.complete(req)
    }

    fn ensemble_state(&self) -> Option<EnsembleState> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Some(EnsembleState {
            rng: s.0.0,
            picks: s.1.clone(),
        })
    }

    fn restore_ensemble_state(&self, state: &EnsembleState) -> Result<(), ProviderError> {
        if state.picks.len() != self.members.len() {
            return Err(ProviderError::Config(format!(
                "ensemble state has {} members, this ensemble {}",
                state.picks.len(),
                self.members.len()
            )));
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *s = (SplitMix64(state.rng), state.picks.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Usage;
    use std::time::Duration;

    struct Fixed(&'static str);

    impl Provider for Fixed {
        fn label(&self) -> String {
            self.0.to_string()
        }
        fn complete<'a>(
            &'a self,
            _req: &'a ChatRequest,
        ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
            Box::pin(async move {
                Ok(Completion {
                    text: self.0.to_string(),
                    reasoning: None,
                    usage: Usage::default(),
                    cost_usd: None,
                    latency: Duration::ZERO,
                    model: self.0.into(),
                    provider: "fixed".into(),
                    finish_reason: None,
                    attempts: 1,
                    usage_unknown: None,
                })
            })
        }
    }

    fn ensemble(seed: u64) -> Ensemble {
        Ensemble::new(
            vec![
                (0.7, Arc::new(Fixed("a")) as Arc<dyn Provider>),
                (0.3, Arc::new(Fixed("b"))),
            ],
            seed,
        )
        .unwrap()
    }

    #[test]
    fn picks_follow_the_weights_and_the_seed() {
        let e = ensemble(42);
        let n = 10_000;
        let a = (0..n).filter(|_| e.pick() == 0).count();
        // 0.7 +- 5 sigma (sigma = sqrt(n p (1-p)) ~ 46).
        assert!((6770..=7230).contains(&a), "{a}");
        let s1: Vec<usize> = {
            let e = ensemble(7);
            (0..50).map(|_| e.pick()).collect()
        };
        let s2: Vec<usize> = {
            let e = ensemble(7);
            (0..50).map(|_| e.pick()).collect()
        };
        assert_eq!(s1, s2);
    }

    #[tokio::test]
    async fn state_round_trips_for_resume() {
        let e = ensemble(3);
        for _ in 0..17 {
            e.pick();
        }
        let state = e.ensemble_state().unwrap();
        let json = serde_json::to_string(&state).unwrap();
        let expected: Vec<String> = {
            let mut v = Vec::new();
            for _ in 0..20 {
                v.push(e.complete(&ChatRequest::default()).await.unwrap().text);
            }
            v
        };
        let resumed = ensemble(999);
        resumed
            .restore_ensemble_state(&serde_json::from_str(&json).unwrap())
            .unwrap();
        let mut got = Vec::new();
        for _ in 0..20 {
            got.push(
                resumed
                    .complete(&ChatRequest::default())
                    .await
                    .unwrap()
                    .text,
            );
        }
        assert_eq!(got, expected);
        assert_eq!(
            resumed.ensemble_state().unwrap().picks.iter().sum::<u64>(),
            37
        );
        assert!(
            resumed
                .restore_ensemble_state(&EnsembleState {
                    rng: 0,
                    picks: vec![0]
                })
                .is_err()
        );
    }

    #[test]
    fn bad_weights_are_refused() {
        let e = Ensemble::new(vec![(0.0, Arc::new(Fixed("a")) as Arc<dyn Provider>)], 0);
        assert!(e.is_err());
    }
}
