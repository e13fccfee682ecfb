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
    /// Applied to every completion, error and notice that leaves here,
    /// before [`crate::sanitize`] cleans them of control characters.
    redactor: Redactor,
    /// The output-token limit of a request that sets none: the worst case
    /// of a call's cost.
    max_output_tokens: u32,
    /// A failed call may have spent what kevo cannot see (a `cmd:` that
    /// runs a model of its own): counted unknown, not as nothing.
    unseen_failures: bool,
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
        max_output_tokens: u32,
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
            max_output_tokens,
            unseen_failures: false,
        }
    }

    /// Count this provider's failed calls as of unknown cost (see
    /// [`Accounting::record_unseen_failure`]).
    pub fn with_unseen_failures(mut self, unseen: bool) -> Self {
        self.unseen_failures = unseen;
        self
    }

    /// What this request could cost at most: its prompt at two bytes per
    /// token (real tokenizers average three to four) and every output
    /// token it allows. `None` without a price; 0 for replayed answers.
    fn worst_case_cost(&self, req: &ChatRequest) -> Option<f64> {
        if self.cost == CostPolicy::Free {
            return Some(0.0);
        }
        let usage = crate::types::Usage {
            input_tokens: req.prompt_bytes().div_ceil(2) as u64,
            output_tokens: u64::from(req.max_tokens.unwrap_or(self.max_output_tokens)),
            reasoning_tokens: None,
            cached_tokens: None,
        };
        self.prices.cost(&[&self.model], &usage)
    }

    async fn run(&self, req: &ChatRequest) -> Result<Completion, ProviderError> {
        let _reservation = self
            .accounting
            .reserve(&self.label, self.worst_case_cost(req))?;
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
                let mut c = crate::sanitize::completion(self.redactor.completion(c));
                c.attempts = attempts;
                c.cost_usd = match self.cost {
                    CostPolicy::Free => Some(0.0),
                    // Counts that are not known price to nothing, not to 0.
                    CostPolicy::PriceTable if c.usage_unknown.is_some() => c.cost_usd,
                    CostPolicy::PriceTable => c
                        .cost_usd
                        .or_else(|| self.prices.cost(&[&c.model, &self.model], &c.usage)),
                };
                self.accounting.record_success(&self.label, &c);
                Ok(c)
            }
            Err((e, attempts)) => {
                if self.unseen_failures {
                    self.accounting.record_unseen_failure(&self.label, attempts);
                } else {
                    self.accounting.record_failure(&self.label, attempts);
                }
                Err(crate::sanitize::error(self.redactor.error(e)))
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
