//! Evaluation in isolated worker processes. A candidate kernel is untrusted
//! code: it may hang, fault the GPU or crash the process. Each device gets a
//! worker process that the coordinator drives over a line protocol and
//! replaces whenever a candidate kills or hangs it.

pub mod limits;
pub mod profiler;
mod protocol;
pub mod sanitizer;
mod self_test;
mod serve;
mod supervisor;

pub use kevo_sandbox;
pub use limits::Limits;
pub use protocol::{
    Blob, ConnectProbe, DeclaredCeilings, ExpectedEntry, Reply, Request, SelfTest, TaskPackage,
    TimingOptions, WorkerConfig,
};
pub use serve::serve;
pub use supervisor::{Worker, WorkerCommand, WorkerError, WorkerStats, timeout_from_seed};

/// Entry point of a worker process: parse `--config JSON` and
/// `--protocol-fd N` from `args`, point fd 1 at stderr (device printf and
/// driver chatter must not reach the protocol), and serve requests from
/// stdin with replies on fd N.
pub fn worker_main(args: &[String]) -> std::io::Result<()> {
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let config = value("--config")
        .ok_or_else(|| std::io::Error::other("kevo worker needs --config JSON"))?;
    let config: WorkerConfig = serde_json::from_str(config).map_err(std::io::Error::other)?;
    let fd: i32 = value("--protocol-fd")
        .ok_or_else(|| {
            std::io::Error::other("kevo worker needs --protocol-fd N (it is started by kevo)")
        })?
        .parse()
        .map_err(|e| std::io::Error::other(format!("--protocol-fd: {e}")))?;
    if fd <= 2 {
        return Err(std::io::Error::other(
            "--protocol-fd must be a descriptor other than stdin, stdout and stderr",
        ));
    }
    // SAFETY: fcntl/dup2 on descriptors this process owns; the protocol fd
    // is marked close-on-exec so nothing the worker starts inherits it.
    let output = unsafe {
        if libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) != 0 {
            return Err(std::io::Error::other(format!(
                "--protocol-fd {fd} is not an open descriptor"
            )));
        }
        if libc::dup2(2, 1) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd)
    };
    let stdin = std::io::stdin();
    serve(config, stdin.lock(), std::io::BufWriter::new(output))
}
