//! What `kevo tune` prints at the end: the table of configurations, the
//! best one and its held-out result, as text or JSON.

use anyhow::Result;
use kevo_eval::Evaluation;
use kevo_evolve::Confirmation;
use kevo_evolve::tuning::{CONFIRM_TOP, TrialRow, Tuned, confirmation_json};
use kevo_tune::{Configuration, TuningSpace};
use serde_json::{Value, json};

/// The held-out result as stored, which the printers read.
fn held_out_json(o: &Tuned) -> Result<Option<Value>> {
    Ok(o.held_out.as_ref().map(serde_json::to_value).transpose()?)
}

/// `--json`: the run, the space, every trial and the best.
pub(super) fn print_json(o: &Tuned) -> Result<()> {
    let space = &o.space;
    let held_out = held_out_json(o)?;
    let report = json!({
        "run": o.run.as_str(),
        "task": o.task.name(),
        "device": o.device.name,
        "backend": o.device.backend,
        "sizes": o.size_set,
        "strategy": o.strategy,
        "seed": o.seed,
        "budget": o.budget,
        "stop": o.stop,
        "space": {
            "parameters": space.parameters(),
            "constraints": space.requirements().iter().map(|r| json!({
                "line": r.line, "text": r.constraint.text()
            })).collect::<Vec<_>>(),
            "valid": space.valid().len(),
            "total": space.total(),
        },
        "seed_kernel": evaluation_json(&o.baseline),
        "trials": o.rows.iter().map(|r| {
            let mut v = evaluation_json(&r.evaluation);
            v["index"] = json!(r.index);
            v["configuration"] = assignments(space, &r.configuration);
            v["cached_from"] = json!(r.cached_from);
            v["candidate"] = json!(r.candidate.0);
            v
        }).collect::<Vec<_>>(),
        "best": o.best().map(|b| best_json(o, b, held_out.as_ref())),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn best_json(o: &Tuned, b: &TrialRow, held_out: Option<&Value>) -> Value {
    json!({
        "configuration": assignments(&o.space, &b.configuration),
        "score": b.evaluation.outcome.score(),
        "speedup_over_seed": match (b.evaluation.outcome.score(), o.baseline.outcome.score()) {
            (Some(b), Some(s)) if s > 0.0 => Some(b / s),
            _ => None,
        },
        "kernel": o.written.as_ref().map(|p| p.display().to_string()),
        "held_out": held_out,
        "confirmed": confirmation_json(o.confirmation.as_ref()),
    })
}

/// The table of trials, how the search went, and the best.
pub(super) fn print_text(o: &Tuned) -> Result<()> {
    let space = &o.space;
    print_table(space, &o.rows, &o.baseline);
    println!(
        "{} configurations in {:.1} s ({} measured, {} from the store); stopped: {}",
        o.rows.len(),
        o.started.elapsed().as_secs_f64(),
        o.measured(),
        o.from_store(),
        match o.stop {
            kevo_tune::Stop::Exhausted => "every valid configuration evaluated",
            kevo_tune::Stop::Evaluations => "budget of evaluations spent",
            kevo_tune::Stop::Seconds => "budget of seconds spent",
            kevo_tune::Stop::Interrupted => "interrupted",
        }
    );
    let Some(b) = o.best() else {
        println!("no configuration was correct");
        return Ok(());
    };
    let score = b.evaluation.outcome.score().unwrap_or(0.0);
    println!(
        "best: {}  score {score:.4} in-run{}",
        space.describe(&b.configuration),
        match o.baseline.outcome.score() {
            Some(s) if s > 0.0 => format!(", the naive seed {s:.4} in-run"),
            _ => format!(", the naive seed: {}", o.baseline.outcome.summary()),
        }
    );
    println!("{}", confirmation_line(o.confirmation.as_ref()));
    if let Some(h) = &held_out_json(o)? {
        print_held_out(h);
    }
    if let Some(p) = &o.written {
        println!("kernel: {}", p.display());
    }
    Ok(())
}

/// The held-out result of the best configuration, and its verdict.
fn print_held_out(h: &Value) {
    println!(
        "held-out {}: {}",
        h["size"].as_str().unwrap_or("?"),
        match (h["fraction"].as_f64(), h["speedup"].as_f64()) {
            (Some(f), Some(s)) => format!("fraction {f:.4}, {s:.2}x the naive seed"),
            (Some(f), None) => format!("fraction {f:.4}"),
            _ => format!(
                "{} (the best configuration fails the held-out size)",
                h["outcome"]
            ),
        }
    );
    if let (Some(v), Some(why)) = (h["verdict"].as_str(), h["verdict_reason"].as_str()) {
        println!("held-out verdict: {v} ({why})");
    }
}

/// "speedup: 1.04x (93.8% interval 1.02-1.05) over 5 fresh rounds,
/// confirmed against the naive seed", or why nothing is.
fn confirmation_line(c: Option<&Confirmation>) -> String {
    match c {
        Some(c) if c.holds() => format!(
            "speedup: {}, confirmed against the naive seed",
            c.describe()
        ),
        Some(c) => format!(
            "speedup: 1.00x: the naive seed stands (the best measured {}, not faster beyond the interval)",
            c.describe()
        ),
        None => format!(
            "speedup: 1.00x: none of the best {CONFIRM_TOP} beat the naive seed on interleaved rounds"
        ),
    }
}

fn assignments(space: &TuningSpace, c: &Configuration) -> Value {
    space
        .assignments(c)
        .into_iter()
        .map(|(n, v)| (n, json!(v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn evaluation_json(e: &Evaluation) -> Value {
    json!({
        "outcome": e.outcome.kind(),
        "summary": e.outcome.summary(),
        "score": e.outcome.score(),
        "fractions": e.sizes.iter().map(|s| json!({
            "size": s.label, "fraction": s.fraction, "median_s": s.time.median_s,
        })).collect::<Vec<_>>(),
    })
}

/// Best first, failures last (in the order they were tried).
fn print_table(space: &TuningSpace, rows: &[TrialRow], baseline: &Evaluation) {
    let labels: Vec<String> = baseline
        .sizes
        .iter()
        .map(|s| s.label.clone())
        .chain(
            rows.iter()
                .flat_map(|r| r.evaluation.sizes.iter().map(|s| s.label.clone())),
        )
        .fold(Vec::new(), |mut v, l| {
            if !v.contains(&l) {
                v.push(l);
            }
            v
        });
    let mut order: Vec<&TrialRow> = rows.iter().collect();
    order.sort_by(|a, b| {
        let s = |r: &TrialRow| r.evaluation.outcome.score().unwrap_or(f64::NEG_INFINITY);
        s(b).total_cmp(&s(a)).then(a.index.cmp(&b.index))
    });
    let width = rows
        .iter()
        .map(|r| space.describe(&r.configuration).len())
        .max()
        .unwrap_or(13)
        .max("configuration".len());
    let mut header = format!("{:>4}  {:<width$}  {:>8}", "#", "configuration", "score");
    for l in &labels {
        header.push_str(&format!("  {:>9}", l));
    }
    header.push_str("  outcome");
    println!("{header}");
    let line = |index: String, name: String, e: &Evaluation, cached: bool| {
        let mut s = format!(
            "{index:>4}  {name:<width$}  {:>8}",
            e.outcome
                .score()
                .map(|s| format!("{s:.4}"))
                .unwrap_or_else(|| "-".into())
        );
        for l in &labels {
            let f = e.sizes.iter().find(|s| &s.label == l).filter(|s| s.correct);
            s.push_str(&format!(
                "  {:>9}",
                f.map(|s| format!("{:.4}", s.fraction))
                    .unwrap_or_else(|| "-".into())
            ));
        }
        s.push_str(&format!(
            "  {}{}",
            if e.outcome.is_correct() {
                "correct".to_string()
            } else {
                e.outcome.summary()
            },
            if cached { " (stored)" } else { "" }
        ));
        println!("{s}");
    };
    for r in order {
        line(
            (r.index + 1).to_string(),
            space.describe(&r.configuration),
            &r.evaluation,
            r.cached_from.is_some(),
        );
    }
    line("seed".into(), "(naive seed)".into(), baseline, false);
}
