//! Recording: a wrapper that appends every successful exchange of any
//! provider to a JSONL file that `replay:` can serve again.
//!
//! One line per exchange:
//!
//! ```json
//! {"kevo_replay": 1, "key": "<sha256 hex>", "request": {"system": "...", "user": "...",
//!  "max_tokens": 4096}, "completion": {"text": "...", "usage": {...}, "model": "...", ...}}
//! ```
//!
//! Only the request's prompt and limits and the completion are written:
//! no base URL, no headers, no key. Failed calls are not recorded (there is
//! nothing to replay), and a failed write is an error, so a recording never
//! silently lacks an exchange the run used.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::{BoxFuture, EnsembleState, Provider};
use crate::error::ProviderError;
use crate::types::{ChatRequest, Completion};

/// The current format version of a recording line.
pub const FORMAT_VERSION: u32 = 1;

/// One recorded exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub kevo_replay: u32,
    /// [`ChatRequest::prompt_key`] of `request`.
    pub key: String,
    pub request: ChatRequest,
    pub completion: Completion,
}

impl Exchange {
    pub fn new(request: &ChatRequest, completion: &Completion) -> Self {
        Exchange {
            kevo_replay: FORMAT_VERSION,
            key: request.prompt_key(),
            request: request.clone(),
            completion: completion.clone(),
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

    fn append(&self, req: &ChatRequest, c: &Completion) -> Result<(), ProviderError> {
        let err = |e: String| ProviderError::Record {
            path: self.path.display().to_string(),
            message: e,
        };
        let mut line =
            serde_json::to_string(&Exchange::new(req, c)).map_err(|e| err(e.to_string()))?;
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
            let c = self.inner.complete(req).await?;
            self.append(req, &c)?;
            Ok(c)
        })
    }

    fn ensemble_state(&self) -> Option<EnsembleState> {
        self.inner.ensemble_state()
    }

    fn restore_ensemble_state(&self, state: &EnsembleState) -> Result<(), ProviderError> {
        self.inner.restore_ensemble_state(state)
    }
}
