//! `kevo ask` / `kevo tell` / `kevo finish` on PoCL: a run of 5 proposals
//! driven from this test, one command at a time, ends with the same history
//! as a `cmd:` run whose proposer gives the same 5 answers; bad input (an
//! answer without code, an unknown or answered proposal, a tell to a
//! finished run, an ask past the budget) is refused and changes nothing.

use crate::common;

use common::{EVOLVE_SAXPY_SMOKE, opencl_available, succeeded};
use std::path::Path;
use std::process::{Command, Output};

fn kevo(ws: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .output()
        .unwrap()
}

/// Exit code 2 and the error message.
fn refused(out: Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(2),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr).unwrap()
}

fn evolve(llm: &str) -> Vec<String> {
    evolve_for(llm, "5")
}

fn evolve_for(llm: &str, iterations: &str) -> Vec<String> {
    let rest = [
        "--iterations",
        iterations,
        "--promotion",
        "strict",
        "--final-remeasure",
        "0",
        "--llm",
        llm,
    ];
    EVOLVE_SAXPY_SMOKE
        .iter()
        .chain(&rest)
        .map(|s| s.to_string())
        .collect()
}

fn run_id(ws: &Path) -> String {
    let runs: Vec<_> = std::fs::read_dir(ws.join("runs")).unwrap().collect();
    assert_eq!(runs.len(), 1);
    runs[0].as_ref().unwrap().file_name().into_string().unwrap()
}

fn history(ws: &Path, run: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_str(&succeeded(kevo(ws, &["show", run, "--json"]))).unwrap();
    v["history"].as_array().unwrap().clone()
}

/// Five answers: the seed with a comment (a duplicate), one that does not
/// compile, a wrong one, a correct new kernel, and that kernel again
/// reformatted (a duplicate of a candidate of the run).
fn answers(seed: &str) -> Vec<String> {
    let kernel = |body: &str| {
        format!(
            "__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {{\n    uint i = get_global_id(0);\n    if (i >= N) return;\n{body}\n}}"
        )
    };
    let fenced = |text: &str, source: &str| format!("{text}\n```opencl\n{source}\n```\n");
    vec![
        fenced("The seed, commented.", &format!("// unchanged\n{seed}")),
        fenced(
            "A typo.",
            &kernel("    y[i] = a * x[i] + y[i]  /* no semicolon */"),
        ),
        fenced("Forgets y.", &kernel("    y[i] = a * x[i];")),
        fenced(
            "Plain multiply-add.",
            &kernel("    y[i] = a * x[i] + y[i];"),
        ),
        fenced(
            "Same, reformatted.",
            &kernel("        y[i] =   a * x[i] + y[i];"),
        ),
    ]
}

/// What must match between the two runs, iteration by iteration: the
/// outcome, whether a candidate was stored, and the response and source.
fn comparable(ws: &Path, run: &str) -> Vec<(u64, String, bool, String, String)> {
    let dir = ws.join("runs").join(run);
    history(ws, run)
        .iter()
        .map(|h| {
            let k = h["iteration"].as_u64().unwrap();
            let read = |name: String| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            (
                k,
                h["outcome_kind"].as_str().unwrap_or_default().to_string(),
                h["candidate_id"].is_number(),
                if k == 0 {
                    String::new()
                } else {
                    read(format!("{k:02}_response.md"))
                },
                if k == 0 {
                    read("00_seed.cl".into())
                } else {
                    read(format!("{k:02}_candidate.cl"))
                },
            )
        })
        .collect()
}

#[test]
fn ask_tell_matches_a_cmd_run_and_refuses_bad_input() {
    if !opencl_available() {
        eprintln!("skipped: no OpenCL device");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (ext_ws, cmd_ws) = (root.path().join("ext"), root.path().join("cmd"));

    // The external run: created, its seed evaluated, waiting.
    let args = evolve("external");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = succeeded(kevo(&ext_ws, &args));
    let run = run_id(&ext_ws);
    assert!(out.contains(&format!("next: kevo ask {run}")), "{out}");
    let seed = std::fs::read_to_string(ext_ws.join("runs").join(&run).join("00_seed.cl")).unwrap();
    let answers = answers(&seed);
    for (i, a) in answers.iter().enumerate() {
        std::fs::write(root.path().join(format!("answer{}.md", i + 1)), a).unwrap();
    }
    let listing = succeeded(kevo(&ext_ws, &["runs"]));
    assert!(listing.contains("interrupted"), "{listing}");
    // It is driven by ask/tell, not resumed.
    let err = refused(kevo(&ext_ws, &["evolve", "--resume", &run]));
    assert!(err.contains("kevo ask"), "{err}");

    // The cmd: run gets the same five answers from a proposer.
    let agent = root.path().join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\ncat >/dev/null\nc='{dir}/count'\nn=$(( $(cat \"$c\" 2>/dev/null || echo 0) + 1 ))\necho $n > \"$c\"\ncat '{dir}/answer'$n.md\n",
            dir = root.path().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let args = evolve(&format!("cmd:{}", agent.display()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeded(kevo(&cmd_ws, &args));
    let cmd_run = run_id(&cmd_ws);

    let ask = |n: &str| -> Vec<serde_json::Value> {
        serde_json::from_str(&succeeded(kevo(
            &ext_ws,
            &["ask", &run, "--n", n, "--json"],
        )))
        .unwrap()
    };
    let tell = |id: i64, file: &Path| {
        kevo(
            &ext_ws,
            &["tell", &run, &id.to_string(), file.to_str().unwrap()],
        )
    };
    let no_code = root.path().join("no_code.md");
    std::fs::write(&no_code, "I would unroll the loop, but here is no code.").unwrap();
    for i in 1..=5 {
        let asked = ask("1");
        assert_eq!(asked.len(), 1);
        let id = asked[0]["proposal"].as_i64().unwrap();
        let file = asked[0]["prompt_file"].as_str().unwrap();
        let prompt = std::fs::read_to_string(file).unwrap();
        assert!(prompt.contains(asked[0]["user"].as_str().unwrap()));
        if i == 1 {
            let shown = succeeded(kevo(&ext_ws, &["show", &run]));
            assert!(
                shown.contains(&format!("proposal {id} (pending), asked after iteration 0")),
                "{shown}"
            );
        }
        if i == 2 {
            // An answer without code: refused, nothing stored.
            let before = history(&ext_ws, &run);
            let err = refused(tell(id, &no_code));
            assert!(
                err.contains("nothing to evaluate") && err.contains("nothing was stored"),
                "{err}"
            );
            assert_eq!(history(&ext_ws, &run), before);
        }
        let out = succeeded(tell(id, &root.path().join(format!("answer{i}.md"))));
        assert!(out.contains(&format!("iteration {i} of run")), "{out}");
        // The last budgeted answer points at `kevo finish`, never at an
        // `ask` that would refuse.
        let next = match i {
            5 => format!("next: kevo finish {run} (5 iterations done)"),
            _ => format!("next: kevo ask {run}"),
        };
        assert!(out.contains(&next), "{out}");
        // The iteration's prompt is the one handed out.
        let stored = std::fs::read_to_string(
            ext_ws
                .join("runs")
                .join(&run)
                .join(format!("{i:02}_prompt.md")),
        )
        .unwrap();
        assert_eq!(stored, prompt);
        if i == 3 {
            let err = refused(tell(id, &root.path().join("answer4.md")));
            assert!(
                err.contains(&format!("proposal {id}")) && err.contains("answered (iteration 3)"),
                "{err}"
            );
            let err = refused(tell(9999, &root.path().join("answer4.md")));
            assert!(err.contains("no proposal 9999"), "{err}");
        }
    }
    // The budget (5 iterations) is spent: no more prompts.
    let err = refused(kevo(&ext_ws, &["ask", &run]));
    assert!(
        err.contains("5 iterations done") && err.contains("kevo finish"),
        "{err}"
    );

    assert_eq!(comparable(&ext_ws, &run), comparable(&cmd_ws, &cmd_run));
    let kinds: Vec<String> = comparable(&ext_ws, &run).into_iter().map(|c| c.1).collect();
    assert_eq!(
        kinds,
        [
            "correct",
            "correct",
            "compile_error",
            "wrong_result",
            "correct",
            "correct"
        ],
        "seed, duplicate of the seed, compile error, wrong, new kernel, its duplicate"
    );

    let summary = succeeded(kevo(&ext_ws, &["finish", &run]));
    assert!(summary.contains("held-out"), "{summary}");
    assert!(
        summary.contains("finished by `kevo finish` after 5"),
        "{summary}"
    );
    let err = refused(tell(1, &root.path().join("answer4.md")));
    assert!(err.contains("is finished"), "{err}");
    let err = refused(kevo(&ext_ws, &["ask", &run]));
    assert!(err.contains("is finished"), "{err}");
    let err = refused(kevo(&cmd_ws, &["ask", &cmd_run]));
    assert!(err.contains("--llm external"), "{err}");

    // The calls are stored as the proposer's would be, by who answered.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = kevo_store::Store::open_workspace(&ext_ws).await.unwrap();
        let calls = store
            .llm_calls(&kevo_store::RunId(run.clone()))
            .await
            .unwrap();
        assert_eq!(calls.len(), 5);
        assert!(
            calls
                .iter()
                .all(|c| c.call.provider == "external" && c.call.input_tokens.is_none())
        );
        let proposals = store
            .proposals(&kevo_store::RunId(run.clone()))
            .await
            .unwrap();
        assert_eq!(proposals.len(), 5);
        assert!(
            proposals
                .iter()
                .all(|p| p.status == kevo_store::ProposalStatus::Answered)
        );
    });
}

/// A coordinator without the device and an evaluation host without a
/// network path to it: prompts are asked and answers kept (`tell --defer`)
/// where no OpenCL platform exists, the workspace is copied to a host with
/// the device, `tell --deferred` records the kept answers there in the
/// order they were asked, and `finish` evaluates a kept answer before the
/// final pick. Nothing is lost where the device is missing.
#[test]
fn deferred_answers_travel_with_the_store_and_are_evaluated_where_the_device_is() {
    if !opencl_available() {
        eprintln!("skipped: no OpenCL device");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (coordinator, host) = (root.path().join("coordinator"), root.path().join("host"));
    let args = evolve("external");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeded(kevo(&coordinator, &args));
    let run = run_id(&coordinator);
    let seed =
        std::fs::read_to_string(coordinator.join("runs").join(&run).join("00_seed.cl")).unwrap();
    let answers = answers(&seed);
    // No OpenCL platform on the coordinator: an empty vendors directory.
    let no_platforms = root.path().join("no-vendors");
    std::fs::create_dir(&no_platforms).unwrap();
    let no_device = |ws: &Path, args: &[&str]| -> Output {
        Command::new(env!("CARGO_BIN_EXE_kevo"))
            .args(args)
            .arg("--workspace")
            .arg(ws)
            .env("OCL_ICD_VENDORS", &no_platforms)
            .output()
            .unwrap()
    };
    let asked: Vec<serde_json::Value> = serde_json::from_str(&succeeded(no_device(
        &coordinator,
        &["ask", &run, "--n", "3", "--json"],
    )))
    .unwrap();
    let ids: Vec<i64> = asked
        .iter()
        .map(|a| a["proposal"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    let no_code = root.path().join("no_code.md");
    std::fs::write(&no_code, "No code this time.").unwrap();
    let tell = |ws: &Path, id: i64, file: &Path, defer: bool| {
        let mut args = vec!["tell", &run];
        let id = id.to_string();
        args.extend([id.as_str(), file.to_str().unwrap()]);
        if defer {
            args.push("--defer");
        }
        no_device(ws, &args)
    };
    // An answer without code is refused where it was written.
    let err = refused(tell(&coordinator, ids[0], &no_code, true));
    assert!(err.contains("nothing to evaluate"), "{err}");
    // The typo, the wrong kernel and the new one, kept in that order.
    for (id, i) in ids.iter().zip([1, 2, 3]) {
        let file = root.path().join(format!("answer{i}.md"));
        std::fs::write(&file, &answers[i]).unwrap();
        let out = succeeded(no_device(
            &coordinator,
            &[
                "tell",
                &run,
                &id.to_string(),
                file.to_str().unwrap(),
                "--defer",
                "--model",
                "a test's answers",
            ],
        ));
        assert!(
            out.contains(&format!("{i} of run {run} wait")) && out.contains("--deferred"),
            "{out}"
        );
    }
    let err = refused(tell(&coordinator, ids[0], &no_code, false));
    assert!(
        err.contains("already has an answer") && err.contains("--deferred"),
        "{err}"
    );
    let shown = succeeded(no_device(&coordinator, &["show", &run]));
    assert!(
        shown.contains(&format!("proposal {} (pending, answer kept at", ids[2])),
        "{shown}"
    );
    // Evaluating needs the device: refused here, and nothing is lost.
    let out = no_device(&coordinator, &["tell", &run, "--deferred"]);
    assert!(!out.status.success(), "evaluated without a device");
    assert_eq!(history(&coordinator, &run).len(), 1, "only the seed");

    // The store travels to the host with the device.
    let copied = Command::new("cp")
        .arg("-r")
        .arg(&coordinator)
        .arg(&host)
        .status()
        .unwrap();
    assert!(copied.success());
    let out = succeeded(kevo(&host, &["tell", &run, "--deferred"]));
    for (k, id) in ids.iter().enumerate() {
        assert!(
            out.contains(&format!("proposal {id} is iteration {} of run", k + 1)),
            "{out}"
        );
    }
    assert!(out.contains(&format!("next: kevo ask {run}")), "{out}");
    let kinds: Vec<String> = history(&host, &run)
        .iter()
        .map(|h| h["outcome_kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["correct", "compile_error", "wrong_result", "correct"]
    );
    let out = succeeded(kevo(&host, &["tell", &run, "--deferred"]));
    assert!(out.contains("no answer kept with --defer"), "{out}");
    let out = succeeded(kevo(&host, &["tell", "--deferred"]));
    assert!(out.contains("no run has answers kept"), "{out}");

    // Back on the coordinator: the next prompt builds on what the host
    // decided, and a kept answer is evaluated by `finish` before the pick.
    let back = root.path().join("back");
    assert!(
        Command::new("cp")
            .arg("-r")
            .arg(&host)
            .arg(&back)
            .status()
            .unwrap()
            .success()
    );
    let asked: Vec<serde_json::Value> =
        serde_json::from_str(&succeeded(no_device(&back, &["ask", &run, "--json"]))).unwrap();
    assert_eq!(asked[0]["asked_after"].as_u64(), Some(3));
    let last = asked[0]["proposal"].as_i64().unwrap();
    let file = root.path().join("answer4.md");
    std::fs::write(&file, &answers[4]).unwrap();
    succeeded(tell(&back, last, &file, true));
    let summary = succeeded(kevo(&back, &["finish", &run]));
    assert!(summary.contains("after 4 answered"), "{summary}");
    assert_eq!(history(&back, &run).len(), 5);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = kevo_store::Store::open_workspace(&back).await.unwrap();
        let calls = store
            .llm_calls(&kevo_store::RunId(run.clone()))
            .await
            .unwrap();
        assert_eq!(calls.len(), 4);
        assert!(
            calls[..3]
                .iter()
                .all(|c| c.call.model == "a test's answers")
        );
        let proposals = store
            .proposals(&kevo_store::RunId(run.clone()))
            .await
            .unwrap();
        assert!(
            proposals
                .iter()
                .all(|p| p.status == kevo_store::ProposalStatus::Answered && p.deferred.is_none())
        );
    });

    // The exchanges as a recording: a replay proposes the same kernels.
    let recording = root.path().join("recording.jsonl");
    let out = kevo(
        &back,
        &["export", &run, "--recording", recording.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&recording).unwrap().lines().count(),
        4
    );
    let replayed = root.path().join("replayed");
    let args = evolve_for(&format!("replay:{}", recording.display()), "4");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeded(kevo(&replayed, &args));
    let replay_run = run_id(&replayed);
    let proposed = |ws: &Path, run: &str| -> Vec<(String, String)> {
        comparable(ws, run)
            .into_iter()
            .map(|c| (c.3, c.4))
            .collect()
    };
    assert_eq!(proposed(&replayed, &replay_run), proposed(&back, &run));
}
