//! Endpoints that lie, stall or leak, against a loopback fake server: a key
//! echoed in an error or the model name never comes back out; absurd usage
//! is not a number; bodies past the cap, redirect loops, long Retry-After
//! and silent servers end the call quickly with the cause; every retry
//! prints a notice.

mod common;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::{Fake, Reply, anthropic_ok, openai_ok};
use kevo_proposer::{
    Accounting, ChatRequest, Provider, ProviderConfig, ProviderError, build_with_env,
};
use serde_json::json;

const KEY: &str = "sk-canary-openai-5ba1c0ffee";
const ANTHROPIC_KEY: &str = "sk-ant-canary-7e11a1e";

fn env(k: &str) -> Option<String> {
    match k {
        "OPENAI_API_KEY" => Some(KEY.into()),
        "ANTHROPIC_API_KEY" => Some(ANTHROPIC_KEY.into()),
        _ => None,
    }
}

fn config() -> ProviderConfig {
    common::fast_config()
}

fn openai(fake: &Fake, cfg: &ProviderConfig) -> Arc<dyn Provider> {
    build_with_env(
        &format!("openai@{}/v1:gpt-5", fake.url()),
        cfg,
        &Accounting::new(),
        &env,
    )
    .unwrap()
}

fn anthropic(fake: &Fake, cfg: &ProviderConfig) -> Arc<dyn Provider> {
    build_with_env(
        &format!("anthropic@{}:claude-opus-4-1", fake.url()),
        cfg,
        &Accounting::new(),
        &env,
    )
    .unwrap()
}

fn req() -> ChatRequest {
    ChatRequest::new("You write kernels.", "Write saxpy.")
}

/// Every notice printed so far (the sink is process-wide; tests filter by
/// their server's address).
fn notices() -> Arc<Mutex<Vec<String>>> {
    static SEEN: OnceLock<Arc<Mutex<Vec<String>>>> = OnceLock::new();
    SEEN.get_or_init(|| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        kevo_proposer::notice::set_sink(move |line| sink.lock().unwrap().push(line.to_string()));
        seen
    })
    .clone()
}

fn notices_of(fake: &Fake) -> Vec<String> {
    let url = fake.url();
    notices()
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(&url))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_key_echoed_in_an_error_object_or_the_model_never_comes_back() {
    for (body, what) in [
        (
            json!({"error": {"message": format!("bad key {KEY}")}}),
            "error object without a code",
        ),
        (
            json!({"error": {"message": format!("quota for {KEY}"), "code": 401}}),
            "error object with a code",
        ),
    ] {
        let fake = Fake::start(vec![Reply::json(body)]).await;
        let e = openai(&fake, &config()).complete(&req()).await.unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(!text.contains(KEY), "{what}: {text}");
        assert!(text.contains("[redacted]"), "{what}: {text}");
    }
    let mut echoed = openai_ok("```cuda\nok\n```");
    echoed["model"] = json!(KEY);
    echoed["choices"][0]["message"]["content"] = json!(format!("here: {KEY}"));
    let fake = Fake::start(vec![Reply::json(echoed)]).await;
    let c = openai(&fake, &config()).complete(&req()).await.unwrap();
    let text = format!("{c:?}");
    assert!(!text.contains(KEY), "{text}");
    assert_eq!(c.model, "[redacted]");

    let fake = Fake::start(vec![Reply::json(
        json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key {ANTHROPIC_KEY}")}}),
    )])
    .await;
    let e = anthropic(&fake, &config())
        .complete(&req())
        .await
        .unwrap_err();
    assert!(!format!("{e} {e:?}").contains(ANTHROPIC_KEY), "{e}");
    let mut echoed = anthropic_ok("ok");
    echoed["model"] = json!(ANTHROPIC_KEY);
    let fake = Fake::start(vec![Reply::json(echoed)]).await;
    let c = anthropic(&fake, &config()).complete(&req()).await.unwrap();
    assert!(!format!("{c:?}").contains(ANTHROPIC_KEY));
    // A key kevo never held, in a well-known shape, is redacted too.
    let mut echoed = openai_ok("ok");
    echoed["model"] = json!("sk-proj-ZZZZZZZZZZZZZZZZZZZZZZZZ");
    let fake = Fake::start(vec![Reply::json(echoed)]).await;
    let c = openai(&fake, &config()).complete(&req()).await.unwrap();
    assert_eq!(c.model, "[redacted]");
}

#[tokio::test]
async fn absurd_usage_is_not_a_number_and_is_never_fatal() {
    for usage in [
        json!({"prompt_tokens": 9223372036854775808u64, "completion_tokens": 18446744073709551615u64}),
        json!({"prompt_tokens": -5, "completion_tokens": 1.5}),
        json!({"prompt_tokens": "lots", "completion_tokens": null}),
    ] {
        let mut body = openai_ok("ok");
        body["usage"] = usage.clone();
        let fake = Fake::start(vec![Reply::json(body)]).await;
        let c = openai(&fake, &config()).complete(&req()).await.unwrap();
        assert!(
            c.usage.input_tokens <= 1_000_000_000 && c.usage.output_tokens <= 1_000_000_000,
            "{usage}: {:?}",
            c.usage
        );
    }
}

#[tokio::test]
async fn a_body_past_the_cap_is_a_failed_call_read_no_further() {
    let big = format!(
        "{{\"choices\": [{{\"message\": {{\"content\": \"{}\"}}}}]}}",
        "x".repeat(20 << 20)
    );
    let fake = Fake::start(vec![Reply::status(200, &big)]).await;
    let t = Instant::now();
    let e = openai(&fake, &config()).complete(&req()).await.unwrap_err();
    assert!(
        matches!(e.root(), ProviderError::TooLarge { limit, .. } if *limit == 1 << 20),
        "{e}"
    );
    assert!(e.to_string().contains("max_response_bytes"), "{e}");
    assert_eq!(fake.requests(), 1, "a too-large answer is not asked again");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[tokio::test]
async fn a_redirect_loop_is_permanent_and_not_retried() {
    let fake = Fake::start(vec![
        Reply::status(307, "").header("location", "/v1/chat/completions"),
    ])
    .await;
    let e = openai(&fake, &config()).complete(&req()).await.unwrap_err();
    assert!(matches!(e, ProviderError::Permanent { .. }), "{e}");
    assert!(e.to_string().contains("redirect"), "{e}");
    assert!(
        fake.requests() <= 11,
        "one call follows at most 10 redirects"
    );
}

#[tokio::test]
async fn a_long_retry_after_is_refused_at_once_and_says_so() {
    notices();
    let fake = Fake::start(vec![
        Reply::status(503, r#"{"error": "busy"}"#).header("retry-after", "250"),
    ])
    .await;
    let t = Instant::now();
    let e = openai(&fake, &config()).complete(&req()).await.unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let text = e.to_string();
    assert!(
        matches!(e, ProviderError::RetryAfterRefused { .. }) && text.contains("250 s"),
        "{text}"
    );
    assert!(
        notices_of(&fake).iter().any(|l| l.contains("not retried")),
        "{:?}",
        notices_of(&fake)
    );
}

#[tokio::test]
async fn every_retry_prints_a_notice_with_cause_attempt_and_wait() {
    notices();
    let fake = Fake::start(vec![
        Reply::status(503, "down"),
        Reply::status(502, "bad gateway"),
        Reply::json(openai_ok("ok")),
    ])
    .await;
    let c = openai(&fake, &config()).complete(&req()).await.unwrap();
    assert_eq!(c.attempts, 3);
    let lines = notices_of(&fake);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].contains("attempt 1 of 3 failed") && lines[0].contains("HTTP 503"),
        "{lines:?}"
    );
    assert!(lines[1].contains("retrying in"), "{lines:?}");
}

#[tokio::test]
async fn a_silent_server_costs_the_call_budget_not_an_hour() {
    notices();
    let fake = Fake::start(vec![
        Reply::json(openai_ok("late")).delayed(Duration::from_secs(30)),
    ])
    .await;
    let cfg = ProviderConfig {
        timeout_s: 0.5,
        max_retries: 50,
        max_call_s: 2.0,
        ..config()
    };
    let t = Instant::now();
    let e = openai(&fake, &cfg).complete(&req()).await.unwrap_err();
    assert!(matches!(e.root(), ProviderError::Timeout { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert!(
        notices_of(&fake).iter().any(|l| l.contains("max_call_s")),
        "{:?}",
        notices_of(&fake)
    );
}
