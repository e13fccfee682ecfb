//! LLM providers behind one trait, and [`build`], which turns a model spec
//! into a ready provider.
//!
//! Layering of what `build` returns:
//!
//! ```text
//! Ensemble (only for several members; seeded weighted choice)
//!   └─ Managed (per member: budget check, concurrency limit, retries,
//!      │        cost from the price table, accounting)
//!      └─ one attempt: OpenAi | Anthropic | Cmd | Replay
//! ```
//!
//! [`Recording`] wraps any of these to append every exchange to a replay
//! file.

mod agent;
mod anthropic;
mod batch;
mod cmd;
mod ensemble;
mod http;
mod managed;
mod openai;
mod record;
mod replay;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use agent::AgentProvider;
pub use anthropic::AnthropicProvider;
pub use batch::{BATCH_PRICE_FACTOR, BatchProvider, BatchState};
pub use cmd::CmdProvider;
pub use ensemble::{Ensemble, EnsembleState, ModelChoice};
pub use managed::{CostPolicy, Managed};
pub use openai::{OpenAiProvider, is_reasoning_model};
pub use record::{Exchange, Recording};
pub use replay::ReplayProvider;

use crate::accounting::Accounting;
use crate::config::{ApiKind, CmdFormat, ProviderConfig};
use crate::error::ProviderError;
use crate::retry::RetryPolicy;
use crate::spec::{ModelSpec, SpecKind, parse_specs};
use crate::types::{ChatRequest, Completion};

/// A boxed future that can cross threads. The trait returns it instead of
/// using `async fn` so that `dyn Provider` works (ensembles and spec-built
/// providers are chosen at run time).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Anything that answers a prompt.
pub trait Provider: Send + Sync {
    /// A spec-like name for logs and accounting, e.g. `openai:gpt-5`.
    fn label(&self) -> String;

    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>>;

    /// The command-line agent behind an `agent:` spec, which runs a whole
    /// proposal with its tools instead of answering a prompt.
    fn agent(&self) -> Option<&AgentProvider> {
        None
    }

    /// The ensemble's RNG state, for checkpoints; `None` for single models.
    fn ensemble_state(&self) -> Option<EnsembleState> {
        None
    }

    /// What the candidate of a call answered by `member` (its
    /// `Completion::member`) earned: an ensemble choosing by bandit learns
    /// from it; everything else ignores it.
    fn reward(&self, member: &str, reward: f64, cost_usd: f64) {
        let _ = (member, reward, cost_usd);
    }

    /// Skip what a resumed run already consumed: `served` holds the label of
    /// the provider that answered and the request, for every call made
    /// before the checkpoint, in order. Live models need nothing; an ordered
    /// replay advances past that many records and a keyed one drops the
    /// records those prompts used, so a resumed run gets the responses the
    /// uninterrupted run would have got.
    fn fast_forward(&self, served: &[(String, ChatRequest)]) -> Result<(), ProviderError> {
        let _ = served;
        Ok(())
    }

    /// Restore a checkpointed ensemble state.
    fn restore_ensemble_state(&self, _state: &EnsembleState) -> Result<(), ProviderError> {
        Err(ProviderError::Config(format!(
            "{} is not an ensemble; there is no state to restore",
            self.label()
        )))
    }
}

impl<P: Provider + ?Sized> Provider for Arc<P> {
    fn label(&self) -> String {
        (**self).label()
    }
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        (**self).complete(req)
    }
    fn ensemble_state(&self) -> Option<EnsembleState> {
        (**self).ensemble_state()
    }
    fn agent(&self) -> Option<&AgentProvider> {
        (**self).agent()
    }
    fn reward(&self, member: &str, reward: f64, cost_usd: f64) {
        (**self).reward(member, reward, cost_usd)
    }
    fn restore_ensemble_state(&self, state: &EnsembleState) -> Result<(), ProviderError> {
        (**self).restore_ensemble_state(state)
    }
    fn fast_forward(&self, served: &[(String, ChatRequest)]) -> Result<(), ProviderError> {
        (**self).fast_forward(served)
    }
}

/// The provider of a run whose answers do not come from live calls: one
/// driven from outside (`--llm external`: `kevo ask` hands out prompts and
/// `kevo tell` brings the answers) or through a batch endpoint
/// ([`build_batch`]). Asked to complete, it says so.
struct NoLiveCalls {
    label: String,
    why: &'static str,
}

impl Provider for NoLiveCalls {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn complete<'a>(
        &'a self,
        _req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async { Err(ProviderError::Config(self.why.into())) })
    }
}

/// The batch endpoint a `batch:` spec names (keys from the process
/// environment); None for any other spec.
pub fn build_batch(
    spec: &str,
    config: &ProviderConfig,
    accounting: &Accounting,
) -> Result<Option<Arc<BatchProvider>>, ProviderError> {
    let specs = parse_specs(spec)?;
    let [only] = specs.as_slice() else {
        return Ok(None);
    };
    let SpecKind::Batch {
        provider,
        base_url,
        model,
    } = &only.kind
    else {
        return Ok(None);
    };
    Ok(Some(Arc::new(BatchProvider::new(
        provider,
        base_url.as_deref(),
        model,
        config,
        accounting,
        &|k| std::env::var(k).ok(),
    )?)))
}

/// Build the provider a spec names, reading API keys from the process
/// environment. Every member shares `accounting`; the config's
/// `budget_usd`, if set, becomes its budget.
pub fn build(
    spec: &str,
    config: &ProviderConfig,
    accounting: &Accounting,
) -> Result<Arc<dyn Provider>, ProviderError> {
    build_with_env(spec, config, accounting, &|k| std::env::var(k).ok())
}

/// [`build`] with the environment given as a lookup function, so callers
/// and tests can supply keys without touching the process environment.
pub fn build_with_env(
    spec: &str,
    config: &ProviderConfig,
    accounting: &Accounting,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, ProviderError> {
    config.validate()?;
    if let Some(b) = config.budget_usd {
        accounting.set_budget(b);
    }
    if config.accept_unknown_cost {
        accounting.set_accept_unknown_cost(true);
    }
    let specs = parse_specs(spec)?;
    if specs.len() > 1
        && let Some(s) = specs.iter().find(|s| {
            matches!(
                s.kind,
                SpecKind::External | SpecKind::Batch { .. } | SpecKind::Agent { .. }
            )
        })
    {
        return Err(ProviderError::Config(format!(
            "`{}` cannot be part of an ensemble: its answers do not come from single calls",
            s.label()
        )));
    }
    let mut members = specs
        .iter()
        .map(|s| {
            Ok((
                s.weight.unwrap_or(1.0),
                build_member(s, config, accounting, env)?,
            ))
        })
        .collect::<Result<Vec<_>, ProviderError>>()?;
    if members.len() == 1 {
        return Ok(members.pop().expect("one member").1);
    }
    Ok(Arc::new(Ensemble::with_choice(
        members,
        config.ensemble_seed,
        config.model_choice,
    )?))
}

/// One member, wrapped in [`Managed`].
pub fn build_member(
    spec: &ModelSpec,
    config: &ProviderConfig,
    accounting: &Accounting,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, ProviderError> {
    let prices = config.price_table();
    let mut keys = Vec::new();
    let mut max_output_tokens = config.max_tokens;
    let (inner, policy, concurrency, cost, model): (Box<dyn Provider>, _, _, _, String) =
        match &spec.kind {
            SpecKind::Api {
                provider,
                base_url,
                model,
            } => {
                let ep = config.resolve(provider, base_url.as_deref(), env)?;
                keys.extend(ep.api_key.as_ref().map(|k| k.expose().to_string()));
                max_output_tokens = ep.max_tokens;
                let concurrency = ep.concurrency;
                let inner: Box<dyn Provider> = match ep.kind {
                    ApiKind::Openai => Box::new(OpenAiProvider::new(ep, model)?),
                    ApiKind::Anthropic => Box::new(AnthropicProvider::new(ep, model)?),
                };
                (
                    inner,
                    config.retry_policy(),
                    concurrency,
                    CostPolicy::PriceTable,
                    model.clone(),
                )
            }
            SpecKind::Cmd { command, json } => {
                let format = if *json {
                    CmdFormat::Json
                } else {
                    config.cmd_format
                };
                let timeout = std::time::Duration::from_secs_f64(config.timeout_s);
                let environment =
                    cmd::proposer_environment(std::env::vars_os(), &config.cmd_pass_env);
                (
                    Box::new(
                        CmdProvider::new(command, format, timeout)
                            .with_environment(environment)
                            .with_max_output(config.max_response_bytes)
                            .with_sandbox(cmd_sandbox(config)?),
                    ),
                    config.retry_policy(),
                    config.concurrency,
                    CostPolicy::PriceTable,
                    "cmd".to_string(),
                )
            }
            SpecKind::Agent { command } => return agent_member(command, config),
            SpecKind::External => {
                return Ok(Arc::new(NoLiveCalls {
                    label: spec.label(),
                    why: "a run with `--llm external` calls no model: hand its prompts out with \
                      `kevo ask RUN` and bring the answers with `kevo tell RUN ID FILE`",
                }));
            }
            SpecKind::Batch { .. } => {
                return Ok(Arc::new(NoLiveCalls {
                    label: spec.label(),
                    why: "a `batch:` model answers through its batch endpoint, not live calls",
                }));
            }
            SpecKind::None => {
                return Ok(Arc::new(NoLiveCalls {
                    label: spec.label(),
                    why: "`none` is no model: it serves runs of no proposals (`--iterations 0`)",
                }));
            }
            SpecKind::Replay { path, mode } => (
                Box::new(ReplayProvider::open(path, *mode)?),
                RetryPolicy::none(),
                usize::MAX >> 4,
                CostPolicy::Free,
                String::new(),
            ),
        };
    let redactor = crate::redact::Redactor::from_process(keys);
    let unseen_failures = matches!(spec.kind, SpecKind::Cmd { .. });
    Ok(Arc::new(
        Managed::new(
            inner,
            redactor.text(&spec.label()),
            model,
            policy,
            concurrency,
            prices,
            cost,
            accounting.clone(),
            redactor,
            max_output_tokens,
        )
        .with_unseen_failures(unseen_failures),
    ))
}

/// An `agent:` proposer, confined by kevo's own binary (this process's)
/// with the config's readable paths and network setting. Not wrapped in
/// [`Managed`]: it makes no model calls of its own to retry or price.
fn agent_member(
    command: &str,
    config: &ProviderConfig,
) -> Result<Arc<dyn Provider>, ProviderError> {
    let launcher = std::env::current_exe().map_err(|e| {
        ProviderError::Config(format!(
            "agent: cannot find kevo's own binary to confine the agent with: {e}"
        ))
    })?;
    Ok(Arc::new(AgentProvider::new(
        command,
        launcher,
        config.cmd_readable.clone(),
        config.cmd_network,
        std::time::Duration::from_secs_f64(config.max_call_s),
        cmd::proposer_environment(std::env::vars_os(), &config.cmd_pass_env),
    )))
}

/// The confinement of `cmd:` calls the config asks for: kevo's own binary
/// (this process's) confines itself as `kevo sandbox-exec` around each.
fn cmd_sandbox(config: &ProviderConfig) -> Result<Option<cmd::CmdSandbox>, ProviderError> {
    if !config.cmd_sandbox {
        return Ok(None);
    }
    let launcher = std::env::current_exe().map_err(|e| {
        ProviderError::Config(format!(
            "cmd_sandbox: cannot find kevo's own binary to confine the command with: {e}"
        ))
    })?;
    Ok(Some(cmd::CmdSandbox {
        launcher,
        readable: config.cmd_readable.clone(),
        network: config.cmd_network,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn external_calls_no_model_and_stands_alone() {
        let accounting = Accounting::new();
        let config = ProviderConfig::default();
        let p = build("external", &config, &accounting).unwrap();
        assert_eq!(p.label(), "external");
        let err = p
            .complete(&ChatRequest::new("s", "u"))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("kevo tell"), "{err}");
        let err = build("external,cmd:cat", &config, &accounting)
            .err()
            .expect("an ensemble with external is refused")
            .to_string();
        assert!(err.contains("ensemble"), "{err}");
        let err = build("agent:sh a.sh,cmd:cat", &config, &accounting)
            .err()
            .expect("an ensemble with an agent is refused")
            .to_string();
        assert!(err.contains("ensemble"), "{err}");
        // An agent answers no single prompt: it works inside a run.
        let agent = build("agent: sh a.sh ", &config, &accounting).unwrap();
        assert_eq!(agent.label(), "agent:sh a.sh");
        assert!(agent.agent().is_some());
        let err = agent
            .complete(&ChatRequest::new("s", "u"))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("inside `kevo evolve`"), "{err}");
        let err = build("agent:", &config, &accounting)
            .err()
            .expect("an agent without a command is refused")
            .to_string();
        assert!(err.contains("no command"), "{err}");
        let err = build("batch:openai:gpt-5,cmd:cat", &config, &accounting)
            .err()
            .expect("an ensemble with a batch model is refused")
            .to_string();
        assert!(err.contains("ensemble"), "{err}");
    }
}
