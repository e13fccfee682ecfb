//! A proposal's tools answered in batches (`kevo tool`): the model's turns
//! happen elsewhere between them (an agent on a machine that cannot reach
//! the GPU host, whose calls travel in a mailbox), so the gate's state
//! travels as data, and every batch passes the same gate one conversation
//! would: the same budget, refusals, repeats and sizes.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::conversation::Refusals;
use super::lines::serve;
use super::{Gate, ToolBudget, ToolHost, Transcript, TranscriptTurn};

/// What a proposal's tool calls have come to so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ledger {
    /// One turn per batch, with its calls and what they returned.
    pub transcript: Transcript,
    counts: Refusals,
    /// Why the proposal's tools ended (a loop, calls past the budget):
    /// later calls are refused with it, and the answer then recorded is a
    /// failed proposal, as the conversation would have been.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
}

/// The reply to one request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineReply {
    pub ok: bool,
    pub text: String,
}

/// Answer `lines` (`check kernel.cu`, `time kernel.cu 1M`, ...), files
/// read inside `dir`, as one turn of the proposal `ledger` records.
pub async fn answer_lines(
    host: &dyn ToolHost,
    budget: &ToolBudget,
    ledger: &mut Ledger,
    dir: &Path,
    lines: &[String],
) -> Vec<LineReply> {
    let transcript = std::mem::take(&mut ledger.transcript);
    let mut gate = Gate::resume(host, budget, transcript, ledger.counts);
    let before: usize = gate.transcript.turns.iter().map(|t| t.calls.len()).sum();
    gate.transcript.turns.push(TranscriptTurn::default());
    // The model's turns happen elsewhere: their tokens are not seen here.
    gate.transcript.usage_unknown = true;
    let mut replies = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(why) = &ledger.ended {
            replies.push(LineReply {
                ok: false,
                text: format!("this proposal's tools have ended ({why}); nothing more runs"),
            });
            continue;
        }
        if line.split_whitespace().next() == Some("submit") {
            replies.push(LineReply {
                ok: false,
                text: "`submit` is no tool call here: your answer is the kernel you hand in".into(),
            });
            continue;
        }
        let n = (before + i + 1) as u32;
        let (ok, text, end) = serve(&mut gate, dir, line, n, &mut None).await;
        if let Some(why) = end {
            gate.transcript.ended.clone_from(&why);
            ledger.ended = Some(why);
        }
        replies.push(LineReply { ok, text });
    }
    ledger.transcript = gate.transcript;
    ledger.counts = gate.counts;
    replies
}
