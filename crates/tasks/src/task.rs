use std::any::Any;
use std::sync::Arc;

use kevo_backend::{Dialect, EntryPoint, VendorOp};
use serde::{Deserialize, Serialize};

use crate::spec::{TaskDefinitionError, TaskSpec};

/// Which size table to use. `Full` is the paper's, exactly as specified;
/// `Smoke` is small enough for PoCL on a 2-core CI machine; `Large` is for
/// data-centre GPUs, whose last-level cache (50 MB on an H100) holds several
/// of the paper's full sizes: every memory-bound large size has a working
/// set of at least 256 MB (4x a 64 MB cache). Sets are never mixed in one score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SizeSet {
    Smoke,
    Full,
    Large,
}

impl std::str::FromStr for SizeSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "smoke" => Ok(SizeSet::Smoke),
            "full" => Ok(SizeSet::Full),
            "large" => Ok(SizeSet::Large),
            other => Err(format!(
                "unknown size set `{other}` (expected `smoke`, `full` or `large`)"
            )),
        }
    }
}

impl std::fmt::Display for SizeSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SizeSet::Smoke => "smoke",
            SizeSet::Full => "full",
            SizeSet::Large => "large",
        })
    }
}

/// One problem size. `dims` has a task-defined meaning (documented on each
/// task), e.g. `[N]` for saxpy or `[NX, NY, steps]` for heat2d.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Size {
    pub label: String,
    pub dims: Vec<u64>,
}

impl Size {
    pub fn new(label: &str, dims: &[u64]) -> Self {
        Size {
            label: label.to_string(),
            dims: dims.to_vec(),
        }
    }

    /// The first `N` dims as `usize`, for a task's code to destructure
    /// (`let [nx, ny, steps] = size.usize_dims();`).
    pub fn usize_dims<const N: usize>(&self) -> [usize; N] {
        std::array::from_fn(|i| self.dims[i] as usize)
    }
}

/// The in-distribution sizes (scored, shown to the proposer), the
/// held-out size (scored once at the end, never shown) and the validation
/// sizes (never shown either; with `--validate`, a candidate must pass
/// them before the search keeps it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizePlan {
    pub in_distribution: Vec<Size>,
    pub held_out: Size,
    /// Distinct from both other kinds, in shape where the task allows it
    /// (non-power-of-two extents, odd step counts): what a kernel tuned to
    /// the shown sizes is most likely to get wrong. Empty in task
    /// definitions that declare none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validation: Vec<Size>,
}

impl SizePlan {
    /// Every size of the plan: in-distribution, held-out, validation.
    pub fn all(&self) -> impl Iterator<Item = &Size> {
        self.in_distribution
            .iter()
            .chain([&self.held_out])
            .chain(&self.validation)
    }

    /// Labels the proposer must never see: the held-out and validation sizes.
    pub fn hidden_labels(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.held_out.label.as_str())
            .chain(self.validation.iter().map(|s| s.label.as_str()))
    }
}

/// Which roofline a task is scored against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CeilingKind {
    /// Peak DRAM bandwidth, work in bytes, achieved in GB/s.
    Bandwidth,
    /// Peak FP32 throughput, work in FLOPs, achieved in GFLOPS.
    Fp32,
}

impl CeilingKind {
    pub fn unit(self) -> &'static str {
        match self {
            CeilingKind::Bandwidth => "GB/s",
            CeilingKind::Fp32 => "GFLOPS",
        }
    }
}

/// Initial contents of a device buffer, restored before every run.
#[derive(Debug, Clone)]
pub enum BufferInit {
    /// Task data (inputs, initial state).
    Data(Arc<Vec<u8>>),
    /// All zero bytes (counters that accumulate over a run).
    Zero,
    /// Filled with NaN (0xFF bytes) so that anything the kernel should have
    /// written but did not fails the check.
    Sentinel,
}

/// What the kernels may do to a buffer; later checks (inputs unchanged,
/// guard regions) rely on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

#[derive(Debug, Clone)]
pub struct BufferSpec {
    pub name: String,
    pub bytes: usize,
    pub init: BufferInit,
    pub access: Access,
}

/// Block shape of a launch: `Default` may be replaced by a shape the
/// candidate declares; `Fixed` is part of the task's contract (e.g. fft3d's
/// one block per line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    Default([u32; 3]),
    Fixed([u32; 3]),
}

/// A by-value or buffer argument of a launch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg {
    /// Index into `Problem::buffers`.
    Buffer(usize),
    U32(u32),
    I32(i32),
    F32(f32),
}

/// One launch of the host program. `threads` is the number of threads the
/// task asks for per dimension (one per output element); the evaluator
/// rounds it up to a multiple of the block.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// Index into `Task::kernel_names`.
    pub kernel: usize,
    pub threads: [u64; 3],
    pub block: Block,
    pub args: Vec<Arg>,
}

/// The host program of one size: buffers with their initial contents, the
/// whole launch sequence of one run (all steps, all kernels, ping-pong
/// included), and the buffers read back for the check.
#[derive(Debug, Clone)]
pub struct Problem {
    pub buffers: Vec<BufferSpec>,
    pub launches: Vec<LaunchSpec>,
    /// Indices into `buffers`, downloaded after the verification run and
    /// passed to `Task::check` in this order.
    pub outputs: Vec<usize>,
}

/// A task's CPU reference result; its concrete type is private to the task.
pub type Reference = Arc<dyn Any + Send + Sync>;

/// The outcome of comparing a candidate's output with the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub passed: bool,
    /// The error measure, e.g. "max_abs".
    pub metric: String,
    pub value: f64,
    /// The bound `value` had to stay within; None for checks that are not a
    /// single threshold (statistical or exact-match checks).
    pub tolerance: Option<f64>,
}

/// The Rust half of a task: what cannot be data. The rest (name, sizes,
/// ceiling, work model, ...) is the task's `task.toml` ([`TaskSpec`]).
pub trait TaskCode: Send + Sync {
    /// Build the host program for `size` with inputs drawn from `seed`.
    fn problem(&self, size: &Size, seed: u64) -> Problem;
    /// The CPU reference for `problem` (built by `self.problem(size, seed)`).
    fn reference(&self, size: &Size, problem: &Problem) -> Reference;
    /// The reference for a check that looks at a sample of the outputs
    /// (hmc's exactly simulated chains), drawn with `key`: an evaluator
    /// passes a key the kernel never sees, so a kernel cannot tell which
    /// outputs will be looked at by reading its inputs. Tasks that check
    /// every output ignore it.
    fn reference_keyed(&self, size: &Size, problem: &Problem, _key: u64) -> Reference {
        self.reference(size, problem)
    }
    /// The output buffers an honest kernel writes for `problem`, as the
    /// reference computes them, where it determines every byte (nbody,
    /// hmc). The adversarial suite embeds such answers in a kernel to show
    /// that answers computed for inputs known in advance do not pass.
    fn exact_outputs(&self, _size: &Size, _problem: &Problem) -> Option<Vec<Vec<u8>>> {
        None
    }
    /// Compare the downloaded `outputs` with the reference.
    fn check(
        &self,
        size: &Size,
        problem: &Problem,
        reference: &Reference,
        outputs: &[Vec<u8>],
    ) -> Verdict;
    /// Bytes or FLOPs of one run at `size`, for tasks whose `task.toml`
    /// has no `work` expression (the work depends on the inputs or on
    /// constants of the code). A task with neither has no score (NaN).
    fn work(&self, _size: &Size) -> Option<f64> {
        None
    }
    /// The job of one run at `size` as a vendor library does it, on the
    /// problem's buffers (indices into `Problem::buffers`) with the result
    /// where `Problem::outputs` says: a kernel's time is then shown next to
    /// the library's (cuFFT for fft3d, cuBLAS for saxpy). None where no
    /// library does the same job.
    fn vendor_op(&self, _size: &Size) -> Option<VendorOp<usize>> {
        None
    }
}

/// Source text of a task in each kernel dialect (absent: not ported).
#[derive(Debug, Clone, Default)]
pub struct PerDialect {
    pub opencl: Option<String>,
    pub cuda: Option<String>,
    pub metal: Option<String>,
    pub triton: Option<String>,
}

impl PerDialect {
    pub fn get(&self, dialect: Dialect) -> Option<&str> {
        match dialect {
            Dialect::OpenCl => self.opencl.as_deref(),
            Dialect::Cuda => self.cuda.as_deref(),
            Dialect::Metal => self.metal.as_deref(),
            Dialect::Triton => self.triton.as_deref(),
        }
    }
}

/// What a task gives the proposer besides its metadata.
#[derive(Debug, Clone, Default)]
pub struct TaskAssets {
    /// The brief: the math, the layout, the contract.
    pub brief: String,
    /// Kernel signatures and launch rules.
    pub signatures: PerDialect,
    /// The naive seed kernels.
    pub seeds: PerDialect,
    /// The seeds' algorithms with their speed-deciding parameters exposed
    /// (`// kevo: tune`), for `kevo tune`. Not part of the task's hash: the
    /// evaluator and the prompts never read them, and a tuned kernel is
    /// stored in full with its run.
    pub tunables: PerDialect,
    /// Reference kernels, run by the evaluator on the device to compute
    /// the expected outputs (task folders with a kernel reference only).
    pub references: PerDialect,
}

/// A benchmark task: its definition ([`TaskSpec`], data), its assets and
/// its code. Everything the evaluator, the proposer and the CLI need to
/// know about a problem lives here.
pub struct Task {
    spec: TaskSpec,
    assets: TaskAssets,
    code: Arc<dyn TaskCode>,
    hash: String,
    /// The folder a user task was defined by (None for a built-in task).
    folder: Option<Arc<crate::folder::FolderCode>>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("name", &self.spec.name)
            .field("hash", &self.hash)
            .finish()
    }
}

impl Task {
    /// Assemble a task. `definition` is the `task.toml` text (`origin`
    /// names it in errors); `code_sources` is the text of the Rust that
    /// implements `code`, hashed with everything else so that a changed
    /// reference or check changes [`Task::content_hash`].
    pub fn new(
        definition: &str,
        origin: &str,
        assets: TaskAssets,
        code: Arc<dyn TaskCode>,
        code_sources: &[&str],
    ) -> Result<Task, TaskDefinitionError> {
        let spec = TaskSpec::parse(definition, origin)?;
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let mut part = |text: &str| {
            h.update((text.len() as u64).to_le_bytes());
            h.update(text.as_bytes());
        };
        part("kevo task v1");
        part(definition);
        part(&assets.brief);
        for d in [&assets.signatures, &assets.seeds] {
            for text in [&d.opencl, &d.cuda, &d.metal] {
                part(text.as_deref().unwrap_or("\0absent"));
            }
            // Hashed only where present, so a task without Triton keeps the
            // hash it had before the dialect existed.
            if let Some(text) = &d.triton {
                part("triton");
                part(text);
            }
        }
        for source in code_sources {
            part(source);
        }
        let hash = h
            .finalize()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Task {
            spec,
            assets,
            code,
            hash,
            folder: None,
        })
    }

    /// A task defined by a folder; `hash` covers every file of it.
    pub(crate) fn from_folder(
        spec: TaskSpec,
        assets: TaskAssets,
        code: Arc<crate::folder::FolderCode>,
        hash: String,
    ) -> Task {
        Task {
            spec,
            assets,
            code: code.clone(),
            hash,
            folder: Some(code),
        }
    }

    /// The folder this task was defined by, for a user task.
    pub fn folder(&self) -> Option<&crate::folder::FolderCode> {
        self.folder.as_deref()
    }

    /// What every run on this task records of where it came from: a
    /// folder's `provenance` file (a KernelBench import's record).
    pub fn provenance_record(&self) -> Option<&serde_json::Value> {
        self.folder()?.folder().provenance.as_ref()
    }

    /// The reference kernel in `dialect`, when the task's expected outputs
    /// come from running it on the device instead of from CPU code.
    pub fn device_reference(&self, dialect: Dialect) -> Option<&str> {
        self.assets.references.get(dialect)
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }
    /// Metal-Sci regime, e.g. "R1 stencil".
    pub fn regime(&self) -> &str {
        &self.spec.regime
    }
    /// The brief given to the proposer: the math, the layout, the contract.
    pub fn description(&self) -> &str {
        &self.assets.brief
    }
    /// Kernel signatures and launch rules in `dialect`.
    pub fn signature(&self, dialect: Dialect) -> Option<&str> {
        self.assets.signatures.get(dialect)
    }
    /// The naive seed kernel source in `dialect`.
    pub fn seed(&self, dialect: Dialect) -> Option<&str> {
        self.assets.seeds.get(dialect)
    }
    /// The tunable variant of the seed in `dialect` (same algorithm,
    /// parameters declared with `// kevo: tune`).
    pub fn tunable(&self, dialect: Dialect) -> Option<&str> {
        self.assets.tunables.get(dialect)
    }
    /// The entry points with their typed parameters, read from the CUDA
    /// signature (or the OpenCL one where a task has no CUDA), in the order
    /// of [`Task::kernel_names`].
    pub fn entry_points(&self) -> Result<Vec<EntryPoint>, crate::EntryPointError> {
        let (dialect, text) = [Dialect::Cuda, Dialect::OpenCl]
            .into_iter()
            .find_map(|d| self.signature(d).map(|s| (d, s)))
            .ok_or_else(|| crate::EntryPointError {
                dialect: Dialect::Cuda,
                kernel: self.kernel_names().first().cloned().unwrap_or_default(),
                reason: "the task has neither a CUDA nor an OpenCL signature to read the \
                         parameter types from"
                    .into(),
            })?;
        crate::parse_entry_points(text, dialect, self.kernel_names())
    }
    /// Entry points the candidate must define, in the order `LaunchSpec::kernel` indexes.
    pub fn kernel_names(&self) -> &[String] {
        &self.spec.kernels
    }
    pub fn sizes(&self, set: SizeSet) -> SizePlan {
        self.spec.sizes[&set].clone()
    }
    pub fn ceiling(&self) -> CeilingKind {
        self.spec.ceiling
    }
    /// Bytes or FLOPs of one run at `size` (the scored work model).
    pub fn work(&self, size: &Size) -> f64 {
        match &self.spec.work {
            Some(expr) => expr.eval(&self.spec.dim_values(size)),
            None => self.code.work(size).unwrap_or(f64::NAN),
        }
    }
    /// The vendor library's version of one run at `size`, if any (see
    /// [`TaskCode::vendor_op`]).
    pub fn vendor_op(&self, size: &Size) -> Option<VendorOp<usize>> {
        self.code.vendor_op(size)
    }
    /// The work of one run at `size` as the plausibility rule counts it:
    /// the bytes any correct kernel must move (`min_traffic`), or the
    /// scored work where the task declares no lower figure.
    pub fn plausibility_work(&self, size: &Size) -> f64 {
        match &self.spec.min_traffic {
            Some(expr) => expr.eval(&self.spec.dim_values(size)),
            None => self.work(size),
        }
    }
    /// How the work model counts, shown next to the achieved figure.
    pub fn work_note(&self) -> &str {
        &self.spec.work_note
    }
    /// The spec's input seed, used for timed runs.
    pub fn default_seed(&self) -> u64 {
        self.spec.default_seed
    }
    pub fn problem(&self, size: &Size, seed: u64) -> Problem {
        self.code.problem(size, seed)
    }
    /// The task's code, shareable with another thread (an evaluator
    /// prepares inputs and references ahead on spare cores).
    pub fn code(&self) -> Arc<dyn TaskCode> {
        self.code.clone()
    }
    /// Bytes of every buffer one run at `size` touches: the working set
    /// that is placed in the memory hierarchy. Builds the problem, so it
    /// costs an input generation.
    pub fn working_set_bytes(&self, size: &Size) -> u64 {
        self.problem(size, self.default_seed())
            .buffers
            .iter()
            .map(|b| b.bytes as u64)
            .sum()
    }
    pub fn reference(&self, size: &Size, problem: &Problem) -> Reference {
        self.code.reference(size, problem)
    }
    /// [`TaskCode::exact_outputs`].
    pub fn exact_outputs(&self, size: &Size, problem: &Problem) -> Option<Vec<Vec<u8>>> {
        self.code.exact_outputs(size, problem)
    }
    /// [`TaskCode::reference_keyed`]: the reference whose sampled outputs
    /// (where the check samples) are chosen by `key`.
    pub fn reference_keyed(&self, size: &Size, problem: &Problem, key: u64) -> Reference {
        self.code.reference_keyed(size, problem, key)
    }
    pub fn check(
        &self,
        size: &Size,
        problem: &Problem,
        reference: &Reference,
        outputs: &[Vec<u8>],
    ) -> Verdict {
        self.code.check(size, problem, reference, outputs)
    }
    /// A hash of the definition, assets and code (16 hex digits): a worker
    /// whose task differs refuses a job rather than score another problem.
    pub fn content_hash(&self) -> &str {
        &self.hash
    }
    pub fn spec(&self) -> &TaskSpec {
        &self.spec
    }
}

/// Bytes of a buffer's `Data` init, or an empty slice.
pub fn init_data(problem: &Problem, buffer: usize) -> &[u8] {
    match &problem.buffers[buffer].init {
        BufferInit::Data(d) => d.as_slice(),
        _ => &[],
    }
}
