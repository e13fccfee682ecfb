//! The report's roofline section: per size, the seed's and the winner's
//! achieved rate on a logarithmic axis (a seed at 2% and a winner at 400%
//! of DRAM are both readable), every ceiling kevo measured drawn as a
//! labelled line (each cache level's copy bandwidth and DRAM, or the FP32
//! peak), and a table with each size's time and spread, achieved rate and
//! fraction of the ceiling of the level its working set lives in.

use std::fmt::Write;

use kevo_eval::{Evaluation, SizeResult};
use kevo_store::HeldOutRole;
use serde_json::Value;

use crate::data::RunData;
use crate::svg::{escape, number, series_colour};

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 320.0;
const LEFT: f64 = 64.0;
/// Room right of the plot for the ceilings' labels, so no label is drawn
/// over its line or over a bar.
const RIGHT: f64 = 150.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 40.0;
/// Least vertical distance between two ceiling labels, in pixels.
const LABEL_GAP: f64 = 13.0;

/// One size's bars: (series, its result at that size).
type Group<'a> = (String, Vec<(&'static str, &'a SizeResult)>);

pub(crate) fn roofline_section(data: &RunData) -> String {
    let mut s = String::from(r#"<section id="roofline"><h2>Roofline per size</h2>"#);
    let groups = groups(data);
    let Some(unit) = groups
        .iter()
        .flat_map(|g| &g.1)
        .map(|b| b.1.unit.clone())
        .next()
    else {
        s.push_str("<p>No correct evaluation of the seed is stored.</p></section>");
        return s;
    };
    let stored = &data.info.config["provenance"]["ceilings"];
    let ceilings = ceilings(stored, &unit);
    s.push_str(&chart(&groups, &ceilings, &unit));
    let _ = write!(
        s,
        r#"<p class="legend"><span><i style="background:#9e9e9e"></i>seed</span><span><i style="background:#1b9e4b"></i>winner</span><span class="explain">dashed: the ceilings ({}; a cache level's is its measured copy bandwidth); the axis is logarithmic; each bar is the kernel's in-run measurement</span></p>"#,
        escape(&source_text(stored))
    );
    s.push_str(&table(&groups));
    s.push_str("</section>");
    s
}

/// The seed's sizes with the winner beside them, then the held-out size.
fn groups(data: &RunData) -> Vec<Group<'_>> {
    let seed = data.seed.and_then(|c| data.evaluations.get(&c.0));
    let winner = data
        .winner
        .filter(|w| Some(*w) != data.seed)
        .and_then(|c| data.evaluations.get(&c.0));
    let mut groups: Vec<Group<'_>> = Vec::new();
    for size in seed.map_or(&[][..], |e| &e.sizes[..]) {
        let mut bars = vec![("seed", size)];
        if let Some(w) = winner.and_then(|w| w.sizes.iter().find(|x| x.label == size.label)) {
            bars.push(("winner", w));
        }
        groups.push((size.label.clone(), bars));
    }
    if let Some(seed) = held_out_size(data, HeldOutRole::Seed) {
        let mut bars = vec![("seed", seed)];
        if let Some(w) =
            held_out_size(data, HeldOutRole::Winner).filter(|_| data.winner != data.seed)
        {
            bars.push(("winner", w));
        }
        groups.push((format!("held-out {}", seed.label), bars));
    }
    groups.retain(|g| g.1.iter().all(|b| b.1.correct));
    groups
}

/// The held-out size's result of the seed or the winner.
fn held_out_size(data: &RunData, role: HeldOutRole) -> Option<&SizeResult> {
    let (_, evaluation): &(_, Option<Evaluation>) = data.held_out_of(role)?;
    evaluation.as_ref()?.sizes.first()
}

/// The ceilings to draw, fastest first, in the unit of the sizes: every
/// measured memory level's copy bandwidth (DRAM last), or the DRAM
/// ceiling alone when no hierarchy was measured; the FP32 peak for a
/// compute-bound task.
fn ceilings(stored: &Value, unit: &str) -> Vec<(String, f64)> {
    if unit == "GFLOPS" {
        return stored["fp32_gflops"]
            .as_f64()
            .map(|v| vec![("FP32 peak".to_string(), v)])
            .unwrap_or_default();
    }
    let mut lines: Vec<(String, f64)> = stored["hierarchy"]["levels"]
        .as_array()
        .map(|levels| {
            levels
                .iter()
                .filter(|l| l["name"].as_str() != Some("DRAM"))
                .filter_map(|l| {
                    Some((
                        l["name"].as_str()?.to_string(),
                        l["gbs"]["median"].as_f64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(dram) = stored["bandwidth_gbs"].as_f64() {
        lines.push(("DRAM".to_string(), dram));
    }
    lines.retain(|(_, v)| v.is_finite() && *v > 0.0);
    lines
}

/// Where the scored ceilings came from: "measured", "declared",
/// "datasheet H100 SXM".
fn source_text(stored: &Value) -> String {
    match stored["source"]["kind"].as_str() {
        Some("datasheet") => format!(
            "datasheet {}",
            stored["source"]["entry"].as_str().unwrap_or_default()
        ),
        Some(kind) => kind.to_string(),
        None => "source not recorded".into(),
    }
}

/// A log-scale map from values to pixels (bottom to top).
struct LogScale {
    lo: f64,
    hi: f64,
    bottom: f64,
    top: f64,
}

impl LogScale {
    fn map(&self, v: f64) -> f64 {
        let t = (v.max(self.lo).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
        self.bottom - t * (self.bottom - self.top)
    }

    /// 1, 2, 5 per decade inside the range.
    fn ticks(&self) -> Vec<f64> {
        let mut ticks = Vec::new();
        let mut decade = 10f64.powf(self.lo.log10().floor());
        while decade <= self.hi {
            ticks.extend(
                [1.0, 2.0, 5.0]
                    .map(|m| decade * m)
                    .into_iter()
                    .filter(|v| (self.lo..=self.hi).contains(v)),
            );
            decade *= 10.0;
        }
        ticks
    }
}

fn chart(groups: &[Group<'_>], ceilings: &[(String, f64)], unit: &str) -> String {
    let values = groups
        .iter()
        .flat_map(|g| g.1.iter().map(|b| b.1.achieved))
        .chain(ceilings.iter().map(|c| c.1))
        .filter(|v| v.is_finite() && *v > 0.0);
    let lo = values.clone().fold(f64::INFINITY, f64::min);
    let hi = values.fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() {
        (lo / 2.0, hi * 1.5)
    } else {
        (0.1, 10.0)
    };
    let bottom = HEIGHT - BOTTOM;
    let y = LogScale {
        lo,
        hi,
        bottom,
        top: TOP,
    };
    let plot_right = WIDTH - RIGHT;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="roofline-bars" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="achieved {} per size against the measured ceilings">"#,
        escape(unit)
    );
    for t in y.ticks() {
        let py = y.map(t);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{plot_right}" y1="{py:.1}" y2="{py:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end" class="tick">{}</text>"##,
            LEFT - 6.0,
            py + 4.0,
            number(t)
        );
    }
    bars(&mut out, groups, &y, plot_right);
    ceiling_lines(&mut out, ceilings, &y, plot_right, unit);
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" x2="{plot_right}" y1="{bottom}" y2="{bottom}" stroke="#333"/><line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{bottom}" stroke="#333"/><text transform="translate(14 {}) rotate(-90)" text-anchor="middle" class="axis">achieved {} (log)</text></svg>"##,
        (TOP + bottom) / 2.0,
        escape(unit)
    );
    out
}

fn bars(out: &mut String, groups: &[Group<'_>], y: &LogScale, plot_right: f64) {
    let slot = (plot_right - LEFT - 16.0) / groups.len().max(1) as f64;
    for (g, (label, bars)) in groups.iter().enumerate() {
        let width = (slot * 0.7) / bars.len().max(1) as f64;
        let start = LEFT + 8.0 + g as f64 * slot + slot * 0.15;
        for (b, (series, size)) in bars.iter().enumerate() {
            let top = y.map(size.achieved);
            let _ = write!(
                out,
                r#"<rect class="bar" data-size="{}" data-series="{series}" data-achieved="{}" data-fraction="{}" x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{series} at {}: {}</title></rect>"#,
                escape(label),
                size.achieved,
                size.fraction,
                start + b as f64 * width,
                (width - 2.0).max(1.0),
                (y.bottom - top).max(0.0),
                series_colour(series),
                escape(label),
                escape(&rate_text(size)),
            );
        }
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle" class="tick">{}</text>"#,
            start + slot * 0.35,
            y.bottom + 16.0,
            escape(label)
        );
    }
}

/// Each ceiling as a dashed line across the plot, labelled in the margin
/// to its right; labels too close to the one above move down.
fn ceiling_lines(
    out: &mut String,
    ceilings: &[(String, f64)],
    y: &LogScale,
    plot_right: f64,
    unit: &str,
) {
    let mut next_free = f64::NEG_INFINITY;
    let mut placed: Vec<(f64, f64)> = ceilings.iter().map(|c| (y.map(c.1), 0.0)).collect();
    let mut order: Vec<usize> = (0..ceilings.len()).collect();
    order.sort_by(|a, b| placed[*a].0.total_cmp(&placed[*b].0));
    for i in order {
        let label_y = placed[i].0.max(next_free);
        placed[i].1 = label_y;
        next_free = label_y + LABEL_GAP;
    }
    for ((name, value), (line_y, label_y)) in ceilings.iter().zip(placed) {
        let _ = write!(
            out,
            r##"<line class="ceiling" data-level="{}" data-value="{value}" x1="{LEFT}" x2="{plot_right}" y1="{line_y:.1}" y2="{line_y:.1}" stroke="#c00" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" class="tick" fill="#c00">{} {} {}</text>"##,
            escape(name),
            plot_right + 6.0,
            label_y + 4.0,
            escape(name),
            number(*value),
            escape(unit)
        );
    }
}

/// "412.3 GB/s, 41.8% of DRAM (512.0 MiB working set, past every cache)".
fn rate_text(size: &SizeResult) -> String {
    let level = match &size.level {
        Some(l) => format!(
            ", {:.1}% of {} ({})",
            l.fraction * 100.0,
            l.placement.level,
            l.placement.describe()
        ),
        None => format!(", {:.1}% of the scored ceiling", size.fraction * 100.0),
    };
    format!("{} {}{level}", number(size.achieved), size.unit)
}

/// Per size: where its data lives, then for the seed and the winner the
/// median time with its spread, the achieved rate and the fraction of
/// that level's ceiling.
fn table(groups: &[Group<'_>]) -> String {
    let mut s = String::from(
        r#"<table class="sizes"><tr><th>size</th><th>working set</th><th>kernel</th><th>median ms</th><th>spread (IQR/median)</th><th>achieved</th><th>fraction of its level</th><th>fraction of the scored ceiling</th></tr>"#,
    );
    for (label, bars) in groups {
        for (i, (series, size)) in bars.iter().enumerate() {
            let head = if i == 0 {
                let place = size
                    .level
                    .as_ref()
                    .map(|l| l.placement.describe())
                    .unwrap_or_else(|| kevo_roofline::human_bytes(size.working_set_bytes));
                format!(
                    r#"<td rowspan="{}">{}</td><td rowspan="{}">{}</td>"#,
                    bars.len(),
                    escape(label),
                    bars.len(),
                    escape(&place)
                )
            } else {
                String::new()
            };
            let _ = write!(
                s,
                "<tr>{head}<td>{series}</td><td>{:.4}</td><td>{:.1}%</td><td>{} {}</td><td>{}</td><td>{:.1}%</td></tr>",
                size.time.median_s * 1e3,
                size.time.spread * 100.0,
                number(size.achieved),
                escape(&size.unit),
                size.level
                    .as_ref()
                    .map(|l| format!(
                        "{:.1}% of {}",
                        l.fraction * 100.0,
                        escape(&l.placement.level)
                    ))
                    .unwrap_or_else(|| "–".into()),
                size.fraction * 100.0
            );
        }
    }
    s.push_str("</table>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_measured_level_is_drawn_and_dram_comes_last() {
        let stored = json!({
            "bandwidth_gbs": 4800.0,
            "fp32_gflops": 67000.0,
            "hierarchy": {"levels": [
                {"name": "L1", "gbs": {"median": 30000.0}},
                {"name": "L2", "gbs": {"median": 8063.0}},
                {"name": "DRAM", "gbs": {"median": 4181.0}},
            ]},
        });
        let lines = ceilings(&stored, "GB/s");
        let names: Vec<&str> = lines.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["L1", "L2", "DRAM"]);
        // DRAM is the scored ceiling, not the sweep's copy figure.
        assert_eq!(lines[2].1, 4800.0);
        assert_eq!(
            ceilings(&stored, "GFLOPS"),
            [("FP32 peak".to_string(), 67000.0)]
        );
        // Declared ceilings: DRAM alone.
        let declared = json!({"bandwidth_gbs": 20.0, "fp32_gflops": 100.0});
        assert_eq!(ceilings(&declared, "GB/s"), [("DRAM".to_string(), 20.0)]);
    }

    #[test]
    fn labels_of_close_ceilings_do_not_overlap() {
        let y = LogScale {
            lo: 1.0,
            hi: 1e5,
            bottom: 280.0,
            top: 16.0,
        };
        // L2 and DRAM 1.1x apart: their lines are 2 px apart.
        let lines = [("L2".to_string(), 4400.0), ("DRAM".to_string(), 4000.0)];
        let mut out = String::new();
        ceiling_lines(&mut out, &lines, &y, 600.0, "GB/s");
        let label_ys: Vec<f64> = out
            .split("<text ")
            .skip(1)
            .map(|t| {
                let at = t.find(" y=\"").unwrap() + 4;
                t[at..at + t[at..].find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert_eq!(label_ys.len(), 2);
        assert!(
            (label_ys[0] - label_ys[1]).abs() >= LABEL_GAP - 0.1,
            "{label_ys:?}"
        );
        // Each label sits right of the plot, off its line.
        assert!(out.matches(r#"<text x="606.0""#).count() == 2, "{out}");
    }

    #[test]
    fn a_log_axis_reads_a_two_percent_seed_beside_a_winner_far_past_dram() {
        let y = LogScale {
            lo: 10.0,
            hi: 20000.0,
            bottom: 280.0,
            top: 16.0,
        };
        // 96 GB/s (2% of 4800) and 19200 GB/s (400%): both bars are tall
        // enough to read (a linear axis gave the first 1 px).
        let seed_height = y.bottom - y.map(96.0);
        let winner_height = y.bottom - y.map(19200.0);
        assert!(seed_height > 70.0, "{seed_height}");
        assert!(
            winner_height > 3.0 * seed_height.min(100.0),
            "{winner_height}"
        );
        assert_eq!(y.ticks().first(), Some(&10.0));
    }
}
