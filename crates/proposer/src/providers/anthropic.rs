//! The Anthropic Messages API (`POST {base}/v1/messages`), with extended
//! thinking when a budget is configured.

use std::time::Instant;

use serde_json::{Value, json};

use super::http::{Http, count, usage_problem};
use super::{BoxFuture, Provider};
use crate::config::ResolvedEndpoint;
use crate::error::ProviderError;
use crate::types::{ChatRequest, Completion, ToolCall, Usage};

pub struct AnthropicProvider {
    http: Http,
    name: String,
    url: String,
    model: String,
    version: String,
    temperature: Option<f32>,
    max_tokens: u32,
    thinking_budget: Option<u32>,
}

impl AnthropicProvider {
    pub fn new(ep: ResolvedEndpoint, model: &str) -> Result<Self, ProviderError> {
        let http = Http::new(
            &ep.name,
            ep.api_key,
            ep.timeout,
            ep.connect_timeout,
            ep.max_response_bytes,
        )?;
        Ok(AnthropicProvider {
            http,
            url: format!("{}/v1/messages", ep.base_url),
            name: ep.name,
            model: model.to_string(),
            version: ep.anthropic_version,
            temperature: ep.temperature,
            max_tokens: ep.max_tokens,
            thinking_budget: ep.thinking_budget,
        })
    }

    pub(crate) fn body(&self, req: &ChatRequest) -> Value {
        let mut max_tokens = req.max_tokens.unwrap_or(self.max_tokens);
        let mut messages = vec![json!({"role": "user", "content": req.user})];
        for turn in &req.turns {
            messages.push(json!({"role": "assistant", "content": turn.native}));
            let results: Vec<Value> = turn
                .results
                .iter()
                .map(|r| {
                    json!({"type": "tool_result", "tool_use_id": r.call_id,
                           "content": r.content, "is_error": r.is_error})
                })
                .collect();
            messages.push(json!({"role": "user", "content": results}));
        }
        let mut body = json!({
            "model": self.model,
            "messages": messages,
        });
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
        }
        if !req.system.is_empty() {
            body["system"] = json!(req.system);
        }
        match self.thinking_budget {
            Some(budget) => {
                // The API requires max_tokens > budget_tokens; a limit at or
                // below the budget is taken as the answer's share on top.
                if max_tokens <= budget {
                    max_tokens += budget;
                }
                body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
                // Temperature must stay at its default with thinking on.
            }
            None => {
                if let Some(t) = req.temperature.or(self.temperature) {
                    body["temperature"] = json!(t);
                }
            }
        }
        body["max_tokens"] = json!(max_tokens);
        body
    }

    pub(crate) fn parse(&self, v: &Value) -> Result<Completion, ProviderError> {
        if v.get("type").and_then(Value::as_str) == Some("error") {
            let msg = v
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("unknown error");
            return Err(self.http.invalid(format!("error in response: {msg}"), v));
        }
        let blocks = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| self.http.invalid("no `content` array in the response", v))?;
        let mut text = String::new();
        let mut thinking = Vec::new();
        let mut tool_calls = Vec::new();
        for b in blocks {
            match b.get("type").and_then(Value::as_str) {
                Some("text") => text.push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
                Some("thinking") => {
                    if let Some(t) = b.get("thinking").and_then(Value::as_str) {
                        thinking.push(t.to_string());
                    }
                }
                Some("redacted_thinking") => thinking.push("[redacted thinking]".to_string()),
                Some("tool_use") => tool_calls.push(ToolCall {
                    id: b
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    name: b
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    arguments: b.get("input").map(Value::to_string).unwrap_or_default(),
                }),
                _ => {}
            }
        }
        let mut blocks = blocks.clone();
        if crate::types::renumber_ambiguous_ids(&mut tool_calls) {
            let uses = blocks
                .iter_mut()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"));
            for (b, call) in uses.zip(&tool_calls) {
                b["id"] = Value::String(call.id.clone());
            }
        }
        let u = v.get("usage").cloned().unwrap_or(Value::Null);
        let cache_read = count(&u, &["cache_read_input_tokens"]);
        // Anthropic counts cache reads and writes apart from input_tokens;
        // kevo's input_tokens is the whole prompt.
        let input = count(&u, &["input_tokens"]).unwrap_or(0)
            + cache_read.unwrap_or(0)
            + count(&u, &["cache_creation_input_tokens"]).unwrap_or(0);
        Ok(Completion {
            text: self.http.scrub(&text),
            reasoning: (!thinking.is_empty()).then(|| self.http.scrub(&thinking.join("\n\n"))),
            usage: Usage {
                input_tokens: input,
                output_tokens: count(&u, &["output_tokens"]).unwrap_or(0),
                reasoning_tokens: None,
                cached_tokens: cache_read,
            },
            cost_usd: None,
            latency: Default::default(),
            model: v
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or(&self.model)
                .to_string(),
            provider: self.name.clone(),
            finish_reason: v
                .get("stop_reason")
                .and_then(Value::as_str)
                .map(str::to_string),
            attempts: 1,
            usage_unknown: usage_problem(&u, &["input_tokens"], &["output_tokens"]),
            member: None,
            // The whole content goes back as the assistant turn: thinking
            // blocks must return unchanged, signatures included.
            native: (!tool_calls.is_empty()).then_some(Value::Array(blocks)),
            tool_calls,
        })
    }

    async fn attempt(&self, req: &ChatRequest) -> Result<Completion, ProviderError> {
        let mut headers = vec![("anthropic-version", self.version.clone())];
        if let Some(k) = self.http.secret() {
            headers.push(("x-api-key", k.to_string()));
        }
        let t0 = Instant::now();
        let v = self
            .http
            .post_json(&self.url, &headers, &self.body(req))
            .await?;
        let mut c = self.parse(&v)?;
        c.latency = t0.elapsed();
        Ok(c)
    }
}

impl Provider for AnthropicProvider {
    fn label(&self) -> String {
        format!("{}:{}", self.name, self.model)
    }

    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(self.attempt(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProviderConfig;

    fn provider(cfg: &str) -> AnthropicProvider {
        let c = ProviderConfig::from_toml(cfg).unwrap();
        let ep = c
            .resolve("anthropic", Some("http://127.0.0.1:9"), &|_| {
                Some("k".into())
            })
            .unwrap();
        AnthropicProvider::new(ep, "claude-opus-4-1").unwrap()
    }

    #[test]
    fn thinking_budget_shapes_the_request() {
        let b = provider("max_tokens = 2000\nthinking_budget = 4096\ntemperature = 0.5")
            .body(&ChatRequest::new("sys", "usr"));
        assert_eq!(b["system"], "sys");
        assert_eq!(b["thinking"]["type"], "enabled");
        assert_eq!(b["thinking"]["budget_tokens"], 4096);
        assert_eq!(b["max_tokens"], 6096);
        assert!(b.get("temperature").is_none());
        assert_eq!(b["messages"][0]["role"], "user");

        let b = provider("max_tokens = 2000\ntemperature = 0.5").body(&ChatRequest::new("", "u"));
        assert!(b.get("thinking").is_none() && b.get("system").is_none());
        assert_eq!(b["max_tokens"], 2000);
        assert_eq!(b["temperature"], 0.5);
    }

    #[test]
    fn parses_thinking_text_and_usage() {
        let c = provider("")
            .parse(&json!({
                "type": "message", "model": "claude-opus-4-1-20250805",
                "content": [
                    {"type": "thinking", "thinking": "step 1", "signature": "x"},
                    {"type": "text", "text": "answer"}
                ],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 20, "cache_read_input_tokens": 5}
            }))
            .unwrap();
        assert_eq!(c.text, "answer");
        assert_eq!(c.reasoning.as_deref(), Some("step 1"));
        assert_eq!(c.usage.input_tokens, 15);
        assert_eq!(c.usage.cached_tokens, Some(5));
        assert_eq!(c.finish_reason.as_deref(), Some("end_turn"));
        assert!(provider("").parse(&json!({"id": "x"})).is_err());
    }
}
