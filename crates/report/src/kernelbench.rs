//! KernelBench results from the store (`kevo table --kernelbench`): every
//! run on an imported KernelBench problem, its kernel (the run's winner,
//! the seed for a run of no proposals) at the problem's own size beside
//! the eager and torch.compile times the import measured, then the
//! literature's metrics over the problems: correct rate, fast_p against
//! the faster of the two baselines and against each, the geometric mean
//! speedup and the share of the speed-of-light bound (kevo's roofline
//! fraction). The import's record (`kernelbench.json`) travels in each
//! run's provenance, so nothing but the store is read.

use std::fmt::Write;

use kevo_eval::Evaluation;
use kevo_kernelbench::{ProblemResult, Summary, Timing, summarize};
use kevo_tasks::SizeSet;

use crate::data::RunData;

/// One run's row.
struct Row<'a> {
    data: &'a RunData,
    level: u64,
    problem: String,
    result: ProblemResult,
    /// The winner's outcome in words (`correct`, `suspicious: ...`,
    /// `wrong result at ...`).
    outcome: String,
    /// Why the baselines do not compare, where they do not.
    no_baseline: Option<String>,
}

impl<'a> Row<'a> {
    /// The row of a run on an imported problem; None for other runs.
    fn of(data: &'a RunData) -> Option<Row<'a>> {
        let record = &data.info.config["provenance"]["task"]["record"];
        let problem = record["problem"].as_str()?.to_string();
        let winner = data.winner.and_then(|w| data.evaluations.get(&w.0));
        let baseline_device = record["device"].as_str().unwrap_or("?");
        let no_baseline = if data.info.size_set != SizeSet::Full {
            Some(format!("the run used the {} sizes", data.info.size_set))
        } else if baseline_device != data.info.device {
            Some(format!(
                "baselines timed on {baseline_device}, the run on {}",
                data.info.device
            ))
        } else {
            None
        };
        let timing = |key: &str| -> Option<f64> {
            serde_json::from_value::<Timing>(record[key].clone())
                .ok()
                .and_then(|t| t.median_ms())
                .filter(|_| no_baseline.is_none())
        };
        // Suspicious (faster than the speed-of-light bound) is not correct.
        let correct = winner.is_some_and(|e| e.outcome.is_correct());
        let full = winner.and_then(|e| e.sizes.last());
        Some(Row {
            data,
            level: record["level"].as_u64().unwrap_or(0),
            problem: problem.clone(),
            result: ProblemResult {
                problem,
                correct,
                kernel_ms: full.filter(|_| correct).map(|s| s.time.median_s * 1e3),
                eager_ms: timing("eager_ms"),
                compile_ms: timing("compile_ms"),
                fraction: full.filter(|_| correct).map(|s| s.fraction),
            },
            outcome: winner.map_or("not evaluated".into(), outcome_words),
            no_baseline,
        })
    }
}

fn outcome_words(e: &Evaluation) -> String {
    if e.outcome.is_correct() {
        "correct".into()
    } else {
        e.outcome.summary()
    }
}

/// The tables of every run on an imported KernelBench problem among
/// `runs`, by level: one row per run, then the summary of its level.
pub fn render(runs: &[RunData]) -> String {
    let mut rows: Vec<Row<'_>> = runs.iter().filter_map(Row::of).collect();
    let mut out = String::new();
    if rows.is_empty() {
        out.push_str("No run here is on an imported KernelBench problem (`kevo kernelbench import`, then `kevo evolve --task FOLDER`).\n");
        return out;
    }
    rows.sort_by_key(|r| (r.level, id_of(&r.problem)));
    let mut levels: Vec<u64> = rows.iter().map(|r| r.level).collect();
    levels.dedup();
    for level in levels {
        let of_level: Vec<&Row<'_>> = rows.iter().filter(|r| r.level == level).collect();
        level_tables(&mut out, level, &of_level);
    }
    out
}

/// The problem's number: "19_ReLU" -> 19, for the order.
fn id_of(problem: &str) -> u64 {
    problem
        .split('_')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

fn level_tables(out: &mut String, level: u64, rows: &[&Row<'_>]) {
    let record = &rows[0].data.info.config["provenance"]["task"]["record"];
    let timed = rows.iter().any(|r| {
        let record = &r.data.info.config["provenance"]["task"]["record"];
        !record["eager_ms"].is_null()
    });
    let baselines = if timed {
        format!(
            "PyTorch {} on {}, timed by the import (median of 20 runs after 3 warm-ups; torch.compile's compilation outside the timing)",
            record["torch"].as_str().unwrap_or("?"),
            record["device"].as_str().unwrap_or("?"),
        )
    } else {
        "not timed (`kevo kernelbench import --time --device cuda` on the machine the runs use)"
            .into()
    };
    let _ = writeln!(
        out,
        "## KernelBench level {level}: {} runs\n\nBaselines: {baselines}. Speedups compare the kernel's median at the problem's own size with them on the same device; `best` is against the faster of eager and torch.compile. `SOL` is the kernel's share of the speed-of-light bound from the problem's bytes or flops: a kernel above 100% is suspicious, and not counted correct.\n",
        rows.len(),
    );
    out.push_str("| problem | run | proposals | outcome | kernel ms | eager ms | compile ms | best | vs eager | vs compile | SOL |\n");
    out.push_str("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    let ms = |v: Option<f64>| v.map_or("–".into(), |m| format!("{m:.4}"));
    let x = |v: Option<f64>| v.map_or("–".into(), |s| format!("{s:.2}x"));
    for r in rows {
        let proposals = r.data.history.iter().filter(|h| h.iteration > 0).count();
        let _ = writeln!(
            out,
            "| {} | {} | {proposals} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.problem,
            short_id(&r.data.info.id.0),
            r.outcome.replace('|', "/"),
            ms(r.result.kernel_ms),
            ms(r.result.eager_ms),
            ms(r.result.compile_ms),
            x(r.result.speedup_over_best()),
            x(r.result.speedup()),
            x(r.result.speedup_over_compile()),
            r.result
                .fraction
                .map_or("–".into(), |f| format!("{:.1}%", f * 100.0)),
        );
    }
    let results: Vec<ProblemResult> = rows.iter().map(|r| r.result.clone()).collect();
    summary_lines(out, &summarize(&results), &results);
    for r in rows
        .iter()
        .filter_map(|r| r.no_baseline.as_ref().map(|w| (r, w)))
    {
        let _ = writeln!(out, "- no speedup for {}: {}", r.0.problem, r.1);
    }
    out.push('\n');
}

fn summary_lines(out: &mut String, s: &Summary, results: &[ProblemResult]) {
    let fast = |v: &[(f64, f64)]| {
        v.iter()
            .map(|(p, f)| format!("fast_{p} {:.1}%", f * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let x = |g: Option<f64>| g.map_or("–".into(), |g| format!("{g:.2}x"));
    let fractions: Vec<f64> = results.iter().filter_map(|r| r.fraction).collect();
    let sol = (!fractions.is_empty())
        .then(|| (fractions.iter().map(|f| f.ln()).sum::<f64>() / fractions.len() as f64).exp());
    let _ = writeln!(
        out,
        "\n- **{} problems, correct {:.1}%.**\n- Against the faster of eager and torch.compile: {}; geometric-mean speedup {}.\n- Against eager: {}; geometric mean {}.\n- Against torch.compile: {}.\n- Share of the speed-of-light bound, geometric mean over the correct kernels: {}.",
        s.problems,
        s.correct_rate * 100.0,
        fast(&s.fast_p_best),
        x(s.geomean_speedup_best),
        fast(&s.fast_p),
        x(s.geomean_speedup),
        fast(&s.fast_p_compile),
        sol.map_or("–".into(), |f| format!("{:.1}%", f * 100.0)),
    );
}

/// A run id's last six characters, enough to tell runs apart.
fn short_id(id: &str) -> &str {
    &id[id.len().saturating_sub(6)..]
}
