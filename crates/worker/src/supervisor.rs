//! The coordinator side: one worker process per device, driven over the
//! line protocol, with a hard wall-clock timeout per candidate.
//!
//! A candidate that hangs gets its worker's whole process group killed
//! (SIGKILL) and a `Timeout` outcome; a worker that dies (segfault, abort, a
//! poisoned GPU context) gets a `RuntimeError` with its exit signal and the
//! tail of its stderr. Either way the next candidate starts a fresh worker.
//!
//! Replies arrive on a private pipe (fd 3 in the worker), not on its stdout,
//! and must echo the request's nonce: what a kernel prints cannot become a
//! result.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kevo_backend::DeviceInfo;
use kevo_eval::{Evaluation, Outcome, VendorBaseline, WallTimes};
use kevo_roofline::Ceilings;
use kevo_tasks::{Size, Task};
use serde::Serialize;

use crate::protocol::{Reply, Request, WorkerConfig};

mod spawn;

/// How to start a worker process: `program args... --config JSON`.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Extra environment variables for the worker.
    pub env: Vec<(String, String)>,
}

/// 128 bits from the kernel's random source, as hex: a request's nonce.
fn fresh_nonce() -> String {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: writes at most the remaining bytes of `bytes`.
        let n = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        if n > 0 {
            filled += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            panic!(
                "the kernel's random source failed: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl WorkerCommand {
    /// The running `kevo` binary's own `worker` subcommand.
    pub fn current_exe() -> std::io::Result<Self> {
        Ok(WorkerCommand {
            program: std::env::current_exe()?,
            args: vec!["worker".into()],
            env: Vec::new(),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("cannot start the evaluation worker {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// The worker started but could not open its device.
    #[error("{0}")]
    Startup(String),
    #[error("the evaluation worker did not become ready within {0:.0} s")]
    StartupTimeout(f64),
}

/// Counters a run reports: how often workers were replaced and how long
/// starting one took.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkerStats {
    pub spawns: u64,
    pub timeouts: u64,
    pub crashes: u64,
    /// Workers replaced because a fault left their device unusable.
    pub restarts: u64,
    /// Replies with a wrong nonce or id, or a second result for a request.
    pub protocol_violations: u64,
    /// Seconds from spawn to ready, per spawn (the first one included).
    pub spawn_s: Vec<f64>,
    /// The worker's own report of backend start-up (context creation), per spawn.
    pub startup_s: Vec<f64>,
}

struct Running {
    child: Child,
    stdin: ChildStdin,
    /// Parsed replies, or the text of a line that was not a reply.
    replies: Receiver<Result<Reply, String>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Task folders this process was sent (by hash), and the expected
    /// outputs (`hash/size/fingerprint`).
    shipped: std::collections::HashSet<String>,
}

/// The kind of answer a request waits for.
#[derive(Debug, Clone, Copy)]
enum Awaited {
    Result,
    Baseline,
}

impl Awaited {
    /// Whether `reply` is this kind of answer to request `id`.
    fn is_answer(self, reply: &Reply, id: u64, nonce: &str) -> bool {
        match (self, reply) {
            (
                Awaited::Result,
                Reply::Result {
                    id: r, nonce: n, ..
                },
            )
            | (
                Awaited::Baseline,
                Reply::Baseline {
                    id: r, nonce: n, ..
                },
            ) => *r == id && n == nonce,
            _ => false,
        }
    }
}

/// How waiting for a request's answer ended.
enum Waited {
    /// The awaited reply (`Reply::Result` or `Reply::Baseline`).
    Answered(Reply),
    /// The worker broke the protocol and was killed.
    Violation(String),
    /// No answer in time; the worker was killed. `compiling`: the compile
    /// stage's own limit ran out.
    Timeout { compiling: bool },
    /// The worker died; `compiling`: while compiling.
    Crashed { compiling: bool },
}

/// A supervised worker for one device.
pub struct Worker {
    command: WorkerCommand,
    config: WorkerConfig,
    running: Option<Running>,
    device: DeviceInfo,
    ceilings: Ceilings,
    next_id: u64,
    /// Evaluations sent so far: the verification seed rotates over the
    /// pool with it, chosen here so only that seed's expected outputs of a
    /// folder task are computed and shipped.
    verify_rotation: u64,
    startup_timeout: Duration,
    stats: WorkerStats,
    sandbox: kevo_sandbox::Status,
    self_test: Option<crate::protocol::SelfTest>,
    /// The running worker's private directory, removed with it.
    scratch: Option<tempfile::TempDir>,
}

/// Reference command runs at once while shipping a folder task (Python
/// with torch and a CUDA context is about 1 GB of host memory each).
const REFERENCE_RUNS_AT_ONCE: usize = 4;

fn kill_group(child: &mut Child) {
    let pid = child.id() as i32;
    // SAFETY: kill(2) with a negative pid signals the worker's own process
    // group, which it leads (process_group(0) at spawn).
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn describe_exit(status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        None => "the worker stopped answering".into(),
        Some(s) => match (s.code(), s.signal()) {
            (_, Some(sig)) => {
                let name = match sig {
                    libc::SIGSEGV => "SIGSEGV",
                    libc::SIGABRT => "SIGABRT",
                    libc::SIGBUS => "SIGBUS",
                    libc::SIGFPE => "SIGFPE",
                    libc::SIGILL => "SIGILL",
                    libc::SIGKILL => "SIGKILL",
                    _ => "signal",
                };
                format!("the worker died from signal {sig} ({name})")
            }
            (Some(code), None) => format!("the worker exited with code {code}"),
            (None, None) => "the worker exited".into(),
        },
    }
}

impl Worker {
    /// Start a worker and wait until its device is open.
    pub fn start(command: WorkerCommand, mut config: WorkerConfig) -> Result<Worker, WorkerError> {
        // Drawn here when the caller chose none, so the worker's inputs and
        // the expected outputs computed here for a folder task agree, and
        // a respawned worker keeps them.
        config
            .eval
            .inputs_secret
            .get_or_insert_with(kevo_eval::InputSecret::draw);
        let mut worker = Worker {
            command,
            config,
            running: None,
            device: placeholder_device(),
            ceilings: Ceilings {
                bandwidth_gbs: f64::NAN,
                fp32_gflops: f64::NAN,
                source: kevo_roofline::CeilingSource::Datasheet {
                    entry: String::new(),
                },
                hierarchy: None,
                launch_overhead: None,
            },
            next_id: 1,
            verify_rotation: 0,
            startup_timeout: Duration::from_secs(300),
            stats: WorkerStats::default(),
            sandbox: kevo_sandbox::Status::default(),
            scratch: None,
            self_test: None,
        };
        worker.spawn()?;
        Ok(worker)
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.device
    }

    pub fn ceilings(&self) -> &Ceilings {
        &self.ceilings
    }

    pub fn stats(&self) -> &WorkerStats {
        &self.stats
    }

    /// The secret this worker's inputs are drawn from.
    pub fn inputs_secret(&self) -> kevo_eval::InputSecret {
        self.config
            .eval
            .inputs_secret
            .expect("set by Worker::start")
    }

    /// What the worker could reach, when its config asked (test-only).
    pub fn self_test(&self) -> Option<&crate::protocol::SelfTest> {
        self.self_test.as_ref()
    }

    /// The last lines the running worker wrote to stderr or stdout.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.running
            .as_ref()
            .map(|r| {
                r.stderr_tail
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The confinement the running worker reported.
    pub fn sandbox(&self) -> &kevo_sandbox::Status {
        &self.sandbox
    }

    /// Send the running worker what it needs to evaluate the task folder
    /// `task` at `sizes`: its files the first time, then the expected
    /// outputs of a command or golden reference for the timed inputs and,
    /// with `verify_index`, that verification seed's inputs (computed here:
    /// a worker runs no program). Only the seeds the evaluation uses: a
    /// KernelBench reference is a Python process of its own per size and
    /// seed (~5 s of torch start-up), and computing the whole pool made a
    /// first evaluation several times longer than it needed. Nothing for a
    /// built-in task. An error is the task's (its reference failed),
    /// reported as the evaluation's failure.
    fn ship_task(
        &mut self,
        t: &Task,
        sizes: &[Size],
        verify_index: Option<u64>,
    ) -> Result<(), String> {
        let Some(folder) = t.folder() else {
            return Ok(());
        };
        let hash = t.content_hash().to_string();
        let secret = self.inputs_secret();
        let seeds: Vec<u64> = std::iter::once(secret.timed_seed(t.default_seed()))
            .chain(verify_index.map(|k| secret.verify_seed(t.default_seed(), k)))
            .collect();
        let running = self.running.as_mut().expect("spawned before shipping");
        // The reference command runs for several (size, seed) at once: each
        // run is mostly Python's start (5 s with torch and CUDA on the
        // H100), not work that competes; a few at a time bounds the memory
        // of inputs and interpreters held together.
        let pairs: Vec<(&Size, u64)> = sizes
            .iter()
            .flat_map(|size| seeds.iter().map(move |&seed| (size, seed)))
            .collect();
        let mut computed = Vec::with_capacity(pairs.len());
        for batch in pairs.chunks(REFERENCE_RUNS_AT_ONCE) {
            std::thread::scope(|scope| {
                let runs: Vec<_> = batch
                    .iter()
                    .map(|&(size, seed)| scope.spawn(move || folder.expected_at(size, seed)))
                    .collect();
                computed.extend(
                    runs.into_iter()
                        .map(|run| run.join().expect("a reference run panicked")),
                );
            });
        }
        // Every reference must have run before anything counts as shipped:
        // a failure sends nothing, and the next evaluation asks again.
        let computed: Vec<_> = computed
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let mut expected = Vec::new();
        let mut attachments = Vec::new();
        let mut keys = Vec::new();
        for (&(size, _), found) in pairs.iter().zip(computed) {
            let Some((fingerprint, outputs)) = found else {
                continue;
            };
            let key = format!("{hash}/{}/{fingerprint}", size.label);
            if !running.shipped.contains(&key) && !keys.contains(&key) {
                keys.push(key);
                expected.push(crate::protocol::ExpectedEntry {
                    size: size.label.clone(),
                    fingerprint,
                    outputs: Vec::new(),
                    attached: outputs.iter().map(|o| o.len() as u64).collect(),
                });
                attachments.push(outputs);
            }
        }
        let send_files = !running.shipped.contains(&hash);
        if send_files {
            keys.push(hash.clone());
        }
        let files = send_files.then(|| {
            folder
                .folder()
                .files
                .iter()
                .map(|(k, v)| (k.clone(), crate::protocol::Blob(v.clone())))
                .collect()
        });
        if files.is_none() && expected.is_empty() {
            return Ok(());
        }
        let request = Request::Define {
            package: Box::new(crate::protocol::TaskPackage {
                name: t.name().to_string(),
                hash,
                root: folder.folder().root.display().to_string(),
                files,
                expected,
            }),
        };
        let raw: Vec<&[u8]> = attachments
            .iter()
            .flat_map(|outputs| outputs.iter().map(Vec::as_slice))
            .collect();
        // A worker that died is found when the evaluation is sent; only
        // what reached it counts as shipped.
        if request.write_to(&raw, &mut running.stdin).is_ok() {
            running.shipped.extend(keys);
        }
        Ok(())
    }

    /// Evaluate `source`, in the dialect of this worker's device, as
    /// [`Worker::evaluate_candidate`] does.
    pub fn evaluate(
        &mut self,
        task: &Task,
        source: &str,
        sizes: &[Size],
        timeout: Duration,
    ) -> Evaluation {
        let candidate = kevo_eval::Candidate::new(source.to_string(), self.device.dialect);
        self.evaluate_candidate(task, &candidate, sizes, timeout)
    }

    /// Evaluate one candidate with a hard wall-clock `timeout`. Never fails:
    /// every failure is an outcome, and the worker is replaced when needed.
    /// The evaluation names the candidate's hash; an answer the worker gave
    /// for another source is a failure, never a score.
    pub fn evaluate_candidate(
        &mut self,
        task: &Task,
        candidate: &kevo_eval::Candidate,
        sizes: &[Size],
        timeout: Duration,
    ) -> Evaluation {
        let started = Instant::now();
        let answer = self.evaluate_unnamed(task, candidate, sizes, timeout);
        candidate.claim(answer).unwrap_or_else(|message| {
            let failed = self.failure(task, None, message, started);
            candidate
                .claim(failed)
                .expect("a failure made here names no source")
        })
    }

    fn evaluate_unnamed(
        &mut self,
        task: &Task,
        candidate: &kevo_eval::Candidate,
        sizes: &[Size],
        timeout: Duration,
    ) -> Evaluation {
        let pool = self.config.eval.verify_seed_pool.max(1) as u64;
        let verify_index = self.verify_rotation % pool;
        self.verify_rotation += 1;
        let preparing = Instant::now();
        if let Err(message) = self.prepare(task, sizes, Some(verify_index)) {
            return self.failure(task, None, message, preparing);
        }
        // The clock starts once a folder task's expected outputs are
        // computed: they are the task's (cached on disk, bounded by the
        // reference command's own limit), not the candidate's time.
        let started = Instant::now();
        let id = self.next_id;
        self.next_id += 1;
        let nonce = fresh_nonce();
        let request = Request::Evaluate {
            id,
            nonce: nonce.clone(),
            task: task.name().to_string(),
            task_hash: Some(task.content_hash().to_string()),
            candidate: candidate.clone(),
            sizes: sizes.to_vec(),
            verify_index: Some(verify_index),
        };
        if !self.send(&request) {
            return self.crashed(task, None, started);
        }
        let mut size: Option<String> = None;
        match self.wait_for(id, &nonce, Awaited::Result, started + timeout, &mut size) {
            Waited::Answered(Reply::Result { evaluation, .. }) => *evaluation,
            Waited::Answered(_) => unreachable!("wait_for answers with the awaited kind"),
            Waited::Violation(message) => self.failure(task, size, message, started),
            Waited::Timeout { compiling: true } => {
                let message = format!(
                    "compilation ran past its {:.0} s limit (the worker was killed)",
                    self.config.limits.compile_timeout_s.max(0.0)
                );
                let mut e = self.failure(task, size, String::new(), started);
                e.outcome = Outcome::CompileError {
                    diagnostics: kevo_backend::CompileDiagnostics::from_log(message.clone()),
                    message,
                };
                e
            }
            Waited::Timeout { compiling: false } => {
                let mut e = self.failure(task, size.clone(), String::new(), started);
                e.outcome = Outcome::Timeout {
                    size,
                    limit_s: timeout.as_secs_f64(),
                };
                e
            }
            Waited::Crashed { compiling } => {
                let mut e = self.crashed(task, size, started);
                if compiling && let Outcome::RuntimeError { message, .. } = &e.outcome {
                    let message = format!(
                        "the compiler died ({message}); a compile may use at most {} MiB",
                        self.config.limits.compile_memory_bytes >> 20
                    );
                    e.outcome = Outcome::CompileError {
                        diagnostics: kevo_backend::CompileDiagnostics::from_log(message.clone()),
                        message,
                    };
                }
                e
            }
        }
    }

    /// Wait until `deadline` for the `awaited` answer to request `id`,
    /// noting the size it reached in `size`. The compile stage has its own
    /// shorter limit. A worker that times out or breaks the protocol is
    /// killed here (it cannot be trusted with this request's answer or the
    /// next one); one that died is left for the caller's crash report.
    fn wait_for(
        &mut self,
        id: u64,
        nonce: &str,
        awaited: Awaited,
        deadline: Instant,
        size: &mut Option<String>,
    ) -> Waited {
        let compile_limit = Duration::from_secs_f64(self.config.limits.compile_timeout_s.max(0.0));
        let mut compile_deadline: Option<Instant> = None;
        loop {
            let until = compile_deadline.map_or(deadline, |c| c.min(deadline));
            let left = until.saturating_duration_since(Instant::now());
            let running = self.running.as_mut().expect("running");
            let violation = match running.replies.recv_timeout(left) {
                Ok(Ok(Reply::Compiling { id: rid, nonce: n })) if rid == id && n == nonce => {
                    compile_deadline = Some(Instant::now() + compile_limit);
                    continue;
                }
                Ok(Ok(Reply::Progress {
                    id: rid,
                    nonce: n,
                    size: at,
                })) if rid == id && n == nonce => {
                    compile_deadline = None;
                    *size = Some(at);
                    continue;
                }
                Ok(Ok(reply)) if awaited.is_answer(&reply, id, nonce) => {
                    if let Reply::Result { restart: true, .. }
                    | Reply::Baseline { restart: true, .. } = reply
                        && let Some(mut r) = self.running.take()
                    {
                        // It exits by itself; make sure, and start fresh next time.
                        kill_group(&mut r.child);
                        self.stats.restarts += 1;
                    }
                    return Waited::Answered(reply);
                }
                Ok(Ok(reply)) => describe_violation(&reply, id, nonce),
                Ok(Err(line)) => format!("an unreadable reply: {line}"),
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(mut r) = self.running.take() {
                        kill_group(&mut r.child);
                    }
                    self.stats.timeouts += 1;
                    return Waited::Timeout {
                        compiling: compile_deadline.is_some_and(|c| c <= deadline),
                    };
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Waited::Crashed {
                        compiling: compile_deadline.is_some(),
                    };
                }
            };
            if let Some(mut r) = self.running.take() {
                kill_group(&mut r.child);
            }
            self.stats.crashes += 1;
            self.stats.protocol_violations += 1;
            return Waited::Violation(format!("worker protocol violation: {violation}"));
        }
    }

    /// A running worker that has `task` (a folder's files and expected
    /// outputs at `sizes`): one that exited between requests is replaced
    /// silently, the next request is not to blame.
    fn prepare(
        &mut self,
        task: &Task,
        sizes: &[Size],
        verify_index: Option<u64>,
    ) -> Result<(), String> {
        if let Some(r) = self.running.as_mut()
            && !matches!(r.child.try_wait(), Ok(None))
        {
            let mut r = self.running.take().expect("checked");
            kill_group(&mut r.child);
        }
        if self.running.is_none() {
            self.spawn()
                .map_err(|e| format!("cannot restart the evaluation worker: {e}"))?;
        }
        self.ship_task(task, sizes, verify_index)
    }

    /// Write `request` to the running worker; false when it is gone.
    fn send(&mut self, request: &Request) -> bool {
        let running = self.running.as_mut().expect("prepared");
        request.write_to(&[], &mut running.stdin).is_ok()
    }

    /// Run the vendor library's version of `task`'s job at `sizes` in the
    /// worker (see `kevo_eval::Evaluator::vendor_baseline`), within
    /// `timeout`. Never fails: a library that crashes or hangs the worker
    /// is a `VendorBaseline::Failed`, and the worker is replaced.
    pub fn vendor_baseline(
        &mut self,
        task: &Task,
        sizes: &[Size],
        timeout: Duration,
    ) -> VendorBaseline {
        let failed = |message: String| VendorBaseline::Failed {
            library: None,
            message,
        };
        if let Err(message) = self.prepare(task, sizes, None) {
            return failed(message);
        }
        let started = Instant::now();
        let id = self.next_id;
        self.next_id += 1;
        let nonce = fresh_nonce();
        let request = Request::Baseline {
            id,
            nonce: nonce.clone(),
            task: task.name().to_string(),
            task_hash: Some(task.content_hash().to_string()),
            sizes: sizes.to_vec(),
        };
        if !self.send(&request) {
            return failed(self.crash_report());
        }
        let mut size: Option<String> = None;
        let waited = self.wait_for(id, &nonce, Awaited::Baseline, started + timeout, &mut size);
        let at = size.map(|s| format!(" at size {s}")).unwrap_or_default();
        match waited {
            Waited::Answered(Reply::Baseline { baseline, .. }) => *baseline,
            Waited::Answered(_) => unreachable!("wait_for answers with the awaited kind"),
            Waited::Violation(message) => failed(message),
            Waited::Timeout { .. } => failed(format!(
                "the vendor library ran past the {:.0} s limit{at} (the worker was killed)",
                timeout.as_secs_f64()
            )),
            Waited::Crashed { .. } => failed(format!("{}{at}", self.crash_report())),
        }
    }

    fn crashed(&mut self, task: &Task, size: Option<String>, started: Instant) -> Evaluation {
        let message = self.crash_report();
        self.failure(task, size, message, started)
    }

    /// How the running worker ended (its exit and the tail of its stderr),
    /// once it is found gone; it is counted as a crash and reaped.
    fn crash_report(&mut self) -> String {
        self.stats.crashes += 1;
        let (status, tail) = match self.running.take() {
            Some(mut r) => {
                // The reader saw EOF; give the process a moment to be reaped.
                let mut status = None;
                for _ in 0..100 {
                    if let Ok(Some(s)) = r.child.try_wait() {
                        status = Some(s);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                if status.is_none() {
                    kill_group(&mut r.child);
                }
                // Let the stderr reader drain what the worker printed last.
                std::thread::sleep(Duration::from_millis(20));
                let tail = r
                    .stderr_tail
                    .lock()
                    .map(|t| {
                        t.iter()
                            .rev()
                            .take(8)
                            .rev()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(" | ")
                    })
                    .unwrap_or_default();
                (status, tail)
            }
            None => (None, String::new()),
        };
        let mut message = describe_exit(status);
        if !tail.is_empty() {
            message.push_str("; stderr: ");
            message.push_str(&tail);
        }
        message
    }

    fn failure(
        &self,
        task: &Task,
        size: Option<String>,
        message: String,
        started: Instant,
    ) -> Evaluation {
        Evaluation::without_sizes(
            task.name(),
            &self.device.name,
            self.device.backend,
            Outcome::RuntimeError {
                size,
                fault: None,
                message,
            },
            WallTimes {
                total_s: started.elapsed().as_secs_f64(),
                ..WallTimes::default()
            },
        )
    }
}

impl Worker {
    /// Close the worker's input and give it `grace` to exit by itself (a
    /// wrapper such as compute-sanitizer writes its summary only on a clean
    /// exit), then kill whatever is left.
    pub fn shutdown(mut self, grace: Duration) {
        if let Some(mut r) = self.running.take() {
            drop(r.stdin);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = r.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            kill_group(&mut r.child);
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut r) = self.running.take() {
            kill_group(&mut r.child);
        }
    }
}

/// Why a well-formed reply does not belong to request `id`.
fn describe_violation(reply: &Reply, id: u64, nonce: &str) -> String {
    let (kind, rid, rnonce) = match reply {
        Reply::Ready { .. } => return "a second ready message".into(),
        Reply::Fatal { message } => return format!("a fatal message mid-evaluation: {message}"),
        Reply::Compiling { id, nonce } => ("compiling", *id, nonce),
        Reply::Progress { id, nonce, .. } => ("progress", *id, nonce),
        Reply::Result { id, nonce, .. } => ("result", *id, nonce),
        Reply::Baseline { id, nonce, .. } => ("baseline", *id, nonce),
    };
    if rid == id && rnonce == nonce {
        format!("a {kind} reply, which request {id} does not ask for")
    } else if rid == id {
        format!("a {kind} reply for request {id} with the wrong nonce")
    } else if rid < id {
        format!("a {kind} reply for request {rid}, which was already answered")
    } else {
        format!("a {kind} reply for unknown request {rid}")
    }
}

/// The device until the worker's hello replaces it (before `start` returns).
fn placeholder_device() -> DeviceInfo {
    DeviceInfo {
        backend: kevo_backend::BackendName::Opencl,
        dialect: kevo_backend::Dialect::OpenCl,
        platform: String::new(),
        name: String::new(),
        vendor: String::new(),
        compute_units: 0,
        global_mem_bytes: 0,
        max_work_group_size: 0,
        local_mem_bytes: 0,
        clock_mhz: 0,
        arch: String::new(),
        driver_version: String::new(),
        is_cpu: false,
        cache_bytes: 0,
        integrated: false,
        details: Default::default(),
    }
}

/// The default per-candidate limit: generous next to what the seed needed,
/// never below `floor` (a first evaluation also generates inputs and CPU
/// references, which a respawned worker must redo).
pub fn timeout_from_seed(seed_wall_s: f64, factor: f64, floor: Duration) -> Duration {
    let derived = Duration::from_secs_f64((seed_wall_s * factor).max(0.0));
    derived.max(floor)
}
