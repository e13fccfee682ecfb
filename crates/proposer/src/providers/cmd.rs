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
//! A non-zero exit is an error carrying the last 20 lines of stderr.
//!
//! Containment: the command starts from a scrubbed environment (PATH,
//! HOME, the locale, the terminal and temp-dir settings, plus only the
//! variables the config names in `cmd_pass_env`), so an agent gets no API
//! key it was not given. Every process it starts inherits a marker variable
//! (`KEVO_PROPOSER_CALL`, unique per call); when the command exits, times
//! out or the call is dropped, its process group gets SIGKILL and so does
//! every process still carrying the marker, including children that left
//! the group with `setsid`. Leftovers after a normal exit are reported.
//! The time limit covers reading the output too, so a child that holds
//! stdout open cannot stall the call, and stdout is read up to
//! `max_response_bytes` only.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{BoxFuture, Provider};
use crate::config::CmdFormat;
use crate::error::ProviderError;
use crate::notice::notice;
use crate::types::{ChatRequest, Completion, Usage};

pub struct CmdProvider {
    command: String,
    format: CmdFormat,
    timeout: Duration,
    /// The whole environment the command gets (see [`proposer_environment`]).
    environment: Vec<(OsString, OsString)>,
    max_output: u64,
    sandbox: Option<CmdSandbox>,
}

/// How every call of a confined `cmd:` proposer runs: in a fresh
/// directory (its working directory and HOME, removed after the call),
/// through `LAUNCHER sandbox-exec` (kevo's own binary), which confines
/// itself and then runs `sh -c COMMAND`.
#[derive(Debug, Clone)]
pub struct CmdSandbox {
    pub launcher: std::path::PathBuf,
    /// More paths the command may read besides the system directories.
    pub readable: Vec<std::path::PathBuf>,
    /// The command may reach the network.
    pub network: bool,
}

/// Variables every command gets when kevo has them.
const BASIC_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
    "TMPDIR",
];

/// The environment of a `cmd:` proposer: the basic variables of `vars`
/// that do not name a credential, and the ones `pass` names, credentials
/// included (the user asked for them).
pub fn proposer_environment(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    pass: &[String],
) -> Vec<(OsString, OsString)> {
    vars.into_iter()
        .filter(|(k, _)| {
            let name = k.to_string_lossy();
            pass.iter().any(|p| *p == name)
                || (BASIC_ENV.contains(&name.as_ref()) && !kevo_sandbox::env::is_secret(k))
        })
        .collect()
}

/// The marker every process of one call inherits.
pub(super) const MARKER: &str = "KEVO_PROPOSER_CALL";

/// Processes of this user whose environment carries `MARKER=token`.
fn marked_processes(token: &str) -> Vec<i32> {
    let needle = format!("{MARKER}={token}");
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|entry| entry == needle.as_bytes())
            })
        })
        .collect()
}

/// SIGKILL every process still marked with `token`, and wait (up to
/// 2 s) until none is left; how many there were. SIGKILL is delivered
/// asynchronously: on a loaded 2-core machine a killed process was still
/// listed right after kill(2) returned, so "they were killed" waits for
/// it. A dying process's environment reads empty once its memory is
/// released, so it stops being marked even while a zombie. Members of
/// `group` (killed with it) are waited for but not counted.
fn kill_marked(token: &str, group: i32) -> usize {
    let mut seen = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let pids = marked_processes(token);
        if pids.is_empty() || Instant::now() > deadline {
            break;
        }
        for pid in pids {
            // SAFETY: getpgid(2) and kill(2) on a pid read from /proc;
            // they touch no memory of ours.
            let its_group = unsafe { libc::getpgid(pid) };
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            if its_group != group {
                seen.insert(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    seen.len()
}

/// Kills a process group and every marked process when dropped, unless
/// already done.
pub(super) struct GroupGuard {
    pub(super) pgid: Option<i32>,
    pub(super) token: String,
}

impl GroupGuard {
    /// Returns how many processes outside the group were still marked.
    pub(super) fn kill(&mut self) -> usize {
        if let Some(pgid) = self.pgid.take() {
            // SAFETY: kill(2) with a negative pid signals the process group
            // we created for this child; it touches no memory of ours.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            return kill_marked(&self.token, pgid);
        }
        0
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

impl CmdProvider {
    /// A command with an empty environment and the default output cap.
    pub fn new(command: &str, format: CmdFormat, timeout: Duration) -> Self {
        CmdProvider {
            command: command.to_string(),
            format,
            timeout,
            environment: Vec::new(),
            max_output: 1 << 20,
            sandbox: None,
        }
    }

    pub fn with_sandbox(mut self, sandbox: Option<CmdSandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// A confined call's own directory: its working directory, HOME and
    /// the only place it may write; gone with the call.
    fn call_dir(&self) -> Result<Option<tempfile::TempDir>, ProviderError> {
        match &self.sandbox {
            Some(_) => tempfile::Builder::new()
                .prefix("kevo-cmd-")
                .tempdir()
                .map(Some)
                .map_err(|e| self.io_err("cannot make its directory", e)),
            None => Ok(None),
        }
    }

    /// The process that runs the command: `sh -c COMMAND`, or confined,
    /// `LAUNCHER sandbox-exec --dir DIR ... -- sh -c COMMAND` in `dir`.
    fn process(&self, dir: Option<&std::path::Path>) -> std::process::Command {
        let (Some(sandbox), Some(dir)) = (&self.sandbox, dir) else {
            let mut c = std::process::Command::new("sh");
            c.arg("-c").arg(&self.command);
            return c;
        };
        let mut c = std::process::Command::new(&sandbox.launcher);
        c.arg("sandbox-exec").arg("--dir").arg(dir);
        for path in &sandbox.readable {
            c.arg("--readable").arg(path);
        }
        if sandbox.network {
            c.arg("--network");
        }
        c.args(["--", "sh", "-c"])
            .arg(&self.command)
            .current_dir(dir);
        c
    }

    pub fn with_environment(mut self, environment: Vec<(OsString, OsString)>) -> Self {
        self.environment = environment;
        self
    }

    pub fn with_max_output(mut self, bytes: u64) -> Self {
        self.max_output = bytes;
        self
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
        let deadline = tokio::time::Instant::now() + self.timeout;
        let token = call_token();
        let dir = self.call_dir()?;
        let mut std_cmd = self.process(dir.as_ref().map(|d| d.path()));
        std_cmd
            .env_clear()
            .envs(self.environment.iter().map(|(k, v)| (k, v)))
            .envs(dir.as_ref().map(|d| ("HOME", d.path())))
            .env(MARKER, &token)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut cmd = tokio::process::Command::from(std_cmd);
        cmd.kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| self.io_err("cannot start", e))?;
        // process_group(0) makes the child the leader: its pid is the pgid.
        let mut group = GroupGuard {
            pgid: child.id().map(|p| p as i32),
            token,
        };

        let input = self.stdin_bytes(req);
        let mut stdin = child.stdin.take().expect("piped stdin");
        // A command that does not read its stdin closes the pipe early; that
        // is its business, not an error.
        let writer = tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let max_output = self.max_output;
        let out_task = tokio::spawn(read_capped(stdout, Some(max_output)));
        // Only the end of stderr is kept; reading on keeps the pipe drained.
        let err_task = tokio::spawn(read_capped(stderr, None));

        let timed_out = || ProviderError::Timeout {
            provider: "cmd".into(),
            after: self.timeout,
        };
        let status = match tokio::time::timeout_at(deadline, child.wait()).await {
            Ok(s) => s.map_err(|e| self.io_err("waiting", e))?,
            Err(_) => {
                group.kill();
                let _ = child.wait().await;
                writer.abort();
                out_task.abort();
                err_task.abort();
                return Err(timed_out());
            }
        };
        // What the command left behind (in its group, or escaped with
        // setsid) would hold our pipes open: end it, and say so.
        let leftovers = group.kill();
        if leftovers > 0 {
            notice(&format!(
                "cmd proposer `{}` left {leftovers} process(es) running after it exited; they were killed",
                self.command
            ));
        }
        writer.abort();
        let Ok(Ok(out)) = tokio::time::timeout_at(deadline, out_task).await else {
            return Err(timed_out());
        };
        let err = match tokio::time::timeout_at(deadline, err_task).await {
            Ok(Ok(Captured::Complete(b) | Captured::Truncated(b))) => b,
            _ => Vec::new(),
        };
        let out = match out {
            Captured::Complete(b) => b,
            Captured::Truncated(_) => {
                return Err(ProviderError::TooLarge {
                    provider: "cmd".into(),
                    limit: max_output,
                });
            }
        };
        if !status.success() {
            return Err(failed(
                &self.command,
                status,
                &String::from_utf8_lossy(&err),
            ));
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
            usage_unknown: Some("the command reported no usage".into()),
            member: None,
            tool_calls: Vec::new(),
            native: None,
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
                .and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok())
                .filter(|u| {
                    u.input_tokens <= super::http::MAX_PLAUSIBLE_TOKENS
                        && u.output_tokens <= super::http::MAX_PLAUSIBLE_TOKENS
                })
            {
                c.usage = u;
                c.usage_unknown = None;
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

/// What was read from a pipe.
pub(super) enum Captured {
    Complete(Vec<u8>),
    /// Over the cap: with a cap, the reading stopped (the first `cap`
    /// bytes); without one, only the last 64 KiB were kept.
    Truncated(Vec<u8>),
}

/// Read a pipe to its end. With `cap`, stop past it; without, keep the
/// last 64 KiB (a stderr tail) while draining the rest.
pub(super) async fn read_capped(
    mut pipe: impl tokio::io::AsyncRead + Unpin,
    cap: Option<u64>,
) -> Captured {
    const TAIL: usize = 64 << 10;
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        kept.extend_from_slice(&buf[..n]);
        match cap {
            Some(cap) if kept.len() as u64 > cap => {
                kept.truncate(cap as usize);
                return Captured::Truncated(kept);
            }
            None if kept.len() > 2 * TAIL => {
                kept.drain(..kept.len() - TAIL);
                truncated = true;
            }
            _ => {}
        }
    }
    if truncated {
        Captured::Truncated(kept)
    } else {
        Captured::Complete(kept)
    }
}

/// A token unique to one call: pid, time and a counter.
pub(super) fn call_token() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// The last `lines` lines of `s`, at most `chars` characters.
/// A command's unsuccessful exit, with the end of its stderr.
pub(super) fn failed(
    command: &str,
    status: std::process::ExitStatus,
    stderr: &str,
) -> ProviderError {
    ProviderError::Command {
        command: command.to_string(),
        status: match status.code() {
            Some(c) => format!("exited with status {c}"),
            None => "was killed by a signal".to_string(),
        },
        stderr_tail: tail(stderr, 20, 2000),
    }
}

pub(super) fn tail(s: &str, lines: usize, chars: usize) -> String {
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
