//! Human-readable run directories in the Metal-Sci layout:
//!
//! ```text
//! <workspace>/runs/<run-id>/
//!     00_seed.<ext>  00_result.json
//!     01_prompt.md   01_response.md  01_reasoning.md  01_candidate.<ext>  01_result.json
//!     ...
//!     analysis_<candidate>.md  profile_<candidate>.txt  (--analyst, --profile)
//!     best.<ext>  best_result.json  history.json  summary.json
//! ```
//!
//! The database is the record kevo resumes from; these files are for people
//! (reading, diffing, grepping, sharing one run). Every file is written to a
//! temporary name and renamed into place, so a reader or a crash never sees
//! half a file.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use kevo_eval::Evaluation;
use serde::Serialize;

use crate::StoreError;
use crate::model::RunId;

/// The directory of one run's files.
#[derive(Debug, Clone)]
pub struct RunDir {
    dir: PathBuf,
    ext: String,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |cause| StoreError::Io {
        path: path.to_path_buf(),
        cause,
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, flushed to disk, then renamed over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| StoreError::Io {
            path: path.to_path_buf(),
            cause: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
        })?
        .to_string_lossy();
    let tmp = dir.join(format!(
        ".{name}.{}.{:08x}.tmp",
        std::process::id(),
        rand::random::<u32>()
    ));
    let result = (|| {
        let mut f = fs::File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(bytes).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
        fs::rename(&tmp, path).map_err(io_err(path))?;
        // The rename itself is durable only once the directory is synced.
        #[cfg(unix)]
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn json_bytes(value: &impl Serialize, what: &'static str) -> Result<Vec<u8>, StoreError> {
    let mut bytes =
        serde_json::to_vec_pretty(value).map_err(|cause| StoreError::Json { what, cause })?;
    bytes.push(b'\n');
    Ok(bytes)
}

impl RunDir {
    /// `<workspace>/runs/<run>`, created if missing. `ext` is the kernel
    /// file extension of the run's dialect ("cu", "cl", "metal").
    pub fn create(workspace: &Path, run: &RunId, ext: &str) -> Result<RunDir, StoreError> {
        let ext = ext.trim_start_matches('.');
        if ext.is_empty() || !ext.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(StoreError::InvalidRecord(format!(
                "`{ext}` is not a file extension"
            )));
        }
        if run.0.is_empty() || run.0.contains(['/', '\\']) || run.0.starts_with('.') {
            return Err(StoreError::InvalidRecord(format!(
                "`{run}` cannot name a run directory"
            )));
        }
        let dir = workspace.join("runs").join(&run.0);
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        Ok(RunDir {
            dir,
            ext: ext.to_string(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn file(&self, name: String, bytes: &[u8]) -> Result<PathBuf, StoreError> {
        let path = self.dir.join(name);
        write_atomic(&path, bytes)?;
        Ok(path)
    }

    /// `00_seed.<ext>`.
    pub fn write_seed(&self, source: &str) -> Result<PathBuf, StoreError> {
        self.file(format!("00_seed.{}", self.ext), source.as_bytes())
    }

    /// `NN_prompt.md`: the system and user prompt as sent.
    pub fn write_prompt(
        &self,
        iteration: u32,
        system: &str,
        user: &str,
    ) -> Result<PathBuf, StoreError> {
        let text = format!("# System\n\n{system}\n\n# User\n\n{user}\n");
        self.file(format!("{iteration:02}_prompt.md"), text.as_bytes())
    }

    /// `ask/<proposal>_prompt.md`: a prompt handed out by `kevo ask`, in the
    /// layout of `NN_prompt.md`.
    pub fn write_asked(
        &self,
        proposal: i64,
        system: &str,
        user: &str,
    ) -> Result<PathBuf, StoreError> {
        let dir = self.dir.join("ask");
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let text = format!("# System\n\n{system}\n\n# User\n\n{user}\n");
        let path = dir.join(format!("{proposal}_prompt.md"));
        write_atomic(&path, text.as_bytes())?;
        Ok(path)
    }

    /// `ask/<proposal>_tools.json`: what the proposal's tool calls
    /// (`kevo tool`) have come to, kept between batches of them.
    pub fn write_tool_ledger(&self, proposal: i64, json: &[u8]) -> Result<PathBuf, StoreError> {
        let dir = self.dir.join("ask");
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let path = dir.join(format!("{proposal}_tools.json"));
        write_atomic(&path, json)?;
        Ok(path)
    }

    /// The proposal's tool ledger, if it made tool calls.
    pub fn tool_ledger(&self, proposal: i64) -> Result<Option<String>, StoreError> {
        let path = self.dir.join("ask").join(format!("{proposal}_tools.json"));
        match fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(cause) => Err(StoreError::Io { path, cause }),
        }
    }

    /// `NN_response.md`: the model's answer, verbatim.
    pub fn write_response(&self, iteration: u32, response: &str) -> Result<PathBuf, StoreError> {
        self.file(format!("{iteration:02}_response.md"), response.as_bytes())
    }

    /// `NN_reasoning.md`, for providers that return reasoning text.
    pub fn write_reasoning(&self, iteration: u32, reasoning: &str) -> Result<PathBuf, StoreError> {
        self.file(format!("{iteration:02}_reasoning.md"), reasoning.as_bytes())
    }

    /// `analysis_<candidate>.md`: the performance analyst's prompt and
    /// answer about a candidate, and the recommendation passed on (none
    /// when its answer held none).
    pub fn write_analysis(
        &self,
        candidate: i64,
        system: &str,
        user: &str,
        answer: &str,
        recommendation: Option<&str>,
    ) -> Result<PathBuf, StoreError> {
        let passed = recommendation.unwrap_or("(none: the answer held no recommendation)");
        let text = format!(
            "# System\n\n{system}\n\n# User\n\n{user}\n\n# Answer\n\n{answer}\n\n# Passed to the proposer\n\n{passed}\n"
        );
        self.file(format!("analysis_{candidate}.md"), text.as_bytes())
    }

    /// `NN_candidate.<ext>`: the source that was evaluated.
    pub fn write_candidate(&self, iteration: u32, source: &str) -> Result<PathBuf, StoreError> {
        self.file(
            format!("{iteration:02}_candidate.{}", self.ext),
            source.as_bytes(),
        )
    }

    /// `NN_result.json`: the evaluation (per size: label, correctness,
    /// error, device times, achieved, unit, ceiling, fraction). Iteration 0
    /// is the seed's.
    pub fn write_result(
        &self,
        iteration: u32,
        evaluation: &Evaluation,
    ) -> Result<PathBuf, StoreError> {
        self.file(
            format!("{iteration:02}_result.json"),
            &json_bytes(evaluation, "evaluation")?,
        )
    }

    /// `best.<ext>` and `best_result.json`; returns the source's path.
    pub fn write_best(&self, source: &str, evaluation: &Evaluation) -> Result<PathBuf, StoreError> {
        self.file(
            "best_result.json".into(),
            &json_bytes(evaluation, "evaluation")?,
        )?;
        self.file(format!("best.{}", self.ext), source.as_bytes())
    }

    /// `history.json`, e.g. the store's history rows.
    pub fn write_history(&self, history: &impl Serialize) -> Result<PathBuf, StoreError> {
        self.file("history.json".into(), &json_bytes(history, "history")?)
    }

    /// `summary.json`: task, model, device, iterations, seed and best
    /// scores, improvement.
    pub fn write_summary(&self, summary: &impl Serialize) -> Result<PathBuf, StoreError> {
        self.file("summary.json".into(), &json_bytes(summary, "summary")?)
    }
}
