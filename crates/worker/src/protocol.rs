//! The framed protocol between the coordinator and a worker: one JSON object
//! per line. The worker's stdout carries only these lines; anything it (or a
//! driver) prints for people goes to stderr, which the coordinator keeps the
//! tail of for diagnostics.

use kevo_backend::{CompileOptions, DeviceInfo, DeviceSelector};
use kevo_eval::{EvalConfig, Evaluation};
use kevo_roofline::Ceilings;
use kevo_tasks::Size;
use serde::{Deserialize, Serialize};

use crate::backends::BackendKind;

/// Everything a worker needs to open its device and evaluate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerConfig {
    pub backend: BackendKind,
    #[serde(default)]
    pub selector: DeviceSelector,
    #[serde(default)]
    pub eval: EvalConfig,
}

impl WorkerConfig {
    pub fn new(backend: BackendKind, selector: DeviceSelector) -> Self {
        WorkerConfig {
            backend,
            selector,
            eval: EvalConfig::default(),
        }
    }

    pub fn with_compile(mut self, compile: CompileOptions) -> Self {
        self.eval.compile = compile;
        self
    }
}

/// Coordinator -> worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    Evaluate {
        id: u64,
        task: String,
        source: String,
        sizes: Vec<Size>,
    },
}

/// Worker -> coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// The device is open and the ceilings are known.
    Ready {
        device: Box<DeviceInfo>,
        ceilings: Ceilings,
        /// Seconds from process start to ready (backend + context creation).
        startup_s: f64,
    },
    /// The worker could not start (no such device, no runtime).
    Fatal { message: String },
    /// Evaluation `id` is about to run `size`.
    Progress { id: u64, size: String },
    Result {
        id: u64,
        evaluation: Box<Evaluation>,
        /// The device is unusable for the rest of this process (a sticky
        /// fault); the worker exits after this reply and must be replaced.
        #[serde(default)]
        restart: bool,
    },
}
