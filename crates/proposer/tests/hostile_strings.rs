//! Strings an endpoint chooses (served model name, finish reason,
//! reasoning, error bodies, a command's stderr, a batch's status) reach
//! the caller cleaned of control characters, through every provider:
//! OpenAI-compatible and Anthropic servers, `cmd:`, replay and the batch
//! endpoints. The answer's text, extracted as code, is left as it came.

mod common;

use common::{Fake, Reply, anthropic_ok, fast_config, openai_ok};
use kevo_proposer::sanitize::is_control;
use kevo_proposer::{
    Accounting, BatchProvider, BatchState, ChatRequest, Completion, Exchange, ProviderConfig,
    ProviderError, Usage, build_with_env, probe,
};
use serde_json::json;

/// A served model name that would break out of an HTML data block and
/// retitle a terminal, clear it, and reorder what follows.
const EVIL: &str = "x<!--<script>alert(1)</script>\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}";

/// What no cleaned one-line field may hold.
fn assert_line(what: &str, s: &str) {
    assert!(!s.chars().any(is_control), "{what}: {s:?}");
}

/// What no cleaned multi-line text may hold (newlines and tabs may stay).
fn assert_text(what: &str, s: &str) {
    assert!(
        !s.chars().any(|c| c != '\n' && c != '\t' && is_control(c)),
        "{what}: {s:?}"
    );
}

fn assert_completion(c: &Completion) {
    assert_line("model", &c.model);
    assert!(
        c.model
            .starts_with("x<!--<script>alert(1)</script>\u{fffd}]0;pwned")
    );
    assert_line("provider", &c.provider);
    assert_line(
        "finish reason",
        c.finish_reason.as_deref().unwrap_or_default(),
    );
    assert_text("reasoning", c.reasoning.as_deref().unwrap_or_default());
    assert_line("usage note", c.usage_unknown.as_deref().unwrap_or_default());
}

fn env(k: &str) -> Option<String> {
    match k {
        "OPENAI_API_KEY" => Some("sk-test-openai-0123456789".into()),
        "ANTHROPIC_API_KEY" => Some("sk-ant-test-9876543210".into()),
        _ => None,
    }
}

fn req() -> ChatRequest {
    ChatRequest::new("You write kernels.", "Write saxpy.")
}

fn hostile_openai(text: &str) -> serde_json::Value {
    let mut v = openai_ok(text);
    v["model"] = json!(EVIL);
    v["choices"][0]["finish_reason"] = json!(format!("stop{EVIL}"));
    v["choices"][0]["message"]["reasoning_content"] = json!(format!("I thought.\n{EVIL}"));
    v
}

#[tokio::test]
async fn an_openai_compatible_server_cannot_plant_control_characters() {
    let kernel = "```c\n/* \u{1b} kept: this is the code */\n```";
    let fake = Fake::start(vec![Reply::json(hostile_openai(kernel))]).await;
    let p = build_with_env(
        &format!("openai@{}/v1:m", fake.url()),
        &fast_config(),
        &Accounting::new(),
        &env,
    )
    .unwrap();
    let c = p.complete(&req()).await.unwrap();
    assert_completion(&c);
    assert_eq!(c.text, kernel, "the answer's text is the code, unchanged");
    assert_eq!(
        c.reasoning.as_deref().map(|r| r.lines().count()),
        Some(2),
        "reasoning keeps its lines"
    );
}

#[tokio::test]
async fn the_probe_reports_cleaned_strings() {
    let fake = Fake::start(vec![Reply::json(hostile_openai(&format!("ok {EVIL}")))]).await;
    // A loopback server takes no key.
    let report = probe(&format!("openai@{}/v1:m", fake.url()), &fast_config())
        .await
        .unwrap();
    assert_line("model", &report.model);
    assert_text("reply", &report.reply);
    assert_line("shown", &report.to_string());
}

#[tokio::test]
async fn an_anthropic_server_cannot_plant_control_characters() {
    let mut v = anthropic_ok("answer");
    v["model"] = json!(EVIL);
    v["stop_reason"] = json!(EVIL);
    v["content"][0]["thinking"] = json!(EVIL);
    let fake = Fake::start(vec![Reply::json(v)]).await;
    let p = build_with_env(
        &format!("anthropic@{}:claude-opus-4-1", fake.url()),
        &fast_config(),
        &Accounting::new(),
        &env,
    )
    .unwrap();
    assert_completion(&p.complete(&req()).await.unwrap());
}

#[tokio::test]
async fn error_bodies_are_cleaned_and_keep_their_lines() {
    let body = format!(
        "{{\"error\": \"line one\\r\\n{}\"}}",
        EVIL.replace('\u{1b}', "\\u001b")
    );
    for reply in [
        Reply::status(400, &body),
        Reply::json(json!({"error": {"message": EVIL}})),
        Reply::status(200, &format!("not json {EVIL}")),
    ] {
        let fake = Fake::start(vec![reply]).await;
        let p = build_with_env(
            &format!("openai@{}/v1:m", fake.url()),
            &fast_config(),
            &Accounting::new(),
            &env,
        )
        .unwrap();
        let e = p.complete(&req()).await.unwrap_err();
        let shown = e.to_string();
        assert_text("error", &shown);
        assert!(shown.contains("x<!--<script>"), "{shown}");
    }
}

#[tokio::test]
async fn a_command_cannot_plant_control_characters() {
    let cfg = ProviderConfig {
        max_retries: 0,
        ..ProviderConfig::default()
    };
    // JSON mode: model, finish reason and reasoning are the command's.
    let answer = json!({
        "text": "```c\nk\n```", "model": EVIL, "finish_reason": EVIL,
        "reasoning": EVIL, "usage": {"input_tokens": 1, "output_tokens": 1},
    });
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), answer.to_string()).unwrap();
    let p = build_with_env(
        &format!("cmd+json:cat >/dev/null; cat {}", script.path().display()),
        &cfg,
        &Accounting::new(),
        &|_| None,
    )
    .unwrap();
    assert_completion(&p.complete(&req()).await.unwrap());
    // A failing command's stderr is part of the error.
    let p = build_with_env(
        "cmd:printf 'bad\\033]0;pwned\\007\\033[2J\\n' >&2; exit 3",
        &cfg,
        &Accounting::new(),
        &|_| None,
    )
    .unwrap();
    let shown = p.complete(&req()).await.unwrap_err().to_string();
    assert_text("error", &shown);
    assert!(shown.contains("bad\u{fffd}]0;pwned"), "{shown}");
}

#[tokio::test]
async fn a_replayed_recording_cannot_plant_control_characters() {
    // A recording written by an older kevo, or by hand.
    let c = Completion {
        text: "```c\nk\n```".into(),
        reasoning: Some(EVIL.into()),
        usage: Usage::default(),
        cost_usd: None,
        latency: std::time::Duration::ZERO,
        model: EVIL.into(),
        provider: EVIL.into(),
        finish_reason: Some(EVIL.into()),
        attempts: 1,
        usage_unknown: Some(EVIL.into()),
        member: None,
        tool_calls: Vec::new(),
        native: None,
    };
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        serde_json::to_string(&Exchange::new(&req(), &c)).unwrap(),
    )
    .unwrap();
    let p = build_with_env(
        &format!("replay:{}", file.path().display()),
        &ProviderConfig::default(),
        &Accounting::new(),
        &|_| None,
    )
    .unwrap();
    assert_completion(&p.complete(&req()).await.unwrap());
}

#[tokio::test]
async fn a_batch_endpoint_cannot_plant_control_characters() {
    let output = [
        json!({"custom_id": "kevo-1", "response": {"status_code": 200, "body": hostile_openai("one")}}),
        json!({"custom_id": "kevo-2", "response": {"status_code": 400, "body": {"error": {"message": EVIL}}}}),
    ]
    .iter()
    .map(|v| v.to_string())
    .collect::<Vec<_>>()
    .join("\n");
    let fake = Fake::start(vec![
        Reply::json(json!({"id": "file-in"})),
        Reply::json(json!({"id": format!("batch_7{EVIL}"), "status": "validating"})),
        Reply::json(json!({"id": "batch_7", "status": format!("in_progress{EVIL}")})),
        Reply::json(json!({"id": "batch_7", "status": "completed", "output_file_id": "file-out"})),
        Reply::status(200, &output),
    ])
    .await;
    let batch = BatchProvider::new(
        "openai",
        Some(&format!("{}/v1", fake.url())),
        "gpt-5",
        &fast_config(),
        &Accounting::new(),
        &env,
    )
    .unwrap();
    let requests = vec![("kevo-1".to_string(), req()), ("kevo-2".to_string(), req())];
    let id = batch.submit(&requests).await.unwrap();
    assert_line("batch id", &id);
    match batch.poll("batch_7").await.unwrap() {
        BatchState::Running { status, .. } => assert_line("status", &status),
        other => panic!("{other:?}"),
    }
    let BatchState::Ended { mut results, .. } = batch.poll("batch_7").await.unwrap() else {
        panic!("the batch ended")
    };
    assert_completion(&results.remove("kevo-1").unwrap().unwrap());
    let e: ProviderError = results.remove("kevo-2").unwrap().unwrap_err();
    assert_text("error", &e.to_string());
}
