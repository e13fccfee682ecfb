//! SVG charts drawn as text: no script and no network needed to show them,
//! and every mark carries its numbers as `data-*` attributes (and a
//! `<title>` tooltip), so a test or a reader can check a chart against the
//! store.

use std::fmt::Write;

use crate::data::Point;

pub const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 16.0;
/// Room under the plot for failed proposals' band and the axis labels.
const BOTTOM: f64 = 58.0;

/// Colours of the outcomes (colour-blind-safe where it matters: correct
/// against everything else).
pub fn outcome_colour(outcome: &str) -> &'static str {
    match outcome {
        "correct" => "#1b9e4b",
        "wrong_result" => "#e08a00",
        "compile_error" => "#d7301f",
        "runtime_error" => "#8856a7",
        "timeout" => "#8c510a",
        "suspicious" => "#dd3497",
        "rejected_by_validation" => "#2c7fb8",
        _ => "#888888",
    }
}

pub fn outcome_label(outcome: &str) -> &'static str {
    match outcome {
        "correct" => "correct",
        "wrong_result" => "wrong",
        "compile_error" => "compile error",
        "runtime_error" => "runtime error",
        "timeout" => "timeout",
        "suspicious" => "suspicious",
        "rejected_by_validation" => "fails on unseen sizes",
        "no_code" => "no code",
        "no_candidate" => "no candidate",
        _ => "other",
    }
}

/// Text for HTML (element text or an attribute value). Control
/// characters other than tab, newline and CR (C0, DEL, C1) and the bidi
/// embeddings, overrides and isolates, which would reorder what a cell
/// shows, become U+FFFD: stored text may come from a model endpoint.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A linear or logarithmic map from values to pixels.
#[derive(Debug, Clone, Copy)]
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    px_lo: f64,
    px_hi: f64,
    /// Ticks at whole numbers only (iterations).
    integer: bool,
}

impl Scale {
    /// Over `values`; logarithmic when they span more than 20x and are all
    /// positive (scores from 0.04 to 6 are common).
    fn fit(values: impl Iterator<Item = f64> + Clone, px_lo: f64, px_hi: f64, zero: bool) -> Scale {
        let lo = values.clone().fold(f64::INFINITY, f64::min);
        let hi = values.fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
        let log = !zero && lo > 0.0 && hi / lo > 20.0;
        let (lo, hi) = if log {
            (lo / 1.3, hi * 1.3)
        } else if zero {
            (0.0, if hi > 0.0 { hi * 1.08 } else { 1.0 })
        } else if hi > lo {
            let pad = (hi - lo) * 0.08;
            ((lo - pad).max(0.0), hi + pad)
        } else {
            ((lo * 0.9).max(0.0), lo * 1.1 + 1e-9)
        };
        Scale {
            lo,
            hi,
            log,
            px_lo,
            px_hi,
            integer: false,
        }
    }

    fn whole(mut self) -> Scale {
        self.integer = true;
        self
    }

    fn map(&self, v: f64) -> f64 {
        let t = if self.log {
            (v.max(self.lo).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        self.px_lo + t * (self.px_hi - self.px_lo)
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut t = Vec::new();
            let mut decade = 10f64.powf(self.lo.log10().floor());
            while decade <= self.hi {
                for m in [1.0, 2.0, 5.0] {
                    let v = decade * m;
                    if v >= self.lo && v <= self.hi {
                        t.push(v);
                    }
                }
                decade *= 10.0;
            }
            t
        } else {
            let span = self.hi - self.lo;
            let raw = span / 5.0;
            let mag = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0]
                .iter()
                .map(|m| m * mag)
                .find(|s| span / s <= 6.0)
                .unwrap_or(mag * 10.0);
            let step = if self.integer {
                step.max(1.0).round()
            } else {
                step
            };
            let mut v = (self.lo / step).ceil() * step;
            let mut t = Vec::new();
            while v <= self.hi + step * 1e-9 {
                t.push(v);
                v += step;
            }
            t
        }
    }
}

pub fn number(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn open(out: &mut String, id: &str, title: &str, height: f64) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{id}" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{}">"#,
        escape(title)
    );
}

/// Horizontal grid lines at the y ticks, labelled with `suffix`.
fn y_grid(out: &mut String, y: &Scale, suffix: &str) {
    for t in y.ticks() {
        let py = y.map(t);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end" class="tick">{}{suffix}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            py + 4.0,
            number(t)
        );
    }
}

fn axes(
    out: &mut String,
    x: &Scale,
    y: &Scale,
    x_label: &str,
    y_label: &str,
    x_fmt: fn(f64) -> String,
) {
    let bottom = HEIGHT - BOTTOM;
    y_grid(out, y, "");
    for t in x.ticks() {
        let px = x.map(t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" x2="{px:.1}" y1="{bottom}" y2="{}" stroke="#999"/><text x="{px:.1}" y="{}" text-anchor="middle" class="tick">{}</text>"##,
            bottom + 4.0,
            HEIGHT - 22.0,
            x_fmt(t)
        );
    }
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" x2="{}" y1="{bottom}" y2="{bottom}" stroke="#333"/><line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{bottom}" stroke="#333"/><text x="{}" y="{}" text-anchor="middle" class="axis">{}</text><text transform="translate(14 {}) rotate(-90)" text-anchor="middle" class="axis">{}</text>"##,
        WIDTH - RIGHT,
        (LEFT + WIDTH - RIGHT) / 2.0,
        HEIGHT - 4.0,
        escape(x_label),
        (TOP + bottom) / 2.0,
        escape(y_label)
    );
}

/// Which quantity the progress chart's x axis shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Along {
    Iteration,
    WallTime,
    Cost,
}

impl Along {
    fn of(self, p: &Point) -> f64 {
        match self {
            Along::Iteration => p.iteration as f64,
            Along::WallTime => p.wall_s,
            Along::Cost => p.cost_usd,
        }
    }
    fn label(self) -> &'static str {
        match self {
            Along::Iteration => "iteration",
            Along::WallTime => "wall time since the start (s)",
            Along::Cost => "model cost spent (USD)",
        }
    }
    fn id(self) -> &'static str {
        match self {
            Along::Iteration => "progress-iteration",
            Along::WallTime => "progress-wall",
            Along::Cost => "progress-cost",
        }
    }
}

/// Best-so-far score against `along`: every proposal a point coloured by
/// outcome (correct ones at their score, the rest in a band under the
/// axis), promotions ringed, the best so far as a step line.
pub fn progress(points: &[Point], along: Along) -> String {
    let mut out = String::new();
    open(
        &mut out,
        along.id(),
        &format!("score against {}", along.label()),
        HEIGHT,
    );
    let (x, y) = progress_scales(points, along);
    let fmt_x: fn(f64) -> String = match along {
        Along::Iteration => |v| format!("{v:.0}"),
        _ => number,
    };
    axes(
        &mut out,
        &x,
        &y,
        along.label(),
        "score (roofline fraction)",
        fmt_x,
    );
    best_so_far(&mut out, points, along, &x, &y);
    // Points without a score sit in a band 14 px under the x axis.
    let band = HEIGHT - BOTTOM + 14.0;
    for p in points {
        progress_point(&mut out, p, along, &x, &y, band);
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{:.1}" class="tick" text-anchor="end">not correct</text>"#,
        LEFT - 6.0,
        band + 4.0
    );
    out.push_str("</svg>");
    out
}

/// The progress chart's scales: x over `along` (whole iterations), with
/// 10 px of margin; y over the scores, with 6.
fn progress_scales(points: &[Point], along: Along) -> (Scale, Scale) {
    let bottom = HEIGHT - BOTTOM;
    let x = Scale::fit(
        points.iter().map(|p| along.of(p)),
        LEFT + 10.0,
        WIDTH - RIGHT - 10.0,
        true,
    );
    let x = if along == Along::Iteration {
        x.whole()
    } else {
        x
    };
    let scores = points.iter().filter_map(|p| p.score);
    let y = Scale::fit(scores, bottom - 6.0, TOP + 6.0, false);
    (x, y)
}

/// The best score so far, as steps in x order to the last point.
fn best_so_far(out: &mut String, points: &[Point], along: Along, x: &Scale, y: &Scale) {
    let mut sorted: Vec<&Point> = points.iter().collect();
    sorted.sort_by(|a, b| along.of(a).total_cmp(&along.of(b)));
    let mut path = String::new();
    let mut best: Option<f64> = None;
    for p in &sorted {
        if let Some(s) = p.score {
            let px = x.map(along.of(p));
            match best {
                None => {
                    let _ = write!(path, "M{px:.1},{:.1}", y.map(s));
                    best = Some(s);
                }
                Some(b) if s > b => {
                    let _ = write!(path, " H{px:.1} V{:.1}", y.map(s));
                    best = Some(s);
                }
                _ => {}
            }
        }
    }
    if best.is_some() {
        let _ = write!(
            path,
            " H{:.1}",
            x.map(sorted.last().map(|p| along.of(p)).unwrap_or(0.0))
        );
        let _ = write!(
            out,
            r##"<path class="best-so-far" d="{path}" fill="none" stroke="#1b9e4b" stroke-width="2" stroke-opacity="0.6"/>"##
        );
    }
}

/// One proposal's point: at its score, or in the `band` when it has none;
/// ringed when it was kept.
fn progress_point(out: &mut String, p: &Point, along: Along, x: &Scale, y: &Scale, band: f64) {
    let px = x.map(along.of(p));
    let (py, r) = match p.score {
        Some(s) => (y.map(s), 4.5),
        None => (band, 3.5),
    };
    let ring = if p.promoted {
        r##" stroke="#111" stroke-width="2""##
    } else {
        r##" stroke="#fff" stroke-width="0.5""##
    };
    let score = p.score.map(|s| format!("{s}")).unwrap_or_default();
    let _ = write!(
        out,
        r#"<circle class="point" data-iteration="{}" data-candidate="{}" data-outcome="{}" data-score="{score}" data-promoted="{}" cx="{px:.1}" cy="{py:.1}" r="{r}" fill="{}"{ring}><title>iteration {}: {}{}{}</title></circle>"#,
        p.iteration,
        p.candidate.map(|c| c.to_string()).unwrap_or_default(),
        p.outcome,
        p.promoted,
        outcome_colour(p.outcome),
        p.iteration,
        outcome_label(p.outcome),
        p.score
            .map(|s| format!(", score {}", number(s)))
            .unwrap_or_default(),
        if p.promoted { ", kept" } else { "" },
    );
}

pub fn series_colour(series: &str) -> &'static str {
    match series {
        "seed" => "#9e9e9e",
        "winner" => "#1b9e4b",
        _ => "#2c7fb8",
    }
}

/// One line per series (say, each island's best so far) over iterations.
pub fn lines(id: &str, title: &str, series: &[(String, Vec<(f64, f64)>)], y_label: &str) -> String {
    const PALETTE: [&str; 8] = [
        "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666",
    ];
    let mut out = String::new();
    open(&mut out, id, title, HEIGHT);
    let bottom = HEIGHT - BOTTOM;
    let xs = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0));
    let ys = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1));
    let x = Scale::fit(xs, LEFT + 10.0, WIDTH - RIGHT - 10.0, true).whole();
    let y = Scale::fit(ys, bottom - 6.0, TOP + 6.0, false);
    axes(&mut out, &x, &y, "iteration", y_label, |v| {
        format!("{v:.0}")
    });
    for (i, (name, pts)) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let d: Vec<String> = pts
            .iter()
            .enumerate()
            .map(|(k, (a, b))| {
                format!(
                    "{}{:.1},{:.1}",
                    if k == 0 { "M" } else { "L" },
                    x.map(*a),
                    y.map(*b)
                )
            })
            .collect();
        let _ = write!(
            out,
            r#"<path class="series" data-series="{}" d="{}" fill="none" stroke="{colour}" stroke-width="2"><title>{}</title></path>"#,
            escape(name),
            d.join(" "),
            escape(name)
        );
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" class="tick" fill="{colour}">{}</text>"#,
            LEFT + 10.0 + 90.0 * (i % 7) as f64,
            TOP + 10.0 + 12.0 * (i / 7) as f64,
            escape(name)
        );
    }
    out.push_str("</svg>");
    out
}

/// A grid of cells (rows: `y_levels`, columns: `x_levels`), each the best
/// score found there, shaded against the best overall.
pub fn heatmap(
    id: &str,
    x_axis: (&str, &[String]),
    y_axis: (&str, &[String]),
    cells: &[Vec<Option<f64>>],
) -> String {
    // Room for the level names: rows' on the left, columns' slanted below.
    let cell = 56.0;
    let left = 330.0;
    let top = 28.0;
    let height = top + cell * y_axis.1.len() as f64 + 210.0;
    let width = left + cell * x_axis.1.len() as f64 + 220.0;
    let best = cells
        .iter()
        .flatten()
        .flatten()
        .fold(0.0f64, |a, b| a.max(*b));
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart heatmap" id="{id}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="archive: {} against {}">"#,
        escape(y_axis.0),
        escape(x_axis.0)
    );
    for (r, row) in cells.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            let px = left + c as f64 * cell;
            let py = top + r as f64 * cell;
            let (fill, text, ink) = match v {
                Some(s) if best > 0.0 => {
                    let t = (s / best).clamp(0.0, 1.0);
                    let g = (235.0 - 140.0 * t) as u8;
                    (
                        format!(
                            "rgb({},{},{})",
                            (230.0 - 200.0 * t) as u8,
                            g.max(120),
                            (220.0 - 160.0 * t) as u8
                        ),
                        number(*s),
                        if t > 0.5 { "#fff" } else { "#222" },
                    )
                }
                Some(s) => ("#ddd".to_string(), number(*s), "#222"),
                None => ("#f7f7f7".to_string(), String::new(), "#222"),
            };
            let _ = write!(
                out,
                r##"<rect class="cell" data-row="{r}" data-column="{c}" data-score="{}" x="{px}" y="{py}" width="{}" height="{}" fill="{fill}" stroke="#fff"/><text x="{}" y="{}" text-anchor="middle" class="tick" fill="{ink}">{text}</text>"##,
                v.map(|s| s.to_string()).unwrap_or_default(),
                cell - 1.0,
                cell - 1.0,
                px + cell / 2.0,
                py + cell / 2.0 + 4.0
            );
        }
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end" class="tick">{}</text>"#,
            left - 6.0,
            top + r as f64 * cell + cell / 2.0 + 4.0,
            escape(&y_axis.1[r])
        );
    }
    for (c, label) in x_axis.1.iter().enumerate() {
        let px = left + c as f64 * cell + cell / 2.0;
        let py = top + y_axis.1.len() as f64 * cell + 8.0;
        let _ = write!(
            out,
            r#"<text transform="translate({px} {py}) rotate(35)" class="tick">{}</text>"#,
            escape(label)
        );
    }
    let _ = write!(
        out,
        r#"<text x="10" y="16" class="axis">{} (rows) against {} (columns): best score per cell</text></svg>"#,
        escape(y_axis.0),
        escape(x_axis.0)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_map_ends_to_the_pixels_and_go_logarithmic_over_wide_spans() {
        let s = Scale::fit([0.04, 6.2].into_iter(), 300.0, 10.0, false);
        assert!(s.log);
        assert!((s.map(s.lo) - 300.0).abs() < 1e-9 && (s.map(s.hi) - 10.0).abs() < 1e-9);
        assert!(s.map(0.04) > s.map(0.4) && s.map(0.4) > s.map(6.2));
        let ticks = s.ticks();
        assert!(ticks.contains(&0.1) && ticks.contains(&1.0), "{ticks:?}");
        let lin = Scale::fit([1.0, 2.0].into_iter(), 0.0, 100.0, false);
        assert!(!lin.log);
        assert!(lin.ticks().len() >= 3);
        // Two iterations: ticks at 0, 1 and 2 only.
        let its = Scale::fit([0.0, 2.0].into_iter(), 0.0, 100.0, true).whole();
        assert_eq!(its.ticks(), vec![0.0, 1.0, 2.0]);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(
            escape("x<!--\u{1b}]0;pwned\u{7}\u{9b}2J\u{202e}gpt\t\r\n"),
            "x&lt;!--\u{fffd}]0;pwned\u{fffd}\u{fffd}2J\u{fffd}gpt\t\r\n"
        );
    }
}
