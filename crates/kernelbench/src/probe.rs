//! What the Python probe (python/probe.py) reports about one problem.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::KernelBenchError;

/// The probe's source, written to a scratch file and run by the problem's
/// interpreter: kevo itself needs no Python for anything else.
pub const PROBE_PY: &str = include_str!("../python/probe.py");

/// How the probe is run.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// The interpreter with torch (and numpy), e.g. `python3`.
    pub python: String,
    /// Where the reference runs while probing: `cpu` or `cuda`.
    pub device: String,
    /// Time the eager module on `device`.
    pub time: bool,
    /// Time torch.compile's module too (its compilation takes tens of
    /// seconds per problem).
    pub compile: bool,
    /// The check's tolerance tau is `margin` times the worst error of the
    /// honest variants, and at least `floor` ([`ProbedCheck`]).
    pub margin: f64,
    pub floor: f64,
    /// How long one problem's probe may run before it is stopped and the
    /// problem reported as failed: a module that hangs (a deadlock in a
    /// custom op, a forward() that never returns) must not stall the import.
    /// Probes took about 16 s each on the H100 (Level 1: 20 in 321 s with
    /// eager timing; torch.compile adds tens of seconds).
    pub timeout: Duration,
}

/// A module-level constant of the problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Constant {
    Bool(bool),
    Int(i64),
    Float(f64),
}

/// The distribution a tensor's values were drawn from, as fitted; `fit`
/// in [0, 1] says how well (1 for exact kinds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Distribution {
    Constant { value: f64, fit: f64 },
    Integers { low: i64, high: i64, fit: f64 },
    Uniform { low: f64, high: f64, fit: f64 },
    Normal { mean: f64, std: f64, fit: f64 },
}

impl Distribution {
    pub fn fit(&self) -> f64 {
        match self {
            Distribution::Constant { fit, .. }
            | Distribution::Integers { fit, .. }
            | Distribution::Uniform { fit, .. }
            | Distribution::Normal { fit, .. } => *fit,
        }
    }
}

/// An input of forward(): a tensor, or a number passed as is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedInput {
    pub name: String,
    #[serde(default)]
    pub dtype: Option<String>,
    #[serde(default)]
    pub shape: Option<Vec<u64>>,
    #[serde(default)]
    pub dist: Option<Distribution>,
    #[serde(default)]
    pub scalar: Option<serde_json::Value>,
    /// `upper`, `lower` or `symmetric`: the last two axes hold square
    /// matrices of that kind, which kevo must draw alike.
    #[serde(default)]
    pub structure: Option<String>,
}

/// A parameter or buffer of the module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedState {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub dist: Distribution,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedOutput {
    pub dtype: String,
    pub shape: Vec<u64>,
    #[serde(default)]
    pub absmax: Option<f64>,
    #[serde(default)]
    pub absmean: Option<f64>,
    #[serde(default)]
    pub std: Option<f64>,
}

/// The constants and shapes of one size of the problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedSize {
    #[serde(default)]
    pub globals: BTreeMap<String, Constant>,
    #[serde(default)]
    pub inputs: Vec<Vec<u64>>,
    #[serde(default)]
    pub state: BTreeMap<String, Vec<u64>>,
    #[serde(default)]
    pub outputs: Vec<Vec<u64>>,
    /// torch's flop count of this size, where it has a counter.
    #[serde(default)]
    pub flops: Option<u64>,
    /// The aten ops forward() runs at this size, in order (`addmm`,
    /// `native_batch_norm`, ...): where a reduction follows a contraction
    /// a kernel needs stages.
    #[serde(default)]
    pub ops: Vec<String>,
    /// The shape of the largest tensor forward() makes at this size: what
    /// a staged kernel's intermediates need.
    #[serde(default)]
    pub largest: Vec<u64>,
    /// Why this size could not be made (its batch cannot change).
    #[serde(default)]
    pub error: Option<String>,
}

/// What a null candidate would get away with, and how the output depends
/// on its inputs (measured by the probe with KernelBench's 1e-4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedScreen {
    /// All zeros passes.
    pub zero: bool,
    /// The output's mean everywhere passes.
    #[serde(rename = "const")]
    pub constant: bool,
    /// An input of the output's shape passes.
    pub ident: bool,
    /// Two runs agree.
    pub det: bool,
    /// The output for other inputs is the same.
    pub inpindep: bool,
    /// The output with other weights is the same (modules with weights).
    #[serde(default)]
    pub wtindep: Option<bool>,
    /// Output axes along which it is constant.
    #[serde(default)]
    pub flat_axes: Vec<usize>,
    /// The null candidates (`zero`, `const`, `ident`) that pass kevo's own
    /// check of the folder, with the import's tolerances.
    #[serde(default)]
    pub kevo: Vec<String>,
}

/// One variant's error against the reference: the largest
/// |v - ref| / (|ref| + rms(ref)) (`None`: infinite, a NaN or a shape
/// that differs), or why the variant could not run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum VariantError {
    // First: `Ran`'s one field is optional, so it would take any object.
    Failed { error: String },
    Ran { normalized: Option<f64> },
}

/// The check of one output and why: exact, or every element within tau.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedCheck {
    pub exact: bool,
    /// Why exact: an integer output, or a selection of input values.
    #[serde(default)]
    pub why: Option<String>,
    /// max(margin x honest_worst, floor); `|got - ref| <= tau (|ref| +
    /// rms(ref))` for every element.
    #[serde(default)]
    pub tau: Option<f64>,
    /// The worst normalized error of the honest variants (`None`: one of
    /// them was not finite).
    #[serde(default)]
    pub honest_worst: Option<f64>,
    /// About how many terms a naive kernel sums per output element; tau
    /// is at least a naive float32 sum's error over that many.
    #[serde(default)]
    pub reduction_length: Option<f64>,
    /// The smallest normalized error of the narrower variants.
    #[serde(default)]
    pub narrow_least: Option<f64>,
    /// Every narrower variant fails the check.
    #[serde(default)]
    pub separated: bool,
    /// The narrower variants the check cannot tell from float32 (their
    /// error is within tau): a long sum of positive terms averages the
    /// rounding of narrower inputs away, as it averages float32's own.
    #[serde(default)]
    pub not_separated: Vec<String>,
}

/// How one output's check was derived: the variants and the check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedTolerance {
    /// float64, and float32 on the CPU where the reference runs on a GPU.
    pub honest: BTreeMap<String, VariantError>,
    /// bfloat16, float16, TF32 (on a GPU), bf16 and fp16 storage.
    pub narrow: BTreeMap<String, VariantError>,
    pub check: ProbedCheck,
}

/// Timed runs of a forward, in milliseconds, or why they failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Timing {
    Ran {
        median: f64,
        min: f64,
        max: f64,
        runs: u32,
    },
    Failed {
        error: String,
    },
}

impl Timing {
    pub fn median_ms(&self) -> Option<f64> {
        match self {
            Timing::Ran { median, .. } => Some(*median),
            Timing::Failed { .. } => None,
        }
    }
}

/// The probe's report on one problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    pub torch: String,
    pub device: String,
    /// Module-level constants in the order the file defines them.
    pub globals: Vec<(String, Constant)>,
    pub forward: Vec<String>,
    pub inputs: Vec<ProbedInput>,
    pub state: Vec<ProbedState>,
    pub outputs: Vec<ProbedOutput>,
    /// The constant that sets the batch, if one was found.
    #[serde(default)]
    pub batch: Option<String>,
    /// "full", and where the batch can change "held_out", "smoke" and
    /// "smoke_held_out".
    pub sizes: BTreeMap<String, ProbedSize>,
    pub screen: ProbedScreen,
    /// Per output, its check and how it was derived.
    pub tolerance: Vec<ProbedTolerance>,
    /// State entries no output depends on (a batch norm's running
    /// statistics in training mode): not counted in the work model.
    #[serde(default)]
    pub unread_state: Vec<String>,
    #[serde(default)]
    pub flops: Option<u64>,
    #[serde(default)]
    pub eager_ms: Option<Timing>,
    #[serde(default)]
    pub compile_ms: Option<Timing>,
}

/// Run the probe on `problem` with `options.python` and read its report.
/// `scratch` holds the probe's source.
pub fn probe(
    problem: &Path,
    options: &ProbeOptions,
    scratch: &Path,
) -> Result<Probe, KernelBenchError> {
    let script = scratch.join("kevo_kernelbench_probe.py");
    if !script.exists() {
        std::fs::write(&script, PROBE_PY).map_err(|e| KernelBenchError::Io {
            path: script.clone(),
            message: e.to_string(),
        })?;
    }
    let mut command = Command::new(&options.python);
    command
        .arg(&script)
        .arg(problem)
        .args(["--device", &options.device])
        .args(["--tolerance-margin", &options.margin.to_string()])
        .args(["--tolerance-floor", &options.floor.to_string()]);
    if options.time {
        command.arg("--time");
        if options.compile {
            command.arg("--compile");
        }
    }
    let (status, stdout, stderr) =
        run_bounded(&mut command, options.timeout).map_err(|e| KernelBenchError::Python {
            python: options.python.clone(),
            message: e.to_string(),
        })?;
    let Some(status) = status else {
        return Err(KernelBenchError::Probe {
            problem: problem.to_path_buf(),
            message: format!(
                "the probe ran longer than {} s and was stopped (--probe-timeout){}",
                options.timeout.as_secs(),
                match trimmed_tail(&stderr) {
                    tail if tail.is_empty() => String::new(),
                    tail => format!(":\n{tail}"),
                }
            ),
        });
    };
    if !status.success() {
        return Err(KernelBenchError::Probe {
            problem: problem.to_path_buf(),
            message: trimmed_tail(&stderr),
        });
    }
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_default();
    serde_json::from_str(line).map_err(|e| KernelBenchError::Probe {
        problem: problem.to_path_buf(),
        message: format!("the probe's report is unreadable ({e})"),
    })
}

/// Run `command` to its end or to `limit`, whichever comes first, and
/// return its status (`None` when it was stopped), stdout and stderr. The
/// command leads its own process group, and the whole group is killed when
/// the command ends or at the limit: torch.compile's worker processes
/// would otherwise keep the pipes open after the interpreter is gone. It
/// dies with kevo too (it no longer gets the terminal's Ctrl-C).
fn run_bounded(
    command: &mut Command,
    limit: Duration,
) -> std::io::Result<(Option<std::process::ExitStatus>, String, String)> {
    // SAFETY: prctl is async-signal-safe; the closure allocates nothing.
    #[cfg(target_os = "linux")]
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped")));
    let started = Instant::now();
    let group = -(child.id() as i32);
    // SAFETY: kill(2) with a negative pid signals the process group the
    // child leads (process_group(0) above), and nothing else.
    let kill_group = || unsafe {
        libc::kill(group, libc::SIGKILL);
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                // What the command left behind goes with it.
                kill_group();
                break Some(status);
            }
            Ok(None) if started.elapsed() > limit => {
                kill_group();
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                kill_group();
                let _ = child.wait();
                return Err(e);
            }
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok((status, stdout, stderr))
}

/// The last lines of a Python error, which name what went wrong.
fn trimmed_tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(6)..];
    tail.join("\n")
}

/// aten ops that contract (a matrix product or a convolution).
const CONTRACTIONS: &[&str] = &[
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "addbmm",
    "matmul",
    "linear",
    "convolution",
    "_convolution",
    "cudnn_convolution",
    "convolution_overrideable",
];

/// aten ops whose every output element depends on many elements of their
/// input: normalizations, softmax and reductions.
const REDUCTIONS: &[&str] = &[
    "native_batch_norm",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_functional",
    "_native_batch_norm_legit_no_training",
    "native_group_norm",
    "native_layer_norm",
    "_softmax",
    "_log_softmax",
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "logsumexp",
    "var",
    "var_mean",
    "std",
    "std_mean",
    "norm",
    "linalg_vector_norm",
    "prod",
    "cumsum",
    "argmax",
    "argmin",
];

/// How many kernels in sequence a problem's forward() with `ops` needs:
/// two where a reduction follows a contraction (a GEMM then a batch norm:
/// every output needs statistics of the whole product, which one thread
/// per output could only get by recomputing it), else one.
pub fn stages_needed(ops: &[String]) -> usize {
    let contraction = ops
        .iter()
        .position(|op| CONTRACTIONS.contains(&op.as_str()));
    match contraction {
        Some(at)
            if ops[at + 1..]
                .iter()
                .any(|op| REDUCTIONS.contains(&op.as_str())) =>
        {
            2
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_with_every_kind_of_distribution_and_timing() {
        let text = r#"{"torch": "2.4", "device": "cpu", "globals": [["batch_size", 16], ["eps", 1e-5], ["flag", true]],
            "forward": ["x"], "inputs": [{"name": "x", "dtype": "float32", "shape": [16, 8],
            "dist": {"kind": "normal", "mean": 0.0, "std": 1.0, "fit": 0.98}}],
            "state": [{"name": "bn.num_batches_tracked", "dtype": "int64", "shape": [], "dist": {"kind": "constant", "value": 0.0, "fit": 1.0}},
                      {"name": "w", "dtype": "float32", "shape": [8], "dist": {"kind": "uniform", "low": -0.3, "high": 0.3, "fit": 0.9}},
                      {"name": "t", "dtype": "int64", "shape": [4], "dist": {"kind": "integers", "low": 0, "high": 10, "fit": 1.0}}],
            "outputs": [{"dtype": "float32", "shape": [16, 8], "absmax": 3.0, "absmean": 0.8, "std": 1.0}],
            "batch": "batch_size",
            "sizes": {"full": {"globals": {"batch_size": 16}, "inputs": [[16, 8]], "state": {"w": [8]}, "outputs": [[16, 8]]},
                      "held_out": {"error": "ValueError: no"}},
            "screen": {"zero": false, "const": false, "ident": false, "det": true, "inpindep": false, "flat_axes": []},
            "tolerance": [{"honest": {"float64": {"normalized": 2e-7}}, "narrow": {"float16": {"normalized": null},
                "tf32": {"error": "RuntimeError: no"}, "bf16 storage": {"normalized": 2e-3}},
                "check": {"exact": false, "tau": 1e-5, "honest_worst": 2e-7, "narrow_least": 2e-3, "separated": true}}],
            "flops": null, "eager_ms": {"median": 0.5, "min": 0.4, "max": 0.9, "runs": 20},
            "compile_ms": {"error": "AttributeError: module 'torch' has no attribute 'compile'"}}"#;
        let p: Probe = serde_json::from_str(text).unwrap();
        assert_eq!(p.state.len(), 3);
        assert!(matches!(
            p.state[2].dist,
            Distribution::Integers { high: 10, .. }
        ));
        assert_eq!(p.eager_ms.as_ref().and_then(Timing::median_ms), Some(0.5));
        assert!(matches!(p.compile_ms, Some(Timing::Failed { .. })));
        assert!(p.sizes["held_out"].error.is_some());
        let t = &p.tolerance[0];
        assert_eq!(t.check.tau, Some(1e-5));
        assert!(t.check.separated && t.check.not_separated.is_empty());
        assert_eq!(
            t.narrow["float16"],
            VariantError::Ran { normalized: None },
            "infinite"
        );
        assert!(matches!(t.narrow["tf32"], VariantError::Failed { .. }));
        assert_eq!(
            p.globals,
            vec![
                ("batch_size".to_string(), Constant::Int(16)),
                ("eps".to_string(), Constant::Float(1e-5)),
                ("flag".to_string(), Constant::Bool(true)),
            ],
            "the file's order is kept"
        );
    }

    #[test]
    fn a_probe_that_hangs_is_stopped_with_its_children_at_the_limit() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // An "interpreter" that never ends, with a child of its own that
        // holds stdout open: killing the interpreter alone would leave the
        // reader waiting the child's 60 s.
        let python = dir.path().join("python");
        std::fs::write(
            &python,
            "#!/bin/sh\necho 'probing' >&2\nsleep 60 &\nsleep 60\n",
        )
        .unwrap();
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
        let options = ProbeOptions {
            python: python.display().to_string(),
            device: "cpu".into(),
            time: false,
            compile: false,
            margin: 16.0,
            floor: 1e-5,
            timeout: Duration::from_secs(1),
        };
        let started = Instant::now();
        let error = probe(Path::new("1_Hang.py"), &options, dir.path()).unwrap_err();
        let waited = started.elapsed();
        let text = error.to_string();
        assert!(matches!(error, KernelBenchError::Probe { .. }), "{text}");
        assert!(text.contains("longer than 1 s"), "{text}");
        assert!(text.contains("probing"), "the stderr tail is kept: {text}");
        assert!(waited < Duration::from_secs(20), "took {waited:?}");
    }

    #[test]
    fn what_a_probe_leaves_running_goes_with_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // Ends at once, printing a report, with a child that would hold
        // stdout open for 60 s.
        let python = dir.path().join("python");
        std::fs::write(&python, "#!/bin/sh\nsleep 60 &\necho '{}'\nexit 3\n").unwrap();
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
        let started = Instant::now();
        let (status, stdout, _) =
            run_bounded(&mut Command::new(&python), Duration::from_secs(30)).unwrap();
        assert_eq!(status.and_then(|s| s.code()), Some(3));
        assert_eq!(stdout.trim(), "{}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_reduction_after_a_contraction_needs_two_stages() {
        let ops = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            stages_needed(&ops(&["t", "addmm", "native_batch_norm", "add"])),
            2
        );
        assert_eq!(
            stages_needed(&ops(&["t", "addmm", "native_group_norm", "hardtanh"])),
            2
        );
        // An epilogue of elementwise ops fuses into one kernel.
        assert_eq!(stages_needed(&ops(&["t", "addmm", "mul", "leaky_relu"])), 1);
        // A reduction alone, or before the contraction, is one kernel too.
        assert_eq!(stages_needed(&ops(&["sum", "mm"])), 1);
        assert_eq!(stages_needed(&ops(&["_softmax"])), 1);
        assert_eq!(stages_needed(&[]), 1);
    }
}
