//! OpenAI-compatible chat completions (`POST {base}/chat/completions`):
//! OpenAI itself, vLLM, SGLang, llama.cpp's server, Ollama, DeepSeek,
//! OpenRouter and the other known hosts.

use std::time::Instant;

use serde_json::{Value, json};

use super::http::{Http, count, embedded_error, usage_problem};
use super::{BoxFuture, Provider};
use crate::config::ResolvedEndpoint;
use crate::error::ProviderError;
use crate::types::{ChatRequest, Completion, ToolCall, Usage};

pub struct OpenAiProvider {
    http: Http,
    name: String,
    url: String,
    model: String,
    temperature: Option<f32>,
    max_tokens: u32,
    reasoning_effort: Option<String>,
    reasoning_model: bool,
}

/// Models that take `max_completion_tokens` and `reasoning_effort` and
/// reject `temperature`: the o-series and gpt-5 (except the non-reasoning
/// `gpt-5-chat`). A `vendor/` prefix (OpenRouter) is ignored.
pub fn is_reasoning_model(model: &str) -> bool {
    let m = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let o_series = ["o1", "o3", "o4"].iter().any(|p| {
        m.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    });
    o_series || (m.starts_with("gpt-5") && !m.starts_with("gpt-5-chat"))
}

impl OpenAiProvider {
    pub fn new(ep: ResolvedEndpoint, model: &str) -> Result<Self, ProviderError> {
        let http = Http::new(
            &ep.name,
            ep.api_key,
            ep.timeout,
            ep.connect_timeout,
            ep.max_response_bytes,
        )?;
        Ok(OpenAiProvider {
            http,
            url: format!("{}/chat/completions", ep.base_url),
            name: ep.name,
            model: model.to_string(),
            temperature: ep.temperature,
            max_tokens: ep.max_tokens,
            reasoning_effort: ep.reasoning_effort,
            reasoning_model: ep
                .reasoning_model
                .unwrap_or_else(|| is_reasoning_model(model)),
        })
    }

    /// The request body; public to the crate so tests can pin its shape.
    pub(crate) fn body(&self, req: &ChatRequest) -> Value {
        let mut messages = Vec::new();
        if !req.system.is_empty() {
            messages.push(json!({"role": "system", "content": req.system}));
        }
        messages.push(json!({"role": "user", "content": req.user}));
        for turn in &req.turns {
            messages.push(turn.native.clone());
            messages.extend(
                turn.results.iter().map(
                    |r| json!({"role": "tool", "tool_call_id": r.call_id, "content": r.content}),
                ),
            );
        }
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "stream": false,
        });
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    }})
                })
                .collect();
        }
        let max_tokens = req.max_tokens.unwrap_or(self.max_tokens);
        if self.reasoning_model {
            body["max_completion_tokens"] = json!(max_tokens);
        } else {
            body["max_tokens"] = json!(max_tokens);
            if let Some(t) = req.temperature.or(self.temperature) {
                body["temperature"] = json!(t);
            }
        }
        if let Some(e) = &self.reasoning_effort {
            body["reasoning_effort"] = json!(e);
        }
        body
    }

    pub(crate) fn parse(&self, v: &Value) -> Result<Completion, ProviderError> {
        let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else {
            return Err(embedded_error(&self.http, v)
                .unwrap_or_else(|| self.http.invalid("no `choices` in the response", v)));
        };
        let message = choice
            .get("message")
            .ok_or_else(|| self.http.invalid("no `message` in the first choice", v))?;
        let mut text = match message.get("content") {
            Some(Value::String(s)) => s.clone(),
            // Some servers return content parts.
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            Some(Value::Null) | None => String::new(),
            Some(other) => return Err(self.http.invalid(format!("unexpected content {other}"), v)),
        };
        let mut reasoning = ["reasoning_content", "reasoning"]
            .iter()
            .find_map(|k| message.get(k).and_then(Value::as_str))
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        // Servers that do not split reasoning out leave it inline.
        if reasoning.is_none()
            && let Some((r, rest)) = split_inline_think(&text)
        {
            reasoning = Some(r);
            text = rest;
        }
        let mut tool_calls = tool_calls(message);
        let renumbered = crate::types::renumber_ambiguous_ids(&mut tool_calls);
        // Sent back as the assistant turn: the text and the calls only (a
        // server may refuse its own reasoning fields in a request).
        let native = (!tool_calls.is_empty()).then(|| {
            let mut calls = message.get("tool_calls").cloned().unwrap_or(Value::Null);
            if renumbered && let Some(list) = calls.as_array_mut() {
                for (c, call) in list.iter_mut().zip(&tool_calls) {
                    c["id"] = Value::String(call.id.clone());
                }
            }
            json!({"role": "assistant", "content": message.get("content").cloned().unwrap_or(Value::Null),
                   "tool_calls": calls})
        });
        let usage = v.get("usage").cloned().unwrap_or(Value::Null);
        let usage_unknown = usage_problem(&usage, &["prompt_tokens"], &["completion_tokens"]);
        let output = count(&usage, &["completion_tokens"]).unwrap_or(0);
        let usage = Usage {
            input_tokens: count(&usage, &["prompt_tokens"]).unwrap_or(0),
            output_tokens: output,
            reasoning_tokens: count(&usage, &["completion_tokens_details", "reasoning_tokens"]),
            cached_tokens: count(&usage, &["prompt_tokens_details", "cached_tokens"])
                .or_else(|| count(&usage, &["prompt_cache_hit_tokens"])),
        };
        Ok(Completion {
            text: self.http.scrub(&text),
            reasoning: reasoning.map(|r| self.http.scrub(&r)),
            usage,
            cost_usd: None,
            latency: Default::default(),
            model: v
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or(&self.model)
                .to_string(),
            provider: self.name.clone(),
            finish_reason: choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(str::to_string),
            attempts: 1,
            usage_unknown,
            member: None,
            tool_calls,
            native,
        })
    }

    async fn attempt(&self, req: &ChatRequest) -> Result<Completion, ProviderError> {
        let mut headers = Vec::new();
        if let Some(k) = self.http.secret() {
            headers.push(("authorization", format!("Bearer {k}")));
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

/// The message's `tool_calls` (`{id, function: {name, arguments}}`), the
/// arguments kept as the JSON text they came as (an object from servers
/// that send one is written out).
fn tool_calls(message: &Value) -> Vec<ToolCall> {
    let Some(calls) = message.get("tool_calls").and_then(Value::as_array) else {
        return Vec::new();
    };
    calls
        .iter()
        .map(|c| {
            let text = |v: Option<&Value>| match v {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            ToolCall {
                id: text(c.get("id")),
                name: text(c.pointer("/function/name")),
                arguments: text(c.pointer("/function/arguments")),
            }
        })
        .collect()
}

/// `<think>…</think>rest` -> (reasoning, rest).
fn split_inline_think(text: &str) -> Option<(String, String)> {
    let t = text.trim_start().strip_prefix("<think>")?;
    let (r, rest) = t.split_once("</think>")?;
    Some((r.trim().to_string(), rest.trim_start().to_string()))
}

impl Provider for OpenAiProvider {
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

    fn provider(model: &str, cfg: &str) -> OpenAiProvider {
        let c = ProviderConfig::from_toml(cfg).unwrap();
        let ep = c
            .resolve("vllm", Some("http://127.0.0.1:9/v1"), &|_| None)
            .unwrap();
        OpenAiProvider::new(ep, model).unwrap()
    }

    #[test]
    fn reasoning_models_are_recognised() {
        for m in [
            "o1",
            "o3-mini",
            "o4-mini-2025-04-16",
            "gpt-5",
            "gpt-5-mini",
            "openai/gpt-5",
        ] {
            assert!(is_reasoning_model(m), "{m}");
        }
        for m in [
            "gpt-4o",
            "gpt-5-chat-latest",
            "o30",
            "qwen2.5-coder",
            "deepseek-reasoner",
        ] {
            assert!(!is_reasoning_model(m), "{m}");
        }
    }

    #[test]
    fn request_shape_depends_on_the_model() {
        let cfg = "temperature = 0.3\nmax_tokens = 1000\nreasoning_effort = \"high\"";
        let mut req = ChatRequest::new("sys", "usr");
        let b = provider("gpt-5", cfg).body(&req);
        assert_eq!(b["max_completion_tokens"], 1000);
        assert_eq!(b["reasoning_effort"], "high");
        assert!(b.get("max_tokens").is_none() && b.get("temperature").is_none());
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["messages"][1]["content"], "usr");

        req.max_tokens = Some(7);
        let b = provider("qwen2.5-coder", cfg).body(&req);
        assert_eq!(b["max_tokens"], 7);
        assert!((b["temperature"].as_f64().unwrap() - 0.3).abs() < 1e-6);
        assert!(b.get("max_completion_tokens").is_none());

        let b = provider("m", "").body(&ChatRequest::new("", "u"));
        assert_eq!(b["messages"].as_array().unwrap().len(), 1);
        assert!(b.get("reasoning_effort").is_none());
    }

    #[test]
    fn parses_reasoning_usage_and_inline_think() {
        let p = provider("m", "");
        let c = p
            .parse(&json!({
                "model": "m-served",
                "choices": [{"message": {"content": "ok", "reasoning_content": "because"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 7,
                          "completion_tokens_details": {"reasoning_tokens": 5},
                          "prompt_tokens_details": {"cached_tokens": 4}}
            }))
            .unwrap();
        assert_eq!(c.text, "ok");
        assert_eq!(c.reasoning.as_deref(), Some("because"));
        assert_eq!(c.model, "m-served");
        assert_eq!(c.usage.reasoning_tokens, Some(5));
        assert_eq!(c.usage.cached_tokens, Some(4));

        let c = p
            .parse(&json!({"choices": [{"message": {"content": "<think>hmm</think>\nanswer"}}]}))
            .unwrap();
        assert_eq!(c.reasoning.as_deref(), Some("hmm"));
        assert_eq!(c.text, "answer");
        assert_eq!(c.model, "m");

        let e = p
            .parse(&json!({"error": {"message": "busy", "code": 503}}))
            .unwrap_err();
        assert!(e.is_retryable(), "{e}");
        let e = p.parse(&json!({"object": "list"})).unwrap_err();
        assert!(matches!(e, ProviderError::InvalidResponse { .. }), "{e}");
    }
}
