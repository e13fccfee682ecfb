//! Starting a worker process: its config and environment, the private
//! reply pipe (fd 3 in the worker), its own process group, and the wait
//! for its `Ready`.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{Running, Worker, WorkerError, describe_exit, kill_group};
use crate::protocol::{Reply, WorkerConfig};

/// The descriptor number the worker writes its replies to.
const PROTOCOL_FD: i32 = 3;

/// Lines of stderr kept for a crash report.
const STDERR_LINES: usize = 40;

/// Keep the last lines of `stream` in `tail` (bounded: 64 KiB a line).
fn keep_tail(stream: impl Read + Send + 'static, tail: Arc<Mutex<VecDeque<String>>>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.by_ref().take(64 * 1024).read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                    if t.len() == STDERR_LINES {
                        t.pop_front();
                    }
                    t.push_back(String::from_utf8_lossy(&buf).trim_end().to_string());
                }
            }
        }
    });
}

impl Worker {
    /// kevo's ceiling cache as the worker would find it: the command's own
    /// KEVO_CACHE_DIR first (tests set one), else the usual location.
    fn ceiling_cache(&self) -> kevo_roofline::CeilingCache {
        match self.command.env.iter().find(|(k, _)| k == "KEVO_CACHE_DIR") {
            Some((_, dir)) => {
                kevo_roofline::CeilingCache::new(PathBuf::from(dir).join("ceilings.json"))
            }
            None => kevo_roofline::CeilingCache::default_location(),
        }
    }

    /// The environment a worker starts with: the allow-list of the
    /// coordinator's, the command's own variables, and the scratch
    /// directory as every temporary, cache and home directory a driver or
    /// compiler might write to.
    fn worker_environment(
        &self,
        scratch: &std::path::Path,
    ) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let mut env = kevo_sandbox::env::allowed_environment(std::env::vars_os());
        env.extend(
            self.command
                .env
                .iter()
                .filter(|(k, _)| !kevo_sandbox::env::is_secret(std::ffi::OsStr::new(k)))
                .map(|(k, v)| (k.into(), v.into())),
        );
        for var in [
            "TMPDIR",
            "HOME",
            "XDG_CACHE_HOME",
            "POCL_CACHE_DIR",
            "CUDA_CACHE_PATH",
        ] {
            env.push((var.into(), scratch.as_os_str().to_owned()));
        }
        env
    }

    /// Start a fresh worker process in a scratch directory of its own and
    /// wait for its `Ready` (at most `startup_timeout`, 300 s).
    pub(super) fn spawn(&mut self) -> Result<(), WorkerError> {
        let started = Instant::now();
        let spawn_error = |source: std::io::Error| WorkerError::Spawn {
            program: self.command.program.display().to_string(),
            source,
        };
        let scratch = tempfile::Builder::new()
            .prefix("kevo-worker-")
            .tempdir()
            .map_err(spawn_error)?;
        let config = self.process_config(scratch.path());
        let environment = self.worker_environment(scratch.path());
        self.scratch = Some(scratch);
        let (child, reply_read) = self
            .start_process(config, environment)
            .map_err(spawn_error)?;
        let running = Running::attach(child, reply_read);
        self.stats.spawns += 1;
        self.await_ready(running, started)
    }

    /// The config the process is started with, as JSON: this worker's,
    /// confined to `scratch`, with the Triton interpreter resolved and the
    /// ceilings already measured on this host.
    fn process_config(&self, scratch: &Path) -> String {
        let mut config = self.config.clone();
        config.sandbox.scratch = Some(scratch.to_path_buf());
        triton_interpreter(&mut config);
        config.known_measurements = self.ceiling_cache().get_all().unwrap_or_default();
        serde_json::to_string(&config).expect("worker config serialises")
    }

    /// Start `program args... --config JSON --protocol-fd 3` with
    /// `environment` only, in its own process group; returns it with the
    /// read end of its reply pipe.
    fn start_process(
        &self,
        config: String,
        environment: Vec<(OsString, OsString)>,
    ) -> std::io::Result<(Child, File)> {
        let (reply_read, reply_write) = reply_pipe()?;
        let write_fd = {
            use std::os::fd::AsRawFd;
            reply_write.as_raw_fd()
        };
        let mut cmd = Command::new(&self.command.program);
        cmd.args(&self.command.args)
            .arg("--config")
            .arg(config)
            .arg("--protocol-fd")
            .arg(PROTOCOL_FD.to_string())
            .env_clear()
            .envs(environment)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        own_group_with_reply_fd(&mut cmd, write_fd);
        let spawned = cmd.spawn();
        // The coordinator keeps no write end: EOF means the worker is gone.
        drop(reply_write);
        Ok((spawned?, reply_read))
    }

    /// Wait for the started worker's `Ready` and take its device, ceilings
    /// and confinement; any other first reply, none in time or an exit
    /// fails the start (the process group is killed).
    fn await_ready(&mut self, mut running: Running, started: Instant) -> Result<(), WorkerError> {
        let refused = match running.replies.recv_timeout(self.startup_timeout) {
            Ok(Ok(Reply::Ready {
                device,
                ceilings,
                startup_s,
                mut sandbox,
                measured,
                self_test,
            })) => {
                self.self_test = self_test;
                if let Some(m) = measured {
                    // Failing to write costs a re-measurement, nothing more.
                    let _ = self.ceiling_cache().put(&device, &m);
                }
                sandbox.environment_scrubbed = true;
                self.sandbox = sandbox;
                self.device = *device;
                self.ceilings = *ceilings;
                self.stats.startup_s.push(startup_s);
                self.stats.spawn_s.push(started.elapsed().as_secs_f64());
                self.running = Some(running);
                return Ok(());
            }
            Err(RecvTimeoutError::Disconnected) => return Err(exited_before_ready(&mut running)),
            Ok(Err(line)) => {
                WorkerError::Startup(format!("the worker sent an unreadable reply: {line}"))
            }
            Ok(Ok(Reply::Fatal { message })) => WorkerError::Startup(message),
            Ok(_) => WorkerError::Startup("the worker sent a result before it was ready".into()),
            Err(RecvTimeoutError::Timeout) => {
                WorkerError::StartupTimeout(self.startup_timeout.as_secs_f64())
            }
        };
        kill_group(&mut running.child);
        Err(refused)
    }
}

impl Running {
    /// A started worker with its pipes taken: replies parsed on a thread of
    /// their own, stdout and stderr kept as a tail for crash reports.
    fn attach(mut child: Child, reply_read: File) -> Running {
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(reply_read).lines() {
                let Ok(line) = line else { break };
                let reply = serde_json::from_str::<Reply>(&line).map_err(|e| {
                    let mut text = line.clone();
                    text.truncate(200);
                    format!("{e}: {text}")
                });
                if tx.send(reply).is_err() {
                    break;
                }
            }
        });
        // stdout (anything printed before the worker moved fd 1, and what a
        // wrapper prints) and stderr are both just diagnostics.
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        keep_tail(stderr, stderr_tail.clone());
        keep_tail(stdout, stderr_tail.clone());
        Running {
            child,
            stdin,
            replies,
            stderr_tail,
            shipped: Default::default(),
        }
    }
}

/// The error of a worker whose replies ended before it was ready: how it
/// exited, and the tail of what it wrote.
fn exited_before_ready(running: &mut Running) -> WorkerError {
    let status = running.child.wait().ok();
    let tail = running
        .stderr_tail
        .lock()
        .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"));
    WorkerError::Startup(format!(
        "{} before it was ready: {}",
        describe_exit(status),
        tail.unwrap_or_default()
    ))
}

/// The reply pipe: both ends close-on-exec; the child gets the write end
/// as PROTOCOL_FD ([`own_group_with_reply_fd`]).
fn reply_pipe() -> std::io::Result<(File, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: out-parameter of two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors owned from here on.
    let ends = unsafe {
        use std::os::fd::FromRawFd;
        (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    };
    Ok(ends)
}

/// Start `cmd` in its own process group, so a timeout kills everything it
/// started, with the reply pipe's `write_fd` as PROTOCOL_FD (dup2 clears
/// close-on-exec on the copy), dying with the coordinator.
fn own_group_with_reply_fd(cmd: &mut Command, write_fd: i32) {
    use std::os::unix::process::CommandExt;
    // Its own process group, so a timeout kills everything it started.
    cmd.process_group(0);
    // SAFETY: dup2, fcntl and prctl are async-signal-safe. The reply
    // pipe becomes PROTOCOL_FD; the worker dies with the coordinator
    // (kill -9 included).
    unsafe {
        cmd.pre_exec(move || {
            if write_fd == PROTOCOL_FD {
                if libc::fcntl(write_fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(write_fd, PROTOCOL_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// A Triton worker runs the helper with the configured interpreter (or
/// kevo_triton's default); its sandbox must let it read that installation,
/// which may sit under the home directory. Resolved here, outside the
/// sandbox; a failure is left for the worker to report when the helper
/// cannot start.
#[cfg(feature = "triton")]
fn triton_interpreter(config: &mut WorkerConfig) {
    if config.backend != kevo_runtimes::BackendKind::Triton {
        return;
    }
    let python = config
        .triton_python
        .clone()
        .unwrap_or_else(kevo_triton::default_python);
    if let Ok(paths) = kevo_triton::interpreter_paths(&python) {
        for p in paths {
            if !config.sandbox.readable.contains(&p) {
                config.sandbox.readable.push(p);
            }
        }
    }
    config.triton_python = Some(python);
}

#[cfg(not(feature = "triton"))]
fn triton_interpreter(_: &mut WorkerConfig) {}
