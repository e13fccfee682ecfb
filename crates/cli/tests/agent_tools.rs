//! `--agent-tools` end to end on PoCL: a local server speaking OpenAI's
//! tool-call format scripts a model that checks a broken kernel (the real
//! compiler's error comes back), times a correct one against the
//! incumbent (real timings), asks for the held-out size (refused without
//! naming it), and submits. The run evaluates what was submitted as any
//! answer, stores the conversation with the call, and no request the model
//! received holds a held-out or validation size.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::common::{self, EVOLVE_SAXPY_SMOKE, opencl_available};
use kevo_tasks::SizeSet;

const BROKEN: &str = "__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) { y[get_global_id(0)] = a * undefined_name; }";
const FAST: &str = "__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {\n    uint i = get_global_id(0);\n    if (i < N) y[i] = fma(a, x[i], y[i]);\n}";

/// The scripted model's answer to its `turn`-th request (0-based).
fn scripted(turn: usize, held_out: &str) -> serde_json::Value {
    let call = |name: &str, args: serde_json::Value| {
        serde_json::json!({
            "model": "gpt-5",
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("call_{turn}"), "type": "function",
                 "function": {"name": name, "arguments": args.to_string()}}]},
                "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100}
        })
    };
    match turn {
        0 => call("check", serde_json::json!({ "source": BROKEN })),
        1 => call("time", serde_json::json!({ "source": FAST })),
        2 => call(
            "time",
            serde_json::json!({ "source": FAST, "sizes": [held_out] }),
        ),
        3 => call("show", serde_json::json!({ "which": "incumbent" })),
        _ => call("submit", serde_json::json!({ "source": FAST })),
    }
}

/// One proposal on saxpy by the agent `sh SCRIPT` with model settings
/// `config`, into workspace `ws` (the cache under `dir`).
fn evolve_agent(dir: &Path, script: &Path, config: &Path, ws: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .env("KEVO_CACHE_DIR", dir.join("cache"))
        .args(EVOLVE_SAXPY_SMOKE)
        .args(["--iterations", "1", "--llm"])
        .arg(format!("agent:sh {}", script.display()))
        .arg("--llm-config")
        .arg(config)
        .arg("--workspace")
        .arg(ws)
        .output()
        .unwrap()
}

/// `kevo show RUN` of workspace `ws`.
fn show(ws: &Path, run: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["show", run, "--workspace"])
        .arg(ws)
        .output()
        .unwrap();
    common::succeeded(out)
}

fn stored_calls(ws: &Path) -> Vec<kevo_store::StoredLlmCall> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = kevo_store::Store::open_workspace(ws).await.unwrap();
        let runs = store.list_runs().await.unwrap();
        let calls = store.llm_calls(&runs[0].id).await.unwrap();
        store.close().await;
        calls
    })
}

#[test]
fn a_model_with_tools_checks_times_is_refused_the_held_out_size_and_submits() {
    if !opencl_available() {
        return;
    }
    let task = kevo_tasks::by_name("saxpy").unwrap();
    let smoke = task.sizes(SizeSet::Smoke);
    let full = task.sizes(SizeSet::Full);
    let held_out = smoke.held_out.label.clone();
    let secret_labels: Vec<String> = [&smoke, &full]
        .iter()
        .flat_map(|p| {
            std::iter::once(p.held_out.label.clone())
                .chain(p.validation.iter().map(|s| s.label.clone()))
        })
        .collect();
    let bodies = Arc::new(Mutex::new(Vec::<String>::new()));
    let kept = bodies.clone();
    let url = common::serve_http(move |body| {
        let mut kept = kept.lock().unwrap();
        let turn = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| {
                v["messages"]
                    .as_array()
                    .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
            })
            .unwrap_or(0);
        kept.push(body.to_string());
        Some((
            "200 OK".into(),
            String::new(),
            scripted(turn, &held_out).to_string(),
        ))
    });
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .env("OPENAI_API_KEY", "sk-test-agent-tools")
        .args(EVOLVE_SAXPY_SMOKE)
        .args(["--iterations", "1", "--agent-tools", "--llm"])
        .arg(format!("openai@{url}:gpt-5"))
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    let calls = stored_calls(&ws);
    let proposal = calls.iter().find(|c| c.call.purpose == "propose").unwrap();
    assert_eq!(proposal.call.error, None);
    assert!(
        proposal
            .call
            .response
            .as_deref()
            .unwrap()
            .contains("fma(a, x[i], y[i])")
    );
    // Five turns of 1,000 + 100 tokens, counted as one call's.
    assert_eq!(proposal.call.input_tokens, Some(5000));
    assert_eq!(proposal.call.output_tokens, Some(500));
    let t = proposal
        .call
        .transcript
        .as_ref()
        .expect("the conversation is stored");
    assert_eq!(t["ended"], "submitted");
    assert_eq!(t["calls"], 3, "{t}");
    let call = |turn: usize| &t["turns"][turn]["calls"][0];
    // The real compiler's complaint about the broken kernel.
    assert_eq!(call(0)["is_error"], true);
    assert!(
        call(0)["result"]
            .as_str()
            .unwrap()
            .contains("undefined_name"),
        "{}",
        call(0)
    );
    // Real timings of both kernels at every offered size.
    let timed = call(1)["result"].as_str().unwrap();
    for s in &smoke.in_distribution {
        assert!(timed.contains(&format!("{}: yours ", s.label)), "{timed}");
    }
    assert!(
        timed.contains("incumbent") && timed.contains(" us"),
        "{timed}"
    );
    // Candidate and incumbent alternate; the ratio comes with its range.
    assert!(
        timed.contains("median of 3 interleaved rounds' ratios, ") && timed.contains("speedup "),
        "{timed}"
    );
    assert!(
        call(2)["refused"].as_str().unwrap().contains("not offered"),
        "{}",
        call(2)
    );
    assert!(
        call(3)["result"]
            .as_str()
            .unwrap()
            .contains("__kernel void saxpy")
    );

    // `kevo show` says what the tools did, call by call.
    let shown = show(&ws, &proposal.run_id.0);
    for line in [
        "tools: 5 turns, 3 tool calls (1 refused)",
        "turn 1: check (failed): ",
        "turn 2: time: ",
        "turn 3: time (refused): size `",
        "turn 5: submit: submitted",
    ] {
        assert!(shown.contains(line), "{line} not in {shown}");
    }

    // A recording keeps the final answer and says the turns are not in it.
    let exported = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["export", &proposal.run_id.0, "--recording"])
        .arg(dir.path().join("rec.jsonl"))
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&exported.stderr);
    assert!(exported.status.success(), "{said}");
    assert!(said.contains("1 of them were tool conversations"), "{said}");

    // Nothing the model received names a held-out or validation size;
    // the one refusal repeats only the label the model itself sent.
    let echo = format!("size `{}` is not offered", smoke.held_out.label);
    let bodies = bodies.lock().unwrap();
    assert_eq!(bodies.len(), 5);
    for body in bodies.iter() {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        let received: String = v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] != "assistant")
            .map(|m| m["content"].to_string())
            .chain(std::iter::once(v["tools"].to_string()))
            .collect::<Vec<_>>()
            .join("\n")
            .replace(&echo, "");
        for label in &secret_labels {
            assert!(
                !names(&received, label),
                "{label} reached the model: {received}"
            );
        }
    }
    assert!(bodies[3].contains(&echo), "the refusal was not sent");
}

/// `label` in `text` as a whole token (`4M` is not in `64M`).
fn names(text: &str, label: &str) -> bool {
    let token = |c: char| c.is_ascii_alphanumeric() || c == '.';
    text.match_indices(label).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(token)
            && !text[i + label.len()..].chars().next().is_some_and(token)
    })
}

/// Whether `kevo sandbox-exec` can confine a command here (Landlock, no
/// new privileges, a network layer and the socket filter).
fn can_confine() -> bool {
    let here = kevo_worker::kevo_sandbox::available();
    here.filesystem.is_some()
        && here.no_new_privileges
        && !here.network.is_empty()
        && here.syscalls.is_some()
}

/// A command-line agent: it reads its prompt, is told the real compiler's
/// error for a broken kernel, times its own kernel, is refused a file
/// outside its directory and the held-out size, cannot read that file
/// itself nor connect to `port`, leaves a child running, and exits with
/// its kernel file edited.
fn agent_script(dir: &Path, secret: &Path, port: u16) -> std::path::PathBuf {
    let script = dir.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            r#"probe() {{ if "$@" >/dev/null 2>&1; then echo "$1:yes"; else echo "$1:no"; fi; }}
grep -q saxpy prompt.md && echo prompt:yes
echo '{BROKEN}' > broken.cl
kevo-tool check broken.cl > check.txt; echo "check_broken_exit:$?"
grep -q undefined_name check.txt && echo compiler_error:yes
kevo-tool check {secret} > outside.txt; echo "tool_outside_exit:$?"
read_outside() {{ cat {secret}; }}
probe read_outside
network() {{ /usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1', {port}), 2)"; }}
probe network
cat > kernel.cl <<'K'
{FAST}
K
kevo-tool time kernel.cl > time.txt; echo "time_exit:$?"
grep -q incumbent time.txt && echo timed:yes
kevo-tool time kernel.cl 128K > held.txt; echo "held_out_exit:$?"
printf '{{"input_tokens": 1234, "output_tokens": 56, "model": "scripted-agent"}}' > usage.json
printf '\nfma in place of a multiply and an add\nmore\n' > summary.txt
setsid sleep 313 > /dev/null 2>&1 &
sleep 0.3
"#,
            secret = secret.display()
        ),
    )
    .unwrap();
    script
}

#[test]
fn an_agent_edits_its_kernel_file_with_kevo_tool_under_the_sandbox() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "__kernel void stolen() {}").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || for _ in listener.incoming() {});
    let script = agent_script(dir.path(), &secret, port);
    let config = dir.path().join("llm.toml");
    std::fs::write(
        &config,
        format!("cmd_readable = [{:?}]\n", script.display().to_string()),
    )
    .unwrap();
    let ws = dir.path().join("ws");
    let out = evolve_agent(dir.path(), &script, &config, &ws);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let calls = stored_calls(&ws);
    let proposal = calls.iter().find(|c| c.call.purpose == "propose").unwrap();
    if !can_confine() {
        // Never run unconfined: the proposal fails and says why.
        let error = proposal.call.error.as_deref().unwrap_or_default();
        assert!(error.contains("cannot confine"), "{error}");
        return;
    }
    assert_eq!(proposal.call.error, None, "{stderr}");
    // What it left in its kernel file is the candidate, and its
    // summary.txt the answer's Summary line, as a model's would be.
    let response = proposal.call.response.as_deref().unwrap();
    assert!(response.contains("fma(a, x[i], y[i])"), "{response}");
    assert!(
        response.starts_with("Summary: fma in place of a multiply and an add\n\n```"),
        "{response}"
    );
    let t = proposal.call.transcript.as_ref().unwrap();
    let said = t["turns"][0]["text"].as_str().unwrap();
    for line in [
        "prompt:yes",
        "check_broken_exit:1",
        "compiler_error:yes",
        "tool_outside_exit:1",
        "read_outside:no",
        "network:no",
        "time_exit:0",
        "timed:yes",
        "held_out_exit:1",
    ] {
        assert!(said.contains(line), "{line} not in {said}\n{t:#}");
    }
    assert_eq!(t["ended"], "left its kernel file");
    assert_eq!(t["calls"], 2, "{t:#}");
    let refused: Vec<&str> = t["turns"][0]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["refused"].as_str())
        .collect();
    assert!(
        refused
            .iter()
            .any(|r| r.contains("outside the agent's directory")),
        "{refused:?}"
    );
    assert!(
        refused.iter().any(|r| r.contains("`128K` is not offered")),
        "{refused:?}"
    );
    // Its setsid child ended with it.
    assert!(
        stderr.contains("left 1 process(es) running after it exited; they were killed"),
        "{stderr}"
    );
    // The spend it reported in usage.json is its call's, in the record
    // and in `kevo show` (without the file: unknown, never 0).
    assert_eq!(proposal.call.input_tokens, Some(1234));
    assert_eq!(proposal.call.output_tokens, Some(56));
    assert_eq!(proposal.call.model, "scripted-agent");
    let shown = show(&ws, &proposal.run_id.0);
    assert!(
        shown.contains("tools: 1 turn, 2 tool calls (2 refused)") && shown.contains("1290 tokens"),
        "{shown}"
    );
}

/// An agent that floods kevo-tool's channel and never reads the replies
/// cannot hold the run past `max_call_s`: the proposal ends as a timeout.
#[test]
fn an_agent_that_never_reads_its_replies_ends_at_its_time_limit() {
    if !opencl_available() || !can_confine() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("flood.sh");
    std::fs::write(
        &script,
        "i=0; while [ $i -lt 40000 ]; do printf 'sizes\\n'; i=$((i + 1)); done >&3; sleep 300\n",
    )
    .unwrap();
    let config = dir.path().join("llm.toml");
    std::fs::write(
        &config,
        format!(
            "max_call_s = 5\ncmd_readable = [{:?}]\n",
            script.display().to_string()
        ),
    )
    .unwrap();
    let ws = dir.path().join("ws");
    let started = std::time::Instant::now();
    let out = evolve_agent(dir.path(), &script, &config, &ws);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Its one call failed, so the run is stored as failed, and says why.
    assert!(
        stderr.contains("agent: no response within 5.0 s"),
        "{stderr}"
    );
    // Not the agent's 300 s of sleep.
    assert!(started.elapsed().as_secs() < 200, "{stderr}");
    let calls = stored_calls(&ws);
    let proposal = calls.iter().find(|c| c.call.purpose == "propose").unwrap();
    let error = proposal.call.error.as_deref().unwrap_or_default();
    assert!(error.contains("no response within 5.0 s"), "{error}");
    // The agent ran, so its failed call spent something: unknown, not $0.
    assert!(
        stderr.contains("cost not tracked (1 call(s) without a known cost)"),
        "{stderr}"
    );
}
