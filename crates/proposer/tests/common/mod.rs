//! Local fake servers for the provider tests, bound to 127.0.0.1:0.
//!
//! `Fake` is an axum server that answers every POST with the next scripted
//! reply (the last one repeats) and logs what it received. `raw_server`
//! writes fixed bytes on a bare TCP socket, for answers no HTTP framework
//! would produce, such as a body shorter than its Content-Length.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One scripted answer. In `body`, `{{AUTH}}` becomes the request's
/// Authorization header and `{{API_KEY}}` its x-api-key header.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn json(v: Value) -> Self {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: v.to_string(),
            delay: Duration::ZERO,
        }
    }

    pub fn status(status: u16, body: &str) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn delayed(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
}

/// What the server received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Value,
    /// The body as text (a multipart upload is not JSON).
    pub raw: String,
    pub method: String,
    pub at: Instant,
}

#[derive(Clone)]
struct AppState {
    script: Arc<Mutex<VecDeque<Reply>>>,
    last: Arc<Mutex<Option<Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
}

pub struct Fake {
    pub addr: SocketAddr,
    state: AppState,
}

impl Fake {
    pub async fn start(replies: Vec<Reply>) -> Fake {
        let state = AppState {
            script: Arc::new(Mutex::new(replies.into())),
            last: Arc::new(Mutex::new(None)),
            seen: Arc::new(Mutex::new(Vec::new())),
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: Arc::new(AtomicUsize::new(0)),
        };
        let app = Router::new().fallback(handler).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Fake { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    pub fn requests(&self) -> usize {
        self.state.seen.lock().unwrap().len()
    }

    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }
}

async fn handler(
    State(s): State<AppState>,
    method: axum::http::Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let headers: HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    s.seen.lock().unwrap().push(Seen {
        path: uri.path().to_string(),
        headers: headers.clone(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        raw: String::from_utf8_lossy(&body).into_owned(),
        method: method.to_string(),
        at: Instant::now(),
    });
    let reply = {
        let next = s.script.lock().unwrap().pop_front();
        let mut last = s.last.lock().unwrap();
        match next {
            Some(r) => {
                *last = Some(r.clone());
                r
            }
            None => last.clone().expect("a scripted reply"),
        }
    };
    let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    s.max_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(reply.delay).await;
    s.in_flight.fetch_sub(1, Ordering::SeqCst);
    let body = reply
        .body
        .replace(
            "{{AUTH}}",
            headers.get("authorization").map_or("", String::as_str),
        )
        .replace(
            "{{API_KEY}}",
            headers.get("x-api-key").map_or("", String::as_str),
        );
    let mut resp = (StatusCode::from_u16(reply.status).unwrap(), body).into_response();
    for (k, v) in &reply.headers {
        resp.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    resp
}

/// A bare TCP server: reads each request (headers and Content-Length
/// body), writes `bytes`, closes. Returns its address and a request count.
pub async fn raw_server(bytes: Vec<u8>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let bytes = bytes.clone();
            let c = c.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = find(&buf, b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                c.fetch_add(1, Ordering::SeqCst);
                let _ = sock.write_all(&bytes).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (addr, count)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A complete OpenAI chat-completions answer.
pub fn openai_ok(text: &str) -> Value {
    serde_json::json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-5-2025-08-07",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "reasoning_content": "I thought."},
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 800,
            "total_tokens": 2000,
            "prompt_tokens_details": {"cached_tokens": 200},
            "completion_tokens_details": {"reasoning_tokens": 500}
        }
    })
}

/// A complete Anthropic Messages answer with a thinking block.
pub fn anthropic_ok(text: &str) -> Value {
    serde_json::json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-1-20250805",
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig"},
            {"type": "text", "text": text}
        ],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 1000, "output_tokens": 300, "cache_read_input_tokens": 0}
    })
}

/// Provider settings with fast retries, so tests take milliseconds.
pub fn fast_config() -> kevo_proposer::ProviderConfig {
    kevo_proposer::ProviderConfig {
        timeout_s: 5.0,
        max_retries: 2,
        retry_min_delay_s: 0.01,
        retry_max_delay_s: 0.05,
        ..kevo_proposer::ProviderConfig::default()
    }
}
