//! Reports from a recorded run (the demo's replayed proposer on PoCL):
//! `kevo report` writes one self-contained HTML file whose charts and
//! tables carry the numbers the store holds, `kevo table` gives the same
//! run's figures, and `kevo export --trajectories` one record per step.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::opencl_available;

fn kevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every value of attribute `name` on elements whose text starts with
/// `<tag` and that carry `class="class"`, in document order.
fn attributes(html: &str, tag: &str, class: &str, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let opening = format!("<{tag} class=\"{class}\"");
    let mut rest = html;
    while let Some(at) = rest.find(&opening) {
        let element = &rest[at..];
        let end = element.find('>').unwrap();
        let head = &element[..end];
        let key = format!(" {name}=\"");
        if let Some(k) = head.find(&key) {
            let v = &head[k + key.len()..];
            out.push(v[..v.find('"').unwrap()].to_string());
        }
        rest = &element[end..];
    }
    out
}

/// The `<svg ... id="id">...</svg>` element.
fn svg<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no chart {id}"));
    let start = html[..at].rfind("<svg").unwrap();
    let end = start + html[start..].find("</svg>").unwrap();
    &html[start..end]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

/// `kevo table --results` of the same run: the seed's and the winner's
/// stored fractions per size, the confirmed speedup, a vendor anchor from
/// an anchors file as a same-session ratio, and Metal-Sci's best on the M1
/// for saxpy; a file of another kind is refused by name.
fn results_view_matches_the_store(
    dir: &Path,
    ws_s: &str,
    shown: &serde_json::Value,
    (seed, winner): (&[f64], &[f64]),
) {
    let run = shown["run"]["id"].as_str().unwrap();
    let device = shown["run"]["device"].as_str().unwrap();
    let largest = shown["history"][0]["sizes"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["label"]
        .as_str()
        .unwrap()
        .to_string();
    let time =
        |s: f64| serde_json::json!({"median_s": s, "min_s": s, "max_s": s, "samples_s": [s]});
    let anchors = dir.join("anchors-saxpy.json");
    let eval = serde_json::json!({
        "task": "saxpy", "device": device,
        "sizes": [{"label": largest, "time": time(2e-3)}],
        "vendor": {"status": "measured", "library": "cuBLAS", "sizes": [{"label": largest, "op": "axpy",
            "run": {"status": "correct", "time": time(3e-3), "warmups": 3, "metric": "max_abs", "error": 0.0, "tolerance": null}}]}
    });
    std::fs::write(&anchors, eval.to_string()).unwrap();
    let results = |anchors: &Path| {
        kevo()
            .args(["table", "--all", "--results", "--workspace", ws_s])
            .arg("--anchors")
            .arg(anchors)
            .output()
            .unwrap()
    };
    let out = results(&anchors);
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pct = |v: &[f64]| {
        v.iter()
            .map(|f| format!("{:.1}%", f * 100.0))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    let row = page
        .lines()
        .find(|l| l.starts_with("| saxpy | bandwidth |"))
        .unwrap_or_else(|| panic!("{page}"));
    assert!(
        row.contains(&format!("| {} | {} |", pct(seed), pct(winner))),
        "{row}"
    );
    assert!(
        row.ends_with("| 108.1% / 92.7% |"),
        "Metal-Sci's best on the M1 Pro: {row}"
    );
    let speedup = shown["run"]["summary"]["speedup"].as_f64().unwrap();
    assert!(
        page.contains(&format!("| saxpy | {run} | {speedup:.2}x")),
        "{page}"
    );
    assert!(
        page.contains(&format!(
            "| saxpy | cuBLAS | 3000.0 µs at {largest} | 2000.0 µs (same session) | 150.0% |"
        )),
        "{page}"
    );
    // Against a declared 20 GB/s a PoCL winner is far above the M1's best
    // fraction, or below it: the page says which.
    let best = shown["run"]["summary"]["best_score"].as_f64().unwrap();
    assert_eq!(
        page.contains("- saxpy: the winner's score "),
        best < 1.081,
        "{page}"
    );
    let refused = results(&dir.join("missing.json"));
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("missing.json"));
}

#[test]
fn report_table_and_trajectories_match_the_store() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let ws_s = ws.display().to_string();
    let out = kevo()
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .args(common::EVOLVE_SAXPY_SMOKE)
        .args(["--ceilings", "20,100", "--promotion", "strict"])
        .arg("--llm")
        .arg(format!(
            "replay:{}",
            root().join("examples/replay/saxpy-opencl.jsonl").display()
        ))
        .args(["--iterations", "4", "--seed-kernel"])
        .arg(root().join("examples/replay/opencl/start_slow.cl"))
        .args(["--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = kevo()
        .args(["runs", "--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    let run = runs[0]["id"].as_str().unwrap().to_string();
    let shown = kevo()
        .args(["show", &run, "--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let history = shown["history"].as_array().unwrap();
    assert_eq!(history.len(), 5, "the seed and four proposals");

    // The report, into a directory.
    let reports = dir.path().join("reports");
    let written = kevo()
        .args(["report", &run, "--workspace", &ws_s, "--out"])
        .arg(&reports)
        .output()
        .unwrap();
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    let path = reports.join(format!("{run}.html"));
    assert_eq!(
        String::from_utf8_lossy(&written.stdout).trim(),
        path.display().to_string()
    );
    let html = std::fs::read_to_string(&path).unwrap();
    // Self-contained: nothing is fetched to show it.
    for outside in ["<script src", "<link", "<img", "@import", "url("] {
        assert!(
            !html.contains(outside),
            "the report refers outside itself: {outside}"
        );
    }
    assert_eq!(
        html.matches("http://").count(),
        html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
        "the only addresses are SVG namespaces"
    );
    // One point per proposal on the iteration chart, with the stored
    // iteration, outcome, score and promotion.
    let chart = svg(&html, "progress-iteration");
    let iterations = attributes(chart, "circle", "point", "data-iteration");
    let outcomes = attributes(chart, "circle", "point", "data-outcome");
    let scores = attributes(chart, "circle", "point", "data-score");
    let promoted = attributes(chart, "circle", "point", "data-promoted");
    assert_eq!(iterations.len(), history.len());
    for (k, h) in history.iter().enumerate() {
        assert_eq!(iterations[k], h["iteration"].to_string());
        let kind = h["outcome_kind"].as_str().unwrap();
        assert_eq!(outcomes[k], kind, "iteration {k}");
        assert_eq!(promoted[k], h["promoted"].to_string());
        if kind == "correct" {
            let s: f64 = scores[k].parse().unwrap();
            assert!(
                close(s, h["score"].as_f64().unwrap()),
                "{s} vs {}",
                h["score"]
            );
        } else {
            assert_eq!(scores[k], "", "a failed proposal has no score");
        }
    }
    // The replay's order: compile error, wrong, slower, faster.
    assert_eq!(
        outcomes[1..],
        ["compile_error", "wrong_result", "correct", "correct"]
    );
    assert!(html.contains("id=\"progress-wall\""));
    assert!(
        html.contains("No model cost was recorded"),
        "a replay costs nothing"
    );
    // Roofline bars: the seed's and the winner's stored fractions per size,
    // then the held-out pair.
    let bars = svg(&html, "roofline-bars");
    let fractions: Vec<f64> = attributes(bars, "rect", "bar", "data-fraction")
        .iter()
        .map(|f| f.parse().unwrap())
        .collect();
    let series = attributes(bars, "rect", "bar", "data-series");
    let winner = shown["run"]["summary"]["best_candidate"].as_i64().unwrap();
    let of = |id: i64| {
        history.iter().find(|h| h["candidate_id"] == id).unwrap()["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["fraction"].as_f64().unwrap())
            .collect::<Vec<f64>>()
    };
    let (seed_f, winner_f) = (of(history[0]["candidate_id"].as_i64().unwrap()), of(winner));
    assert_eq!(seed_f.len(), 3);
    for k in 0..3 {
        assert_eq!(series[2 * k], "seed");
        assert!(close(fractions[2 * k], seed_f[k]));
        assert_eq!(series[2 * k + 1], "winner");
        assert!(close(fractions[2 * k + 1], winner_f[k]));
    }
    let held = shown["held_out"].as_array().unwrap();
    let held_fraction = |role: &str| {
        held.iter().find(|h| h["role"] == role).unwrap()["fraction"]
            .as_f64()
            .unwrap()
    };
    assert!(close(fractions[6], held_fraction("seed")));
    assert!(close(fractions[7], held_fraction("winner")));
    // The declared ceiling drawn and labelled beside its line, its
    // source in the legend; the achieved rates on the bars.
    assert!(
        bars.contains(r#"data-level="DRAM" data-value="20""#) && bars.contains(">DRAM 20.0 GB/s<"),
        "the ceiling: {bars}"
    );
    assert!(
        html.contains("dashed: the ceilings (declared"),
        "its source"
    );
    assert_eq!(attributes(bars, "rect", "bar", "data-achieved").len(), 8);
    // The machine-readable copy agrees, and the tables say the same.
    let data_start =
        html.find("id=\"kevo-report-data\">").unwrap() + "id=\"kevo-report-data\">".len();
    let data_end = data_start + html[data_start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&html[data_start..data_end]).unwrap();
    assert_eq!(data["winner"], winner);
    assert_eq!(data["points"].as_array().unwrap().len(), history.len());
    let speedup = shown["run"]["summary"]["speedup"].as_f64().unwrap();
    assert!(close(data["speedup"].as_f64().unwrap(), speedup));
    assert!(html.contains(&format!("{speedup:.2}x")));
    assert!(html.contains("<section id=\"lineage\">") && html.contains("<td class=\"ins\">"));
    assert!(html.contains("0.1.0 (commit"), "the kevo version");

    // The table of the same run.
    let table = kevo()
        .args(["table", "--all", "--format", "json", "--workspace", &ws_s])
        .output()
        .unwrap();
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    let table: serde_json::Value = serde_json::from_slice(&table.stdout).unwrap();
    let row = &table["runs"][0];
    assert_eq!(row["run"], run.as_str());
    assert!(close(row["speedup"].as_f64().unwrap(), speedup));
    assert_eq!(
        row["correct_rate"], 0.5,
        "two of four proposals were correct"
    );
    assert_eq!(row["iterations"], 4);
    assert_eq!(
        table["groups"][0]["fast_p"]["fast_2"],
        if speedup > 2.0 { 1.0 } else { 0.0 }
    );
    let filtered = kevo()
        .args([
            "table",
            "--all",
            "--task",
            "nbody",
            "--format",
            "csv",
            "--workspace",
            &ws_s,
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&filtered.stdout).lines().count(),
        1,
        "the header only"
    );

    results_view_matches_the_store(
        dir.path(),
        &ws_s,
        &shown,
        (
            &of(history[0]["candidate_id"].as_i64().unwrap()),
            &of(winner),
        ),
    );

    // Trajectories: one record per step after the seed.
    let file = dir.path().join("t.jsonl");
    let exported = kevo()
        .args(["export", &run, "--workspace", &ws_s, "--trajectories"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        exported.status.success(),
        "{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    // (Redaction of every text field: kevo-report's trajectories tests.)
    let text = std::fs::read_to_string(&file).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 4);
    for (k, r) in records.iter().enumerate() {
        assert_eq!(r["schema"], "kevo.trajectory/1");
        assert_eq!(r["iteration"], k as u64 + 1);
        assert!(r["prompt"]["user"].as_str().unwrap().len() > 100);
        assert!(r["response"].as_str().unwrap().contains("```"));
        assert!(
            r["kernel"]
                .as_str()
                .unwrap()
                .contains("__kernel void saxpy")
        );
        assert_eq!(r["outcome"], history[k + 1]["outcome_kind"]);
    }
    assert_eq!(records[0]["correct"], false);
    assert!(
        records[0]["feedback"]
            .as_str()
            .unwrap()
            .starts_with("compile error")
    );
    assert_eq!(records[0]["reward"], 0.0);
    let best = records.iter().find(|r| r["best_in_run"] == true).unwrap();
    assert_eq!(best["candidate"], winner);
    assert!(best["reward"].as_f64().unwrap() > 1.0);
    let only_best = dir.path().join("best.jsonl");
    kevo()
        .args([
            "export",
            "--all",
            "--best-only",
            "--workspace",
            &ws_s,
            "--trajectories",
        ])
        .arg(&only_best)
        .output()
        .unwrap();
    let best_lines = std::fs::read_to_string(&only_best).unwrap();
    assert_eq!(best_lines.lines().count(), 1);
}
