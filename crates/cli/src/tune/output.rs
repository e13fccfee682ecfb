//! What `kevo tune` prints: the run it starts, and at the end the table
//! of configurations, the best one and its held-out result, as text or
//! JSON.

use anyhow::Result;
use serde_json::{Value, json};

use super::{CONFIRM_TOP, Found, Row, Tuning};
use kevo_eval::Evaluation;
use kevo_tune::{Configuration, TuningSpace};
use kevo_worker::Worker;

impl Tuning<'_> {
    /// "tune saxpy on ... : 2 parameters, 12 of 16 configurations valid;
    /// strategy tpe, budget 32; run ...", after how the worker is confined.
    pub(super) fn print_header(&self, worker: &Worker) {
        let space = &self.kernel.space;
        println!("sandbox: {}", worker.sandbox().summary());
        println!(
            "tune {} on {} ({}), sizes {}: {} parameters, {} of {} configurations valid; \
             strategy {}, budget {}{}; run {}",
            self.task.name(),
            self.device.name,
            self.device.backend,
            self.size_set,
            space.parameters().len(),
            space.valid().len(),
            space.total(),
            self.args.strategy,
            self.budget.evaluations.unwrap_or(0),
            self.args
                .budget_s
                .map(|s| format!(" or {s} s"))
                .unwrap_or_default(),
            self.run,
        );
    }

    /// `--json`: the run, the space, every trial and the best.
    pub(super) fn print_json(&self, o: &Found) -> Result<()> {
        let space = &self.kernel.space;
        let report = json!({
            "run": self.run.as_str(),
            "task": self.task.name(),
            "device": self.device.name,
            "backend": self.device.backend,
            "sizes": self.size_set,
            "strategy": self.args.strategy,
            "seed": self.args.seed,
            "budget": self.budget,
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
            "best": o.best().map(|b| self.best_json(o, b)),
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        Ok(())
    }

    pub(super) fn best_json(&self, o: &Found, b: &Row) -> Value {
        json!({
            "configuration": assignments(&self.kernel.space, &b.configuration),
            "score": b.evaluation.outcome.score(),
            "speedup_over_seed": match (b.evaluation.outcome.score(), o.baseline.outcome.score()) {
                (Some(b), Some(s)) if s > 0.0 => Some(b / s),
                _ => None,
            },
            "kernel": o.written.as_ref().map(|p| p.display().to_string()),
            "held_out": o.held_out,
            "confirmed": confirmation_json(o.confirmation.as_ref()),
        })
    }

    /// The table of trials, how the search went, and the best.
    pub(super) fn print_text(&self, o: &Found) {
        let space = &self.kernel.space;
        print_table(space, &o.rows, &o.baseline);
        println!(
            "{} configurations in {:.1} s ({} measured, {} from the store); stopped: {}",
            o.rows.len(),
            o.started.elapsed().as_secs_f64(),
            o.measured(),
            o.rows.iter().filter(|r| r.cached_from.is_some()).count(),
            match o.stop {
                kevo_tune::Stop::Exhausted => "every valid configuration evaluated",
                kevo_tune::Stop::Evaluations => "budget of evaluations spent",
                kevo_tune::Stop::Seconds => "budget of seconds spent",
                kevo_tune::Stop::Interrupted => "interrupted",
            }
        );
        let Some(b) = o.best() else {
            println!("no configuration was correct");
            return;
        };
        let score = b.evaluation.outcome.score().unwrap_or(0.0);
        println!(
            "best: {}  score {score:.4} (one measurement){}",
            space.describe(&b.configuration),
            match o.baseline.outcome.score() {
                Some(s) if s > 0.0 => format!(", the naive seed {s:.4}"),
                _ => format!(", the naive seed: {}", o.baseline.outcome.summary()),
            }
        );
        println!("{}", confirmation_line(o.confirmation.as_ref()));
        if let Some(h) = &o.held_out {
            print_held_out(h);
        }
        if let Some(p) = &o.written {
            println!("kernel: {}", p.display());
        }
    }
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

pub(super) fn confirmation_json(c: Option<&kevo_evolve::Confirmation>) -> Value {
    match c {
        Some(c) => json!({
            "speedup": c.median,
            "low": c.low,
            "high": c.high,
            "level": c.level,
            "rounds": c.rounds,
            "ratios": c.ratios,
            "holds": c.holds(),
            "failure": c.failure,
        }),
        None => Value::Null,
    }
}

/// "confirmed: 1.04x the naive seed (93.8% interval 1.02-1.05) over 5
/// fresh rounds", or why nothing is.
fn confirmation_line(c: Option<&kevo_evolve::Confirmation>) -> String {
    match c {
        Some(c) if c.holds() => format!("confirmed against the naive seed: {}", c.describe()),
        Some(c) => format!(
            "not confirmed faster than the naive seed beyond the interval: {} (1.00x: the seed stands)",
            c.describe()
        ),
        None => format!(
            "not confirmed: none of the best {CONFIRM_TOP} beat the naive seed on interleaved rounds (1.00x)"
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
fn print_table(space: &TuningSpace, rows: &[Row], baseline: &Evaluation) {
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
    let mut order: Vec<&Row> = rows.iter().collect();
    order.sort_by(|a, b| {
        let s = |r: &Row| r.evaluation.outcome.score().unwrap_or(f64::NEG_INFINITY);
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
