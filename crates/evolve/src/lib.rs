//! The kevo search loop: evaluate the seed; each iteration ask the
//! strategy for a parent and context (elites, inspirations, hints), build
//! the prompt from them, the previous attempt and the history, ask the
//! proposer, extract candidates, evaluate them at the in-distribution
//! sizes, place them by their descriptors, and let the strategy decide
//! what to keep ((1+1), MAP-Elites or islands; see kevo-strategy). Every step is stored in one
//! transaction, so a run killed at any moment resumes from its last
//! completed step without evaluating a candidate twice. At the end the
//! incumbent and the seed are evaluated once at the held-out size, in the
//! same session; that result never reaches the proposer.

/// The git commit this kevo was built from (12 hex digits), or "unknown".
pub const KEVO_COMMIT: &str = env!("KEVO_COMMIT");

/// `0.1.0 (commit 0123456789ab)`: `kevo --version`, and stored with every
/// run.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("KEVO_COMMIT"),
    ")"
);

pub mod config;
mod options;
mod remeasure;
mod session;
pub mod sweep;
pub mod tuning;
pub mod verdict;

pub use config::{ConfigError, ConfigLayer, RunConfig};
pub use options::{
    DEFAULT_FINAL_REMEASURE, DEFAULT_META_EVERY, DEFAULT_TUNE_BEST_OF,
    DEFAULT_VALIDATE_MAX_SLOWDOWN, EvolveOptions, MetaPromptOptions, NatsOptions, PromptOptions,
    TuneOptions, ValidationOptions,
};
pub use remeasure::{
    Confirmation, Confirmed, FinalEntry, FinalPick, Interleaved, RemeasureSpend, RoundResult,
    SizeTime, interleave, median_interval, pick_and_confirm,
};
pub use session::{
    ArmStat, Asked, Deferred, Environment, Event, EvolveError, HeldOutSummary, InFlightCalls,
    META_PURPOSE, Next, Observer, Summary, Told, ToolRequest, ValidationState, answer_tools,
    arm_stats, ask, create, defer, device_selectors, finish, interrupt, is_abandoned, one_model,
    resume, runs_with_deferred, start, stored_ensemble, stored_options, stored_prompt_archive,
    stored_strategy, tell, tell_deferred,
};
pub use verdict::HeldOutVerdict;
