use crate::DeviceDetails;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The source language a backend compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// OpenCL C 1.2/2.0/3.0, compiled by the platform's OpenCL compiler.
    OpenCl,
    /// CUDA C++, compiled by NVRTC.
    Cuda,
    /// Metal Shading Language.
    Metal,
    /// Triton (Python `@triton.jit` functions), compiled by Triton's own
    /// compiler to a CUDA binary that the CUDA backend loads and launches.
    Triton,
}

impl Dialect {
    /// File extension of kernel sources in this dialect.
    pub fn extension(self) -> &'static str {
        match self {
            Dialect::OpenCl => "cl",
            Dialect::Cuda => "cu",
            Dialect::Metal => "metal",
            Dialect::Triton => "py",
        }
    }

    /// The tag used on fenced code blocks in prompts and responses.
    pub fn fence_tag(self) -> &'static str {
        match self {
            Dialect::OpenCl => "opencl",
            Dialect::Cuda => "cuda",
            Dialect::Metal => "metal",
            Dialect::Triton => "python",
        }
    }

    /// The language kevo's own kernels (roofline probes, utilities, device
    /// references) are written in on a backend of this dialect: Triton
    /// candidates run on the CUDA backend, so those are CUDA C++ there.
    pub fn native(self) -> Dialect {
        match self {
            Dialect::Triton => Dialect::Cuda,
            other => other,
        }
    }

    pub fn all() -> [Dialect; 4] {
        [
            Dialect::OpenCl,
            Dialect::Cuda,
            Dialect::Metal,
            Dialect::Triton,
        ]
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dialect::OpenCl => "OpenCL C",
            Dialect::Cuda => "CUDA C++",
            Dialect::Metal => "Metal",
            Dialect::Triton => "Triton",
        })
    }
}

/// A concrete backend: the runtime a device is driven through, as
/// [`DeviceInfo::backend`] names it. Stored runs, JSON outputs and reports
/// carry it by its [name](BackendName::name) ("opencl", "cuda", "triton");
/// reading a name kevo does not know is an error that lists the known ones,
/// never a guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendName {
    /// An OpenCL platform's device (GPUs, PoCL on CPUs).
    Opencl,
    /// A CUDA device driven through the driver API, kernels built by NVRTC.
    Cuda,
    /// Triton candidates on a CUDA device: compiled by Triton's own
    /// compiler, loaded and launched by the CUDA backend.
    Triton,
}

impl BackendName {
    /// Every backend kevo knows, in the order error messages list them.
    pub const ALL: [BackendName; 3] = [BackendName::Opencl, BackendName::Cuda, BackendName::Triton];

    /// The name used on the command line, in configs, stored runs and JSON.
    pub fn name(self) -> &'static str {
        match self {
            BackendName::Opencl => "opencl",
            BackendName::Cuda => "cuda",
            BackendName::Triton => "triton",
        }
    }

    /// The language this backend compiles.
    pub fn dialect(self) -> Dialect {
        match self {
            BackendName::Opencl => Dialect::OpenCl,
            BackendName::Cuda => Dialect::Cuda,
            BackendName::Triton => Dialect::Triton,
        }
    }

    /// The known names, for messages: "opencl, cuda, triton".
    pub fn known() -> String {
        BackendName::ALL.map(BackendName::name).join(", ")
    }
}

impl fmt::Display for BackendName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, not `write_str`: widths and alignment apply as they did to
        // the name when it was a string.
        f.pad(self.name())
    }
}

/// A backend name that is none of [`BackendName::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownBackend(pub String);

impl fmt::Display for UnknownBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown backend `{}` (known backends: {})",
            self.0,
            BackendName::known()
        )
    }
}

impl std::error::Error for UnknownBackend {}

impl std::str::FromStr for BackendName {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> Result<Self, UnknownBackend> {
        BackendName::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

impl Serialize for BackendName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for BackendName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = BackendName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a backend name ({})", BackendName::known())
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<BackendName, E> {
                s.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// What the runtime reports about the device in use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// The backend that drives the device (Triton's is `Triton`, though
    /// the CUDA backend runs its binaries).
    pub backend: BackendName,
    /// The language this device's backend compiles: prompts, seeds and
    /// source rules follow it, never a guess from the backend's name.
    pub dialect: Dialect,
    /// Platform (OpenCL) or driver (CUDA) name.
    pub platform: String,
    /// Device name as the runtime reports it, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    pub vendor: String,
    /// OpenCL compute units or CUDA streaming multiprocessors.
    pub compute_units: u32,
    pub global_mem_bytes: u64,
    /// Largest work-group / thread-block the device accepts.
    pub max_work_group_size: u64,
    /// Shared (CUDA) / local (OpenCL) memory per block in bytes.
    pub local_mem_bytes: u64,
    pub clock_mhz: u32,
    /// Compute capability ("sm_90") on CUDA, device version string on OpenCL.
    pub arch: String,
    pub driver_version: String,
    /// True for CPU devices (PoCL): they have no DRAM/compute split worth a
    /// datasheet entry, so their ceilings are always measured.
    pub is_cpu: bool,
    /// Last-level cache in bytes (L2 on GPUs), 0 when unknown. A size whose
    /// working set exceeds it cannot beat DRAM bandwidth by much.
    #[serde(default)]
    pub cache_bytes: u64,
    /// A GPU that shares the host's memory (OpenCL's host-unified memory,
    /// CUDA's integrated attribute); false for CPUs and discrete GPUs.
    #[serde(default)]
    pub integrated: bool,
    /// What the runtime's device query leaves out (a CPU's vector
    /// instruction set and usable cores, a GPU's warp and register file).
    #[serde(default, skip_serializing_if = "DeviceDetails::is_empty")]
    pub details: DeviceDetails,
}

/// What kind of processor a device is: the advice a proposer gets depends
/// on it (a CPU runs a work-group as a loop over its work-items, so local
/// memory and barriers are overhead there, not a speed-up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    Cpu,
    IntegratedGpu,
    DiscreteGpu,
}

impl DeviceInfo {
    pub fn kind(&self) -> DeviceKind {
        if self.is_cpu {
            DeviceKind::Cpu
        } else if self.integrated {
            DeviceKind::IntegratedGpu
        } else {
            DeviceKind::DiscreteGpu
        }
    }
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeviceKind::Cpu => "CPU",
            DeviceKind::IntegratedGpu => "integrated GPU",
            DeviceKind::DiscreteGpu => "discrete GPU",
        })
    }
}

/// How to compile a candidate. The same options are used for the seed and for
/// every candidate of a run, so their scores are comparable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileOptions {
    /// Relaxed floating point (`-cl-fast-relaxed-math`, `--use_fast_math`).
    /// On by default to match Metal, whose compiler enables fast math unless
    /// told otherwise; the Metal-Sci scores were measured that way.
    pub fast_math: bool,
    /// Register cap per thread (CUDA `--maxrregcount`); ignored by OpenCL.
    pub max_registers: Option<u32>,
    /// Extra compiler flags, passed through verbatim.
    pub extra_flags: Vec<String>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            fast_math: true,
            max_registers: None,
            extra_flags: Vec::new(),
        }
    }
}

/// The element type of a kernel parameter: of the value for a scalar, of
/// what it points to for a buffer. Vector types (`float2`, `float4`) are
/// their element type: a Triton kernel sees such a buffer as flat floats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElementType {
    F16,
    Bf16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
}

impl ElementType {
    /// Triton's name of the type (`fp32`, `u32`).
    pub fn triton_name(self) -> &'static str {
        match self {
            ElementType::F16 => "fp16",
            ElementType::Bf16 => "bf16",
            ElementType::F32 => "fp32",
            ElementType::F64 => "fp64",
            ElementType::I8 => "i8",
            ElementType::I16 => "i16",
            ElementType::I32 => "i32",
            ElementType::I64 => "i64",
            ElementType::U8 => "u8",
            ElementType::U16 => "u16",
            ElementType::U32 => "u32",
            ElementType::U64 => "u64",
        }
    }
}

/// One parameter of an entry point, as the task's host program passes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryParam {
    pub name: String,
    pub element: ElementType,
    /// A buffer (a pointer to `element`s) rather than a value.
    pub pointer: bool,
}

impl EntryParam {
    /// Triton's signature type: `*fp32` for a buffer of floats, `u32` for
    /// an unsigned scalar.
    pub fn triton_type(&self) -> String {
        if self.pointer {
            format!("*{}", self.element.triton_name())
        } else {
            self.element.triton_name().to_string()
        }
    }
}

/// An entry point of a task with its typed parameters in order: what a
/// compiler that specializes per signature (Triton) needs besides the
/// source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryPoint {
    pub name: String,
    pub params: Vec<EntryParam>,
}

/// One message from a compiler log, with its position when the log gives one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Note,
}

/// The result of a failed compilation: the raw log and what could be parsed out of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileDiagnostics {
    pub log: String,
    pub diagnostics: Vec<Diagnostic>,
}

impl CompileDiagnostics {
    /// Parse a compiler log. Understands the clang form used by PoCL and most
    /// OpenCL compilers (`file:LINE:COL: error: msg`) and the NVRTC form
    /// (`file(LINE): error: msg`).
    pub fn from_log(log: impl Into<String>) -> Self {
        let log = log.into();
        let diagnostics = log.lines().filter_map(parse_diagnostic_line).collect();
        CompileDiagnostics { log, diagnostics }
    }

    /// Only what concerns the candidate's own source, `candidate` being its
    /// name in the log (`candidate.cl`): a message located in any other
    /// file is dropped with the excerpt and notes that follow it, as are
    /// "In file included from" chains, and absolute paths left in kept
    /// lines become `<path>`. A compiler that opened some other file must
    /// not pass its contents on to the store or a prompt.
    pub fn confined_to(&self, candidate: &str) -> CompileDiagnostics {
        let mut kept = Vec::new();
        let mut foreign = false;
        for line in self.log.lines() {
            let t = line.trim_start();
            if t.starts_with("In file included from") || t.starts_with("from ") {
                foreign = true;
                continue;
            }
            if let Some(file) = located_file(t) {
                foreign = file != candidate && !file.ends_with(&format!("/{candidate}"));
            }
            if !foreign {
                kept.push(without_paths(line, candidate));
            }
        }
        CompileDiagnostics::from_log(kept.join("\n"))
    }

    /// The error diagnostics only.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
    }

    /// A one-line summary: the first error with its position, or the first
    /// non-empty log line when nothing could be parsed.
    pub fn summary(&self) -> String {
        if let Some(d) = self.errors().next() {
            match (d.line, d.column) {
                (Some(l), Some(c)) => format!("line {l}:{c}: {}", d.message),
                (Some(l), None) => format!("line {l}: {}", d.message),
                _ => d.message.clone(),
            }
        } else {
            self.log
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("compiler gave no message")
                .to_string()
        }
    }
}

fn parse_severity(s: &str) -> Option<Severity> {
    match s.trim() {
        "error" | "fatal error" | "catastrophic error" => Some(Severity::Error),
        "warning" => Some(Severity::Warning),
        "note" | "remark" => Some(Severity::Note),
        _ => None,
    }
}

/// The file a diagnostic line is located in: `file:5:14: error`,
/// `error: file:5:14: msg` (PoCL), `file(5): error` (NVRTC).
fn located_file(line: &str) -> Option<&str> {
    let rest = ["error: ", "warning: ", "note: ", "fatal error: "]
        .iter()
        .find_map(|p| line.strip_prefix(p))
        .unwrap_or(line);
    let end = rest.find([':', '('])?;
    let (file, after) = rest.split_at(end);
    let digit = after[1..].starts_with(|c: char| c.is_ascii_digit());
    (digit && !file.is_empty() && !file.contains(' ')).then_some(file)
}

/// `line` with every absolute path other than the candidate's replaced.
fn without_paths(line: &str, candidate: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.char_indices().peekable();
    let mut previous = ' ';
    while let Some((i, c)) = chars.next() {
        let starts_path = c == '/'
            && (previous.is_whitespace() || "'\"<(`".contains(previous))
            && line[i + 1..].starts_with(|n: char| n.is_ascii_alphanumeric() || "._~-".contains(n));
        if starts_path {
            let end = line[i..]
                .find(|n: char| !(n.is_ascii_alphanumeric() || "/._~-+".contains(n)))
                .map_or(line.len(), |e| i + e);
            let path = &line[i..end];
            if path.ends_with(&format!("/{candidate}")) {
                out.push_str(candidate);
            } else {
                out.push_str("<path>");
            }
            while chars.peek().is_some_and(|(j, _)| *j < end) {
                chars.next();
            }
            previous = 'x';
            continue;
        }
        out.push(c);
        previous = c;
    }
    out
}

fn parse_diagnostic_line(line: &str) -> Option<Diagnostic> {
    // PoCL puts the severity first: "error: file:5:14: message".
    for (prefix, severity) in [
        ("error: ", Severity::Error),
        ("warning: ", Severity::Warning),
    ] {
        if let Some(rest) = line.trim_start().strip_prefix(prefix)
            && let Some((loc, message)) = split_location(rest)
        {
            let (line, column) = parse_location(loc);
            if line.is_some() {
                return Some(Diagnostic {
                    severity,
                    line,
                    column,
                    message: message.trim().to_string(),
                });
            }
        }
    }
    // Find "<sev>: " after a location prefix.
    for (sev_start, _) in line.match_indices(": ") {
        let rest = &line[sev_start + 2..];
        let Some(colon) = rest
            .find(": ")
            .or_else(|| rest.strip_suffix(':').map(|r| r.len()))
        else {
            continue;
        };
        let Some(severity) = parse_severity(&rest[..colon]) else {
            continue;
        };
        let message = rest.get(colon + 2..).unwrap_or("").trim().to_string();
        let location = &line[..sev_start];
        let (line_no, column) = parse_location(location);
        return Some(Diagnostic {
            severity,
            line: line_no,
            column,
            message,
        });
    }
    None
}

/// Split "file:12:5: message" into ("file:12:5", "message").
fn split_location(s: &str) -> Option<(&str, &str)> {
    s.match_indices(": ")
        .map(|(i, _)| (&s[..i], &s[i + 2..]))
        .find(|(loc, _)| parse_location(loc).0.is_some())
}

/// `file:12:5` -> (12, 5); `file(12)` -> (12, None); anything else -> (None, None).
fn parse_location(loc: &str) -> (Option<u32>, Option<u32>) {
    if let Some(open) = loc.rfind('(')
        && loc.ends_with(')')
        && let Ok(n) = loc[open + 1..loc.len() - 1].parse()
    {
        return (Some(n), None);
    }
    let parts: Vec<&str> = loc.rsplitn(3, ':').collect();
    match parts.as_slice() {
        [col, line, _] => match (line.parse().ok(), col.parse().ok()) {
            (Some(l), Some(c)) => (Some(l), Some(c)),
            _ => (
                col.parse().ok().filter(|_| line.parse::<u32>().is_err()),
                None,
            ),
        },
        [line, _] => (line.parse().ok(), None),
        _ => (None, None),
    }
}

/// Handle to a compiled module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ModuleId(pub u64);

/// Handle to a kernel entry point of a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelId(pub u64);

/// Handle to a device buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BufferId(pub u64);

/// Resource usage and limits of one kernel. Fields the runtime does not
/// report are `None`; later stages use them as feedback and descriptors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelInfo {
    /// Largest block / work-group this kernel can be launched with.
    pub max_threads_per_block: u64,
    /// Preferred multiple of the block size (warp / SIMD width).
    pub preferred_multiple: Option<u64>,
    pub registers_per_thread: Option<u32>,
    pub static_shared_bytes: Option<u64>,
    /// Private/local memory per thread; on CUDA non-zero means register spills.
    pub local_bytes_per_thread: Option<u64>,
    /// Number of parameters the entry point declares, when the runtime says.
    pub num_args: Option<u32>,
    /// The virtual architecture of the PTX the kernel came from (CUDA:
    /// 90 for compute_90); absent where the runtime has no such notion
    /// and in evaluations stored before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptx_arch: Option<u32>,
    /// The architecture of the machine code that runs (CUDA SASS: 90 for
    /// sm_90), which differs from `ptx_arch` when the driver compiled PTX
    /// for a newer device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sass_arch: Option<u32>,
}

/// How many of a kernel's blocks of a given size fit on one multiprocessor
/// at once, as the runtime's occupancy calculator says (registers, shared
/// memory and block limits): the achievable occupancy, before any
/// runtime effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occupancy {
    /// Threads per block it was computed for.
    pub block_threads: u32,
    pub active_blocks_per_sm: u32,
    pub max_threads_per_sm: u32,
}

impl Occupancy {
    /// Resident threads over the multiprocessor's maximum, 0..=1.
    pub fn fraction(&self) -> f64 {
        if self.max_threads_per_sm == 0 {
            return 0.0;
        }
        (f64::from(self.active_blocks_per_sm) * f64::from(self.block_threads)
            / f64::from(self.max_threads_per_sm))
        .min(1.0)
    }
}

/// Facts about a compiled module as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleInfo {
    /// Bytes of writable module-scope variables (CUDA `__device__` and
    /// `__managed__` variables, OpenCL program-scope `global` variables)
    /// that [`crate::Backend::reset_module_state`] cannot restore; `None`
    /// when the runtime cannot tell.
    pub writable_global_bytes: Option<u64>,
    /// Bytes of writable module-scope variables that it restores before
    /// every run (CUDA CUBINs: `__device__` variables, printf's strings).
    #[serde(default)]
    pub reset_global_bytes: u64,
    /// Names of the variables that cannot be restored, where known.
    #[serde(default)]
    pub unresettable_names: Vec<String>,
}

/// One by-value or buffer argument of a launch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelArg {
    Buffer(BufferId),
    U32(u32),
    I32(i32),
    F32(f32),
}

/// One kernel launch: `global` is the total number of work-items per
/// dimension (OpenCL NDRange convention) and must be a multiple of `local`.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub kernel: KernelId,
    pub global: [u64; 3],
    pub local: [u32; 3],
    /// Dynamic shared memory per block (CUDA); OpenCL ignores it.
    pub dynamic_shared_bytes: u32,
    pub args: Vec<KernelArg>,
}

impl Launch {
    /// Number of blocks per dimension.
    pub fn grid(&self) -> [u64; 3] {
        [0, 1, 2].map(|d| self.global[d] / u64::from(self.local[d].max(1)))
    }

    /// Check that global is a positive multiple of local in every dimension.
    pub fn validate(&self) -> Result<(), BackendError> {
        for d in 0..3 {
            if self.local[d] == 0 || self.global[d] == 0 {
                return Err(BackendError::InvalidLaunch(format!(
                    "dimension {d} has a zero size (global {:?}, local {:?})",
                    self.global, self.local
                )));
            }
            if !self.global[d].is_multiple_of(u64::from(self.local[d])) {
                return Err(BackendError::InvalidLaunch(format!(
                    "global size {:?} is not a multiple of the block {:?}",
                    self.global, self.local
                )));
            }
        }
        Ok(())
    }
}

/// Device-clock duration of a launch sequence, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct DeviceTime(pub f64);

impl DeviceTime {
    pub fn seconds(self) -> f64 {
        self.0
    }
}

/// What kind of device fault a launch sequence ended in. A fault in a
/// candidate is data for the evaluator, never a crash of kevo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    IllegalAddress,
    MisalignedAddress,
    LaunchFailure,
    OutOfResources,
    LaunchTimeout,
    IllegalInstruction,
    Other,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultKind::IllegalAddress => "illegal address",
            FaultKind::MisalignedAddress => "misaligned address",
            FaultKind::LaunchFailure => "launch failure",
            FaultKind::OutOfResources => "out of resources",
            FaultKind::LaunchTimeout => "launch timeout",
            FaultKind::IllegalInstruction => "illegal instruction",
            FaultKind::Other => "device error",
        })
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    /// The runtime library or a usable platform is missing on this machine.
    #[error("{backend} is not available: {reason}")]
    Unavailable {
        backend: BackendName,
        reason: String,
    },
    /// No platform/device matched the user's selector.
    #[error("{0}")]
    DeviceNotFound(String),
    #[error("compile error: {}", .0.summary())]
    Compile(CompileDiagnostics),
    #[error("kernel `{name}` not found in the compiled module")]
    MissingKernel { name: String },
    /// The launch was malformed (sizes, argument count or types).
    #[error("invalid launch: {0}")]
    InvalidLaunch(String),
    /// The device faulted while running a candidate.
    #[error("{kind}: {message}")]
    Fault { kind: FaultKind, message: String },
    #[error("out of device memory allocating {bytes} bytes: {message}")]
    OutOfMemory { bytes: usize, message: String },
    /// A handle that this backend does not know (already freed or never made).
    #[error("unknown {what} handle {id}")]
    InvalidHandle { what: &'static str, id: u64 },
    #[error("{0}")]
    Runtime(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_are_the_stored_and_printed_names() {
        for (backend, name) in [
            (BackendName::Opencl, "opencl"),
            (BackendName::Cuda, "cuda"),
            (BackendName::Triton, "triton"),
        ] {
            assert_eq!(backend.name(), name);
            assert_eq!(backend.to_string(), name);
            assert_eq!(format!("{backend:<7}|"), format!("{name:<7}|"));
            assert_eq!(name.parse::<BackendName>(), Ok(backend));
            let json = serde_json::to_string(&backend).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<BackendName>(&json).unwrap(), backend);
        }
        assert_eq!(BackendName::Triton.dialect(), Dialect::Triton);
    }

    #[test]
    fn an_unknown_backend_name_is_an_error_naming_the_known_ones() {
        for name in ["metal", "fake", "", "CUDA", "auto"] {
            let err = name.parse::<BackendName>().unwrap_err().to_string();
            assert_eq!(
                err,
                format!("unknown backend `{name}` (known backends: opencl, cuda, triton)")
            );
        }
        let err = serde_json::from_str::<BackendName>("7")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("expected a backend name (opencl, cuda, triton)"),
            "{err}"
        );
    }

    #[test]
    fn a_stored_device_on_an_unknown_backend_does_not_read() {
        let stored = serde_json::json!({
            "backend": "cuda", "dialect": "cuda", "platform": "CUDA 12.4",
            "name": "NVIDIA H100 80GB HBM3", "vendor": "NVIDIA", "compute_units": 132,
            "global_mem_bytes": 85_520_809_984u64, "max_work_group_size": 1024,
            "local_mem_bytes": 49152, "clock_mhz": 1980, "arch": "sm_90",
            "driver_version": "12040", "is_cpu": false
        });
        let info: DeviceInfo = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(info.backend, BackendName::Cuda);
        assert_eq!(serde_json::to_value(&info).unwrap()["backend"], "cuda");

        let mut unknown = stored;
        unknown["backend"] = "metal".into();
        let err = serde_json::from_str::<DeviceInfo>(&unknown.to_string())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown backend `metal` (known backends: opencl, cuda, triton)"),
            "{err}"
        );
    }

    #[test]
    fn parses_clang_style_diagnostics() {
        let log = "<program source>:3:5: error: use of undeclared identifier 'yy'\n    yy[i] = 1;\n    ^\n<program source>:7:1: warning: unused\n";
        let d = CompileDiagnostics::from_log(log);
        assert_eq!(d.diagnostics.len(), 2);
        assert_eq!(d.diagnostics[0].severity, Severity::Error);
        assert_eq!(d.diagnostics[0].line, Some(3));
        assert_eq!(d.diagnostics[0].column, Some(5));
        assert_eq!(
            d.diagnostics[0].message,
            "use of undeclared identifier 'yy'"
        );
        assert_eq!(d.diagnostics[1].severity, Severity::Warning);
        assert_eq!(d.summary(), "line 3:5: use of undeclared identifier 'yy'");
    }

    #[test]
    fn parses_pocl_severity_first_diagnostics() {
        let log = "error: /root/.cache/pocl/kcache/tempfile_DvQyYh.cl:5:14: use of undeclared identifier 'v'\nDevice pthread failed to build the program\n";
        let d = CompileDiagnostics::from_log(log);
        assert_eq!(d.diagnostics.len(), 1, "{d:?}");
        assert_eq!(d.diagnostics[0].line, Some(5));
        assert_eq!(d.diagnostics[0].column, Some(14));
        assert_eq!(d.diagnostics[0].message, "use of undeclared identifier 'v'");
    }

    #[test]
    fn parses_nvrtc_style_diagnostics() {
        let log = "kernel.cu(12): error: identifier \"yy\" is undefined\n\n1 error detected in the compilation of \"kernel.cu\".\n";
        let d = CompileDiagnostics::from_log(log);
        assert_eq!(d.diagnostics.len(), 1);
        assert_eq!(d.diagnostics[0].line, Some(12));
        assert_eq!(d.diagnostics[0].column, None);
        assert_eq!(d.diagnostics[0].message, "identifier \"yy\" is undefined");
    }

    #[test]
    fn summary_falls_back_to_first_log_line() {
        let d = CompileDiagnostics::from_log("\n  something odd happened\nmore");
        assert!(d.diagnostics.is_empty());
        assert_eq!(d.summary(), "something odd happened");
    }

    #[test]
    fn launch_validation_rejects_ragged_grids() {
        let mut l = Launch {
            kernel: KernelId(0),
            global: [256, 1, 1],
            local: [64, 1, 1],
            dynamic_shared_bytes: 0,
            args: vec![],
        };
        assert!(l.validate().is_ok());
        assert_eq!(l.grid(), [4, 1, 1]);
        l.global[0] = 100;
        assert!(matches!(l.validate(), Err(BackendError::InvalidLaunch(_))));
        l.global[0] = 256;
        l.local[1] = 0;
        assert!(l.validate().is_err());
    }
}

/// How the user picks a platform and a device: by index ("1") or by a
/// case-insensitive substring of the name ("nvidia", "H100").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSelector {
    pub platform: Option<String>,
    pub device: Option<String>,
}

impl DeviceSelector {
    /// Does entry `index` named `name` match `selector` (None matches all)?
    pub fn matches(selector: Option<&str>, index: usize, name: &str) -> bool {
        match selector.map(str::trim) {
            None | Some("") => true,
            Some(s) => match s.parse::<usize>() {
                Ok(i) => i == index,
                Err(_) => name.to_lowercase().contains(&s.to_lowercase()),
            },
        }
    }
}

#[cfg(test)]
mod confinement_tests {
    use super::*;

    #[test]
    fn messages_about_other_files_and_absolute_paths_are_dropped() {
        let log = "\
In file included from candidate.cl:1:
/home/u/.env:1:1: error: unknown type name 'OPENAI_API_KEY'
OPENAI_API_KEY=sk-live-123
^
error: candidate.cl:3:5: use of undeclared identifier 'v'
    v = 1;
    ^
candidate.cl:4:10: fatal error: cannot open file '/home/u/.ssh/id_rsa': Permission denied
candidate.cu(7): error: identifier \"w\" is undefined
2 errors generated.";
        let d = CompileDiagnostics::from_log(log).confined_to("candidate.cl");
        assert!(!d.log.contains("sk-live"), "{}", d.log);
        assert!(!d.log.contains("OPENAI"), "{}", d.log);
        assert!(!d.log.contains("/home"), "{}", d.log);
        assert!(
            d.log
                .contains("candidate.cl:3:5: use of undeclared identifier 'v'")
        );
        assert!(d.log.contains("cannot open file '<path>'"), "{}", d.log);
        assert!(
            !d.log.contains("candidate.cu(7)"),
            "another file's message: {}",
            d.log
        );
        assert_eq!(d.errors().count(), 2);
        let nvrtc = CompileDiagnostics::from_log(
            "candidate.cu(7): error: x\n/usr/include/a.h(1): error: y",
        )
        .confined_to("candidate.cu");
        assert_eq!(nvrtc.log, "candidate.cu(7): error: x");
    }
}
