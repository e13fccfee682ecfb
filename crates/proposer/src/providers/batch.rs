//! Batch endpoints: OpenAI's Batch API (a JSONL file uploaded to `/files`,
//! then `/batches`) and Anthropic's Message Batches (`/v1/messages/batches`).
//! Both bill half the price of a live call and answer within 24 hours, so a
//! run submits a batch, stores its id, and polls; a restarted kevo picks
//! the stored batch up instead of sending it again.
//!
//! Requests carry the caller's custom ids; results come back by id. A
//! request the batch never answered (it expired, was cancelled or failed
//! validation) comes back as an error naming the batch's status.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::anthropic::AnthropicProvider;
use super::http::Http;
use super::openai::OpenAiProvider;
use crate::accounting::Accounting;
use crate::config::{ApiKind, ProviderConfig};
use crate::error::ProviderError;
use crate::pricing::PriceTable;
use crate::sanitize;
use crate::types::{ChatRequest, Completion};

/// What a batch costs against live calls of the same model: both OpenAI's
/// and Anthropic's batch prices are half the list price.
pub const BATCH_PRICE_FACTOR: f64 = 0.5;

/// Results of a batch are downloaded whole: allow this many responses'
/// worth of the endpoint's per-response limit.
const RESULT_BYTES_FACTOR: u64 = 256;

/// Where a batch stands.
#[derive(Debug)]
pub enum BatchState {
    /// Still running: the provider's status, requests done and in all.
    Running {
        status: String,
        done: u64,
        total: u64,
    },
    /// Ended (completed, expired, cancelled or failed): each request's
    /// result by custom id; a request the batch did not answer is missing.
    Ended {
        status: String,
        results: HashMap<String, Result<Completion, ProviderError>>,
    },
}

enum Api {
    OpenAi(OpenAiProvider),
    Anthropic(AnthropicProvider),
}

/// One model behind a batch endpoint.
pub struct BatchProvider {
    api: Api,
    http: Http,
    /// `{base}` of the endpoint (OpenAI: up to and including `/v1`).
    base_url: String,
    name: String,
    model: String,
    anthropic_version: String,
    prices: PriceTable,
    accounting: Accounting,
    /// The endpoint's output-token limit, for a request's worst case.
    max_tokens: u32,
}

impl BatchProvider {
    /// The batch endpoint of `provider` (`openai`, `anthropic` or a
    /// configured endpoint of either kind) for `model`.
    pub fn new(
        provider: &str,
        base_url: Option<&str>,
        model: &str,
        config: &ProviderConfig,
        accounting: &Accounting,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ProviderError> {
        config.validate()?;
        if let Some(b) = config.budget_usd {
            accounting.set_budget(b);
        }
        let ep = config.resolve(provider, base_url, env)?;
        let http = Http::new(
            &ep.name,
            ep.api_key.clone(),
            ep.timeout,
            ep.connect_timeout,
            ep.max_response_bytes.saturating_mul(RESULT_BYTES_FACTOR),
        )?;
        let max_tokens = ep.max_tokens;
        let (name, base, version) = (
            ep.name.clone(),
            ep.base_url.clone(),
            ep.anthropic_version.clone(),
        );
        let api = match ep.kind {
            ApiKind::Openai => Api::OpenAi(OpenAiProvider::new(ep, model)?),
            ApiKind::Anthropic => Api::Anthropic(AnthropicProvider::new(ep, model)?),
        };
        Ok(BatchProvider {
            api,
            http,
            base_url: base,
            name,
            model: model.to_string(),
            anthropic_version: version,
            prices: config.price_table(),
            accounting: accounting.clone(),
            max_tokens,
        })
    }

    /// `batch:openai:gpt-5`.
    pub fn label(&self) -> String {
        format!("batch:{}:{}", self.name, self.model)
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = Vec::new();
        match &self.api {
            Api::OpenAi(_) => {
                if let Some(k) = self.http.secret() {
                    headers.push(("authorization", format!("Bearer {k}")));
                }
            }
            Api::Anthropic(_) => {
                headers.push(("anthropic-version", self.anthropic_version.clone()));
                if let Some(k) = self.http.secret() {
                    headers.push(("x-api-key", k.to_string()));
                }
            }
        }
        headers
    }

    fn invalid(&self, message: String, v: &Value) -> ProviderError {
        self.http.invalid(message, v)
    }

    fn field<'v>(&self, v: &'v Value, key: &str) -> Result<&'v str, ProviderError> {
        v.get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| self.invalid(format!("no `{key}` in the batch response"), v))
    }

    /// Send `requests` (custom id, request) as one batch; the provider's
    /// id of the batch. Refused when the cost cap cannot cover them. The
    /// id and any error are cleaned of control characters
    /// ([`crate::sanitize`]): both are stored and printed.
    pub async fn submit(
        &self,
        requests: &[(String, ChatRequest)],
    ) -> Result<String, ProviderError> {
        self.send(requests)
            .await
            .map(|id| sanitize::line(&id))
            .map_err(sanitize::error)
    }

    async fn send(&self, requests: &[(String, ChatRequest)]) -> Result<String, ProviderError> {
        // The whole batch's worst case (every request at its output limit,
        // at the batch price) must fit under the cost cap before it is
        // sent; one batch is out at a time, and its cost is counted when
        // it ends.
        drop(
            self.accounting
                .reserve(&self.label(), self.worst_case_cost(requests))?,
        );
        let headers = self.headers();
        match &self.api {
            Api::OpenAi(p) => {
                let mut jsonl = String::new();
                for (id, req) in requests {
                    let line = json!({
                        "custom_id": id,
                        "method": "POST",
                        "url": "/v1/chat/completions",
                        "body": p.body(req),
                    });
                    jsonl.push_str(&line.to_string());
                    jsonl.push('\n');
                }
                // A boundary no JSON line can hold: JSON escapes control
                // characters, and the boundary lines start with CR LF.
                let boundary = format!(
                    "kevo-batch-{:x}",
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_nanos()
                );
                let mut form = Vec::new();
                form.extend_from_slice(
                    format!(
                        "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
                         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"kevo-batch.jsonl\"\r\n\
                         Content-Type: application/jsonl\r\n\r\n"
                    )
                    .as_bytes(),
                );
                form.extend_from_slice(jsonl.as_bytes());
                form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
                let file = self
                    .http
                    .post_bytes(
                        &format!("{}/files", self.base_url),
                        &headers,
                        &format!("multipart/form-data; boundary={boundary}"),
                        form,
                    )
                    .await?;
                let file_id = self.field(&file, "id")?;
                let batch = self
                    .http
                    .post_json(
                        &format!("{}/batches", self.base_url),
                        &headers,
                        &json!({
                            "input_file_id": file_id,
                            "endpoint": "/v1/chat/completions",
                            "completion_window": "24h",
                        }),
                    )
                    .await?;
                Ok(self.field(&batch, "id")?.to_string())
            }
            Api::Anthropic(p) => {
                let body = json!({
                    "requests": requests
                        .iter()
                        .map(|(id, req)| json!({"custom_id": id, "params": p.body(req)}))
                        .collect::<Vec<_>>(),
                });
                let batch = self
                    .http
                    .post_json(
                        &format!("{}/v1/messages/batches", self.base_url),
                        &headers,
                        &body,
                    )
                    .await?;
                Ok(self.field(&batch, "id")?.to_string())
            }
        }
    }

    /// Where batch `batch` stands; once it ended, its results, each
    /// priced at the batch price and counted in the accounting. Statuses,
    /// results and errors are cleaned of control characters
    /// ([`crate::sanitize`]), as a live call's are.
    pub async fn poll(&self, batch: &str) -> Result<BatchState, ProviderError> {
        self.fetch(batch)
            .await
            .map(cleaned)
            .map_err(sanitize::error)
    }

    async fn fetch(&self, batch: &str) -> Result<BatchState, ProviderError> {
        let state = match &self.api {
            Api::OpenAi(p) => self.fetch_openai(p, batch).await?,
            Api::Anthropic(p) => self.fetch_anthropic(p, batch).await?,
        };
        // A running batch is returned as it stands; an ended one is
        // priced, cleaned and counted.
        if matches!(state, BatchState::Running { .. }) {
            return Ok(state);
        }
        let state = cleaned(self.priced(state));
        if let BatchState::Ended { results, .. } = &state {
            for r in results.values() {
                match r {
                    Ok(c) => self.accounting.record_success(&self.label(), c),
                    Err(_) => self.accounting.record_failure(&self.label(), 1),
                }
            }
        }
        Ok(state)
    }

    /// OpenAI's batch `batch`: its status and counts, or once it ended the
    /// rows of its output and error files.
    async fn fetch_openai(
        &self,
        p: &OpenAiProvider,
        batch: &str,
    ) -> Result<BatchState, ProviderError> {
        let headers = self.headers();
        let v = self
            .http
            .get_json(&format!("{}/batches/{batch}", self.base_url), &headers)
            .await?;
        let status = self.field(&v, "status")?.to_string();
        let count = |k: &str| request_count(&v, k);
        if !matches!(
            status.as_str(),
            "completed" | "expired" | "cancelled" | "failed"
        ) {
            return Ok(BatchState::Running {
                done: count("completed") + count("failed"),
                total: count("total"),
                status,
            });
        }
        let mut results = HashMap::new();
        for key in ["output_file_id", "error_file_id"] {
            let Some(file) = v.get(key).and_then(Value::as_str) else {
                continue;
            };
            let text = self
                .http
                .get_text(&format!("{}/files/{file}/content", self.base_url), &headers)
                .await?;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let (id, row) = self.result_row(line)?;
                results.insert(id, self.openai_result(p, &row));
            }
        }
        // A batch that failed validation answers nothing: its
        // errors go into the status every unanswered request names.
        let status = match v.get("errors").filter(|e| !e.is_null()) {
            Some(errors) if status == "failed" => self.http.scrub(&format!("failed: {errors}")),
            _ => status,
        };
        Ok(BatchState::Ended { status, results })
    }

    /// One row of an OpenAI result file: the completion of an HTTP 200
    /// response, else the request's error.
    fn openai_result(&self, p: &OpenAiProvider, row: &Value) -> Result<Completion, ProviderError> {
        match (row.pointer("/response/status_code"), row.get("error")) {
            (Some(code), _) if code.as_u64() == Some(200) => row
                .pointer("/response/body")
                .map(|body| p.parse(body))
                .unwrap_or_else(|| Err(self.invalid("a result without a body".into(), row))),
            (_, Some(e)) if !e.is_null() => Err(self.failed(e.to_string())),
            (code, _) => Err(self.failed(format!(
                "HTTP {} {}",
                code.map(Value::to_string).unwrap_or_default(),
                row.pointer("/response/body")
                    .map(Value::to_string)
                    .unwrap_or_default()
            ))),
        }
    }

    /// Anthropic's batch `batch`: its status and counts, or once it ended
    /// the rows at its results URL.
    async fn fetch_anthropic(
        &self,
        p: &AnthropicProvider,
        batch: &str,
    ) -> Result<BatchState, ProviderError> {
        let headers = self.headers();
        let v = self
            .http
            .get_json(
                &format!("{}/v1/messages/batches/{batch}", self.base_url),
                &headers,
            )
            .await?;
        let status = self.field(&v, "processing_status")?.to_string();
        let count = |k: &str| request_count(&v, k);
        let done = count("succeeded") + count("errored") + count("canceled") + count("expired");
        if status != "ended" {
            return Ok(BatchState::Running {
                total: done + count("processing"),
                done,
                status,
            });
        }
        let url = self.field(&v, "results_url")?.to_string();
        let text = self.http.get_text(&url, &headers).await?;
        let mut results = HashMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (id, row) = self.result_row(line)?;
            results.insert(id, self.anthropic_result(p, &row));
        }
        Ok(BatchState::Ended { status, results })
    }

    /// One row of Anthropic's results: the message of a request that
    /// succeeded, else why it did not.
    fn anthropic_result(
        &self,
        p: &AnthropicProvider,
        row: &Value,
    ) -> Result<Completion, ProviderError> {
        match row.pointer("/result/type").and_then(Value::as_str) {
            Some("succeeded") => row
                .pointer("/result/message")
                .map(|m| p.parse(m))
                .unwrap_or_else(|| Err(self.invalid("a result without a message".into(), row))),
            Some("errored") => Err(self.failed(
                row.pointer("/result/error")
                    .map(Value::to_string)
                    .unwrap_or_default(),
            )),
            Some(other) => Err(self.failed(format!("the request was {other}"))),
            None => Err(self.invalid("a result without a type".into(), row)),
        }
    }

    /// A line of a result file as JSON, with its request's custom id.
    fn result_row(&self, line: &str) -> Result<(String, Value), ProviderError> {
        let row: Value = serde_json::from_str(line)
            .map_err(|e| self.invalid(format!("a result line is not JSON ({e})"), &json!(line)))?;
        let id = self.field(&row, "custom_id")?.to_string();
        Ok((id, row))
    }

    /// Ask the provider to stop batch `batch` (requests already answered
    /// are still billed). A batch that already ended is left alone.
    pub async fn cancel(&self, batch: &str) -> Result<(), ProviderError> {
        let url = match &self.api {
            Api::OpenAi(_) => format!("{}/batches/{batch}/cancel", self.base_url),
            Api::Anthropic(_) => format!("{}/v1/messages/batches/{batch}/cancel", self.base_url),
        };
        self.http
            .post_json(&url, &self.headers(), &json!({}))
            .await
            .map(|_| ())
            .map_err(sanitize::error)
    }

    fn worst_case_cost(&self, requests: &[(String, ChatRequest)]) -> Option<f64> {
        requests.iter().try_fold(0.0, |sum, (_, req)| {
            let usage = crate::types::Usage {
                input_tokens: (req.system.len() + req.user.len()).div_ceil(2) as u64,
                output_tokens: u64::from(req.max_tokens.unwrap_or(self.max_tokens)),
                reasoning_tokens: None,
                cached_tokens: None,
            };
            Some(sum + self.prices.cost(&[&self.model], &usage)? * BATCH_PRICE_FACTOR)
        })
    }

    fn failed(&self, message: String) -> ProviderError {
        ProviderError::Permanent {
            provider: self.name.clone(),
            message: self.http.scrub(&message),
        }
    }

    /// Completions priced at the batch price (unknown usage: unknown cost).
    fn priced(&self, state: BatchState) -> BatchState {
        match state {
            BatchState::Ended { status, results } => BatchState::Ended {
                status,
                results: results
                    .into_iter()
                    .map(|(id, r)| {
                        (
                            id,
                            r.map(|mut c| {
                                c.cost_usd = if c.usage_unknown.is_some() {
                                    None
                                } else {
                                    self.prices
                                        .cost(&[&c.model, &self.model], &c.usage)
                                        .map(|usd| usd * BATCH_PRICE_FACTOR)
                                };
                                c
                            }),
                        )
                    })
                    .collect(),
            },
            running => running,
        }
    }
}

/// A batch's count of requests in state `k` (0 when not given).
fn request_count(v: &Value, k: &str) -> u64 {
    v.pointer(&format!("/request_counts/{k}"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// `state` with its status, every completion and every error cleaned of
/// control characters.
fn cleaned(state: BatchState) -> BatchState {
    match state {
        BatchState::Running {
            status,
            done,
            total,
        } => BatchState::Running {
            status: sanitize::line(&status),
            done,
            total,
        },
        BatchState::Ended { status, results } => BatchState::Ended {
            status: sanitize::text(&status),
            results: results
                .into_iter()
                .map(|(id, r)| (id, r.map(sanitize::completion).map_err(sanitize::error)))
                .collect(),
        },
    }
}
