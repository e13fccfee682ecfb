//! Responses served from a recording (see [`super::Recording`]), for
//! reproducible runs and tests.
//!
//! - `replay:FILE` (ordered): the n-th request gets the n-th line, whatever
//!   its prompt; a prompt that differs from the recorded one is logged, not
//!   refused, so a run replays even after a template edit.
//! - `replay:FILE#keyed`: a request gets the next unused line whose key (the
//!   SHA-256 of system and user prompt) matches; lines with the same key are
//!   served in file order.
//!
//! Running out is an error that says how many responses were served or
//! which key was missing. Served completions keep the recorded text, model
//! and token counts; their latency is the replay's own and their cost is 0.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use super::record::{Exchange, FORMAT_VERSION, OLDEST_FORMAT_VERSION};
use super::{BoxFuture, Provider};
use crate::error::ProviderError;
use crate::spec::ReplayMode;
use crate::types::{ChatRequest, Completion};

pub struct ReplayProvider {
    path: String,
    mode: ReplayMode,
    records: Vec<Exchange>,
    state: Mutex<State>,
}

struct State {
    next: usize,
    by_key: HashMap<String, VecDeque<usize>>,
    recorded_per_key: HashMap<String, usize>,
}

impl ReplayProvider {
    pub fn open(path: &Path, mode: ReplayMode) -> Result<Self, ProviderError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ProviderError::Replay {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        Self::from_jsonl(&shown, &text, mode)
    }

    pub fn from_jsonl(path: &str, text: &str, mode: ReplayMode) -> Result<Self, ProviderError> {
        let mut records = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let ex: Exchange = serde_json::from_str(line).map_err(|e| ProviderError::Replay {
                path: path.to_string(),
                message: format!("line {}: {e}", n + 1),
            })?;
            if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&ex.kevo_replay) {
                return Err(ProviderError::Replay {
                    path: path.to_string(),
                    message: format!(
                        "line {}: format version {} (this kevo reads {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})",
                        n + 1,
                        ex.kevo_replay
                    ),
                });
            }
            if ex.completion.is_none() == ex.error.is_none() {
                return Err(ProviderError::Replay {
                    path: path.to_string(),
                    message: format!(
                        "line {}: an exchange holds either a completion or an error",
                        n + 1
                    ),
                });
            }
            records.push(ex);
        }
        let mut by_key: HashMap<String, VecDeque<usize>> = HashMap::new();
        for (i, r) in records.iter().enumerate() {
            by_key.entry(r.key.clone()).or_default().push_back(i);
        }
        let recorded_per_key = by_key.iter().map(|(k, v)| (k.clone(), v.len())).collect();
        Ok(ReplayProvider {
            path: path.to_string(),
            mode,
            records,
            state: Mutex::new(State {
                next: 0,
                by_key,
                recorded_per_key,
            }),
        })
    }

    /// Recorded exchanges not yet served (ordered mode) or in total (keyed).
    pub fn remaining(&self) -> usize {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match self.mode {
            ReplayMode::Ordered => self.records.len() - s.next,
            ReplayMode::Keyed => s.by_key.values().map(VecDeque::len).sum(),
        }
    }

    fn serve(&self, req: &ChatRequest) -> Result<Completion, ProviderError> {
        let t0 = Instant::now();
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let key = req.prompt_key();
        let index = match self.mode {
            ReplayMode::Ordered => {
                let i = s.next;
                if i >= self.records.len() {
                    return Err(ProviderError::ReplayExhausted {
                        path: self.path.clone(),
                        served: i,
                    });
                }
                s.next += 1;
                if self.records[i].key != key {
                    tracing::warn!(
                        "replay {}: request {} differs from the recorded prompt (serving it in order)",
                        self.path,
                        i + 1
                    );
                }
                i
            }
            ReplayMode::Keyed => match s.by_key.get_mut(&key).and_then(VecDeque::pop_front) {
                Some(i) => i,
                None => {
                    return Err(ProviderError::ReplayMissingKey {
                        path: self.path.clone(),
                        recorded: s.recorded_per_key.get(&key).copied().unwrap_or(0),
                        keys: s.recorded_per_key.len(),
                        key,
                    });
                }
            },
        };
        let record = &self.records[index];
        let Some(mut c) = record.completion.clone() else {
            // The recorded call failed: so does its replay.
            return Err(ProviderError::Replay {
                path: self.path.clone(),
                message: format!(
                    "recorded failure: {}",
                    record.error.as_deref().unwrap_or_default()
                ),
            });
        };
        c.provider = "replay".into();
        c.attempts = 1;
        c.cost_usd = Some(0.0);
        c.latency = t0.elapsed();
        Ok(c)
    }
}

impl Provider for ReplayProvider {
    fn fast_forward(&self, served: &[(String, ChatRequest)]) -> Result<(), ProviderError> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match self.mode {
            ReplayMode::Ordered => s.next = (s.next + served.len()).min(self.records.len()),
            ReplayMode::Keyed => {
                for (_, req) in served {
                    if let Some(q) = s.by_key.get_mut(&req.prompt_key()) {
                        q.pop_front();
                    }
                }
            }
        }
        Ok(())
    }

    fn label(&self) -> String {
        match self.mode {
            ReplayMode::Ordered => format!("replay:{}", self.path),
            ReplayMode::Keyed => format!("replay:{}#keyed", self.path),
        }
    }

    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async move { self.serve(req) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Usage;
    use std::time::Duration;

    fn line(system: &str, user: &str, text: &str) -> String {
        let req = ChatRequest::new(system, user);
        let c = Completion {
            text: text.into(),
            reasoning: None,
            usage: Usage {
                input_tokens: 1,
                output_tokens: 2,
                ..Default::default()
            },
            cost_usd: Some(1.0),
            latency: Duration::from_secs(3),
            model: "m".into(),
            provider: "openai".into(),
            finish_reason: Some("stop".into()),
            attempts: 2,
            usage_unknown: None,
            member: None,
            tool_calls: Vec::new(),
            native: None,
        };
        serde_json::to_string(&Exchange::new(&req, &c)).unwrap()
    }

    fn file() -> String {
        [
            line("s", "a", "A1"),
            String::new(),
            line("s", "b", "B"),
            line("s", "a", "A2"),
        ]
        .join("\n")
    }

    #[tokio::test]
    async fn fast_forward_skips_what_a_resumed_run_already_used() {
        let served = vec![("replay".to_string(), ChatRequest::new("s", "a"))];
        let p = ReplayProvider::from_jsonl("f.jsonl", &file(), ReplayMode::Ordered).unwrap();
        p.fast_forward(&served).unwrap();
        let any = ChatRequest::new("x", "y");
        assert_eq!(p.complete(&any).await.unwrap().text, "B");
        let p = ReplayProvider::from_jsonl("f.jsonl", &file(), ReplayMode::Keyed).unwrap();
        p.fast_forward(&served).unwrap();
        let a = ChatRequest::new("s", "a");
        assert_eq!(
            p.complete(&a).await.unwrap().text,
            "A2",
            "the first `a` was used before the checkpoint"
        );
    }

    #[tokio::test]
    async fn a_recorded_failure_fails_again_in_its_place() {
        let req = ChatRequest::new("s", "b");
        let failed = serde_json::to_string(&Exchange::failed(
            &req,
            &ProviderError::Permanent {
                provider: "openai".into(),
                message: "overloaded".into(),
            },
        ))
        .unwrap();
        // A version 1 line (answers only) reads as before.
        let v1 = line("s", "c", "C").replace("\"kevo_replay\":2", "\"kevo_replay\":1");
        assert!(v1.contains("\"kevo_replay\":1"));
        let text = [line("s", "a", "A"), failed, v1].join("\n");
        let p = ReplayProvider::from_jsonl("f.jsonl", &text, ReplayMode::Ordered).unwrap();
        assert_eq!(p.complete(&req).await.unwrap().text, "A");
        let e = p.complete(&req).await.unwrap_err().to_string();
        assert!(
            e.contains("recorded failure") && e.contains("overloaded"),
            "{e}"
        );
        assert_eq!(p.complete(&req).await.unwrap().text, "C");

        let neither = line("s", "a", "A").replace("\"completion\":", "\"other\":");
        let e = ReplayProvider::from_jsonl("f.jsonl", &neither, ReplayMode::Ordered)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("either a completion or an error"), "{e}");
        let future = line("s", "a", "A").replace("\"kevo_replay\":2", "\"kevo_replay\":3");
        let e = ReplayProvider::from_jsonl("f.jsonl", &future, ReplayMode::Ordered)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("format version 3"), "{e}");
    }

    #[tokio::test]
    async fn ordered_serves_in_file_order_then_says_exhausted() {
        let p = ReplayProvider::from_jsonl("f.jsonl", &file(), ReplayMode::Ordered).unwrap();
        let any = ChatRequest::new("x", "y");
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(p.complete(&any).await.unwrap().text);
        }
        assert_eq!(got, ["A1", "B", "A2"]);
        let e = p.complete(&any).await.unwrap_err();
        assert!(
            matches!(e, ProviderError::ReplayExhausted { served: 3, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("f.jsonl"));
    }

    #[tokio::test]
    async fn keyed_matches_prompts_and_names_missing_keys() {
        let p = ReplayProvider::from_jsonl("f.jsonl", &file(), ReplayMode::Keyed).unwrap();
        let a = ChatRequest::new("s", "a");
        let b = ChatRequest::new("s", "b");
        let c = p.complete(&b).await.unwrap();
        assert_eq!(c.text, "B");
        assert_eq!(
            (c.cost_usd, c.attempts, c.provider.as_str()),
            (Some(0.0), 1, "replay")
        );
        assert_eq!(c.usage.output_tokens, 2);
        assert_eq!(p.complete(&a).await.unwrap().text, "A1");
        assert_eq!(p.complete(&a).await.unwrap().text, "A2");
        assert_eq!(p.remaining(), 0);
        let e = p.complete(&a).await.unwrap_err();
        assert!(
            matches!(&e, ProviderError::ReplayMissingKey { recorded: 2, keys: 2, key, .. } if *key == a.prompt_key()),
            "{e}"
        );
        let e = p.complete(&ChatRequest::new("s", "zzz")).await.unwrap_err();
        assert!(
            matches!(e, ProviderError::ReplayMissingKey { recorded: 0, .. }),
            "{e}"
        );
    }

    #[test]
    fn bad_lines_are_named() {
        let text = format!("{}\nnot json\n", line("s", "a", "A"));
        let e = ReplayProvider::from_jsonl("f.jsonl", &text, ReplayMode::Ordered)
            .err()
            .unwrap();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = ReplayProvider::open(Path::new("/nonexistent/x.jsonl"), ReplayMode::Keyed)
            .err()
            .unwrap();
        assert!(e.to_string().contains("/nonexistent/x.jsonl"), "{e}");
    }
}
