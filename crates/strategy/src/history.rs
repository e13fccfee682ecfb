//! What happened to each proposal of a run: one record type for the
//! search, the prompt and the run directory's history file.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How one proposal ended: an evaluator outcome when a candidate was
/// evaluated, or why there was no candidate. Serialised as the snake_case
/// names the store and the run directory have always used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    /// Every size passed its check; the candidate has a score.
    Correct,
    /// Every size passed, but one ran faster than the hardware allows.
    Suspicious,
    CompileError,
    RuntimeError,
    Timeout,
    WrongResult,
    /// The response held no kernel source.
    NoCode,
    /// The response's edits did not apply to the source they were meant for.
    EditRejected,
    /// The proposer failed: no response at all.
    Skipped,
    /// Correct at the in-distribution sizes, but the validation gate
    /// (`--validate`) found it wrong, failing or too slow at a size never
    /// shown: not kept, and it has no score.
    RejectedByValidation,
}

impl StepOutcome {
    pub const ALL: [StepOutcome; 10] = [
        StepOutcome::Correct,
        StepOutcome::Suspicious,
        StepOutcome::CompileError,
        StepOutcome::RuntimeError,
        StepOutcome::Timeout,
        StepOutcome::WrongResult,
        StepOutcome::NoCode,
        StepOutcome::EditRejected,
        StepOutcome::Skipped,
        StepOutcome::RejectedByValidation,
    ];

    /// The name stored and shown: "correct", "compile_error", ...
    pub fn name(self) -> &'static str {
        match self {
            StepOutcome::Correct => "correct",
            StepOutcome::Suspicious => "suspicious",
            StepOutcome::CompileError => "compile_error",
            StepOutcome::RuntimeError => "runtime_error",
            StepOutcome::Timeout => "timeout",
            StepOutcome::WrongResult => "wrong_result",
            StepOutcome::NoCode => "no_code",
            StepOutcome::EditRejected => "edit_rejected",
            StepOutcome::Skipped => "skipped",
            StepOutcome::RejectedByValidation => "rejected_by_validation",
        }
    }
}

impl fmt::Display for StepOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One proposal of one iteration, as the search recorded it. Iteration 0
/// is the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub iteration: u32,
    /// The stored candidate; None when the proposal produced none.
    /// (Checkpoints written before candidates were recorded here lack it.)
    #[serde(default)]
    pub candidate: Option<i64>,
    pub outcome: StepOutcome,
    /// Defined only for correct candidates.
    pub score: Option<f64>,
    /// Kept by the strategy: the new incumbent of (1+1), an archive or
    /// island member of the others.
    pub promoted: bool,
    /// Became the run's best; None in entries stored before strategies
    /// other than (1+1), where keeping and becoming best were the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_best: Option<bool>,
    /// Its source repeats this earlier candidate's (up to comments and
    /// whitespace): it was not evaluated again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<i64>,
    /// What the attempt changed, for later prompts: the first sentence of
    /// the response's description and the kernel's `// kevo:` directives
    /// (block shape, tunables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What became of it, in words a model can act on: why a correct
    /// candidate was or was not kept (a re-measurement "within noise, not
    /// promoted" included), or why it failed ("suspicious at size 4096:
    /// ..."). At most [`HistoryEntry::REASON_CHARS`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl HistoryEntry {
    /// A proposal that produced no candidate (`outcome` says why).
    pub fn without_candidate(iteration: u32, outcome: StepOutcome) -> Self {
        HistoryEntry {
            iteration,
            candidate: None,
            outcome,
            score: None,
            promoted: false,
            new_best: None,
            duplicate_of: None,
            note: None,
            reason: None,
        }
    }

    /// A reason's longest shown form: eight history lines of about 300
    /// characters stay near 600 tokens.
    pub const REASON_CHARS: usize = 240;

    /// `reason` cut to its first line and [`Self::REASON_CHARS`]
    /// characters (on a character boundary), None when empty.
    pub fn short_reason(reason: &str) -> Option<String> {
        let line = reason.lines().map(str::trim).find(|l| !l.is_empty())?;
        if line.chars().count() <= Self::REASON_CHARS {
            return Some(line.to_string());
        }
        let cut: String = line.chars().take(Self::REASON_CHARS - 3).collect();
        Some(format!("{}...", cut.trim_end()))
    }

    /// Became the run's best.
    pub fn is_new_best(&self) -> bool {
        self.new_best.unwrap_or(self.promoted)
    }

    pub fn correct(&self) -> bool {
        self.outcome == StepOutcome::Correct
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serialised_form() {
        for o in StepOutcome::ALL {
            assert_eq!(
                serde_json::from_value::<StepOutcome>(o.name().into()).unwrap(),
                o
            );
            assert_eq!(
                serde_json::to_value(o).unwrap(),
                serde_json::Value::String(o.name().into())
            );
        }
        assert!(serde_json::from_value::<StepOutcome>("fine".into()).is_err());
    }

    #[test]
    fn a_reason_is_one_line_and_at_most_its_length() {
        assert_eq!(HistoryEntry::short_reason(" \n  \n"), None);
        assert_eq!(
            HistoryEntry::short_reason("\nerror: x undeclared\nnote: here").as_deref(),
            Some("error: x undeclared")
        );
        let long = "é".repeat(400);
        let short = HistoryEntry::short_reason(&long).unwrap();
        assert_eq!(short.chars().count(), HistoryEntry::REASON_CHARS);
        assert!(short.ends_with("..."));
    }

    #[test]
    fn an_entry_without_a_reason_serialises_as_before() {
        let e = HistoryEntry::without_candidate(2, StepOutcome::NoCode);
        assert!(!serde_json::to_string(&e).unwrap().contains("reason"));
        let with = HistoryEntry {
            reason: Some("why".into()),
            ..e
        };
        let back: HistoryEntry =
            serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
        assert_eq!(back, with);
    }

    #[test]
    fn entries_stored_without_a_candidate_field_still_load() {
        let old = r#"{"iteration":3,"outcome":"wrong_result","score":null,"promoted":false}"#;
        let e: HistoryEntry = serde_json::from_str(old).unwrap();
        assert_eq!(
            e,
            HistoryEntry::without_candidate(3, StepOutcome::WrongResult)
        );
    }
}
