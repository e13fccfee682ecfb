//! One JSON POST, with every way it can fail mapped onto a classified
//! [`ProviderError`] and the key scrubbed from anything that is reported.

use std::time::Duration;

use serde_json::Value;

use crate::error::{ProviderError, scrub, snippet};
use crate::retry::retry_after_from_headers;
use crate::secret::Secret;

pub(crate) struct Http {
    client: reqwest::Client,
    provider: String,
    secret: Option<Secret>,
    timeout: Duration,
    max_bytes: u64,
}

impl Http {
    pub fn new(
        provider: &str,
        secret: Option<Secret>,
        timeout: Duration,
        connect_timeout: Duration,
        max_bytes: u64,
    ) -> Result<Self, ProviderError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(connect_timeout)
            .user_agent(concat!("kevo/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Config(format!("HTTP client: {e}")))?;
        Ok(Http {
            client,
            provider: provider.to_string(),
            secret,
            timeout,
            max_bytes,
        })
    }

    pub fn secret(&self) -> Option<&str> {
        self.secret.as_ref().map(Secret::expose)
    }

    pub fn scrub(&self, text: &str) -> String {
        scrub(text, self.secret())
    }

    /// POST `body` to `url` with `headers`; the parsed JSON of a 2xx answer.
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
    ) -> Result<Value, ProviderError> {
        let bytes = self.send(self.client.post(url).json(body), headers).await?;
        self.json(&bytes)
    }

    /// POST raw `body` of `content_type` (a multipart form); the parsed
    /// JSON of a 2xx answer.
    pub async fn post_bytes(
        &self,
        url: &str,
        headers: &[(&str, String)],
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<Value, ProviderError> {
        let rb = self
            .client
            .post(url)
            .header("content-type", content_type)
            .body(body);
        let bytes = self.send(rb, headers).await?;
        self.json(&bytes)
    }

    /// GET `url`; the parsed JSON of a 2xx answer.
    pub async fn get_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
    ) -> Result<Value, ProviderError> {
        let bytes = self.send(self.client.get(url), headers).await?;
        self.json(&bytes)
    }

    /// GET `url`; the text of a 2xx answer (a JSONL file).
    pub async fn get_text(
        &self,
        url: &str,
        headers: &[(&str, String)],
    ) -> Result<String, ProviderError> {
        let bytes = self.send(self.client.get(url), headers).await?;
        String::from_utf8(bytes).map_err(|e| ProviderError::InvalidResponse {
            provider: self.provider.clone(),
            message: format!("the answer is not UTF-8 ({e})"),
            body: String::new(),
        })
    }

    fn json(&self, bytes: &[u8]) -> Result<Value, ProviderError> {
        serde_json::from_slice(bytes).map_err(|e| ProviderError::InvalidResponse {
            provider: self.provider.clone(),
            message: format!("malformed JSON ({e})"),
            body: snippet(&self.scrub(&String::from_utf8_lossy(bytes)), 300),
        })
    }

    /// Send `rb` with `headers`; the body of a 2xx answer, capped.
    async fn send(
        &self,
        mut rb: reqwest::RequestBuilder,
        headers: &[(&str, String)],
    ) -> Result<Vec<u8>, ProviderError> {
        for (k, v) in headers {
            rb = rb.header(*k, v);
        }
        let resp = rb.send().await.map_err(|e| self.map_err(e))?;
        let status = resp.status();
        let retry_after = retry_after_from_headers(resp.headers());
        let bytes = self.read_capped(resp).await?;
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            return Err(ProviderError::Http {
                provider: self.provider.clone(),
                status: status.as_u16(),
                body: snippet(&self.scrub(text.trim()), 1000),
                retry_after,
            });
        }
        Ok(bytes)
    }

    /// The body, refused past `max_bytes` (by its declared length before
    /// reading, or while reading when it has none or lies).
    async fn read_capped(&self, mut resp: reqwest::Response) -> Result<Vec<u8>, ProviderError> {
        let too_large = || ProviderError::TooLarge {
            provider: self.provider.clone(),
            limit: self.max_bytes,
        };
        if resp.content_length().is_some_and(|n| n > self.max_bytes) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.map_err(e))? {
            if (body.len() + chunk.len()) as u64 > self.max_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn map_err(&self, e: reqwest::Error) -> ProviderError {
        let provider = self.provider.clone();
        if e.is_redirect() {
            // A redirect loop or one too many: asking again loops again.
            return ProviderError::Permanent {
                provider,
                message: self.scrub(&format!("redirects: {e}")),
            };
        }
        if e.is_timeout() {
            return ProviderError::Timeout {
                provider,
                after: self.timeout,
            };
        }
        // reqwest's own message is terse ("error sending request"); the
        // cause chain says what actually happened.
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        if e.is_body() || e.is_decode() {
            message = format!("response cut off: {message}");
        }
        if is_name_resolution_failure(&e) {
            // A host name that does not resolve is a typo or a machine
            // without a route to the API: retrying spends the backoff
            // (about 15 s over four attempts) on the same answer.
            return ProviderError::Unresolved {
                provider,
                message: self.scrub(&message),
            };
        }
        ProviderError::Connection {
            provider,
            message: self.scrub(&message),
        }
    }

    pub fn invalid(&self, message: impl Into<String>, body: &Value) -> ProviderError {
        ProviderError::InvalidResponse {
            provider: self.provider.clone(),
            message: self.scrub(&message.into()),
            body: snippet(&self.scrub(&body.to_string()), 300),
        }
    }
}

/// An `{"error": {...}}` object in a 2xx body (OpenRouter and some proxies
/// answer that way): a retryable HTTP error when its code is one, otherwise
/// an invalid response.
pub(crate) fn embedded_error(http: &Http, v: &Value) -> Option<ProviderError> {
    let err = v.get("error")?;
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| err.to_string());
    let code = err
        .get("code")
        .and_then(|c| c.as_u64().or_else(|| c.as_str()?.parse().ok()))
        .filter(|c| (400..600).contains(c));
    Some(match code {
        Some(status) => ProviderError::Http {
            provider: http.provider.clone(),
            status: status as u16,
            body: snippet(&http.scrub(&message), 1000),
            retry_after: None,
        },
        None => http.invalid(format!("error in response: {}", http.scrub(&message)), v),
    })
}

/// More tokens than any model reads or writes in one call (10^9): a figure
/// above it is a broken or lying server, not a bill.
pub(crate) const MAX_PLAUSIBLE_TOKENS: u64 = 1_000_000_000;

/// Read a token count that may be missing. Negative, fractional, absurd
/// (2^63, u64::MAX) or non-numeric figures count as missing, never as a
/// number that could abort a run or fill a bill.
pub(crate) fn count(v: &Value, path: &[&str]) -> Option<u64> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_u64().filter(|n| *n <= MAX_PLAUSIBLE_TOKENS)
}

/// Why a response's token counts cannot be used, given the two that every
/// bill needs (`None` when both are there and plausible).
pub(crate) fn usage_problem(usage: &Value, input: &[&str], output: &[&str]) -> Option<String> {
    let bad = |path: &[&str]| count(usage, path).is_none();
    match (bad(input), bad(output)) {
        (false, false) => None,
        _ if usage.is_null() => Some("the server reported no usage".into()),
        _ => Some(format!(
            "the server's token counts are missing or implausible (usage: {})",
            snippet(&usage.to_string(), 200)
        )),
    }
}

/// Whether a request failed before connecting because its host name did not
/// resolve: the resolver's error in the cause chain ("dns error: failed to
/// lookup address information").
fn is_name_resolution_failure(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.to_string().starts_with("dns error") {
            return true;
        }
        source = s.source();
    }
    false
}
