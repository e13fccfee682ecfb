//! The LLM side of kevo: everything between "the strategy wants a new
//! candidate" and "here is kernel source to evaluate".
//!
//! - [`providers`]: one async [`Provider`] trait over OpenAI-compatible
//!   servers, the Anthropic Messages API, an external command and recorded
//!   responses, with timeouts, retries that honour `Retry-After`, a
//!   concurrency limit, cost from a price table and shared [`Accounting`].
//!   Model spec strings ([`ModelSpec`]) pick and combine them.
//! - [`prompt`]: minijinja templates shipped with kevo (overridable from a
//!   directory) that turn a task, the device, the previous candidate, the
//!   incumbent and the history into a [`ChatRequest`]. Held-out sizes never
//!   reach a prompt.
//! - [`parse`]: turns a response back into source, from a fenced block or
//!   SEARCH/REPLACE edits, enforcing `EVOLVE-BLOCK` regions; failures are
//!   typed results, never silently dropped.
//! - [`sanitize`]: every string an endpoint supplies (model name, error
//!   text, finish reason, reasoning) is stripped of control characters
//!   before it is stored or printed.

pub mod accounting;
pub mod bandit;
pub mod config;
pub mod error;
pub mod notice;
pub mod parse;
pub mod pricing;
pub mod probe;
pub mod prompt;
pub mod providers;
pub mod redact;
pub mod retry;
pub mod sanitize;
pub mod secret;
pub mod spec;
pub mod tools;
pub mod types;

pub use accounting::{Accounting, ModelTotals, Totals};
pub use config::{ApiKind, CmdFormat, EndpointConfig, ProviderConfig};
pub use error::ProviderError;
pub use parse::{
    EditFailure, EditFailureReason, ExtractOptions, Extraction, FenceRule, Method, extract,
};
pub use pricing::{Price, PriceTable};
pub use probe::{ProbeReport, probe, probe_all};
pub use prompt::{
    AnalystContext, Attempt, DeviceBrief, EditMode, FAILS_UNSEEN, HistoryEntry, PromptBuilder,
    PromptError, ReferenceKernel, SearchBrief, StagnationParams, StepOutcome, Templates,
    UserContext, attempt_note, evaluated_entry, history_line, is_stagnating, recommendation,
    step_outcome,
};
pub use providers::{
    BATCH_PRICE_FACTOR, BatchProvider, BatchState, BoxFuture, EnsembleState, Exchange, ModelChoice,
    Provider, Recording, ReplayProvider, build, build_batch, build_with_env,
};
pub use redact::Redactor;
pub use secret::Secret;
pub use spec::{ModelSpec, ReplayMode, SpecError, SpecKind, parse_specs};
pub use types::{ChatRequest, Completion, ToolCall, ToolResult, ToolSpec, Turn, Usage};
