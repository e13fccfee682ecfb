//! Shared set-up for the worker tests: a supervised worker on the first
//! device of a backend, and the adversarial kernels of a dialect.

use kevo_backend::DeviceSelector;
use kevo_worker::backends::BackendKind;
use kevo_worker::{Worker, WorkerCommand, WorkerConfig, WorkerError};

pub fn worker(kind: BackendKind, cache_dir: &std::path::Path) -> Result<Worker, WorkerError> {
    let command = WorkerCommand {
        program: env!("CARGO_BIN_EXE_kevo-worker").into(),
        args: Vec::new(),
        env: vec![("KEVO_CACHE_DIR".into(), cache_dir.display().to_string())],
    };
    Worker::start(command, WorkerConfig::new(kind, DeviceSelector::default()))
}

/// An adversarial or unusual kernel, read from tests/adversarial/<dir>/<name>.
pub fn kernel(dir: &str, name: &str) -> String {
    let path = format!(
        "{}/tests/adversarial/{dir}/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
