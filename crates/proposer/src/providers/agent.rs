//! A command-line coding agent as the proposer (`agent:COMMAND`): a
//! script, or an assistant the user installed, works in a directory of
//! its own and leaves a kernel there.
//!
//! Each proposal gets a fresh directory holding `prompt.md` (the prompt),
//! the kernel file (`kernel.cl`, `.cu` or `.py`, the parent's source) and
//! `bin/kevo-tool` (on PATH), which offers the same tools as an API
//! model gets, with the same checks and budget. The agent edits the kernel
//! file (or calls `kevo-tool submit FILE`) and exits; kevo evaluates what
//! it left.
//!
//! The agent always runs confined (`kevo sandbox-exec`): it may write only
//! in its directory, read only there, in the system directories and in
//! `cmd_readable`; it has no network unless `cmd_network`; its process
//! tree ends with the proposal. The seccomp filter refuses new sockets, so
//! `kevo-tool` reaches kevo through a socket pair the agent inherits as
//! file descriptor 3: one request line, a status line, the reply, and an
//! end line. Files named in requests are read by kevo only inside the
//! agent's directory (symbolic links resolved first).

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

mod usage;

use super::cmd::{Captured, GroupGuard, MARKER, call_token, failed, read_capped, tail};
use super::{BoxFuture, Provider};
use crate::error::ProviderError;
use crate::notice::notice;
use crate::tools::lines::{read_inside, serve};
use crate::tools::{Gate, ToolBudget, ToolHost, Transcript, fenced};
use crate::types::{ChatRequest, Completion};

/// The helper the agent calls, installed as `bin/kevo-tool`.
const KEVO_TOOL: &str = include_str!("agent/kevo-tool");
/// The line that ends every reply.
const END: &str = "--kevo-tool-end--";
/// A request longer than this is refused (a file is named, not sent).
const MAX_REQUEST: usize = 4096;

pub struct AgentProvider {
    command: String,
    launcher: PathBuf,
    readable: Vec<PathBuf>,
    network: bool,
    timeout: Duration,
    environment: Vec<(OsString, OsString)>,
}

impl AgentProvider {
    /// An agent run by `launcher` (kevo's own binary) under its sandbox.
    pub fn new(
        command: &str,
        launcher: PathBuf,
        readable: Vec<PathBuf>,
        network: bool,
        timeout: Duration,
        environment: Vec<(OsString, OsString)>,
    ) -> AgentProvider {
        AgentProvider {
            command: command.to_string(),
            launcher,
            readable,
            network,
            timeout,
            environment,
        }
    }

    /// One proposal: the agent's run with its tool calls, and what it
    /// left (the submitted kernel, else its kernel file); the transcript
    /// either way.
    pub async fn converse(
        &self,
        host: &dyn ToolHost,
        request: &ChatRequest,
        budget: &ToolBudget,
    ) -> (Result<Completion, ProviderError>, Transcript) {
        let mut gate = Gate::new(host, budget);
        gate.transcript.turns.push(Default::default());
        gate.transcript.usage_unknown = true;
        let result = self.run(host, &mut gate, request).await;
        match &result {
            Err(e) => gate.transcript.ended = e.to_string(),
            Ok(_) if gate.transcript.ended.is_empty() => {
                gate.transcript.ended = "left its kernel file".into()
            }
            Ok(_) => {}
        }
        (result, gate.transcript)
    }

    fn io_err(&self, what: &str, e: impl std::fmt::Display) -> ProviderError {
        ProviderError::CommandIo {
            command: self.command.clone(),
            message: format!("{what}: {e}"),
        }
    }

    /// The agent's directory: the prompt, the parent's kernel, the tool.
    fn prepare(
        &self,
        host: &dyn ToolHost,
        req: &ChatRequest,
    ) -> Result<tempfile::TempDir, ProviderError> {
        let dir = tempfile::Builder::new()
            .prefix("kevo-agent-")
            .tempdir()
            .map_err(|e| self.io_err("cannot make its directory", e))?;
        let kernel = host.kernel_file();
        let prompt = format!(
            "{}\n\n{}\n\n## How to answer\n\nYour kernel file is `{kernel}`; it holds the kernel you are improving. \
             Edit it, try it with `kevo-tool` (run it without arguments for its commands; the sizes you may \
             name: {}), and exit when `{kernel}` holds your answer, or call `kevo-tool submit FILE`. \
             Write one line saying what you changed to `summary.txt`: it is your answer's Summary line.\n",
            req.system,
            req.user,
            host.sizes().join(", ")
        );
        let bin = dir.path().join("bin");
        let written = std::fs::write(dir.path().join("prompt.md"), prompt)
            .and_then(|_| std::fs::write(dir.path().join(&kernel), host.parent_source()))
            .and_then(|_| std::fs::create_dir(&bin))
            .and_then(|_| std::fs::write(bin.join("kevo-tool"), KEVO_TOOL))
            .and_then(|_| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(
                    bin.join("kevo-tool"),
                    std::fs::Permissions::from_mode(0o755),
                )
            });
        written.map_err(|e| self.io_err("cannot write its directory", e))?;
        Ok(dir)
    }

    /// The confined process, its end of the tool channel as fd 3.
    fn process(&self, dir: &Path, token: &str, channel: i32) -> std::process::Command {
        let mut c = std::process::Command::new(&self.launcher);
        c.arg("sandbox-exec").arg("--dir").arg(dir);
        for path in &self.readable {
            c.arg("--readable").arg(path);
        }
        if self.network {
            c.arg("--network");
        }
        let path = self
            .environment
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.to_string_lossy().into_owned())
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        c.args(["--", "sh", "-c"])
            .arg(&self.command)
            .current_dir(dir)
            .env_clear()
            .envs(self.environment.iter().map(|(k, v)| (k, v)))
            .env("HOME", dir)
            .env("PATH", format!("{}:{path}", dir.join("bin").display()))
            .env("KEVO_TOOL_FD", "3")
            .env(MARKER, token)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: between fork and exec only async-signal-safe calls:
        // dup2 and fcntl on descriptors this process owns.
        unsafe {
            c.pre_exec(move || {
                if channel == 3 {
                    let flags = libc::fcntl(3, libc::F_GETFD);
                    if flags < 0 || libc::fcntl(3, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(channel, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        c
    }

    async fn run(
        &self,
        host: &dyn ToolHost,
        gate: &mut Gate<'_>,
        req: &ChatRequest,
    ) -> Result<Completion, ProviderError> {
        let t0 = Instant::now();
        let dir = self.prepare(host, req)?;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()
            .map_err(|e| self.io_err("no tool channel", e))?;
        let token = call_token();
        let mut cmd =
            tokio::process::Command::from(self.process(dir.path(), &token, theirs.as_raw_fd()));
        cmd.kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| self.io_err("cannot start", e))?;
        drop(theirs);
        let mut group = GroupGuard {
            pgid: child.id().map(|p| p as i32),
            token,
        };
        let out_task = tokio::spawn(read_capped(child.stdout.take().expect("piped"), None));
        let err_task = tokio::spawn(read_capped(child.stderr.take().expect("piped"), None));
        ours.set_nonblocking(true)
            .map_err(|e| self.io_err("tool channel", e))?;
        let stream =
            tokio::net::UnixStream::from_std(ours).map_err(|e| self.io_err("tool channel", e))?;
        let (reader, mut writer) = stream.into_split();
        let mut reader = BufReader::new(reader);
        let deadline = tokio::time::Instant::now() + self.timeout;
        let timed_out = || ProviderError::Timeout {
            provider: "agent".into(),
            after: self.timeout,
        };
        let mut submitted: Option<String> = None;
        let mut open = true;
        let mut calls = 0u32;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.map_err(|e| self.io_err("waiting", e))?,
                line = next_line(&mut reader), if open => match line {
                    Some(line) => {
                        calls += 1;
                        let (ok, text, end) = serve(gate, dir.path(), &line, calls, &mut submitted).await;
                        let reply = format!("{}\n{}\n{END}\n", if ok { "ok" } else { "error" }, text.trim_end());
                        // An agent that asks and never reads its replies
                        // fills the socket: the write waits no longer than
                        // the proposal may last.
                        let written =
                            tokio::time::timeout_at(deadline, writer.write_all(reply.as_bytes()))
                                .await;
                        if written.is_err() {
                            group.kill();
                            return Err(timed_out());
                        }
                        if let Some(why) = end {
                            group.kill();
                            return Err(gate.fail(why));
                        }
                    }
                    None => open = false,
                },
                _ = tokio::time::sleep_until(deadline) => {
                    group.kill();
                    return Err(timed_out());
                }
            }
        };
        let leftovers = group.kill();
        if leftovers > 0 {
            notice(&format!(
                "agent `{}` left {leftovers} process(es) running after it exited; they were killed",
                self.command
            ));
        }
        let text = |t: Result<Captured, _>| match t {
            Ok(Captured::Complete(b) | Captured::Truncated(b)) => {
                String::from_utf8_lossy(&b).into_owned()
            }
            Err(_) => String::new(),
        };
        let stdout = text(out_task.await);
        let stderr = text(err_task.await);
        if let Some(turn) = gate.transcript.turns.first_mut() {
            turn.text = tail(&stdout, 40, 4000);
            turn.latency_s = t0.elapsed().as_secs_f64();
        }
        let reported = self.reported_usage(gate, dir.path());
        let source = match submitted {
            Some(s) => s,
            None => self.left(gate, dir.path(), &host.kernel_file(), status, &stderr)?,
        };
        Ok(self.completion(&source, dir.path(), reported, t0.elapsed()))
    }

    /// The spend the agent reported in `usage.json`, taken into the
    /// transcript; None (spend unknown) without the file, or with one
    /// that cannot be believed (said in a notice).
    fn reported_usage(&self, gate: &mut Gate<'_>, dir: &Path) -> Option<usage::Reported> {
        if !dir.join(usage::FILE).exists() {
            return None;
        }
        match read_inside(dir, usage::FILE).and_then(|t| usage::Reported::parse(&t)) {
            Ok(r) => {
                gate.transcript.usage = r.usage();
                gate.transcript.usage_unknown = false;
                Some(r)
            }
            Err(why) => {
                notice(&format!(
                    "agent `{}`: {why}; its spend is unknown",
                    self.command
                ));
                None
            }
        }
    }

    /// What an agent that submitted nothing left: its kernel file, if it
    /// exited successfully; else the failure with its stderr's end.
    fn left(
        &self,
        gate: &Gate<'_>,
        dir: &Path,
        kernel_file: &str,
        status: std::process::ExitStatus,
        stderr: &str,
    ) -> Result<String, ProviderError> {
        if !status.success() {
            return Err(failed(&self.command, status, stderr));
        }
        read_inside(dir, kernel_file).map_err(|why| gate.fail(why))
    }

    /// The answer: what it left, fenced, after its `summary.txt` line as
    /// a `Summary:` line; the spend it reported, else unknown.
    fn completion(
        &self,
        source: &str,
        dir: &Path,
        reported: Option<usage::Reported>,
        latency: Duration,
    ) -> Completion {
        let text = match summary_line(dir) {
            Some(line) => format!("Summary: {line}\n\n{}", fenced(source)),
            None => fenced(source),
        };
        let (usage, usage_unknown, cost_usd, model) = match reported {
            Some(r) => (
                r.usage(),
                None,
                r.cost_usd,
                r.model.unwrap_or_else(|| "agent".into()),
            ),
            None => (
                Default::default(),
                Some("the agent left no usage.json".into()),
                None,
                "agent".into(),
            ),
        };
        Completion {
            text,
            reasoning: None,
            usage,
            cost_usd,
            latency,
            model,
            provider: "agent".into(),
            finish_reason: None,
            attempts: 1,
            usage_unknown,
            member: None,
            tool_calls: Vec::new(),
            native: None,
        }
    }
}

/// The next request line, at most [`MAX_REQUEST`] bytes; None once the
/// channel is closed (or a line is too long: the agent is not listened
/// to any more).
async fn next_line(reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>) -> Option<String> {
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf().await.ok()?;
        if buf.is_empty() {
            return None;
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if line.len() > MAX_REQUEST {
            return None;
        }
        if done {
            return Some(String::from_utf8_lossy(&line).trim().to_string());
        }
    }
}

/// The first line of the agent's `summary.txt` (what it says it changed,
/// as a model's `Summary:` line), at most 200 characters, control
/// characters removed; None without one.
fn summary_line(dir: &Path) -> Option<String> {
    if !dir.join("summary.txt").exists() {
        return None;
    }
    let text = read_inside(dir, "summary.txt").ok()?;
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line: String = crate::sanitize::line(line).chars().take(200).collect();
    (!line.trim().is_empty()).then_some(line)
}

impl Provider for AgentProvider {
    fn label(&self) -> String {
        format!("agent:{}", self.command)
    }

    fn complete<'a>(
        &'a self,
        _req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async {
            Err(ProviderError::Config(
                "an `agent:` proposer works inside `kevo evolve`, with its tools; it answers no single prompt"
                    .into(),
            ))
        })
    }

    fn agent(&self) -> Option<&AgentProvider> {
        Some(self)
    }
}
