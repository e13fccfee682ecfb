//! Provider settings: defaults that suit long reasoning calls, overridable
//! from a TOML or JSON file, plus the table of known hosts that gives each
//! provider name its base URL and API-key variable.
//!
//! ```toml
//! timeout_s = 300          # per attempt
//! max_retries = 4
//! max_call_s = 600         # attempts and waits of one call together
//! concurrency = 4          # requests in flight per model
//! max_tokens = 32768
//! reasoning_effort = "high"
//!
//! [endpoints.local]        # spec `local:my-model`
//! kind = "openai"
//! base_url = "http://gpu-box:8000/v1"
//! api_key_env = "LOCAL_KEY"
//!
//! [prices.my-model]
//! input_per_mtok = 0.0
//! output_per_mtok = 0.0
//! ```
//!
//! Keys may be written into the file (`api_key = "..."`) but are kept in a
//! [`Secret`] and never serialised back out.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ProviderError;
use crate::pricing::{Price, PriceTable};
use crate::retry::RetryPolicy;
use crate::secret::Secret;

/// The wire protocol of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiKind {
    /// `POST {base}/chat/completions`.
    Openai,
    /// `POST {base}/v1/messages`.
    Anthropic,
}

/// How the `cmd:` provider writes the prompt to the command's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CmdFormat {
    /// `<<<SYSTEM>>>` and `<<<USER>>>` marker lines.
    #[default]
    Text,
    /// One JSON object `{"system", "user", "max_tokens", "temperature"}`.
    Json,
}

/// Settings of one named endpoint; every field falls back to the top level
/// of [`ProviderConfig`] or to the known-host table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EndpointConfig {
    pub kind: Option<ApiKind>,
    pub base_url: Option<String>,
    /// Name of the environment variable holding the key.
    pub api_key_env: Option<String>,
    /// The key itself (discouraged: prefer `api_key_env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    pub reasoning_effort: Option<String>,
    pub thinking_budget: Option<u32>,
    pub concurrency: Option<usize>,
    pub timeout_s: Option<f64>,
    /// Force the reasoning-model request shape (`max_completion_tokens`,
    /// no temperature) on or off; guessed from the model name otherwise.
    pub reasoning_model: Option<bool>,
    /// `anthropic-version` header; "2023-06-01" otherwise.
    pub anthropic_version: Option<String>,
}

/// Everything the providers need besides the spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// Limit per attempt. 300 s: high-effort reasoning calls on kernel
    /// prompts take a few minutes; a server that accepts and never answers
    /// should not hold a run for a quarter of an hour.
    pub timeout_s: f64,
    pub connect_timeout_s: f64,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First backoff delay; doubles per retry up to `retry_max_delay_s`.
    pub retry_min_delay_s: f64,
    pub retry_max_delay_s: f64,
    /// A `Retry-After` longer than this is not waited out: the call fails
    /// with the server's answer instead of hanging for an hour.
    pub max_retry_after_s: f64,
    /// Attempts and waits of one call together: no retry starts later.
    pub max_call_s: f64,
    /// Largest response read, in bytes (HTTP body or `cmd:` stdout): far
    /// above any model's output limit (32k tokens are ~130 kB), far below
    /// what a broken server can send.
    pub max_response_bytes: u64,
    /// Variables a `cmd:` proposer gets from kevo's environment besides the
    /// basic ones (PATH, HOME, locale, ...): credentials reach it only when
    /// named here.
    pub cmd_pass_env: Vec<String>,
    /// Requests in flight at once, per model.
    pub concurrency: usize,
    /// Sampling temperature; provider default when absent. Never sent to
    /// reasoning models, which reject it.
    pub temperature: Option<f32>,
    /// Output-token limit, reasoning included. 32768 leaves room for a
    /// long reasoning trace plus a full kernel.
    pub max_tokens: u32,
    /// `reasoning_effort` for OpenAI-style reasoning models ("low",
    /// "medium", "high").
    pub reasoning_effort: Option<String>,
    /// Anthropic extended-thinking budget in tokens (at least 1024).
    pub thinking_budget: Option<u32>,
    /// Seed of the ensemble's member choice.
    pub ensemble_seed: u64,
    /// How an ensemble chooses the model of each call.
    pub model_choice: crate::providers::ModelChoice,
    /// Stop sending requests once this much has been spent.
    pub budget_usd: Option<f64>,
    /// With a budget: run on when a call's cost is unknown (no price, no
    /// usable token counts) instead of stopping.
    pub accept_unknown_cost: bool,
    /// Stdin format of `cmd:` (the `cmd+json:` spec forces JSON).
    pub cmd_format: CmdFormat,
    /// Confine every `cmd:` proposer call (a local coding agent, a
    /// script): it starts in a fresh directory, the only place it may
    /// write; it reads only there, in the system directories and in
    /// `cmd_readable`; it has no network unless `cmd_network`; it gets no
    /// new privileges; and its whole process tree ends with the call.
    pub cmd_sandbox: bool,
    /// More files or directories a confined `cmd:` proposer may read (its
    /// own script, a model's weights).
    pub cmd_readable: Vec<std::path::PathBuf>,
    /// A confined `cmd:` proposer may reach the network (to call its own
    /// model's API); files stay confined.
    pub cmd_network: bool,
    /// The tools a proposal is offered with `--agent-tools`, and their
    /// per-proposal budget (`[agent_tools]`; defaults without it).
    pub agent_tools: crate::tools::ToolBudget,
    pub endpoints: BTreeMap<String, EndpointConfig>,
    /// Extra or replacement rows for the built-in price table.
    pub prices: BTreeMap<String, Price>,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            timeout_s: 300.0,
            connect_timeout_s: 10.0,
            max_retries: 4,
            retry_min_delay_s: 1.0,
            retry_max_delay_s: 60.0,
            max_retry_after_s: 120.0,
            max_call_s: 600.0,
            max_response_bytes: 1 << 20,
            cmd_pass_env: Vec::new(),
            concurrency: 4,
            temperature: None,
            max_tokens: 32768,
            reasoning_effort: None,
            thinking_budget: None,
            ensemble_seed: 0,
            model_choice: crate::providers::ModelChoice::Weights,
            budget_usd: None,
            accept_unknown_cost: false,
            cmd_format: CmdFormat::Text,
            cmd_sandbox: false,
            cmd_readable: Vec::new(),
            cmd_network: false,
            agent_tools: crate::tools::ToolBudget::default(),
            endpoints: BTreeMap::new(),
            prices: BTreeMap::new(),
        }
    }
}

impl ProviderConfig {
    /// Read a `.toml` or `.json` file (by extension; TOML otherwise).
    pub fn load(path: &Path) -> Result<Self, ProviderError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProviderError::Config(format!("cannot read {}: {e}", path.display())))?;
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let cfg = if is_json {
            Self::from_json(&text)
        } else {
            Self::from_toml(&text)
        };
        cfg.map_err(|e| match e {
            ProviderError::Config(m) => ProviderError::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    pub fn from_toml(text: &str) -> Result<Self, ProviderError> {
        let c: Self = toml::from_str(text).map_err(|e| ProviderError::Config(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    pub fn from_json(text: &str) -> Result<Self, ProviderError> {
        let c: Self =
            serde_json::from_str(text).map_err(|e| ProviderError::Config(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<(), ProviderError> {
        let bad = |m: String| Err(ProviderError::Config(m));
        for (name, v) in [
            ("timeout_s", self.timeout_s),
            ("connect_timeout_s", self.connect_timeout_s),
            ("max_call_s", self.max_call_s),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(format!(
                    "{name} must be a positive number of seconds, not {v}"
                ));
            }
        }
        for (name, v) in [
            ("retry_min_delay_s", self.retry_min_delay_s),
            ("retry_max_delay_s", self.retry_max_delay_s),
            ("max_retry_after_s", self.max_retry_after_s),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{name} must be zero or more seconds, not {v}"));
            }
        }
        if self.concurrency == 0 {
            return bad("concurrency must be at least 1".into());
        }
        if self.max_response_bytes < 1024 {
            return bad(format!(
                "max_response_bytes must be at least 1024, not {}",
                self.max_response_bytes
            ));
        }
        self.agent_tools.validate().map_err(ProviderError::Config)?;
        for (name, e) in &self.endpoints {
            if e.concurrency == Some(0) {
                return bad(format!("endpoints.{name}.concurrency must be at least 1"));
            }
            if let Some(t) = e.timeout_s
                && !(t.is_finite() && t > 0.0)
            {
                return bad(format!("endpoints.{name}.timeout_s must be positive"));
            }
        }
        Ok(())
    }

    /// The command line's `--llm-timeout` and `--llm-retries` over the
    /// file's values (endpoint-level timeouts included: the flag is what
    /// the user asked for last).
    pub fn with_overrides(
        mut self,
        timeout_s: Option<f64>,
        retries: Option<u32>,
    ) -> Result<Self, ProviderError> {
        if let Some(t) = timeout_s {
            if !(t.is_finite() && t > 0.0) {
                return Err(ProviderError::Config(format!(
                    "--llm-timeout must be a positive number of seconds, not {t}"
                )));
            }
            self.timeout_s = t;
            for e in self.endpoints.values_mut() {
                e.timeout_s = None;
            }
            // One attempt may use the whole call budget, not more.
            self.max_call_s = self.max_call_s.max(t);
        }
        if let Some(r) = retries {
            self.max_retries = r;
        }
        self.validate()?;
        Ok(self)
    }

    /// The run's seed and way of choosing among an ensemble's models,
    /// which are the run's settings, over the file's.
    pub fn with_model_choice(mut self, seed: u64, choice: crate::providers::ModelChoice) -> Self {
        self.ensemble_seed = seed;
        self.model_choice = choice;
        self
    }

    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_retries: self.max_retries,
            min_delay: Duration::from_secs_f64(self.retry_min_delay_s),
            max_delay: Duration::from_secs_f64(self.retry_max_delay_s),
            max_retry_after: Duration::from_secs_f64(self.max_retry_after_s),
            max_call: Duration::from_secs_f64(self.max_call_s),
        }
    }

    pub fn price_table(&self) -> PriceTable {
        PriceTable::builtin().with(&self.prices)
    }
}

/// A provider name kevo knows without configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KnownProvider {
    pub name: &'static str,
    pub kind: ApiKind,
    pub base_url: &'static str,
    pub key_env: &'static str,
    /// Hosted APIs refuse requests without a key; local servers do not
    /// need one, so a missing key is only an error for the former.
    pub key_required: bool,
}

const fn known(
    name: &'static str,
    kind: ApiKind,
    base_url: &'static str,
    key_env: &'static str,
    key_required: bool,
) -> KnownProvider {
    KnownProvider {
        name,
        kind,
        base_url,
        key_env,
        key_required,
    }
}

pub const KNOWN_PROVIDERS: &[KnownProvider] = &[
    known(
        "openai",
        ApiKind::Openai,
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        true,
    ),
    known(
        "anthropic",
        ApiKind::Anthropic,
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
        true,
    ),
    known(
        "deepseek",
        ApiKind::Openai,
        "https://api.deepseek.com/v1",
        "DEEPSEEK_API_KEY",
        true,
    ),
    known(
        "openrouter",
        ApiKind::Openai,
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
        true,
    ),
    known(
        "together",
        ApiKind::Openai,
        "https://api.together.xyz/v1",
        "TOGETHER_API_KEY",
        true,
    ),
    known(
        "groq",
        ApiKind::Openai,
        "https://api.groq.com/openai/v1",
        "GROQ_API_KEY",
        true,
    ),
    known(
        "mistral",
        ApiKind::Openai,
        "https://api.mistral.ai/v1",
        "MISTRAL_API_KEY",
        true,
    ),
    known(
        "gemini",
        ApiKind::Openai,
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "GEMINI_API_KEY",
        true,
    ),
    known(
        "ollama",
        ApiKind::Openai,
        "http://localhost:11434/v1",
        "OLLAMA_API_KEY",
        false,
    ),
    known(
        "vllm",
        ApiKind::Openai,
        "http://localhost:8000/v1",
        "VLLM_API_KEY",
        false,
    ),
    known(
        "sglang",
        ApiKind::Openai,
        "http://localhost:30000/v1",
        "SGLANG_API_KEY",
        false,
    ),
    known(
        "llamacpp",
        ApiKind::Openai,
        "http://localhost:8080/v1",
        "LLAMACPP_API_KEY",
        false,
    ),
];

pub fn known_provider(name: &str) -> Option<&'static KnownProvider> {
    KNOWN_PROVIDERS.iter().find(|k| k.name == name)
}

/// The known provider whose hosted API lives at `url`'s host, so that
/// `openai@https://api.deepseek.com/v1:deepseek-chat` still reads
/// `DEEPSEEK_API_KEY`.
pub fn known_by_host(url: &str) -> Option<&'static KnownProvider> {
    let host = host_of(url)?;
    KNOWN_PROVIDERS
        .iter()
        .filter(|k| k.key_required)
        .find(|k| host_of(k.base_url) == Some(host))
}

fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let end = rest.find(['/', ':']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Settings resolved for one spec member, ready to build a provider.
#[derive(Debug, Clone)]
pub struct ResolvedEndpoint {
    pub name: String,
    pub kind: ApiKind,
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub temperature: Option<f32>,
    pub max_tokens: u32,
    pub reasoning_effort: Option<String>,
    pub thinking_budget: Option<u32>,
    pub concurrency: usize,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub max_response_bytes: u64,
    pub reasoning_model: Option<bool>,
    pub anthropic_version: String,
}

impl ProviderConfig {
    /// Resolve provider `name` (with the spec's optional base URL) against
    /// the config's endpoints, the known-host table and the environment.
    pub fn resolve(
        &self,
        name: &str,
        spec_url: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedEndpoint, ProviderError> {
        let known = known_provider(name);
        let cfg = self.endpoints.get(name).cloned().unwrap_or_default();
        let by_host = spec_url.and_then(known_by_host);
        let base_url = spec_url
            .map(str::to_string)
            .or(cfg.base_url.clone())
            .or(known.map(|k| k.base_url.to_string()))
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "unknown provider `{name}`: known are {}; give a base URL (`{name}@http://host:port/v1:MODEL`) or define [endpoints.{name}] in the config file",
                    KNOWN_PROVIDERS
                        .iter()
                        .map(|k| k.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        let kind = cfg
            .kind
            .or(by_host.map(|k| k.kind))
            .or(known.map(|k| k.kind))
            .unwrap_or(ApiKind::Openai);
        // Which variable holds the key: the config's choice, else the one of
        // the hosted API the URL points at, else the provider name's.
        let key_env = cfg
            .api_key_env
            .clone()
            .or(by_host.map(|k| k.key_env.to_string()))
            .or(known.map(|k| k.key_env.to_string()))
            .unwrap_or_else(|| {
                format!(
                    "{}_API_KEY",
                    name.to_ascii_uppercase().replace(['-', '.', '+'], "_")
                )
            });
        let api_key = cfg.api_key.clone().or_else(|| {
            env(&key_env)
                .filter(|v| !v.trim().is_empty())
                .map(Secret::new)
        });
        // A key is required when the request goes to a hosted API: the known
        // provider's own URL, or a URL on a known hosted API's host.
        let hosted = by_host.is_some()
            || (spec_url.is_none()
                && cfg.base_url.is_none()
                && known.is_some_and(|k| k.key_required));
        if api_key.is_none() && hosted {
            return Err(ProviderError::MissingKey {
                provider: name.to_string(),
                env: key_env,
            });
        }
        let thinking_budget = cfg.thinking_budget.or(self.thinking_budget);
        if let Some(b) = thinking_budget
            && b < 1024
        {
            return Err(ProviderError::Config(format!(
                "thinking_budget must be at least 1024 tokens (the Anthropic minimum), not {b}"
            )));
        }
        Ok(ResolvedEndpoint {
            name: name.to_string(),
            kind,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            temperature: cfg.temperature.or(self.temperature),
            max_tokens: cfg.max_tokens.unwrap_or(self.max_tokens),
            reasoning_effort: cfg.reasoning_effort.or(self.reasoning_effort.clone()),
            thinking_budget,
            concurrency: cfg.concurrency.unwrap_or(self.concurrency),
            timeout: Duration::from_secs_f64(cfg.timeout_s.unwrap_or(self.timeout_s)),
            connect_timeout: Duration::from_secs_f64(self.connect_timeout_s),
            max_response_bytes: self.max_response_bytes,
            reasoning_model: cfg.reasoning_model,
            anthropic_version: cfg
                .anthropic_version
                .unwrap_or_else(|| "2023-06-01".to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn known_providers_need_their_key() {
        let c = ProviderConfig::default();
        let e = c.resolve("openai", None, &env_with(&[])).unwrap_err();
        assert!(
            matches!(&e, ProviderError::MissingKey { env, .. } if env == "OPENAI_API_KEY"),
            "{e}"
        );
        let r = c
            .resolve(
                "anthropic",
                None,
                &env_with(&[("ANTHROPIC_API_KEY", "sk-ant")]),
            )
            .unwrap();
        assert_eq!(r.kind, ApiKind::Anthropic);
        assert_eq!(r.base_url, "https://api.anthropic.com");
        assert_eq!(r.api_key.unwrap().expose(), "sk-ant");
    }

    #[test]
    fn local_urls_do_not_need_a_key_and_known_hosts_pick_their_variable() {
        let c = ProviderConfig::default();
        let r = c
            .resolve("openai", Some("http://localhost:8000/v1"), &env_with(&[]))
            .unwrap();
        assert!(r.api_key.is_none());
        assert_eq!(r.kind, ApiKind::Openai);
        let r = c
            .resolve(
                "openai",
                Some("https://api.deepseek.com/v1"),
                &env_with(&[("DEEPSEEK_API_KEY", "dk"), ("OPENAI_API_KEY", "ok")]),
            )
            .unwrap();
        assert_eq!(r.api_key.unwrap().expose(), "dk");
        let e = c
            .resolve(
                "openai",
                Some("https://openrouter.ai/api/v1"),
                &env_with(&[]),
            )
            .unwrap_err();
        assert!(e.to_string().contains("OPENROUTER_API_KEY"), "{e}");
        assert!(c.resolve("ollama", None, &env_with(&[])).is_ok());
        let e = c.resolve("mystery", None, &env_with(&[])).unwrap_err();
        assert!(
            e.to_string().contains("mystery") && e.to_string().contains("ollama"),
            "{e}"
        );
    }

    #[test]
    fn files_in_both_formats_and_their_errors() {
        let t = ProviderConfig::from_toml(
            r#"
timeout_s = 30
reasoning_effort = "high"
[endpoints.local]
base_url = "http://box:8000/v1/"
api_key = "sk-file"
concurrency = 2
[prices.my-model]
input_per_mtok = 1.0
output_per_mtok = 2.0
"#,
        )
        .unwrap();
        assert_eq!(t.timeout_s, 30.0);
        let r = t.resolve("local", None, &env_with(&[])).unwrap();
        assert_eq!(r.base_url, "http://box:8000/v1");
        assert_eq!(r.concurrency, 2);
        assert_eq!(r.reasoning_effort.as_deref(), Some("high"));
        assert!(t.price_table().lookup("my-model").is_some());
        // The key never serialises or prints back out.
        let dumped = serde_json::to_string(&t).unwrap();
        assert!(!dumped.contains("sk-file"), "{dumped}");
        assert!(!format!("{t:?} {r:?}").contains("sk-file"));

        let j = ProviderConfig::from_json(r#"{"max_retries": 1, "endpoints": {"x": {"kind": "anthropic", "base_url": "http://h"}}}"#).unwrap();
        assert_eq!(j.max_retries, 1);
        assert_eq!(
            j.resolve("x", None, &env_with(&[])).unwrap().kind,
            ApiKind::Anthropic
        );

        let e = ProviderConfig::from_toml("timeout = 3").unwrap_err();
        assert!(e.to_string().contains("timeout"), "{e}");
        let e = ProviderConfig::from_toml("concurrency = 0").unwrap_err();
        assert!(e.to_string().contains("concurrency"), "{e}");
        let e = ProviderConfig::from_toml("thinking_budget = 10")
            .unwrap()
            .resolve("ollama", None, &env_with(&[]))
            .unwrap_err();
        assert!(e.to_string().contains("1024"), "{e}");
    }
}
