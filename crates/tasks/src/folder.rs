//! User-defined tasks: a folder with a `task.toml` that declares, as data,
//! everything a built-in task has in Rust (buffers, launches, checks and
//! the reference), next to its brief and kernels. This module reads and
//! validates such a folder into a [`FolderTask`] definition; every mistake
//! is an error naming the file, the key and what was expected, before
//! anything is compiled or measured.
//!
//! ```toml
//! name = "scale"
//! kernels = ["scale"]
//! dims = ["N"]
//! ceiling = "bandwidth"
//! work = "8 * N"
//! default_seed = 7
//! brief = "brief.md"
//! steps = "n_steps"             # the launches of stage "step" run this often (default 1)
//! ping_pong = [["u", "v"]]      # pairs that swap after every step
//!
//! [dialects.cuda]
//! seed = "seed.cu"
//! signature = "signature.cu"
//!
//! [derived]
//! HALF = "N / 2"
//!
//! [[buffers]]
//! name = "x"
//! type = "f32"                  # f16 f32 f64 i32 u32 i64 u8, or vectors: f32x4
//! length = "N"                  # elements, an expression of dims and derived
//! role = "input"                # input, output, inout, scratch
//! init = { uniform = [-1.0, 1.0] }   # normal, integers, constant, "iota", "zero", npy
//! # structure = { upper = "N" }  # optional: the buffer is square N x N matrices,
//! #                              # upper or lower triangular, or symmetric
//!
//! [[scalars]]
//! name = "a"
//! type = "f32"
//! value = "2.5"                 # may use dims, derived and `step`
//!
//! [[launches]]
//! kernel = "scale"
//! grid = ["N"]                  # threads per dimension
//! block = { default = [256] }   # or { fixed = [...] }
//! args = ["x", "y", "a"]
//! stage = "step"                # "setup" (once, before), "step", "finish" (once, after)
//!
//! [check.y]
//! rtol = 1e-5
//! atol = 1e-6
//! within = 1.0                  # fraction of elements that must be within
//! cosine = 0.999                # optional floor on the cosine similarity
//! peak_error = 1e-2             # optional: no element off by more than this
//!                               # fraction of the reference's largest |value|
//!
//! [reference]
//! command = ["python3", "reference.py"]   # or kernel = {...}, golden = "dir"
//! ```
//!
//! The reference is one of: `kernel = { cuda = "reference.cu", ... }`, run
//! by the evaluator on the device; `command = [...]`, run in the folder on
//! the coordinator once per (size, inputs) with `KEVO_INPUTS` (a directory
//! of `NAME.npy`, one per buffer that starts with data), `KEVO_OUTPUTS`
//! (where it writes `NAME.npy` per checked output), `KEVO_SIZE` and
//! `KEVO_<DIM>` for every dimension and derived value; or `golden = "dir"`,
//! `dir/SET/SIZE_LABEL/NAME.npy` for seed-independent inputs.
//!
//! Sizes (`[sizes.smoke]`, `[sizes.full]`, optional `[sizes.large]`) are
//! written as for the built-in tasks: `in_distribution`, `held_out` and,
//! for `kevo evolve --validate`, `validation = [{ label, dims }, ...]`
//! (sizes never shown, distinct from the others); `regime` and
//! `work_note` are optional, and so is `min_traffic` (bandwidth tasks:
//! the bytes any correct kernel must move, an expression of the dims,
//! where `work` counts more; the plausibility rule holds kernels to it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::expr::{Expr, is_identifier};
use crate::spec::TaskSpec;

/// A task folder that does not define a usable task: the file, the key and
/// what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {key}: {message}")]
pub struct FolderError {
    pub file: String,
    pub key: String,
    pub message: String,
}

/// Element types of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    F16,
    F32,
    F64,
    I32,
    U32,
    I64,
    U8,
}

impl Scalar {
    fn parse(text: &str) -> Option<Scalar> {
        Some(match text {
            "f16" => Scalar::F16,
            "f32" => Scalar::F32,
            "f64" => Scalar::F64,
            "i32" => Scalar::I32,
            "u32" => Scalar::U32,
            "i64" => Scalar::I64,
            "u8" => Scalar::U8,
            _ => return None,
        })
    }

    pub fn bytes(self) -> usize {
        match self {
            Scalar::U8 => 1,
            Scalar::F16 => 2,
            Scalar::F32 | Scalar::I32 | Scalar::U32 => 4,
            Scalar::F64 | Scalar::I64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::F32 | Scalar::F64)
    }
}

/// A buffer's element: a scalar or a short vector of them (`f32x4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementType {
    pub scalar: Scalar,
    pub lanes: u8,
}

const TYPES: &str = "f16, f32, f64, i32, u32, i64, u8, or a vector such as f32x4 (2, 3 or 4 lanes)";

impl ElementType {
    fn parse(text: &str) -> Option<ElementType> {
        let (scalar, lanes) = match text.split_once('x') {
            Some((s, l)) => (s, l.parse::<u8>().ok().filter(|l| (2..=4).contains(l))?),
            None => (text, 1),
        };
        Some(ElementType {
            scalar: Scalar::parse(scalar)?,
            lanes,
        })
    }

    pub fn bytes(self) -> usize {
        self.scalar.bytes() * usize::from(self.lanes)
    }
}

/// What a buffer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read-only input, restored before every run.
    Input,
    /// Written by the kernels, checked; starts as a sentinel (NaN).
    Output,
    /// Starts with data, written by the kernels, checked.
    Inout,
    /// Working memory: starts as a sentinel, not checked.
    Scratch,
}

/// How a buffer starts, drawn from the input seed where random.
#[derive(Debug, Clone, PartialEq)]
pub enum Init {
    Uniform {
        low: f64,
        high: f64,
    },
    Normal {
        mean: f64,
        std: f64,
    },
    Integers {
        low: i64,
        high: i64,
    },
    Constant(f64),
    Iota,
    Zero,
    /// A `.npy` file of the folder, read when the folder loads: the
    /// buffer's bytes, and how many scalars they hold (the buffer's
    /// length times its lanes must match at every size).
    Npy {
        file: String,
        data: std::sync::Arc<Vec<u8>>,
        scalars: u64,
    },
}

#[derive(Debug, Clone)]
pub struct BufferDef {
    pub name: String,
    pub element: ElementType,
    pub length: Expr,
    pub role: Role,
    pub init: Option<Init>,
    /// Drawn values shaped into square matrices of a kind, for problems
    /// whose kernels may rely on it (a triangular matmul skips the zero
    /// half): drawn unshaped, such a problem would be another problem.
    pub structure: Option<Structure>,
}

/// Square matrices of one kind, stored row by row, one after another.
#[derive(Debug, Clone)]
pub struct Structure {
    pub kind: StructureKind,
    /// The matrices' order (rows = columns), an expression of the dims.
    pub order: Expr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StructureKind {
    /// Zero below the diagonal.
    Upper,
    /// Zero above the diagonal.
    Lower,
    /// Below the diagonal, the mirror of above it.
    Symmetric,
}

/// A by-value argument.
#[derive(Debug, Clone)]
pub struct ScalarDef {
    pub name: String,
    pub scalar: Scalar,
    /// Over dims, derived values and `step` (last).
    pub value: Expr,
}

/// Whether the candidate may choose a launch's block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockDef {
    Default([u32; 3]),
    Fixed([u32; 3]),
}

#[derive(Debug, Clone)]
pub struct LaunchDef {
    /// Index into the task's kernels.
    pub kernel: usize,
    /// Threads per dimension (1 to 3 expressions).
    pub grid: Vec<Expr>,
    pub block: BlockDef,
    /// Buffer or scalar names, in the entry point's parameter order.
    pub args: Vec<String>,
    pub stage: Stage,
}

/// When a launch runs: once before the steps, in every step, or once after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Setup,
    Step,
    Finish,
}

/// How an output buffer is compared with the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckDef {
    pub atol: f64,
    pub rtol: f64,
    /// The fraction of elements that must be within `atol + rtol * |ref|`.
    pub within: f64,
    /// A floor on the cosine similarity of output and reference.
    pub cosine: Option<f64>,
    /// A ceiling on every element's error, as a fraction of the reference's
    /// largest magnitude. `within` < 1 lets a share of elements be anything
    /// the cosine floor tolerates (0.1% zeroed passes a floor of 0.999);
    /// this bounds those too, while accumulation-order error (about 1e-5 of
    /// the peak for fp32 sums of 10^4 terms) stays far below 1e-2.
    pub peak_error: Option<f64>,
    /// Bit-exact (integer outputs always are).
    pub exact: bool,
}

/// Where the expected outputs come from.
#[derive(Debug, Clone, PartialEq)]
pub enum ReferenceDef {
    /// A kernel per dialect (dialect -> source), run by kevo on the device
    /// with the same launches.
    Kernel(BTreeMap<String, String>),
    /// A program that reads the inputs as .npy files and writes the
    /// expected outputs as .npy, run once per (size, input seed).
    Command(Vec<String>),
    /// Expected outputs as .npy files under this directory of the folder
    /// (`DIR/SET/SIZE_LABEL/OUTPUT.npy`), for inputs that do not depend on the
    /// seed (npy, constant, iota, zero).
    Golden(String),
}

/// A validated task folder.
#[derive(Debug, Clone)]
pub struct FolderTask {
    pub root: PathBuf,
    /// Every file of the folder, as validated (what is hashed and shipped).
    pub files: std::sync::Arc<FolderFiles>,
    pub spec: TaskSpec,
    pub brief: String,
    /// Dialect name ("cuda", "opencl", "metal", "triton") -> (seed, signature).
    pub dialects: BTreeMap<String, (String, String)>,
    /// Derived quantities, in order, over the dims and earlier ones.
    pub derived: Vec<(String, Expr)>,
    pub buffers: Vec<BufferDef>,
    pub scalars: Vec<ScalarDef>,
    pub launches: Vec<LaunchDef>,
    /// How often the step launches run, over dims and derived values.
    pub steps: Expr,
    /// Buffer pairs whose roles swap after every step: a name in a pair
    /// means the buffer that holds that state at the time.
    pub ping_pong: Vec<[String; 2]>,
    /// Output buffer name -> its check.
    pub checks: BTreeMap<String, CheckDef>,
    pub reference: ReferenceDef,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFolder {
    brief: String,
    dialects: BTreeMap<String, RawDialect>,
    #[serde(default)]
    derived: toml::Table,
    buffers: Vec<RawBuffer>,
    #[serde(default)]
    scalars: Vec<RawScalar>,
    launches: Vec<RawLaunch>,
    steps: Option<String>,
    #[serde(default)]
    ping_pong: Vec<[String; 2]>,
    check: BTreeMap<String, RawCheck>,
    reference: RawReference,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDialect {
    seed: String,
    signature: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBuffer {
    name: String,
    #[serde(rename = "type")]
    element: String,
    length: String,
    role: Role,
    init: Option<toml::Value>,
    structure: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScalar {
    name: String,
    #[serde(rename = "type")]
    scalar: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLaunch {
    kernel: String,
    grid: Vec<String>,
    block: Option<RawBlock>,
    args: Vec<String>,
    stage: Option<Stage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
enum RawBlock {
    Default(Vec<u32>),
    Fixed(Vec<u32>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    atol: Option<f64>,
    rtol: Option<f64>,
    within: Option<f64>,
    cosine: Option<f64>,
    peak_error: Option<f64>,
    exact: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReference {
    kernel: Option<BTreeMap<String, String>>,
    command: Option<Vec<String>>,
    golden: Option<String>,
}

/// The keys of a folder's task.toml that are the built-in tasks' schema.
const SPEC_KEYS: &[&str] = &[
    "name",
    "regime",
    "kernels",
    "dims",
    "ceiling",
    "work",
    "work_note",
    "min_traffic",
    "default_seed",
    "sizes",
];

const DIALECTS: &[&str] = &["cuda", "opencl", "metal", "triton"];

/// The files of a task folder: relative path ('/'-separated) -> bytes.
/// A folder is read once, whole, so that what is validated, hashed,
/// shipped to a confined worker and evaluated is one and the same set.
pub type FolderFiles = BTreeMap<String, Vec<u8>>;

/// A task folder holds kernels, a brief, small inputs and a reference
/// program; more than this is a mistake (a data directory in the folder),
/// and all of it would be hashed and shipped to every worker.
pub const MAX_FOLDER_BYTES: u64 = 256 << 20;

/// Every regular file under `root`, except names starting with a dot (VCS
/// metadata, editor files, caches). Symbolic links are followed only where
/// they resolve inside the folder: a link to a file or directory outside
/// it (a `brief.md` pointing at a key file, say) is refused, naming the
/// link and where it points, since what is read here goes into prompts
/// sent to a model, into the store and to every worker. A link back to a
/// directory that holds it (a loop) is refused too.
pub fn read_folder(root: &Path) -> Result<FolderFiles, FolderError> {
    let err = |key: &str, message: String| FolderError {
        file: root.display().to_string(),
        key: key.to_string(),
        message,
    };
    if !root.is_dir() {
        return Err(err(
            "folder",
            "is not a directory; a task folder holds a task.toml".into(),
        ));
    }
    // The folder itself may be reached through links: what counts as
    // inside is where it really is.
    let inside = std::fs::canonicalize(root)
        .map_err(|e| err("folder", format!("cannot resolve the folder's path ({e})")))?;
    let mut files = FolderFiles::new();
    let mut total = 0u64;
    // (the directory, its key prefix, where it and each directory above
    // it up to the folder really are)
    let mut pending = vec![(root.to_path_buf(), String::new(), vec![inside.clone()])];
    while let Some((dir, prefix, real_dirs)) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| err(&prefix, format!("cannot list the directory ({e})")))?;
        for entry in entries {
            let entry = entry.map_err(|e| err(&prefix, format!("cannot list ({e})")))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let relative = format!("{prefix}{name}");
            let link = entry
                .file_type()
                .map_err(|e| err(&relative, format!("cannot read ({e})")))?
                .is_symlink();
            // What is read: the entry itself, or the resolved target of a
            // link (read by that path, not through the link again).
            let (path, real) = if link {
                let target = std::fs::canonicalize(entry.path()).map_err(|e| {
                    err(
                        &relative,
                        format!(
                            "is a symbolic link to {} that cannot be followed ({e})",
                            std::fs::read_link(entry.path())
                                .map(|t| t.display().to_string())
                                .unwrap_or_else(|_| "?".into())
                        ),
                    )
                })?;
                if !target.starts_with(&inside) {
                    return Err(err(
                        &relative,
                        format!(
                            "is a symbolic link to {}, outside the task folder {}; a task \
                             folder's files must be inside it (copy the file in instead)",
                            target.display(),
                            inside.display()
                        ),
                    ));
                }
                if real_dirs.iter().any(|d| d.starts_with(&target)) {
                    return Err(err(
                        &relative,
                        format!(
                            "is a symbolic link to {}, a directory the link is in (a loop)",
                            target.display()
                        ),
                    ));
                }
                (target.clone(), target)
            } else {
                let real_dir = real_dirs.last().expect("the folder at least");
                (entry.path(), real_dir.join(&name))
            };
            let meta = std::fs::metadata(&path)
                .map_err(|e| err(&relative, format!("cannot read ({e})")))?;
            if meta.is_dir() {
                let mut below = real_dirs.clone();
                below.push(real);
                pending.push((path, format!("{relative}/"), below));
            } else if meta.is_file() {
                total += meta.len();
                if total > MAX_FOLDER_BYTES {
                    return Err(err(
                        &relative,
                        format!(
                            "the folder holds more than {} MiB; keep large data out of it",
                            MAX_FOLDER_BYTES >> 20
                        ),
                    ));
                }
                let bytes = std::fs::read(&path)
                    .map_err(|e| err(&relative, format!("cannot read ({e})")))?;
                files.insert(relative, bytes);
            }
        }
    }
    Ok(files)
}

/// `name` as a key of [`FolderFiles`]: relative, inside the folder.
fn file_key(name: &str) -> Option<String> {
    let trimmed = name.trim_start_matches("./");
    let parts: Vec<&str> = trimmed
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() || parts.contains(&"..") || name.starts_with('/') {
        return None;
    }
    Some(parts.join("/"))
}

impl FolderTask {
    /// Read and validate the task folder at `root`.
    pub fn load(root: &Path) -> Result<FolderTask, FolderError> {
        let files = read_folder(root)?;
        FolderTask::from_files(root, std::sync::Arc::new(files))
    }

    /// Validate a folder's files (read by [`read_folder`], or shipped to a
    /// worker); `root` only names the folder in errors.
    pub fn from_files(
        root: &Path,
        files: std::sync::Arc<FolderFiles>,
    ) -> Result<FolderTask, FolderError> {
        let file = root.join("task.toml");
        let shown = file.display().to_string();
        let err = |key: &str, message: String| FolderError {
            file: shown.clone(),
            key: key.to_string(),
            message,
        };
        let text = match files.get("task.toml") {
            Some(bytes) => String::from_utf8(bytes.clone())
                .map_err(|_| err("task.toml", "is not UTF-8 text".into()))?,
            None => {
                return Err(err(
                    "task.toml",
                    "cannot read it (no such file); a task folder holds a task.toml".into(),
                ));
            }
        };
        let mut table: toml::Table = toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start].matches('\n').count() + 1)
                .unwrap_or(0);
            err(&format!("line {line}"), e.message().to_string())
        })?;
        // The built-in schema, with what a user task may leave out.
        let mut spec_table = toml::Table::new();
        for key in SPEC_KEYS {
            if let Some(v) = table.remove(*key) {
                spec_table.insert(key.to_string(), v);
            }
        }
        spec_table
            .entry("regime")
            .or_insert_with(|| "custom".into());
        spec_table.entry("work_note").or_insert_with(|| "".into());
        if let Some(sizes) = spec_table.get_mut("sizes").and_then(|s| s.as_table_mut())
            && !sizes.contains_key("large")
            && let Some(full) = sizes.get("full").cloned()
        {
            sizes.insert("large".into(), full);
        }
        let spec_text = toml::to_string(&spec_table).expect("a TOML table serialises");
        let spec = TaskSpec::parse(&spec_text, &shown).map_err(|e| match e {
            crate::TaskDefinitionError::Invalid { field, message, .. } => err(&field, message),
            crate::TaskDefinitionError::Parse { message, .. } => err("task.toml", message),
        })?;
        let raw: RawFolder = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| err("task.toml", e.message().to_string()))?;

        let bytes = |key: &str, name: &str| -> Result<&Vec<u8>, FolderError> {
            file_key(name).and_then(|k| files.get(&k)).ok_or_else(|| {
                err(
                    key,
                    format!("cannot read `{name}` in the task folder (no such file)"),
                )
            })
        };
        let read = |key: &str, name: &str| -> Result<String, FolderError> {
            String::from_utf8(bytes(key, name)?.clone())
                .map_err(|_| err(key, format!("`{name}` is not UTF-8 text")))
        };
        let brief = read("brief", &raw.brief)?;
        if raw.dialects.is_empty() {
            return Err(err(
                "dialects",
                "offers no dialect: add [dialects.cuda] or [dialects.opencl] with seed and signature"
                    .into(),
            ));
        }
        let mut dialects = BTreeMap::new();
        for (name, d) in &raw.dialects {
            if !DIALECTS.contains(&name.as_str()) {
                return Err(err(
                    &format!("dialects.{name}"),
                    format!("unknown dialect; expected one of {}", DIALECTS.join(", ")),
                ));
            }
            let seed = read(&format!("dialects.{name}.seed"), &d.seed)?;
            let signature = read(&format!("dialects.{name}.signature"), &d.signature)?;
            for k in &spec.kernels {
                if !seed.contains(k.as_str()) {
                    return Err(err(
                        &format!("dialects.{name}.seed"),
                        format!("`{}` does not define the entry point `{k}`", d.seed),
                    ));
                }
            }
            dialects.insert(name.clone(), (seed, signature));
        }

        // Names an expression may use: dims, then derived values in order.
        let mut names: Vec<String> = spec.dims.iter().map(|d| d.name.clone()).collect();
        // Derived values may use each other in any order (a TOML table has
        // none): resolve them as their names become known.
        let mut derived = Vec::new();
        let mut pending: Vec<(&String, &toml::Value)> = raw.derived.iter().collect();
        while !pending.is_empty() {
            let mut progress = false;
            let mut last_error = None;
            let mut still = Vec::new();
            for (name, value) in pending {
                let key = format!("derived.{name}");
                if !is_identifier(name) || names.contains(name) {
                    return Err(err(
                        &key,
                        "expected a new identifier (not a dimension's name)".into(),
                    ));
                }
                let Some(text) = value.as_str() else {
                    return Err(err(&key, "expected an expression as a string".into()));
                };
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                match Expr::parse(text, &refs) {
                    Ok(expr) => {
                        derived.push((name.clone(), expr));
                        names.push(name.clone());
                        progress = true;
                    }
                    Err(m) => {
                        last_error.get_or_insert((key, m));
                        still.push((name, value));
                    }
                }
            }
            if !progress {
                let (key, m) = last_error.expect("something is pending");
                return Err(err(
                    &key,
                    format!("{m} (or the derived values depend on each other in a circle)"),
                ));
            }
            pending = still;
        }
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let expr = |key: &str, text: &str, extra: &[&str]| -> Result<Expr, FolderError> {
            let all: Vec<&str> = refs.iter().chain(extra).copied().collect();
            Expr::parse(text, &all).map_err(|m| err(key, m))
        };

        let mut buffers: Vec<BufferDef> = Vec::new();
        for (i, b) in raw.buffers.iter().enumerate() {
            let key = format!("buffers[{i}]");
            if !is_identifier(&b.name) || buffers.iter().any(|o| o.name == b.name) {
                return Err(err(
                    &format!("{key}.name"),
                    format!("`{}`: expected a new identifier", b.name),
                ));
            }
            let element = ElementType::parse(&b.element).ok_or_else(|| {
                err(
                    &format!("{key}.type"),
                    format!("`{}`: expected {TYPES}", b.element),
                )
            })?;
            let length = expr(&format!("{key}.length"), &b.length, &[])?;
            let init = b
                .init
                .as_ref()
                .map(|v| parse_init(v, &files, element).map_err(|m| err(&format!("{key}.init"), m)))
                .transpose()?;
            match (b.role, &init) {
                (Role::Input | Role::Inout, None) => {
                    return Err(err(
                        &format!("{key}.init"),
                        format!("an {:?} buffer needs an initialisation", b.role).to_lowercase(),
                    ));
                }
                (Role::Output | Role::Scratch, Some(_)) => {
                    return Err(err(
                        &format!("{key}.init"),
                        "an output or scratch buffer starts as a sentinel that the kernels must \
                         overwrite; it takes no initialisation"
                            .into(),
                    ));
                }
                _ => {}
            }
            let structure = match &b.structure {
                None => None,
                Some(_) if init.is_none() || matches!(init, Some(Init::Npy { .. })) => {
                    return Err(err(
                        &format!("{key}.structure"),
                        "shapes the values the init makes: the buffer needs an init other than an \
                         npy file, which is used as it is"
                            .into(),
                    ));
                }
                Some(_) if element.lanes != 1 => {
                    return Err(err(
                        &format!("{key}.structure"),
                        "needs a scalar element type, not a vector".into(),
                    ));
                }
                Some(table) => match table.iter().collect::<Vec<_>>().as_slice() {
                    [(name, order)] => {
                        let kind = match name.as_str() {
                            "upper" => StructureKind::Upper,
                            "lower" => StructureKind::Lower,
                            "symmetric" => StructureKind::Symmetric,
                            other => {
                                return Err(err(
                                    &format!("{key}.structure"),
                                    format!("`{other}`: expected upper, lower or symmetric"),
                                ));
                            }
                        };
                        let order = expr(&format!("{key}.structure.{name}"), order, &[])?;
                        Some(Structure { kind, order })
                    }
                    _ => {
                        return Err(err(
                            &format!("{key}.structure"),
                            "expected one of { upper = \"ORDER\" }, { lower = \"ORDER\" }, \
                             { symmetric = \"ORDER\" }"
                                .into(),
                        ));
                    }
                },
            };
            buffers.push(BufferDef {
                name: b.name.clone(),
                element,
                length,
                role: b.role,
                init,
                structure,
            });
        }
        if buffers.is_empty() {
            return Err(err("buffers", "declares no buffer".into()));
        }

        let mut scalars: Vec<ScalarDef> = Vec::new();
        for (i, s) in raw.scalars.iter().enumerate() {
            let key = format!("scalars[{i}]");
            if !is_identifier(&s.name)
                || scalars.iter().any(|o| o.name == s.name)
                || buffers.iter().any(|b| b.name == s.name)
            {
                return Err(err(
                    &format!("{key}.name"),
                    format!("`{}`: expected a new identifier", s.name),
                ));
            }
            // What a launch can pass by value (see `crate::Arg`).
            let scalar = match Scalar::parse(&s.scalar) {
                Some(t @ (Scalar::F32 | Scalar::I32 | Scalar::U32)) => t,
                _ => {
                    return Err(err(
                        &format!("{key}.type"),
                        format!("`{}`: expected f32, i32 or u32", s.scalar),
                    ));
                }
            };
            let value = expr(&format!("{key}.value"), &s.value, &["step"])?;
            scalars.push(ScalarDef {
                name: s.name.clone(),
                scalar,
                value,
            });
        }

        let mut used: BTreeSet<&str> = BTreeSet::new();
        let mut launches = Vec::new();
        for (i, l) in raw.launches.iter().enumerate() {
            let key = format!("launches[{i}]");
            let kernel = spec
                .kernels
                .iter()
                .position(|k| *k == l.kernel)
                .ok_or_else(|| {
                    err(
                        &format!("{key}.kernel"),
                        format!(
                            "`{}` is not one of the task's kernels ({})",
                            l.kernel,
                            spec.kernels.join(", ")
                        ),
                    )
                })?;
            if l.grid.is_empty() || l.grid.len() > 3 {
                return Err(err(
                    &format!("{key}.grid"),
                    "expected 1 to 3 expressions (threads per dimension)".into(),
                ));
            }
            let grid = l
                .grid
                .iter()
                .enumerate()
                .map(|(d, g)| expr(&format!("{key}.grid[{d}]"), g, &[]))
                .collect::<Result<Vec<_>, _>>()?;
            let block = match &l.block {
                None => BlockDef::Default([256, 1, 1]),
                Some(RawBlock::Default(s)) => {
                    BlockDef::Default(shape(s).map_err(|m| err(&format!("{key}.block"), m))?)
                }
                Some(RawBlock::Fixed(s)) => {
                    BlockDef::Fixed(shape(s).map_err(|m| err(&format!("{key}.block"), m))?)
                }
            };
            for (a, name) in l.args.iter().enumerate() {
                if !buffers.iter().any(|b| &b.name == name)
                    && !scalars.iter().any(|s| &s.name == name)
                {
                    return Err(err(
                        &format!("{key}.args[{a}]"),
                        format!("`{name}` is neither a buffer nor a scalar of the task"),
                    ));
                }
                used.insert(name);
            }
            launches.push(LaunchDef {
                kernel,
                grid,
                block,
                args: l.args.clone(),
                stage: l.stage.unwrap_or(Stage::Step),
            });
        }
        if launches.is_empty() {
            return Err(err("launches", "declares no launch".into()));
        }
        let steps = expr("steps", raw.steps.as_deref().unwrap_or("1"), &[])?;
        let mut paired: BTreeSet<&str> = BTreeSet::new();
        for (i, pair) in raw.ping_pong.iter().enumerate() {
            let key = format!("ping_pong[{i}]");
            for name in pair {
                let Some(b) = buffers.iter().find(|b| &b.name == name) else {
                    return Err(err(&key, format!("`{name}` is not a buffer of the task")));
                };
                if b.role == Role::Input {
                    return Err(err(
                        &key,
                        format!("`{name}` is an input; ping-pong buffers are written"),
                    ));
                }
                if !paired.insert(name) {
                    return Err(err(&key, format!("`{name}` is in more than one pair")));
                }
            }
            let (a, b) = (&pair[0], &pair[1]);
            let (ba, bb) = (
                buffers.iter().find(|x| &x.name == a).expect("checked"),
                buffers.iter().find(|x| &x.name == b).expect("checked"),
            );
            if ba.element != bb.element || ba.length != bb.length {
                return Err(err(
                    &key,
                    format!("`{a}` and `{b}` must have the same type and length to swap"),
                ));
            }
        }
        for b in &buffers {
            if !used.contains(b.name.as_str()) {
                return Err(err(
                    "buffers",
                    format!("`{}` is passed to no launch", b.name),
                ));
            }
        }
        for (k, name) in spec.kernels.iter().enumerate() {
            if !launches.iter().any(|l| l.kernel == k) {
                return Err(err(
                    "launches",
                    format!("the kernel `{name}` is never launched"),
                ));
            }
        }

        let mut checks = BTreeMap::new();
        for (name, c) in &raw.check {
            let key = format!("check.{name}");
            let Some(b) = buffers.iter().find(|b| &b.name == name) else {
                return Err(err(&key, "names no buffer of the task".into()));
            };
            if !matches!(b.role, Role::Output | Role::Inout) {
                return Err(err(
                    &key,
                    format!("`{name}` is not an output or inout buffer"),
                ));
            }
            let float = b.element.scalar.is_float();
            let exact = c.exact.unwrap_or(!float);
            if !float
                && (!exact
                    || c.atol.is_some()
                    || c.rtol.is_some()
                    || c.cosine.is_some()
                    || c.peak_error.is_some())
            {
                return Err(err(
                    &key,
                    "an integer output is compared exactly: no atol, rtol, cosine or peak_error"
                        .into(),
                ));
            }
            if float && !exact && c.atol.is_none() && c.rtol.is_none() {
                return Err(err(
                    &key,
                    "expected a tolerance: atol, rtol or both (or exact = true)".into(),
                ));
            }
            for (field, v) in [("atol", c.atol), ("rtol", c.rtol)] {
                if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                    return Err(err(
                        &format!("{key}.{field}"),
                        "expected a finite number >= 0".into(),
                    ));
                }
            }
            let within = c.within.unwrap_or(1.0);
            if !(within > 0.0 && within <= 1.0) {
                return Err(err(
                    &format!("{key}.within"),
                    "expected a fraction in (0, 1]".into(),
                ));
            }
            if c.cosine.is_some_and(|v| !(v > 0.0 && v <= 1.0)) {
                return Err(err(
                    &format!("{key}.cosine"),
                    "expected a similarity floor in (0, 1]".into(),
                ));
            }
            if exact && c.peak_error.is_some() {
                return Err(err(
                    &format!("{key}.peak_error"),
                    "an exact check compares bits; it takes no peak_error".into(),
                ));
            }
            if c.peak_error.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return Err(err(
                    &format!("{key}.peak_error"),
                    "expected a fraction of the peak > 0".into(),
                ));
            }
            checks.insert(
                name.clone(),
                CheckDef {
                    atol: c.atol.unwrap_or(0.0),
                    rtol: c.rtol.unwrap_or(0.0),
                    within,
                    cosine: c.cosine,
                    peak_error: c.peak_error,
                    exact,
                },
            );
        }
        if checks.is_empty() {
            return Err(err(
                "check",
                "checks no buffer: add [check.NAME] for an output".into(),
            ));
        }
        for b in &buffers {
            if b.role == Role::Output && !checks.contains_key(&b.name) {
                return Err(err(
                    "check",
                    format!("the output `{}` has no [check.{}]", b.name, b.name),
                ));
            }
        }

        let r = &raw.reference;
        let reference = match (&r.kernel, &r.command, &r.golden) {
            (Some(kernels), None, None) => {
                let mut sources = BTreeMap::new();
                for (dialect, file) in kernels {
                    if !raw.dialects.contains_key(dialect) {
                        return Err(err(
                            &format!("reference.kernel.{dialect}"),
                            "not a dialect the task offers".into(),
                        ));
                    }
                    let source = read(&format!("reference.kernel.{dialect}"), file)?;
                    for k in &spec.kernels {
                        if !source.contains(k.as_str()) {
                            return Err(err(
                                &format!("reference.kernel.{dialect}"),
                                format!("`{file}` does not define the entry point `{k}`"),
                            ));
                        }
                    }
                    sources.insert(dialect.clone(), source);
                }
                ReferenceDef::Kernel(sources)
            }
            (None, Some(command), None) => {
                if command.is_empty() {
                    return Err(err(
                        "reference.command",
                        "expected a program and its arguments".into(),
                    ));
                }
                ReferenceDef::Command(command.clone())
            }
            (None, None, Some(dir)) => {
                let key = file_key(dir).unwrap_or_default();
                let prefix = format!("{key}/");
                if key.is_empty() || !files.keys().any(|k| k.starts_with(&prefix)) {
                    return Err(err(
                        "reference.golden",
                        format!("`{dir}` is not a directory of files in the task folder"),
                    ));
                }
                ReferenceDef::Golden(key)
            }
            _ => {
                return Err(err(
                    "reference",
                    "expected exactly one of kernel, command or golden".into(),
                ));
            }
        };

        let task = FolderTask {
            root: root.to_path_buf(),
            files: files.clone(),
            spec,
            brief,
            dialects,
            derived,
            buffers,
            scalars,
            launches,
            steps,
            ping_pong: raw.ping_pong.clone(),
            checks,
            reference,
        };
        task.check_sizes()?;
        if let ReferenceDef::Golden(dir) = &task.reference {
            for (i, b) in task.buffers.iter().enumerate() {
                if matches!(
                    b.init,
                    Some(Init::Uniform { .. } | Init::Normal { .. } | Init::Integers { .. })
                ) {
                    return Err(err(
                        &format!("buffers[{i}].init"),
                        "a golden reference holds the outputs of fixed inputs, and a random \
                         start differs with every seed: use npy, constant, iota or zero, or a \
                         kernel or command reference"
                            .into(),
                    ));
                }
            }
            // A size set is covered in full or not at all (its sizes are
            // scored together); evaluating an uncovered set is an error then.
            let mut covered = 0;
            for (set, plan) in &task.spec.sizes {
                let mut missing = Vec::new();
                let mut present = 0;
                for size in plan.all() {
                    for name in task.checks.keys() {
                        let file = format!("{dir}/{set}/{}/{name}.npy", size.label);
                        if task.files.contains_key(&file) {
                            present += 1;
                        } else {
                            missing.push(file);
                        }
                    }
                }
                if missing.is_empty() {
                    covered += 1;
                } else if present > 0 {
                    return Err(err(
                        "reference.golden",
                        format!(
                            "the {set} sizes are covered in part: `{}` is missing (a golden \
                             reference needs every checked output at every size of a set)",
                            missing[0]
                        ),
                    ));
                }
            }
            if covered == 0 {
                return Err(err(
                    "reference.golden",
                    format!(
                        "no size set is covered: expected `{dir}/SET/SIZE_LABEL/OUTPUT.npy` \
                         (SET: smoke, full or large) for every size of a set and every checked \
                         output"
                    ),
                ));
            }
        }
        Ok(task)
    }
}

fn shape(dims: &[u32]) -> Result<[u32; 3], String> {
    if dims.is_empty() || dims.len() > 3 || dims.contains(&0) {
        return Err("expected 1 to 3 positive dimensions".into());
    }
    let mut out = [1u32; 3];
    out[..dims.len()].copy_from_slice(dims);
    Ok(out)
}

fn parse_init(
    value: &toml::Value,
    files: &FolderFiles,
    element: ElementType,
) -> Result<Init, String> {
    const EXPECTED: &str = "expected \"iota\", \"zero\", { uniform = [LOW, HIGH] }, \
                            { normal = [MEAN, STD] }, { integers = [LOW, HIGH] }, \
                            { constant = V } or { npy = \"FILE\" }";
    let number = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
    let pair = |v: &toml::Value| -> Option<(f64, f64)> {
        match v.as_array()?.as_slice() {
            [a, b] => Some((number(a)?, number(b)?)),
            _ => None,
        }
    };
    match value {
        toml::Value::String(s) if s == "iota" => Ok(Init::Iota),
        toml::Value::String(s) if s == "zero" => Ok(Init::Zero),
        toml::Value::Table(t) if t.len() == 1 => {
            let (kind, v) = t.iter().next().expect("one entry");
            match kind.as_str() {
                "uniform" => match pair(v) {
                    Some((low, high)) if low < high => Ok(Init::Uniform { low, high }),
                    _ => Err("uniform: expected [LOW, HIGH] with LOW < HIGH".into()),
                },
                "normal" => match pair(v) {
                    Some((mean, std)) if std > 0.0 => Ok(Init::Normal { mean, std }),
                    _ => Err("normal: expected [MEAN, STD] with STD > 0".into()),
                },
                "integers" => match v.as_array().map(|a| a.as_slice()) {
                    Some([a, b]) => match (a.as_integer(), b.as_integer()) {
                        (Some(low), Some(high)) if low <= high => Ok(Init::Integers { low, high }),
                        _ => {
                            Err("integers: expected [LOW, HIGH], whole numbers, LOW <= HIGH".into())
                        }
                    },
                    _ => Err("integers: expected [LOW, HIGH]".into()),
                },
                "constant" => number(v)
                    .map(Init::Constant)
                    .ok_or_else(|| "constant: expected a number".into()),
                "npy" => {
                    let name = v.as_str().ok_or("npy: expected a file name")?;
                    let bytes = file_key(name)
                        .and_then(|k| files.get(&k))
                        .ok_or_else(|| format!("npy: `{name}` is not a file in the task folder"))?;
                    let (data, scalars) =
                        npy::read(bytes, element).map_err(|m| format!("npy: `{name}` {m}"))?;
                    Ok(Init::Npy {
                        file: name.to_string(),
                        data: std::sync::Arc::new(data),
                        scalars,
                    })
                }
                _ => Err(EXPECTED.into()),
            }
        }
        _ => Err(EXPECTED.into()),
    }
}

mod code;
pub mod npy;
mod program;
mod screen;

pub use code::{
    COMMAND_TIMEOUT, ExpectedOutputs, FolderCode, ReferenceError, folder_hash, input_fingerprint,
};
pub use screen::NullCandidate;

#[cfg(test)]
mod tests;
