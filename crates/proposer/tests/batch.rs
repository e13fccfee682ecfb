//! The batch endpoints against local fake servers that speak OpenAI's
//! Batch API and Anthropic's Message Batches: what is uploaded, polling,
//! results by custom id (answered, errored, never answered), the batch
//! price, and a key that never reaches an error message.

mod common;

use common::{Fake, Reply, anthropic_ok, fast_config, openai_ok};
use kevo_proposer::{
    Accounting, BATCH_PRICE_FACTOR, BatchProvider, BatchState, ChatRequest, PriceTable, Usage,
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

fn requests() -> Vec<(String, ChatRequest)> {
    (1..=3)
        .map(|i| {
            (
                format!("kevo-{i}"),
                ChatRequest::new("You write kernels.", format!("Prompt {i}.")),
            )
        })
        .collect()
}

fn openai_batch(fake: &Fake, acct: &Accounting) -> BatchProvider {
    BatchProvider::new(
        "openai",
        Some(&format!("{}/v1", fake.url())),
        "gpt-5",
        &fast_config(),
        acct,
        &env,
    )
    .unwrap()
}

fn price(model: &str, usage: Usage) -> f64 {
    PriceTable::builtin().cost(&[model], &usage).unwrap() * BATCH_PRICE_FACTOR
}

#[tokio::test]
async fn openai_batch_uploads_polls_and_prices_at_half() {
    let output = [
        json!({"custom_id": "kevo-1", "response": {"status_code": 200, "body": openai_ok("one")}}),
        json!({"custom_id": "kevo-2", "response": {"status_code": 400, "body": {"error": {"message": "bad"}}}}),
    ]
    .iter()
    .map(|v| v.to_string())
    .collect::<Vec<_>>()
    .join("\n");
    let fake = Fake::start(vec![
        Reply::json(json!({"id": "file-in", "object": "file"})),
        Reply::json(json!({"id": "batch_7", "status": "validating"})),
        Reply::json(json!({"id": "batch_7", "status": "in_progress",
            "request_counts": {"total": 3, "completed": 1, "failed": 0}})),
        Reply::json(
            json!({"id": "batch_7", "status": "expired", "output_file_id": "file-out",
            "request_counts": {"total": 3, "completed": 1, "failed": 1}}),
        ),
        Reply::status(200, &output),
        Reply::json(json!({"id": "batch_7", "status": "cancelling"})),
    ])
    .await;
    let acct = Accounting::new();
    let batch = openai_batch(&fake, &acct);
    assert_eq!(batch.label(), "batch:openai:gpt-5");
    let id = batch.submit(&requests()).await.unwrap();
    assert_eq!(id, "batch_7");
    match batch.poll(&id).await.unwrap() {
        BatchState::Running {
            status,
            done,
            total,
        } => assert_eq!((status.as_str(), done, total), ("in_progress", 1, 3)),
        other => panic!("{other:?}"),
    }
    let BatchState::Ended {
        status,
        mut results,
    } = batch.poll(&id).await.unwrap()
    else {
        panic!("the batch ended")
    };
    assert_eq!(status, "expired");
    let one = results.remove("kevo-1").unwrap().unwrap();
    assert_eq!(one.text, "one");
    let expected = price("gpt-5", one.usage);
    assert!((one.cost_usd.unwrap() - expected).abs() < 1e-12);
    let two = results.remove("kevo-2").unwrap().unwrap_err().to_string();
    assert!(two.contains("400") && two.contains("bad"), "{two}");
    assert!(!results.contains_key("kevo-3"), "never answered: missing");
    batch.cancel(&id).await.unwrap();
    assert!((acct.totals().all.cost_usd - expected).abs() < 1e-12);

    let seen = fake.seen();
    let paths: Vec<(String, String)> = seen
        .iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect();
    assert_eq!(
        paths,
        [
            ("POST", "/v1/files"),
            ("POST", "/v1/batches"),
            ("GET", "/v1/batches/batch_7"),
            ("GET", "/v1/batches/batch_7"),
            ("GET", "/v1/files/file-out/content"),
            ("POST", "/v1/batches/batch_7/cancel"),
        ]
        .map(|(m, p)| (m.to_string(), p.to_string()))
    );
    assert_eq!(
        seen[0].headers["authorization"],
        format!("Bearer {OPENAI_KEY}")
    );
    assert!(seen[0].headers["content-type"].starts_with("multipart/form-data; boundary="));
    // The upload: purpose batch, one JSONL line per request.
    let upload = &seen[0].raw;
    assert!(
        upload.contains("name=\"purpose\"\r\n\r\nbatch\r\n"),
        "{upload}"
    );
    let lines: Vec<serde_json::Value> = upload
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1]["custom_id"], "kevo-2");
    assert_eq!(lines[1]["url"], "/v1/chat/completions");
    assert_eq!(lines[1]["body"]["messages"][1]["content"], "Prompt 2.");
    assert_eq!(
        seen[1].body,
        json!({"input_file_id": "file-in", "endpoint": "/v1/chat/completions", "completion_window": "24h"})
    );
}

#[tokio::test]
async fn anthropic_message_batch_by_custom_id() {
    let results = [
        json!({"custom_id": "kevo-2", "result": {"type": "succeeded", "message": anthropic_ok("two")}}),
        json!({"custom_id": "kevo-1", "result": {"type": "errored",
            "error": {"type": "error", "error": {"type": "overloaded_error", "message": format!("key {ANTHROPIC_KEY} overloaded")}}}}),
        json!({"custom_id": "kevo-3", "result": {"type": "expired"}}),
    ]
    .iter()
    .map(|v| v.to_string())
    .collect::<Vec<_>>()
    .join("\n");
    // The results live at the URL the batch names: a second server.
    let fake = Fake::start(vec![Reply::status(200, &results)]).await;
    let fake2 = Fake::start(vec![
        Reply::json(json!({"id": "msgbatch_1", "processing_status": "in_progress"})),
        Reply::json(json!({"id": "msgbatch_1", "processing_status": "in_progress",
            "request_counts": {"processing": 2, "succeeded": 1, "errored": 0, "canceled": 0, "expired": 0}})),
        Reply::json(json!({"id": "msgbatch_1", "processing_status": "ended",
            "results_url": format!("{}/results/msgbatch_1", fake.url())})),
    ])
    .await;
    let acct = Accounting::new();
    let batch = BatchProvider::new(
        "anthropic",
        Some(&fake2.url()),
        "claude-opus-4-1",
        &fast_config(),
        &acct,
        &env,
    )
    .unwrap();
    let id = batch.submit(&requests()).await.unwrap();
    assert_eq!(id, "msgbatch_1");
    assert!(matches!(
        batch.poll(&id).await.unwrap(),
        BatchState::Running {
            done: 1,
            total: 3,
            ..
        }
    ));
    let BatchState::Ended { mut results, .. } = batch.poll(&id).await.unwrap() else {
        panic!("the batch ended")
    };
    let two = results.remove("kevo-2").unwrap().unwrap();
    assert_eq!(two.text, "two");
    let expected = price("claude-opus-4-1", two.usage);
    assert!((two.cost_usd.unwrap() - expected).abs() < 1e-12);
    let one = results.remove("kevo-1").unwrap().unwrap_err().to_string();
    assert!(one.contains("overloaded"), "{one}");
    assert!(!one.contains(ANTHROPIC_KEY), "the key is scrubbed: {one}");
    let three = results.remove("kevo-3").unwrap().unwrap_err().to_string();
    assert!(three.contains("expired"), "{three}");

    let seen = fake2.seen();
    assert_eq!(seen[0].path, "/v1/messages/batches");
    assert_eq!(seen[0].headers["x-api-key"], ANTHROPIC_KEY);
    assert_eq!(seen[0].body["requests"][2]["custom_id"], "kevo-3");
    assert_eq!(
        seen[0].body["requests"][2]["params"]["messages"][0]["content"],
        "Prompt 3."
    );
    assert_eq!(seen[1].path, "/v1/messages/batches/msgbatch_1");
    assert_eq!(fake.seen()[0].path, "/results/msgbatch_1");
}

#[tokio::test]
async fn a_batch_that_failed_validation_says_why() {
    let fake = Fake::start(vec![Reply::json(
        json!({"id": "batch_9", "status": "failed",
        "errors": {"data": [{"code": "invalid_model", "message": "no such model"}]}}),
    )])
    .await;
    let batch = openai_batch(&fake, &Accounting::new());
    let BatchState::Ended { status, results } = batch.poll("batch_9").await.unwrap() else {
        panic!("a failed batch has ended")
    };
    assert!(
        status.starts_with("failed: ") && status.contains("no such model"),
        "{status}"
    );
    assert!(results.is_empty());
}

#[tokio::test]
async fn a_batch_whose_worst_case_exceeds_the_cost_cap_is_not_sent() {
    let fake = Fake::start(vec![Reply::json(json!({"id": "never"}))]).await;
    // Three requests of up to 32768 output tokens at $5 per million
    // (half of gpt-5's $10) are $0.49 at worst: over a $0.30 cap; one
    // ($0.16) fits.
    let acct = Accounting::with_budget(0.30);
    let batch = openai_batch(&fake, &acct);
    let err = batch.submit(&requests()).await.unwrap_err();
    assert!(err.is_budget_stop(), "{err}");
    assert_eq!(fake.requests(), 0);
    assert_eq!(batch.submit(&requests()[..1]).await.unwrap(), "never");
}
