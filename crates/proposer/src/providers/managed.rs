//! What every provider gets regardless of its protocol: a budget check, a
//! concurrency limit, retries, cost and accounting.

use std::sync::Arc;

use tokio::sync::Semaphore;

use super::{BoxFuture, Provider};
use crate::accounting::Accounting;
use crate::error::ProviderError;
use crate::pricing::PriceTable;
use crate::redact::Redactor;
use crate::retry::{RetryPolicy, with_retries};
use crate::types::{ChatRequest, Completion};

/// Where a completion's cost comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostPolicy {
    /// The cost the provider reported, else the price table, else unknown.
    PriceTable,
    /// Nothing was spent (replayed responses).
    Free,
}

pub struct Managed {
    inner: Box<dyn Provider>,
    label: String,
    /// The model as requested; priced when the served model name is not in
    /// the table.
    model: String,
    policy: RetryPolicy,
    /// Held for the duration of one attempt, not during backoff sleeps, so
    /// a rate-limited call does not block the others' retries.
    limit: Arc<Semaphore>,
    prices: PriceTable,
    cost: CostPolicy,
    accounting: Accounting,
    /// Applied to every completion, error and notice that leaves here.
    redactor: Redactor,
}

impl Managed {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        inner: Box<dyn Provider>,
        label: String,
        model: String,
        policy: RetryPolicy,
        concurrency: usize,
        prices: PriceTable,
        cost: CostPolicy,
        accounting: Accounting,
        redactor: Redactor,
    ) -> Self {
        Managed {
            inner,
            label,
            model,
            policy,
            limit: Arc::new(Semaphore::new(concurrency.clamp(1, Semaphore::MAX_PERMITS))),
            prices,
            cost,
            accounting,
            redactor,
        }
    }

    async fn run(&self, req: &ChatRequest) -> Result<Completion, ProviderError> {
        if let Err((budget, spent)) = self.accounting.check_budget() {
            return Err(ProviderError::BudgetExceeded { budget, spent });
        }
        let attempt = || async {
            let _permit = self
                .limit
                .acquire()
                .await
                .map_err(|_| ProviderError::Config("concurrency limit closed".into()))?;
            self.inner.complete(req).await
        };
        let redact = |t: &str| self.redactor.text(t);
        match with_retries(&self.policy, &self.label, &redact, attempt).await {
            Ok((c, attempts)) => {
                let mut c = self.redactor.completion(c);
                c.attempts = attempts;
                c.cost_usd = match self.cost {
                    CostPolicy::Free => Some(0.0),
                    CostPolicy::PriceTable => c
                        .cost_usd
                        .or_else(|| self.prices.cost(&[&c.model, &self.model], &c.usage)),
                };
                self.accounting.record_success(&self.label, &c);
                Ok(c)
            }
            Err((e, attempts)) => {
                self.accounting.record_failure(&self.label, attempts);
                Err(self.redactor.error(e))
            }
        }
    }
}

impl Provider for Managed {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(self.run(req))
    }

    fn fast_forward(&self, served: &[(String, ChatRequest)]) -> Result<(), ProviderError> {
        self.inner.fast_forward(served)
    }
}
