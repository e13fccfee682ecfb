//! Run configuration files: every setting of a run in one TOML file.
//!
//! Settings come in layers, each a partial [`RunConfig`]: kevo's defaults,
//! then a stored run's settings (`--config-from RUN`), then a file
//! (`--config FILE`), then the command line's flags. A later layer wins
//! key by key; a later layer that names another strategy replaces the
//! whole `[strategy]` table, since the settings of one strategy mean
//! nothing to another. Every layer is checked on its own first, so a
//! mistake is reported where it was made: a file's line and key, or the
//! flag.
//!
//! Relative paths in a file are relative to the file's directory, as a
//! file that names `seed.cu` beside it means; on the command line they are
//! relative to the working directory.

mod check;
mod convert;
mod flags;
mod layer;
mod sections;

pub use flags::{StrategyFlags, settings_args, settings_from_matches, settings_reference};
pub use layer::{ConfigError, ConfigLayer, Origin, merge};
pub(crate) use layer::{key_line, key_parts_line, line_at, overlay};
pub use sections::{
    BudgetSection, Ceilings, DeviceSection, EditModeName, LimitsSection, LlmSection,
    PromotionSection, PromptSection, RunConfig, SandboxSection, TimingSection, TuneSection,
};

/// The default `timing.target_spread`: timed runs repeat until
/// (q3 - q1) / median is at most 1 % ...
pub const DEFAULT_TARGET_SPREAD: f64 = 0.01;
/// ... or 50 runs were timed.
pub const DEFAULT_MAX_TIMED_RUNS: usize = 50;

#[cfg(test)]
mod tests;
