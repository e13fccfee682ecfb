//! The HTTP providers against local fake servers that speak the real
//! OpenAI and Anthropic wire formats: success, retries (429 with
//! Retry-After in both forms, 5xx, timeouts, truncated bodies), errors that
//! must not be retried, concurrency, cost, recording, replay, ensembles and
//! the probe.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use common::{Fake, Reply, anthropic_ok, openai_ok, raw_server};
use kevo_proposer::{
    Accounting, ChatRequest, EndpointConfig, Provider, ProviderConfig, ProviderError, Secret,
    build_with_env, probe, probe_all,
};
use serde_json::json;

const OPENAI_KEY: &str = "sk-test-openai-0123456789";
const ANTHROPIC_KEY: &str = "sk-ant-test-9876543210";

fn env(k: &str) -> Option<String> {
    match k {
        "OPENAI_API_KEY" => Some(OPENAI_KEY.into()),
        "ANTHROPIC_API_KEY" => Some(ANTHROPIC_KEY.into()),
        _ => None,
    }
}

/// Fast retries so the tests take milliseconds, not seconds.
fn config() -> ProviderConfig {
    common::fast_config()
}

fn openai(fake: &Fake, model: &str, cfg: &ProviderConfig, acct: &Accounting) -> Arc<dyn Provider> {
    build_with_env(
        &format!("openai@{}/v1:{model}", fake.url()),
        cfg,
        acct,
        &env,
    )
    .unwrap()
}

fn anthropic(fake: &Fake, cfg: &ProviderConfig, acct: &Accounting) -> Arc<dyn Provider> {
    build_with_env(
        &format!("anthropic@{}:claude-opus-4-1", fake.url()),
        cfg,
        acct,
        &env,
    )
    .unwrap()
}

fn req() -> ChatRequest {
    ChatRequest::new("You write kernels.", "Write saxpy.")
}

#[tokio::test]
async fn openai_success_speaks_the_wire_format() {
    let fake = Fake::start(vec![Reply::json(openai_ok("```cuda\nok\n```"))]).await;
    let acct = Accounting::new();
    let cfg = ProviderConfig {
        reasoning_effort: Some("high".into()),
        temperature: Some(0.2),
        ..config()
    };
    let p = openai(&fake, "gpt-5", &cfg, &acct);
    let c = p.complete(&req()).await.unwrap();

    let seen = &fake.seen()[0];
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(
        seen.headers["authorization"],
        format!("Bearer {OPENAI_KEY}")
    );
    assert_eq!(seen.body["model"], "gpt-5");
    assert_eq!(
        seen.body["messages"][0],
        json!({"role": "system", "content": "You write kernels."})
    );
    assert_eq!(
        seen.body["messages"][1],
        json!({"role": "user", "content": "Write saxpy."})
    );
    // A reasoning model: max_completion_tokens and reasoning_effort, no temperature.
    assert_eq!(seen.body["max_completion_tokens"], 32768);
    assert_eq!(seen.body["reasoning_effort"], "high");
    assert!(seen.body.get("temperature").is_none() && seen.body.get("max_tokens").is_none());

    assert_eq!(c.text, "```cuda\nok\n```");
    assert_eq!(c.reasoning.as_deref(), Some("I thought."));
    assert_eq!(c.model, "gpt-5-2025-08-07");
    assert_eq!(c.provider, "openai");
    assert_eq!(c.finish_reason.as_deref(), Some("stop"));
    assert_eq!(c.attempts, 1);
    assert_eq!(
        (
            c.usage.input_tokens,
            c.usage.output_tokens,
            c.usage.reasoning_tokens,
            c.usage.cached_tokens
        ),
        (1200, 800, Some(500), Some(200))
    );
    // gpt-5 list price: 1000 uncached x 1.25 + 200 cached x 0.125 + 800 x 10, per million.
    let cost = c.cost_usd.unwrap();
    assert!((cost - 0.009275).abs() < 1e-12, "{cost}");
    let t = acct.totals();
    assert_eq!((t.all.calls, t.all.retries, t.all.failures), (1, 0, 0));
    assert!((t.all.cost_usd - 0.009275).abs() < 1e-12);
    assert_eq!(
        t.per_model.keys().collect::<Vec<_>>(),
        [&format!("openai@{}/v1:gpt-5", fake.url())]
    );
}

#[tokio::test]
async fn non_reasoning_models_get_max_tokens_and_temperature() {
    let fake = Fake::start(vec![Reply::json(openai_ok("x"))]).await;
    let cfg = ProviderConfig {
        temperature: Some(0.2),
        max_tokens: 4096,
        ..config()
    };
    let p = openai(&fake, "qwen2.5-coder:7b", &cfg, &Accounting::new());
    let mut r = req();
    r.max_tokens = Some(100);
    p.complete(&r).await.unwrap();
    let b = &fake.seen()[0].body;
    assert_eq!(b["max_tokens"], 100);
    assert!((b["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert!(b.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn retry_after_in_seconds_is_honoured() {
    let fake = Fake::start(vec![
        Reply::status(429, r#"{"error":{"message":"rate limited"}}"#).header("retry-after", "1"),
        Reply::json(openai_ok("done")),
    ])
    .await;
    let acct = Accounting::new();
    let p = openai(&fake, "gpt-5", &config(), &acct);
    let t0 = Instant::now();
    let c = p.complete(&req()).await.unwrap();
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    // Without the header the backoff would have waited 10-20 ms.
    assert!(gap >= Duration::from_millis(950), "{gap:?}");
    assert!(t0.elapsed() < Duration::from_secs(4));
    assert_eq!(c.text, "done");
    assert_eq!(c.attempts, 2);
    assert_eq!(acct.totals().all.retries, 1);
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honoured() {
    let at = SystemTime::now() + Duration::from_secs(2);
    let fake = Fake::start(vec![
        Reply::status(503, "busy").header("retry-after", &httpdate::fmt_http_date(at)),
        Reply::json(openai_ok("done")),
    ])
    .await;
    let p = openai(&fake, "gpt-5", &config(), &Accounting::new());
    p.complete(&req()).await.unwrap();
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    // The date has whole-second resolution: the wait is 1 to 2 s.
    let gap = seen[1].at - seen[0].at;
    assert!(
        gap >= Duration::from_millis(800) && gap < Duration::from_secs(3),
        "{gap:?}"
    );
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let fake = Fake::start(vec![
        Reply::status(500, "boom"),
        Reply::json(openai_ok("second time")),
    ])
    .await;
    let p = openai(&fake, "gpt-5", &config(), &Accounting::new());
    let c = p.complete(&req()).await.unwrap();
    assert_eq!(
        (c.text.as_str(), c.attempts, fake.requests()),
        ("second time", 2, 2)
    );

    let fake = Fake::start(vec![Reply::status(502, "bad gateway")]).await;
    let acct = Accounting::new();
    let p = openai(&fake, "gpt-5", &config(), &acct);
    let e = p.complete(&req()).await.unwrap_err();
    assert_eq!(fake.requests(), 3, "1 attempt + max_retries 2");
    match &e {
        ProviderError::GaveUp { attempts: 3, last } => {
            assert!(
                matches!(**last, ProviderError::Http { status: 502, .. }),
                "{last}"
            );
        }
        other => panic!("{other}"),
    }
    let t = acct.totals();
    assert_eq!((t.all.calls, t.all.failures, t.all.retries), (0, 1, 2));
}

#[tokio::test]
async fn client_errors_are_not_retried_and_never_echo_the_key() {
    let fake = Fake::start(vec![Reply::status(
        401,
        r#"{"error":{"message":"Incorrect API key provided: {{AUTH}}"}}"#,
    )])
    .await;
    let p = openai(&fake, "gpt-5", &config(), &Accounting::new());
    let e = p.complete(&req()).await.unwrap_err();
    assert_eq!(fake.requests(), 1);
    assert!(matches!(e, ProviderError::Http { status: 401, .. }), "{e}");
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains(OPENAI_KEY), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");

    for (status, retried) in [
        (400, false),
        (404, false),
        (422, false),
        (408, true),
        (409, true),
    ] {
        let fake = Fake::start(vec![Reply::status(status, "{}")]).await;
        let p = openai(&fake, "gpt-5", &config(), &Accounting::new());
        p.complete(&req()).await.unwrap_err();
        assert_eq!(
            fake.requests(),
            if retried { 3 } else { 1 },
            "HTTP {status}"
        );
    }
}

#[tokio::test]
async fn timeouts_are_retried() {
    let fake = Fake::start(vec![
        Reply::json(openai_ok("late")).delayed(Duration::from_secs(3)),
    ])
    .await;
    let cfg = ProviderConfig {
        timeout_s: 0.3,
        max_retries: 1,
        ..config()
    };
    let p = openai(&fake, "gpt-5", &cfg, &Accounting::new());
    let t0 = Instant::now();
    let e = p.complete(&req()).await.unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(fake.requests(), 2);
    assert!(matches!(e.root(), ProviderError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("no response within 0.3 s"), "{e}");
}

#[tokio::test]
async fn malformed_json_is_reported_not_retried() {
    let fake = Fake::start(vec![Reply::status(200, r#"{"choices": [{"message": "#)]).await;
    let p = openai(&fake, "gpt-5", &config(), &Accounting::new());
    let e = p.complete(&req()).await.unwrap_err();
    assert_eq!(fake.requests(), 1);
    assert!(matches!(e, ProviderError::InvalidResponse { .. }), "{e}");
    assert!(e.to_string().contains("malformed JSON"), "{e}");

    // Well-formed JSON without choices is invalid too.
    let fake = Fake::start(vec![Reply::json(json!({"object": "chat.completion"}))]).await;
    let e = openai(&fake, "gpt-5", &config(), &Accounting::new())
        .complete(&req())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no `choices`"), "{e}");
}

#[tokio::test]
async fn truncated_bodies_are_connection_errors_and_retried() {
    let (addr, count) = raw_server(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{\"choices\": [{\"message\""
            .to_vec(),
    )
    .await;
    let p = build_with_env(
        &format!("openai@http://{addr}/v1:gpt-5"),
        &config(),
        &Accounting::new(),
        &env,
    )
    .unwrap();
    let e = p.complete(&req()).await.unwrap_err();
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert!(matches!(e.root(), ProviderError::Connection { .. }), "{e}");
    assert!(e.to_string().contains("cut off"), "{e}");
}

#[tokio::test]
async fn length_limited_answers_are_marked_truncated() {
    let mut v = openai_ok("```cuda\nvoid saxpy(");
    v["choices"][0]["finish_reason"] = json!("length");
    let fake = Fake::start(vec![Reply::json(v)]).await;
    let c = openai(&fake, "gpt-5", &config(), &Accounting::new())
        .complete(&req())
        .await
        .unwrap();
    assert!(c.truncated());
    assert_eq!(c.text, "```cuda\nvoid saxpy(");
}

#[tokio::test]
async fn concurrency_is_limited_per_model() {
    let fake = Fake::start(vec![
        Reply::json(openai_ok("x")).delayed(Duration::from_millis(150)),
    ])
    .await;
    let cfg = ProviderConfig {
        concurrency: 2,
        ..config()
    };
    let p = openai(&fake, "gpt-5", &cfg, &Accounting::new());
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let p = p.clone();
            tokio::spawn(async move { p.complete(&req()).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(fake.requests(), 6);
    assert_eq!(fake.max_in_flight(), 2);
}

#[tokio::test]
async fn anthropic_success_speaks_the_wire_format() {
    let fake = Fake::start(vec![Reply::json(anthropic_ok("```cuda\nok\n```"))]).await;
    let acct = Accounting::new();
    let cfg = ProviderConfig {
        thinking_budget: Some(2048),
        max_tokens: 1000,
        temperature: Some(0.5),
        ..config()
    };
    let c = anthropic(&fake, &cfg, &acct)
        .complete(&req())
        .await
        .unwrap();
    let seen = &fake.seen()[0];
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.headers["x-api-key"], ANTHROPIC_KEY);
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert!(!seen.headers.contains_key("authorization"));
    assert_eq!(seen.body["system"], "You write kernels.");
    assert_eq!(
        seen.body["messages"],
        json!([{"role": "user", "content": "Write saxpy."}])
    );
    assert_eq!(
        seen.body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(seen.body["max_tokens"], 3048);
    assert!(seen.body.get("temperature").is_none());

    assert_eq!(c.text, "```cuda\nok\n```");
    assert_eq!(c.reasoning.as_deref(), Some("Let me think."));
    assert_eq!(c.finish_reason.as_deref(), Some("end_turn"));
    assert_eq!((c.usage.input_tokens, c.usage.output_tokens), (1000, 300));
    // claude-opus-4-1: 1000 x 15 + 300 x 75 per million.
    assert!((c.cost_usd.unwrap() - 0.0375).abs() < 1e-12);
}

#[tokio::test]
async fn anthropic_overload_and_rate_limits_are_retried() {
    let fake = Fake::start(vec![
        Reply::status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Reply::status(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        )
        .header("retry-after", "1"),
        Reply::json(anthropic_ok("third")),
    ])
    .await;
    let c = anthropic(&fake, &config(), &Accounting::new())
        .complete(&req())
        .await
        .unwrap();
    assert_eq!((c.text.as_str(), c.attempts), ("third", 3));
    let seen = fake.seen();
    assert!(seen[2].at - seen[1].at >= Duration::from_millis(950));
}

#[tokio::test]
async fn anthropic_malformed_and_error_bodies() {
    let fake = Fake::start(vec![Reply::status(
        200,
        "{\"type\": \"message\", \"content\": [",
    )])
    .await;
    let e = anthropic(&fake, &config(), &Accounting::new())
        .complete(&req())
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::InvalidResponse { .. }), "{e}");
    assert_eq!(fake.requests(), 1);

    let fake = Fake::start(vec![Reply::status(
        400,
        r#"{"type":"error","error":{"message":"max_tokens: too large"}}"#,
    )])
    .await;
    let e = anthropic(&fake, &config(), &Accounting::new())
        .complete(&req())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("max_tokens: too large"), "{e}");
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn missing_keys_name_the_variable() {
    let e = build_with_env("openai:gpt-5", &config(), &Accounting::new(), &|_| None)
        .err()
        .unwrap();
    assert!(e.to_string().contains("OPENAI_API_KEY"), "{e}");
    let e = build_with_env(
        "anthropic:claude-opus-4-1",
        &config(),
        &Accounting::new(),
        &|_| None,
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
}

fn endpoint(url: String, key: &str) -> EndpointConfig {
    EndpointConfig {
        base_url: Some(url),
        api_key: Some(Secret::new(key)),
        ..EndpointConfig::default()
    }
}

#[tokio::test]
async fn probe_reports_latency_tokens_and_cost() {
    let fake = Fake::start(vec![Reply::json(openai_ok("ok"))]).await;
    let mut cfg = config();
    cfg.endpoints.insert(
        "fake".into(),
        endpoint(format!("{}/v1", fake.url()), "sk-probe-key"),
    );
    let r = probe("fake:gpt-5", &cfg).await.unwrap();
    assert_eq!(r.spec, "fake:gpt-5");
    assert_eq!(r.model, "gpt-5-2025-08-07");
    assert_eq!(r.reply, "ok");
    assert_eq!(r.usage.output_tokens, 800);
    assert!(r.cost_usd.unwrap() > 0.0);
    assert!(r.latency > Duration::ZERO);
    let shown = r.to_string();
    assert!(
        shown.contains("1200 input + 800 output tokens (500 reasoning)") && shown.contains('$'),
        "{shown}"
    );
    let seen = &fake.seen()[0];
    assert_eq!(seen.headers["authorization"], "Bearer sk-probe-key");
    assert_eq!(seen.body["max_completion_tokens"], 1024);

    cfg.endpoints
        .insert("other".into(), endpoint(format!("{}/v1", fake.url()), "k2"));
    let e = probe("fake:gpt-5,other:local-model", &cfg)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("probe takes one"), "{e}");
    let all = probe_all("fake:gpt-5,other:local-model", &cfg)
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    let second = all[1].as_ref().unwrap();
    assert_eq!(second.spec, "other:local-model");
    // The fake answers as gpt-5 whatever is asked: priced by the served name.
    assert!(second.cost_usd.is_some());
}

#[tokio::test]
async fn ensembles_route_by_weight_share_accounting_and_resume() {
    let a = Fake::start(vec![Reply::json(openai_ok("from a"))]).await;
    let b = Fake::start(vec![Reply::json(anthropic_ok("from b"))]).await;
    let mut cfg = config();
    cfg.ensemble_seed = 11;
    cfg.endpoints
        .insert("a".into(), endpoint(format!("{}/v1", a.url()), "ka"));
    cfg.endpoints.insert(
        "b".into(),
        EndpointConfig {
            kind: Some(kevo_proposer::ApiKind::Anthropic),
            ..endpoint(b.url(), "kb")
        },
    );
    let spec = "a:gpt-5=0.8,b:claude-sonnet-4-5=0.2";
    let acct = Accounting::new();
    let p = build_with_env(spec, &cfg, &acct, &|_| None).unwrap();
    for _ in 0..40 {
        p.complete(&req()).await.unwrap();
    }
    let state = p.ensemble_state().unwrap();
    assert_eq!(state.picks, vec![a.requests() as u64, b.requests() as u64]);
    assert!(a.requests() > b.requests() && b.requests() > 0, "{state:?}");
    let t = acct.totals();
    assert_eq!(t.all.calls, 40);
    assert_eq!(t.per_model["a:gpt-5"].calls, a.requests() as u64);
    assert_eq!(
        t.per_model["b:claude-sonnet-4-5"].calls,
        b.requests() as u64
    );

    // A fresh ensemble restored from the state makes the same next choices.
    let next: Vec<String> = {
        let mut v = Vec::new();
        for _ in 0..10 {
            v.push(p.complete(&req()).await.unwrap().text);
        }
        v
    };
    let q = build_with_env(spec, &cfg, &Accounting::new(), &|_| None).unwrap();
    q.restore_ensemble_state(
        &serde_json::from_str(&serde_json::to_string(&state).unwrap()).unwrap(),
    )
    .unwrap();
    let mut again = Vec::new();
    for _ in 0..10 {
        again.push(q.complete(&req()).await.unwrap().text);
    }
    assert_eq!(again, next);
}

#[tokio::test]
async fn recordings_replay_and_never_hold_the_key() {
    // The fake echoes the Authorization header into the answer, the worst
    // case for a recorder; the provider scrubs it before anything sees it.
    let fake = Fake::start(vec![Reply::json(openai_ok("echo: {{AUTH}}"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let mut cfg = config();
    cfg.endpoints.insert(
        "openai".into(),
        EndpointConfig {
            api_key: Some(Secret::new(OPENAI_KEY)),
            ..EndpointConfig::default()
        },
    );
    let inner = build_with_env(
        &format!("openai@{}/v1:gpt-5", fake.url()),
        &cfg,
        &Accounting::new(),
        &|_| None,
    )
    .unwrap();
    let rec = kevo_proposer::providers::Recording::new(inner, &path).unwrap();
    let r1 = ChatRequest::new("sys", "first prompt");
    let r2 = ChatRequest::new("sys", "second prompt");
    let c1 = rec.complete(&r1).await.unwrap();
    rec.complete(&r2).await.unwrap();
    assert_eq!(c1.text, "echo: Bearer [redacted]");

    let file = std::fs::read_to_string(&path).unwrap();
    assert_eq!(file.lines().count(), 2);
    assert!(!file.contains(OPENAI_KEY), "{file}");
    assert!(
        !file.contains(&fake.url()),
        "the base URL is not recorded either"
    );
    assert!(file.contains("first prompt") && file.contains(&r1.prompt_key()));

    // Keyed replay serves by prompt, in any order, at no cost.
    let spec = format!("replay:{}#keyed", path.display());
    let acct = Accounting::new();
    let p = build_with_env(&spec, &cfg, &acct, &|_| None).unwrap();
    let c = p.complete(&r2).await.unwrap();
    assert_eq!(c.provider, "replay");
    assert_eq!(c.cost_usd, Some(0.0));
    assert_eq!(c.usage.output_tokens, 800);
    assert_eq!(p.complete(&r1).await.unwrap().text, c1.text);
    let e = p.complete(&r1).await.unwrap_err();
    assert!(matches!(e, ProviderError::ReplayMissingKey { .. }), "{e}");
    assert_eq!(acct.totals().all.calls, 2);
    assert_eq!(acct.totals().all.failures, 1);

    // Ordered replay ignores the prompt and runs out after two.
    let p = build_with_env(&format!("replay:{}", path.display()), &cfg, &acct, &|_| {
        None
    })
    .unwrap();
    let any = ChatRequest::new("x", "y");
    assert_eq!(p.complete(&any).await.unwrap().text, c1.text);
    p.complete(&any).await.unwrap();
    let e = p.complete(&any).await.unwrap_err();
    assert!(e.to_string().contains("exhausted"), "{e}");
    assert_eq!(fake.requests(), 2, "replays never reach the server");
}

#[tokio::test]
async fn the_budget_stops_the_request_that_could_overshoot_it() {
    let fake = Fake::start(vec![Reply::json(openai_ok("x"))]).await;
    // gpt-5: a 1000-token answer costs at most $0.01; one call spends
    // ~$0.0095, so a second could pass $0.015 and is not sent.
    let cfg = ProviderConfig {
        budget_usd: Some(0.015),
        ..config()
    };
    let acct = Accounting::new();
    let p = openai(&fake, "gpt-5", &cfg, &acct);
    let mut small = req();
    small.max_tokens = Some(1000);
    p.complete(&small).await.unwrap();
    let e = p.complete(&small).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::BudgetExceeded { next: Some(_), .. }),
        "{e}"
    );
    assert!(
        e.to_string().contains("the next call could cost up to"),
        "{e}"
    );
    assert_eq!(fake.requests(), 1);
    assert!(acct.totals().all.cost_usd <= 0.015);
    // A call that could cost more than the whole budget is never sent.
    let fake = Fake::start(vec![Reply::json(openai_ok("x"))]).await;
    let cfg = ProviderConfig {
        budget_usd: Some(0.001),
        ..config()
    };
    let p = openai(&fake, "gpt-5", &cfg, &Accounting::new());
    assert!(p.complete(&req()).await.is_err());
    assert_eq!(fake.requests(), 0);
}

#[tokio::test]
async fn a_budget_with_an_unknown_cost_stops_unless_accepted() {
    // A priced model whose server sends no usage: the first call's cost is
    // unknown, so the cap cannot be enforced and the second is not sent.
    let mut no_usage = openai_ok("x");
    no_usage.as_object_mut().unwrap().remove("usage");
    let fake = Fake::start(vec![Reply::json(no_usage)]).await;
    let cfg = ProviderConfig {
        budget_usd: Some(100.0),
        ..config()
    };
    let acct = Accounting::new();
    let p = openai(&fake, "gpt-5", &cfg, &acct);
    let c = p.complete(&req()).await.unwrap();
    assert_eq!(c.cost_usd, None, "unknown, not 0");
    assert!(c.usage_unknown.is_some());
    let e = p.complete(&req()).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::BudgetUnenforceable { .. })
            && e.to_string().contains("--accept-unknown-cost"),
        "{e}"
    );
    assert_eq!(fake.requests(), 1);
    assert_eq!(acct.totals().all.usage_unknown_calls, 1);
    // An unpriced model with a budget: refused before the first call,
    // unless the user accepts an unknown cost.
    let fake = Fake::start(vec![Reply::json(openai_ok("x"))]).await;
    let p = openai(
        &fake,
        "local-model-without-a-price",
        &cfg,
        &Accounting::new(),
    );
    assert!(matches!(
        p.complete(&req()).await.unwrap_err(),
        ProviderError::BudgetUnenforceable { .. }
    ));
    let cfg = ProviderConfig {
        accept_unknown_cost: true,
        ..cfg
    };
    let p = openai(
        &fake,
        "local-model-without-a-price",
        &cfg,
        &Accounting::new(),
    );
    assert!(p.complete(&req()).await.is_ok());
}
