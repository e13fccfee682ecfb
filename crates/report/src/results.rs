//! kevo's own Table 3 (`kevo table --results`): per task the seed's and the
//! winner's fraction of the roofline at every size and at the held-out
//! size, the confirmed speedup with its interval, the winner set beside
//! the physical anchor (the copy bandwidth the device reached, cuFFT for
//! fft3d, the FP32 FMA peak) and beside Metal-Sci's best fraction on the
//! M1 Pro; then the strategies compared at equal budget. Everything comes
//! from the stored runs, except what a search does not measure: the
//! vendor libraries' times (`kevo eval --json` on the same device) and the
//! measured FMA peak (`kevo devices --measure --json`).

use std::collections::BTreeMap;
use std::fmt::Write;

use kevo_eval::{Evaluation, SizeResult, VendorBaseline};
use kevo_store::HeldOutRole;

use crate::data::RunData;
use crate::metal_sci::m1_best;

/// Anchors measured outside a search on the runs' device: vendor
/// libraries' times from `kevo eval --json` (cuFFT for fft3d, cuBLAS for
/// saxpy) and the FP32 FMA peak from `kevo devices --measure --json`.
#[derive(Debug, Clone, Default)]
pub struct Anchors {
    /// Per task: the device evaluated on, its vendor baseline and the
    /// evaluated kernel's median time per size label, from the same
    /// session (the ratio is a same-session ratio).
    by_task: BTreeMap<String, (String, VendorBaseline, BTreeMap<String, f64>)>,
    /// Per device name: the FMA micro-benchmark's GFLOPS.
    fma_gflops: BTreeMap<String, f64>,
}

impl Anchors {
    /// Add one file's anchors: `kevo eval --json` output (one task's
    /// object or `--all`'s array) or `kevo devices --json` output.
    pub fn add_json(&mut self, text: &str) -> Result<(), String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let items = match value {
            serde_json::Value::Array(items) => items,
            one => vec![one],
        };
        for item in items {
            if item.get("available").is_some() {
                self.add_device(&item);
                continue;
            }
            let (Some(task), Some(device)) = (item["task"].as_str(), item["device"].as_str())
            else {
                return Err("neither `kevo eval --json` nor `kevo devices --json` output".into());
            };
            if item.get("vendor").is_none() {
                continue;
            }
            let baseline: VendorBaseline = serde_json::from_value(item["vendor"].clone())
                .map_err(|e| format!("{task}'s `vendor` is not a vendor baseline: {e}"))?;
            let kernel: BTreeMap<String, f64> = item["sizes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| {
                    Some((
                        s["label"].as_str()?.to_string(),
                        s["time"]["median_s"].as_f64()?,
                    ))
                })
                .collect();
            self.by_task
                .insert(task.to_string(), (device.to_string(), baseline, kernel));
        }
        Ok(())
    }

    /// A device measured with `kevo devices --measure` adds its FMA
    /// micro-benchmark's median (beside a datasheet, under `measured`).
    fn add_device(&mut self, item: &serde_json::Value) {
        let ceilings = &item["ceilings"];
        let gflops = ceilings["measured"]["fma_gflops"].as_f64().or_else(|| {
            (ceilings["source"]["kind"] == "measured")
                .then(|| ceilings["fp32_gflops"].as_f64())
                .flatten()
        });
        if let (Some(name), Some(gflops)) = (item["device"]["name"].as_str(), gflops) {
            self.fma_gflops.insert(name.to_string(), gflops);
        }
    }

    /// The library's name, its median time at `label` and the evaluated
    /// kernel's in the same session, measured on `device`.
    fn library_time(&self, task: &str, device: &str, label: &str) -> Option<(String, f64, f64)> {
        let (measured_on, baseline, kernel) = self.by_task.get(task)?;
        if measured_on != device {
            return None;
        }
        let library = baseline.library()?.to_string();
        Some((
            library,
            baseline.size(label)?.median_s()?,
            *kernel.get(label)?,
        ))
    }
}

/// The aims a winner is held to (issue-level targets, stated in the
/// legend): bandwidth-bound tasks at 85% of the copy bandwidth at their
/// largest size, fft3d at 80% of cuFFT's speed.
const COPY_AIM: f64 = 0.85;
const CUFFT_AIM: f64 = 0.80;

/// One run's figures for the tables.
struct Line<'a> {
    data: &'a RunData,
    /// The task, and where a task has several runs of the strategy, the
    /// run id's last six characters: "heat2d (9e0afc)".
    label: String,
    seed: Option<&'a Evaluation>,
    winner: Option<&'a Evaluation>,
    held_seed: Option<&'a Evaluation>,
    held_winner: Option<&'a Evaluation>,
}

impl<'a> Line<'a> {
    fn of(data: &'a RunData) -> Line<'a> {
        let held = |role| data.held_out_of(role).and_then(|(_, e)| e.as_ref());
        Line {
            data,
            label: data.info.task.clone(),
            seed: data.seed.and_then(|s| data.evaluations.get(&s.0)),
            winner: data.winner.and_then(|w| data.evaluations.get(&w.0)),
            held_seed: held(HeldOutRole::Seed),
            held_winner: held(HeldOutRole::Winner),
        }
    }

    fn task(&self) -> &str {
        &self.data.info.task
    }

    fn bandwidth_bound(&self) -> bool {
        self.seed
            .or(self.winner)
            .and_then(|e| e.sizes.first())
            .is_some_and(|s| s.unit == "GB/s")
    }

    /// The winner's largest in-distribution size (the last one run).
    fn winner_largest(&self) -> Option<&'a SizeResult> {
        self.winner.and_then(|e| e.sizes.last())
    }

    /// Seconds of evaluation (wall, device) over every stored candidate,
    /// with the final pick's re-measurement.
    fn evaluation_time(&self) -> (f64, f64) {
        let (mut wall, mut device) = self
            .data
            .evaluations
            .values()
            .fold((0.0, 0.0), |(w, d), e| {
                (w + e.wall.total_s, d + e.wall.device_s)
            });
        let summary = self.data.info.summary.as_ref();
        let remeasure = |k: &str| summary.and_then(|s| s["remeasure"][k].as_f64());
        wall += remeasure("wall_s").unwrap_or(0.0);
        device += remeasure("device_s").unwrap_or(0.0);
        (wall, device)
    }

    fn proposals(&self) -> usize {
        self.data.history.iter().filter(|h| h.iteration > 0).count()
    }

    fn confirmation(&self) -> String {
        let c = self
            .data
            .info
            .summary
            .as_ref()
            .map(|s| s["final_pick"]["confirmation"].clone());
        let speedup = self.data.speedup();
        match (c, speedup) {
            (Some(c), Some(s)) if c["low"].is_number() => format!(
                "{s:.2}x ({:.2}-{:.2}, {:.0}%)",
                c["low"].as_f64().unwrap_or(f64::NAN),
                c["high"].as_f64().unwrap_or(f64::NAN),
                c["level"].as_f64().unwrap_or(f64::NAN) * 100.0
            ),
            (_, Some(s)) => format!("{s:.2}x"),
            _ => "–".into(),
        }
    }
}

fn pct(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map(|v| format!("{:.1}%", v * 100.0))
        .unwrap_or_else(|| "–".into())
}

/// Every size's fraction, in order: "21.2% · 30.1% · 40.0%".
fn per_size(e: Option<&Evaluation>) -> String {
    match e {
        Some(e) if !e.sizes.is_empty() => e
            .sizes
            .iter()
            .map(|s| pct(Some(s.fraction)))
            .collect::<Vec<_>>()
            .join(" · "),
        _ => "–".into(),
    }
}

fn sizes(e: Option<&Evaluation>) -> String {
    e.map(|e| {
        e.sizes
            .iter()
            .map(|s| s.label.as_str())
            .collect::<Vec<_>>()
            .join(" · ")
    })
    .unwrap_or_else(|| "–".into())
}

/// The copy bandwidth the run's device reached from DRAM (the median of
/// kevo's sweep, recorded in the run's provenance).
fn copy_gbs(data: &RunData) -> Option<f64> {
    data.info.config["provenance"]["ceilings"]["hierarchy"]["levels"]
        .as_array()?
        .iter()
        .find(|l| l["name"] == "DRAM")?["gbs"]["median"]
        .as_f64()
}

fn fma_peak(data: &RunData) -> Option<f64> {
    data.info.config["provenance"]["ceilings"]["fp32_gflops"].as_f64()
}

/// One task's anchor: what it is, its figure, the winner's share of it at
/// the largest size.
struct Anchor {
    name: String,
    figure: String,
    winner: String,
    share: Option<f64>,
    aim: Option<f64>,
}

fn anchors_of(line: &Line<'_>, anchors: &Anchors) -> Vec<Anchor> {
    let Some(largest) = line.winner_largest() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if line.bandwidth_bound() {
        if let Some(copy) = copy_gbs(line.data) {
            out.push(Anchor {
                name: "DRAM copy bandwidth (measured)".into(),
                figure: format!("{copy:.0} GB/s"),
                winner: format!("{:.0} GB/s at {}", largest.achieved, largest.label),
                share: Some(largest.achieved / copy),
                aim: Some(COPY_AIM),
            });
        }
        // A working set wholly inside a cache is also set beside that
        // level's measured copy bandwidth (heat2d's 8 MiB at 1024² sits
        // in the H200's 64 MiB L2), which DRAM's figure understates.
        if let Some(level) = largest
            .level
            .as_ref()
            .filter(|l| l.placement.level != "DRAM" && !l.placement.partial)
        {
            out.push(Anchor {
                name: format!("{} copy bandwidth (measured)", level.placement.level),
                figure: format!("{:.0} GB/s", level.ceiling),
                winner: format!(
                    "{:.0} GB/s ({} working set)",
                    largest.achieved,
                    kevo_roofline::human_bytes(largest.working_set_bytes)
                ),
                share: Some(largest.achieved / level.ceiling),
                aim: None,
            });
        }
    } else if let Some(measured) = anchors.fma_gflops.get(&line.data.info.device) {
        out.push(Anchor {
            name: "FP32 FMA peak (measured)".into(),
            figure: format!("{measured:.0} GFLOPS"),
            winner: format!("{:.0} GFLOPS at {}", largest.achieved, largest.label),
            share: Some(largest.achieved / measured),
            aim: None,
        });
    } else if let Some(peak) = fma_peak(line.data) {
        out.push(Anchor {
            name: "FP32 FMA peak (datasheet)".into(),
            figure: format!("{peak:.0} GFLOPS"),
            winner: format!("{:.0} GFLOPS at {}", largest.achieved, largest.label),
            share: Some(largest.achieved / peak),
            aim: None,
        });
    }
    if let Some((library, median_s, kernel_s)) =
        anchors.library_time(line.task(), &line.data.info.device, &largest.label)
    {
        out.push(Anchor {
            figure: format!("{:.1} µs at {}", median_s * 1e6, largest.label),
            winner: format!("{:.1} µs (same session)", kernel_s * 1e6),
            share: Some(median_s / kernel_s),
            aim: (line.task() == "fft3d").then_some(CUFFT_AIM),
            name: library,
        });
    }
    out
}

/// The whole page: four tables and the plain statements under them.
pub fn render(runs: &[RunData], anchors: &Anchors) -> String {
    let mut lines: Vec<Line<'_>> = runs.iter().map(Line::of).collect();
    lines.sort_by(|a, b| {
        order(a.task())
            .cmp(&order(b.task()))
            .then(a.data.info.created_at.cmp(&b.data.info.created_at))
    });
    for i in 0..lines.len() {
        let (task, strategy) = (lines[i].task(), &lines[i].data.info.strategy);
        let same = lines
            .iter()
            .filter(|o| o.task() == task && &o.data.info.strategy == strategy)
            .count();
        if same > 1 {
            let id = &lines[i].data.info.id.0;
            let label = format!("{task} ({})", &id[id.len().saturating_sub(6)..]);
            lines[i].label = label;
        }
    }
    let baseline: Vec<&Line<'_>> = lines
        .iter()
        .filter(|l| l.data.info.strategy == "one_plus_one")
        .collect();
    let mut out = String::new();
    fractions_table(&mut out, &baseline);
    speedups_table(&mut out, &baseline);
    anchors_table(&mut out, &baseline, anchors);
    strategies_table(&mut out, &lines);
    out
}

/// Metal-Sci's Table 3 order, then any other task by name.
fn order(task: &str) -> (usize, String) {
    let known = crate::metal_sci::M1_BEST
        .iter()
        .position(|b| b.task == task);
    (known.unwrap_or(usize::MAX), task.to_string())
}

fn fractions_table(out: &mut String, lines: &[&Line<'_>]) {
    out.push_str("## Fractions of the roofline, seed and winner\n\n");
    out.push_str("| task | ceiling | sizes | seed | winner | held-out size | seed there | winner there | M1 Pro best (in-dist. / held-out) |\n");
    out.push_str("| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
    for l in lines {
        let ceiling = if l.bandwidth_bound() {
            "bandwidth"
        } else {
            "FP32"
        };
        let held_label = l
            .held_winner
            .or(l.held_seed)
            .and_then(|e| e.sizes.first())
            .map(|s| s.label.clone())
            .unwrap_or_else(|| "–".into());
        let m1 = m1_best(l.task())
            .map(|b| {
                format!(
                    "{} / {}",
                    pct(Some(b.in_distribution)),
                    pct(Some(b.held_out))
                )
            })
            .unwrap_or_else(|| "–".into());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            l.label,
            ceiling,
            sizes(l.winner.or(l.seed)),
            per_size(l.seed),
            per_size(l.winner),
            held_label,
            per_size(l.held_seed),
            per_size(l.held_winner),
            m1
        );
    }
    out.push_str("\nFractions are each candidate's median time at that size against the device's roofline (the run's in-run evaluation; the held-out ones are measured once, after the search). Metal-Sci's figures are the best of its three models on the M1 Pro (200 GB/s, 4,500 GFLOPS): the geometric mean over its sizes, and the fraction at its held-out size. Each fraction is of its own device's roofline (the M1 Pro's above 100% come from its system-level cache): the two say how close each search came to its device's ceiling, not which device is faster.\n\n");
}

fn speedups_table(out: &mut String, lines: &[&Line<'_>]) {
    out.push_str("## Speedups, correctness and cost\n\n");
    out.push_str("| task | run | confirmed speedup (interval, level) | held-out speedup | held-out Φ | verdict | correct | proposals | evaluation wall (device) |\n");
    out.push_str("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |\n");
    for l in lines {
        let s = l.data.info.summary.clone().unwrap_or_default();
        let (wall, device) = l.evaluation_time();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.0} s ({:.1} s) |",
            l.task(),
            l.data.info.id.0,
            l.confirmation(),
            s["held_out"]["speedup"]
                .as_f64()
                .map(|v| format!("{v:.2}x"))
                .unwrap_or_else(|| "–".into()),
            s["held_out"]["phi"]
                .as_f64()
                .map(|v| format!("{v:.3}"))
                .unwrap_or_else(|| "–".into()),
            s["held_out"]["verdict"].as_str().unwrap_or("–"),
            pct(kevo_store::correct_rate(&l.data.history)),
            l.proposals(),
            wall,
            device
        );
    }
    out.push_str("\nThe confirmed speedup is the winner over the seed on fresh interleaved rounds after the search; the interval is the order-statistic interval of those rounds' ratios at the level shown. Evaluation wall is every candidate's evaluation plus the final re-measurement (the model's time is not in it); device is the part spent in device work.\n\n");
}

fn anchors_table(out: &mut String, lines: &[&Line<'_>], anchors: &Anchors) {
    out.push_str("## The winner beside the physical anchors\n\n");
    out.push_str("| task | anchor | anchor's figure | winner at the largest size | share of the anchor | aim |\n");
    out.push_str("| --- | --- | ---: | ---: | ---: | --- |\n");
    let mut below = Vec::new();
    for l in lines {
        for a in anchors_of(l, anchors) {
            let aim = match (a.aim, a.share) {
                (Some(aim), Some(share)) if share >= aim => format!("≥ {} met", pct(Some(aim))),
                (Some(aim), Some(share)) => {
                    below.push(format!(
                        "- {}: {} of the {} at {}, {:.1} points short of the {} aim.",
                        l.label,
                        pct(Some(share)),
                        a.name,
                        a.winner,
                        (aim - share) * 100.0,
                        pct(Some(aim))
                    ));
                    format!("≥ {}: not met", pct(Some(aim)))
                }
                _ => "–".into(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                l.label,
                a.name,
                a.figure,
                a.winner,
                pct(a.share),
                aim
            );
        }
        if let Some(m1) = m1_best(l.task()) {
            below.extend(below_m1(l, m1));
        }
    }
    out.push_str("\nThe DRAM copy bandwidth is the median of kevo's own sweep on the run's device, recorded in the run's provenance; the aim of 85% is held against it. Where the largest size's working set lies wholly inside a cache, that level's measured copy bandwidth is shown too: it is the harder anchor there. The FMA peak is kevo's FMA micro-benchmark on the device where one was given (`kevo devices --measure --json`), else the datasheet figure the roofline uses, whose share is the FP32 fraction. A vendor library's share (cuFFT, cuBLAS) is its median time over the kernel's at the same size, both measured in one `kevo eval` session of the kernel given to it (examples/best): above 100% the kernel is faster.\n\n");
    if below.is_empty() {
        out.push_str("Every winner meets its aims.\n\n");
    } else {
        out.push_str("Where a winner is below its anchors or Metal-Sci's best:\n\n");
        for b in below {
            out.push_str(&b);
            out.push('\n');
        }
        out.push('\n');
    }
}

/// Where the winner's score or held-out fraction is below Metal-Sci's
/// best on the M1 Pro, a line saying by how much.
fn below_m1(l: &Line<'_>, m1: crate::metal_sci::M1Best) -> Vec<String> {
    let held_out = l
        .held_winner
        .and_then(|e| e.sizes.first())
        .map(|s| s.fraction);
    [
        ("score", l.data.summary_f64("best_score"), m1.in_distribution),
        ("held-out fraction", held_out, m1.held_out),
    ]
    .into_iter()
    .filter_map(|(what, ours, theirs)| {
        let ours = ours.filter(|v| *v < theirs)?;
        Some(format!(
            "- {}: the winner's {what} {} is below Metal-Sci's best on the M1 Pro, {}, by {:.1} points.",
            l.label,
            pct(Some(ours)),
            pct(Some(theirs)),
            (theirs - ours) * 100.0
        ))
    })
    .collect()
}

fn strategies_table(out: &mut String, lines: &[Line<'_>]) {
    type Cells<'a, 'b> = BTreeMap<(usize, String), Vec<&'a Line<'b>>>;
    let mut by: BTreeMap<(usize, String), Cells<'_, '_>> = BTreeMap::new();
    for l in lines {
        by.entry(order(l.task()))
            .or_default()
            .entry(strategy_order(&l.data.info.strategy))
            .or_default()
            .push(l);
    }
    by.retain(|_, strategies| strategies.len() > 1);
    if by.is_empty() {
        return;
    }
    out.push_str("## Strategies at equal budget\n\n");
    out.push_str("| task | strategy | runs (finished) | proposals each | confirmed speedup | held-out speedup | winner's score | correct | evaluation wall |\n");
    out.push_str("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for ((_, task), strategies) in by {
        for ((_, strategy), runs) in strategies {
            out.push_str(&cell_row(&task, &strategy, &runs));
        }
    }
    out.push_str("\nOne value per run, in the order the runs were created, and their median where a cell has several. The same model, seed, sizes, promotion rule and budget of proposals in every cell.\n");
}

/// (1+1) first, then MAP-Elites and islands, then any other by name.
fn strategy_order(strategy: &str) -> (usize, String) {
    let known = ["one_plus_one", "map_elites", "islands"];
    let at = known.iter().position(|k| *k == strategy);
    (at.unwrap_or(known.len()), strategy.to_string())
}

/// One strategy's runs of one task: a value per run for each column.
fn cell_row(task: &str, strategy: &str, runs: &[&Line<'_>]) -> String {
    let finished: Vec<&&Line<'_>> = runs
        .iter()
        .filter(|l| l.data.info.status.as_str() == "finished")
        .collect();
    let ratios = |values: Vec<f64>| {
        let mut text: Vec<String> = values.iter().map(|s| format!("{s:.2}x")).collect();
        if values.len() > 1
            && let Some(median) = crate::table::median(values)
        {
            text.push(format!("median {median:.2}x"));
        }
        text
    };
    let speedups = ratios(finished.iter().filter_map(|l| l.data.speedup()).collect());
    let held = ratios(
        finished
            .iter()
            .filter_map(|l| l.data.info.summary.as_ref()?["held_out"]["speedup"].as_f64())
            .collect(),
    );
    let scores: Vec<String> = finished
        .iter()
        .filter_map(|l| l.data.summary_f64("best_score"))
        .map(|s| pct(Some(s)))
        .collect();
    let proposals: Vec<String> = runs.iter().map(|l| l.proposals().to_string()).collect();
    let correct: Vec<String> = runs
        .iter()
        .map(|l| pct(kevo_store::correct_rate(&l.data.history)))
        .collect();
    let wall: f64 = runs.iter().map(|l| l.evaluation_time().0).sum();
    let list = |v: Vec<String>| {
        if v.is_empty() {
            "–".into()
        } else {
            v.join(", ")
        }
    };
    format!(
        "| {task} | {strategy} | {} ({}) | {} | {} | {} | {} | {} | {wall:.0} s |\n",
        runs.len(),
        finished.len(),
        list(proposals),
        list(speedups),
        list(held),
        list(scores),
        list(correct),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn time(median_s: f64) -> serde_json::Value {
        json!({"median_s": median_s, "min_s": median_s, "max_s": median_s, "samples_s": [median_s]})
    }

    /// `kevo eval --json` output for one task with a measured library.
    fn eval_json(task: &str, device: &str, kernel_s: f64, library_s: f64) -> serde_json::Value {
        json!({
            "task": task, "device": device,
            "sizes": [{"label": "128cube", "time": time(kernel_s)}],
            "vendor": {"status": "measured", "library": "cuFFT", "version": "12",
                "sizes": [{"label": "128cube", "op": "3-D C2C forward FFT of 128³",
                    "run": {"status": "correct", "time": time(library_s), "warmups": 3,
                        "metric": "max_abs", "error": 0.0, "tolerance": 1.0}}]}
        })
    }

    #[test]
    fn a_vendor_time_is_read_with_the_kernel_time_of_the_same_session() {
        let mut anchors = Anchors::default();
        let both = json!([eval_json("fft3d", "GPU", 80e-6, 30e-6), {"task": "heat2d", "device": "GPU", "sizes": []}]);
        anchors.add_json(&both.to_string()).unwrap();
        assert_eq!(
            anchors.library_time("fft3d", "GPU", "128cube"),
            Some(("cuFFT".to_string(), 30e-6, 80e-6))
        );
        assert_eq!(
            anchors.library_time("fft3d", "other GPU", "128cube"),
            None,
            "another device's time is no anchor"
        );
        assert_eq!(anchors.library_time("fft3d", "GPU", "64cube"), None);
        assert_eq!(
            anchors.library_time("heat2d", "GPU", "128cube"),
            None,
            "no vendor member"
        );
    }

    #[test]
    fn a_measured_fma_peak_comes_from_the_devices_listing() {
        let mut anchors = Anchors::default();
        let devices = json!([
            {"available": true, "backend": "cuda", "device": {"name": "H"},
             "ceilings": {"fp32_gflops": 67000.0, "source": {"kind": "datasheet"},
                          "measured": {"fma_gflops": 60821.2}}},
            {"available": true, "backend": "opencl", "device": {"name": "P"},
             "ceilings": {"fp32_gflops": 224.4, "source": {"kind": "measured"}}},
            {"available": true, "backend": "opencl", "device": {"name": "D"},
             "ceilings": {"fp32_gflops": 900.0, "source": {"kind": "datasheet"}}},
            {"available": false, "backend": "cuda", "reason": "no driver"}
        ]);
        anchors.add_json(&devices.to_string()).unwrap();
        assert_eq!(anchors.fma_gflops.get("H"), Some(&60821.2));
        assert_eq!(anchors.fma_gflops.get("P"), Some(&224.4));
        assert_eq!(
            anchors.fma_gflops.get("D"),
            None,
            "a datasheet figure is not a measurement"
        );
    }

    #[test]
    fn a_file_of_another_kind_is_refused_with_what_was_expected() {
        let mut anchors = Anchors::default();
        assert!(anchors.add_json("{").unwrap_err().starts_with("not JSON"));
        let e = anchors.add_json(r#"{"runs": []}"#).unwrap_err();
        assert!(
            e.contains("kevo eval --json") && e.contains("kevo devices --json"),
            "{e}"
        );
        let bad = json!({"task": "fft3d", "device": "GPU", "vendor": {"status": "sideways"}});
        let e = anchors.add_json(&bad.to_string()).unwrap_err();
        assert!(
            e.starts_with("fft3d's `vendor` is not a vendor baseline"),
            "{e}"
        );
    }

    /// A finished run of `task` with `strategy` whose summary holds a
    /// speedup and a score, and nothing else.
    fn finished(id: &str, task: &str, strategy: &str, speedup: f64) -> RunData {
        let mut info = crate::data::test_info(strategy);
        info.id = kevo_store::RunId(id.into());
        info.task = task.into();
        info.status = kevo_store::RunStatus::Finished;
        info.summary = Some(json!({"speedup": speedup, "best_score": 0.25,
            "held_out": {"speedup": speedup * 0.9, "verdict": "generalises"}}));
        RunData {
            checkpoint: None,
            info,
            history: Vec::new(),
            candidates: Default::default(),
            evaluations: Default::default(),
            llm_calls: Vec::new(),
            held_out: Vec::new(),
            seed: None,
            winner: None,
        }
    }

    #[test]
    fn strategies_come_in_order_with_every_run_and_their_median() {
        let runs = vec![
            finished("heat2d-a-111111", "heat2d", "islands", 1.30),
            finished("heat2d-b-222222", "heat2d", "one_plus_one", 1.20),
            finished("heat2d-c-333333", "heat2d", "one_plus_one", 1.00),
            finished("heat2d-d-444444", "heat2d", "one_plus_one", 1.10),
            finished("saxpy-e-555555", "saxpy", "one_plus_one", 1.05),
        ];
        let page = render(&runs, &Anchors::default());
        let table = &page[page
            .find("## Strategies")
            .expect("two strategies of heat2d")..];
        let rows: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("| heat2d"))
            .collect();
        assert_eq!(rows.len(), 2, "{table}");
        assert!(
            rows[0].starts_with("| heat2d | one_plus_one | 3 (3) |")
                && rows[0].contains("| 1.20x, 1.00x, 1.10x, median 1.10x |"),
            "(1+1) first, runs in order, then the median: {}",
            rows[0]
        );
        assert!(
            rows[1].contains("| islands | 1 (1) |") && rows[1].contains("| 1.30x |"),
            "{}",
            rows[1]
        );
        assert!(
            !table.contains("| saxpy"),
            "a task with one strategy has no comparison"
        );
        // Repeated runs are told apart by their ids; a task's only run is not.
        assert!(page.contains("| heat2d (222222) |"), "{page}");
        assert!(page.contains("| saxpy | saxpy-e-555555 |"), "{page}");
        assert!(!page.contains("saxpy ("), "{page}");
    }

    #[test]
    fn an_empty_store_renders_the_three_tables_with_no_rows() {
        let page = render(&[], &Anchors::default());
        for heading in [
            "## Fractions of the roofline",
            "## Speedups",
            "## The winner beside",
        ] {
            assert!(page.contains(heading), "{page}");
        }
        assert!(
            !page.contains("## Strategies"),
            "no task has two strategies"
        );
        assert!(page.contains("Every winner meets its aims."));
    }
}
