//! The run report: one self-contained HTML page (inline CSS and SVG, no
//! script needed, nothing fetched), a reproducible record of the run.

use std::collections::BTreeMap;
use std::fmt::Write;

use kevo_descriptors::{Axis, Descriptors, LEVELS};
use serde_json::{Value, json};

use crate::data::{Point, RunData};
use crate::embed::json_for_html;
use crate::headline::Headline;
use crate::svg::{self, Along, escape, number};

const STYLE: &str = include_str!("report.css");

/// Options of one rendering.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// Extra markup at the end of `<body>` (the dashboard's refresh script).
    pub tail: String,
    /// Where the page links "all runs" (the dashboard's run list).
    pub home: Option<String>,
}

/// The whole report of one run.
pub fn render_report(data: &RunData) -> String {
    render_report_with(data, &RenderOptions::default())
}

pub fn render_report_with(data: &RunData, options: &RenderOptions) -> String {
    let info = &data.info;
    let points = data.points();
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kevo run {}</title><style>{STYLE}</style></head><body>",
        escape(&info.id.0)
    );
    if let Some(home) = &options.home {
        let _ = write!(
            page,
            r#"<p class="nav"><a href="{}">all runs</a></p>"#,
            escape(home)
        );
    }
    let _ = write!(
        page,
        "<h1>{} <span class=\"muted\">{}</span></h1>",
        escape(&info.task),
        escape(&info.id.0)
    );
    page.push_str(&overview(data));
    page.push_str(&charts_section(data, &points));
    page.push_str(&crate::roofline::roofline_section(data));
    page.push_str(&strategy_section(data, &points));
    page.push_str(&lineage_section(data));
    page.push_str(&crate::attempts::configurations_section(data));
    page.push_str(&crate::attempts::attempts_section(data));
    page.push_str(&diff_section(data));
    page.push_str(&held_out_section(data));
    page.push_str(&models_section(data));
    page.push_str(&crate::tools::tools_section(data));
    page.push_str(&model_choice_section(data));
    page.push_str(&prompt_variants_section(data));
    page.push_str(&phases_section(data));
    page.push_str(&settings_section(data));
    // Inert whatever the data holds: no `<`, `>` or `&` is left in it.
    let machine = json_for_html(&machine_readable(data, &points));
    let _ = write!(
        page,
        r#"<script type="application/json" id="kevo-report-data">{machine}</script>"#
    );
    page.push_str(&options.tail);
    page.push_str("</body></html>\n");
    page
}

/// The numbers the page shows, for tools (and tests) that read it.
fn machine_readable(data: &RunData, points: &[Point]) -> Value {
    json!({
        "run": data.info.id.0,
        "task": data.info.task,
        "strategy": data.info.strategy,
        "device": data.info.device,
        "status": data.info.status,
        "seed": data.seed.map(|c| c.0),
        "winner": data.winner.map(|c| c.0),
        "points": points,
        "speedup": data.speedup(),
        "held_out": data.held_out.iter().map(|(h, _)| json!({
            "role": h.role.as_str(), "phi": h.phi, "fraction": h.fraction,
            "speedup": h.speedup, "outcome": h.outcome_kind,
        })).collect::<Vec<_>>(),
        "models": model_totals(data).into_iter().map(|(k, t)| json!({
            "model": k, "calls": t.calls, "errors": t.errors,
            "input_tokens": t.input, "output_tokens": t.output,
            "reasoning_tokens": t.reasoning, "cost_usd": t.cost,
        })).collect::<Vec<_>>(),
    })
}

fn row(cells: &[String]) -> String {
    let mut s = String::from("<tr>");
    for c in cells {
        let _ = write!(s, "<td>{c}</td>");
    }
    s.push_str("</tr>");
    s
}

fn header(cells: &[&str]) -> String {
    let mut s = String::from("<tr>");
    for c in cells {
        let _ = write!(s, "<th>{c}</th>");
    }
    s.push_str("</tr>");
    s
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".into())
}

fn overview(data: &RunData) -> String {
    let info = &data.info;
    let summary = info.summary.clone().unwrap_or(Value::Null);
    let verdict = summary["held_out"]["verdict"].as_str().unwrap_or("–");
    let headline = Headline::of(&summary);
    let mut s = String::from(r#"<section id="overview"><table class="facts">"#);
    let facts: Vec<(&str, String)> = vec![
        ("status", info.status.as_str().to_string()),
        ("strategy", escape(&info.strategy)),
        (
            "device",
            format!("{} ({})", escape(&info.device), escape(&info.backend)),
        ),
        ("sizes", escape(&info.size_set.to_string())),
        (
            "started",
            info.created_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        ),
        ("speedup", speedup_fact(data, headline.as_ref())),
        (
            "winner's score",
            match headline.as_ref().and_then(Headline::score_text) {
                Some(text) => escape(&text),
                None => "–".into(),
            },
        ),
        ("held-out verdict", escape(verdict)),
        ("spent", spent_text(&summary)),
        (
            "stopped",
            escape(summary["stop_reason"].as_str().unwrap_or("–")),
        ),
    ];
    for (k, v) in facts {
        let _ = write!(
            s,
            "<tr><th>{k}</th><td class=\"fact\" data-fact=\"{k}\">{v}</td></tr>"
        );
    }
    s.push_str("</table></section>");
    s
}

/// The run's one headline speedup, named by its measurement; a run that
/// has not finished says so rather than showing a ratio of in-run scores.
fn speedup_fact(data: &RunData, headline: Option<&Headline>) -> String {
    match (headline, data.speedup()) {
        (Some(h), _) => escape(&h.speedup_text()),
        (None, Some(x)) => format!("{x:.2}x the seed, in-run"),
        (None, None) => "– (not finished)".into(),
    }
}

/// Tokens, cost and time spent, saying "not tracked" where calls reported
/// no usage or no cost rather than showing their zeros.
fn spent_text(summary: &Value) -> String {
    let spent = &summary["spent"];
    let unknown_usage = summary["unknown_usage_calls"].as_u64().unwrap_or(0);
    let unknown_cost = summary["unknown_cost_calls"].as_u64().unwrap_or(0);
    let tokens = if unknown_usage > 0 {
        format!("tokens not tracked for {unknown_usage} call(s), ")
    } else {
        String::new()
    };
    let tokens = format!(
        "{tokens}{} input + {} output tokens",
        spent["input_tokens"].as_u64().unwrap_or(0),
        spent["output_tokens"].as_u64().unwrap_or(0)
    );
    let cost = if unknown_cost > 0 {
        format!(
            "${:.4} (cost not known for {unknown_cost} call(s))",
            spent["cost_usd"].as_f64().unwrap_or(0.0)
        )
    } else {
        format!("${:.4}", spent["cost_usd"].as_f64().unwrap_or(0.0))
    };
    format!(
        "{tokens}, {cost}, {:.0} s",
        spent["wall_s"].as_f64().unwrap_or(0.0)
    )
}

fn legend(points: &[Point]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for p in points {
        if !seen.contains(&p.outcome) {
            seen.push(p.outcome);
        }
    }
    let mut s = String::from(r#"<p class="legend">"#);
    for o in seen {
        let _ = write!(
            s,
            r#"<span><i style="background:{}"></i>{}</span>"#,
            svg::outcome_colour(o),
            svg::outcome_label(o)
        );
    }
    s.push_str(r#"<span><i class="ring"></i>kept (promoted)</span><span><i class="line"></i>best so far</span></p>"#);
    s
}

fn charts_section(data: &RunData, points: &[Point]) -> String {
    let mut s = String::from(r#"<section id="progress"><h2>Progress</h2>"#);
    if points.is_empty() {
        s.push_str("<p>No proposals yet.</p></section>");
        return s;
    }
    s.push_str(&legend(points));
    s.push_str(&svg::progress(points, Along::Iteration));
    s.push_str(&svg::progress(points, Along::WallTime));
    if points.iter().any(|p| p.cost_usd > 0.0) {
        s.push_str(&svg::progress(points, Along::Cost));
    } else {
        let _ = write!(
            s,
            "<p class=\"note\">No model cost was recorded for run {} (a replayed, local or free model), so there is no chart against cost.</p>",
            escape(&data.info.id.0)
        );
    }
    s.push_str("</section>");
    s
}

fn strategy_section(data: &RunData, points: &[Point]) -> String {
    let mut s = String::from(r#"<section id="strategy"><h2>Search</h2>"#);
    match data.info.strategy.as_str() {
        "map_elites" => {
            s.push_str("<p>The archive: for each pair of behavioural descriptors, the best correct score found in each cell (the third descriptor at any level).</p>");
            let best: BTreeMap<String, f64> = points
                .iter()
                .filter_map(|p| Some((p.cell.clone()?, p.score?)))
                .fold(BTreeMap::new(), |mut m, (c, v)| {
                    let e = m.entry(c).or_insert(v);
                    *e = e.max(v);
                    m
                });
            for (x, y) in [
                (Axis::Algorithm, Axis::Memory),
                (Axis::Coordination, Axis::Memory),
                (Axis::Coordination, Axis::Algorithm),
            ] {
                let mut cells = vec![vec![None; LEVELS as usize]; LEVELS as usize];
                for (cell, score) in &best {
                    let Ok(d) = cell.parse::<Descriptors>() else {
                        continue;
                    };
                    let slot: &mut Option<f64> =
                        &mut cells[d.level(y) as usize][d.level(x) as usize];
                    *slot = Some(slot.map_or(*score, |v: f64| v.max(*score)));
                }
                let names = |a: Axis| -> Vec<String> {
                    (0..LEVELS)
                        .map(|l| format!("{l}: {}", a.level_name(l)))
                        .collect()
                };
                s.push_str(&svg::heatmap(
                    &format!("archive-{}-{}", y.name(), x.name()),
                    (x.name(), &names(x)),
                    (y.name(), &names(y)),
                    &cells,
                ));
            }
        }
        "islands" => {
            let mut by_island: BTreeMap<i64, Vec<(f64, f64)>> = BTreeMap::new();
            let mut best: BTreeMap<i64, f64> = BTreeMap::new();
            for p in points {
                let (Some(island), Some(score)) = (p.island, p.score) else {
                    continue;
                };
                let b = best.entry(island).or_insert(score);
                *b = b.max(score);
                by_island
                    .entry(island)
                    .or_default()
                    .push((p.iteration as f64, *b));
            }
            let series: Vec<(String, Vec<(f64, f64)>)> = by_island
                .into_iter()
                .map(|(i, pts)| (format!("island {i}"), pts))
                .collect();
            s.push_str("<p>Each island's best score so far.</p>");
            s.push_str(&svg::lines(
                "islands",
                "best score per island",
                &series,
                "best score so far",
            ));
        }
        other => {
            let _ = write!(
                s,
                "<p>Strategy {}: no archive or island view (those are drawn for map_elites and islands runs).</p>",
                escape(other)
            );
        }
    }
    s.push_str("</section>");
    s
}

fn lineage_section(data: &RunData) -> String {
    let mut s = String::from(r#"<section id="lineage"><h2>Lineage of the winner</h2><table>"#);
    s.push_str(&header(&[
        "iteration",
        "candidate",
        "model",
        "in-run score",
        "outcome",
    ]));
    for c in data.lineage() {
        let e = data.evaluations.get(&c.id.0);
        let _ = write!(
            s,
            "{}",
            row(&[
                c.iteration.to_string(),
                c.id.0.to_string(),
                escape(c.model.as_deref().or(c.provider.as_deref()).unwrap_or("–")),
                opt(e.and_then(|e| e.outcome.score()), number),
                escape(&e.map(|e| e.outcome.kind().to_string()).unwrap_or_default()),
            ])
        );
    }
    s.push_str("</table></section>");
    s
}

fn diff_section(data: &RunData) -> String {
    let mut s = String::from(r#"<section id="diff"><h2>Seed and winner</h2>"#);
    let source = |c: Option<kevo_store::CandidateId>| {
        c.and_then(|c| data.candidates.get(&c.0))
            .map(|c| c.source.clone())
    };
    let (Some(seed), Some(winner)) = (source(data.seed), source(data.winner)) else {
        s.push_str("<p>No winner yet.</p></section>");
        return s;
    };
    if data.seed == data.winner {
        s.push_str("<p>The seed was kept: nothing beat it.</p></section>");
        return s;
    }
    s.push_str(r#"<table class="diff"><tr><th>seed</th><th>winner</th></tr>"#);
    let diff = similar::TextDiff::from_lines(&seed, &winner);
    for op in diff.ops() {
        for change in diff.iter_changes(op) {
            let text = escape(change.value().trim_end_matches('\n'));
            let (l, r) = match change.tag() {
                similar::ChangeTag::Equal => (
                    format!("<td class=\"same\">{text}</td>"),
                    format!("<td class=\"same\">{text}</td>"),
                ),
                similar::ChangeTag::Delete => {
                    (format!("<td class=\"del\">{text}</td>"), "<td></td>".into())
                }
                similar::ChangeTag::Insert => {
                    ("<td></td>".into(), format!("<td class=\"ins\">{text}</td>"))
                }
            };
            let _ = write!(s, "<tr>{l}{r}</tr>");
        }
    }
    s.push_str("</table></section>");
    s
}

fn held_out_section(data: &RunData) -> String {
    let mut s = String::from(r#"<section id="held-out"><h2>Held-out size</h2>"#);
    if data.held_out.is_empty() {
        s.push_str("<p>Not measured (the run is not finished, or it was skipped).</p></section>");
        return s;
    }
    s.push_str("<table>");
    s.push_str(&header(&[
        "role",
        "candidate",
        "size",
        "Φ",
        "fraction",
        "speedup",
        "outcome",
    ]));
    for (h, e) in &data.held_out {
        s.push_str(&row(&[
            h.role.as_str().to_string(),
            h.candidate_id.0.to_string(),
            escape(
                &e.as_ref()
                    .and_then(|e| e.sizes.first().map(|x| x.label.clone()))
                    .unwrap_or_default(),
            ),
            opt(h.phi, number),
            opt(h.fraction, |f| format!("{:.1}%", f * 100.0)),
            opt(h.speedup, |v| format!("{v:.2}x")),
            escape(&h.outcome_kind),
        ]));
    }
    s.push_str("</table>");
    if let Some(v) = data.info.summary.as_ref().map(|s| &s["held_out"])
        && let Some(reason) = v["verdict_reason"].as_str()
    {
        let _ = write!(
            s,
            "<p>Verdict: <b>{}</b> ({})</p>",
            escape(v["verdict"].as_str().unwrap_or("")),
            escape(reason)
        );
    }
    s.push_str("</section>");
    s
}

#[derive(Default)]
struct ModelTotals {
    calls: u64,
    errors: u64,
    input: u64,
    output: u64,
    reasoning: u64,
    cost: f64,
    latency_s: f64,
}

fn model_totals(data: &RunData) -> BTreeMap<String, ModelTotals> {
    let mut totals: BTreeMap<String, ModelTotals> = BTreeMap::new();
    for c in &data.llm_calls {
        let t = totals
            .entry(format!("{}:{}", c.call.provider, c.call.model))
            .or_default();
        t.calls += 1;
        t.errors += u64::from(c.call.error.is_some());
        t.input += c.call.input_tokens.unwrap_or(0);
        t.output += c.call.output_tokens.unwrap_or(0);
        t.reasoning += c.call.reasoning_tokens.unwrap_or(0);
        t.cost += c.call.cost_usd.unwrap_or(0.0);
        t.latency_s += c.call.latency_s;
    }
    totals
}

fn models_section(data: &RunData) -> String {
    let mut s = String::from(r#"<section id="models"><h2>Models: tokens and cost</h2><table>"#);
    s.push_str(&header(&[
        "model",
        "calls",
        "failed",
        "input tokens",
        "output tokens",
        "reasoning tokens",
        "cost (USD)",
        "latency (s)",
    ]));
    for (model, t) in model_totals(data) {
        s.push_str(&row(&[
            escape(&model),
            t.calls.to_string(),
            t.errors.to_string(),
            t.input.to_string(),
            t.output.to_string(),
            t.reasoning.to_string(),
            format!("{:.4}", t.cost),
            format!("{:.1}", t.latency_s),
        ]));
    }
    s.push_str("</table></section>");
    s
}

/// The model bandit's arms (`--model-choice ucb`), from the checkpoint's
/// ensemble state; nothing for other runs.
fn model_choice_section(data: &RunData) -> String {
    let Some(state) = data.checkpoint.as_ref().and_then(|c| c.rng_state.as_ref()) else {
        return String::new();
    };
    let Some(arms) = state["bandit"]["arms"].as_array() else {
        return String::new();
    };
    let choice = data.info.config["model_choice"].as_str().unwrap_or("ucb");
    let mut s = format!(
        r#"<section id="model-choice"><h2>Model choice ({})</h2><p>Each call's reward is the relative gain of its candidate over the parent it improved (0 for a failure, a wrong kernel or a duplicate), at most 1; the bandit chose each call's model by UCB1 on these rewards.</p><table>"#,
        escape(choice)
    );
    s.push_str(&header(&[
        "model",
        "calls",
        "rewarded",
        "mean reward",
        "cost (USD)",
    ]));
    for (i, a) in arms.iter().enumerate() {
        let label = state["labels"][i]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("model {i}"));
        let rewarded = a["rewarded"].as_u64().unwrap_or(0);
        let mean = match rewarded {
            0 => 0.0,
            n => a["reward_sum"].as_f64().unwrap_or(0.0) / n as f64,
        };
        s.push_str(&row(&[
            escape(&label),
            a["pulls"].as_u64().unwrap_or(0).to_string(),
            rewarded.to_string(),
            format!("{mean:.4}"),
            format!("{:.4}", a["cost_usd"].as_f64().unwrap_or(0.0)),
        ]));
    }
    s.push_str("</table></section>");
    s
}

/// The prompt archive of a meta-prompted run (`--meta-prompter`): each
/// variant's origin, use and fitness, and the meta-prompter's diagnosis.
fn prompt_variants_section(data: &RunData) -> String {
    let Some(archive) = data
        .checkpoint
        .as_ref()
        .and_then(|c| c.strategy_state.as_ref())
        .map(|s| &s["prompts"])
        .filter(|a| a.is_object())
    else {
        return String::new();
    };
    let mut s = format!(
        r#"<section id="prompt-variants"><h2>Prompt variants</h2><p>{} meta-prompter call(s). A variant's fitness is the best score of the kernels generated with it; proposals sampled the variants, new ones first, then mostly the fittest.</p><table>"#,
        archive["meta_calls"].as_u64().unwrap_or(0)
    );
    s.push_str(&header(&[
        "variant",
        "from",
        "made before proposal",
        "edited",
        "proposals",
        "kernels",
        "fitness",
        "diagnosis",
    ]));
    for v in archive["variants"].as_array().into_iter().flatten() {
        let edited: Vec<&str> = v["edited"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e.as_str())
            .collect();
        s.push_str(&row(&[
            format!("v{}", v["id"].as_u64().unwrap_or(0)),
            v["parent"]
                .as_u64()
                .map_or_else(|| "start".to_string(), |p| format!("v{p}")),
            v["created_at"].as_u64().unwrap_or(0).to_string(),
            escape(&edited.join(", ")),
            v["uses"].as_u64().unwrap_or(0).to_string(),
            v["candidates"]
                .as_array()
                .map_or(0, |c| c.len())
                .to_string(),
            v["fitness"]
                .as_f64()
                .map_or_else(|| "–".to_string(), |f| format!("{f:.4}")),
            escape(v["diagnosis"].as_str().unwrap_or("")),
        ]));
    }
    s.push_str("</table></section>");
    s
}

fn phases_section(data: &RunData) -> String {
    let mut total = kevo_eval::WallTimes::default();
    for e in data.evaluations.values() {
        total.compile_s += e.wall.compile_s;
        total.inputs_s += e.wall.inputs_s;
        total.reference_s += e.wall.reference_s;
        total.device_s += e.wall.device_s;
        total.check_s += e.wall.check_s;
        total.total_s += e.wall.total_s;
    }
    let mut s = format!(
        r#"<section id="phases"><h2>Evaluation time per phase</h2><p>{} in-distribution evaluations, seconds summed.</p><table>"#,
        data.evaluations.len()
    );
    s.push_str(&header(&[
        "compile",
        "inputs",
        "CPU reference",
        "device",
        "check",
        "total",
    ]));
    s.push_str(&row(&[
        format!("{:.2}", total.compile_s),
        format!("{:.2}", total.inputs_s),
        format!("{:.2}", total.reference_s),
        format!("{:.2}", total.device_s),
        format!("{:.2}", total.check_s),
        format!("{:.2}", total.total_s),
    ]));
    s.push_str("</table>");
    if let Some(r) = data.info.summary.as_ref().map(|s| &s["remeasure"])
        && r["evaluations"].as_u64().is_some()
    {
        let _ = write!(
            s,
            "<p>Re-measurement, apart: {} evaluations, {:.2} s on the device, {:.2} s wall.</p>",
            r["evaluations"].as_u64().unwrap_or(0),
            r["device_s"].as_f64().unwrap_or(0.0),
            r["wall_s"].as_f64().unwrap_or(0.0)
        );
    }
    s.push_str("</section>");
    s
}

fn settings_section(data: &RunData) -> String {
    let config = &data.info.config;
    let provenance = &config["provenance"];
    let mut s = String::from(
        r#"<section id="settings"><h2>Settings and provenance</h2><table class="facts">"#,
    );
    let device = &provenance["device"];
    let c = &provenance["ceilings"];
    let rows = [
        (
            "kevo",
            provenance["kevo"].as_str().unwrap_or("–").to_string(),
        ),
        (
            "device",
            format!(
                "{} ({}, {})",
                device["name"].as_str().unwrap_or(&data.info.device),
                device["platform"].as_str().unwrap_or(&data.info.backend),
                device["driver_version"]
                    .as_str()
                    .unwrap_or("driver unknown")
            ),
        ),
        (
            "ceilings",
            format!(
                "{} GB/s DRAM, {} GFLOPS FP32 ({})",
                opt(c["bandwidth_gbs"].as_f64(), number),
                opt(c["fp32_gflops"].as_f64(), number),
                c["source"]["kind"]
                    .as_str()
                    .unwrap_or("source not recorded")
            ),
        ),
        (
            "task",
            format!(
                "{} (content hash {})",
                provenance["task"]["name"]
                    .as_str()
                    .unwrap_or(&data.info.task),
                provenance["task"]["content_hash"].as_str().unwrap_or("–")
            ),
        ),
        ("models", config["llm"].to_string()),
    ];
    for (k, v) in rows {
        let _ = write!(s, "<tr><th>{k}</th><td>{}</td></tr>", escape(&v));
    }
    s.push_str(
        "</table><details><summary>every setting (the run's stored configuration)</summary><pre>",
    );
    s.push_str(&escape(
        &serde_json::to_string_pretty(config).unwrap_or_default(),
    ));
    s.push_str("</pre></details></section>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use kevo_store::{CandidateId, HistoryRow, RunId, StoredCandidate};

    /// A run of `strategy` whose proposal k (k = 1..=n) is correct with
    /// score k / 10 on island k % 2, in cell m{k%3}-a0-c0.
    fn run(strategy: &str, n: u32) -> RunData {
        let mut history = Vec::new();
        let mut candidates = std::collections::BTreeMap::new();
        for k in 0..=n {
            let id = i64::from(k) + 1;
            history.push(HistoryRow {
                iteration: k,
                candidate_id: Some(CandidateId(id)),
                outcome_kind: Some("correct".into()),
                score: Some(f64::from(k.max(1)) / 10.0),
                promoted: true,
                incumbent_id: Some(CandidateId(id)),
                island: Some(i64::from(k % 2)),
                cell: Some(format!("m{}-a0-c0", k % 3)),
                reason: "kept".into(),
            });
            candidates.insert(
                id,
                StoredCandidate {
                    id: CandidateId(id),
                    run_id: RunId("r".into()),
                    iteration: k,
                    parents: if k == 0 {
                        vec![]
                    } else {
                        vec![CandidateId(id - 1)]
                    },
                    island: Some(i64::from(k % 2)),
                    cell: None,
                    descriptors: None,
                    source: format!("kernel {k}\n"),
                    source_sha256: String::new(),
                    provider: None,
                    model: None,
                    created_at: Utc::now(),
                },
            );
        }
        RunData {
            checkpoint: None,
            info: crate::data::test_info(strategy),
            history,
            candidates,
            evaluations: Default::default(),
            llm_calls: Vec::new(),
            held_out: Vec::new(),
            seed: Some(CandidateId(1)),
            winner: Some(CandidateId(i64::from(n) + 1)),
        }
    }

    /// Model names a server could send: markup that would end or comment
    /// out a script element, terminal escapes, bidi overrides.
    const HOSTILE: &[&str] = &[
        "x<!--<script>alert(1)</script>\u{1b}]0;pwned\u{7}\u{1b}[2J",
        "</script><script>alert(2)</script>",
        "<!--<script>",
        "x</SCRIPT ><img src=x onerror=alert(3)>",
        "a\u{2028}b\u{2029}c & d\u{202e}e",
    ];

    #[test]
    fn a_hostile_model_name_stays_inert_in_the_page() {
        for evil in HOSTILE {
            let mut data = run("one_plus_one", 2);
            for c in data.candidates.values_mut() {
                c.model = Some(evil.to_string());
                c.provider = Some("openai".into());
            }
            data.llm_calls.push(kevo_store::StoredLlmCall {
                id: kevo_store::LlmCallId(1),
                run_id: RunId("r".into()),
                candidate_id: Some(CandidateId(2)),
                iteration: 1,
                call: kevo_store::NewLlmCall {
                    purpose: "propose".into(),
                    provider: "openai".into(),
                    model: evil.to_string(),
                    prompt_system: String::new(),
                    prompt_user: String::new(),
                    response: Some("```c\n```".into()),
                    reasoning: None,
                    input_tokens: Some(1),
                    output_tokens: Some(1),
                    reasoning_tokens: None,
                    cost_usd: Some(0.01),
                    latency_s: 1.0,
                    error: None,
                    // A tool conversation whose names and results are as
                    // hostile as the model's name.
                    transcript: Some(serde_json::json!({
                        "turns": [{"text": evil, "usage": {"input_tokens": 1, "output_tokens": 1},
                                   "latency_s": 1.0,
                                   "calls": [{"name": evil, "arguments": evil, "result": evil,
                                              "is_error": true, "device_s": 0.5}]}],
                        "calls": 1, "device_s": 0.5,
                        "usage": {"input_tokens": 1, "output_tokens": 1}, "ended": evil,
                    })),
                },
                created_at: Utc::now(),
            });
            let tail = "<script>document.body.dataset.ran = '1';</script>";
            let page = render_report_with(
                &data,
                &RenderOptions {
                    tail: tail.into(),
                    home: None,
                },
            );
            // Exactly the data block and the tail are script elements, and
            // the data block ends where it should: the tail follows it.
            assert_eq!(page.matches("<script").count(), 2, "{evil}");
            let open = r#"<script type="application/json" id="kevo-report-data">"#;
            let start = page.find(open).unwrap() + open.len();
            let block = &page[start..start + page[start..].find("</script>").unwrap()];
            assert!(
                page[start + block.len()..].starts_with(&format!("</script>{tail}")),
                "{evil}"
            );
            for bad in ["<", ">", "&", "\u{2028}", "\u{2029}"] {
                assert!(!block.contains(bad), "{bad:?} in {block}");
            }
            let machine: Value = serde_json::from_str(block).unwrap();
            assert_eq!(
                machine["models"][0]["model"],
                format!("openai:{evil}"),
                "the data block holds the name as it was stored"
            );
            // In the page's text the name is escaped markup, and the
            // terminal and bidi controls are replaced.
            assert!(!page.contains("<!--"), "{evil}");
            assert!(!page.contains("<img"), "{evil}");
            for c in ['\u{1b}', '\u{7}', '\u{202e}'] {
                assert!(!page.contains(c), "{c:?} in the page");
            }
            assert!(page.contains(r#"<section id="tools">"#), "{evil}");
            assert!(page.contains("1 tool call (0 refused)"), "{evil}");
        }
    }

    #[test]
    fn spend_says_what_was_not_tracked() {
        let tracked = json!({"spent": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.5, "wall_s": 3.0}});
        assert_eq!(
            spent_text(&tracked),
            "10 input + 5 output tokens, $0.5000, 3 s"
        );
        let untracked = json!({"spent": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "wall_s": 12.0},
                               "unknown_usage_calls": 16, "unknown_cost_calls": 16});
        assert_eq!(
            spent_text(&untracked),
            "tokens not tracked for 16 call(s), 0 input + 0 output tokens, $0.0000 (cost not known for 16 call(s)), 12 s"
        );
    }

    #[test]
    fn island_runs_draw_one_best_so_far_line_per_island() {
        let page = render_report(&run("islands", 6));
        let chart = &page[page.find("id=\"islands\"").unwrap()..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        assert_eq!(chart.matches("class=\"series\"").count(), 2, "{chart}");
        assert!(
            chart.contains("data-series=\"island 0\"")
                && chart.contains("data-series=\"island 1\"")
        );
        assert!(!page.contains("class=\"chart heatmap\""));
        // The lineage runs from the winner back to the seed.
        let lineage = &page[page.find("<section id=\"lineage\">").unwrap()..];
        let lineage = &lineage[..lineage.find("</section>").unwrap()];
        assert_eq!(lineage.matches("<tr>").count(), 1 + 7, "{lineage}");
    }

    #[test]
    fn map_elites_runs_draw_the_archive_with_each_cells_best() {
        let page = render_report(&run("map_elites", 6));
        assert_eq!(page.matches("class=\"chart heatmap\"").count(), 3);
        let chart = &page[page.find("id=\"archive-memory-algorithm\"").unwrap()..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        // Column 0 (algorithm 0): memory 0 holds iterations 0, 3, 6 (best
        // 0.6), memory 1 holds 1, 4 (0.4), memory 2 holds 2, 5 (0.5).
        for (row, best) in [(0, "0.6"), (1, "0.4"), (2, "0.5")] {
            assert!(
                chart.contains(&format!(
                    "data-row=\"{row}\" data-column=\"0\" data-score=\"{best}\""
                )),
                "row {row}: {chart}"
            );
        }
        assert!(chart.contains("data-row=\"3\" data-column=\"0\" data-score=\"\""));
        assert!(!page.contains("id=\"islands\""));
    }
}
