//! A `cmd:` proposer is contained: it gets no credential it was not given,
//! what it prints of one is redacted, its output is capped, and its whole
//! process tree ends with the call, children that left the process group
//! with `setsid` included. One test function: it sets kevo's own
//! environment, which no other thread may read meanwhile.

use std::time::{Duration, Instant};

use kevo_proposer::{Accounting, ChatRequest, ProviderConfig, ProviderError, build_with_env};

const CANARY: &str = "sk-cmd-canary-0f1e2d3c4b5a";

fn config(timeout_s: f64, pass: &[&str]) -> ProviderConfig {
    ProviderConfig {
        timeout_s,
        max_retries: 0,
        cmd_pass_env: pass.iter().map(|s| s.to_string()).collect(),
        ..ProviderConfig::default()
    }
}

async fn call(spec: &str, cfg: &ProviderConfig) -> Result<String, ProviderError> {
    let p = build_with_env(spec, cfg, &Accounting::new(), &|_| None).unwrap();
    p.complete(&ChatRequest::new("s", "u"))
        .await
        .map(|c| c.text)
}

fn alive(pid: i32) -> bool {
    // A killed process may linger as a zombie until its parent reaps it.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

async fn gone_soon(pid: i32) -> bool {
    for _ in 0..50 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_cmd_proposer_is_contained() {
    // SAFETY: the only test in this binary; set before any provider runs.
    unsafe {
        std::env::set_var("OPENAI_API_KEY", CANARY);
        std::env::set_var("KEVO_UNRELATED_SETTING", "visible-only-when-passed");
    }
    let dir = tempfile::tempdir().unwrap();

    // 1. The environment: no key unless named, and then redacted in output.
    let text = call("cmd:cat >/dev/null; env", &config(10.0, &[]))
        .await
        .unwrap();
    assert!(!text.contains("OPENAI_API_KEY"), "{text}");
    assert!(!text.contains("KEVO_UNRELATED_SETTING"), "{text}");
    assert!(text.contains("PATH="), "basic variables pass: {text}");
    let text = call(
        "cmd:cat >/dev/null; env",
        &config(10.0, &["OPENAI_API_KEY"]),
    )
    .await
    .unwrap();
    assert!(text.contains("OPENAI_API_KEY=[redacted]"), "{text}");
    assert!(!text.contains(CANARY));
    // ... and in a failing command's stderr tail.
    let e = call(
        "cmd:cat >/dev/null; echo \"key is $OPENAI_API_KEY\" >&2; exit 3",
        &config(10.0, &["OPENAI_API_KEY"]),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(e, ProviderError::Command { .. }) && e.to_string().contains("key is [redacted]"),
        "{e}"
    );
    assert!(!format!("{e:?}").contains(CANARY));

    // 2. A child that escapes the group with setsid and holds stdout open:
    // the answer comes when the command exits, and the child is killed.
    let pidfile = dir.path().join("escaped.pid");
    let spec = format!(
        "cmd:cat >/dev/null; setsid sh -c 'echo $$ > {}; exec sleep 60' & sleep 0.3; echo answer",
        pidfile.display()
    );
    let t = Instant::now();
    let text = call(&spec, &config(20.0, &[])).await.unwrap();
    assert_eq!(text.trim(), "answer");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(gone_soon(pid).await, "the escaped child {pid} still runs");

    // 3. The same child with a command that never ends: the time limit
    // holds, and both die.
    let pidfile = dir.path().join("escaped2.pid");
    let spec = format!(
        "cmd:setsid sh -c 'echo $$ > {}; exec sleep 60' & exec sleep 60",
        pidfile.display()
    );
    let t = Instant::now();
    let e = call(&spec, &config(1.0, &[])).await.unwrap_err();
    assert!(matches!(e, ProviderError::Timeout { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(gone_soon(pid).await, "the escaped child {pid} still runs");

    // 4. Output past the cap: a failed call with the reason, quickly.
    let t = Instant::now();
    let e = call(
        "cmd:cat >/dev/null; head -c 50000000 /dev/zero",
        &config(20.0, &[]),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, ProviderError::TooLarge { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}
