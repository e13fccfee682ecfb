//! A task folder as a [`Task`]: its host program and check come from the
//! folder's declarations, and its expected outputs from its reference.
//!
//! Expected outputs are keyed by size and by a fingerprint of the inputs
//! (a hash of every buffer's initial bytes), not by seed: a confined worker
//! that was shipped the outputs for some inputs can tell exactly whether it
//! holds the answer for the problem it built, and golden outputs (fixed
//! inputs) serve every seed. A kernel reference is run by the evaluator on
//! the device ([`Task::device_reference`]); a command reference runs on the
//! coordinator's side only, once per (size, inputs), cached on disk, since a
//! worker runs no program and reads no file.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::{FolderFiles, FolderTask, ReferenceDef};
use crate::{
    BufferInit, PerDialect, Problem, Reference, Size, Task, TaskAssets, TaskCode, Verdict,
};

mod command;

/// A reference command that runs longer than this is stopped: a hung
/// program must not hang the run (numpy at 64M elements takes about 2 s).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// The expected outputs of one problem, in the order of `Problem::outputs`
/// (the checked names, sorted). The [`Reference`] of a folder task.
#[derive(Debug, Clone)]
pub struct ExpectedOutputs(pub Arc<Vec<Vec<u8>>>);

/// Expected outputs by (size label, input fingerprint).
type ExpectedMap = HashMap<(String, String), Arc<Vec<Vec<u8>>>>;

/// The Rust half of a folder task.
pub struct FolderCode {
    folder: FolderTask,
    hash: String,
    /// (size label, input fingerprint) -> expected outputs.
    expected: Mutex<ExpectedMap>,
    /// (size label, seed) -> input fingerprint, so the coordinator builds a
    /// problem once to learn it.
    fingerprints: Mutex<HashMap<(String, u64), String>>,
    /// False where the task came as a package (a worker): a missing
    /// expected output is then kevo's error, never a reason to run a program.
    may_run_commands: bool,
}

/// Why a folder task has no expected outputs for a problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("task folder {folder}: reference: {message}")]
pub struct ReferenceError {
    pub folder: String,
    pub message: String,
}

/// The content hash of a folder task (16 hex digits): every file of the
/// folder, by name, so an edited brief, kernel, input or reference program
/// is another task.
pub fn folder_hash(files: &FolderFiles) -> String {
    let mut h = Sha256::new();
    h.update(b"kevo folder task v1");
    for (name, bytes) in files {
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    hex(&h.finalize()[..8])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A hash of the size and every buffer's initial bytes (32 hex digits).
pub fn input_fingerprint(size: &Size, problem: &Problem) -> String {
    let mut h = Sha256::new();
    h.update(size.label.as_bytes());
    for b in &problem.buffers {
        h.update((b.bytes as u64).to_le_bytes());
        match &b.init {
            BufferInit::Data(d) => {
                h.update([1]);
                h.update(d.as_slice());
            }
            BufferInit::Zero => h.update([2]),
            BufferInit::Sentinel => h.update([3]),
        }
    }
    hex(&h.finalize()[..16])
}

impl FolderCode {
    fn error(&self, message: String) -> ReferenceError {
        ReferenceError {
            folder: self.folder.root.display().to_string(),
            message,
        }
    }

    pub fn folder(&self) -> &FolderTask {
        &self.folder
    }

    /// Add expected outputs (a worker, from its coordinator).
    pub fn add_expected(&self, label: &str, fingerprint: &str, outputs: Vec<Vec<u8>>) {
        self.expected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                (label.to_string(), fingerprint.to_string()),
                Arc::new(outputs),
            );
    }

    /// The input fingerprint and expected outputs at (`size`, `seed`),
    /// computing them if needed (coordinator side). None for a kernel
    /// reference, which the evaluator runs on the device.
    #[allow(clippy::type_complexity)]
    pub fn expected_at(
        &self,
        size: &Size,
        seed: u64,
    ) -> Result<Option<(String, Arc<Vec<Vec<u8>>>)>, ReferenceError> {
        if matches!(self.folder.reference, ReferenceDef::Kernel(_)) {
            return Ok(None);
        }
        let key = (size.label.clone(), seed);
        let known = self
            .fingerprints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(fp) = known
            && let Some(out) = self
                .expected
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&(size.label.clone(), fp.clone()))
        {
            return Ok(Some((fp, out.clone())));
        }
        let problem = self.folder.problem(size, seed);
        let fp = input_fingerprint(size, &problem);
        self.fingerprints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, fp.clone());
        let out = self.expected_for(size, &problem, &fp)?;
        Ok(Some((fp, out)))
    }

    fn expected_for(
        &self,
        size: &Size,
        problem: &Problem,
        fingerprint: &str,
    ) -> Result<Arc<Vec<Vec<u8>>>, ReferenceError> {
        let key = (size.label.clone(), fingerprint.to_string());
        if let Some(out) = self
            .expected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(out.clone());
        }
        let outputs = match &self.folder.reference {
            ReferenceDef::Kernel(_) => {
                return Err(self.error(
                    "the reference is a kernel, run by the evaluator on the device".into(),
                ));
            }
            ReferenceDef::Golden(dir) => self.golden(dir, size)?,
            ReferenceDef::Command(command) => {
                if !self.may_run_commands {
                    return Err(self.error(format!(
                        "no expected outputs were sent for size `{}` and these inputs \
                         (fingerprint {fingerprint}); the coordinator computes them",
                        size.label
                    )));
                }
                self.run_command(command, size, problem, fingerprint)?
            }
        };
        let outputs = Arc::new(outputs);
        self.expected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, outputs.clone());
        Ok(outputs)
    }

    fn checked(&self) -> impl Iterator<Item = (&String, &super::BufferDef)> {
        self.folder.checks.keys().map(|name| {
            let b = self
                .folder
                .buffers
                .iter()
                .find(|b| &b.name == name)
                .expect("validated: a check names a buffer");
            (name, b)
        })
    }

    /// `bytes` of a `.npy` the reference gave for `name`, as the buffer's
    /// bytes; `where_` names the file in errors.
    fn decode_output(
        &self,
        name: &str,
        bytes: &[u8],
        size: &Size,
        where_: &str,
    ) -> Result<Vec<u8>, ReferenceError> {
        let b = self
            .folder
            .buffers
            .iter()
            .find(|b| b.name == name)
            .expect("validated");
        let (data, scalars) = super::npy::read(bytes, b.element)
            .map_err(|m| self.error(format!("`{where_}` {m}")))?;
        let want = b.length.eval(&self.folder.values(size)) as u64 * u64::from(b.element.lanes);
        if scalars != want {
            return Err(self.error(format!(
                "`{where_}` holds {scalars} values; the output `{name}` has {want} at size `{}`",
                size.label
            )));
        }
        Ok(data)
    }

    fn golden(&self, dir: &str, size: &Size) -> Result<Vec<Vec<u8>>, ReferenceError> {
        // The sets this size belongs to (labels repeat across sets).
        let sets: Vec<String> = self
            .folder
            .spec
            .sizes
            .iter()
            .filter(|(_, p)| p.all().any(|s| s == size))
            .map(|(set, _)| set.to_string())
            .collect();
        self.checked()
            .map(|(name, _)| {
                let files: Vec<String> = sets
                    .iter()
                    .map(|set| format!("{dir}/{set}/{}/{name}.npy", size.label))
                    .collect();
                let (file, bytes) = files
                    .iter()
                    .find_map(|f| self.folder.files.get(f).map(|b| (f, b)))
                    .ok_or_else(|| {
                        self.error(format!(
                            "no golden output for size `{}`: expected {}",
                            size.label,
                            files.join(" or ")
                        ))
                    })?;
                self.decode_output(name, bytes, size, file)
            })
            .collect()
    }
}

impl TaskCode for FolderCode {
    fn problem(&self, size: &Size, seed: u64) -> Problem {
        self.folder.problem(size, seed)
    }

    /// Expected outputs for a golden or command reference. A missing one is
    /// kevo's or the task's error, not the candidate's: it panics with the
    /// reason, which a worker reports as an internal error.
    fn reference(&self, size: &Size, problem: &Problem) -> Reference {
        let fingerprint = input_fingerprint(size, problem);
        match self.expected_for(size, problem, &fingerprint) {
            Ok(out) => Arc::new(ExpectedOutputs(out)),
            Err(e) => panic!("{e}"),
        }
    }

    /// Every checked output against its expected bytes; the first that
    /// fails decides, else the first output's verdict.
    fn check(
        &self,
        _size: &Size,
        _problem: &Problem,
        reference: &Reference,
        outputs: &[Vec<u8>],
    ) -> Verdict {
        let expected = &reference
            .downcast_ref::<ExpectedOutputs>()
            .expect("a folder task's reference is its expected outputs")
            .0;
        let mut first = None;
        for ((name, got), want) in self.folder.checks.keys().zip(outputs).zip(expected.iter()) {
            let verdict = self.folder.check_output(name, got, want);
            if !verdict.passed {
                return verdict;
            }
            first.get_or_insert(verdict);
        }
        first.unwrap_or(Verdict {
            passed: false,
            metric: "outputs".into(),
            value: outputs.len() as f64,
            tolerance: None,
        })
    }
}

impl FolderTask {
    /// This folder as a task that may run its reference command (the
    /// coordinator's side).
    pub fn into_task(self) -> Task {
        self.build(true)
    }

    /// This folder as a worker holds it: a missing expected output is an
    /// error, never a command run.
    pub fn into_shipped_task(self) -> Task {
        self.build(false)
    }

    fn build(self, may_run_commands: bool) -> Task {
        let per = |pick: &dyn Fn(&(String, String)) -> &String| PerDialect {
            opencl: self.dialects.get("opencl").map(|d| pick(d).clone()),
            cuda: self.dialects.get("cuda").map(|d| pick(d).clone()),
            metal: self.dialects.get("metal").map(|d| pick(d).clone()),
            triton: self.dialects.get("triton").map(|d| pick(d).clone()),
        };
        let references = match &self.reference {
            ReferenceDef::Kernel(k) => PerDialect {
                opencl: k.get("opencl").cloned(),
                cuda: k.get("cuda").cloned(),
                metal: k.get("metal").cloned(),
                triton: None,
            },
            _ => PerDialect::default(),
        };
        let assets = TaskAssets {
            brief: self.brief.clone(),
            signatures: per(&|d| &d.1),
            seeds: per(&|d| &d.0),
            tunables: PerDialect::default(),
            references,
        };
        let hash = folder_hash(&self.files);
        let spec = self.spec.clone();
        let code = Arc::new(FolderCode {
            folder: self,
            hash: hash.clone(),
            expected: Mutex::new(HashMap::new()),
            fingerprints: Mutex::new(HashMap::new()),
            may_run_commands,
        });
        Task::from_folder(spec, assets, code, hash)
    }
}
