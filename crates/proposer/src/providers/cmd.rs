//! Any external program as a provider: an agent, a wrapper around another
//! SDK, a script that asks a person.
//!
//! The command runs under `sh -c` in a process group of its own. The prompt
//! goes to its stdin:
//!
//! - text (default): a line `<<<SYSTEM>>>`, the system prompt, a line
//!   `<<<USER>>>`, the user prompt;
//! - JSON (`cmd+json:` or `cmd_format = "json"`): one object
//!   `{"system", "user", "max_tokens", "temperature"}`.
//!
//! Its stdout is the response. In JSON mode stdout may instead be an object
//! `{"text", "reasoning"?, "model"?, "usage"?: {"input_tokens",
//! "output_tokens", ...}, "cost_usd"?}` so an agent can report what it spent.
//!
//! A non-zero exit is an error carrying the last 20 lines of stderr. On the
//! time limit, or when the call is dropped, the whole process group gets
//! SIGKILL, so grandchildren (a shell's `sleep`, an agent's tool calls) die
//! too; after a normal exit the group is killed as well, so nothing the
//! command left running outlives the call.

use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{BoxFuture, Provider};
use crate::config::CmdFormat;
use crate::error::ProviderError;
use crate::types::{ChatRequest, Completion, Usage};

pub struct CmdProvider {
    command: String,
    format: CmdFormat,
    timeout: Duration,
}

/// Kills a process group when dropped, unless already killed.
struct GroupGuard(Option<i32>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: kill(2) with a negative pid signals the process group
            // we created for this child; it touches no memory of ours.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

impl CmdProvider {
    pub fn new(command: &str, format: CmdFormat, timeout: Duration) -> Self {
        CmdProvider {
            command: command.to_string(),
            format,
            timeout,
        }
    }

    fn stdin_bytes(&self, req: &ChatRequest) -> Vec<u8> {
        match self.format {
            CmdFormat::Text => {
                format!("<<<SYSTEM>>>\n{}\n<<<USER>>>\n{}\n", req.system, req.user).into_bytes()
            }
            CmdFormat::Json => json!({
                "system": req.system,
                "user": req.user,
                "max_tokens": req.max_tokens,
                "temperature": req.temperature,
            })
            .to_string()
            .into_bytes(),
        }
    }

    fn io_err(&self, what: &str, e: impl std::fmt::Display) -> ProviderError {
        ProviderError::CommandIo {
            command: self.command.clone(),
            message: format!("{what}: {e}"),
        }
    }

    async fn run(&self, req: &ChatRequest) -> Result<Completion, ProviderError> {
        let t0 = Instant::now();
        let mut std_cmd = std::process::Command::new("sh");
        std_cmd
            .arg("-c")
            .arg(&self.command)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut cmd = tokio::process::Command::from(std_cmd);
        cmd.kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| self.io_err("cannot start", e))?;
        // process_group(0) makes the child the leader: its pid is the pgid.
        let mut group = GroupGuard(child.id().map(|p| p as i32));

        let input = self.stdin_bytes(req);
        let mut stdin = child.stdin.take().expect("piped stdin");
        // A command that does not read its stdin closes the pipe early; that
        // is its business, not an error.
        let writer = tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        });
        let mut stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let out_task = tokio::spawn(async move {
            let mut b = Vec::new();
            let _ = stdout.read_to_end(&mut b).await;
            b
        });
        let err_task = tokio::spawn(async move {
            let mut b = Vec::new();
            let _ = stderr.read_to_end(&mut b).await;
            b
        });

        let status = match tokio::time::timeout(self.timeout, child.wait()).await {
            Ok(s) => s.map_err(|e| self.io_err("waiting", e))?,
            Err(_) => {
                group.kill();
                let _ = child.wait().await;
                writer.abort();
                return Err(ProviderError::Timeout {
                    provider: "cmd".into(),
                    after: self.timeout,
                });
            }
        };
        // Whatever the command left behind holds our pipes open; end it.
        group.kill();
        let _ = writer.await;
        let out = out_task.await.unwrap_or_default();
        let err = err_task.await.unwrap_or_default();
        if !status.success() {
            return Err(ProviderError::Command {
                command: self.command.clone(),
                status: match status.code() {
                    Some(c) => format!("exited with status {c}"),
                    None => "was killed by a signal".to_string(),
                },
                stderr_tail: tail(&String::from_utf8_lossy(&err), 20, 2000),
            });
        }
        let stdout = String::from_utf8_lossy(&out).into_owned();
        let mut c = self.completion(stdout);
        c.latency = t0.elapsed();
        Ok(c)
    }

    fn completion(&self, stdout: String) -> Completion {
        let mut c = Completion {
            text: String::new(),
            reasoning: None,
            usage: Usage::default(),
            cost_usd: None,
            latency: Duration::ZERO,
            model: "cmd".into(),
            provider: "cmd".into(),
            finish_reason: None,
            attempts: 1,
        };
        if self.format == CmdFormat::Json
            && let Ok(Value::Object(o)) = serde_json::from_str::<Value>(stdout.trim())
            && let Some(text) = o.get("text").and_then(Value::as_str)
        {
            c.text = text.to_string();
            c.reasoning = o
                .get("reasoning")
                .and_then(Value::as_str)
                .map(str::to_string);
            if let Some(m) = o.get("model").and_then(Value::as_str) {
                c.model = m.to_string();
            }
            if let Some(u) = o
                .get("usage")
                .and_then(|u| serde_json::from_value(u.clone()).ok())
            {
                c.usage = u;
            }
            c.cost_usd = o.get("cost_usd").and_then(Value::as_f64);
            c.finish_reason = o
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(str::to_string);
            return c;
        }
        c.text = stdout;
        c
    }
}

/// The last `lines` lines of `s`, at most `chars` characters.
fn tail(s: &str, lines: usize, chars: usize) -> String {
    let all: Vec<&str> = s.trim_end().lines().collect();
    let t = all[all.len().saturating_sub(lines)..].join("\n");
    match t.char_indices().rev().nth(chars) {
        Some((i, _)) => format!("…{}", &t[i + 1..]),
        None => t,
    }
}

impl Provider for CmdProvider {
    fn label(&self) -> String {
        format!("cmd:{}", self.command)
    }

    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(self.run(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_end() {
        let s: String = (0..30).map(|i| format!("line {i}\n")).collect();
        let t = tail(&s, 20, 10_000);
        assert!(t.starts_with("line 10") && t.ends_with("line 29"), "{t}");
        assert_eq!(tail("abcdef", 5, 3), "…def");
    }

    #[test]
    fn json_stdout_carries_usage() {
        let p = CmdProvider::new("x", CmdFormat::Json, Duration::from_secs(1));
        let c = p.completion(
            r#"{"text": "hi", "model": "agent-1", "usage": {"input_tokens": 3, "output_tokens": 4}, "cost_usd": 0.01}"#
                .into(),
        );
        assert_eq!(c.text, "hi");
        assert_eq!(c.model, "agent-1");
        assert_eq!(c.usage.output_tokens, 4);
        assert_eq!(c.cost_usd, Some(0.01));
        // Plain text stays plain text, even in JSON mode.
        assert_eq!(p.completion("just text".into()).text, "just text");
    }
}
