//! Model calls in flight, and how an abandoned one is recorded, so an
//! interrupted run accounts for what it spent.

use std::sync::Arc;
use std::time::Instant;

use kevo_proposer::{Completion, ProviderError};
use kevo_store::{NewLlmCall, RunId};

use super::error::EvolveError;

/// Model calls a session has sent and not yet got back.
#[derive(Clone, Default)]
pub struct InFlightCalls(Arc<std::sync::Mutex<Vec<InFlightCall>>>);

pub(super) struct InFlightCall {
    /// The batch of calls it belongs to (one prompt's proposals).
    pub(super) token: u64,
    /// "propose", or "analysis" for the performance analyst's.
    pub(super) purpose: &'static str,
    pub(super) run: RunId,
    pub(super) iteration: u32,
    pub(super) provider: String,
    pub(super) system: String,
    pub(super) user: String,
    pub(super) sent: Instant,
}

impl InFlightCalls {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Vec<InFlightCall>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many calls are under way.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A proposal call as stored, before its answer is known: what was asked
/// of whom, and how long it took; counts and cost unknown.
pub(super) fn proposal_call(
    provider: String,
    system: &str,
    user: &str,
    latency_s: f64,
) -> NewLlmCall {
    NewLlmCall {
        purpose: "propose".into(),
        provider,
        model: String::new(),
        prompt_system: system.to_string(),
        prompt_user: user.to_string(),
        response: None,
        reasoning: None,
        input_tokens: None,
        output_tokens: None,
        reasoning_tokens: None,
        cost_usd: None,
        latency_s,
        error: None,
        transcript: None,
    }
}

/// `call` with what `completion` says: model, answer, reasoning, counts
/// (unknown, not 0, when the server gave none) and cost.
pub(super) fn with_answer(mut call: NewLlmCall, completion: &Completion) -> NewLlmCall {
    call.model = completion.model.clone();
    call.response = Some(completion.text.clone());
    call.reasoning = completion.reasoning.clone();
    let known = completion.usage_unknown.is_none();
    call.input_tokens = known.then_some(completion.usage.input_tokens);
    call.output_tokens = known.then_some(completion.usage.output_tokens);
    call.reasoning_tokens = completion.usage.reasoning_tokens;
    call.cost_usd = completion.cost_usd;
    call
}

/// `call` with a tool conversation's record: the transcript, and the
/// tokens every turn spent (a conversation that ended without a kernel
/// spent them too; the completion's counts replace them when it did not).
pub(super) fn with_transcript(
    mut call: NewLlmCall,
    transcript: &kevo_proposer::tools::Transcript,
) -> NewLlmCall {
    call.transcript = serde_json::to_value(transcript).ok();
    let known = !transcript.usage_unknown;
    call.input_tokens = known.then_some(transcript.usage.input_tokens);
    call.output_tokens = known.then_some(transcript.usage.output_tokens);
    call.reasoning_tokens = transcript.usage.reasoning_tokens;
    call
}

/// The purpose under which meta-prompter calls are stored.
pub const META_PURPOSE: &str = "meta-prompt";

/// Failed attempts whose feedback the meta-prompter sees (the latest):
/// each is up to 800 characters of compile log or mismatch.
pub(super) const META_FAILURES_SHOWN: usize = 3;

/// Analyst failures in a row after which a run stops asking it: a
/// misconfigured endpoint would otherwise cost every prompt its retries.
pub(super) const ANALYST_GIVE_UP: u32 = 3;

/// One model call as it came back.
pub(super) struct Answer {
    pub(super) result: Result<Completion, ProviderError>,
    pub(super) latency_s: f64,
    /// With `--agent-tools`, the conversation's turns and tool calls,
    /// whether or not it ended with a kernel.
    pub(super) transcript: Option<kevo_proposer::tools::Transcript>,
}

/// One prompt's model calls as they came back; an error when every call
/// hit a budget stop.
pub(super) type Calls = Result<Vec<Answer>, EvolveError>;

/// How the error of a call abandoned by [`interrupt`] begins.
pub const ABANDONED: &str = "abandoned after";

/// Whether a stored call was abandoned in flight by [`interrupt`].
pub fn is_abandoned(call: &kevo_store::StoredLlmCall) -> bool {
    call.candidate_id.is_none()
        && call
            .call
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with(ABANDONED))
}
