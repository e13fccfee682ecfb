//! The report's "Attempts" section: every iteration with what became of it,
//! each size's time with its spread, achieved rate and fraction of the
//! ceiling, and for a failed attempt why it failed (the compiler's log,
//! the size and error of a wrong result, the limit a timeout hit, the
//! reason a figure was implausible).

use std::fmt::Write;

use kevo_eval::{Evaluation, SizeResult};

use crate::data::RunData;
use crate::run_view::FAILURE_LINES;
use crate::svg::{escape, number};

/// The section; empty for a run without iterations.
pub(crate) fn attempts_section(data: &RunData) -> String {
    if data.history.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        r#"<section id="attempts"><h2>Attempts</h2><p>Each iteration's first measurement ("in-run"): per size the median time with its spread (interquartile range over the median) and range, the achieved rate and its fraction of the scored ceiling.</p><table class="attempts">"#,
    );
    s.push_str(
        "<tr><th>iteration</th><th>outcome</th><th>size</th><th>median ms</th><th>spread</th><th>range ms</th><th>runs</th><th>achieved</th><th>fraction</th></tr>",
    );
    for h in &data.history {
        let kind = h.outcome_kind.as_deref().unwrap_or("skipped");
        let e = h.candidate_id.and_then(|c| data.evaluations.get(&c.0));
        let sizes = e.map_or(&[][..], |e| &e.sizes[..]);
        let rows = sizes.len().max(1);
        let _ = write!(
            s,
            r#"<tr class="{}"><td rowspan="{rows}">{}{}</td><td rowspan="{rows}">{}</td>"#,
            if kind == "correct" { "ok" } else { "failed" },
            h.iteration,
            if h.promoted { " kept" } else { "" },
            escape(kind),
        );
        match sizes.split_first() {
            None => s.push_str(r#"<td colspan="7">–</td></tr>"#),
            Some((first, rest)) => {
                s.push_str(&size_cells(first));
                s.push_str("</tr>");
                for size in rest {
                    let _ = write!(s, "<tr>{}</tr>", size_cells(size));
                }
            }
        }
        if let Some(why) = why_failed(e, &h.reason, kind) {
            let _ = write!(
                s,
                r#"<tr class="why"><td></td><td colspan="8">{why}</td></tr>"#
            );
        }
    }
    s.push_str("</table></section>");
    s
}

/// One size's cells: time, spread, range, runs, rate, fraction.
fn size_cells(size: &SizeResult) -> String {
    let t = &size.time;
    if !size.correct {
        return format!(
            "<td>{}</td><td colspan=\"6\">wrong: {} {:.2e}{}</td>",
            escape(&size.label),
            escape(&size.metric),
            size.error,
            size.tolerance
                .map(|tol| format!(" (tolerance {tol:.2e})"))
                .unwrap_or_default()
        );
    }
    format!(
        "<td>{}</td><td>{:.4}</td><td>{:.1}%</td><td>{:.4}–{:.4}</td><td>{}</td><td>{} {}</td><td>{:.1}%</td>",
        escape(&size.label),
        t.median_s * 1e3,
        t.spread * 100.0,
        t.min_s * 1e3,
        t.max_s * 1e3,
        t.samples_s.len(),
        number(size.achieved),
        escape(&size.unit),
        size.fraction * 100.0
    )
}

/// Why an attempt failed, as HTML: the evaluation's own account (a
/// compiler log in a block), else the iteration's reason (a proposer that
/// failed, an edit that did not apply).
fn why_failed(e: Option<&Evaluation>, reason: &str, kind: &str) -> Option<String> {
    if kind == "correct" {
        return None;
    }
    match e.and_then(|e| e.outcome.failure_detail(FAILURE_LINES)) {
        Some(detail) if detail.contains('\n') => Some(format!("<pre>{}</pre>", escape(&detail))),
        Some(detail) => Some(escape(&detail)),
        None if !reason.is_empty() => Some(escape(reason)),
        None => None,
    }
}

/// A tuning run's main result: every configuration tried, best first,
/// with its score and its ratio to the seed's (the table `kevo tune`
/// prints). Empty for other runs.
pub(crate) fn configurations_section(data: &RunData) -> String {
    if data.info.strategy != "tune" {
        return String::new();
    }
    let seed = data
        .history
        .iter()
        .find(|h| h.iteration == 0)
        .and_then(|h| h.score);
    let mut tried: Vec<_> = data.history.iter().filter(|h| h.iteration > 0).collect();
    tried.sort_by(|a, b| {
        b.score
            .unwrap_or(f64::NEG_INFINITY)
            .total_cmp(&a.score.unwrap_or(f64::NEG_INFINITY))
            .then(a.iteration.cmp(&b.iteration))
    });
    let mut s = format!(
        r#"<section id="configurations"><h2>Configurations</h2><p>{} configurations tried, best first; the seed scores {}.</p><table><tr><th>rank</th><th>configuration</th><th>trial</th><th>outcome</th><th>score</th><th>over the seed</th></tr>"#,
        tried.len(),
        seed.map_or_else(|| "–".into(), |s| format!("{s:.4}"))
    );
    for (rank, h) in tried.iter().enumerate() {
        // The stored reason is "CONFIGURATION: why it was or was not kept".
        let configuration = h
            .reason
            .split_once(": ")
            .map_or(h.reason.as_str(), |(c, _)| c);
        let _ = write!(
            s,
            r#"<tr class="configuration" data-iteration="{}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            h.iteration,
            rank + 1,
            escape(configuration),
            h.iteration,
            escape(h.outcome_kind.as_deref().unwrap_or("skipped")),
            h.score.map_or_else(|| "–".into(), |s| format!("{s:.4}")),
            match (h.score, seed) {
                (Some(x), Some(s)) if s > 0.0 => format!("{:.2}x", x / s),
                _ => "–".into(),
            }
        );
    }
    s.push_str("</table></section>");
    s
}
