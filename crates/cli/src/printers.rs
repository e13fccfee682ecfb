//! The text and JSON printers of `kevo tasks`, `kevo devices`, `kevo eval`
//! and `kevo bench` (tables of tasks, devices with their ceilings,
//! evaluations, and latency rows).
// Table headers pass their titles through the same width specifiers as the
// rows below them, which keeps the columns aligned by construction.
#![allow(clippy::print_literal)]

use anyhow::Result;
use kevo_backend::BackendName;
use kevo_eval::{Evaluation, Outcome};
use kevo_roofline::Ceilings;
use kevo_tasks::SizeSet;
use serde_json::json;

use kevo_runtimes::BackendKind;

pub fn print_tasks(json: bool) -> Result<()> {
    let tasks = kevo_tasks::all();
    if json {
        let v: Vec<_> = tasks
            .iter()
            .map(|t| {
                json!({
                    "name": t.name(),
                    "regime": t.regime(),
                    "ceiling": t.ceiling(),
                    "kernels": t.kernel_names(),
                    "full": t.sizes(SizeSet::Full),
                    "smoke": t.sizes(SizeSet::Smoke),
                    "large": t.sizes(SizeSet::Large),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "{:<10} {:<18} {:<9} {:<56} {:<18} validation",
        "task", "regime", "ceiling", "sizes (full)", "held-out"
    );
    for t in tasks {
        let full = t.sizes(SizeSet::Full);
        let labels: Vec<&str> = full
            .in_distribution
            .iter()
            .map(|s| s.label.as_str())
            .collect();
        let validation: Vec<&str> = full.validation.iter().map(|s| s.label.as_str()).collect();
        println!(
            "{:<10} {:<18} {:<9} {:<56} {:<18} {}",
            t.name(),
            t.regime(),
            t.ceiling().unit(),
            labels.join(", "),
            full.held_out.label,
            validation.join(", ")
        );
    }
    Ok(())
}

/// Whether `kevo devices` shows the micro-benchmarks' envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    No,
    /// The cached envelope (measured now if there is none).
    Cached,
    /// Measured again now and added to the envelope.
    Again,
}

pub fn print_devices(measure: Measure, json: bool, triton_python: Option<String>) -> Result<()> {
    let rows = device_rows(measure, triton_python);
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    for row in rows {
        print_device_row(&row)?;
    }
    println!(
        "worker sandbox on this machine: {}",
        kevo_worker::kevo_sandbox::available().summary()
    );
    Ok(())
}

/// One row per device of every backend (or per backend that is
/// unavailable, with why), then the Triton dialect: an interpreter with
/// Triton that compiles candidates for CUDA devices.
fn device_rows(measure: Measure, triton_python: Option<String>) -> Vec<serde_json::Value> {
    let mut rows = Vec::new();
    for (kind, devices) in kevo_runtimes::list() {
        let backend = kind.name();
        match devices {
            Err(reason) => {
                rows.push(json!({"backend": backend, "available": false, "reason": reason}))
            }
            Ok(devices) => {
                for (selector, info) in devices {
                    let id = match (&selector.platform, &selector.device) {
                        (Some(p), Some(d)) => format!("{p}:{d}"),
                        (_, Some(d)) => d.clone(),
                        _ => String::new(),
                    };
                    let ceilings = device_ceilings(kind, &selector, measure);
                    rows.push(json!({
                        "backend": backend,
                        "available": true,
                        "id": id,
                        "device": info,
                        "ceilings": ceilings.as_ref().ok(),
                        "ceilings_error": ceilings.as_ref().err().map(|e| format!("{e:#}")),
                    }));
                }
            }
        }
    }
    let python = triton_python.unwrap_or_else(kevo_triton::default_python);
    rows.push(match kevo_triton::availability(&python) {
        Ok(v) => json!({
            "backend": BackendName::Triton,
            "available": true,
            "python": python,
            "python_version": v.python,
            "triton_version": v.triton,
        }),
        Err(e) => json!({
            "backend": BackendName::Triton,
            "available": false,
            "python": python,
            "reason": e.to_string(),
        }),
    });
    rows
}

/// A row of [`device_rows`] as text: the device and its ceilings, with
/// the memory levels, the envelope and the extra measurements when known.
fn print_device_row(row: &serde_json::Value) -> Result<()> {
    let backend = row["backend"].as_str().unwrap_or("?");
    if backend.parse() == Ok(BackendName::Triton) && row["available"] == true {
        println!(
            "triton: {} (Python {}), Triton {}: compiles Triton candidates for CUDA devices (--triton-python or $KEVO_TRITON_PYTHON picks another interpreter)",
            row["python"].as_str().unwrap_or(""),
            row["python_version"].as_str().unwrap_or(""),
            row["triton_version"].as_str().unwrap_or("")
        );
        return Ok(());
    }
    if row["available"] == false {
        println!(
            "{backend}: unavailable: {}",
            row["reason"].as_str().unwrap_or("")
        );
        return Ok(());
    }
    let d = &row["device"];
    let kind = serde_json::from_value::<kevo_backend::DeviceInfo>(d.clone())
        .map_or_else(|_| "device".to_string(), |i| i.kind().to_string());
    println!(
        "{backend} {}: {} ({}; {kind}, {} compute units, {:.1} GiB)",
        row["id"].as_str().unwrap_or(""),
        d["name"].as_str().unwrap_or(""),
        d["platform"].as_str().unwrap_or(""),
        d["compute_units"],
        d["global_mem_bytes"].as_f64().unwrap_or(0.0) / (1u64 << 30) as f64
    );
    match (&row["ceilings"], row["ceilings_error"].as_str()) {
        (c, None) if !c.is_null() => {
            let c: Ceilings = serde_json::from_value(c.clone())?;
            println!(
                "    ceilings: {:.1} GB/s DRAM, {:.1} GFLOPS FP32 — {}",
                c.bandwidth_gbs, c.fp32_gflops, c.source
            );
            if let Some(h) = &c.hierarchy {
                print_hierarchy(h);
            }
            let measured: Option<kevo_roofline::Measurement> =
                serde_json::from_value(row["ceilings"]["measured"].clone()).ok();
            if let Some(m) = &measured {
                print_envelope(m, &row["ceilings"]["now"]);
            }
            if let Some(x) = measured.as_ref().and_then(|m| m.extras.as_ref()) {
                print_extras(x);
            }
        }
        (_, Some(e)) => println!("    ceilings: unavailable: {e}"),
        _ => {}
    }
    Ok(())
}

fn spread_text(s: &kevo_roofline::Spread, unit: &str) -> String {
    format!("{:.0} {unit} ({:.0}-{:.0})", s.median, s.min, s.max)
}

/// The measured levels, fastest first, each with its capacity and copy
/// bandwidth (median, min-max over the runs).
fn print_hierarchy(h: &kevo_roofline::Hierarchy) {
    println!("    memory levels (copy sweep, median (min-max)):");
    for l in &h.levels {
        match l.capacity_bytes {
            Some(cap) => println!(
                "      {:<5} up to {:>10}: {}",
                l.name,
                kevo_roofline::human_bytes(cap),
                spread_text(&l.gbs, "GB/s")
            ),
            None => println!(
                "      {:<5} {:>16}: {} (copy past every cache)",
                l.name,
                "",
                spread_text(&l.gbs, "GB/s")
            ),
        }
    }
    if h.driver_cache_bytes > 0 {
        println!(
            "      (the driver reports a {} cache; capacities above are measured)",
            kevo_roofline::human_bytes(h.driver_cache_bytes)
        );
    }
    if let Some(note) = &h.note {
        println!("      note: {note}");
    }
}

fn print_extras(x: &kevo_roofline::Extras) {
    let show = |what: &str, r: &Result<kevo_roofline::Spread, String>, unit: &str| match r {
        Ok(s) => println!("    {what}: {}", spread_text(s, unit)),
        Err(why) => println!("    {what}: not measured: {why}"),
    };
    show("shared/local memory", &x.shared_gbs, "GB/s");
    show("FP64 FMA", &x.fp64_gflops, "GFLOPS");
    show("FP16 FMA", &x.fp16_gflops, "GFLOPS");
    match &x.launch_overhead {
        Some(Ok(l)) => println!(
            "    empty launch: {:.1} us alone ({:.1}-{:.1}), {:.1} us each back to back ({:.1}-{:.1})",
            l.alone_us.median,
            l.alone_us.min,
            l.alone_us.max,
            l.back_to_back_us.median,
            l.back_to_back_us.min,
            l.back_to_back_us.max
        ),
        Some(Err(why)) => println!("    empty launch: not measured: {why}"),
        None => {}
    }
}

/// "envelope: the best of 3 measurements (2026-11-28 08:10 to 09:02 UTC)",
/// and what a re-measurement found now beside it.
fn print_envelope(m: &kevo_roofline::Measurement, now: &serde_json::Value) {
    let when = |t: u64| {
        chrono::DateTime::from_timestamp(t as i64, 0).map_or_else(
            || "?".into(),
            |d| d.format("%Y-%m-%d %H:%M UTC").to_string(),
        )
    };
    let first = if m.first_unix > 0 {
        m.first_unix
    } else {
        m.measured_unix
    };
    println!(
        "    envelope: the best of {} measurement{} ({} to {}): {:.1} GB/s copy, {:.1} GFLOPS FMA",
        m.runs,
        if m.runs == 1 { "" } else { "s" },
        when(first),
        when(m.measured_unix),
        m.copy_gbs,
        m.fma_gflops
    );
    if let Ok(now) = serde_json::from_value::<kevo_roofline::Measurement>(now.clone()) {
        println!(
            "    measured now: {:.1} GB/s copy, {:.1} GFLOPS FMA (a ceiling only rises: the envelope keeps the best)",
            now.copy_gbs, now.fma_gflops
        );
    }
}

#[derive(serde::Serialize)]
struct DeviceCeilings {
    /// The ceilings scores use.
    #[serde(flatten)]
    used: Ceilings,
    /// The cached envelope of micro-benchmark results, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    measured: Option<kevo_roofline::Measurement>,
    /// The measurement made now (`--remeasure`).
    #[serde(skip_serializing_if = "Option::is_none")]
    now: Option<kevo_roofline::Measurement>,
}

fn device_ceilings(
    kind: BackendKind,
    selector: &kevo_backend::DeviceSelector,
    measure: Measure,
) -> Result<serde_json::Value> {
    let mut b = kevo_runtimes::open(kind, selector, kevo_runtimes::OpenOptions::default())?;
    let cache = kevo_roofline::CeilingCache::default_location();
    let (measured, now) = match measure {
        Measure::No => (None, None),
        Measure::Cached => (Some(kevo_roofline::measured(b.as_mut(), &cache)?.0), None),
        Measure::Again => {
            let (now, envelope) = kevo_roofline::remeasure_into(b.as_mut(), &cache)?;
            (Some(envelope), Some(now))
        }
    };
    let used = kevo_roofline::ceilings(b.as_mut(), &cache)?;
    Ok(serde_json::to_value(DeviceCeilings {
        used,
        measured,
        now,
    })?)
}

/// One decimal for real ceilings; declared ones (`--ceilings`) may be tiny.
fn figure(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3e}")
    }
}

/// How a winner is named: a candidate of iteration 0 is the seed (or, in
/// MAP-Elites, the seed's entry in the archive), not a proposal.
pub fn winner_name(candidate: i64, iteration: u32) -> String {
    if iteration == 0 {
        format!("the seed (candidate {candidate})")
    } else {
        format!("candidate {candidate} from iteration {iteration}")
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}

/// A timing spread past which `kevo eval` warns: five times the timing
/// protocol's 1% target. An idle H200 stays under 1% at 32 of 36 seed
/// sizes; a loaded 2-core VM reached 36%.
const NOISY_SPREAD: f64 = 0.05;

pub fn print_evaluation(
    e: &Evaluation,
    ceilings: &Ceilings,
    vendor: Option<&kevo_eval::VendorBaseline>,
) {
    println!("task {} on {} ({})", e.task, e.device, e.backend);
    println!(
        "ceilings: {} GB/s, {} GFLOPS — {}",
        figure(ceilings.bandwidth_gbs),
        figure(ceilings.fp32_gflops),
        ceilings.source
    );
    if !e.sizes.is_empty() {
        println!(
            "{:<16} {:>7} {:>11} {:>9} {:>5} {:>16}  {}",
            "size", "correct", "median ms", "IQR/med", "runs", "achieved", "error (tolerance)"
        );
        for s in &e.sizes {
            let tol = s
                .tolerance
                .map(|t| format!(" ({t:.3e})"))
                .unwrap_or_default();
            println!(
                "{:<16} {:>7} {:>11.4} {:>8.2}% {:>5} {:>9.2} {:<6}  {}={:.3e}{}",
                s.label,
                yes_no(s.correct),
                s.time.median_s * 1e3,
                s.time.spread * 100.0,
                s.time.samples_s.len(),
                s.achieved,
                s.unit,
                s.metric,
                s.error,
                tol
            );
            println!("{:<16} {}", "", s.roofline_text());
            if let Some(line) = vendor.and_then(|v| v.size_text(&s.label)) {
                println!("{:<16} {line}", "");
            }
        }
        if let Some(first) = e.sizes.first() {
            println!("work model: {}", first.work_note);
        }
        for s in e.sizes.iter().filter(|s| s.time.spread > NOISY_SPREAD) {
            eprintln!(
                "{} {}: timing spread (IQR/median) {:.1}% over {} runs, against a target of 1%: \
                 the device was busy or the kernel's time varies; compare it only with figures measured \
                 in the same session",
                crate::style::paint(
                    crate::style::Stream::Stderr,
                    crate::style::Tone::Warning,
                    "warning:"
                ),
                s.label,
                s.time.spread * 100.0,
                s.time.samples_s.len()
            );
        }
    }
    for line in e.kernels.iter().filter_map(|k| k.facts_line()) {
        println!("compiler: {line}");
    }
    if let Some(v) = vendor {
        print_vendor_extras(e, v);
    }
    for (label, why) in e.suspicious() {
        println!("SUSPICIOUS at {label}: {why}");
    }
    match &e.outcome {
        Outcome::Correct { score } => {
            println!("result: correct, score {score:.4} (geometric mean of fraction)")
        }
        Outcome::CompileError { diagnostics, .. } => {
            println!("result: {}", e.outcome.summary());
            for line in diagnostics.log.lines().take(20) {
                println!("    {line}");
            }
        }
        other => println!("result: {}", other.summary()),
    }
    let w = &e.wall;
    println!(
        "wall {:.3} s: compile {:.3}, inputs {:.3}, reference {:.3}, device {:.3}, check {:.3}, other {:.3}",
        w.total_s,
        w.compile_s,
        w.inputs_s,
        w.reference_s,
        w.device_s,
        w.check_s,
        w.other_s()
    );
}

/// What the per-size lines of a vendor baseline leave out: that the library
/// is missing or failed, and sizes it ran that the kernel did not reach.
fn print_vendor_extras(e: &Evaluation, vendor: &kevo_eval::VendorBaseline) {
    if let Some(note) = vendor.note() {
        println!("{note}");
    }
    if let kevo_eval::VendorBaseline::Measured { sizes, .. } = vendor {
        for s in sizes
            .iter()
            .filter(|s| !e.sizes.iter().any(|k| k.label == s.label))
        {
            if let Some(line) = vendor.size_text(&s.label) {
                println!("{:<16} {line}", s.label);
            }
        }
    }
}

/// After the table of `kevo eval --all`: each task's vendor comparison.
pub fn print_vendor_summary(
    evaluations: &[Evaluation],
    baselines: &[Option<kevo_eval::VendorBaseline>],
) {
    for (e, b) in evaluations.iter().zip(baselines) {
        let Some(b) = b else { continue };
        if let Some(line) = b.ratios_text().or_else(|| b.note()) {
            println!("{:<10} {line}", e.task);
        }
    }
}

pub fn print_summary(evaluations: &[Evaluation], ceilings: &Ceilings) {
    if let Some(e) = evaluations.first() {
        println!("device {} ({})", e.device, e.backend);
    }
    println!(
        "ceilings: {} GB/s, {} GFLOPS — {}",
        figure(ceilings.bandwidth_gbs),
        figure(ceilings.fp32_gflops),
        ceilings.source
    );
    println!(
        "{:<10} {:<14} {:>8}  {:<40} {:>8}",
        "task", "outcome", "score", "fraction per size", "wall s"
    );
    for e in evaluations {
        let per_size: Vec<String> = e
            .sizes
            .iter()
            .map(|s| match s.cache_level() {
                Some(l) => format!(
                    "{} {:.1}% DRAM/{:.1}% {}",
                    s.label,
                    s.fraction * 100.0,
                    l.fraction * 100.0,
                    l.placement.level
                ),
                None => format!("{} {:.1}% {}", s.label, s.fraction * 100.0, s.peak_name()),
            })
            .collect();
        let score = e
            .outcome
            .score()
            .map(|s| format!("{s:.4}"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<10} {:<14} {:>8}  {:<40} {:>8.2}",
            e.task,
            e.outcome.kind(),
            score,
            per_size.join(", "),
            e.wall.total_s
        );
        if !e.outcome.is_correct() {
            println!("    {}", e.outcome.summary());
        }
    }
}

/// Latency of one task's evaluation: the cold first candidate (inputs and
/// references generated) and the median over warm repeats (both cached).
#[derive(serde::Serialize)]
pub struct BenchRow {
    pub task: String,
    pub correct: bool,
    pub cold: kevo_eval::WallTimes,
    pub warm_median: kevo_eval::WallTimes,
    pub warm_min_total_s: f64,
    pub warm_max_total_s: f64,
    pub repeats: usize,
    /// Device time of the timed runs alone (sum over sizes of 10 medians).
    pub timed_median_s: f64,
}

impl BenchRow {
    pub fn new(task: &str, cold: &Evaluation, warm: &[Evaluation]) -> Self {
        let pick = |f: fn(&kevo_eval::WallTimes) -> f64| {
            kevo_strategy::promotion::median(warm.iter().map(|e| f(&e.wall)).collect())
        };
        let totals: Vec<f64> = warm.iter().map(|e| e.wall.total_s).collect();
        BenchRow {
            task: task.to_string(),
            correct: cold.outcome.is_correct() && warm.iter().all(|e| e.outcome.is_correct()),
            cold: cold.wall.clone(),
            warm_median: kevo_eval::WallTimes {
                compile_s: pick(|w| w.compile_s),
                inputs_s: pick(|w| w.inputs_s),
                reference_s: pick(|w| w.reference_s),
                device_s: pick(|w| w.device_s),
                check_s: pick(|w| w.check_s),
                total_s: pick(|w| w.total_s),
            },
            warm_min_total_s: totals.iter().cloned().fold(f64::INFINITY, f64::min),
            warm_max_total_s: totals.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            repeats: warm.len(),
            timed_median_s: cold
                .sizes
                .iter()
                .map(|s| s.time.median_s * s.time.samples_s.len() as f64)
                .sum(),
        }
    }
}

/// The share of an evaluation's wall time that is neither compiling nor
/// device work: inputs, references, checks and the rest of the harness.
pub fn harness_share(w: &kevo_eval::WallTimes) -> f64 {
    ((w.total_s - w.compile_s - w.device_s) / w.total_s).max(0.0)
}

pub fn print_bench(rows: &[BenchRow], device: &kevo_backend::DeviceInfo, json: bool) -> Result<()> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"device": device, "rows": rows}))?
        );
        return Ok(());
    }
    println!("device {} ({})", device.name, device.backend);
    println!(
        "{:<10} {:<5} {:>9} | {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}  {}",
        "task",
        "",
        "total s",
        "compile",
        "inputs",
        "reference",
        "device",
        "check",
        "other",
        "harness",
        "timed",
        "warm spread"
    );
    for r in rows {
        for (label, w) in [("cold", &r.cold), ("warm", &r.warm_median)] {
            println!(
                "{:<10} {:<5} {:>9.4} | {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>7.1}% {:>9.4}  {}",
                r.task,
                label,
                w.total_s,
                w.compile_s,
                w.inputs_s,
                w.reference_s,
                w.device_s,
                w.check_s,
                w.other_s(),
                harness_share(w) * 100.0,
                r.timed_median_s,
                if label == "warm" {
                    format!(
                        "{:.4}..{:.4} (n={})",
                        r.warm_min_total_s, r.warm_max_total_s, r.repeats
                    )
                } else {
                    String::new()
                }
            );
        }
        if !r.correct {
            println!("    (not correct on every repeat)");
        }
    }
    Ok(())
}

/// The cost of evaluating through a worker process for one task: the
/// round trip minus the worker's own evaluation time (request and reply
/// serialisation, the pipe, waiting for the reply).
#[derive(serde::Serialize)]
pub struct IsolationRow {
    pub task: String,
    pub cost_median_s: f64,
    pub cost_max_s: f64,
    pub round_trip_median_s: f64,
    /// cost / round trip, medians.
    pub share: f64,
}

impl IsolationRow {
    pub fn new(task: &str, cost: &[f64], totals: &[f64]) -> Self {
        let cost_median_s = kevo_strategy::promotion::median(cost.to_vec());
        let round_trip_median_s = kevo_strategy::promotion::median(totals.to_vec());
        IsolationRow {
            task: task.to_string(),
            cost_median_s,
            cost_max_s: cost.iter().cloned().fold(0.0, f64::max),
            round_trip_median_s,
            share: cost_median_s / round_trip_median_s,
        }
    }
}

pub fn print_isolation(rows: &[IsolationRow], json: bool) -> Result<()> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "isolation": rows }))?
        );
        return Ok(());
    }
    println!(
        "{:<10} {:>14} {:>12} {:>16} {:>8}",
        "task", "isolation ms", "max ms", "round trip ms", "share"
    );
    for r in rows {
        println!(
            "{:<10} {:>14.3} {:>12.3} {:>16.3} {:>7.2}%",
            r.task,
            r.cost_median_s * 1e3,
            r.cost_max_s * 1e3,
            r.round_trip_median_s * 1e3,
            r.share * 100.0
        );
    }
    Ok(())
}

/// One task's evaluation latency with and without the worker's sandbox.
#[derive(serde::Serialize)]
pub struct SandboxCostRow {
    pub task: String,
    pub confined_median_s: f64,
    pub confined_q1_s: f64,
    pub confined_q3_s: f64,
    pub unconfined_median_s: f64,
    pub unconfined_q1_s: f64,
    pub unconfined_q3_s: f64,
    /// confined / unconfined - 1, medians.
    pub difference: f64,
    pub runs: usize,
    pub correct: bool,
}

fn quartiles(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if v.is_empty() {
            return f64::NAN;
        }
        let x = q * (v.len() - 1) as f64;
        let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
    };
    (at(0.25), at(0.5), at(0.75))
}

impl SandboxCostRow {
    pub fn new(task: &str, confined: &[f64], unconfined: &[f64], correct: bool) -> Self {
        let (cq1, cm, cq3) = quartiles(confined);
        let (uq1, um, uq3) = quartiles(unconfined);
        SandboxCostRow {
            task: task.to_string(),
            confined_median_s: cm,
            confined_q1_s: cq1,
            confined_q3_s: cq3,
            unconfined_median_s: um,
            unconfined_q1_s: uq1,
            unconfined_q3_s: uq3,
            difference: cm / um - 1.0,
            runs: confined.len().min(unconfined.len()),
            correct,
        }
    }
}

pub fn print_sandbox_cost(
    rows: &[SandboxCostRow],
    start: &SandboxCostRow,
    sandbox: &str,
    json: bool,
) -> Result<()> {
    let confined: f64 = rows.iter().map(|r| r.confined_median_s).sum();
    let unconfined: f64 = rows.iter().map(|r| r.unconfined_median_s).sum();
    let total = confined / unconfined - 1.0;
    if json {
        let value = json!({
            "sandbox": sandbox,
            "tasks": rows,
            "worker_start": start,
            "sum_of_medians": {"confined_s": confined, "unconfined_s": unconfined, "difference": total},
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!("sandbox: {sandbox}");
    println!(
        "{:<13} {:>5} {:>24} {:>24} {:>11}",
        "task", "runs", "confined ms (q1-q3)", "unconfined ms (q1-q3)", "difference"
    );
    for r in rows.iter().chain(std::iter::once(start)) {
        println!(
            "{:<13} {:>5} {:>9.2} ({:>6.2}-{:>6.2}) {:>9.2} ({:>6.2}-{:>6.2}) {:>+10.2}%{}",
            r.task,
            r.runs,
            r.confined_median_s * 1e3,
            r.confined_q1_s * 1e3,
            r.confined_q3_s * 1e3,
            r.unconfined_median_s * 1e3,
            r.unconfined_q1_s * 1e3,
            r.unconfined_q3_s * 1e3,
            r.difference * 100.0,
            if r.correct { "" } else { "  (not all correct)" }
        );
    }
    println!(
        "all tasks: {:.1} ms confined, {:.1} ms unconfined per round of candidates ({:+.2}%)",
        confined * 1e3,
        unconfined * 1e3,
        total * 100.0
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::winner_name;

    #[test]
    fn a_winner_from_iteration_zero_is_named_the_seed() {
        assert_eq!(winner_name(6, 0), "the seed (candidate 6)");
        assert_eq!(winner_name(29, 11), "candidate 29 from iteration 11");
    }
}
