//! The performance analyst (`--analyst`) end to end through the `kevo`
//! binary on PoCL: its recommendation reaches the proposer's next prompt
//! (from a loopback endpoint, and replayed from its recording),
//! its call is stored with the candidate it analysed and counts in the
//! run's budget, a resumed run does not ask again, and an analyst that
//! fails leaves prompts without a recommendation and the run going.

use crate::common;

use common::opencl_available;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

/// The analyst's recommendation, as the loopback server answers it.
const ADVICE: &str = "Load x and y as float4: at 64K elements DRAM throughput is far below peak and each thread issues two 4-byte loads; expect the smallest size to double.";

/// The proposer's answer: a kernel that does not compile, so that the seed
/// stays the incumbent and is the only kernel analysed.
const KERNEL: &str = "```opencl\n__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) { y[i] = a; }\n```\n";

/// Whether a request is the analyst's (its system prompt says so).
fn is_analyst(body: &str) -> bool {
    body.contains("performance engineer reviewing")
}

/// A loopback OpenAI-compatible server answering analyst requests with
/// `analyst` (HTTP 500 when None) and proposer requests with `KERNEL`,
/// each with the given prompt-token count; every request body is kept.
fn serve(analyst: Option<&'static str>, tokens: u64) -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let url = common::serve_http(move |body| {
        kept.lock().unwrap().push(body.to_string());
        let (status, text) = match (is_analyst(body), analyst) {
            (true, None) => ("500 Internal Server Error", "{}".to_string()),
            (true, Some(text)) => ("200 OK", completion(text, tokens)),
            (false, _) => ("200 OK", completion(KERNEL, tokens)),
        };
        Some((status.to_string(), String::new(), text))
    });
    (url, seen)
}

fn completion(text: &str, prompt_tokens: u64) -> String {
    serde_json::json!({
        "model": "gpt-5",
        "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 100}
    })
    .to_string()
}

struct Ran {
    out: Output,
    ws: PathBuf,
}

impl Ran {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    fn assert_ok(&self) {
        assert!(
            self.out.status.success(),
            "exit {:?}\n{}\n{}",
            self.out.status,
            self.stdout(),
            self.stderr()
        );
    }

    fn run_id(&self) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
            .args(["runs", "--json", "--workspace"])
            .arg(&self.ws)
            .output()
            .unwrap();
        let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        runs[0]["id"].as_str().unwrap().to_string()
    }

    fn run_dir(&self) -> PathBuf {
        self.ws.join("runs").join(self.run_id())
    }

    fn calls(&self) -> Vec<kevo_store::StoredLlmCall> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let store = kevo_store::Store::open_workspace(&self.ws).await.unwrap();
            store
                .llm_calls(&kevo_store::RunId(self.run_id()))
                .await
                .unwrap()
        })
    }

    /// The `finished` event's summary.
    fn summary(&self) -> serde_json::Value {
        self.stdout()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["event"] == "finished")
            .unwrap_or_else(|| panic!("no finished event: {}", self.stdout()))
    }
}

/// `kevo evolve` of saxpy at smoke sizes on PoCL in `ws` (ceilings
/// declared, as the proposer tests do: the sweep is not what is tested).
fn evolve_command(ws: &Path, llm: &str, analyst: &str, iterations: u32) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kevo"));
    c.env("OPENAI_API_KEY", "sk-test")
        .env("KEVO_CACHE_DIR", ws.with_extension("cache"))
        .args(common::EVOLVE_SAXPY_SMOKE)
        .args(["--ceilings", "20,100", "--llm", llm, "--analyst", analyst])
        .args(["--llm-retries", "0", "--json", "--iterations"])
        .arg(iterations.to_string())
        .arg("--workspace")
        .arg(ws);
    c
}

fn evolve(ws: &Path, llm: &str, analyst: &str, iterations: u32, extra: &[&str]) -> Ran {
    let out = evolve_command(ws, llm, analyst, iterations)
        .args(extra)
        .output()
        .unwrap();
    Ran {
        out,
        ws: ws.to_path_buf(),
    }
}

#[test]
fn the_recommendation_reaches_the_next_prompt_and_is_stored_with_its_candidate() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = serve(Some(ADVICE), 1000);
    let model = format!("openai@{url}:gpt-5");
    let record = dir.path().join("calls.jsonl");
    let ran = evolve(
        &dir.path().join("ws"),
        &model,
        &model,
        2,
        &["--record", record.to_str().unwrap()],
    );
    ran.assert_ok();
    // The analyst was asked once about the seed (the incumbent of both
    // prompts), with its source and per-size results.
    let bodies = seen.lock().unwrap().clone();
    let asked: Vec<&String> = bodies.iter().filter(|b| is_analyst(b)).collect();
    assert_eq!(asked.len(), 1, "{bodies:?}");
    assert!(asked[0].contains("The kernel to analyse (seed)"));
    assert!(asked[0].contains("What was measured"));
    assert!(asked[0].contains("% of DRAM"), "{}", asked[0]);
    // Both of the proposer's prompts show the recommendation.
    let run_dir = ran.run_dir();
    for k in ["01", "02"] {
        let prompt = std::fs::read_to_string(run_dir.join(format!("{k}_prompt.md"))).unwrap();
        let section = prompt
            .find("## Performance analysis of the seed")
            .unwrap_or_else(|| panic!("{k}: {prompt}"));
        assert!(prompt[section..].contains(ADVICE), "{k}");
    }
    // Stored: tied to the seed, with its counts and cost.
    let calls = ran.calls();
    let analysis: Vec<_> = calls
        .iter()
        .filter(|c| c.call.purpose == "analysis")
        .collect();
    assert_eq!(analysis.len(), 1);
    let a = analysis[0];
    let seed_id = a.candidate_id.expect("tied to the candidate it analysed");
    assert!(
        run_dir.join(format!("analysis_{}.md", seed_id.0)).is_file(),
        "the run directory keeps the analyst's prompt and answer"
    );
    assert_eq!(a.iteration, 0);
    assert_eq!(a.call.response.as_deref(), Some(ADVICE));
    assert_eq!(
        (a.call.input_tokens, a.call.output_tokens),
        (Some(1000), Some(100))
    );
    let one_call = 1000.0 * 1.25e-6 + 100.0 * 10e-6;
    assert!((a.call.cost_usd.unwrap() - one_call).abs() < 1e-9);
    // The run's spending counts every call, the analyst's included.
    let summary = ran.summary();
    assert_eq!(summary["spent"]["input_tokens"], 3000, "{summary}");
    let cost = summary["spent"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 3.0 * one_call).abs() < 1e-9, "{summary}");
    // --record keeps the analyst's exchanges beside the proposer's.
    let analyst_record = dir.path().join("calls.analyst.jsonl");
    let recorded = std::fs::read_to_string(&analyst_record).unwrap();
    assert_eq!(recorded.lines().count(), 1);
    assert_eq!(std::fs::read_to_string(&record).unwrap().lines().count(), 2);

    // The two recordings replay the run with no server: the analyst's
    // answer reaches the proposer's prompts again.
    let replayed = evolve(
        &dir.path().join("replayed"),
        &format!("replay:{}", record.display()),
        &format!("replay:{}", analyst_record.display()),
        2,
        &[],
    );
    replayed.assert_ok();
    for k in ["01", "02"] {
        let prompt =
            std::fs::read_to_string(replayed.run_dir().join(format!("{k}_prompt.md"))).unwrap();
        assert!(prompt.contains(ADVICE), "{k}: {prompt}");
    }
    let calls = replayed.calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.call.purpose == "analysis")
            .map(|c| c.call.provider.starts_with("replay:"))
            .collect::<Vec<_>>(),
        [true]
    );
}

#[test]
fn the_analysts_spending_counts_in_the_budget() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // One analyst call of 100k prompt tokens costs $0.126; the budget of
    // $0.10 lets it go out (its worst case is about $0.05) and is spent
    // once it has returned, so the proposer's first call is refused.
    let (url, seen) = serve(Some(ADVICE), 100_000);
    let model = format!("openai@{url}:gpt-5");
    let ran = evolve(
        &dir.path().join("ws"),
        &model,
        &model,
        3,
        &["--max-cost-usd", "0.1"],
    );
    ran.assert_ok();
    let summary = ran.summary();
    assert_eq!(summary["iterations"], 0, "{summary}");
    assert!(
        summary["stop_reason"].as_str().unwrap().contains("budget"),
        "{summary}"
    );
    assert!(
        summary["spent"]["cost_usd"].as_f64().unwrap() > 0.1,
        "{summary}"
    );
    let bodies = seen.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1, "only the analyst was called");
    assert!(is_analyst(&bodies[0]));
}

#[test]
fn a_failing_analyst_leaves_prompts_without_advice_and_a_resume_does_not_ask_again() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = serve(None, 1000);
    let model = format!("openai@{url}:gpt-5");
    let ws = dir.path().join("ws");
    let ran = evolve(&ws, &model, &model, 2, &[]);
    ran.assert_ok();
    assert!(
        ran.stderr().contains("the analyst gave no recommendation"),
        "{}",
        ran.stderr()
    );
    let prompt = std::fs::read_to_string(ran.run_dir().join("01_prompt.md")).unwrap();
    assert!(!prompt.contains("Performance analysis"));
    let failed: Vec<_> = ran
        .calls()
        .into_iter()
        .filter(|c| c.call.purpose == "analysis")
        .collect();
    // Asked again for the second prompt (a failure is not an answer),
    // each failure stored with its error.
    assert_eq!(failed.len(), 2);
    assert!(failed.iter().all(|c| c.call.error.is_some()));
    let _ = seen;

    // An analysis that was answered is not asked again on resume: a run
    // killed after its first iteration goes on with the stored one.
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = serve(Some(ADVICE), 1000);
    let model = format!("openai@{url}:gpt-5");
    let ws = dir.path().join("ws");
    let run = common::kill_after_iteration(&mut evolve_command(&ws, &model, &model, 3), 1);
    let resumed = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .env("OPENAI_API_KEY", "sk-test")
        .env("KEVO_CACHE_DIR", ws.with_extension("cache"))
        .args(["evolve", "--resume", &run, "--json", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let analyst_calls = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|b| is_analyst(b))
        .count();
    assert_eq!(analyst_calls, 1, "the stored recommendation is reused");
    let run_dir = ws.join("runs").join(&run);
    for k in ["01", "02", "03"] {
        let prompt = std::fs::read_to_string(run_dir.join(format!("{k}_prompt.md"))).unwrap();
        assert!(prompt.contains(ADVICE), "{k}: {prompt}");
    }
}
