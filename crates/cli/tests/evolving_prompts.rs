//! Prompts that evolve with the kernels (`--meta-prompter`) and a model
//! ensemble that learns which model pays off (`--model-choice ucb`), end to
//! end through the `kevo` binary on PoCL, with scripted `cmd:` models and a
//! loopback endpoint as the meta-prompter:
//! - the meta-prompter's edits apply only inside the guidance sections,
//!   and a rejected edit is reported back on its next call;
//! - its calls are stored and count in the run's spending;
//! - a prompt variant that produced a better kernel is sampled more;
//! - the bandit converges on the model that improves kernels;
//! - a run killed with SIGKILL resumes with its prompt archive and bandit.

use crate::common;

use common::opencl_available;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

/// The advice the meta-prompter adds to the strategies section.
const ADVICE: &str = "- MARKER-ADVICE: drop the busy loop, it only burns time.";

/// The first line of the CUDA/OpenCL strategies section it edits after.
const ANCHOR: &str = "- Let the compiler vectorise: contiguous per-work-item accesses, `vload4`/`vstore4` or `float4`, simple loop bodies without divergent branches.";

/// A saxpy that spends `loops` dependent FMAs per element, folded into the
/// result at a weight of 1e-30 (see examples/replay/opencl/start_slow.cl);
/// `nonce` makes sources differ so none is a duplicate.
fn saxpy(loops: &str, nonce: &str) -> String {
    format!(
        "__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {{
    uint i = get_global_id(0);
    if (i >= N) return;
    float busy = x[i];
    for (int k = 0; k < {loops}; ++k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f + 0.0f * (float)({nonce}u & 1u);
}}"
    )
}

fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("cmd:{}", path.display())
}

/// A model that answers a kernel 2x cheaper than its last one each call
/// (128, 64, ... dependent FMAs per element, down to 1): every answer
/// improves on the one before while the loop dominates.
fn improving_model(dir: &Path) -> String {
    let count = dir.join("improving.count");
    let kernel = saxpy("${L}", "${c}");
    script(
        dir,
        "improving.sh",
        &format!(
            "cat >/dev/null
c=$(cat '{count}' 2>/dev/null || echo 0)
echo $((c + 1)) > '{count}'
L=$((128 >> c)); [ \"$L\" -lt 1 ] && L=1
cat <<K
\\`\\`\\`opencl
{kernel}
\\`\\`\\`
K
",
            count = count.display()
        ),
    )
}

/// A model whose kernels never compile.
fn broken_model(dir: &Path) -> String {
    script(
        dir,
        "broken.sh",
        "cat >/dev/null
cat <<K
\\`\\`\\`opencl
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) { y[i] = a; }
\\`\\`\\`
K
",
    )
}

/// A model that follows the guidance: with the meta-prompter's advice in
/// its system prompt it drops the busy loop (a fast kernel), without it it
/// answers a slow one; a random nonce keeps answers distinct.
fn guided_model(dir: &Path) -> String {
    let fast = saxpy("0", "${n}");
    let slow = saxpy("96", "${n}");
    script(
        dir,
        "guided.sh",
        &format!(
            "prompt=$(cat)
n=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
echo '```opencl'
case \"$prompt\" in
*MARKER-ADVICE*) cat <<K
{fast}
K
;;
*) cat <<K
{slow}
K
;;
esac
echo '```'
"
        ),
    )
}

/// The seed every run here starts from: 256 dependent FMAs per element.
fn slow_seed(dir: &Path) -> PathBuf {
    let path = dir.join("slow_seed.cl");
    std::fs::write(&path, saxpy("256", "0")).unwrap();
    path
}

/// The meta-prompter's answer: a diagnosis, an edit inside the strategies
/// section, and an edit that reaches across a section marker (rejected).
/// Once the advice is in the guidance it is shown, it answers an edit
/// that matches nothing, so no further variant is made.
fn meta_answer(request: &str) -> String {
    if request.contains("MARKER-ADVICE") {
        return "Diagnosis: nothing new.\n<<<<<<< SEARCH\nno such line\n=======\nx\n>>>>>>> REPLACE\n"
            .into();
    }
    format!(
        "Diagnosis: every kernel keeps a busy loop that does no useful work.\n\n\
         <<<<<<< SEARCH\n{ANCHOR}\n=======\n{ANCHOR}\n{ADVICE}\n>>>>>>> REPLACE\n\n\
         <<<<<<< SEARCH\n<!-- kevo:end philosophy -->\n\n<!-- kevo:evolve strategies -->\n=======\nEXTRA\n>>>>>>> REPLACE\n"
    )
}

/// A loopback OpenAI-compatible meta-prompter answering [`meta_answer`]
/// with 1000 prompt and 100 completion tokens; every request body kept.
fn meta_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let url = common::serve_http(move |body| {
        kept.lock().unwrap().push(body.to_string());
        let request: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let text = request.to_string();
        let answer = serde_json::json!({
            "model": "gpt-5",
            "choices": [{"message": {"content": meta_answer(&text)}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100}
        });
        Some(("200 OK".into(), String::new(), answer.to_string()))
    });
    (url, seen)
}

/// The cost of one meta-prompter call at gpt-5's price.
const META_CALL_USD: f64 = 1000.0 * 1.25e-6 + 100.0 * 10e-6;

fn evolve_command(ws: &Path, dir: &Path, llm: &str, iterations: u32, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kevo"));
    c.env("OPENAI_API_KEY", "sk-test")
        .env("KEVO_CACHE_DIR", dir.join("cache"))
        .args(common::EVOLVE_SAXPY_SMOKE)
        .args(["--ceilings", "20,100", "--llm", llm, "--seed-kernel"])
        .arg(slow_seed(dir))
        .args(["--llm-retries", "0", "--json", "--rng-seed", "7"])
        .args(["--iterations", &iterations.to_string()])
        // Every answer of the improving model is a promotion, and 5
        // re-measurement rounds of the slow seed took 119 of a 14-answer
        // run's 143 s on PoCL; 2 rounds took 24 of 36 s (2026-11-30).
        .args(["--remeasure-rounds", "2"])
        .args(extra)
        .arg("--workspace")
        .arg(ws);
    c
}

fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn events(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn run_id(ws: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["runs", "--json", "--workspace"])
        .arg(ws)
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    runs[0]["id"].as_str().unwrap().to_string()
}

fn show(ws: &Path, json: bool) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kevo"));
    c.arg("show").arg(run_id(ws)).arg("--workspace").arg(ws);
    if json {
        c.arg("--json");
    }
    let out = c.output().unwrap();
    assert_ok(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn show_json(ws: &Path) -> serde_json::Value {
    serde_json::from_str(&show(ws, true)).unwrap()
}

/// `kevo report` of the run: the HTML page's text.
fn report(ws: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .arg("report")
        .arg(run_id(ws))
        .arg("--workspace")
        .arg(ws)
        .output()
        .unwrap();
    assert_ok(&out);
    let path = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap()
        .trim()
        .to_string();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn calls(ws: &Path) -> Vec<kevo_store::StoredLlmCall> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = kevo_store::Store::open_workspace(ws).await.unwrap();
        store
            .llm_calls(&kevo_store::RunId(run_id(ws)))
            .await
            .unwrap()
    })
}

fn system_prompt(ws: &Path, k: u32) -> String {
    let path = ws
        .join("runs")
        .join(run_id(ws))
        .join(format!("{k:02}_prompt.md"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn meta_prompter_edits_stay_inside_the_sections_and_the_better_variant_is_sampled_more() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let (url, seen) = meta_server();
    let meta = format!("openai@{url}:gpt-5");
    let out = evolve_command(
        &ws,
        dir.path(),
        &guided_model(dir.path()),
        14,
        &["--meta-prompter", &meta, "--meta-every", "4"],
    )
    .output()
    .unwrap();
    assert_ok(&out);

    // Before proposals 5, 9 and 13: three calls.
    let bodies = seen.lock().unwrap().clone();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    assert!(
        bodies[0].contains("kevo:evolve strategies"),
        "the sections are shown marked"
    );
    assert!(bodies[0].contains("Recent attempts"));
    // The edit across a marker was rejected, and the next call is told.
    assert!(
        bodies[1].contains("previous edits that were not applied")
            && bodies[1].contains("outside the evolvable sections"),
        "{}",
        bodies[1]
    );

    // Proposals 1-4 asked with the starting guidance; the new variant is
    // tried first (proposals 5 and 6), its advice inside the strategies
    // section and nothing else changed.
    for k in 1..=4 {
        assert!(!system_prompt(&ws, k).contains("MARKER-ADVICE"), "{k}");
    }
    for k in [5, 6] {
        let prompt = system_prompt(&ws, k);
        let strategies = prompt.find("### Strategies").unwrap();
        let pitfalls = prompt.find("### Pitfalls").unwrap();
        let advice = prompt.find("MARKER-ADVICE").expect("the edit applied");
        assert!(strategies < advice && advice < pitfalls, "{prompt}");
        assert!(!prompt.contains("EXTRA"), "the rejected edit left no trace");
        assert!(
            !prompt.contains("kevo:evolve"),
            "no markers reach the generator"
        );
    }

    // The archive: v1 made from v0 before proposal 5, fitter, and sampled
    // more once both had their trials.
    let shown = show_json(&ws);
    let archive = &shown["prompt_archive"];
    let variants = archive["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2, "{archive}");
    let (v0, v1) = (&variants[0], &variants[1]);
    assert_eq!(
        (v1["parent"].as_u64(), v1["created_at"].as_u64()),
        (Some(0), Some(5))
    );
    assert_eq!(v1["edited"], serde_json::json!(["strategies"]));
    assert!(v1["diagnosis"].as_str().unwrap().contains("busy loop"));
    assert!(v1["fitness"].as_f64().unwrap() > v0["fitness"].as_f64().unwrap() * 2.0);
    let uses = |v: &serde_json::Value| v["uses"].as_u64().unwrap();
    assert_eq!(uses(v0) + uses(v1), 14);
    assert!(uses(v1) >= 8 && uses(v1) > uses(v0), "{archive}");
    assert_eq!(archive["meta_calls"], 3);

    // Stored, and counted in the run's spending (the generator reports no
    // tokens, so the meta-prompter's are all there is).
    let meta_calls: Vec<_> = calls(&ws)
        .into_iter()
        .filter(|c| c.call.purpose == "meta-prompt")
        .collect();
    assert_eq!(meta_calls.len(), 3);
    let finished = events(&out)
        .into_iter()
        .find(|e| e["event"] == "finished")
        .unwrap();
    assert_eq!(finished["spent"]["input_tokens"], 3000, "{finished}");
    let cost = finished["spent"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 3.0 * META_CALL_USD).abs() < 1e-9, "{cost}");

    // Progress told of each meta-prompter turn, and `kevo show` lists the
    // variants and which one asked for each candidate.
    let turns: Vec<_> = events(&out)
        .into_iter()
        .filter(|e| e["event"] == "meta_prompt")
        .collect();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[0]["variant"], 1);
    assert_eq!(turns[0]["rejected"].as_array().unwrap().len(), 1);
    let text = show(&ws, false);
    assert!(
        text.contains("prompt variants (3 meta-prompter call(s), every 4 proposals"),
        "{text}"
    );
    assert!(
        text.contains("v1 (from v0 before proposal 5, edited strategies)"),
        "{text}"
    );
    assert!(
        text.contains("[prompt v1]") && text.contains("[prompt v0]"),
        "{text}"
    );
    // The report has the archive too.
    let page = report(&ws);
    let section = &page[page
        .find(r#"id="prompt-variants""#)
        .expect("a prompt variants section")..];
    assert!(
        section.contains("<td>v1</td><td>v0</td><td>5</td><td>strategies</td>"),
        "{section}"
    );
}

#[test]
fn the_bandit_converges_on_the_model_that_improves_kernels() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    // The broken model first in the spec: it is not favoured by order.
    let llm = format!(
        "{},{}",
        broken_model(dir.path()),
        improving_model(dir.path())
    );
    let out = evolve_command(&ws, dir.path(), &llm, 14, &["--model-choice", "ucb"])
        .output()
        .unwrap();
    assert_ok(&out);
    let shown = show_json(&ws);
    let models = shown["models"].as_array().unwrap();
    assert_eq!(models.len(), 2);
    let calls_of = |i: usize| models[i]["calls"].as_u64().unwrap();
    assert_eq!(calls_of(0) + calls_of(1), 14);
    assert!(calls_of(1) >= 10, "{models:?}");
    assert!(calls_of(0) >= 1, "the broken model was tried: {models:?}");
    assert_eq!(models[0]["mean_reward"], 0.0);
    assert!(
        models[1]["mean_reward"].as_f64().unwrap() > 0.1,
        "{models:?}"
    );
    // Each call is stored under the model that answered it, progress shows
    // the tally, and `kevo show` the table and each iteration's model.
    let improving = models[1]["model"].as_str().unwrap();
    assert!(improving.ends_with("improving.sh"));
    let answered: Vec<String> = calls(&ws)
        .into_iter()
        .filter(|c| c.call.purpose == "propose")
        .map(|c| c.call.provider)
        .collect();
    assert_eq!(
        answered.iter().filter(|p| *p == improving).count() as u64,
        calls_of(1)
    );
    let last = events(&out)
        .into_iter()
        .rfind(|e| e["event"] == "iteration")
        .unwrap();
    assert_eq!(last["arms"].as_array().unwrap().len(), 2, "{last}");
    let text = show(&ws, false);
    assert!(text.contains("models chosen by ucb"), "{text}");
    assert!(text.contains(&format!("[model {improving}]")), "{text}");
    let page = report(&ws);
    let section = &page[page
        .find(r#"id="model-choice""#)
        .expect("a model choice section")..];
    assert!(
        section.contains(&format!("<td>{improving}</td><td>{}</td>", calls_of(1))),
        "{section}"
    );
}

/// The arms' rewarded calls and the archive's variants, from the run's
/// last checkpoint.
fn stored_state(ws: &Path) -> (Vec<u64>, Vec<serde_json::Value>, u64) {
    let shown = show_json(ws);
    let rewarded = shown["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["rewarded"].as_u64().unwrap())
        .collect();
    let archive = &shown["prompt_archive"];
    (
        rewarded,
        archive["variants"].as_array().unwrap().clone(),
        archive["meta_calls"].as_u64().unwrap(),
    )
}

#[test]
fn a_killed_run_resumes_with_its_prompt_archive_and_bandit() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let (url, seen) = meta_server();
    let meta = format!("openai@{url}:gpt-5");
    let llm = format!(
        "{},{}",
        broken_model(dir.path()),
        improving_model(dir.path())
    );
    let mut cmd = evolve_command(
        &ws,
        dir.path(),
        &llm,
        10,
        &[
            "--model-choice",
            "ucb",
            "--meta-prompter",
            &meta,
            "--meta-every",
            "3",
        ],
    );
    let run = common::kill_after_iteration(&mut cmd, 5);
    let (rewarded_then, variants_then, meta_then) = stored_state(&ws);
    assert!(rewarded_then.iter().sum::<u64>() >= 5, "{rewarded_then:?}");
    assert_eq!(variants_then.len(), 2, "the variant made before proposal 4");
    assert!(meta_then >= 1);

    common::resume_to_end(ws.to_str().unwrap(), &run, dir.path());
    let (rewarded, variants, meta_calls) = stored_state(&ws);
    // Every call of the run rewarded once: the resumed run's bandit went on
    // from the checkpoint's arms, not from zero.
    assert_eq!(rewarded.iter().sum::<u64>(), 10, "{rewarded:?}");
    for (now, then) in rewarded.iter().zip(&rewarded_then) {
        assert!(now >= then, "{rewarded:?} {rewarded_then:?}");
    }
    // The variants made before the kill are kept as they were (their
    // text, lineage and origin), and the meta-prompter was asked once per
    // turn over both processes: before proposals 4, 7 and 10.
    for (now, then) in variants.iter().zip(&variants_then) {
        for key in ["id", "parent", "created_at", "guidance", "diagnosis"] {
            assert_eq!(now[key], then[key], "{key}");
        }
    }
    assert_eq!(meta_calls, 3);
    assert_eq!(seen.lock().unwrap().len(), 3);
    let meta_stored = calls(&ws)
        .into_iter()
        .filter(|c| c.call.purpose == "meta-prompt")
        .count();
    assert_eq!(meta_stored, 3);
}
