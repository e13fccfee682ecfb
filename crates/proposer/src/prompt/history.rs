//! The run history as the proposer sees it, and Metal-Sci's stagnation
//! detection (section 14.4) as a pure function.

use kevo_eval::Outcome;
use serde::{Deserialize, Serialize};

pub use kevo_strategy::{HistoryEntry, StepOutcome};

/// The history outcome of an evaluator outcome.
pub fn step_outcome(outcome: &Outcome) -> StepOutcome {
    match outcome {
        Outcome::NoCode { .. } => StepOutcome::NoCode,
        Outcome::CompileError { .. } => StepOutcome::CompileError,
        Outcome::RuntimeError { .. } => StepOutcome::RuntimeError,
        Outcome::Timeout { .. } => StepOutcome::Timeout,
        Outcome::WrongResult { .. } => StepOutcome::WrongResult,
        Outcome::Suspicious { .. } => StepOutcome::Suspicious,
        Outcome::Correct { .. } => StepOutcome::Correct,
    }
}

/// The history entry of stored candidate `candidate` that ended in
/// `outcome`.
pub fn evaluated_entry(
    iteration: u32,
    candidate: i64,
    outcome: &Outcome,
    promoted: bool,
) -> HistoryEntry {
    HistoryEntry {
        iteration,
        candidate: Some(candidate),
        outcome: step_outcome(outcome),
        score: outcome.score(),
        promoted,
        new_best: None,
        duplicate_of: None,
        note: None,
        reason: (!outcome.is_correct())
            .then(|| super::feedback::outcome_summary(outcome))
            .and_then(|r| HistoryEntry::short_reason(&r)),
    }
}

/// `iter  3: compile OK, correct False (runtime error), score N/A`, then
/// what the attempt tried and what became of it:
/// `; tried: float4 loads; result: runtime error at size 1024: ...`.
pub fn history_line(entry: &HistoryEntry) -> String {
    let status = match entry.outcome {
        StepOutcome::Correct => "compile OK, correct True",
        StepOutcome::CompileError => "compile FAIL, correct False",
        StepOutcome::WrongResult => "compile OK, correct False",
        StepOutcome::RuntimeError => "compile OK, correct False (runtime error)",
        StepOutcome::Timeout => "compile OK, correct False (timeout)",
        StepOutcome::NoCode => "no code in the response",
        StepOutcome::Skipped => "skipped (no response)",
        StepOutcome::RejectedByValidation => {
            "compile OK, correct True at the sizes shown, fails on unseen sizes (not kept)"
        }
        other @ (StepOutcome::Suspicious | StepOutcome::EditRejected) => other.name(),
    };
    let score = entry
        .score
        .map_or_else(|| "N/A".to_string(), |s| format!("{s:.4}"));
    let tag = match (entry.iteration, entry.duplicate_of) {
        (0, _) => " (seed)".to_string(),
        (_, Some(of)) => format!(" (duplicate of candidate {of}: not evaluated again)"),
        _ if entry.is_new_best() => " (new best)".to_string(),
        _ if entry.promoted => " (kept by the search)".to_string(),
        _ => String::new(),
    };
    let mut line = format!("iter {:>2}: {status}, score {score}{tag}", entry.iteration);
    if let Some(note) = entry.note.as_deref().filter(|n| !n.is_empty()) {
        line.push_str(&format!("; tried: {note}"));
    }
    if let Some(reason) = entry.reason.as_deref().filter(|r| !r.is_empty()) {
        line.push_str(&format!("; result: {reason}"));
    }
    line
}

/// What an attempt changed, for its history line: the first sentence of
/// the response's description and the source's `// kevo:` directives
/// ("Use float4 loads; block 64"); None when it says neither.
pub fn attempt_note(response: &str, source: &str) -> Option<String> {
    let mut parts: Vec<String> = crate::parse::description(response)
        .map(|d| d.trim_end_matches('.').to_string())
        .into_iter()
        .collect();
    parts.extend(source.lines().filter_map(|l| {
        let d = l.trim().strip_prefix("//")?.trim().strip_prefix("kevo:")?;
        Some(d.split_whitespace().collect::<Vec<_>>().join(" "))
    }));
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Window and gap of the stagnation rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StagnationParams {
    pub window: usize,
    /// Relative gap below the incumbent's score, 0.15 = 15 %.
    pub gap: f64,
}

impl Default for StagnationParams {
    /// Metal-Sci's values: the last 3 correct attempts within 15 %.
    fn default() -> Self {
        StagnationParams {
            window: 3,
            gap: 0.15,
        }
    }
}

/// Stagnation fires iff the incumbent's score is positive, there are at
/// least `window` correct scored records after the seed, none of the last
/// `window` of them was promoted, and all their scores lie in
/// `[best * (1 - gap), best]`.
pub fn is_stagnating(
    history: &[HistoryEntry],
    incumbent_score: Option<f64>,
    params: StagnationParams,
) -> bool {
    let Some(best) = incumbent_score.filter(|b| *b > 0.0) else {
        return false;
    };
    if params.window == 0 {
        return false;
    }
    let correct: Vec<&HistoryEntry> = history
        .iter()
        .filter(|r| r.iteration > 0 && r.correct() && r.score.is_some())
        .collect();
    if correct.len() < params.window {
        return false;
    }
    let last = &correct[correct.len() - params.window..];
    let lo = best * (1.0 - params.gap);
    !last.iter().any(|r| r.promoted)
        && last.iter().all(|r| {
            let s = r.score.expect("filtered");
            s >= lo && s <= best
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(iteration: u32, score: Option<f64>, promoted: bool) -> HistoryEntry {
        HistoryEntry {
            duplicate_of: None,
            note: None,
            new_best: None,
            iteration,
            candidate: Some(i64::from(iteration) + 1),
            outcome: if score.is_some() {
                StepOutcome::Correct
            } else {
                StepOutcome::CompileError
            },
            score,
            promoted,
            reason: None,
        }
    }

    const P: StagnationParams = StagnationParams {
        window: 3,
        gap: 0.15,
    };

    #[test]
    fn fires_on_three_near_misses() {
        let h = [
            rec(0, Some(0.5), true),
            rec(1, Some(1.0), true),
            rec(2, Some(0.9), false),
            rec(3, None, false),
            rec(4, Some(0.86), false),
            rec(5, Some(1.0), false),
        ];
        assert!(is_stagnating(&h, Some(1.0), P));
    }

    #[test]
    fn each_condition_is_needed() {
        let base = vec![
            rec(1, Some(1.0), true),
            rec(2, Some(0.9), false),
            rec(3, Some(0.9), false),
            rec(4, Some(0.9), false),
        ];
        assert!(is_stagnating(&base, Some(1.0), P));
        // Incumbent score must be positive and defined.
        assert!(!is_stagnating(&base, Some(0.0), P));
        assert!(!is_stagnating(&base, None, P));
        // Fewer than 3 correct records after the seed (the seed never counts).
        let short = [
            rec(0, Some(1.0), true),
            rec(1, Some(0.9), false),
            rec(2, Some(0.9), false),
        ];
        assert!(!is_stagnating(&short, Some(1.0), P));
        // A promotion among the last 3.
        let mut promoted = base.clone();
        promoted[3].promoted = true;
        assert!(!is_stagnating(&promoted, Some(0.9), P));
        // One of the last 3 outside the 15 % band.
        let mut far = base.clone();
        far[2].score = Some(0.84);
        assert!(!is_stagnating(&far, Some(1.0), P));
        // Exactly at the lower edge counts as inside.
        let mut edge = base.clone();
        edge[2].score = Some(0.85);
        assert!(is_stagnating(&edge, Some(1.0), P));
        // Failures in between do not break a streak of correct near misses.
        let mut gaps = base.clone();
        gaps.insert(2, rec(9, None, false));
        assert!(is_stagnating(&gaps, Some(1.0), P));
    }

    #[test]
    fn lines_read_like_the_original() {
        assert_eq!(
            history_line(&rec(0, Some(0.12345), true)),
            "iter  0: compile OK, correct True, score 0.1235 (seed)"
        );
        assert_eq!(
            history_line(&rec(3, None, false)),
            "iter  3: compile FAIL, correct False, score N/A"
        );
        assert_eq!(
            history_line(&HistoryEntry::without_candidate(4, StepOutcome::Skipped)),
            "iter  4: skipped (no response), score N/A"
        );
        let r = evaluated_entry(5, 6, &Outcome::Correct { score: 0.5 }, true);
        assert_eq!(
            history_line(&r),
            "iter  5: compile OK, correct True, score 0.5000 (new best)"
        );
        let dup = HistoryEntry {
            duplicate_of: Some(6),
            promoted: false,
            ..evaluated_entry(7, 8, &Outcome::Correct { score: 0.5 }, false)
        };
        assert_eq!(
            history_line(&dup),
            "iter  7: compile OK, correct True, score 0.5000 (duplicate of candidate 6: not evaluated again)"
        );
        let kept = HistoryEntry {
            new_best: Some(false),
            ..evaluated_entry(8, 9, &Outcome::Correct { score: 0.2 }, true)
        };
        assert_eq!(
            history_line(&kept),
            "iter  8: compile OK, correct True, score 0.2000 (kept by the search)"
        );
        let noted = HistoryEntry {
            note: attempt_note(
                "Vectorised with float4.\n```opencl\n// kevo: block  64\nk\n```",
                "// kevo: block  64\nk",
            ),
            ..evaluated_entry(9, 10, &Outcome::Correct { score: 0.3 }, false)
        };
        assert_eq!(
            history_line(&noted),
            "iter  9: compile OK, correct True, score 0.3000; tried: Vectorised with float4; block 64"
        );
        assert_eq!(attempt_note("```c\nk\n```", "k"), None);
    }

    #[test]
    fn every_evaluator_outcome_keeps_its_name_in_the_history() {
        let diagnostics = kevo_backend::CompileDiagnostics::from_log(String::new());
        let outcomes = [
            Outcome::NoCode { reason: "r".into() },
            Outcome::CompileError {
                message: "m".into(),
                diagnostics,
            },
            Outcome::RuntimeError {
                size: None,
                fault: None,
                message: "m".into(),
            },
            Outcome::Timeout {
                size: None,
                limit_s: 1.0,
            },
            Outcome::WrongResult {
                size: "s".into(),
                metric: "max_abs".into(),
                value: 1.0,
                tolerance: None,
            },
            Outcome::Suspicious {
                size: "s".into(),
                reason: "r".into(),
                score: 9.0,
            },
            Outcome::Correct { score: 0.5 },
        ];
        for o in &outcomes {
            assert_eq!(step_outcome(o).name(), o.kind());
        }
        let suspicious = evaluated_entry(2, 3, &outcomes[5], false);
        assert_eq!(
            suspicious.score, None,
            "a suspicious candidate has no score"
        );
        assert_eq!(
            history_line(&suspicious),
            "iter  2: suspicious, score N/A; result: suspicious at size s: r (not scored; it would have scored 9.0000)"
        );
        let decided = HistoryEntry {
            reason: Some("score 1.0690 beats the incumbent's 0.9240; re-measured over 5 interleaved rounds: score ratio 1.010x (95% lower bound 0.980x) (within noise, not promoted)".into()),
            ..evaluated_entry(3, 4, &outcomes[6], false)
        };
        assert!(
            history_line(&decided).ends_with("; result: score 1.0690 beats the incumbent's 0.9240; re-measured over 5 interleaved rounds: score ratio 1.010x (95% lower bound 0.980x) (within noise, not promoted)"),
            "a correct attempt not kept says why: {}",
            history_line(&decided)
        );
    }
}
