//! Tool use inside one proposal: the model may compile, check, time,
//! profile and look at kernels before it submits one.
//!
//! - [`ToolHost`]: what the tools run against (the run's task on a worker
//!   of its own); kevo-evolve implements it, so this crate needs no
//!   device.
//! - [`specs`]: the tools as each API is offered them (name, description,
//!   JSON Schema), sizes enumerated so a model cannot name another.
//! - [`converse`]: the conversation, with its budgets and the fault
//!   outcomes (never submits, loops on one call, malformed calls, sizes it
//!   is not offered), recorded turn by turn as a [`Transcript`].

mod call;
mod conversation;
mod ledger;
pub(crate) mod lines;
mod specs;
mod transcript;

pub use call::{HostCall, Shown};
pub use conversation::converse;
pub(crate) use conversation::{Gate, Step, fenced};
pub use ledger::{Ledger, LineReply, answer_line};
pub use specs::{ToolName, specs};
pub use transcript::{Transcript, TranscriptCall, TranscriptTurn};

use serde::{Deserialize, Serialize};

use crate::providers::BoxFuture;

/// What the tools of one proposal run against.
pub trait ToolHost: Send + Sync {
    /// The size labels `time` and `profile` may name: the smoke sizes,
    /// and the run's own sizes where the settings allow. Never a
    /// held-out or validation size.
    fn sizes(&self) -> Vec<String>;

    /// How many elites `show` can show.
    fn elites(&self) -> usize;

    /// Whether `profile` can run here (a profiler exists for the device).
    fn can_profile(&self) -> bool;

    /// The source a proposal starts from (what an agent finds in its
    /// kernel file).
    fn parent_source(&self) -> String;

    /// The kernel file's name in an agent's directory, with the dialect's
    /// extension (`kernel.cl`, `kernel.cu`, `kernel.py`).
    fn kernel_file(&self) -> String;

    /// Run one call within `limit` of worker time (what is left of the
    /// budget). A failing kernel is a reply, never an error.
    fn run<'a>(
        &'a self,
        call: &'a HostCall,
        limit: std::time::Duration,
    ) -> BoxFuture<'a, ToolReply>;
}

/// What a tool answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    pub text: String,
    /// The call failed (did not compile, wrong result): the model is told
    /// so as an error result.
    pub failed: bool,
    /// Worker seconds the call took (not counting a wait for the worker),
    /// charged to the budget.
    pub device_s: f64,
}

/// Per-proposal limits of a tool conversation (`[agent_tools]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolBudget {
    /// The tools offered (`submit` always is).
    #[serde(default = "ToolName::all")]
    pub tools: Vec<ToolName>,
    /// Tool calls per proposal (8: two compile-check-time rounds and a
    /// look at the incumbent).
    #[serde(default = "default_calls")]
    pub max_calls: u32,
    /// Worker seconds the calls may take in all, per proposal.
    #[serde(default = "default_device_s")]
    pub max_device_s: f64,
    /// Input plus output tokens across the proposal's turns. Every turn
    /// resends the conversation, so tokens grow with the square of turns.
    #[serde(default = "default_tokens")]
    pub max_tokens: u64,
    /// `time` and `profile` may name the run's own sizes, not only the
    /// smoke sizes (costs device time; the held-out size never).
    #[serde(default)]
    pub run_sizes: bool,
}

fn default_calls() -> u32 {
    8
}
fn default_device_s() -> f64 {
    60.0
}
fn default_tokens() -> u64 {
    200_000
}

impl Default for ToolBudget {
    fn default() -> Self {
        ToolBudget {
            tools: ToolName::all(),
            max_calls: default_calls(),
            max_device_s: default_device_s(),
            max_tokens: default_tokens(),
            run_sizes: false,
        }
    }
}

impl ToolBudget {
    /// Turns before the conversation is cut: one per allowed call, plus
    /// the answer and two for refusals to be read.
    pub fn max_turns(&self) -> u32 {
        self.max_calls + 3
    }

    /// Limits that cannot serve a conversation, named.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_calls == 0 {
            return Err("agent_tools.max_calls must be at least 1".into());
        }
        if !(self.max_device_s.is_finite() && self.max_device_s > 0.0) {
            return Err(format!(
                "agent_tools.max_device_s must be a positive number of seconds, not {}",
                self.max_device_s
            ));
        }
        if self.max_tokens < 1000 {
            return Err(format!(
                "agent_tools.max_tokens of {} cannot hold one prompt; give at least 1000",
                self.max_tokens
            ));
        }
        Ok(())
    }
}
