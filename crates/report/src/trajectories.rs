//! Search trajectories as training data (Kernel-Smith turns them into
//! supervised and RL examples): one JSON record per step, schema
//! `kevo.trajectory/1`, documented in the README. Every text field passes
//! through the caller's redaction, so keys that leaked into a prompt or a
//! response never reach the file.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use kevo_eval::Evaluation;
use kevo_store::{CandidateId, HistoryRow, StoredLlmCall};

use crate::data::RunData;

pub const SCHEMA: &str = "kevo.trajectory/1";

/// Which steps to write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only steps whose kernel was correct.
    pub correct_only: bool,
    /// Only steps that were kept (promoted, or an elite).
    pub promoted_only: bool,
    /// Only the run's best correct step (Kernel-Smith keeps one per run).
    pub best_only: bool,
}

/// The records of one run, in step order.
pub fn trajectories(data: &RunData, filter: Filter, redact: &dyn Fn(&str) -> String) -> Vec<Value> {
    let steps = Steps {
        data,
        seed_score: data
            .seed
            .and_then(|s| data.evaluations.get(&s.0))
            .and_then(|e| e.outcome.score()),
        calls: ProposingCalls::of(data),
        best: best_candidate(data),
        variant_of: prompt_variants(data),
        redact,
    };
    data.history
        .iter()
        .filter(|h| h.iteration > 0)
        .filter(|h| steps.passes(filter, h))
        .map(|h| steps.record(h))
        .collect()
}

/// The generator's calls: the proposing call of each candidate, and the
/// calls that made no candidate by iteration. An analyst's or a
/// meta-prompter's call is not a step's proposal.
struct ProposingCalls<'a> {
    of_candidate: BTreeMap<i64, &'a StoredLlmCall>,
    failed: BTreeMap<u32, Vec<&'a StoredLlmCall>>,
}

impl<'a> ProposingCalls<'a> {
    fn of(data: &'a RunData) -> ProposingCalls<'a> {
        let mut of_candidate = BTreeMap::new();
        let mut failed: BTreeMap<u32, Vec<&StoredLlmCall>> = BTreeMap::new();
        for c in data
            .llm_calls
            .iter()
            .filter(|c| c.call.purpose == "propose" || c.call.purpose.is_empty())
        {
            match c.candidate_id {
                Some(id) => {
                    of_candidate.entry(id.0).or_insert(c);
                }
                None => failed.entry(c.iteration).or_default().push(c),
            }
        }
        ProposingCalls {
            of_candidate,
            failed,
        }
    }

    /// The call that proposed step `h`: its candidate's, or for a step
    /// without one the first failed call of its iteration.
    fn of_step(&self, h: &HistoryRow) -> Option<&'a StoredLlmCall> {
        match h.candidate_id {
            Some(id) => self.of_candidate.get(&id.0).copied(),
            None => self
                .failed
                .get(&h.iteration)
                .and_then(|v| v.first().copied()),
        }
    }
}

/// The run's best correct candidate after the seed (highest score).
fn best_candidate(data: &RunData) -> Option<CandidateId> {
    data.history
        .iter()
        .filter(|h| h.iteration > 0 && h.outcome_kind.as_deref() == Some("correct"))
        .filter_map(|h| Some((h.candidate_id?, h.score?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}

/// The prompt variant each candidate was asked with (`--meta-prompter`),
/// from the checkpoint's prompt archive.
fn prompt_variants(data: &RunData) -> BTreeMap<i64, u64> {
    data.checkpoint
        .as_ref()
        .and_then(|c| c.strategy_state.as_ref())
        .and_then(|s| s["prompts"]["variants"].as_array())
        .into_iter()
        .flatten()
        .flat_map(|v| {
            let id = v["id"].as_u64().unwrap_or(0);
            v["candidates"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(move |c| Some((c.as_i64()?, id)))
        })
        .collect()
}

/// What every record of a run draws on.
struct Steps<'a> {
    data: &'a RunData,
    seed_score: Option<f64>,
    calls: ProposingCalls<'a>,
    best: Option<CandidateId>,
    variant_of: BTreeMap<i64, u64>,
    redact: &'a dyn Fn(&str) -> String,
}

impl Steps<'_> {
    /// Whether step `h` is among those `filter` writes.
    fn passes(&self, filter: Filter, h: &HistoryRow) -> bool {
        let correct = h.outcome_kind.as_deref() == Some("correct");
        !((filter.correct_only && !correct)
            || (filter.promoted_only && !h.promoted)
            || (filter.best_only && (h.candidate_id.is_none() || h.candidate_id != self.best)))
    }

    /// The record of step `h`, every text field redacted.
    fn record(&self, h: &HistoryRow) -> Value {
        let (data, redact, best) = (self.data, self.redact, self.best);
        let correct = h.outcome_kind.as_deref() == Some("correct");
        let candidate = h.candidate_id.and_then(|c| data.candidates.get(&c.0));
        let call = self.calls.of_step(h);
        let evaluation = h.candidate_id.and_then(|c| data.evaluations.get(&c.0));
        let parent = candidate.and_then(|c| c.parents.first()).map(|p| p.0);
        let parent_score = parent
            .and_then(|p| data.evaluations.get(&p))
            .and_then(|e| e.outcome.score());
        let score = if correct { h.score } else { None };
        let ratio = |base: Option<f64>| match (score, base) {
            (Some(s), Some(b)) if b > 0.0 => Some(s / b),
            _ => None,
        };
        let seed_score = self.seed_score;
        let feedback = evaluation.map(feedback_text);
        let text = |s: Option<&str>| s.map(redact);
        json!({
            "schema": SCHEMA,
            "run": data.info.id.0,
            "task": data.info.task,
            "strategy": data.info.strategy,
            "device": data.info.device,
            "backend": data.info.backend,
            "iteration": h.iteration,
            "candidate": h.candidate_id.map(|c| c.0),
            "parent": parent,
            "provider": call.map(|c| redact(&c.call.provider)),
            "model": call.map(|c| redact(&c.call.model)),
            "prompt_variant": h.candidate_id.and_then(|c| self.variant_of.get(&c.0)),
            "prompt": call.map(|c| json!({
                "system": redact(&c.call.prompt_system),
                "user": redact(&c.call.prompt_user),
            })),
            "response": text(call.and_then(|c| c.call.response.as_deref())),
            "reasoning": text(call.and_then(|c| c.call.reasoning.as_deref())),
            "model_error": text(call.and_then(|c| c.call.error.as_deref())),
            // A tool conversation's turns (`--agent-tools`): each answer,
            // the calls it made and what they returned.
            "turns": call
                .and_then(|c| c.call.transcript.clone())
                .map(|t| kevo_proposer::sanitize::map_strings(t, &|s| redact(s))),
            "kernel": candidate.map(|c| redact(&c.source)),
            "outcome": h.outcome_kind,
            "feedback": feedback.as_deref().map(redact),
            "correct": correct,
            "score": score,
            "parent_score": parent_score,
            "speedup_over_parent": ratio(parent_score),
            "speedup_over_seed": ratio(seed_score),
            "reward": if correct { ratio(seed_score).unwrap_or(0.0) } else { 0.0 },
            "promoted": h.promoted,
            "decision": redact(&h.reason),
            "best_in_run": h.candidate_id.is_some() && h.candidate_id == best,
            "tokens": call.map(|c| json!({
                "input": c.call.input_tokens, "output": c.call.output_tokens,
                "reasoning": c.call.reasoning_tokens,
            })),
            "cost_usd": call.and_then(|c| c.call.cost_usd),
        })
    }
}

/// An evaluation as the proposer read it: the outcome's summary, then per
/// size its correctness, median time in ms and fraction of the roofline.
fn feedback_text(e: &Evaluation) -> String {
    let mut lines = vec![e.outcome.summary()];
    for s in &e.sizes {
        lines.push(format!(
            "{}: {}, {:.4} ms median, {:.1}% of the roofline",
            s.label,
            if s.correct { "correct" } else { "wrong" },
            s.time.median_s * 1e3,
            s.fraction * 100.0
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use kevo_store::{
        CandidateId, HistoryRow, LlmCallId, NewLlmCall, RunId, StoredCandidate, StoredLlmCall,
    };

    const KEY: &str = "sk-live-0123456789abcdef";

    /// A run whose step 1 carries a key in every text a record copies.
    fn leaky_run() -> RunData {
        let candidate = |id: i64, iteration: u32, source: &str| StoredCandidate {
            id: CandidateId(id),
            run_id: RunId("r".into()),
            iteration,
            parents: if id == 1 {
                vec![]
            } else {
                vec![CandidateId(1)]
            },
            island: None,
            cell: None,
            descriptors: None,
            source: source.into(),
            source_sha256: String::new(),
            provider: None,
            model: None,
            created_at: Utc::now(),
        };
        let row = |iteration: u32, id: i64, kind: &str| HistoryRow {
            iteration,
            candidate_id: Some(CandidateId(id)),
            outcome_kind: Some(kind.into()),
            score: (kind == "correct").then_some(0.5),
            promoted: iteration == 0,
            incumbent_id: Some(CandidateId(1)),
            island: None,
            cell: None,
            reason: format!("decided ({KEY})"),
        };
        RunData {
            checkpoint: None,
            info: crate::data::test_info("one_plus_one"),
            history: vec![row(0, 1, "correct"), row(1, 2, "wrong_result")],
            candidates: [
                (1, candidate(1, 0, "seed")),
                (2, candidate(2, 1, &format!("// {KEY}\nkernel"))),
            ]
            .into(),
            evaluations: Default::default(),
            llm_calls: vec![StoredLlmCall {
                id: LlmCallId(1),
                run_id: RunId("r".into()),
                candidate_id: Some(CandidateId(2)),
                iteration: 1,
                call: NewLlmCall {
                    purpose: "propose".into(),
                    provider: "openai".into(),
                    model: "m".into(),
                    prompt_system: format!("system {KEY}"),
                    prompt_user: format!("user {KEY}"),
                    response: Some(format!("response {KEY}")),
                    reasoning: Some(format!("thinking {KEY}")),
                    input_tokens: Some(10),
                    output_tokens: Some(5),
                    reasoning_tokens: None,
                    cost_usd: Some(0.01),
                    latency_s: 1.0,
                    error: None,
                    transcript: None,
                },
                created_at: Utc::now(),
            }],
            held_out: Vec::new(),
            seed: Some(CandidateId(1)),
            winner: Some(CandidateId(1)),
        }
    }

    #[test]
    fn every_text_field_passes_through_the_redaction() {
        let data = leaky_run();
        let redact = |s: &str| s.replace(KEY, "[redacted]");
        let records = trajectories(&data, Filter::default(), &redact);
        assert_eq!(records.len(), 1, "the seed is not a step");
        let text = records[0].to_string();
        assert!(!text.contains(KEY), "{text}");
        assert_eq!(text.matches("[redacted]").count(), 6, "{text}");
        assert_eq!(records[0]["parent"], 1);
        assert_eq!(records[0]["correct"], false);
        assert_eq!(records[0]["reward"], 0.0);
        // Without redaction the key would be there: the check above bites.
        let raw = trajectories(&data, Filter::default(), &|s: &str| s.to_string());
        assert!(raw[0].to_string().contains(KEY));
        let none = trajectories(
            &data,
            Filter {
                correct_only: true,
                ..Filter::default()
            },
            &redact,
        );
        assert!(none.is_empty());
    }
}
