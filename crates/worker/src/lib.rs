//! Evaluation in isolated worker processes. A candidate kernel is untrusted
//! code: it may hang, fault the GPU or crash the process. Each device gets a
//! worker process that the coordinator drives over a line protocol and
//! replaces whenever a candidate kills or hangs it.

pub mod backends;
mod protocol;
pub mod sanitizer;
mod serve;
mod supervisor;

pub use protocol::{Reply, Request, WorkerConfig};
pub use serve::serve;
pub use supervisor::{Worker, WorkerCommand, WorkerError, WorkerStats, timeout_from_seed};

/// Entry point of a worker process: parse `--config JSON` from `args` and
/// serve stdin/stdout.
pub fn worker_main(args: &[String]) -> std::io::Result<()> {
    let config = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1))
        .ok_or_else(|| std::io::Error::other("kevo worker needs --config JSON"))?;
    let config: WorkerConfig = serde_json::from_str(config).map_err(std::io::Error::other)?;
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    serve(config, stdin.lock(), stdout.lock())
}
