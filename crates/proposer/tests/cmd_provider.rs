//! The `cmd:` provider with real child processes: stdin formats, stdout as
//! the answer, errors with stderr, and a time limit that kills the whole
//! process group, grandchildren included.

use std::time::{Duration, Instant};

use kevo_proposer::{Accounting, ChatRequest, ProviderConfig, ProviderError, build_with_env};

fn config(timeout_s: f64) -> ProviderConfig {
    ProviderConfig {
        timeout_s,
        max_retries: 0,
        ..ProviderConfig::default()
    }
}

fn req() -> ChatRequest {
    ChatRequest::new("SYSTEM TEXT", "USER TEXT\nsecond line")
}

#[tokio::test]
async fn text_stdin_is_delimited_and_stdout_is_the_answer() {
    let p = build_with_env("cmd:cat", &config(10.0), &Accounting::new(), &|_| None).unwrap();
    let c = p.complete(&req()).await.unwrap();
    assert_eq!(
        c.text,
        "<<<SYSTEM>>>\nSYSTEM TEXT\n<<<USER>>>\nUSER TEXT\nsecond line\n"
    );
    assert_eq!(
        (c.provider.as_str(), c.model.as_str(), c.attempts),
        ("cmd", "cmd", 1)
    );
    assert_eq!(c.cost_usd, None, "no price for an external command");
}

#[tokio::test]
async fn json_mode_reads_and_writes_objects() {
    // stdin is one JSON object; `cat` hands it back as plain text.
    let acct = Accounting::new();
    let p = build_with_env("cmd+json:cat", &config(10.0), &acct, &|_| None).unwrap();
    let mut r = req();
    r.max_tokens = Some(99);
    let c = p.complete(&r).await.unwrap();
    let sent: serde_json::Value = serde_json::from_str(&c.text).unwrap();
    assert_eq!(sent["system"], "SYSTEM TEXT");
    assert_eq!(sent["user"], "USER TEXT\nsecond line");
    assert_eq!(sent["max_tokens"], 99);

    // An answer object carries text, model, usage and cost.
    let answer = r#"cmd+json:cat >/dev/null; printf '%s' '{"text": "hi", "model": "agent", "usage": {"input_tokens": 5, "output_tokens": 7}, "cost_usd": 0.25}'"#;
    let p = build_with_env(answer, &config(10.0), &acct, &|_| None).unwrap();
    let c = p.complete(&req()).await.unwrap();
    assert_eq!(c.text, "hi");
    assert_eq!(c.model, "agent");
    assert_eq!(c.usage.output_tokens, 7);
    assert_eq!(c.cost_usd, Some(0.25));
    assert_eq!(acct.totals().all.cost_usd, 0.25);
}

#[tokio::test]
async fn non_zero_exit_is_an_error_with_the_end_of_stderr() {
    let cmd = "cmd:for i in $(seq 1 40); do echo \"err line $i\" >&2; done; exit 3";
    let acct = Accounting::new();
    let p = build_with_env(cmd, &config(10.0), &acct, &|_| None).unwrap();
    let e = p.complete(&req()).await.unwrap_err();
    // The command ran and may have spent on a model of its own: the failed
    // call's cost is unknown, not 0.
    let all = acct.totals().all;
    assert_eq!(
        (all.failures, all.unpriced_calls, all.usage_unknown_calls),
        (1, 1, 1)
    );
    let ProviderError::Command {
        status,
        stderr_tail,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(status, "exited with status 3");
    assert!(stderr_tail.ends_with("err line 40"), "{stderr_tail}");
    assert!(
        stderr_tail.contains("err line 21") && !stderr_tail.contains("err line 20\n"),
        "{stderr_tail}"
    );
}

fn alive(pid: i32) -> bool {
    // A zombie is dead for our purposes; a missing /proc entry is gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[tokio::test]
async fn the_time_limit_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    // The shell starts a grandchild that would outlive it, records its pid,
    // and then hangs.
    let cmd = format!("cmd:sleep 30 & echo $! > {}; sleep 30", pidfile.display());
    let p = build_with_env(&cmd, &config(0.5), &Accounting::new(), &|_| None).unwrap();
    let t0 = Instant::now();
    let e = p.complete(&req()).await.unwrap_err();
    assert!(matches!(e, ProviderError::Timeout { .. }), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(pid), "grandchild {pid} survived the time limit");
}

#[tokio::test]
async fn background_leftovers_do_not_hold_up_a_finished_command() {
    // The command answers at once but leaves a child holding stdout open;
    // the call must not wait 30 s for it.
    let p = build_with_env(
        "cmd:echo answer; sleep 30 &",
        &config(10.0),
        &Accounting::new(),
        &|_| None,
    )
    .unwrap();
    let t0 = Instant::now();
    let c = p.complete(&req()).await.unwrap();
    assert_eq!(c.text, "answer\n");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

#[tokio::test]
async fn commands_that_ignore_stdin_are_fine() {
    let big = ChatRequest::new("s", "x".repeat(1 << 20));
    let p = build_with_env("cmd:echo ok", &config(10.0), &Accounting::new(), &|_| None).unwrap();
    assert_eq!(p.complete(&big).await.unwrap().text, "ok\n");
}
