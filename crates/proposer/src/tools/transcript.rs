//! The record of one tool conversation: each turn's text and usage, each
//! call with what it returned, and the totals charged to the run.

use serde::{Deserialize, Serialize};

use crate::types::Usage;

/// A proposal's turns and tool calls, kept with its call record (and
/// exported as a multi-turn trajectory).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Transcript {
    pub turns: Vec<TranscriptTurn>,
    /// Tool calls the host ran (refused ones are in the turns, not here).
    pub calls: u32,
    /// Worker seconds the calls took.
    pub device_s: f64,
    /// Tokens across every turn.
    pub usage: Usage,
    /// Some turn reported no token counts: `usage` is not the whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage_unknown: bool,
    /// How the conversation ended: "submitted", "answered" (a final
    /// answer without `submit`), or why it failed.
    pub ended: String,
}

/// One answer of the model and the calls it made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TranscriptTurn {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    pub usage: Usage,
    pub latency_s: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<TranscriptCall>,
}

/// One tool call and its result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TranscriptCall {
    pub name: String,
    pub arguments: String,
    pub result: String,
    pub is_error: bool,
    /// Worker seconds, 0 for a refused call.
    pub device_s: f64,
    /// Why the call was not run (malformed, a size not offered, the
    /// budget spent, a repeat), when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl Transcript {
    /// One line for logs and `kevo show`.
    pub fn summary(&self) -> String {
        let refused: usize = self
            .turns
            .iter()
            .flat_map(|t| &t.calls)
            .filter(|c| c.refused.is_some())
            .count();
        let tokens = if self.usage_unknown {
            "tokens not reported".to_string()
        } else {
            format!(
                "{} tokens",
                self.usage.input_tokens + self.usage.output_tokens
            )
        };
        format!(
            "{}, {} ({refused} refused), {:.1} s on the worker, {tokens}; {}",
            counted(self.turns.len(), "turn"),
            counted(self.calls as usize, "tool call"),
            self.device_s,
            self.ended
        )
    }
}

/// `n thing`, or `n things`.
fn counted(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}
