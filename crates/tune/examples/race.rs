//! How many evaluations each tuning strategy needs to come within 2% of the
//! exhaustive optimum, replayed on a measured table: the JSON report of an
//! exhaustive `kevo tune` run. Each strategy's choices are replayed against
//! the measured scores (a stored configuration costs no device time, as in
//! `kevo tune`'s cache), over 32 seeds.
//!
//!     cargo run --release -p kevo-tune --example race -- REPORT.json [REPORT.json ...]

use std::collections::HashMap;

use kevo_tune::{Budget, Configuration, Step, StrategyKind, TuningSpace};
use serde_json::Value;

const SEEDS: u64 = 32;
const WITHIN: f64 = 0.98;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        return Err(
            "usage: race REPORT.json [REPORT.json ...] (exhaustive `kevo tune --json` reports)"
                .into(),
        );
    }
    println!(
        "| task | valid | optimum | strategy | evaluations to within 2%: mean | median | min-max |"
    );
    println!("|---|---|---|---|---|---|---|");
    for path in paths {
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        // The space, rebuilt from the report's declarations.
        let mut template = String::new();
        for p in report["space"]["parameters"]
            .as_array()
            .ok_or("no space.parameters")?
        {
            let name = p["name"].as_str().ok_or("parameter without a name")?;
            let values: Vec<String> = p["values"]
                .as_array()
                .ok_or("parameter without values")?
                .iter()
                .map(|v| v.to_string())
                .collect();
            template.push_str(&format!(
                "// kevo: tune {name} {}\nuse {name}\n",
                values.join(" ")
            ));
        }
        for c in report["space"]["constraints"]
            .as_array()
            .ok_or("no space.constraints")?
        {
            template.push_str(&format!(
                "// kevo: require {}\n",
                c["text"].as_str().unwrap_or("1")
            ));
        }
        let space = TuningSpace::parse(&template)?.ok_or("no parameters")?;
        let mut scores: HashMap<Configuration, Option<f64>> = HashMap::new();
        for t in report["trials"].as_array().ok_or("no trials")? {
            let assignments: Vec<(String, i64)> = t["configuration"]
                .as_object()
                .ok_or("trial without a configuration")?
                .iter()
                .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(i64::MIN)))
                .collect();
            let c = space.configuration(&assignments)?;
            scores.insert(c, t["score"].as_f64());
        }
        if scores.len() != space.valid().len() {
            return Err(format!(
                "{path}: {} of {} configurations measured: not an exhaustive report",
                scores.len(),
                space.valid().len()
            )
            .into());
        }
        let optimum = scores
            .values()
            .flatten()
            .fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        let task = report["task"].as_str().unwrap_or("?");
        for kind in StrategyKind::ALL {
            let seeds = if kind == StrategyKind::Exhaustive {
                1
            } else {
                SEEDS
            };
            let mut needed: Vec<usize> = (0..seeds)
                .map(|seed| {
                    let mut search = kind.build(seed);
                    let mut reached = None;
                    kevo_tune::run(&space, search.as_mut(), Budget::default(), |c, i| {
                        let score = scores[c];
                        if score.is_some_and(|s| s >= WITHIN * optimum) {
                            reached = Some(i + 1);
                            return Step::Break;
                        }
                        Step::Scored(score, ())
                    });
                    reached.expect("the optimum is in the space")
                })
                .collect();
            needed.sort_unstable();
            let mean = needed.iter().sum::<usize>() as f64 / needed.len() as f64;
            println!(
                "| {task} | {} | {optimum:.4} | {kind} | {mean:.1} | {} | {}-{} |",
                space.valid().len(),
                needed[needed.len() / 2],
                needed[0],
                needed[needed.len() - 1]
            );
        }
    }
    Ok(())
}
