//! The values that pass between stages: a tried candidate, its evaluation, the
//! prompt context, duplicates.

use kevo_descriptors::Descriptors;
use kevo_eval::Evaluation;
use kevo_proposer::{Attempt, StepOutcome};
use kevo_store::{EvaluationId, NewCandidate, NewEvaluation, NewLlmCall, Proposed};

/// An evaluation, the stored one it reuses, and the candidate it duplicates.
pub(super) type EvaluatedOnce = (Evaluation, Option<EvaluationId>, Option<Duplicate>);

/// Shown candidates as the prompt takes them.
pub(super) fn attempts(shown: &[(String, Evaluation)]) -> Vec<Attempt<'_>> {
    shown
        .iter()
        .map(|(source, evaluation)| Attempt { source, evaluation })
        .collect()
}

pub(super) use kevo_proposer::prompt::search::hint_text;

/// What the proposer is shown in one iteration (see
/// [`Session::prompt_context`]).
pub(super) struct PromptContext {
    /// The strategy's parent for this iteration's proposals.
    pub(super) incumbent: i64,
    /// Its profile summary, with `--profile`.
    pub(super) incumbent_profile: Option<String>,
    /// The previous attempt's, with `--profile-every`.
    pub(super) previous_profile: Option<String>,
    /// The analyst's recommendation about it, with `--analyst`.
    pub(super) analysis: Option<String>,
    pub(super) incumbent_source: String,
    pub(super) incumbent_evaluation: Evaluation,
    pub(super) previous: Option<(String, Evaluation)>,
    pub(super) incumbent_is_seed: bool,
    /// The parent is the run's best so far (always so for (1+1)).
    pub(super) incumbent_is_best: bool,
    /// The score the search holds for the incumbent when it is the best:
    /// its re-measured median after a noise-aware promotion.
    pub(super) incumbent_score: Option<f64>,
    /// Other elites and inspirations the strategy chose, with their
    /// evaluations.
    pub(super) elites: Vec<(String, Evaluation)>,
    pub(super) inspirations: Vec<(String, Evaluation)>,
    /// The previous attempt was rejected by the validation gate.
    pub(super) previous_rejected: bool,
    /// The prompt variant of the request (`--meta-prompter`).
    pub(super) prompt_variant: Option<u32>,
}

/// One proposal of an iteration after extraction and evaluation.
pub(super) struct Tried {
    pub(super) call: NewLlmCall,
    pub(super) result: TriedResult,
}

pub(super) enum TriedResult {
    /// No candidate: the proposer failed, or its response held no usable
    /// source; `reason` is stored with the decision.
    Nothing {
        outcome: StepOutcome,
        reason: String,
    },
    /// Boxed: an evaluation is large, and most batches are short.
    Evaluated(Box<EvaluatedProposal>),
}

/// An earlier candidate whose source a proposal repeats (up to comments and
/// whitespace): stored, or an earlier proposal of the same batch.
#[derive(Debug, Clone, Copy)]
pub(super) enum Duplicate {
    Stored(i64),
    InBatch(usize),
}

pub(super) struct EvaluatedProposal {
    /// Repeats an earlier candidate: not measured again.
    pub(super) duplicate: Option<Duplicate>,
    pub(super) candidate: NewCandidate,
    /// Its cell, also stored (as JSON) with the candidate.
    pub(super) descriptors: Option<Descriptors>,
    /// Its source's normalised hash ([`super::extract::Candidate`]).
    pub(super) normalised: String,
    pub(super) evaluation: Evaluation,
    pub(super) reused_from: Option<EvaluationId>,
    /// What the response says it changed, for the history line.
    pub(super) note: Option<String>,
}

impl Tried {
    pub(super) fn nothing(call: NewLlmCall, outcome: StepOutcome, reason: String) -> Self {
        Tried {
            call,
            result: TriedResult::Nothing { outcome, reason },
        }
    }

    pub(super) fn candidate(&self) -> Option<&NewCandidate> {
        match &self.result {
            TriedResult::Evaluated(e) => Some(&e.candidate),
            TriedResult::Nothing { .. } => None,
        }
    }

    /// The outcome's name, as the iteration event reports it.
    pub(super) fn outcome(&self) -> String {
        match &self.result {
            TriedResult::Nothing { outcome, .. } => outcome.name().to_string(),
            TriedResult::Evaluated(e) => e.evaluation.outcome.kind().to_string(),
        }
    }

    pub(super) fn score(&self) -> Option<f64> {
        match &self.result {
            TriedResult::Nothing { .. } => None,
            TriedResult::Evaluated(e) => e.evaluation.outcome.score(),
        }
    }

    pub(super) fn into_proposed(self) -> Proposed {
        match self.result {
            TriedResult::Nothing { .. } => Proposed {
                llm_calls: vec![self.call],
                candidate: None,
                evaluation: None,
            },
            TriedResult::Evaluated(e) => Proposed {
                llm_calls: vec![self.call],
                candidate: Some(e.candidate),
                evaluation: Some(NewEvaluation {
                    evaluation: e.evaluation,
                    reused_from: e.reused_from,
                }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use kevo_backend::{DeviceKind, Dialect};
    use kevo_strategy::{Axis, Hint, HintReason};

    use super::*;

    fn hint(axis: Axis, level: u8, reason: HintReason) -> Hint {
        Hint {
            axis,
            level,
            reason,
        }
    }

    #[test]
    fn a_cpu_gets_no_tiling_or_sub_group_hints() {
        let cpu = Some(DeviceKind::Cpu);
        for (axis, level) in [
            (Axis::Memory, 2),
            (Axis::Memory, 3),
            (Axis::Coordination, 1),
            (Axis::Coordination, 2),
        ] {
            let h = hint(axis, level, HintReason::Unexplored);
            assert_eq!(hint_text(&h, Dialect::OpenCl, cpu), None, "{h:?}");
            assert!(hint_text(&h, Dialect::OpenCl, Some(DeviceKind::DiscreteGpu)).is_some());
        }
        let vector = hint(Axis::Memory, 1, HintReason::Unexplored);
        assert!(hint_text(&vector, Dialect::OpenCl, cpu).is_some());
    }

    #[test]
    fn hints_say_what_children_did() {
        let gpu = Some(DeviceKind::DiscreteGpu);
        let fused = hint(Axis::Algorithm, 1, HintReason::Improved { gradient: 0.4 });
        let text = hint_text(&fused, Dialect::OpenCl, gpu).unwrap();
        assert!(
            text.starts_with("consider fusing work: merge passes"),
            "{text}"
        );
        assert!(!text.contains("several"), "{text}");
        assert!(text.contains("improved when they moved to fused"), "{text}");
        // Children that tiled and got slower: reported, not turned into a
        // claim that the other way improved.
        let slower = hint(Axis::Memory, 2, HintReason::Worse { change: -0.4 });
        let text = hint_text(&slower, Dialect::OpenCl, gpu).unwrap();
        assert!(
            text.contains("moved to shared/local-memory tiling did worse"),
            "{text}"
        );
        assert!(
            !text.contains("improved") && !text.contains("consider"),
            "{text}"
        );
        // A stored hint with a signed sum cannot say which way improved.
        let old = hint(Axis::Memory, 0, HintReason::Improved { gradient: -0.4 });
        assert_eq!(hint_text(&old, Dialect::OpenCl, gpu), None);
    }
}
