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
    /// Calls whose cost is unknown: successful ones with no price for the
    /// model or no usable token counts, and failed ones of a proposer that
    /// may have spent without telling (an agent or a command that ran).
    /// Not zero, and reports say so.
    pub unpriced_calls: u64,
    /// The share of those whose token counts were missing or implausible
    /// (every failed one counted above).
    #[serde(default)]
    pub usage_unknown_calls: u64,
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
        if c.usage_unknown.is_some() {
            self.usage_unknown_calls += 1;
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
    /// Run on with a budget even when a cost is unknown.
    accept_unknown_cost: bool,
    /// Worst-case costs of the calls in flight.
    reserved_usd: f64,
    /// The unknown-cost warning was printed.
    warned: bool,
}

/// A call's worst-case cost, held against the budget while it is in
/// flight, so concurrent calls cannot all pass the check together.
#[derive(Debug)]
pub struct Reservation {
    accounting: Option<Accounting>,
    usd: f64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(a) = self.accounting.take() {
            let mut g = a.lock();
            g.reserved_usd = (g.reserved_usd - self.usd).max(0.0);
        }
    }
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

    /// Keep running with a budget when a call's cost is unknown (the budget
    /// then counts only the calls whose cost is known).
    pub fn set_accept_unknown_cost(&self, accept: bool) {
        self.lock().accept_unknown_cost = accept;
    }

    /// Before a call of `label` whose worst case is `estimate` (`None`:
    /// unknown): refused when the budget is spent, when the call could
    /// overshoot it, or when the budget cannot be enforced; otherwise the
    /// estimate is held until the returned reservation is dropped.
    pub fn reserve(
        &self,
        label: &str,
        estimate: Option<f64>,
    ) -> Result<Reservation, crate::error::ProviderError> {
        use crate::error::ProviderError;
        let mut g = self.lock();
        let Some(budget) = g.budget_usd else {
            return Ok(Reservation {
                accounting: None,
                usd: 0.0,
            });
        };
        let spent = g.totals.all.cost_usd;
        if spent >= budget {
            return Err(ProviderError::BudgetExceeded {
                budget,
                spent,
                next: None,
            });
        }
        if !g.accept_unknown_cost {
            let unknown = g.totals.all.unpriced_calls;
            if unknown > 0 {
                return Err(ProviderError::BudgetUnenforceable {
                    budget,
                    reason: format!("{unknown} call(s) so far have no known cost"),
                });
            }
            if estimate.is_none() {
                return Err(ProviderError::BudgetUnenforceable {
                    budget,
                    reason: format!("{label} has no price in the price table"),
                });
            }
        }
        let usd = estimate.unwrap_or(0.0);
        if spent + g.reserved_usd + usd > budget {
            return Err(ProviderError::BudgetExceeded {
                budget,
                spent,
                next: Some(usd),
            });
        }
        g.reserved_usd += usd;
        Ok(Reservation {
            accounting: Some(self.clone()),
            usd,
        })
    }

    pub fn record_success(&self, key: &str, c: &Completion) {
        let mut g = self.lock();
        if c.cost_usd.is_none() && g.budget_usd.is_some() && !g.warned {
            g.warned = true;
            let why = c
                .usage_unknown
                .clone()
                .unwrap_or_else(|| format!("{key} has no price in the price table"));
            crate::notice::notice(&if g.accept_unknown_cost {
                format!(
                    "{key}: this call's cost is unknown ({why}); the cost budget counts only calls with a known cost (--accept-unknown-cost)"
                )
            } else {
                format!(
                    "{key}: this call's cost is unknown ({why}); the cost budget cannot be enforced, so no further call is sent"
                )
            });
        }
        g.totals.all.add_success(c);
        g.totals
            .per_model
            .entry(key.to_string())
            .or_default()
            .add_success(c);
    }

    /// A call that failed for good after `attempts` attempts.
    pub fn record_failure(&self, key: &str, attempts: u32) {
        self.failure(key, attempts, false);
    }

    /// A failed call that may have spent what kevo cannot see: an agent
    /// or a command runs a model of its own, and its failure says nothing
    /// of what that cost. Counted unknown, never as 0.
    pub fn record_unseen_failure(&self, key: &str, attempts: u32) {
        self.failure(key, attempts, true);
    }

    fn failure(&self, key: &str, attempts: u32, unseen: bool) {
        let mut g = self.lock();
        let totals = &mut g.totals;
        let retries = u64::from(attempts.saturating_sub(1));
        for t in [
            &mut totals.all,
            totals.per_model.entry(key.to_string()).or_default(),
        ] {
            t.failures += 1;
            t.retries += retries;
            if unseen {
                t.unpriced_calls += 1;
                t.usage_unknown_calls += 1;
            }
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
            usage_unknown: None,
            member: None,
            tool_calls: Vec::new(),
            native: None,
        }
    }

    #[test]
    fn a_failure_whose_spend_is_unseen_counts_as_unknown_cost() {
        let a = Accounting::new();
        a.record_failure("api", 2);
        a.record_unseen_failure("agent", 1);
        let t = a.totals();
        assert_eq!((t.all.failures, t.all.retries), (2, 1));
        assert_eq!((t.all.unpriced_calls, t.all.usage_unknown_calls), (1, 1));
        assert_eq!(t.per_model["api"].unpriced_calls, 0);
        assert_eq!(t.per_model["agent"].usage_unknown_calls, 1);
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
    fn budget_refuses_once_spent_and_holds_worst_cases_of_calls_in_flight() {
        use crate::error::ProviderError;
        let a = Accounting::with_budget(0.5);
        assert!(a.reserve("k", Some(0.1)).is_ok());
        a.record_success("k", &completion(Some(0.3), 1));
        // 0.3 spent: a call that could cost 0.15 fits, a second one in
        // flight at the same time does not.
        let first = a.reserve("k", Some(0.15)).unwrap();
        let e = a.reserve("k", Some(0.15)).unwrap_err();
        assert!(
            matches!(e, ProviderError::BudgetExceeded { next: Some(n), .. } if n == 0.15),
            "{e}"
        );
        drop(first);
        assert!(a.reserve("k", Some(0.15)).is_ok(), "released with the call");
        a.record_success("k", &completion(Some(0.3), 1));
        let e = a.reserve("k", Some(0.0)).unwrap_err();
        assert!(
            matches!(e, ProviderError::BudgetExceeded { budget, spent, next: None } if budget == 0.5 && (spent - 0.6).abs() < 1e-12),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_cost_makes_a_budget_unenforceable_unless_accepted() {
        use crate::error::ProviderError;
        let a = Accounting::with_budget(1.0);
        let e = a.reserve("local:m", None).unwrap_err();
        assert!(
            matches!(e, ProviderError::BudgetUnenforceable { .. })
                && e.to_string().contains("no price"),
            "{e}"
        );
        a.record_success("k", &completion(None, 1));
        a.set_accept_unknown_cost(true);
        assert!(a.reserve("local:m", None).is_ok());
        a.set_accept_unknown_cost(false);
        let e = a.reserve("k", Some(0.01)).unwrap_err();
        assert!(
            e.to_string()
                .contains("1 call(s) so far have no known cost"),
            "{e}"
        );
        // Without a budget nothing is refused.
        assert!(Accounting::new().reserve("k", None).is_ok());
    }
}
