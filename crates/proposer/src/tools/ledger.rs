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

/// Answer `line` (`check kernel.cu`, `time kernel.cu 1M`, ...), files read
/// inside `dir`, as the next turn of the proposal `ledger` records: one
/// call of an agent's `kevo-tool`.
pub async fn answer_line(
    host: &dyn ToolHost,
    budget: &ToolBudget,
    ledger: &mut Ledger,
    dir: &Path,
    line: &str,
) -> LineReply {
    if let Some(why) = &ledger.ended {
        return LineReply {
            ok: false,
            text: format!("this proposal's tools have ended ({why}); nothing more runs"),
        };
    }
    if line.split_whitespace().next() == Some("submit") {
        return LineReply {
            ok: false,
            text: "`submit` is no tool call here: your answer is the kernel you hand in".into(),
        };
    }
    let transcript = std::mem::take(&mut ledger.transcript);
    let mut gate = Gate::resume(host, budget, transcript, ledger.counts);
    gate.hand_in = "hand in your kernel now";
    let n = gate
        .transcript
        .turns
        .iter()
        .map(|t| t.calls.len())
        .sum::<usize>() as u32
        + 1;
    gate.transcript.turns.push(TranscriptTurn::default());
    // The model's turns happen elsewhere: their tokens are not seen here.
    gate.transcript.usage_unknown = true;
    let (ok, text, end) = serve(&mut gate, dir, line, n, &mut None).await;
    if let Some(why) = end {
        gate.transcript.ended.clone_from(&why);
        ledger.ended = Some(why);
    }
    ledger.transcript = gate.transcript;
    ledger.counts = gate.counts;
    LineReply { ok, text }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::providers::BoxFuture;
    use crate::tools::{HostCall, ToolReply};

    /// A host that counts the calls it runs.
    #[derive(Default)]
    struct Counting(AtomicU32);

    impl ToolHost for Counting {
        fn sizes(&self) -> Vec<String> {
            vec!["1M".into()]
        }
        fn elites(&self) -> usize {
            0
        }
        fn can_profile(&self) -> bool {
            false
        }
        fn parent_source(&self) -> String {
            String::new()
        }
        fn kernel_file(&self) -> String {
            "kernel.cl".into()
        }
        fn run<'a>(&'a self, _: &'a HostCall, _: std::time::Duration) -> BoxFuture<'a, ToolReply> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async {
                ToolReply {
                    text: "correct".into(),
                    failed: false,
                    device_s: 1.0,
                }
            })
        }
    }

    /// A batch after the ledger went through JSON (as between rounds).
    async fn batch(host: &Counting, ledger: Ledger, dir: &Path, line: &str) -> (Ledger, LineReply) {
        let mut ledger: Ledger =
            serde_json::from_str(&serde_json::to_string(&ledger).unwrap()).unwrap();
        let budget = ToolBudget::default();
        let reply = answer_line(host, &budget, &mut ledger, dir, line).await;
        (ledger, reply)
    }

    #[tokio::test]
    async fn a_repeat_in_a_later_batch_is_answered_from_the_first_and_a_third_ends_the_tools() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("k.cl"), "__kernel void k() {}").unwrap();
        let host = Counting::default();
        let (ledger, first) = batch(&host, Ledger::default(), dir.path(), "check k.cl").await;
        assert!(first.ok);
        let (ledger, second) = batch(&host, ledger, dir.path(), "check k.cl").await;
        assert!(
            second.text.contains("the same call as before"),
            "{}",
            second.text
        );
        assert_eq!(host.0.load(Ordering::SeqCst), 1);
        let (ledger, third) = batch(&host, ledger, dir.path(), "check k.cl").await;
        assert!(
            !third.ok && third.text.contains("3 times"),
            "{}",
            third.text
        );
        let (ledger, after) = batch(&host, ledger, dir.path(), "time k.cl").await;
        assert!(
            !after.ok && after.text.contains("have ended"),
            "{}",
            after.text
        );
        assert_eq!(host.0.load(Ordering::SeqCst), 1);
        // The refused fourth call ran nothing and took no turn.
        assert_eq!(ledger.transcript.turns.len(), 3);
        assert_eq!(
            (ledger.transcript.calls, ledger.transcript.device_s),
            (1, 1.0)
        );
    }

    #[tokio::test]
    async fn submit_is_no_tool_call_between_turns() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("k.cl"), "__kernel void k() {}").unwrap();
        let host = Counting::default();
        let (ledger, reply) = batch(&host, Ledger::default(), dir.path(), "submit k.cl").await;
        assert!(
            !reply.ok && reply.text.contains("no tool call here"),
            "{}",
            reply.text
        );
        assert!(ledger.ended.is_none());
    }
}
