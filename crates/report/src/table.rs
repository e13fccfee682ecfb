//! The results table across runs, in the shape of Metal-Sci's Table 3: one
//! row per run, then one per group (task, models, strategy, device) with
//! fast_p, the share of the group's finished runs whose in-distribution
//! speedup over the seed exceeds p.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::data::RunData;

/// The thresholds fast_p is reported at.
pub const FAST_P: [f64; 3] = [1.0, 1.5, 2.0];

/// One run's line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    pub run: String,
    pub task: String,
    /// Every model that proposed, `provider:model`, sorted.
    pub models: String,
    pub strategy: String,
    pub device: String,
    pub status: String,
    /// The winner's in-distribution score over the seed's.
    pub speedup: Option<f64>,
    /// The winner's score: its roofline fraction (geometric mean).
    pub best_fraction: Option<f64>,
    pub held_out_phi: Option<f64>,
    pub held_out_speedup: Option<f64>,
    pub held_out_verdict: Option<String>,
    /// Correct proposals over evaluated ones, the seed left out.
    pub correct_rate: Option<f64>,
    pub iterations: u32,
    /// None when some call's cost is not known.
    pub cost_usd: Option<f64>,
}

impl RunRow {
    pub fn of(data: &RunData) -> RunRow {
        let summary = data.info.summary.clone().unwrap_or_default();
        let mut models: Vec<String> = data
            .llm_calls
            .iter()
            .filter(|c| c.call.purpose == "propose" || c.call.purpose.is_empty())
            .map(|c| format!("{}:{}", c.call.provider, c.call.model))
            .collect();
        if models.is_empty() {
            models = data.info.config["llm"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|m| m.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
        }
        models.sort();
        models.dedup();
        // A cost only when every call's cost is known; a sum of the known
        // ones would pass off unpriced calls as free.
        let cost_usd = data
            .llm_calls
            .iter()
            .map(|c| c.call.cost_usd)
            .sum::<Option<f64>>();
        RunRow {
            run: data.info.id.0.clone(),
            task: data.info.task.clone(),
            models: models.join(" + "),
            strategy: data.info.strategy.clone(),
            device: data.info.device.clone(),
            status: data.info.status.as_str().to_string(),
            speedup: data.speedup(),
            best_fraction: summary["best_score"].as_f64(),
            // An evolution run stores Φ, a tuning run the best
            // configuration's fraction: the same figure.
            held_out_phi: summary["held_out"]["phi"]
                .as_f64()
                .or_else(|| summary["held_out"]["fraction"].as_f64()),
            held_out_speedup: summary["held_out"]["speedup"].as_f64(),
            held_out_verdict: summary["held_out"]["verdict"].as_str().map(String::from),
            correct_rate: kevo_store::correct_rate(&data.history),
            iterations: data.history.iter().map(|h| h.iteration).max().unwrap_or(0),
            cost_usd,
        }
    }
}

/// One group's line: runs with the same task, models, strategy and device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupRow {
    pub task: String,
    pub models: String,
    pub strategy: String,
    pub device: String,
    pub runs: usize,
    /// Runs with a speedup (finished).
    pub finished: usize,
    pub median_speedup: Option<f64>,
    pub median_held_out_speedup: Option<f64>,
    pub mean_correct_rate: Option<f64>,
    /// (p, share of finished runs with speedup > p).
    pub fast_p: Vec<(f64, f64)>,
    /// None when some run's cost is not known.
    pub cost_usd: Option<f64>,
}

pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

pub fn groups(rows: &[RunRow]) -> Vec<GroupRow> {
    let mut by: BTreeMap<(String, String, String, String), Vec<&RunRow>> = BTreeMap::new();
    for r in rows {
        by.entry((
            r.task.clone(),
            r.models.clone(),
            r.strategy.clone(),
            r.device.clone(),
        ))
        .or_default()
        .push(r);
    }
    by.into_iter()
        .map(|((task, models, strategy, device), runs)| {
            let speedups: Vec<f64> = runs.iter().filter_map(|r| r.speedup).collect();
            let rates: Vec<f64> = runs.iter().filter_map(|r| r.correct_rate).collect();
            GroupRow {
                task,
                models,
                strategy,
                device,
                runs: runs.len(),
                finished: speedups.len(),
                median_speedup: median(speedups.clone()),
                median_held_out_speedup: median(
                    runs.iter().filter_map(|r| r.held_out_speedup).collect(),
                ),
                mean_correct_rate: (!rates.is_empty())
                    .then(|| rates.iter().sum::<f64>() / rates.len() as f64),
                fast_p: FAST_P
                    .iter()
                    .map(|&p| {
                        let share = if speedups.is_empty() {
                            0.0
                        } else {
                            speedups.iter().filter(|s| **s > p).count() as f64
                                / speedups.len() as f64
                        };
                        (p, share)
                    })
                    .collect(),
                cost_usd: runs.iter().map(|r| r.cost_usd).sum(),
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for a terminal.
    Text,
    Markdown,
    Csv,
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Format::Text),
            "md" | "markdown" => Ok(Format::Markdown),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            other => Err(format!(
                "`{other}` is not a table format: text, md, csv or json"
            )),
        }
    }
}

fn x(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}x")).unwrap_or_else(|| "–".into())
}

fn f(v: Option<f64>, digits: usize) -> String {
    // `+ 0.0` turns -0.0 (a sum of zero costs can be one) into 0.0.
    v.map(|v| format!("{:.digits$}", v + 0.0))
        .unwrap_or_else(|| "–".into())
}

/// At most two models by name, then how many more: a replay run lists
/// every model its recording answered with.
fn few_models(models: &str) -> String {
    let names: Vec<&str> = models.split(" + ").collect();
    match names.len() {
        0..=2 => models.to_string(),
        n => format!("{} + {} more", names[..2].join(" + "), n - 2),
    }
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{:.0}%", v * 100.0))
        .unwrap_or_else(|| "–".into())
}

/// CSV quoting: fields with a comma, quote or newline are quoted.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn render(rows: &[RunRow], format: Format) -> String {
    let groups = groups(rows);
    match format {
        Format::Text => text(rows, &groups),
        Format::Json => serde_json::to_string_pretty(&serde_json::json!({
            "runs": rows,
            "groups": groups.iter().map(|g| {
                let mut v = serde_json::to_value(g).unwrap_or_default();
                v["fast_p"] = g.fast_p.iter().map(|(p, s)| (format!("fast_{p}"), serde_json::json!(s))).collect::<serde_json::Map<_, _>>().into();
                v
            }).collect::<Vec<_>>(),
        }))
        .unwrap_or_default()
            + "\n",
        Format::Csv => {
            let mut out = String::from(
                "run,task,models,strategy,device,status,speedup,best_fraction,held_out_phi,held_out_speedup,held_out_verdict,correct_rate,iterations,cost_usd\n",
            );
            let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            for r in rows {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    csv_field(&r.run),
                    csv_field(&r.task),
                    csv_field(&r.models),
                    csv_field(&r.strategy),
                    csv_field(&r.device),
                    r.status,
                    num(r.speedup),
                    num(r.best_fraction),
                    num(r.held_out_phi),
                    num(r.held_out_speedup),
                    csv_field(r.held_out_verdict.as_deref().unwrap_or("")),
                    num(r.correct_rate),
                    r.iterations,
                    num(r.cost_usd)
                );
            }
            out
        }
        Format::Markdown => {
            let mut out = String::from(
                "| run | task | models | strategy | device | confirmed speedup | winner's fraction | held-out Φ | held-out speedup | verdict | correct | iterations | cost (USD) |\n\
                 | --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |\n",
            );
            for r in rows {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.run,
                    r.task,
                    few_models(&r.models),
                    r.strategy,
                    r.device,
                    x(r.speedup),
                    f(r.best_fraction, 3),
                    f(r.held_out_phi, 3),
                    x(r.held_out_speedup),
                    r.held_out_verdict.as_deref().unwrap_or("–"),
                    pct(r.correct_rate),
                    r.iterations,
                    f(r.cost_usd, 4)
                );
            }
            out.push_str("\n| task | models | strategy | device | runs | median confirmed speedup | median held-out speedup | correct | fast_1 | fast_1.5 | fast_2 | cost (USD) |\n\
                          | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
            for g in &groups {
                let fast: Vec<String> = g
                    .fast_p
                    .iter()
                    .map(|(_, s)| format!("{:.0}%", s * 100.0))
                    .collect();
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} ({} finished) | {} | {} | {} | {} | {} |",
                    g.task,
                    few_models(&g.models),
                    g.strategy,
                    g.device,
                    g.runs,
                    g.finished,
                    x(g.median_speedup),
                    x(g.median_held_out_speedup),
                    pct(g.mean_correct_rate),
                    fast.join(" | "),
                    f(g.cost_usd, 4)
                );
            }
            let _ = write!(out, "\n{LEGEND}\n");
            out
        }
    }
}

/// What the columns measured, under the Markdown and terminal tables.
const LEGEND: &str = "Speedups are confirmed: the winner over the seed on fresh interleaved rounds. \
The winner's fraction of its roofline is its final pick's re-measured median (in-run for a run \
without a final pick). Held-out Φ and speedup: once, at the size no prompt showed.";

/// The Markdown table's cells as aligned columns (numbers right-aligned),
/// the two tables apart by a blank line.
fn text(rows: &[RunRow], groups: &[GroupRow]) -> String {
    let runs: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.run.clone(),
                r.task.clone(),
                few_models(&r.models),
                r.strategy.clone(),
                x(r.speedup),
                f(r.best_fraction, 3),
                f(r.held_out_phi, 3),
                x(r.held_out_speedup),
                r.held_out_verdict.clone().unwrap_or_else(|| "–".into()),
                pct(r.correct_rate),
                r.iterations.to_string(),
                f(r.cost_usd, 4),
            ]
        })
        .collect();
    let mut out = aligned(
        &[
            "run",
            "task",
            "models",
            "strategy",
            "confirmed",
            "fraction",
            "held-out Φ",
            "held-out",
            "verdict",
            "correct",
            "iter",
            "cost $",
        ],
        &runs,
        &[4, 5, 6, 7, 9, 10, 11],
    );
    let groups: Vec<Vec<String>> = groups
        .iter()
        .map(|g| {
            let mut cells = vec![
                g.task.clone(),
                few_models(&g.models),
                g.strategy.clone(),
                format!("{}/{}", g.finished, g.runs),
                x(g.median_speedup),
                x(g.median_held_out_speedup),
                pct(g.mean_correct_rate),
            ];
            cells.extend(g.fast_p.iter().map(|(_, s)| format!("{:.0}%", s * 100.0)));
            cells.push(f(g.cost_usd, 4));
            cells
        })
        .collect();
    out.push('\n');
    out.push_str(&aligned(
        &[
            "task", "models", "strategy", "finished", "median", "held-out", "correct", "fast_1",
            "fast_1.5", "fast_2", "cost $",
        ],
        &groups,
        &[3, 4, 5, 6, 7, 8, 9, 10],
    ));
    out.push('\n');
    out.push_str(LEGEND);
    out.push('\n');
    out
}

/// A header and rows padded to each column's widest cell; the columns in
/// `right` are right-aligned.
fn aligned(header: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = " ".repeat(widths[i].saturating_sub(c.chars().count()));
                if right.contains(&i) {
                    format!("{pad}{c}")
                } else {
                    format!("{c}{pad}")
                }
            })
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(task: &str, speedup: Option<f64>) -> RunRow {
        RunRow {
            run: format!("{task}-{speedup:?}"),
            task: task.into(),
            models: "openai:gpt-test".into(),
            strategy: "one_plus_one".into(),
            device: "GPU".into(),
            status: "finished".into(),
            speedup,
            best_fraction: Some(0.5),
            held_out_phi: None,
            held_out_speedup: speedup.map(|s| s * 0.9),
            held_out_verdict: None,
            correct_rate: Some(0.5),
            iterations: 10,
            cost_usd: Some(0.25),
        }
    }

    #[test]
    fn fast_p_is_the_share_of_finished_runs_above_p() {
        let rows = vec![
            row("saxpy", Some(0.9)),
            row("saxpy", Some(1.2)),
            row("saxpy", Some(1.6)),
            row("saxpy", Some(2.5)),
            row("saxpy", None),
            row("nbody", Some(3.0)),
        ];
        let g = groups(&rows);
        assert_eq!(g.len(), 2);
        let saxpy = g.iter().find(|g| g.task == "saxpy").unwrap();
        assert_eq!((saxpy.runs, saxpy.finished), (5, 4));
        assert_eq!(saxpy.fast_p, vec![(1.0, 0.75), (1.5, 0.5), (2.0, 0.25)]);
        assert_eq!(saxpy.median_speedup, Some(1.4));
        assert!((saxpy.cost_usd.unwrap() - 1.25).abs() < 1e-12);
        let mut unpriced = rows.clone();
        unpriced[0].cost_usd = None;
        assert_eq!(
            groups(&unpriced)
                .iter()
                .find(|g| g.task == "saxpy")
                .unwrap()
                .cost_usd,
            None,
            "a group with an unpriced run has no cost total"
        );
        let md = render(&rows, Format::Markdown);
        assert!(
            md.contains(
                "| saxpy | openai:gpt-test | one_plus_one | GPU | 5 (4 finished) | 1.40x |"
            ),
            "{md}"
        );
        assert!(md.contains("| 75% | 50% | 25% |"), "{md}");
        let csv = render(&rows, Format::Csv);
        assert_eq!(csv.lines().count(), 7);
        let json: serde_json::Value = serde_json::from_str(&render(&rows, Format::Json)).unwrap();
        assert_eq!(json["groups"][1]["fast_p"]["fast_1.5"], 0.5);
    }

    #[test]
    fn a_terminal_table_is_aligned_with_no_negative_zero_and_few_models() {
        let mut rows = vec![row("saxpy", Some(1.25)), row("nbody", None)];
        rows[0].cost_usd = Some(-0.0);
        rows[1].models = "replay:a + replay:b + replay:c + replay:d".into();
        let text = render(&rows, Format::Text);
        assert!(!text.contains("-0.0000"), "{text}");
        assert!(!text.contains('|'), "{text}");
        assert!(text.contains("replay:a + replay:b + 2 more"), "{text}");
        let lines: Vec<&str> = text.lines().take(3).collect();
        let column = |l: &str| l.find("confirmed").or_else(|| l.find("1.25x"));
        // The speedup column's right edge is the same on every line.
        let header_end = lines[0].find("confirmed").unwrap() + "confirmed".len();
        let value_end = lines[1].find("1.25x").unwrap() + "1.25x".len();
        assert_eq!(header_end, value_end, "{text}");
        assert!(
            column(lines[2]).is_none() && lines[2].contains('–'),
            "{text}"
        );
        let md = render(&rows, Format::Markdown);
        assert!(md.contains("| 0.0000 |"), "{md}");
    }

    #[test]
    fn csv_fields_with_commas_are_quoted() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
