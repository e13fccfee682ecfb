//! An ensemble: each call goes to one member, chosen either with
//! probability proportional to its weight by a seeded RNG
//! ([`ModelChoice::Weights`]) or by a UCB1 bandit over the improvements
//! each member's candidates brought ([`ModelChoice::Ucb`], rewarded through
//! [`Provider::reward`]). The RNG is a SplitMix64 whose whole state is one
//! `u64`, and the bandit is plain data, so a checkpoint can store both and
//! a resumed run makes the same choices as an uninterrupted one.
//!
//! Each answer carries the member that gave it (`Completion::member`).
//! A failing member's error is returned as is; the ensemble does not fall
//! back to another member, because that would change which model the
//! strategy believes produced the candidate.

use std::sync::{Arc, Mutex};

use rand::distr::Distribution;
use rand::distr::weighted::WeightedIndex;
use serde::{Deserialize, Serialize};

use super::{BoxFuture, Provider};
use crate::bandit::ModelBandit;
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

/// How an ensemble chooses the member of each call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelChoice {
    /// In proportion to the spec's weights, by the seeded RNG.
    #[default]
    Weights,
    /// UCB1 on each member's mean improvement per call.
    Ucb,
    /// UCB1 on each member's improvement per dollar spent.
    UcbPerDollar,
}

impl ModelChoice {
    pub fn name(self) -> &'static str {
        match self {
            ModelChoice::Weights => "weights",
            ModelChoice::Ucb => "ucb",
            ModelChoice::UcbPerDollar => "ucb-per-dollar",
        }
    }

    pub fn is_bandit(self) -> bool {
        self != ModelChoice::Weights
    }
}

impl std::fmt::Display for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ModelChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "weights" => Ok(ModelChoice::Weights),
            "ucb" => Ok(ModelChoice::Ucb),
            "ucb-per-dollar" => Ok(ModelChoice::UcbPerDollar),
            other => Err(format!(
                "`{other}` is not a model choice (weights, ucb, ucb-per-dollar)"
            )),
        }
    }
}

/// What a checkpoint stores to resume an ensemble exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnsembleState {
    pub rng: u64,
    /// Calls routed to each member so far, in spec order.
    pub picks: Vec<u64>,
    /// The member labels, in spec order (absent in runs checkpointed
    /// before they were stored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The bandit's arms, with `--model-choice ucb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandit: Option<ModelBandit>,
}

struct Choosing {
    rng: SplitMix64,
    picks: Vec<u64>,
    bandit: Option<ModelBandit>,
}

pub struct Ensemble {
    members: Vec<(f64, Arc<dyn Provider>)>,
    labels: Vec<String>,
    dist: WeightedIndex<f64>,
    state: Mutex<Choosing>,
}

impl Ensemble {
    pub fn new(members: Vec<(f64, Arc<dyn Provider>)>, seed: u64) -> Result<Self, ProviderError> {
        Self::with_choice(members, seed, ModelChoice::Weights)
    }

    pub fn with_choice(
        members: Vec<(f64, Arc<dyn Provider>)>,
        seed: u64,
        choice: ModelChoice,
    ) -> Result<Self, ProviderError> {
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
        let labels: Vec<String> = members.iter().map(|(_, p)| p.label()).collect();
        if let Some(l) = labels
            .iter()
            .enumerate()
            .find_map(|(i, l)| labels[..i].contains(l).then_some(l))
        {
            return Err(ProviderError::Config(format!(
                "the ensemble names `{l}` twice: each member must be a different model"
            )));
        }
        Ok(Ensemble {
            members,
            labels,
            dist,
            state: Mutex::new(Choosing {
                rng: SplitMix64(seed),
                picks: vec![0; n],
                bandit: choice
                    .is_bandit()
                    .then(|| ModelBandit::new(n, choice == ModelChoice::UcbPerDollar)),
            }),
        })
    }

    /// The member the next call goes to (advances the RNG, or counts a
    /// pull of the bandit).
    pub fn pick(&self) -> usize {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let i = match &mut s.bandit {
            Some(b) => b.choose(),
            None => self.dist.sample(&mut s.rng),
        };
        s.picks[i] += 1;
        i
    }

    /// A call that was chosen and never made (a budget stop before it
    /// left): the bandit forgets the pull instead of counting it a failure.
    fn unpick(&self, i: usize) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.picks[i] = s.picks[i].saturating_sub(1);
        if let Some(b) = &mut s.bandit {
            b.arms[i].pulls = b.arms[i].pulls.saturating_sub(1).max(b.arms[i].rewarded);
        }
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
        Box::pin(async move {
            match self.members[i].1.complete(req).await {
                Ok(mut c) => {
                    c.member = Some(self.labels[i].clone());
                    Ok(c)
                }
                Err(e) if e.is_budget_stop() => {
                    self.unpick(i);
                    Err(e)
                }
                Err(e) => {
                    // A failed call brought nothing: rewarded 0 here, as
                    // the caller cannot tell whose it was.
                    self.reward(&self.labels[i], 0.0, 0.0);
                    Err(e)
                }
            }
        })
    }

    fn reward(&self, member: &str, reward: f64, cost_usd: f64) {
        let Some(i) = self.labels.iter().position(|l| l == member) else {
            return;
        };
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = &mut s.bandit {
            b.reward(i, reward, cost_usd);
        }
    }

    fn ensemble_state(&self) -> Option<EnsembleState> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Some(EnsembleState {
            rng: s.rng.0,
            picks: s.picks.clone(),
            labels: self.labels.clone(),
            bandit: s.bandit.clone(),
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
        if !state.labels.is_empty() && state.labels != self.labels {
            return Err(ProviderError::Config(format!(
                "the checkpoint's ensemble is {}, this one {}",
                state.labels.join(","),
                self.labels.join(",")
            )));
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.bandit.is_some() != state.bandit.is_some() {
            return Err(ProviderError::Config(
                "the checkpoint's ensemble chose its models another way (weights or ucb)".into(),
            ));
        }
        s.rng = SplitMix64(state.rng);
        s.picks = state.picks.clone();
        s.bandit = state.bandit.clone().map(|mut b| {
            // Calls in flight at the checkpoint are made again by the
            // resumed run, which chooses their models anew.
            for a in &mut b.arms {
                a.pulls = a.rewarded;
            }
            b
        });
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
                    member: None,
                    tool_calls: Vec::new(),
                    native: None,
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
                    picks: vec![0],
                    labels: Vec::new(),
                    bandit: None,
                })
                .is_err()
        );
    }

    /// Fails every call, as a broken endpoint would.
    struct Failing;

    impl Provider for Failing {
        fn label(&self) -> String {
            "failing".into()
        }
        fn complete<'a>(
            &'a self,
            _req: &'a ChatRequest,
        ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
            Box::pin(async { Err(ProviderError::Config("down".into())) })
        }
    }

    /// With a bandit, answers name their member, rewards go to the member
    /// named, a failed call is counted as earning nothing, and choices
    /// follow the rewards; the state round-trips, calls in flight dropped.
    #[tokio::test]
    async fn ucb_learns_from_rewards_by_member_and_resumes() {
        let build = || {
            Ensemble::with_choice(
                vec![
                    (1.0, Arc::new(Failing) as Arc<dyn Provider>),
                    (1.0, Arc::new(Fixed("good"))),
                ],
                5,
                ModelChoice::Ucb,
            )
            .unwrap()
        };
        let e = build();
        let req = ChatRequest::default();
        let mut good = 0;
        for _ in 0..30 {
            if let Ok(c) = e.complete(&req).await {
                assert_eq!(c.member.as_deref(), Some("good"));
                good += 1;
                e.reward("good", 0.2, 0.0);
            }
        }
        assert!(good >= 24, "{good} of 30 went to the model that improves");
        let state = e.ensemble_state().unwrap();
        let bandit = state.bandit.clone().unwrap();
        assert_eq!(
            bandit.arms[0].rewarded, bandit.arms[0].pulls,
            "failures rewarded 0"
        );
        assert_eq!(state.labels, ["failing", "good"]);
        // A call chosen and not yet rewarded when the checkpoint was taken
        // is made again by the resumed run: its pull is dropped.
        e.pick();
        let mut with_pending = e.ensemble_state().unwrap();
        let json = serde_json::to_string(&with_pending).unwrap();
        let resumed = build();
        resumed
            .restore_ensemble_state(&serde_json::from_str(&json).unwrap())
            .unwrap();
        let restored = resumed.ensemble_state().unwrap().bandit.unwrap();
        for a in &restored.arms {
            assert_eq!(a.pulls, a.rewarded);
        }
        // A checkpoint of another ensemble, or of fixed weights, is refused.
        with_pending.labels = vec!["a".into(), "b".into()];
        assert!(resumed.restore_ensemble_state(&with_pending).is_err());
        assert!(ensemble(1).restore_ensemble_state(&state).is_err());
    }

    #[test]
    fn a_member_named_twice_is_refused() {
        let e = Ensemble::new(
            vec![
                (1.0, Arc::new(Fixed("a")) as Arc<dyn Provider>),
                (1.0, Arc::new(Fixed("a"))),
            ],
            0,
        );
        assert!(e.err().unwrap().to_string().contains("twice"));
    }

    #[test]
    fn bad_weights_are_refused() {
        let e = Ensemble::new(vec![(0.0, Arc::new(Fixed("a")) as Arc<dyn Provider>)], 0);
        assert!(e.is_err());
    }
}
