//! Evaluation jobs over NATS JetStream, so that only evaluation needs GPUs
//! (KernelFoundry separates LLM, compilation, execution and database
//! workers the same way): a GPU host runs `kevo worker --nats URL`, which
//! serves a JetStream work queue for its backend and device model with the
//! same isolated worker and protocol as a local run; a run started with
//! `--nats URL` publishes each evaluation as a job and waits for its
//! result. Several runs and several coordinators share the workers.
//!
//! Names, under a namespace (default `kevo`, so that teams or tests can
//! share one server without sharing queues):
//!
//! - stream `KEVO_JOBS` (work-queue retention), subjects
//!   `kevo.jobs.<backend>.<device key>`: one job is delivered to one
//!   worker at a time;
//! - key-value bucket `KEVO_RESULTS`: each job's result under its id,
//!   written once (a redelivered job whose result exists is not evaluated
//!   again, and a second write is refused), kept an hour;
//! - key-value bucket `KEVO_WORKERS`: each worker's device, ceilings,
//!   sandbox and kevo version, refreshed every few seconds.
//!
//! Delivery is at least once: a worker acknowledges a job only after its
//! result is stored in the results bucket, and tells the server it is still
//! working every third of the acknowledgement wait, so a worker that dies
//! (SIGKILL, node loss) has its job redelivered to another after at most
//! one wait. A job delivered more than `attempts` times has killed that
//! many workers: the next worker stores a failure for it instead of
//! running it again.

mod coordinator;
mod names;
mod worker;

use kevo_backend::{BackendName, DeviceInfo};
use kevo_eval::Evaluation;
use kevo_roofline::Ceilings;
use kevo_tasks::Size;
use serde::{Deserialize, Serialize};

pub use coordinator::{RemoteEvaluator, Request};
pub use names::{Namespace, device_key};
pub use worker::{JobWorker, WorkerOptions};

/// Evaluations a job may kill workers in before it is failed (the third
/// delivery of a job that took down two workers stores a failure).
pub const DEFAULT_ATTEMPTS: u32 = 2;

/// How long a job may go without a sign of life from its worker before the
/// server delivers it to another: a worker says it is alive every third of
/// this, so only a dead worker's job waits it out.
pub const DEFAULT_ACK_WAIT_S: f64 = 30.0;

/// How long a result is kept in the results bucket: far longer than a
/// coordinator waits for one.
pub const RESULT_TTL_S: u64 = 3600;

/// A worker that has not refreshed its entry for this long is not offered
/// as a run's device.
pub const WORKER_STALE_S: i64 = 30;

/// One evaluation to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Unique per evaluation; the result's key.
    pub id: String,
    pub task: String,
    /// The task definition the coordinator scores against: a worker whose
    /// task differs refuses the job.
    pub task_hash: String,
    /// The kernel with its hashes and dialect (see
    /// [`kevo_eval::Candidate`]).
    pub candidate: kevo_eval::Candidate,
    pub sizes: Vec<Size>,
    /// The hard wall-clock limit of the evaluation.
    pub timeout_s: f64,
    /// The run's evaluation settings (a `kevo_worker::WorkerConfig`: timing,
    /// compile options, limits, sandbox, declared ceilings); the worker
    /// opens its own device with them.
    pub settings: serde_json::Value,
    /// The coordinator's kevo version.
    pub kevo: String,
}

/// A job's result, as stored under its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub job: String,
    /// The worker that stored it.
    pub worker: String,
    /// Which delivery of the job it came from (1 for the first).
    pub delivery: u64,
    pub evaluation: Evaluation,
}

/// A worker as it announces itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerInfo {
    pub id: String,
    pub host: String,
    pub kevo: String,
    pub backend: BackendName,
    pub device: DeviceInfo,
    pub ceilings: Ceilings,
    pub sandbox: kevo_sandbox::Status,
    /// Unix seconds of its last refresh.
    pub seen_at: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("cannot reach NATS at {url}: {message}")]
    Connect { url: String, message: String },
    #[error("NATS JetStream {what}: {message}")]
    JetStream { what: String, message: String },
    #[error(
        "no kevo worker serves {wanted} on NATS (namespace {namespace}); start one on a GPU host with `kevo worker --nats URL`{seen}"
    )]
    NoWorker {
        wanted: String,
        namespace: String,
        seen: String,
    },
    #[error(
        "workers of different device models serve {}: {models}; scores of different devices do not compare, so name one with --device",
        .backend.map_or("any backend", BackendName::name)
    )]
    MixedDevices {
        /// The backend asked for; `None` for any.
        backend: Option<BackendName>,
        models: String,
    },
    #[error("a job or result could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
}

pub(crate) fn jetstream_error(what: &str, e: impl std::fmt::Display) -> DispatchError {
    DispatchError::JetStream {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// The content hash of a task this build knows, as jobs carry it.
pub fn task_hash(task: &str) -> Option<String> {
    kevo_tasks::by_name(task)
        .ok()
        .map(|t| t.content_hash().to_string())
}

/// Unix seconds now.
pub(crate) fn now_s() -> i64 {
    chrono::Utc::now().timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_devices_name_the_backend_asked_for() {
        let mixed = |backend| DispatchError::MixedDevices {
            backend,
            models: "cuda A, cuda B".into(),
        };
        let cuda = mixed(Some(BackendName::Cuda)).to_string();
        assert!(
            cuda.starts_with("workers of different device models serve cuda: cuda A, cuda B;"),
            "{cuda}"
        );
        let any = mixed(None).to_string();
        assert!(any.contains("serve any backend: "), "{any}");
    }
}
