//! Values on their way into the store: cleaned so both backends store the
//! same thing (no NUL, no NaN, microsecond timestamps), checked (finite,
//! in range, referring to something that exists), and converted.

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;

use crate::StoreError;
use crate::model::{CandidateRef, EvaluationId, Proposed, RunId};

pub use kevo_eval::source_sha256;

/// Timestamps are kept to the microsecond, what Postgres stores, so that a
/// value reads back equal on both backends.
pub(super) fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// PostgreSQL rejects NUL characters in text and JSON. They are replaced
/// by U+FFFD on both backends alike, so a stray NUL in a model's response
/// cannot abort an iteration and both backends store the same text.
pub(super) fn clean_text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        std::borrow::Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// [`clean_text`] of an optional text.
pub(super) fn clean_opt(s: &Option<String>) -> Option<std::borrow::Cow<'_, str>> {
    s.as_deref().map(clean_text)
}

/// [`clean_text`] for every string and key of a JSON value.
pub(super) fn clean_value(v: &Value) -> std::borrow::Cow<'_, Value> {
    fn has_nul(v: &Value) -> bool {
        match v {
            Value::String(s) => s.contains('\0'),
            Value::Array(a) => a.iter().any(has_nul),
            Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
            _ => false,
        }
    }
    fn fix(v: &mut Value) {
        match v {
            Value::String(s) => *s = s.replace('\0', "\u{FFFD}"),
            Value::Array(a) => a.iter_mut().for_each(fix),
            Value::Object(o) => {
                let old = std::mem::take(o);
                for (k, mut v) in old {
                    fix(&mut v);
                    o.insert(k.replace('\0', "\u{FFFD}"), v);
                }
            }
            _ => {}
        }
    }
    if has_nul(v) {
        let mut v = v.clone();
        fix(&mut v);
        std::borrow::Cow::Owned(v)
    } else {
        std::borrow::Cow::Borrowed(v)
    }
}

/// SQLite stores a NaN as NULL and Postgres keeps it; an optional figure
/// that is not finite is stored as NULL on both, so they agree.
pub(super) fn finite(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite())
}

/// A reference to proposal `j` of an iteration needs that proposal to
/// have a candidate.
pub(super) fn check_proposal_ref(
    proposed: &[Proposed],
    r: &CandidateRef,
    what: &str,
) -> Result<(), StoreError> {
    match r {
        CandidateRef::Proposal(j) if proposed.get(*j).is_none_or(|p| p.candidate.is_none()) => {
            Err(StoreError::InvalidRecord(format!(
                "{what} refers to proposal {j}, which has no candidate"
            )))
        }
        _ => Ok(()),
    }
}

/// A figure that must be a number (not NaN, not infinite), or an error
/// naming `what` it is.
pub(super) fn required_finite(x: f64, what: &str) -> Result<f64, StoreError> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(StoreError::InvalidRecord(format!("{what} is {x}")))
    }
}

/// A count as stored (a signed 64-bit integer), or an error naming
/// `what` it counts.
pub(super) fn to_i64(x: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(x).map_err(|_| StoreError::InvalidRecord(format!("{what} {x} is too large")))
}

/// A value as stored JSON, or an error naming `what` it is.
pub(super) fn to_json(v: &impl serde::Serialize, what: &'static str) -> Result<Value, StoreError> {
    serde_json::to_value(v).map_err(|cause| StoreError::Json { what, cause })
}

/// The database refused a duplicate key.
pub(super) fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
}

/// A fresh run id: the task, the time `at` and a random tag.
pub(super) fn new_run_id(task: &str, at: DateTime<Utc>) -> RunId {
    let task: String = task
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let tag: u32 = rand::random::<u32>() & 0xff_ffff;
    RunId(format!("{task}-{}-{tag:06x}", at.format("%Y%m%d-%H%M%S")))
}

/// An evaluation ready to insert: JSON and the queryable columns, computed
/// before the transaction starts.
pub(super) struct PreparedEvaluation {
    pub(super) json: Value,
    pub(super) outcome_kind: &'static str,
    pub(super) score: Option<f64>,
    pub(super) device: String,
    pub(super) backend: String,
    pub(super) task: String,
    pub(super) reused_from: Option<i64>,
}

impl PreparedEvaluation {
    pub(super) fn new(
        ev: &kevo_eval::Evaluation,
        reused_from: Option<EvaluationId>,
    ) -> Result<Self, StoreError> {
        Ok(PreparedEvaluation {
            json: clean_value(&to_json(ev, "evaluation")?).into_owned(),
            outcome_kind: ev.outcome.kind(),
            score: finite(ev.outcome.score()),
            device: clean_text(&ev.device).into_owned(),
            backend: clean_text(ev.backend.name()).into_owned(),
            task: ev.task.clone(),
            reused_from: reused_from.map(|e| e.0),
        })
    }
}
