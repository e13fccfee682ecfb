//! One proposal as a conversation: the model calls tools until it submits
//! a kernel, answers without a call, or a limit ends it.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::call::{Asked, read};
use super::specs::{SUBMIT, specs};
use super::transcript::{Transcript, TranscriptCall, TranscriptTurn};
use super::{ToolBudget, ToolHost, ToolName};
use crate::error::ProviderError;
use crate::providers::Provider;
use crate::types::{ChatRequest, Completion, ToolCall, ToolResult, Turn};

/// Malformed calls a conversation may make before it is ended: models
/// correct a bad call when told, a third one in a proposal is a loop.
const MALFORMED_LIMIT: u32 = 3;
/// Requests for sizes not offered: the first is answered with the offered
/// sizes, the second ends the proposal.
const FORBIDDEN_LIMIT: u32 = 2;
/// The same call (tool and arguments) run this many times ends it; the
/// second is answered from the first without running.
const REPEAT_LIMIT: u32 = 3;
/// Calls refused because the budget is spent before the proposal ends.
const OVER_BUDGET_LIMIT: u32 = 3;

/// What the model is told before its first turn.
const GUIDANCE: &str = "\n\nYou have tools. Before you answer you may compile, check, time \
(against the incumbent, at the offered sizes), profile and look at stored kernels. \
Each call counts against a small budget. When you are done, call `submit` with the \
complete kernel source; that ends the proposal.";

/// Why a repeated call was answered without running.
const REPEATED: &str = "a repeat, answered from the first call";

/// Why a call beside a `submit` in the same turn was not run.
const NOT_RUN: &str = "not run: the kernel was submitted in the same turn";

/// The turn's calls with their positions, its first `submit` moved to the
/// front: a turn that submits ends the proposal, and what it also asked
/// for (a `time` before the `submit`, say) would be run for no reader.
fn submit_first(calls: &[ToolCall]) -> Vec<(usize, &ToolCall)> {
    let mut order: Vec<(usize, &ToolCall)> = calls.iter().enumerate().collect();
    if let Some(i) = order.iter().position(|(_, c)| c.name == SUBMIT) {
        let submit = order.remove(i);
        order.insert(0, submit);
    }
    order
}

/// The conversation's state between turns.
struct Conversation<'a> {
    provider: &'a dyn Provider,
    gate: Gate<'a>,
    /// Every turn's completion, summed into the answer.
    answers: Vec<Completion>,
}

/// What every tool call of a proposal passes: read against the tools and
/// sizes offered, held to the limits, run on the host, and recorded. An
/// API model's conversation and a command-line agent share it.
pub(crate) struct Gate<'a> {
    host: &'a dyn ToolHost,
    budget: &'a ToolBudget,
    sizes: Vec<String>,
    elites: usize,
    /// The tools the model was offered: the budget's, `profile` only
    /// where the host can profile.
    offered: Vec<ToolName>,
    pub(crate) transcript: Transcript,
    pub(crate) counts: Refusals,
    /// How the model hands its kernel in, said when the budget is spent.
    pub(crate) hand_in: &'static str,
    /// Each run call's reply by (tool, arguments), and how often it was
    /// asked for.
    seen: HashMap<(String, String), (u32, String, bool)>,
}

/// Refused calls a proposal has made, by kind: each kind ends it at its
/// limit. Kept in a [`super::Ledger`] between an agent's turns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Refusals {
    malformed: u32,
    forbidden: u32,
    over_budget: u32,
}

/// What one call came to.
pub(crate) enum Step {
    /// Answer the call with this result and go on.
    Result(ToolResult, TranscriptCall),
    /// The kernel was submitted.
    Submitted(String),
    /// The conversation ends without a kernel.
    End(String),
}

/// Run one proposal as a tool conversation. Returns the answer (its text
/// holds the submitted kernel in a fenced block, or is the model's final
/// text) or why it ended without one, and the transcript either way.
/// Every turn goes through `provider`, so budgets, retries and accounting
/// apply to each.
pub async fn converse(
    provider: &dyn Provider,
    host: &dyn ToolHost,
    request: &ChatRequest,
    budget: &ToolBudget,
) -> (Result<Completion, ProviderError>, Transcript) {
    let mut req = request.clone();
    req.tools = specs(budget, host);
    req.user.push_str(GUIDANCE);
    let mut c = Conversation {
        provider,
        gate: Gate::new(host, budget),
        answers: Vec::new(),
    };
    let result = c.run(&mut req).await;
    if let Err(e) = &result {
        c.gate.transcript.ended = e.to_string();
    }
    (result, c.gate.transcript)
}

impl Conversation<'_> {
    async fn run(&mut self, req: &mut ChatRequest) -> Result<Completion, ProviderError> {
        for _ in 0..self.gate.budget.max_turns() {
            let answer = self.provider.complete(req).await?;
            self.gate.transcript.usage.add(&answer.usage);
            self.gate.transcript.usage_unknown |= answer.usage_unknown.is_some();
            self.gate.transcript.turns.push(TranscriptTurn {
                text: answer.text.clone(),
                reasoning: answer.reasoning.clone(),
                usage: answer.usage,
                latency_s: answer.latency.as_secs_f64(),
                calls: Vec::new(),
            });
            let calls = answer.tool_calls.clone();
            let native = answer.native.clone();
            self.answers.push(answer);
            if calls.is_empty() {
                self.gate.transcript.ended = "answered without submit".into();
                return Ok(self.answer(None));
            }
            let mut results = Vec::with_capacity(calls.len());
            let order = submit_first(&calls);
            for (step, &(_, call)) in order.iter().enumerate() {
                match self.gate.step(call).await {
                    Step::Result(result, record) => {
                        self.gate.record(record);
                        results.push(result);
                    }
                    Step::Submitted(source) => {
                        self.gate.record(TranscriptCall {
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                            result: "submitted".into(),
                            ..Default::default()
                        });
                        // Nothing else the turn asked for runs: its
                        // results would reach no one.
                        for (_, other) in &order[step + 1..] {
                            self.gate.record(TranscriptCall {
                                name: other.name.clone(),
                                arguments: other.arguments.clone(),
                                result: NOT_RUN.into(),
                                refused: Some(NOT_RUN.into()),
                                ..Default::default()
                            });
                        }
                        self.gate.transcript.ended = "submitted".into();
                        return Ok(self.answer(Some(&source)));
                    }
                    Step::End(why) => {
                        self.gate.record(TranscriptCall {
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                            result: why.clone(),
                            is_error: true,
                            refused: Some(why.clone()),
                            ..Default::default()
                        });
                        return Err(self.gate.fail(why));
                    }
                }
            }
            let tokens =
                self.gate.transcript.usage.input_tokens + self.gate.transcript.usage.output_tokens;
            if tokens > self.gate.budget.max_tokens {
                return Err(self.gate.fail(format!(
                    "{tokens} tokens were spent across the turns, over the budget of {}, \
                     and no kernel was submitted",
                    self.gate.budget.max_tokens
                )));
            }
            let Some(native) = native else {
                return Err(self.gate.fail(format!(
                    "{} returned tool calls without its message, so the conversation \
                     cannot go on",
                    self.provider.label()
                )));
            };
            req.turns.push(Turn { native, results });
        }
        Err(self.gate.fail(format!(
            "no kernel was submitted within {} turns",
            self.gate.budget.max_turns()
        )))
    }

    /// Every turn's completion as one: the last turn's text (or the
    /// submitted kernel, fenced), usage, cost, latency and attempts summed.
    fn answer(&self, submitted: Option<&str>) -> Completion {
        let mut out = self.answers.last().expect("one turn at least").clone();
        out.tool_calls.clear();
        out.native = None;
        if let Some(source) = submitted {
            out.text = fenced(source);
        }
        let earlier = &self.answers[..self.answers.len() - 1];
        for a in earlier {
            out.usage.add(&a.usage);
            out.latency += a.latency;
            out.attempts += a.attempts;
            out.cost_usd = match (out.cost_usd, a.cost_usd) {
                (Some(x), Some(y)) => Some(x + y),
                _ => None,
            };
            if out.usage_unknown.is_none() {
                out.usage_unknown.clone_from(&a.usage_unknown);
            }
        }
        out
    }
}

impl<'a> Gate<'a> {
    /// The size labels the host offers.
    pub(crate) fn sizes(&self) -> &[String] {
        &self.sizes
    }

    pub(crate) fn new(host: &'a dyn ToolHost, budget: &'a ToolBudget) -> Gate<'a> {
        Gate {
            host,
            budget,
            sizes: host.sizes(),
            elites: host.elites(),
            offered: budget
                .tools
                .iter()
                .copied()
                .filter(|t| *t != ToolName::Profile || host.can_profile())
                .collect(),
            transcript: Transcript::default(),
            counts: Refusals::default(),
            hand_in: "call `submit` with your kernel now",
            seen: HashMap::new(),
        }
    }

    /// The gate as an earlier batch of calls left it: its transcript and
    /// refusals, and the replies of the calls it ran (a repeat is answered
    /// from them, a third one ends the proposal as in one conversation).
    pub(crate) fn resume(
        host: &'a dyn ToolHost,
        budget: &'a ToolBudget,
        transcript: Transcript,
        counts: Refusals,
    ) -> Gate<'a> {
        let mut gate = Gate::new(host, budget);
        for call in transcript.turns.iter().flat_map(|t| &t.calls) {
            let key = (call.name.clone(), normalised(&call.arguments));
            match &call.refused {
                None => {
                    gate.seen
                        .insert(key, (1, call.result.clone(), call.is_error));
                }
                Some(why) if why == REPEATED => {
                    if let Some(seen) = gate.seen.get_mut(&key) {
                        seen.0 += 1;
                    }
                }
                Some(_) => {}
            }
        }
        gate.transcript = transcript;
        gate.counts = counts;
        gate
    }

    pub(crate) fn record(&mut self, mut call: TranscriptCall) {
        cap(&mut call.arguments);
        cap(&mut call.result);
        self.transcript
            .turns
            .last_mut()
            .expect("a call belongs to a turn")
            .calls
            .push(call);
    }

    pub(crate) fn fail(&self, reason: String) -> ProviderError {
        ProviderError::ToolLoop {
            turns: self.transcript.turns.len() as u32,
            reason,
        }
    }

    /// One call: read, checked against the limits, and run on the host.
    pub(crate) async fn step(&mut self, call: &ToolCall) -> Step {
        let refused = |why: String| {
            Step::Result(
                ToolResult {
                    call_id: call.id.clone(),
                    content: why.clone(),
                    is_error: true,
                },
                TranscriptCall {
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    result: why.clone(),
                    is_error: true,
                    device_s: 0.0,
                    refused: Some(why),
                },
            )
        };
        let host_call = match read(call, &self.offered, &self.sizes, self.elites) {
            Asked::Submit(source) => return Step::Submitted(source),
            Asked::Malformed(why) => {
                self.counts.malformed += 1;
                if self.counts.malformed >= MALFORMED_LIMIT {
                    return Step::End(format!("{MALFORMED_LIMIT} malformed tool calls: {why}"));
                }
                return refused(why);
            }
            Asked::Forbidden(why) => {
                self.counts.forbidden += 1;
                if self.counts.forbidden >= FORBIDDEN_LIMIT {
                    return Step::End(format!(
                        "asked {FORBIDDEN_LIMIT} times for sizes it is not offered: {why}"
                    ));
                }
                return refused(why);
            }
            Asked::Host(h) => h,
        };
        if let Some(why) = self.spent() {
            self.counts.over_budget += 1;
            if self.counts.over_budget >= OVER_BUDGET_LIMIT {
                return Step::End(format!(
                    "kept calling tools after the budget was spent ({why})"
                ));
            }
            return refused(format!("{why}: {}", self.hand_in));
        }
        let key = (call.name.clone(), normalised(&call.arguments));
        if let Some((times, text, failed)) = self.seen.get_mut(&key) {
            *times += 1;
            if *times >= REPEAT_LIMIT {
                return Step::End(format!(
                    "called `{}` with the same arguments {REPEAT_LIMIT} times",
                    call.name
                ));
            }
            let content = format!("(the same call as before; its result was:)\n{text}");
            let failed = *failed;
            return Step::Result(
                ToolResult {
                    call_id: call.id.clone(),
                    content: content.clone(),
                    is_error: failed,
                },
                TranscriptCall {
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    result: content,
                    is_error: failed,
                    device_s: 0.0,
                    refused: Some(REPEATED.into()),
                },
            );
        }
        // A call may take what is left of the budget, no more.
        let left = (self.budget.max_device_s - self.transcript.device_s).max(0.0);
        let mut reply = self
            .host
            .run(&host_call, Duration::from_secs_f64(left))
            .await;
        cap(&mut reply.text);
        self.transcript.calls += 1;
        self.transcript.device_s += reply.device_s;
        self.seen.insert(key, (1, reply.text.clone(), reply.failed));
        Step::Result(
            ToolResult {
                call_id: call.id.clone(),
                content: reply.text.clone(),
                is_error: reply.failed,
            },
            TranscriptCall {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                result: reply.text,
                is_error: reply.failed,
                device_s: reply.device_s,
                refused: None,
            },
        )
    }

    /// Why no further call may run, if the budget is spent.
    fn spent(&self) -> Option<String> {
        if self.transcript.calls >= self.budget.max_calls {
            return Some(format!(
                "the budget of {} tool calls is spent",
                self.budget.max_calls
            ));
        }
        if self.transcript.device_s >= self.budget.max_device_s {
            return Some(format!(
                "the budget of {:.0} worker seconds is spent ({:.1} s used)",
                self.budget.max_device_s, self.transcript.device_s
            ));
        }
        None
    }
}

/// What one tool reply, argument or result may hold: 64 KiB (a compiler
/// log of that size is already past what a model reads).
const MAX_TEXT: usize = 64 << 10;

/// `text` cut to [`MAX_TEXT`] at a character boundary, saying so.
fn cap(text: &mut String) {
    if text.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n[cut at 64 KiB]");
    }
}

/// Arguments compared without their formatting.
fn normalised(arguments: &str) -> String {
    serde_json::from_str::<serde_json::Value>(arguments)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| arguments.to_string())
}

/// `source` in a fence longer than any run of backticks inside it.
pub(crate) fn fenced(source: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for b in source.bytes() {
        run = if b == b'`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}\n{}\n{fence}\n", source.trim_end_matches('\n'))
}
