//! `kevo tool` on PoCL: an external run's agent calls its tools between
//! its turns, one call at a time or as requests left in a mailbox (the
//! way they travel to a GPU host the agent cannot reach). Every call goes
//! through the gate of a tool conversation: the budget, a size it is not
//! offered, a file name that leaves the request's folder, a loop. The
//! calls are stored with the answer; a proposal whose calls ended in a
//! loop is recorded as failed, as its conversation would have been.

use std::path::Path;
use std::process::Command;

use crate::common::{self, OPENCL_SMOKE, opencl_available};
use kevo_tasks::SizeSet;

const BROKEN: &str = "__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) { y[get_global_id(0)] = a * undefined_name; }";
const FAST: &str = "__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {\n    uint i = get_global_id(0);\n    if (i < N) y[i] = fma(a, x[i], y[i]);\n}";

fn kevo(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .env("KEVO_CACHE_DIR", dir.join("cache"))
        .args(args)
        .arg("--workspace")
        .arg(dir.join("ws"))
        .output()
        .unwrap()
}

/// A request in `mail`, as `scripts/kevo-tool-mailbox` leaves one.
fn mail(
    mail: &Path,
    name: &str,
    run: &str,
    proposal: i64,
    request: &str,
    files: serde_json::Value,
) {
    let json =
        serde_json::json!({"run": run, "proposal": proposal, "request": request, "files": files});
    std::fs::write(mail.join(format!("{name}.req.json")), json.to_string()).unwrap();
}

fn reply(mail: &Path, name: &str) -> (bool, String) {
    let text = std::fs::read_to_string(mail.join(format!("{name}.reply.json"))).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    (
        v["ok"].as_bool().unwrap(),
        v["text"].as_str().unwrap().to_string(),
    )
}

fn asked(dir: &Path, run: &str) -> i64 {
    let out = common::succeeded(kevo(dir, &["ask", run, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["proposal"].as_i64().unwrap()
}

#[test]
fn an_external_agents_tool_calls_pass_the_gate_and_are_stored_with_its_answer() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = d.join("llm.toml");
    std::fs::write(&config, "[agent_tools]\nmax_calls = 3\n").unwrap();
    let mut create = vec!["evolve", "--task", "saxpy"];
    create.extend(OPENCL_SMOKE);
    create.extend(["--llm", "external", "--agent-tools", "--iterations", "3"]);
    create.extend(["--llm-config", config.to_str().unwrap()]);
    common::succeeded(kevo(d, &create));
    let runs = common::succeeded(kevo(d, &["runs", "--json"]));
    let run: serde_json::Value = serde_json::from_str(&runs).unwrap();
    let run = run[0]["id"].as_str().unwrap().to_string();
    let first = asked(d, &run);
    let prompt =
        std::fs::read_to_string(d.join(format!("ws/runs/{run}/ask/{first}_prompt.md"))).unwrap();
    assert!(
        prompt.contains(&format!("kevo tool {run} ID REQUEST")),
        "{prompt}"
    );
    let held_out = kevo_tasks::by_name("saxpy")
        .unwrap()
        .sizes(SizeSet::Smoke)
        .held_out
        .label;
    assert!(!prompt.contains(&format!(" {held_out}")), "{prompt}");

    // One call, its file read from --dir.
    let agent = d.join("agent");
    std::fs::create_dir(&agent).unwrap();
    std::fs::write(agent.join("fast.cl"), FAST).unwrap();
    let out = kevo(
        d,
        &[
            "tool",
            &run,
            &first.to_string(),
            "check",
            "fast.cl",
            "--dir",
            agent.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("correct at every check size"));

    // A mailbox: the real compiler's error, a timing, the held-out size
    // (refused as any size not offered: the reply tells it nothing), a
    // name outside the folder.
    let mailbox = d.join("mail");
    std::fs::create_dir(&mailbox).unwrap();
    mail(
        &mailbox,
        "a1",
        &run,
        first,
        "compile k.cl",
        serde_json::json!({"k.cl": BROKEN}),
    );
    mail(
        &mailbox,
        "a2",
        &run,
        first,
        "time k.cl",
        serde_json::json!({"k.cl": FAST}),
    );
    mail(
        &mailbox,
        "a3",
        &run,
        first,
        &format!("time k.cl {held_out}"),
        serde_json::json!({"k.cl": FAST}),
    );
    mail(
        &mailbox,
        "a4",
        &run,
        first,
        "check ../k.cl",
        serde_json::json!({"../k.cl": FAST}),
    );
    mail(
        &mailbox,
        "a5",
        &run,
        first,
        "check k.cl",
        serde_json::json!({"k.cl": FAST}),
    );
    common::succeeded(kevo(d, &["tool", "--mailbox", mailbox.to_str().unwrap()]));
    let (ok, text) = reply(&mailbox, "a1");
    assert!(!ok && text.contains("undefined_name"), "{text}");
    let (ok, text) = reply(&mailbox, "a2");
    assert!(ok && text.contains("interleaved rounds"), "{text}");
    assert!(text.starts_with("correct at every size timed"), "{text}");
    let (ok, text) = reply(&mailbox, "a3");
    assert!(
        !ok && text.contains("not offered") && !text.contains("held"),
        "{text}"
    );
    let (ok, text) = reply(&mailbox, "a4");
    assert!(!ok && text.contains("not a plain file name"), "{text}");
    // Three calls ran (check, compile, time): the budget is spent.
    let (ok, text) = reply(&mailbox, "a5");
    assert!(
        !ok && text.contains("budget of 3 tool calls is spent"),
        "{text}"
    );
    assert!(text.contains("hand in your kernel now"), "{text}");

    // The answer ends the conversation and is stored with it.
    let answer = d.join("answer.md");
    std::fs::write(&answer, format!("Summary: fma\n\n```opencl\n{FAST}\n```\n")).unwrap();
    common::succeeded(kevo(
        d,
        &[
            "tell",
            &run,
            &first.to_string(),
            answer.to_str().unwrap(),
            "--model",
            "agent",
        ],
    ));
    let shown = common::succeeded(kevo(d, &["show", &run]));
    assert!(
        shown.contains("3 tool calls") && shown.contains("answered with `kevo tell`"),
        "{shown}"
    );

    // A loop ends the proposal: its answer is recorded as a failure.
    let second = asked(d, &run);
    for n in 1..=3 {
        mail(
            &mailbox,
            &format!("b{n}"),
            &run,
            second,
            "check k.cl",
            serde_json::json!({"k.cl": FAST}),
        );
    }
    common::succeeded(kevo(d, &["tool", "--mailbox", mailbox.to_str().unwrap()]));
    let (ok, text) = reply(&mailbox, "b2");
    assert!(ok && text.contains("the same call as before"), "{text}");
    let (ok, text) = reply(&mailbox, "b3");
    assert!(!ok && text.contains("the same arguments 3 times"), "{text}");
    common::succeeded(kevo(
        d,
        &["tell", &run, &second.to_string(), answer.to_str().unwrap()],
    ));
    let shown = common::succeeded(kevo(d, &["show", &run]));
    assert!(shown.contains("the same arguments 3 times"), "{shown}");
    // A template runs as its first configuration, and says so.
    let third = asked(d, &run);
    let template = format!(
        "// kevo: tune WIDTH 1 2\n{}",
        FAST.replace("get_global_id(0)", "get_global_id(0) * WIDTH / WIDTH")
    );
    mail(
        &mailbox,
        "c1",
        &run,
        third,
        "check t.cl",
        serde_json::json!({"t.cl": template}),
    );
    common::succeeded(kevo(d, &["tool", "--mailbox", mailbox.to_str().unwrap()]));
    let (ok, text) = reply(&mailbox, "c1");
    assert!(
        ok && text.contains("first configuration, WIDTH=1, of 2"),
        "{text}"
    );
    assert!(text.contains("correct at every check size"), "{text}");
    // A call for an answered proposal is refused beside one that runs.
    mail(
        &mailbox,
        "d1",
        &run,
        second,
        "show parent",
        serde_json::json!({}),
    );
    mail(
        &mailbox,
        "d2",
        &run,
        third,
        "show parent",
        serde_json::json!({}),
    );
    common::succeeded(kevo(d, &["tool", "--mailbox", mailbox.to_str().unwrap()]));
    let (ok, text) = reply(&mailbox, "d1");
    assert!(
        !ok && text.contains(&format!("proposal {second}")),
        "{text}"
    );
    let (ok, text) = reply(&mailbox, "d2");
    assert!(ok && text.contains("__kernel"), "{text}");
    // A finished proposal takes no more calls.
    let out = kevo(d, &["tool", &run, &second.to_string(), "show", "parent"]);
    assert!(!out.status.success());
}
