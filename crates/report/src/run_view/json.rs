//! `kevo show --json`: a [`RunView`] as one JSON value, each iteration with
//! its per-size numbers.

use kevo_eval::SizeResult;
use serde_json::{Value, json};

use super::RunView;

impl RunView {
    /// Everything read, each iteration with its per-size numbers.
    pub fn to_json(&self) -> Value {
        let history: Vec<Value> = self
            .history
            .iter()
            .map(|h| {
                let mut v = serde_json::to_value(h).unwrap_or_default();
                let measured = h.candidate_id.and_then(|c| self.measured.get(&c.0));
                let sizes = measured.map(|e| e.sizes.iter().map(size_json).collect::<Vec<_>>());
                if let (Some(o), Some(sizes)) = (v.as_object_mut(), sizes) {
                    o.insert("sizes".into(), Value::Array(sizes));
                }
                // Why it failed: the outcome in one line, and the
                // compiler's log where there is one.
                if let (Some(o), Some(e)) = (v.as_object_mut(), measured)
                    && !e.outcome.is_correct()
                {
                    o.insert(
                        "failure".into(),
                        json!({
                            "summary": e.outcome.summary(),
                            "detail": e.outcome.failure_detail(FAILURE_LINES),
                        }),
                    );
                }
                v
            })
            .collect();
        let held_out: Vec<_> = self.held_out.iter().map(|(h, _)| h).collect();
        let info = &self.info;
        json!({
            "run": info, "history": history, "best": self.best, "held_out": held_out,
            "cross": self.cross,
            "remeasurements": self.remeasurements,
            "validations": self.validations,
            "proposals": self.proposals.iter().map(|p| json!({
                "id": p.id, "status": p.status, "asked_after": p.asked_after,
                "batch": p.batch, "iteration": p.iteration, "reason": p.reason,
                "asked_at": p.asked_at, "closed_at": p.closed_at,
                "answer_kept_at": p.deferred.as_ref().map(|d| d.told_at),
            })).collect::<Vec<_>>(),
            "abandoned_calls": self.abandoned,
            "archive": self.archive,
            "strategy_state": self.strategy_state,
            "model_choice": info.config["model_choice"],
            "models": self.arms,
            "prompt_archive": self.prompt_archive,
        })
    }
}

/// Lines of a compiler log `kevo show` and the report keep: NVRTC's and
/// clang's first errors with their excerpts fit; a cascade of 200 does not
/// bury the page.
pub const FAILURE_LINES: usize = 40;

/// One size of an iteration as JSON: times in ms with their spread,
/// achieved rate, fraction of the scored ceiling.
pub fn size_json(s: &SizeResult) -> Value {
    let finite = |x: f64| x.is_finite().then_some(x);
    json!({
        "label": s.label,
        "correct": s.correct,
        "median_ms": finite(s.time.median_s * 1e3),
        "min_ms": finite(s.time.min_s * 1e3),
        "max_ms": finite(s.time.max_s * 1e3),
        "runs": s.time.samples_s.len(),
        "achieved": finite(s.achieved),
        "unit": s.unit,
        "fraction": finite(s.fraction),
    })
}
