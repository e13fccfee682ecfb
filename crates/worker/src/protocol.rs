//! The framed protocol between the coordinator and a worker: one JSON object
//! per line. Requests arrive on stdin; replies leave on a private pipe the
//! coordinator hands the worker as an extra file descriptor (`--protocol-fd`),
//! never on stdout: device `printf` and driver messages go to fd 1, and a
//! kernel that prints a well-formed result line must not be able to forge
//! its own (or a later candidate's) result. The worker points fd 1 at stderr,
//! which the coordinator only keeps the tail of for diagnostics.
//!
//! Every request carries a fresh 128-bit nonce that its progress and result
//! replies must echo; the coordinator treats a reply with a wrong nonce, an
//! unknown id, or a second result for one request as a protocol violation
//! and replaces the worker.

use kevo_backend::{CompileOptions, DeviceInfo, DeviceSelector};
use kevo_eval::{EvalConfig, Evaluation, VendorBaseline};
use kevo_roofline::Ceilings;
use kevo_tasks::Size;
use serde::{Deserialize, Serialize};

use crate::limits::Limits;
use kevo_runtimes::BackendKind;

/// How timings are taken: the launch mode and cache state (CUDA only;
/// OpenCL ignores both) and how many runs are timed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TimingOptions {
    /// Replay each size's launch sequence as one CUDA graph (the default):
    /// launch jitter stops dominating small sizes. On an H100 the seeds'
    /// IQR/median at full sizes is 5-15% with stream launches at heat2d
    /// 256², lbm and morton N32, and under 1% as graphs (BENCHMARKS.md).
    pub cuda_graph: bool,
    /// Flush the L2 cache before every timed run, outside the timed region,
    /// so a size that fits in L2 is not timed warm.
    pub flush_l2: bool,
    /// Repeat timed runs until (q3 - q1) / median is at most this
    /// (default 0.01) ...
    pub target_spread: Option<f64>,
    /// ... or this many runs were timed (default 50).
    pub max_timed_runs: Option<usize>,
}

impl TimingOptions {
    /// The part of these options that is fixed when the backend opens.
    pub fn open_options(&self) -> kevo_runtimes::OpenOptions {
        kevo_runtimes::OpenOptions {
            cuda_graph: self.cuda_graph,
            flush_l2: self.flush_l2,
            ..Default::default()
        }
    }
}

impl Default for TimingOptions {
    fn default() -> Self {
        TimingOptions {
            cuda_graph: true,
            flush_l2: false,
            target_spread: None,
            max_timed_runs: None,
        }
    }
}

/// Everything a worker needs to open its device and evaluate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerConfig {
    pub backend: BackendKind,
    #[serde(default)]
    pub selector: DeviceSelector,
    #[serde(default)]
    pub eval: EvalConfig,
    #[serde(default)]
    pub timing: TimingOptions,
    #[serde(default)]
    pub limits: Limits,
    /// Ceilings to score against instead of the datasheet or a measurement.
    #[serde(default)]
    pub declared_ceilings: Option<DeclaredCeilings>,
    /// How the worker confines itself before it opens the device.
    #[serde(default)]
    pub sandbox: kevo_sandbox::Options,
    /// Ceilings measured earlier, by device cache key: the coordinator
    /// reads kevo's cache, since a confined worker reads no file of the
    /// user's.
    /// Test-only: files the worker tries to read once confined, as a
    /// compiler bug or native code on a CPU device would; the answers come
    /// back in `Ready::self_test` with the worker's environment names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub self_test_reads: Vec<std::path::PathBuf>,
    /// Test-only: Unix sockets the worker tries to connect to once
    /// confined and its device open, from its main thread, a new thread and
    /// a child process; the answers come back in `Ready::self_test`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub self_test_connects: Vec<std::path::PathBuf>,
    #[serde(default)]
    pub known_measurements: std::collections::BTreeMap<String, kevo_roofline::Measurement>,
    /// The interpreter with Triton installed, for the Triton backend;
    /// `None` is kevo_triton's default (`$KEVO_TRITON_PYTHON`, then
    /// `~/.cache/kevo/triton-venv`, then `python3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton_python: Option<String>,
}

/// The roofline a user declares for the device (`--ceilings`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeclaredCeilings {
    pub bandwidth_gbs: f64,
    pub fp32_gflops: f64,
}

impl DeclaredCeilings {
    pub fn ceilings(self) -> kevo_roofline::Ceilings {
        kevo_roofline::Ceilings {
            bandwidth_gbs: self.bandwidth_gbs,
            fp32_gflops: self.fp32_gflops,
            source: kevo_roofline::CeilingSource::Declared,
            // Declared figures replace the measurement, hierarchy included:
            // a measured one would describe another roofline.
            hierarchy: None,
            launch_overhead: None,
        }
    }
}

impl WorkerConfig {
    pub fn new(backend: BackendKind, selector: DeviceSelector) -> Self {
        WorkerConfig {
            backend,
            selector,
            eval: EvalConfig::default(),
            timing: TimingOptions::default(),
            limits: Limits::default(),
            declared_ceilings: None,
            sandbox: kevo_sandbox::Options::default(),
            known_measurements: Default::default(),
            self_test_reads: Vec::new(),
            self_test_connects: Vec::new(),
            triton_python: None,
        }
    }

    pub fn with_triton_python(mut self, python: Option<String>) -> Self {
        self.triton_python = python;
        self
    }

    /// Draw inputs from `secret`; `None` leaves it to [`crate::Worker::start`].
    pub fn with_inputs_secret(mut self, secret: Option<kevo_eval::InputSecret>) -> Self {
        self.eval.inputs_secret = secret;
        self
    }

    pub fn with_compile(mut self, compile: CompileOptions) -> Self {
        self.eval.compile = compile;
        self
    }

    pub fn with_timing(mut self, timing: TimingOptions) -> Self {
        self.timing = timing;
        if let Some(s) = timing.target_spread {
            self.eval.target_spread = s;
        }
        if let Some(n) = timing.max_timed_runs {
            self.eval.max_timed_runs = n.max(self.eval.timed_runs);
        }
        self
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn with_sandbox(mut self, sandbox: kevo_sandbox::Options) -> Self {
        self.sandbox = sandbox;
        self
    }

    pub fn with_declared_ceilings(mut self, ceilings: Option<DeclaredCeilings>) -> Self {
        self.declared_ceilings = ceilings;
        self
    }
}

/// What a confined worker could reach (test-only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SelfTest {
    /// For each path asked about: the bytes read, or the error.
    pub reads: Vec<(std::path::PathBuf, Result<usize, String>)>,
    /// Names of the worker's environment variables.
    pub environment: Vec<String>,
    /// For each socket in `WorkerConfig::self_test_connects`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connects: Vec<ConnectProbe>,
}

/// Whether a confined worker could connect to a Unix socket (test-only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectProbe {
    pub path: std::path::PathBuf,
    /// From the worker's main thread, after its device opened.
    pub main_thread: Result<(), String>,
    /// From a thread started after the device opened, as the drivers' and
    /// PoCL's work-item threads are.
    pub new_thread: Result<(), String>,
    /// From a child process: the Triton interpreter on the Triton backend,
    /// else /usr/bin/python3; None where that is missing.
    pub child: Option<Result<(), String>>,
}

/// Coordinator -> worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    Evaluate {
        id: u64,
        /// Unguessable; echoed by every reply to this request.
        nonce: String,
        task: String,
        /// The coordinator's [`kevo_tasks::Task::content_hash`]: a worker
        /// whose task of this name differs refuses the job instead of
        /// scoring another problem.
        #[serde(default)]
        task_hash: Option<String>,
        /// The kernel, with its hash and dialect: the worker refuses one
        /// whose hash does not match or that its backend does not compile,
        /// and names the hash in its evaluation.
        candidate: kevo_eval::Candidate,
        sizes: Vec<Size>,
        /// The verification seed (index into the pool) to use, where the
        /// coordinator chose it because it shipped only that seed's
        /// expected outputs; the worker's own rotation otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verify_index: Option<u64>,
    },
    /// Run the vendor library's version of the task's job at `sizes`
    /// (cuFFT for fft3d on CUDA) as a baseline for its kernels: in the
    /// worker, so a library that crashes takes down a replaceable process.
    Baseline {
        id: u64,
        nonce: String,
        task: String,
        #[serde(default)]
        task_hash: Option<String>,
        sizes: Vec<Size>,
    },
    /// Define a task folder (or add expected outputs to one); no reply.
    /// Sent before the first evaluation of the task in this process.
    Define { package: Box<TaskPackage> },
}

/// Bytes, carried in JSON as base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob(pub Vec<u8>);

impl Serialize for Blob {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use base64::Engine;
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map(Blob)
            .map_err(serde::de::Error::custom)
    }
}

/// A task folder sent to a worker, which reads no file of the user's: its
/// files (the first time), and expected outputs the coordinator computed
/// for a command or golden reference, keyed by size and input fingerprint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskPackage {
    pub name: String,
    /// [`kevo_tasks::Task::content_hash`] of the folder: the worker's copy
    /// must hash the same.
    pub hash: String,
    /// The folder's path on the coordinator, for messages.
    pub root: String,
    /// Every file of the folder; absent when the worker has it already.
    #[serde(default)]
    pub files: Option<std::collections::BTreeMap<String, Blob>>,
    #[serde(default)]
    pub expected: Vec<ExpectedEntry>,
}

/// The expected outputs of one problem (in the order of its outputs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpectedEntry {
    pub size: String,
    pub fingerprint: String,
    /// Outputs carried in the JSON line (base64).
    #[serde(default)]
    pub outputs: Vec<Blob>,
    /// Byte lengths of outputs that follow the request's line raw, entry
    /// after entry, in this order. KernelBench outputs at full size are
    /// hundreds of MB: two of 535 MB took 10.0 s through a pipe as base64
    /// JSON and 2.0 s as raw bytes (dev VM, docs/BENCHMARKS.md).
    #[serde(default)]
    pub attached: Vec<u64>,
}

impl Request {
    /// The request as its line, then the raw bytes it announces
    /// (`ExpectedEntry::attached`).
    pub fn write_to(
        &self,
        attachments: &[&[u8]],
        out: &mut impl std::io::Write,
    ) -> std::io::Result<()> {
        // The reader trusts the announced lengths: bytes that differ would
        // be read as the next request.
        let announced: Vec<u64> = match self {
            Request::Define { package } => package
                .expected
                .iter()
                .flat_map(|e| e.attached.iter().copied())
                .collect(),
            _ => Vec::new(),
        };
        let given: Vec<u64> = attachments.iter().map(|a| a.len() as u64).collect();
        if announced != given {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the request announces attachments of {announced:?} bytes, given {given:?}"
                ),
            ));
        }
        let mut line = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        line.push(b'\n');
        out.write_all(&line)?;
        for bytes in attachments {
            out.write_all(bytes)?;
        }
        out.flush()
    }

    /// Read one request from `input`: its line, then the raw bytes its
    /// entries announce, moved into their `outputs`. `Ok(None)` at the end
    /// of the input; `Ok(Some(Err(..)))` for a line that is not a request
    /// this build reads (the bytes it announces, if any, are skipped).
    pub fn read_from(
        input: &mut impl std::io::BufRead,
    ) -> std::io::Result<Option<Result<Request, serde_json::Error>>> {
        let mut line = Vec::new();
        loop {
            line.clear();
            if input.read_until(b'\n', &mut line)? == 0 {
                return Ok(None);
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                break;
            }
        }
        let mut request: Request = match serde_json::from_slice(&line) {
            Ok(r) => r,
            Err(e) => {
                // A request this build cannot read (another version's) may
                // still announce bytes: skip them, or they would be read as
                // lines.
                let announced: u64 = serde_json::from_slice::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| {
                        let entries = v.get("package")?.get("expected")?.as_array()?;
                        Some(
                            entries
                                .iter()
                                .filter_map(|e| e.get("attached")?.as_array())
                                .flatten()
                                .filter_map(serde_json::Value::as_u64)
                                .sum(),
                        )
                    })
                    .unwrap_or(0);
                std::io::copy(
                    &mut std::io::Read::take(&mut *input, announced),
                    &mut std::io::sink(),
                )?;
                return Ok(Some(Err(e)));
            }
        };
        if let Request::Define { package } = &mut request {
            for entry in &mut package.expected {
                for &length in &std::mem::take(&mut entry.attached) {
                    let mut bytes = Vec::new();
                    // A length no allocation can hold is an error, not an abort.
                    bytes.try_reserve_exact(length as usize).map_err(|e| {
                        std::io::Error::new(
                            std::io::ErrorKind::OutOfMemory,
                            format!("an attachment of {length} bytes: {e}"),
                        )
                    })?;
                    bytes.resize(length as usize, 0);
                    input.read_exact(&mut bytes)?;
                    entry.outputs.push(Blob(bytes));
                }
            }
        }
        Ok(Some(Ok(request)))
    }
}

/// Worker -> coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// The device is open and the ceilings are known.
    Ready {
        device: Box<DeviceInfo>,
        ceilings: Box<Ceilings>,
        /// Seconds from process start to ready (backend + context creation).
        startup_s: f64,
        /// The layers of confinement in force.
        #[serde(default)]
        sandbox: kevo_sandbox::Status,
        /// Ceilings measured now, for the coordinator to cache.
        #[serde(default)]
        measured: Option<Box<kevo_roofline::Measurement>>,
        /// Answers to `WorkerConfig::self_test_reads`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        self_test: Option<SelfTest>,
    },
    /// The worker could not start (no such device, no runtime).
    Fatal { message: String },
    /// Evaluation `id` is compiling its candidate (bounded by the shorter
    /// compile timeout and the compile memory limit).
    Compiling { id: u64, nonce: String },
    /// Evaluation `id` is about to run `size` (compilation is over).
    Progress {
        id: u64,
        nonce: String,
        size: String,
    },
    /// The answer to a `Baseline` request.
    Baseline {
        id: u64,
        nonce: String,
        baseline: Box<VendorBaseline>,
        /// As for `Result`: the device is unusable, the worker exits.
        #[serde(default)]
        restart: bool,
    },
    Result {
        id: u64,
        nonce: String,
        evaluation: Box<Evaluation>,
        /// The device is unusable for the rest of this process (a sticky
        /// fault); the worker exits after this reply and must be replaced.
        #[serde(default)]
        restart: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn define(expected: Vec<ExpectedEntry>) -> Request {
        Request::Define {
            package: Box::new(TaskPackage {
                name: "t".into(),
                hash: "h".into(),
                root: "/r".into(),
                files: None,
                expected,
            }),
        }
    }

    fn entry(size: &str, attached: &[&[u8]]) -> ExpectedEntry {
        ExpectedEntry {
            size: size.into(),
            fingerprint: "f".into(),
            outputs: Vec::new(),
            attached: attached.iter().map(|a| a.len() as u64).collect(),
        }
    }

    #[test]
    fn raw_outputs_follow_their_line_and_the_next_request_reads_after_them() {
        // Bytes that look like lines and JSON must not be read as requests.
        let first: &[u8] = b"\n{\"type\":\"define\"}\n\x00\xff";
        let second: &[u8] = &[7u8; 70_000];
        let third: &[u8] = b"";
        let mut wire = Vec::new();
        define(vec![entry("a", &[first, second]), entry("b", &[third])])
            .write_to(&[first, second, third], &mut wire)
            .unwrap();
        wire.extend_from_slice(b"\n  \nnot json\n");
        define(vec![entry("c", &[b"xyz"])])
            .write_to(&[b"xyz"], &mut wire)
            .unwrap();
        let mut input = std::io::Cursor::new(wire);
        let outputs = |r: Request| match r {
            Request::Define { package } => package
                .expected
                .into_iter()
                .map(|e| {
                    assert!(e.attached.is_empty(), "moved into outputs");
                    (
                        e.size,
                        e.outputs.into_iter().map(|b| b.0).collect::<Vec<_>>(),
                    )
                })
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        let got = outputs(Request::read_from(&mut input).unwrap().unwrap().unwrap());
        assert_eq!(
            got,
            vec![
                ("a".to_string(), vec![first.to_vec(), second.to_vec()]),
                ("b".to_string(), vec![Vec::new()]),
            ]
        );
        // Blank lines are skipped; a line that is not a request is an error
        // for that line only.
        assert!(Request::read_from(&mut input).unwrap().unwrap().is_err());
        let got = outputs(Request::read_from(&mut input).unwrap().unwrap().unwrap());
        assert_eq!(got, vec![("c".to_string(), vec![b"xyz".to_vec()])]);
        assert!(Request::read_from(&mut input).unwrap().is_none());
    }

    #[test]
    fn inline_outputs_from_an_older_coordinator_still_read() {
        let line = r#"{"type":"define","package":{"name":"t","hash":"h","root":"/r","expected":[{"size":"a","fingerprint":"f","outputs":["AAEC"]}]}}"#;
        let mut input = std::io::Cursor::new(format!("{line}\n").into_bytes());
        match Request::read_from(&mut input).unwrap().unwrap().unwrap() {
            Request::Define { package } => {
                assert_eq!(package.expected[0].outputs, vec![Blob(vec![0, 1, 2])]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bytes_announced_by_a_request_this_build_cannot_read_are_skipped() {
        // Another version's Define (no `hash` here) with 5 raw bytes that
        // look like a request: skipped, and the next request reads.
        let foreign = r#"{"type":"define","package":{"name":"t","root":"/r","expected":[{"size":"a","fingerprint":"f","attached":[2,3]}]}}"#;
        let mut wire = format!("{foreign}\n{{}}\n{{}}").into_bytes();
        assert_eq!(wire.len(), foreign.len() + 1 + 5);
        define(vec![entry("c", &[b"xyz"])])
            .write_to(&[b"xyz"], &mut wire)
            .unwrap();
        let mut input = std::io::Cursor::new(wire);
        assert!(Request::read_from(&mut input).unwrap().unwrap().is_err());
        match Request::read_from(&mut input).unwrap().unwrap().unwrap() {
            Request::Define { package } => assert_eq!(package.expected[0].size, "c"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn attachments_that_differ_from_the_announced_lengths_are_not_sent() {
        let mut wire = Vec::new();
        let e = define(vec![entry("a", &[b"abc"])])
            .write_to(&[b"abcd"], &mut wire)
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(wire.is_empty(), "nothing written");
    }

    #[test]
    fn a_stream_cut_inside_the_raw_bytes_is_an_error() {
        let mut wire = Vec::new();
        define(vec![entry("a", &[&[1u8; 100]])])
            .write_to(&[&[1u8; 100]], &mut wire)
            .unwrap();
        wire.truncate(wire.len() - 1);
        let mut input = std::io::Cursor::new(wire);
        assert!(Request::read_from(&mut input).is_err());
    }
}
