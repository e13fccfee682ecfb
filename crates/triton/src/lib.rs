//! Triton as a kernel language. A candidate is a Python module of
//! `@triton.jit` functions; kevo never runs it in its own process. A
//! persistent helper (python/helper.py, run by the configured interpreter)
//! checks the module (imports of triton, triton.language and math,
//! constants and jit functions only, and kernel bodies whose every name
//! and attribute path stays in the kernel language: none of the
//! candidate's Python runs, neither at import nor while Triton compiles
//! it), compiles each entry point with Triton's own compiler to a cubin
//! for the device's architecture (no GPU is needed to compile), and
//! returns the binary with
//! what a launch needs (warps, shared memory, Triton's extra scratch
//! parameters). The CUDA backend then loads and launches that cubin like
//! any other, so timing, verification and every guard are the same code a
//! CUDA C++ candidate goes through, and no Python runs in the timed path.
//!
//! The launch grid is declared by the candidate in `# kevo:` comments
//! ([`directives`]), read here without Python.
//!
//! The helper lives across candidates, so it also guards itself: it
//! checks after every candidate that Triton and its own code are as they
//! were at start, refuses a candidate that changed them and
//! is replaced by a fresh process ([`Helper`]); an audit hook refuses
//! what compiling never does; and a Landlock domain of its own lets it
//! read only the interpreter's installation and system libraries.

mod backend;
mod confine;
pub mod directives;

pub use backend::TritonBackend;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The helper's source, written into its scratch directory at start.
pub const HELPER_PY: &str = include_str!("../python/helper.py");

/// The interpreter for Triton when none is configured: `$KEVO_TRITON_PYTHON`,
/// else the environment `scripts/setup --triton` makes
/// (`~/.cache/kevo/triton-venv`), else `python3`.
pub fn default_python() -> String {
    if let Some(p) = std::env::var_os("KEVO_TRITON_PYTHON").filter(|p| !p.is_empty()) {
        return p.to_string_lossy().into_owned();
    }
    let venv = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache/kevo/triton-venv/bin/python"))
        .filter(|p| p.is_file());
    match venv {
        Some(p) => p.display().to_string(),
        None => "python3".to_string(),
    }
}

/// Whether `python` can run the helper: its versions, or why not and how
/// to fix it. Starts a helper in a temporary directory and stops it.
pub fn availability(python: &str) -> Result<Versions, TritonError> {
    let scratch = std::env::temp_dir().join(format!("kevo-triton-probe-{}", std::process::id()));
    let helper = Helper::start(HelperConfig::new(python, &scratch));
    let versions = helper.map(|h| h.versions().clone());
    let _ = std::fs::remove_dir_all(&scratch);
    versions
}

/// The directories `python` reads when it runs the helper: the venv, the
/// installation it was made from, and the interpreter's own file. A
/// worker's sandbox lets it read these and nothing else of the user's
/// (a venv under the home directory is not among the system directories).
/// Asked of the interpreter itself, outside any sandbox.
pub fn interpreter_paths(python: &str) -> Result<Vec<PathBuf>, TritonError> {
    let output = Command::new(python)
        .args([
            "-c",
            "import os, sys; print(sys.prefix); print(sys.base_prefix); print(os.path.realpath(sys.executable))",
        ])
        .env_clear()
        .envs(kevo_sandbox::env::allowed_environment(std::env::vars_os()))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| TritonError::Start {
            python: python.to_string(),
            message: e.to_string(),
        })?;
    if !output.status.success() {
        return Err(TritonError::Missing {
            python: python.to_string(),
            message: format!("asking its installation paths failed ({})", output.status),
        });
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let path = PathBuf::from(line.trim());
        if path.is_absolute() && path.parent().is_some() && !paths.contains(&path) {
            paths.push(path);
        }
    }
    // The interpreter file as it was named (a venv's `bin/python` link).
    if let Ok(named) = std::fs::canonicalize(python)
        && !paths.iter().any(|p| named.starts_with(p))
    {
        paths.push(named);
    }
    Ok(paths)
}

/// Where the helper's interpreter comes from and what confines it.
#[derive(Debug, Clone)]
pub struct HelperConfig {
    /// The interpreter with triton installed (`python3`, or a venv's).
    pub python: String,
    /// The helper's private directory: its source, the candidates' module
    /// files, Triton's per-candidate cache and the cubins.
    pub scratch: PathBuf,
    /// Limit on the helper's heap (RLIMIT_DATA). Triton's compile of a
    /// matmul peaks near 200 MB; 4 GiB leaves room without letting a
    /// candidate exhaust the host.
    pub memory_bytes: u64,
    /// Limit on one request's wall time: a compile that hangs (a huge
    /// unrolled loop) is a rejected candidate and the helper is restarted.
    pub request_timeout: Duration,
    /// Confine the helper's files with a Landlock domain of its own, on
    /// top of its parent's sandbox: it reads only the interpreter's
    /// installation and the system's libraries and writes only `scratch`
    /// (see [`Helper::confinement`]). Where a confined helper cannot
    /// start, it is started without (and says so).
    pub confine: bool,
}

impl HelperConfig {
    pub fn new(python: &str, scratch: &Path) -> HelperConfig {
        HelperConfig {
            python: python.to_string(),
            scratch: scratch.to_path_buf(),
            memory_bytes: 4 << 30,
            request_timeout: Duration::from_secs(120),
            confine: true,
        }
    }
}

/// What went wrong with the helper itself (not with a candidate).
#[derive(Debug, thiserror::Error)]
pub enum TritonError {
    #[error(
        "cannot start the Triton helper with `{python}`: {message}. Install Triton for that interpreter (`{python} -m pip install triton`) or name another with --triton-python or $KEVO_TRITON_PYTHON"
    )]
    Start { python: String, message: String },
    #[error(
        "`{python}` has no usable Triton ({message}). Install it with `{python} -m pip install triton`, or name another interpreter with --triton-python or $KEVO_TRITON_PYTHON"
    )]
    Missing { python: String, message: String },
    #[error("the Triton helper stopped answering: {0}")]
    Protocol(String),
    #[error("the Triton helper took longer than {0:?} over one request and was stopped")]
    Timeout(Duration),
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
}

/// The interpreter and Triton a helper runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versions {
    pub python: String,
    pub triton: String,
}

/// Typed parameter of an entry point, as the task passes it: `*fp32` for
/// a float buffer, `i32` for an int scalar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub ty: String,
}

/// One entry point to compile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRequest {
    pub name: String,
    /// The task's arguments in order; the jit function takes them first,
    /// then its tl.constexpr parameters.
    pub params: Vec<(String, String)>,
    pub num_warps: u32,
    pub num_stages: u32,
    /// Values for the kernel's tl.constexpr parameters (a tuner's); the
    /// others take their defaults.
    pub constexprs: BTreeMap<String, i64>,
}

/// A compiled entry point and what its launch needs.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledKernel {
    pub name: String,
    pub cubin: Vec<u8>,
    pub num_warps: u32,
    pub num_ctas: u32,
    /// Dynamic shared memory per program, in bytes (all of Triton's is
    /// dynamic; above 48 KiB the function needs the opt-in attribute).
    pub shared: u32,
    /// Triton appends two pointer parameters to every kernel: a global
    /// scratch of this many bytes per program (NULL when 0) ...
    pub global_scratch_size: u64,
    pub global_scratch_align: u64,
    /// ... and a profiling scratch, NULL unless instrumented.
    pub profile_scratch_size: u64,
    /// The tl.constexpr values it was compiled with.
    pub constexprs: BTreeMap<String, serde_json::Value>,
    /// The candidate's names for the task's arguments, in order (its grid
    /// directive is written in them).
    pub arg_names: Vec<String>,
}

impl CompiledKernel {
    /// The names a grid directive may use, with their values: each task
    /// argument's `scalars` value under the candidate's name for it (None
    /// for buffers), then the integer tl.constexpr values.
    pub fn grid_values(&self, scalars: &[Option<i64>]) -> BTreeMap<String, i64> {
        let mut values: BTreeMap<String, i64> = self
            .arg_names
            .iter()
            .zip(scalars)
            .filter_map(|(name, v)| v.map(|v| (name.clone(), v)))
            .collect();
        for (name, v) in &self.constexprs {
            if let Some(i) = v.as_i64() {
                values.insert(name.clone(), i);
            }
        }
        values
    }
}

/// The helper's verdict on a candidate.
#[derive(Debug, Clone, PartialEq)]
pub enum Compiled {
    Kernels {
        kernels: Vec<CompiledKernel>,
        /// The helper's time over the request (check, import, compile).
        seconds: f64,
    },
    /// The candidate is refused: `stage` is module, syntax, entry,
    /// signature or compile; `reason` is trimmed to what a model needs.
    Rejected { stage: String, reason: String },
}

#[derive(Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    python: Option<String>,
    #[serde(default)]
    triton: Option<String>,
    #[serde(default)]
    kernels: Vec<AnsweredKernel>,
    #[serde(default)]
    seconds: f64,
    /// The helper found its own state changed and exits after this
    /// answer (see `Integrity` in helper.py).
    #[serde(default)]
    restart: bool,
    /// Time the helper spent checking its own state after the request.
    #[serde(default)]
    integrity_seconds: Option<f64>,
}

#[derive(Deserialize)]
struct AnsweredKernel {
    name: String,
    cubin: PathBuf,
    num_warps: u32,
    num_ctas: u32,
    shared: u32,
    global_scratch_size: u64,
    global_scratch_align: u64,
    profile_scratch_size: u64,
    constexprs: BTreeMap<String, serde_json::Value>,
    arg_names: Vec<String>,
}

/// A running helper. Requests are answered in order, one at a time.
///
/// The helper checks its own state after every candidate, and quickly
/// before (helper.py's `Integrity`). Where a candidate changed it, that
/// candidate's answer is a refusal and the helper exits; where it found
/// itself changed before a candidate ran (a thread left behind), it exits
/// without blaming the candidate. Either way the next request goes to a
/// fresh helper, and the candidate of the second case is compiled again
/// there.
pub struct Helper {
    config: HelperConfig,
    process: Process,
    versions: Versions,
    /// The helper's last answer said it exits: start a fresh one before
    /// the next request.
    stale: bool,
    restarts: u32,
    integrity_seconds: Option<f64>,
    confinement: String,
}

/// One helper process and the pipes to it.
struct Process {
    child: Child,
    stdin: ChildStdin,
    answers: mpsc::Receiver<std::io::Result<String>>,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Helper {
    /// Start the helper and ask its versions: an interpreter without
    /// Triton is an error saying how to get it.
    pub fn start(config: HelperConfig) -> Result<Helper, TritonError> {
        match Self::start_once(config.clone()) {
            Err(e) if config.confine => {
                // Perhaps the confinement: without it, and say so.
                let mut open = config;
                open.confine = false;
                let mut helper = Self::start_once(open)?;
                helper.confinement = format!(
                    "none: a helper confined to the interpreter, system libraries and its scratch directory did not start ({e})"
                );
                Ok(helper)
            }
            other => other,
        }
    }

    fn start_once(config: HelperConfig) -> Result<Helper, TritonError> {
        let (process, confinement) = spawn(&config)?;
        let mut helper = Helper {
            config,
            process,
            versions: Versions {
                python: String::new(),
                triton: String::new(),
            },
            stale: false,
            restarts: 0,
            integrity_seconds: None,
            confinement,
        };
        helper.versions = helper.ask_versions()?;
        Ok(helper)
    }

    fn ask_versions(&mut self) -> Result<Versions, TritonError> {
        let python = self.config.python.clone();
        let answer = self
            .request(&serde_json::json!({"op": "version"}))
            .map_err(|e| match e {
                TritonError::Protocol(m) => TritonError::Missing {
                    python: python.clone(),
                    message: m,
                },
                other => other,
            })?;
        match (answer.ok, answer.python, answer.triton) {
            (true, Some(python), Some(triton)) => Ok(Versions { python, triton }),
            _ => Err(TritonError::Missing {
                python,
                message: answer
                    .reason
                    .unwrap_or_else(|| "no version".into())
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .to_string(),
            }),
        }
    }

    /// Replace the helper process with a fresh one.
    fn restart(&mut self) -> Result<(), TritonError> {
        let (process, confinement) = spawn(&self.config)?;
        // Dropping the old process kills and reaps it.
        self.process = process;
        self.confinement = confinement;
        self.stale = false;
        self.restarts += 1;
        self.versions = self.ask_versions()?;
        Ok(())
    }

    /// Whether the helper process has exited (a timeout killed it, it
    /// crashed, or it found its state changed).
    fn exited(&mut self) -> bool {
        matches!(self.process.child.try_wait(), Ok(Some(_)))
    }

    /// How many times this helper was replaced by a fresh process.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Seconds the helper spent checking its own state after the last
    /// compile request (None before the first).
    pub fn integrity_seconds(&self) -> Option<f64> {
        self.integrity_seconds
    }

    /// How the helper's files are confined beyond its parent's sandbox:
    /// "landlock ABI N: ...", or "none ..." with the reason.
    pub fn confinement(&self) -> &str {
        &self.confinement
    }

    pub fn versions(&self) -> &Versions {
        &self.versions
    }

    /// Check and compile `source`'s entry points for compute capability
    /// `arch` (90 for an H100). A refused candidate is `Ok(Rejected)`.
    pub fn compile(
        &mut self,
        source: &str,
        kernels: &[KernelRequest],
        arch: u32,
    ) -> Result<Compiled, TritonError> {
        let request = serde_json::json!({
            "op": "compile",
            "source": source,
            "arch": arch,
            "kernels": kernels.iter().map(|k| serde_json::json!({
                "name": k.name,
                "params": k.params,
                "num_warps": k.num_warps,
                "num_stages": k.num_stages,
                "constexprs": k.constexprs,
            })).collect::<Vec<_>>(),
        });
        if self.stale || self.exited() {
            self.restart()?;
        }
        let mut answer = self.request(&request)?;
        if answer.restart && !answer.ok && answer.stage.as_deref() == Some("helper") {
            // Changed before this candidate ran: not its doing. Once more
            // on a fresh helper.
            self.restart()?;
            answer = self.request(&request)?;
        }
        self.stale = answer.restart;
        self.integrity_seconds = answer.integrity_seconds;
        if !answer.ok {
            let stage = answer.stage.unwrap_or_else(|| "helper".into());
            let reason = answer.reason.unwrap_or_default();
            if stage == "helper" {
                return Err(TritonError::Protocol(reason));
            }
            return Ok(Compiled::Rejected { stage, reason });
        }
        let mut out = Vec::new();
        for k in answer.kernels {
            let cubin = std::fs::read(&k.cubin).map_err(|e| TritonError::Io {
                path: k.cubin.clone(),
                message: e.to_string(),
            })?;
            let _ = std::fs::remove_file(&k.cubin);
            out.push(CompiledKernel {
                name: k.name,
                cubin,
                num_warps: k.num_warps,
                num_ctas: k.num_ctas,
                shared: k.shared,
                global_scratch_size: k.global_scratch_size,
                global_scratch_align: k.global_scratch_align,
                profile_scratch_size: k.profile_scratch_size,
                constexprs: k.constexprs,
                arg_names: k.arg_names,
            });
        }
        Ok(Compiled::Kernels {
            kernels: out,
            seconds: answer.seconds,
        })
    }

    fn request(&mut self, request: &serde_json::Value) -> Result<Answer, TritonError> {
        let mut line = request.to_string();
        line.push('\n');
        let process = &mut self.process;
        process
            .stdin
            .write_all(line.as_bytes())
            .and_then(|_| process.stdin.flush())
            .map_err(|e| TritonError::Protocol(format!("cannot send a request: {e}")))?;
        let timeout = self.config.request_timeout;
        match process.answers.recv_timeout(timeout) {
            Ok(Ok(text)) => serde_json::from_str(&text).map_err(|e| {
                TritonError::Protocol(format!("an unreadable answer ({e}): {text:.200}"))
            }),
            Ok(Err(e)) => Err(TritonError::Protocol(e.to_string())),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = process.child.kill();
                Err(TritonError::Timeout(timeout))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = process
                    .child
                    .wait()
                    .map(|s| s.to_string())
                    .unwrap_or_default();
                Err(TritonError::Protocol(format!(
                    "the helper exited ({status})"
                )))
            }
        }
    }
}

/// Write the helper's source into its scratch directory (again: a fresh
/// copy for every process) and start it, confined to what compiling
/// needs where [`HelperConfig::confine`] asks and the kernel can.
fn spawn(config: &HelperConfig) -> Result<(Process, String), TritonError> {
    std::fs::create_dir_all(&config.scratch).map_err(|e| TritonError::Io {
        path: config.scratch.clone(),
        message: e.to_string(),
    })?;
    let script = config.scratch.join("kevo_triton_helper.py");
    std::fs::write(&script, HELPER_PY).map_err(|e| TritonError::Io {
        path: script.clone(),
        message: e.to_string(),
    })?;
    let mut command = Command::new(&config.python);
    command
        .arg(&script)
        .arg(&config.scratch)
        .current_dir(&config.scratch)
        .env_clear()
        .envs(kevo_sandbox::env::allowed_environment(std::env::vars_os()))
        .env("HOME", &config.scratch)
        .env("TMPDIR", &config.scratch)
        .env("TRITON_CACHE_DIR", config.scratch.join("cache"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    limit_memory(&mut command, config.memory_bytes);
    let confinement = if config.confine {
        confine::files(&mut command, &config.python, &config.scratch)
            .unwrap_or_else(|| "none (Landlock is not available here)".into())
    } else {
        "none (not asked)".into()
    };
    let mut child = command.spawn().map_err(|e| TritonError::Start {
        python: config.python.clone(),
        message: e.to_string(),
    })?;
    let stdin = child.stdin.take().expect("piped");
    let stdout: ChildStdout = child.stdout.take().expect("piped");
    let (send, answers) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    Ok((
        Process {
            child,
            stdin,
            answers,
        },
        confinement,
    ))
}

/// Cap the helper's heap before it starts (RLIMIT_DATA, as the worker's
/// own limit: address-space limits break allocators that reserve).
fn limit_memory(command: &mut Command, bytes: u64) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; nothing else runs
        // between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: bytes as libc::rlim_t,
                    rlim_max: bytes as libc::rlim_t,
                };
                libc::setrlimit(libc::RLIMIT_DATA, &limit);
                Ok(())
            });
        }
    }
}
