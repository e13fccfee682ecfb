//! The one error type of every provider. A candidate that fails to compile
//! is data (an `Outcome`); a provider that fails to answer is an `Err` of
//! this type, classified so the retry loop knows what is worth repeating.

use std::time::Duration;

use crate::spec::SpecError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A configuration problem found before any request was sent.
    #[error("configuration: {0}")]
    Config(String),
    /// The API key is needed and neither the environment nor the config
    /// file has it. Names the variable, never a value.
    #[error(
        "{provider}: no API key: set the environment variable {env} (or `api_key` under [endpoints.{provider}] in the config file)"
    )]
    MissingKey { provider: String, env: String },
    /// The server answered with a non-success status. `body` is trimmed to
    /// 1,000 characters and scrubbed of the key.
    #[error("{provider}: HTTP {status}: {body}")]
    Http {
        provider: String,
        status: u16,
        body: String,
        /// What `Retry-After` (or `retry-after-ms`) asked for, if anything.
        retry_after: Option<Duration>,
    },
    /// No answer within the time limit (a request or a command).
    #[error("{provider}: no response within {:.1} s", after.as_secs_f64())]
    Timeout { provider: String, after: Duration },
    /// Connecting failed, or the connection broke before the whole response
    /// arrived (a truncated body lands here).
    #[error("{provider}: connection failed: {message}")]
    Connection { provider: String, message: String },
    /// A complete response that is not what the API promises: malformed
    /// JSON, no choices, no content blocks.
    #[error("{provider}: invalid response: {message} (body starts: {body})")]
    InvalidResponse {
        provider: String,
        message: String,
        body: String,
    },
    /// The external command exited unsuccessfully.
    #[error("command `{command}` {status}; stderr ends with:\n{stderr_tail}")]
    Command {
        command: String,
        status: String,
        stderr_tail: String,
    },
    /// The external command could not be started or talked to.
    #[error("command `{command}`: {message}")]
    CommandIo { command: String, message: String },
    #[error("replay file {path}: {message}")]
    Replay { path: String, message: String },
    #[error(
        "replay file {path} is exhausted: all {served} recorded responses were served and another was requested"
    )]
    ReplayExhausted { path: String, served: usize },
    #[error(
        "replay file {path} has no response left for prompt key {key} ({recorded} recorded for it; {keys} distinct keys in the file)"
    )]
    ReplayMissingKey {
        path: String,
        key: String,
        recorded: usize,
        keys: usize,
    },
    #[error("recording to {path}: {message}")]
    Record { path: String, message: String },
    /// The answer was larger than the configured cap; it was not read on.
    #[error(
        "{provider}: response larger than {limit} bytes (max_response_bytes); not read further"
    )]
    TooLarge { provider: String, limit: u64 },
    /// The server asked for a wait longer than kevo waits
    /// (`max_retry_after_s`).
    #[error(
        "{provider}: the server asked to wait {:.0} s before retrying, more than the {:.0} s kevo waits (max_retry_after_s); not retried: {last}",
        asked.as_secs_f64(), limit.as_secs_f64()
    )]
    RetryAfterRefused {
        provider: String,
        asked: Duration,
        limit: Duration,
        last: Box<ProviderError>,
    },
    /// The run's cost budget is spent, or the next call could overshoot
    /// it; no further request is sent.
    #[error("cost budget of ${budget:.4} reached (spent ${spent:.4}{})", next.map(|n| format!("; the next call could cost up to ${n:.4}")).unwrap_or_default())]
    BudgetExceeded {
        budget: f64,
        spent: f64,
        /// The worst-case cost of the call that was not sent.
        next: Option<f64>,
    },
    /// A cost budget is set but cannot be enforced: a call's cost is
    /// unknown (no price for the model, or no usable token counts).
    #[error(
        "cost budget of ${budget:.4} cannot be enforced: {reason}; stopping (pass --accept-unknown-cost to run on without a cost figure)"
    )]
    BudgetUnenforceable { budget: f64, reason: String },
    /// A failure that repeating would not fix (a redirect loop, a refused
    /// TLS certificate).
    #[error("{provider}: {message}")]
    Permanent { provider: String, message: String },
    /// The endpoint's host name does not resolve: a typo, or a machine
    /// without a route to the API. Neither a retry nor a later call can
    /// succeed.
    #[error("{provider}: the host does not resolve: {message}")]
    Unresolved { provider: String, message: String },
    /// A tool conversation ended without a kernel: the model never
    /// submitted, spent its tool budget, looped on one call, sent
    /// malformed calls or asked for sizes it is not offered. The proposal
    /// fails with this reason; the run goes on.
    #[error("the tool conversation ended without a kernel after {turns} turns: {reason}")]
    ToolLoop { turns: u32, reason: String },
    /// Every attempt failed; `last` is the final error.
    #[error("gave up after {attempts} attempts: {last}")]
    GaveUp {
        attempts: u32,
        last: Box<ProviderError>,
    },
}

impl ProviderError {
    /// Worth another attempt: 408, 409, 429 and every 5xx (Anthropic's 529
    /// "overloaded" included), timeouts and broken connections. Other 4xx
    /// mean the request itself is wrong and would fail again.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => {
                matches!(status, 408 | 409 | 429) || (500..600).contains(status)
            }
            ProviderError::Timeout { .. } | ProviderError::Connection { .. } => true,
            _ => false,
        }
    }

    /// No later call can succeed either: the key is missing or refused
    /// (401, 403), the endpoint or model does not exist (404), the host
    /// does not resolve, the configuration is wrong. (A request a batch
    /// failed is `Permanent` for the retry loop, not for the run.) A run whose every
    /// call of an iteration fails this way stops as failed instead of
    /// spending its iterations on the same error.
    pub fn is_permanent(&self) -> bool {
        match self.root() {
            ProviderError::Http { status, .. } => matches!(status, 401 | 403 | 404),
            ProviderError::Spec(_)
            | ProviderError::Config(_)
            | ProviderError::MissingKey { .. }
            | ProviderError::Unresolved { .. } => true,
            _ => false,
        }
    }

    /// A budget stop: the run should end rather than ask again.
    pub fn is_budget_stop(&self) -> bool {
        matches!(
            self.root(),
            ProviderError::BudgetExceeded { .. } | ProviderError::BudgetUnenforceable { .. }
        )
    }

    /// The wait the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The same error with `f` applied to every text it carries (for
    /// redaction: nothing a provider returns escapes it).
    pub fn map_text(self, f: &dyn Fn(&str) -> String) -> ProviderError {
        use ProviderError as E;
        match self {
            E::Spec(s) => E::Spec(s),
            E::Config(m) => E::Config(f(&m)),
            E::MissingKey { provider, env } => E::MissingKey {
                provider: f(&provider),
                env,
            },
            E::Http {
                provider,
                status,
                body,
                retry_after,
            } => E::Http {
                provider: f(&provider),
                status,
                body: f(&body),
                retry_after,
            },
            E::Timeout { provider, after } => E::Timeout {
                provider: f(&provider),
                after,
            },
            E::Connection { provider, message } => E::Connection {
                provider: f(&provider),
                message: f(&message),
            },
            E::InvalidResponse {
                provider,
                message,
                body,
            } => E::InvalidResponse {
                provider: f(&provider),
                message: f(&message),
                body: f(&body),
            },
            E::Command {
                command,
                status,
                stderr_tail,
            } => E::Command {
                command: f(&command),
                status,
                stderr_tail: f(&stderr_tail),
            },
            E::CommandIo { command, message } => E::CommandIo {
                command: f(&command),
                message: f(&message),
            },
            E::Replay { path, message } => E::Replay {
                path,
                message: f(&message),
            },
            E::Record { path, message } => E::Record {
                path,
                message: f(&message),
            },
            E::TooLarge { provider, limit } => E::TooLarge {
                provider: f(&provider),
                limit,
            },
            E::RetryAfterRefused {
                provider,
                asked,
                limit,
                last,
            } => E::RetryAfterRefused {
                provider: f(&provider),
                asked,
                limit,
                last: Box::new(last.map_text(f)),
            },
            E::Permanent { provider, message } => E::Permanent {
                provider: f(&provider),
                message: f(&message),
            },
            E::Unresolved { provider, message } => E::Unresolved {
                provider: f(&provider),
                message: f(&message),
            },
            E::ToolLoop { turns, reason } => E::ToolLoop {
                turns,
                reason: f(&reason),
            },
            E::GaveUp { attempts, last } => E::GaveUp {
                attempts,
                last: Box::new(last.map_text(f)),
            },
            other @ (E::ReplayExhausted { .. }
            | E::ReplayMissingKey { .. }
            | E::BudgetExceeded { .. }) => other,
            E::BudgetUnenforceable { budget, reason } => E::BudgetUnenforceable {
                budget,
                reason: f(&reason),
            },
        }
    }

    /// The error behind retries, for callers that want the root cause.
    pub fn root(&self) -> &ProviderError {
        match self {
            ProviderError::GaveUp { last, .. } | ProviderError::RetryAfterRefused { last, .. } => {
                last.root()
            }
            other => other,
        }
    }
}

/// Replace every occurrence of `secret` in `text` with `[redacted]`: error
/// bodies sometimes echo the key back.
pub(crate) fn scrub(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(s) if s.len() >= 4 && text.contains(s) => text.replace(s, "[redacted]"),
        _ => text.to_string(),
    }
}

/// The first `max` characters of `text`, with an ellipsis when cut.
pub(crate) fn snippet(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16) -> ProviderError {
        ProviderError::Http {
            provider: "p".into(),
            status,
            body: String::new(),
            retry_after: None,
        }
    }

    #[test]
    fn retry_classification_follows_the_status() {
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert!(http(s).is_retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!http(s).is_retryable(), "{s}");
        }
        assert!(
            ProviderError::Timeout {
                provider: "p".into(),
                after: Duration::from_secs(1)
            }
            .is_retryable()
        );
        assert!(
            !ProviderError::InvalidResponse {
                provider: "p".into(),
                message: "m".into(),
                body: "b".into()
            }
            .is_retryable()
        );
    }

    #[test]
    fn a_refused_key_a_missing_model_and_an_unresolved_host_are_permanent() {
        for s in [401, 403, 404] {
            assert!(http(s).is_permanent(), "{s}");
        }
        for s in [400, 408, 429, 500, 503] {
            assert!(!http(s).is_permanent(), "{s}");
        }
        let unresolved = ProviderError::Unresolved {
            provider: "p".into(),
            message: "dns error".into(),
        };
        assert!(unresolved.is_permanent() && !unresolved.is_retryable());
        // One request of a batch that failed: not repeated, but the next
        // batch may be answered.
        let in_a_batch = ProviderError::Permanent {
            provider: "p".into(),
            message: "server overloaded".into(),
        };
        assert!(!in_a_batch.is_permanent());
        // Behind retries, the last error decides.
        let gave_up = ProviderError::GaveUp {
            attempts: 3,
            last: Box::new(http(403)),
        };
        assert!(gave_up.is_permanent());
        let gave_up = ProviderError::GaveUp {
            attempts: 3,
            last: Box::new(http(503)),
        };
        assert!(!gave_up.is_permanent());
        assert!(
            !ProviderError::Timeout {
                provider: "p".into(),
                after: Duration::from_secs(1)
            }
            .is_permanent()
        );
    }

    #[test]
    fn scrub_and_snippet() {
        assert_eq!(
            scrub("bad key sk-123456", Some("sk-123456")),
            "bad key [redacted]"
        );
        assert_eq!(scrub("abc", None), "abc");
        assert_eq!(snippet("héllo", 2), "hé…");
        assert_eq!(snippet("hi", 5), "hi");
    }
}
