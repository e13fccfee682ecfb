//! Model endpoints that leak or stall, end to end through the `kevo`
//! binary against a loopback server: the API key never reaches the
//! terminal or the workspace (SQLite store included), and a silent server
//! costs seconds with a line per retry.

use crate::common;

use common::{files_holding, opencl_available};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const CANARY: &str = "sk-e2e-canary-4c0ffee15bad";

/// A kernel the proposer answers with (the seed's work, done plainly).
const KERNEL: &str = "```opencl\n__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) { uint i = get_global_id(0); if (i < N) y[i] = a * x[i] + y[i]; }\n```\n";

/// What the server does with every request.
#[derive(Clone)]
enum Behaviour {
    /// 200 with `{"error": {"message": "... <key> ..."}}` (no code).
    ErrorEchoingTheKey,
    /// A valid answer whose `model` and reasoning echo the key.
    AnswerEchoingTheKey,
    /// A valid answer with this `usage` object.
    AnswerWithUsage(serde_json::Value),
    /// A 200 whose body is this many bytes of a JSON string.
    HugeBody(usize),
    /// This status with an optional Retry-After header and an empty
    /// JSON error body.
    Status(u16, Option<&'static str>),
    /// Accept the request and never answer.
    Silent,
}

fn answer(text: String, model: &str, usage: serde_json::Value) -> String {
    serde_json::json!({
        "model": model,
        "choices": [{
            "message": {"content": text, "reasoning_content": format!("my key is {CANARY}")},
            "finish_reason": "stop"
        }],
        "usage": usage
    })
    .to_string()
}

/// A loopback server that answers every request as `behaviour` says;
/// returns its base URL.
fn serve(behaviour: Behaviour) -> String {
    common::serve_http(move |_| {
        let ok = |body: String| Some(("200 OK".to_string(), String::new(), body));
        match &behaviour {
            Behaviour::Silent => None,
            Behaviour::ErrorEchoingTheKey => ok(serde_json::json!({
                "error": {"message": format!("invalid api key {CANARY}")}
            })
            .to_string()),
            Behaviour::AnswerEchoingTheKey => ok(answer(
                format!("Key {CANARY}.\n\n{KERNEL}"),
                CANARY,
                serde_json::json!({"prompt_tokens": 10, "completion_tokens": 10}),
            )),
            Behaviour::AnswerWithUsage(usage) => ok(answer(KERNEL.into(), "gpt-5", usage.clone())),
            Behaviour::HugeBody(n) => ok(format!("\"{}\"", "x".repeat(*n))),
            Behaviour::Status(code, retry_after) => Some((
                format!("{code} Unavailable"),
                retry_after
                    .map(|s| format!("retry-after: {s}\r\n"))
                    .unwrap_or_default(),
                "{}".into(),
            )),
        }
    })
}

fn kevo() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kevo"));
    c.env("OPENAI_API_KEY", CANARY);
    c
}

fn assert_no_canary(out: &Output) {
    for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.contains(CANARY), "the key reached {name}: {text}");
    }
}

/// One `kevo evolve` of saxpy at smoke sizes on OpenCL in a fresh
/// workspace, against `llm`, and what it left.
struct Ran {
    out: Output,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    ws: PathBuf,
    _dir: tempfile::TempDir,
}

/// `kevo evolve` of saxpy at smoke sizes on OpenCL against `llm`, in
/// workspace `ws` with the ceiling cache in `cache`. The ceilings are
/// declared: these tests are about the proposer, and a memory sweep
/// measured while other tests load both cores can find no cache level
/// that holds a smoke size, which makes the seed look faster than the
/// hardware allows.
fn evolve_command(ws: &Path, cache: &Path, llm: &str, iterations: u32) -> Command {
    let mut c = kevo();
    c.env("KEVO_CACHE_DIR", cache)
        .args(["evolve", "--task", "saxpy", "--backend", "opencl"])
        .args(["--ceilings", "20,100", "--max-timed-runs", "10"])
        .args(["--sizes", "smoke", "--llm", llm, "--iterations"])
        .arg(iterations.to_string())
        .arg("--workspace")
        .arg(ws);
    c
}

fn evolve(llm: &str, iterations: u32, extra: &[&str]) -> Ran {
    evolve_with(llm, iterations, |c| {
        c.args(extra);
    })
}

/// As [`evolve`], with `adjust` applied to the command first.
fn evolve_with(llm: &str, iterations: u32, adjust: impl FnOnce(&mut Command)) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let t = Instant::now();
    let mut command = evolve_command(&ws, &dir.path().join("cache"), llm, iterations);
    adjust(&mut command);
    let out = command.output().unwrap();
    let elapsed = t.elapsed();
    Ran {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        out,
        elapsed,
        ws,
        _dir: dir,
    }
}

impl Ran {
    /// What every faulty endpoint must leave: a run that ended (not
    /// crashed), a workspace without the key, and a bounded wall time.
    fn assert_ended_cleanly(&self, within: Duration) {
        assert!(
            self.out.status.success(),
            "exit {:?}\n{}\n{}",
            self.out.status,
            self.stdout,
            self.stderr
        );
        assert_no_canary(&self.out);
        assert_eq!(files_holding(&self.ws, CANARY), Vec::<PathBuf>::new());
        assert_eq!(runs(&self.ws)[0]["status"], "finished", "{}", self.stdout);
        assert!(self.elapsed < within, "{:?} > {within:?}", self.elapsed);
    }

    /// What a run whose model never answered must leave: a non-zero exit
    /// that says why once, a run stored as failed with the reason, a
    /// workspace without the key, and a bounded wall time.
    fn assert_failed_cleanly(&self, within: Duration, cause: &str) {
        assert_eq!(
            self.out.status.code(),
            Some(2),
            "{}\n{}",
            self.stdout,
            self.stderr
        );
        assert_no_canary(&self.out);
        assert_eq!(files_holding(&self.ws, CANARY), Vec::<PathBuf>::new());
        let error = self
            .stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_else(|| panic!("no error line: {}", self.stderr));
        assert!(
            error.contains("failed: ") && error.contains(cause),
            "{error}"
        );
        assert_eq!(error.matches(cause).count(), 1, "said once: {error}");
        let listed = &runs(&self.ws)[0];
        assert_eq!(listed["status"], "failed", "{}", self.stdout);
        assert!(
            !self.stdout.contains("seed kept"),
            "a failed run reports no search result: {}",
            self.stdout
        );
        assert!(self.elapsed < within, "{:?} > {within:?}", self.elapsed);
    }

    /// The run's stored model calls.
    fn calls(&self) -> Vec<kevo_store::StoredLlmCall> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let store = kevo_store::Store::open_workspace(&self.ws).await.unwrap();
            let id = runs(&self.ws)[0]["id"].as_str().unwrap().to_string();
            let calls = store.llm_calls(&kevo_store::RunId(id)).await.unwrap();
            // Closed here, not by a drop: SQLite's -wal and -shm files
            // would otherwise go on the connection's own thread while
            // `workspace_bytes` walks the workspace.
            store.close().await;
            calls
        })
    }

    /// The size of everything in the workspace, in bytes.
    fn workspace_bytes(&self) -> u64 {
        let mut total = 0;
        let mut stack = vec![self.ws.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let m = e.metadata().unwrap();
                if m.is_dir() {
                    stack.push(e.path());
                } else {
                    total += m.len();
                }
            }
        }
        total
    }
}

#[test]
fn llm_test_never_prints_an_echoed_key() {
    for behaviour in [
        Behaviour::ErrorEchoingTheKey,
        Behaviour::AnswerEchoingTheKey,
    ] {
        let url = serve(behaviour);
        let out = kevo()
            .args(["llm", "test", "--llm", &format!("openai@{url}:m")])
            .output()
            .unwrap();
        assert_no_canary(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("[redacted]"), "{text}");
    }
}

#[test]
fn evolve_stores_no_echoed_key_anywhere_in_the_workspace() {
    if !opencl_available() {
        return;
    }
    for behaviour in [
        Behaviour::ErrorEchoingTheKey,
        Behaviour::AnswerEchoingTheKey,
    ] {
        let url = serve(behaviour.clone());
        // The recording of the run's exchanges holds no key either.
        let recorded = tempfile::tempdir().unwrap();
        let recording = recorded.path().join("run.jsonl");
        let ran = evolve(
            &format!("openai@{url}:m"),
            2,
            &[
                "--llm-retries",
                "0",
                "--record",
                recording.to_str().unwrap(),
            ],
        );
        if matches!(behaviour, Behaviour::ErrorEchoingTheKey) {
            ran.assert_failed_cleanly(Duration::from_secs(90), "answered none");
        } else {
            ran.assert_ended_cleanly(Duration::from_secs(90));
        }
        assert_eq!(
            std::fs::read_to_string(&recording).unwrap().lines().count(),
            2,
            "both calls are recorded"
        );
        assert_eq!(
            files_holding(recorded.path(), CANARY),
            Vec::<PathBuf>::new()
        );
        let calls = ran.calls();
        assert_eq!(calls.len(), 2);
        let run = runs(&ran.ws)[0]["id"].as_str().unwrap().to_string();
        let shown = kevo()
            .args(["show", &run, "--json", "--workspace"])
            .arg(&ran.ws)
            .output()
            .unwrap();
        assert_no_canary(&shown);
        let text = serde_json::to_string(&serde_json::json!([
            calls[0].call.error,
            calls[0].call.model,
            calls[0].call.reasoning
        ]))
        .unwrap();
        assert!(text.contains("[redacted]"), "{text}");
    }
}

#[test]
fn a_silent_server_costs_seconds_and_every_retry_is_a_line() {
    let url = serve(Behaviour::Silent);
    let t = Instant::now();
    let out = kevo()
        .args(["llm", "test", "--llm", &format!("openai@{url}:m")])
        .args(["--llm-timeout", "1", "--llm-retries", "1"])
        .output()
        .unwrap();
    let elapsed = t.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("no response within 1.0 s"), "{stdout}");
    assert!(
        stderr.contains("attempt 1 of 2 failed") && stderr.contains("retrying in"),
        "{stderr}"
    );
    // Two attempts of 1 s and one backoff of at most ~2 s.
    assert!(elapsed < Duration::from_secs(8), "{elapsed:?}");
}

#[test]
fn a_cost_cap_that_cannot_be_enforced_stops_the_run_or_is_accepted_aloud() {
    if !opencl_available() {
        return;
    }
    let url = serve(Behaviour::AnswerEchoingTheKey);
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let llm = format!("openai@{url}:unpriced-local-model");
        evolve_command(&dir.path().join("ws"), &dir.path().join("cache"), &llm, 2)
            .args(["--max-cost-usd", "1"])
            .args(extra)
            .output()
            .unwrap()
    };
    // The model has no price: the cap cannot be enforced, so no call is
    // sent and the run ends with the reason (not $0.0000).
    let out = run(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("cannot be enforced"), "{text}");
    assert!(text.contains("--accept-unknown-cost"), "{text}");
    // Accepted: the run goes on, and its cost says it is unknown.
    let out = run(&["--accept-unknown-cost"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("cost not tracked (2 call(s) without a known cost)"),
        "{text}"
    );
}

/// `kevo runs --json` of a workspace.
fn runs(ws: &Path) -> serde_json::Value {
    let out = kevo()
        .args(["runs", "--json", "--workspace"])
        .arg(ws)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// Start `kevo evolve` against a silent server and wait until its run is
/// stored and its worker has evaluated the seed (the model call is then
/// in flight). The caller waits on the returned child.
#[allow(clippy::zombie_processes)]
fn evolve_waiting_on_a_silent_server(ws: &Path, cache: &Path) -> (std::process::Child, String) {
    let url = serve(Behaviour::Silent);
    let mut child = evolve_command(ws, cache, &format!("openai@{url}:m"), 3)
        .args(["--llm-timeout", "120", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    loop {
        let listed = runs(ws);
        if let Some(id) = listed[0]["id"].as_str() {
            // The seed's evaluation writes the run directory's best file.
            if ws
                .join("runs")
                .join(id)
                .read_dir()
                .is_ok_and(|d| d.count() >= 2)
            {
                std::thread::sleep(Duration::from_millis(500));
                return (child, id.to_string());
            }
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run did not start");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn ctrl_c_ends_a_run_waiting_on_a_silent_server_as_interrupted_and_resumable() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let cache = dir.path().join("cache");
    let (mut child, run) = evolve_waiting_on_a_silent_server(&ws, &cache);
    assert_eq!(runs(&ws)[0]["status"], "running", "alive while it waits");
    let t = Instant::now();
    // SAFETY: signals a child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(status.code(), Some(130));
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    assert!(stderr.contains(&format!("--resume {run}")), "{stderr}");
    let listed = runs(&ws);
    assert_eq!(listed[0]["status"], "interrupted");
    let shown = kevo()
        .args(["show", &run, "--json", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["run"]["status_reason"], "interrupted by SIGINT");
    // The model call it was waiting on is stored as abandoned (its tokens
    // unknown: it may have been billed), with the prompt it sent.
    assert!(
        stderr.contains("1 model call(s) abandoned and stored"),
        "{stderr}"
    );
    let abandoned = shown["abandoned_calls"].as_array().unwrap();
    assert_eq!(abandoned.len(), 1, "{shown}");
    assert_eq!(abandoned[0]["iteration"], 1);
    let error = abandoned[0]["call"]["error"].as_str().unwrap();
    assert!(
        error.starts_with("abandoned after") && error.ends_with("interrupted by SIGINT"),
        "{error}"
    );
    assert!(abandoned[0]["call"]["input_tokens"].is_null());
    assert!(
        !abandoned[0]["call"]["prompt_user"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    // Resumable: a resume starts where it stopped (and is interrupted
    // again, since the server is still silent).
    let mut resumed = kevo()
        .env("KEVO_CACHE_DIR", &cache)
        .args(["evolve", "--resume", &run, "--json", "--workspace"])
        .arg(&ws)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(resumed.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("\"resumed_from\":0"), "{line}");
    // SAFETY: as above.
    unsafe { libc::kill(resumed.id() as i32, libc::SIGTERM) };
    assert_eq!(resumed.wait().unwrap().code(), Some(130));
    assert_eq!(runs(&ws)[0]["status"], "interrupted");
}

#[test]
fn a_run_killed_with_sigkill_is_not_listed_as_running() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let (mut child, run) = evolve_waiting_on_a_silent_server(&ws, &dir.path().join("cache"));
    assert_eq!(runs(&ws)[0]["status"], "running");
    // While it lives, a second process may not resume it.
    let second = kevo()
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .args(["evolve", "--resume", &run, "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is running in another process"), "{stderr}");
    child.kill().unwrap();
    child.wait().unwrap();
    // Its heartbeat's holder is gone from this machine: dead at once, not
    // only once the heartbeat is stale (HEARTBEAT_STALE_S).
    assert_eq!(runs(&ws)[0]["status"], "dead");
    let out = kevo()
        .args(["runs", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("dead"));
}

#[test]
fn usage_that_is_missing_or_absurd_is_unknown_never_zero_and_never_fatal() {
    if !opencl_available() {
        return;
    }
    for usage in [
        serde_json::json!({"prompt_tokens": 9_223_372_036_854_775_808u64, "completion_tokens": u64::MAX}),
        serde_json::json!({"prompt_tokens": -5, "completion_tokens": "ten"}),
        serde_json::Value::Null,
    ] {
        // gpt-5 has a price: only the usage makes its cost unknown.
        let llm = format!(
            "openai@{}:gpt-5",
            serve(Behaviour::AnswerWithUsage(usage.clone()))
        );
        let ran = evolve(&llm, 2, &["--llm-retries", "0"]);
        ran.assert_ended_cleanly(Duration::from_secs(90));
        // Neither the absurd counts nor a $0 cost are reported as spent.
        assert!(
            ran.stdout.contains(
                "tokens not tracked (2 call(s) reported none), cost not tracked (2 call(s) without a known cost)"
            ),
            "{usage}: {}",
            ran.stdout
        );
        let calls = ran.calls();
        assert_eq!(calls.len(), 2, "{usage}");
        for c in &calls {
            assert_eq!(c.call.error, None, "{usage}");
            assert_eq!(
                (c.call.input_tokens, c.call.output_tokens, c.call.cost_usd),
                (None, None, None),
                "{usage}: unknown is stored as unknown, not 0"
            );
        }
        // Under a cost cap the first such call stops the run, with the
        // reason, instead of running on at "$0.0000".
        let ran = evolve(&llm, 3, &["--llm-retries", "0", "--max-cost-usd", "10"]);
        ran.assert_ended_cleanly(Duration::from_secs(90));
        assert!(ran.stdout.contains("cannot be enforced"), "{}", ran.stdout);
        assert!(
            ran.stderr.contains("the cost budget cannot be enforced"),
            "{}",
            ran.stderr
        );
        assert!(
            ran.stderr
                .contains("tokens 0+0 + unknown (1 call(s) without usable counts)"),
            "{}",
            ran.stderr
        );
        assert_eq!(ran.calls().len(), 1, "{usage}");
    }
}

#[test]
fn a_huge_response_is_a_failed_proposal_that_is_not_stored() {
    if !opencl_available() {
        return;
    }
    let url = serve(Behaviour::HugeBody(20 << 20));
    let ran = evolve(&format!("openai@{url}:m"), 2, &["--llm-retries", "0"]);
    ran.assert_failed_cleanly(Duration::from_secs(90), "answered none");
    let calls = ran.calls();
    assert_eq!(calls.len(), 2);
    for c in &calls {
        let error = c.call.error.as_deref().unwrap_or_default();
        assert!(error.contains("larger than 1048576 bytes"), "{error}");
    }
    // Two 20 MB answers left no trace of their size.
    assert!(ran.workspace_bytes() < 4 << 20, "{}", ran.workspace_bytes());
}

#[test]
fn failures_and_waits_print_a_line_each_and_a_long_retry_after_is_refused() {
    if !opencl_available() {
        return;
    }
    let url = serve(Behaviour::Status(500, None));
    let ran = evolve(&format!("openai@{url}:m"), 1, &["--llm-retries", "2"]);
    ran.assert_failed_cleanly(Duration::from_secs(90), "answered none");
    for line in ["attempt 1 of 3 failed", "attempt 2 of 3 failed"] {
        assert!(ran.stderr.contains(line), "{line}: {}", ran.stderr);
    }
    assert!(
        ran.stderr.matches("retrying in").count() == 2,
        "{}",
        ran.stderr
    );
    // Retry-After: 250 with the default retries: refused at once, aloud,
    // instead of four silent waits of 250 s.
    let url = serve(Behaviour::Status(503, Some("250")));
    let ran = evolve(&format!("openai@{url}:m"), 1, &[]);
    ran.assert_failed_cleanly(Duration::from_secs(90), "answered none");
    assert!(
        ran.stderr.contains("asked to wait 250 s") && ran.stderr.contains("not retried"),
        "{}",
        ran.stderr
    );
    let error = ran.calls()[0].call.error.clone().unwrap_or_default();
    assert!(error.contains("asked to wait 250 s"), "{error}");
    // A server that never answers: two attempts of 2 s and a backoff,
    // each said, then the iteration goes on without a proposal.
    let url = serve(Behaviour::Silent);
    let ran = evolve(
        &format!("openai@{url}:m"),
        1,
        &["--llm-timeout", "2", "--llm-retries", "1"],
    );
    ran.assert_failed_cleanly(Duration::from_secs(60), "answered none");
    assert!(
        ran.stderr.contains("attempt 1 of 2 failed"),
        "{}",
        ran.stderr
    );
    let error = ran.calls()[0].call.error.clone().unwrap_or_default();
    assert!(error.contains("no response within 2.0 s"), "{error}");
}

#[test]
fn a_host_that_does_not_resolve_fails_the_run_at_once_without_retries() {
    if !opencl_available() {
        return;
    }
    // `.invalid` never resolves (RFC 6761); with no network it fails the
    // same way. Four iterations and the default retries: the first call's
    // failure ends the run.
    let ran = evolve_with("openai@http://kevo-endpoint.invalid/v1:m", 4, |command| {
        // A proxy would answer for the host; the name must reach the
        // resolver.
        for proxy in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            command.env_remove(proxy);
        }
    });
    ran.assert_failed_cleanly(Duration::from_secs(60), "does not resolve");
    assert!(!ran.stderr.contains("retrying"), "{}", ran.stderr);
    assert_eq!(ran.calls().len(), 1, "no call after the first");
    let run = runs(&ran.ws)[0]["id"].as_str().unwrap().to_string();
    let shown = kevo()
        .args(["show", &run, "--json", "--workspace"])
        .arg(&ran.ws)
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let reason = shown["run"]["status_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("does not resolve"), "{shown}");
}

#[test]
fn a_refused_key_fails_the_run_at_once() {
    if !opencl_available() {
        return;
    }
    let url = serve(Behaviour::Status(401, None));
    let ran = evolve(&format!("openai@{url}:m"), 4, &[]);
    ran.assert_failed_cleanly(Duration::from_secs(60), "HTTP 401");
    assert!(!ran.stderr.contains("retrying"), "{}", ran.stderr);
    assert_eq!(ran.calls().len(), 1, "no call after the first");
}

#[test]
fn a_missing_key_is_said_once() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut command = evolve_command(
        &dir.path().join("ws"),
        &dir.path().join("cache"),
        "openai:gpt-5",
        1,
    );
    let out = command
        .env_remove("OPENAI_API_KEY")
        .env("HOME", dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.matches("no API key").count(), 1, "{stderr}");
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}

/// A `cmd:` proposer script in `dir`; `{KERNEL}` in `body` is the answer.
fn script(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let body = body.replace("{KERNEL}", &KERNEL.replace('\'', ""));
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("cmd:{}", path.display())
}

#[test]
fn a_cmd_proposer_gets_no_key_and_what_it_prints_of_one_is_never_stored() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // It prints its whole environment and a key it found elsewhere on
    // stderr and fails; then answers with the key in its text.
    let fails = script(
        dir.path(),
        "fails.sh",
        &format!(
            "cat >/dev/null\nenv >&2\necho \"found {CANARY}; mine is [$OPENAI_API_KEY]\" >&2\nexit 1"
        ),
    );
    let ran = evolve(&fails, 1, &["--llm-retries", "0"]);
    ran.assert_failed_cleanly(Duration::from_secs(90), "answered none");
    let error = ran.calls()[0].call.error.clone().unwrap_or_default();
    assert!(
        error.contains("mine is []"),
        "scrubbed environment: {error}"
    );
    assert!(error.contains("found [redacted]"), "{error}");
    let answers = script(
        dir.path(),
        "answers.sh",
        &format!("cat >/dev/null\necho 'my key: {CANARY}'\necho '{{KERNEL}}'"),
    );
    let ran = evolve(&answers, 1, &["--llm-retries", "0"]);
    ran.assert_ended_cleanly(Duration::from_secs(90));
    assert_eq!(ran.calls()[0].call.error, None);
}

#[test]
fn a_cmd_proposer_that_escapes_its_group_or_floods_its_output_is_bounded() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("escapee.pid");
    // A child in a new session that holds stdout open for a minute.
    let escapes = script(
        dir.path(),
        "escapes.sh",
        &format!(
            "cat >/dev/null\nsetsid sh -c 'echo $$ > {0}; exec sleep 60' &\nwhile [ ! -s {0} ]; do sleep 0.05; done\necho '{{KERNEL}}'",
            pidfile.display()
        ),
    );
    let ran = evolve(&escapes, 1, &["--llm-timeout", "5", "--llm-retries", "0"]);
    ran.assert_ended_cleanly(Duration::from_secs(60));
    assert!(
        ran.stderr
            .contains("left 1 process(es) running after it exited; they were killed"),
        "{}",
        ran.stderr
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: signal 0 only asks whether the process exists.
    let gone = || unsafe { libc::kill(pid, 0) } != 0 || zombie(pid);
    let t = Instant::now();
    while !gone() {
        assert!(t.elapsed() < Duration::from_secs(5), "{pid} survived");
        std::thread::sleep(Duration::from_millis(100));
    }
    // One that never ends: the call ends at its timeout.
    let hangs = script(dir.path(), "hangs.sh", "exec sleep 600");
    let ran = evolve(&hangs, 1, &["--llm-timeout", "2", "--llm-retries", "0"]);
    ran.assert_failed_cleanly(Duration::from_secs(60), "answered none");
    let error = ran.calls()[0].call.error.clone().unwrap_or_default();
    assert!(error.contains("no response within 2.0 s"), "{error}");
    // 50 MB of output: a failed proposal with the reason, nothing stored.
    let floods = script(
        dir.path(),
        "floods.sh",
        "cat >/dev/null\nhead -c 50000000 /dev/zero | tr '\\0' x",
    );
    let ran = evolve(&floods, 1, &["--llm-retries", "0"]);
    ran.assert_failed_cleanly(Duration::from_secs(60), "answered none");
    let error = ran.calls()[0].call.error.clone().unwrap_or_default();
    assert!(error.contains("larger than 1048576 bytes"), "{error}");
    assert!(ran.workspace_bytes() < 4 << 20, "{}", ran.workspace_bytes());
}

/// Whether `pid` has exited and waits to be reaped (it is then gone for
/// every purpose but its table entry).
fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

#[test]
fn a_second_ctrl_c_exits_at_once_and_leaves_no_run_running() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let (mut child, _run) = evolve_waiting_on_a_silent_server(&ws, &dir.path().join("cache"));
    let t = Instant::now();
    for _ in 0..2 {
        // SAFETY: signals a child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = child.wait().unwrap();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(status.code(), Some(130));
    // Whichever signal ended it, the run is not left `running`: the
    // first marks it interrupted; if the second won, the heartbeat stops
    // and it reads as dead within the stale window.
    let t = Instant::now();
    while runs(&ws)[0]["status"] == "running" {
        assert!(t.elapsed() < Duration::from_secs(20), "still running");
        std::thread::sleep(Duration::from_millis(500));
    }
}
