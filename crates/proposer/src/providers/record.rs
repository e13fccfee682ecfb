//! Recording: a wrapper that appends every exchange of any provider (an
//! answer, or the error a call ended with) to a JSONL file that `replay:`
//! can serve again, in the same order.
//!
//! One line per exchange:
//!
//! ```json
//! {"kevo_replay": 1, "key": "<sha256 hex>", "request": {"system": "...", "user": "...",
//!  "max_tokens": 4096}, "completion": {"text": "...", "usage": {...}, "model": "...", ...}}
//! ```
//!
//! A call that failed for good (after its retries) is a line with `"error":
//! "..."` instead of a completion, so an ordered replay stays aligned with
//! the run it recorded and fails where it failed; calls a budget refused
//! were never made and are not written. Only the request's prompt and
//! limits and the completion (text, reasoning, tokens, cost, latency, model)
//! are written, after the provider's redaction: no base URL, no headers, no
//! key. A failed write is an error, so a recording never silently lacks an
//! exchange the run used. Version 1 files (answers only) are still read.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::{BoxFuture, EnsembleState, Provider};
use crate::error::ProviderError;
use crate::types::{ChatRequest, Completion};

/// The current format version of a recording line: 2 added failed calls.
pub const FORMAT_VERSION: u32 = 2;

/// The oldest format version still read.
pub const OLDEST_FORMAT_VERSION: u32 = 1;

/// One recorded exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub kevo_replay: u32,
    /// [`ChatRequest::prompt_key`] of `request`.
    pub key: String,
    pub request: ChatRequest,
    /// The answer; None for a failed call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<Completion>,
    /// Why the call failed (after its retries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Exchange {
    pub fn new(request: &ChatRequest, completion: &Completion) -> Self {
        Exchange {
            kevo_replay: FORMAT_VERSION,
            key: request.prompt_key(),
            request: request.clone(),
            completion: Some(completion.clone()),
            error: None,
        }
    }

    /// A call that ended with `error`.
    pub fn failed(request: &ChatRequest, error: &ProviderError) -> Self {
        Exchange {
            kevo_replay: FORMAT_VERSION,
            key: request.prompt_key(),
            request: request.clone(),
            completion: None,
            error: Some(error.to_string()),
        }
    }
}

pub struct Recording {
    inner: Arc<dyn Provider>,
    path: PathBuf,
    file: Mutex<File>,
}

impl Recording {
    /// Wrap `inner`, appending to `path` (created if missing).
    pub fn new(inner: Arc<dyn Provider>, path: &Path) -> Result<Self, ProviderError> {
        let file = File::options()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| ProviderError::Record {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        Ok(Recording {
            inner,
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    fn append(&self, exchange: &Exchange) -> Result<(), ProviderError> {
        let err = |e: String| ProviderError::Record {
            path: self.path.display().to_string(),
            message: e,
        };
        let mut line = serde_json::to_string(exchange).map_err(|e| err(e.to_string()))?;
        line.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        // One write_all per line under the lock: concurrent calls never
        // interleave within a line.
        f.write_all(line.as_bytes())
            .and_then(|_| f.flush())
            .map_err(|e| err(e.to_string()))
    }
}

impl Provider for Recording {
    fn fast_forward(&self, served: &[(String, ChatRequest)]) -> Result<(), ProviderError> {
        self.inner.fast_forward(served)
    }

    fn label(&self) -> String {
        self.inner.label()
    }

    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async move {
            match self.inner.complete(req).await {
                Ok(c) => {
                    self.append(&Exchange::new(req, &c))?;
                    Ok(c)
                }
                // A budget refused the call: nothing was asked.
                Err(e) if e.is_budget_stop() => Err(e),
                Err(e) => {
                    self.append(&Exchange::failed(req, &e))?;
                    Err(e)
                }
            }
        })
    }

    fn reward(&self, member: &str, reward: f64, cost_usd: f64) {
        self.inner.reward(member, reward, cost_usd)
    }

    fn ensemble_state(&self) -> Option<EnsembleState> {
        self.inner.ensemble_state()
    }

    fn restore_ensemble_state(&self, state: &EnsembleState) -> Result<(), ProviderError> {
        self.inner.restore_ensemble_state(state)
    }
}
