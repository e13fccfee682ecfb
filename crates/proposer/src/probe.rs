//! `kevo llm test --llm SPEC`: one small prompt to check that a model is
//! reachable, answers, and is priced.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::accounting::Accounting;
use crate::config::ProviderConfig;
use crate::error::{ProviderError, snippet};
use crate::providers::build_member;
use crate::spec::parse_specs;
use crate::types::{ChatRequest, Usage};

/// What one probe found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// The member spec probed, weight left out.
    pub spec: String,
    pub provider: String,
    /// The model the server says answered.
    pub model: String,
    #[serde(with = "crate::types::duration_ms", rename = "latency_ms")]
    pub latency: Duration,
    pub attempts: u32,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    pub finish_reason: Option<String>,
    /// The start of the reply (200 characters at most).
    pub reply: String,
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (served by {} as {}): {:.2} s",
            self.spec,
            self.provider,
            self.model,
            self.latency.as_secs_f64()
        )?;
        if self.attempts > 1 {
            write!(f, " after {} attempts", self.attempts)?;
        }
        write!(
            f,
            ", {} input + {} output tokens",
            self.usage.input_tokens, self.usage.output_tokens
        )?;
        if let Some(r) = self.usage.reasoning_tokens {
            write!(f, " ({r} reasoning)")?;
        }
        match self.cost_usd {
            Some(c) => write!(f, ", ${c:.6}")?,
            None => write!(f, ", cost unknown (no price for this model)")?,
        }
        write!(f, "; reply: {:?}", self.reply)
    }
}

/// The probe prompt: short, and with room for a reasoning model to think
/// (1024 tokens; a reasoning model given 16 often returns nothing).
pub fn probe_request() -> ChatRequest {
    ChatRequest {
        system: "You are a connectivity check. Answer tersely.".into(),
        user: "Reply with the single word: ok".into(),
        max_tokens: Some(1024),
        temperature: None,
        ..Default::default()
    }
}

/// Probe a single-model spec. An ensemble spec is refused here; use
/// [`probe_all`] to probe every member.
pub async fn probe(spec: &str, config: &ProviderConfig) -> Result<ProbeReport, ProviderError> {
    let specs = parse_specs(spec)?;
    if specs.len() != 1 {
        return Err(ProviderError::Config(format!(
            "`{spec}` names {} models; probe takes one (probe_all probes each)",
            specs.len()
        )));
    }
    probe_one(&specs[0], config, &|k| std::env::var(k).ok()).await
}

/// Probe every member of a spec in turn; each gets its own result.
pub async fn probe_all(
    spec: &str,
    config: &ProviderConfig,
) -> Result<Vec<Result<ProbeReport, ProviderError>>, ProviderError> {
    let specs = parse_specs(spec)?;
    let mut out = Vec::new();
    for s in &specs {
        out.push(probe_one(s, config, &|k| std::env::var(k).ok()).await);
    }
    Ok(out)
}

async fn probe_one(
    spec: &crate::spec::ModelSpec,
    config: &ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ProbeReport, ProviderError> {
    let provider = build_member(spec, config, &Accounting::new(), env)?;
    let c = provider.complete(&probe_request()).await?;
    Ok(ProbeReport {
        spec: spec.label(),
        provider: c.provider,
        model: c.model,
        latency: c.latency,
        attempts: c.attempts,
        usage: c.usage,
        cost_usd: c.cost_usd,
        finish_reason: c.finish_reason,
        // The answer's text is not cleaned on its way (it is code); this
        // start of it is only shown.
        reply: crate::sanitize::text(&snippet(c.text.trim(), 200)),
    })
}
