//! `kevo tool`: the tools of an external run's pending proposal, for an
//! agent whose turns happen away from the GPU host (`--llm external` with
//! `--agent-tools`). Its calls arrive in batches (a mailbox carried to the
//! host with the workspace); each batch passes the gate one conversation
//! would (budget, refusals, repeats, the sizes offered: never the held-out
//! or validation sizes), on a tools' worker with inputs of its own, and
//! what it came to is kept beside the proposal's prompt until the answer
//! is told, when it is stored with the answer's call record.

use std::path::PathBuf;
use std::sync::Arc;

use kevo_proposer::tools::{Ledger, LineReply, answer_line};
use kevo_store::{RunId, StoreError};

use super::asktell::{Host, open_external, pending_proposal};
use super::base::{Environment, Session};
use super::error::EvolveError;
use super::tool_host::ProposalTools;

/// One tool call as an agent wrote it: `check kernel.cu`, files named in
/// it read inside `dir`.
#[derive(Debug, Clone)]
pub struct ToolRequest {
    pub proposal: i64,
    pub line: String,
    pub dir: PathBuf,
}

/// Answer `requests` of run `run`'s pending proposals, in order, each as
/// one turn of its proposal's conversation. A request for a
/// proposal that takes no calls (answered, its answer kept, unknown) is
/// answered with why, and the others go on; a run that cannot be opened
/// is the error.
pub async fn answer_tools(
    run: &str,
    requests: &[ToolRequest],
    env: &Environment,
) -> Result<Vec<LineReply>, EvolveError> {
    let run_id = RunId(run.to_string());
    let mut refused: Vec<Option<String>> = Vec::new();
    for r in requests {
        let why = match pending_proposal(env, &run_id, r.proposal).await {
            Ok(_) => None,
            Err(e @ EvolveError::RunFinished { .. }) => return Err(e),
            Err(e) => Some(e.to_string()),
        };
        refused.push(why);
    }
    let open: Vec<ToolRequest> = requests
        .iter()
        .zip(&refused)
        .filter(|(_, why)| why.is_none())
        .map(|(r, _)| r.clone())
        .collect();
    let mut answered = Vec::new();
    if !open.is_empty() {
        let mut session = open_external(run, env, Host::Device).await?;
        let result = session.answer_tools(&open).await;
        session.wait().await?;
        answered = result?;
    }
    let mut answered = answered.into_iter();
    Ok(refused
        .into_iter()
        .map(|why| match why {
            Some(text) => LineReply { ok: false, text },
            None => answered.next().expect("one reply per open request"),
        })
        .collect())
}

impl Session<'_> {
    async fn answer_tools(
        &mut self,
        requests: &[ToolRequest],
    ) -> Result<Vec<LineReply>, EvolveError> {
        if self.tools.is_none() {
            return Err(EvolveError::AgentTools(format!(
                "run {} was created without --agent-tools: it offers no tools",
                self.run.0
            )));
        }
        // Each request is one call of the agent's, so one turn; a run of
        // requests for one proposal shares its tools and its ledger.
        let mut replies = Vec::with_capacity(requests.len());
        let mut open: Option<(i64, Arc<ProposalTools>, Ledger)> = None;
        for r in requests {
            if open.as_ref().map(|o| o.0) != Some(r.proposal) {
                if let Some((id, _, ledger)) = open.take() {
                    self.write_tool_ledger(id, &ledger)?;
                }
                let tools = self.tools_of(r.proposal).await?;
                open = Some((r.proposal, tools, self.tool_ledger(r.proposal)?));
            }
            let (_, tools, ledger) = open.as_mut().expect("opened above");
            let budget = &tools.bench.budget;
            replies.push(answer_line(&**tools, budget, ledger, &r.dir, &r.line).await);
        }
        if let Some((id, _, ledger)) = open {
            self.write_tool_ledger(id, &ledger)?;
        }
        Ok(replies)
    }

    /// The tools of pending proposal `id`: its parent, the incumbent and
    /// the elites its prompt showed.
    async fn tools_of(&mut self, id: i64) -> Result<Arc<ProposalTools>, EvolveError> {
        let stored = self
            .env
            .store
            .proposal(&self.run, kevo_store::ProposalId(id))
            .await?;
        let selection = self.selection_of(&stored)?;
        let context = self.prompt_context(&selection).await?;
        Ok(self.proposal_tools(&context).expect("the run offers tools"))
    }

    fn write_tool_ledger(&self, id: i64, ledger: &Ledger) -> Result<(), EvolveError> {
        let json = serde_json::to_vec_pretty(ledger).map_err(|source| EvolveError::Serialize {
            what: "a tool ledger",
            source,
        })?;
        self.dir.write_tool_ledger(id, &json)?;
        Ok(())
    }

    /// What proposal `id`'s tool calls have come to (empty before its
    /// first).
    pub(super) fn tool_ledger(&self, id: i64) -> Result<Ledger, EvolveError> {
        match self.dir.tool_ledger(id)? {
            None => Ok(Ledger::default()),
            Some(text) => serde_json::from_str(&text).map_err(|e| {
                EvolveError::from(StoreError::Corrupt {
                    location: format!("the tool ledger of proposal {id} of run {}", self.run.0),
                    message: e.to_string(),
                })
            }),
        }
    }
}

/// What an external run's prompt says of its tools (`--agent-tools`).
pub(super) fn guidance(run: &str, bench: &super::tool_host::ToolBench) -> String {
    let b = &bench.budget;
    format!(
        "\n\nYou have tools before you answer. `kevo tool {run} ID REQUEST` runs one call for \
proposal ID (this prompt's), files named in REQUEST read from the directory you call it in:\n\
- `compile FILE`: the compiler's diagnostics, or registers, spills and occupancy\n\
- `check FILE`: correctness at the check sizes, with the failing size and error\n\
- `time FILE [SIZE...]`: median times beside the incumbent's, measured in the same call\n\
- `profile FILE SIZE`: the profiler's summary (CUDA, where Nsight Compute is installed)\n\
- `show parent|incumbent|elite N`: a stored kernel and its times\n\
Sizes you may name: {}. A proposal's calls share a budget of {} calls and {:.0} worker \
seconds. Your answer is the kernel you hand in.",
        bench.size_labels().join(", "),
        b.max_calls,
        b.max_device_s
    )
}
