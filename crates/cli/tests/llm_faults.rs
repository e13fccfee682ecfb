//! Model endpoints that leak or stall, end to end through the `kevo`
//! binary against a loopback server: the API key never reaches the
//! terminal or the workspace (SQLite store included), and a silent server
//! costs seconds with a line per retry.

mod common;

use common::{files_holding, opencl_available};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const CANARY: &str = "sk-e2e-canary-4c0ffee15bad";

/// What the server does with every request.
#[derive(Clone, Copy)]
enum Behaviour {
    /// 200 with `{"error": {"message": "... <key> ..."}}` (no code).
    ErrorEchoingTheKey,
    /// A valid answer whose `model` and reasoning echo the key.
    AnswerEchoingTheKey,
    /// Accept the request and never answer.
    Silent,
}

/// A loopback HTTP server on its own thread; returns its base URL.
fn serve(behaviour: Behaviour) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                let answer = match behaviour {
                    Behaviour::Silent => {
                        std::thread::sleep(Duration::from_secs(120));
                        return;
                    }
                    Behaviour::ErrorEchoingTheKey => serde_json::json!({
                        "error": {"message": format!("invalid api key {CANARY}")}
                    }),
                    Behaviour::AnswerEchoingTheKey => serde_json::json!({
                        "model": CANARY,
                        "choices": [{
                            "message": {
                                "content": format!("Key {CANARY}.\n\n```opencl\n__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {{ uint i = get_global_id(0); if (i < N) y[i] = a * x[i] + y[i]; }}\n```\n"),
                                "reasoning_content": format!("my key is {CANARY}")
                            },
                            "finish_reason": "stop"
                        }],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10}
                    }),
                }
                .to_string();
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            });
        }
    });
    url
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
        let url = serve(behaviour);
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let out = kevo()
            .env("KEVO_CACHE_DIR", dir.path().join("cache"))
            .args([
                "evolve",
                "--task",
                "saxpy",
                "--backend",
                "opencl",
                "--sizes",
                "smoke",
            ])
            .args(["--llm", &format!("openai@{url}:m"), "--iterations", "2"])
            .args(["--llm-retries", "0", "--quiet", "--workspace"])
            .arg(&ws)
            .output()
            .unwrap();
        assert_no_canary(&out);
        assert!(ws.join("kevo.db").exists() || ws.read_dir().is_ok_and(|mut d| d.next().is_some()));
        assert_eq!(files_holding(&ws, CANARY), Vec::<PathBuf>::new());
        let runs = kevo()
            .args(["runs", "--json", "--workspace"])
            .arg(&ws)
            .output()
            .unwrap();
        let runs: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
        let run = runs[0]["id"].as_str().unwrap().to_string();
        let shown = kevo()
            .args(["show", &run, "--json", "--workspace"])
            .arg(&ws)
            .output()
            .unwrap();
        assert_no_canary(&shown);
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
        kevo()
            .env("KEVO_CACHE_DIR", dir.path().join("cache"))
            .args([
                "evolve",
                "--task",
                "saxpy",
                "--backend",
                "opencl",
                "--sizes",
                "smoke",
            ])
            .args(["--llm", &format!("openai@{url}:unpriced-local-model")])
            .args(["--iterations", "2", "--max-cost-usd", "1", "--workspace"])
            .arg(dir.path().join("ws"))
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
        text.contains("+ unknown (2 call(s) without a known cost)"),
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
    let mut child = kevo()
        .env("KEVO_CACHE_DIR", cache)
        .args([
            "evolve",
            "--task",
            "saxpy",
            "--backend",
            "opencl",
            "--sizes",
            "smoke",
        ])
        .args(["--llm", &format!("openai@{url}:m"), "--iterations", "3"])
        .args(["--llm-timeout", "120", "--json", "--workspace"])
        .arg(ws)
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
    let (mut child, _run) = evolve_waiting_on_a_silent_server(&ws, &dir.path().join("cache"));
    assert_eq!(runs(&ws)[0]["status"], "running");
    child.kill().unwrap();
    child.wait().unwrap();
    // Ten seconds without a heartbeat (HEARTBEAT_STALE_S) and it is dead.
    let t = Instant::now();
    while runs(&ws)[0]["status"] == "running" {
        assert!(t.elapsed() < Duration::from_secs(20), "still running");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(runs(&ws)[0]["status"], "dead");
    let out = kevo()
        .args(["runs", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("dead"));
}
