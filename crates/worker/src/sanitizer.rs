//! An optional compute-sanitizer pass on CUDA (memcheck, racecheck,
//! initcheck, synccheck): the candidate is evaluated once more in a worker
//! run under the sanitizer, and any error it reports turns the outcome into
//! a runtime error. Off by default: it slows kernels down 10-100x, so it is
//! meant for a final winner, preferably at smoke sizes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kevo_eval::{Evaluation, Outcome};
use kevo_tasks::Size;

use crate::{Worker, WorkerCommand, WorkerConfig, WorkerError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SanitizerTool {
    Memcheck,
    Racecheck,
    Initcheck,
    Synccheck,
}

impl SanitizerTool {
    pub fn name(self) -> &'static str {
        match self {
            SanitizerTool::Memcheck => "memcheck",
            SanitizerTool::Racecheck => "racecheck",
            SanitizerTool::Initcheck => "initcheck",
            SanitizerTool::Synccheck => "synccheck",
        }
    }
}

impl std::str::FromStr for SanitizerTool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "memcheck" => Ok(SanitizerTool::Memcheck),
            "racecheck" => Ok(SanitizerTool::Racecheck),
            "initcheck" => Ok(SanitizerTool::Initcheck),
            "synccheck" => Ok(SanitizerTool::Synccheck),
            other => Err(format!(
                "unknown sanitizer tool `{other}` (memcheck, racecheck, initcheck or synccheck)"
            )),
        }
    }
}

/// The compute-sanitizer executable: on PATH, or under CUDA_HOME or
/// /usr/local/cuda.
pub fn find_sanitizer() -> Option<PathBuf> {
    find_cuda_tool("compute-sanitizer")
}

/// A CUDA toolkit program (`compute-sanitizer`, `ncu`): on PATH, or under
/// CUDA_HOME or /usr/local/cuda.
pub(crate) fn find_cuda_tool(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        dirs.push(PathBuf::from(home).join("bin"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// What the sanitizer's log says: the number of errors and the first lines
/// of the first report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SanitizerReport {
    pub errors: u64,
    pub excerpt: String,
}

/// Parse a compute-sanitizer log: "ERROR SUMMARY: N errors" (every tool),
/// and racecheck's "RACECHECK SUMMARY: ... (N errors, M warnings)".
pub fn parse_log(log: &str) -> Option<SanitizerReport> {
    let mut errors: Option<u64> = None;
    for line in log.lines() {
        let line = line.trim_start_matches('=').trim();
        let count = if let Some(rest) = line.strip_prefix("ERROR SUMMARY:") {
            rest.split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
        } else if line.starts_with("RACECHECK SUMMARY:") {
            line.split('(')
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        } else {
            None
        };
        if let Some(n) = count {
            errors = Some(errors.unwrap_or(0).max(n));
        }
    }
    // Each distinct line once: racecheck repeats one report per hazard.
    let mut excerpt: Vec<&str> = Vec::new();
    for l in log.lines().map(|l| l.trim_start_matches('=').trim()) {
        if excerpt.len() == 6 {
            break;
        }
        if !l.is_empty()
            && !l.starts_with("COMPUTE-SANITIZER")
            && !l.contains("SUMMARY")
            && !excerpt.contains(&l)
        {
            excerpt.push(l);
        }
    }
    errors.map(|errors| SanitizerReport {
        errors,
        excerpt: excerpt.join(" | "),
    })
}

/// What to check: a task's kernel at some sizes.
pub struct SanitizeRequest<'a> {
    pub task: &'a kevo_tasks::Task,
    pub source: &'a str,
    pub sizes: &'a [Size],
    pub timeout: Duration,
    /// Where the sanitizer writes its log.
    pub log_dir: &'a Path,
}

/// Evaluate the candidate once under `tool` and fold its findings into the
/// outcome: a candidate the sanitizer faults is not correct, whatever its
/// outputs were.
pub fn sanitized_evaluation(
    worker: &WorkerCommand,
    config: WorkerConfig,
    tool: SanitizerTool,
    req: &SanitizeRequest<'_>,
) -> Result<Evaluation, WorkerError> {
    let SanitizeRequest {
        task,
        source,
        sizes,
        timeout,
        log_dir,
    } = *req;
    let sanitizer = find_sanitizer().ok_or_else(|| {
        WorkerError::Startup(
            "compute-sanitizer was not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin"
                .into(),
        )
    })?;
    let log = log_dir.join(format!("kevo-{}-{}.log", tool.name(), std::process::id()));
    let _ = std::fs::remove_file(&log);
    let mut args = vec![
        "--tool".to_string(),
        tool.name().to_string(),
        "--log-file".to_string(),
        log.display().to_string(),
        "--print-limit".to_string(),
        "20".to_string(),
        // kevo's own runtime probes (e.g. counting kernel parameters until
        // the driver says "invalid value") are not the candidate's errors.
        "--report-api-errors".to_string(),
        "no".to_string(),
        worker.program.display().to_string(),
    ];
    args.extend(worker.args.iter().cloned());
    let command = WorkerCommand {
        program: sanitizer,
        args,
        env: worker.env.clone(),
    };
    let mut w = Worker::start(command, config)?;
    let mut evaluation = w.evaluate(task, source, sizes, timeout);
    w.shutdown(Duration::from_secs(60));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    match parse_log(&text) {
        Some(r) if r.errors > 0 => {
            evaluation.outcome = Outcome::RuntimeError {
                size: None,
                fault: None,
                message: format!(
                    "compute-sanitizer {}: {} error(s): {}",
                    tool.name(),
                    r.errors,
                    r.excerpt
                ),
            };
        }
        Some(_) => {}
        None if evaluation.outcome.is_correct() => {
            evaluation.outcome = Outcome::RuntimeError {
                size: None,
                fault: None,
                message: format!(
                    "compute-sanitizer {} wrote no summary to {} (the worker did not exit cleanly)",
                    tool.name(),
                    log.display()
                ),
            };
        }
        None => {}
    }
    Ok(evaluation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_memcheck_and_racecheck_summaries() {
        let memcheck = "========= COMPUTE-SANITIZER\n========= Invalid __global__ write of size 4 bytes\n=========     at saxpy+0x90\n========= ERROR SUMMARY: 3 errors\n";
        let r = parse_log(memcheck).unwrap();
        assert_eq!(r.errors, 3);
        assert!(
            r.excerpt.starts_with("Invalid __global__ write"),
            "{}",
            r.excerpt
        );
        let clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
        assert_eq!(parse_log(clean).unwrap().errors, 0);
        let race = "========= Error: Race reported between Write access at heat_step+0x1f0\n========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n";
        assert_eq!(parse_log(race).unwrap().errors, 1);
        assert_eq!(parse_log("nothing here"), None);
        assert!("nope".parse::<SanitizerTool>().is_err());
        assert_eq!(
            "racecheck".parse::<SanitizerTool>().unwrap(),
            SanitizerTool::Racecheck
        );
    }
}
