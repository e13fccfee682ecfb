//! A search run: evaluate the seed, then iterate (propose, extract,
//! evaluate, judge, record), then finish (final pick, confirmation,
//! held-out). The layers, bottom up: plain values and services
//! ([`error`], [`events`], [`calls`], [`summary`], [`state`], [`values`],
//! [`pool`], the evaluation pool); the [`base`] `Session` with its fields
//! and small services; one file per stage ([`seed`], [`propose`],
//! [`judge`], [`record`], [`insight`], [`iterate`], [`finish`]); the
//! drivers on top ([`drivers`]: start, resume, interrupt; [`asktell`]).

mod asktell;
mod base;
mod batched;
mod calls;
mod drivers;
mod error;
mod events;
mod external_tools;
mod extract;
mod finish;
mod insight;
mod iterate;
mod judge;
mod pool;
mod propose;
mod record;
mod seed;
mod state;
mod summary;
mod template;
mod tool_host;
mod values;

pub use asktell::{
    Asked, Deferred, Next, Told, ask, create, defer, finish, runs_with_deferred, tell,
    tell_deferred,
};
pub use base::Environment;
pub use calls::{InFlightCalls, META_PURPOSE, is_abandoned};
pub use drivers::{interrupt, resume, start};
pub use error::EvolveError;
pub use events::{ArmStat, Event, Observer, arm_stats};
pub use external_tools::{ToolRequest, answer_tools};
pub use pool::{device_selectors, one_model};
pub use state::{
    ValidationState, stored_ensemble, stored_options, stored_prompt_archive, stored_strategy,
};
pub use summary::{HeldOutSummary, Summary};
