//! Token and cost totals across every call of a run. One [`Accounting`]
//! handle is cloned into every provider built for the run (ensemble members
//! included), so the totals and the optional budget are shared.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::types::{Completion, Usage};

/// Totals of one model (keyed by `provider:model` as requested).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelTotals {
    pub calls: u64,
    pub failures: u64,
    pub retries: u64,
    pub usage: Usage,
    pub cost_usd: f64,
    /// Successful calls whose model has no price: their cost is unknown,
    /// not zero, and reports should say so.
    pub unpriced_calls: u64,
    pub latency_s: f64,
}

impl ModelTotals {
    fn add_success(&mut self, c: &Completion) {
        self.calls += 1;
        self.retries += u64::from(c.attempts.saturating_sub(1));
        self.usage.add(&c.usage);
        match c.cost_usd {
            Some(x) => self.cost_usd += x,
            None => self.unpriced_calls += 1,
        }
        self.latency_s += c.latency.as_secs_f64();
    }
}

/// Everything spent so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub all: ModelTotals,
    pub per_model: BTreeMap<String, ModelTotals>,
}

#[derive(Debug, Default)]
struct Inner {
    totals: Totals,
    budget_usd: Option<f64>,
}

/// A cheap, cloneable handle to shared totals.
#[derive(Debug, Clone, Default)]
pub struct Accounting(Arc<Mutex<Inner>>);

impl Accounting {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stop sending requests once `usd` has been spent. A call that starts
    /// under the budget may end over it; the next one is refused.
    pub fn with_budget(usd: f64) -> Self {
        let a = Self::default();
        a.lock().budget_usd = Some(usd);
        a
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain numbers behind; they
        // are still the best totals there are.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Set or replace the budget of every handle sharing these totals.
    pub fn set_budget(&self, usd: f64) {
        self.lock().budget_usd = Some(usd);
    }

    pub fn budget_usd(&self) -> Option<f64> {
        self.lock().budget_usd
    }

    /// `Err((budget, spent))` when the budget is spent.
    pub fn check_budget(&self) -> Result<(), (f64, f64)> {
        let g = self.lock();
        match g.budget_usd {
            Some(b) if g.totals.all.cost_usd >= b => Err((b, g.totals.all.cost_usd)),
            _ => Ok(()),
        }
    }

    pub fn record_success(&self, key: &str, c: &Completion) {
        let mut g = self.lock();
        g.totals.all.add_success(c);
        g.totals
            .per_model
            .entry(key.to_string())
            .or_default()
            .add_success(c);
    }

    /// A call that failed for good after `attempts` attempts.
    pub fn record_failure(&self, key: &str, attempts: u32) {
        let mut g = self.lock();
        let totals = &mut g.totals;
        let retries = u64::from(attempts.saturating_sub(1));
        for t in [
            &mut totals.all,
            totals.per_model.entry(key.to_string()).or_default(),
        ] {
            t.failures += 1;
            t.retries += retries;
        }
    }

    pub fn totals(&self) -> Totals {
        self.lock().totals.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn completion(cost: Option<f64>, attempts: u32) -> Completion {
        Completion {
            text: String::new(),
            reasoning: None,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                reasoning_tokens: Some(2),
                cached_tokens: None,
            },
            cost_usd: cost,
            latency: Duration::from_millis(250),
            model: "m".into(),
            provider: "p".into(),
            finish_reason: None,
            attempts,
        }
    }

    #[test]
    fn totals_aggregate_across_clones_and_models() {
        let a = Accounting::new();
        let b = a.clone();
        a.record_success("p:m1", &completion(Some(0.25), 1));
        b.record_success("p:m2", &completion(None, 3));
        b.record_failure("p:m2", 2);
        let t = a.totals();
        assert_eq!(t.all.calls, 2);
        assert_eq!(t.all.failures, 1);
        assert_eq!(t.all.retries, 3);
        assert_eq!(t.all.usage.input_tokens, 20);
        assert_eq!(t.all.usage.reasoning_tokens, Some(4));
        assert_eq!(t.all.cost_usd, 0.25);
        assert_eq!(t.all.unpriced_calls, 1);
        assert!((t.all.latency_s - 0.5).abs() < 1e-9);
        assert_eq!(t.per_model["p:m2"].failures, 1);
        assert_eq!(t.per_model["p:m1"].calls, 1);
    }

    #[test]
    fn budget_refuses_once_spent() {
        let a = Accounting::with_budget(0.5);
        assert!(a.check_budget().is_ok());
        a.record_success("k", &completion(Some(0.3), 1));
        assert!(a.check_budget().is_ok());
        a.record_success("k", &completion(Some(0.3), 1));
        let (budget, spent) = a.check_budget().unwrap_err();
        assert_eq!(budget, 0.5);
        assert!((spent - 0.6).abs() < 1e-12);
    }
}
