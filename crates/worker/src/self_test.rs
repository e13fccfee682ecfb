//! Test-only probes of what a confined worker can reach
//! (`WorkerConfig::self_test_connects`): the adversarial suite asks a real
//! worker, confined as for any candidate and with its device open, to
//! connect to a Unix socket outside its allowed paths.

use std::os::unix::net::UnixStream;
use std::path::Path;

use crate::protocol::ConnectProbe;

/// The interpreter the child probe runs where the worker has no Triton
/// interpreter configured.
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// What a connect from Python does in the child; the socket path is argv[1].
const CHILD_CONNECT: &str = "import socket, sys\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.connect(sys.argv[1])\n";

/// Try `path` from this thread, a new thread and a child process. `python`
/// is the Triton interpreter of a Triton worker (the helper's), else None.
pub(crate) fn connect(path: &Path, python: Option<&str>) -> ConnectProbe {
    let here = |p: &Path| UnixStream::connect(p).map(drop).map_err(|e| e.to_string());
    let main_thread = here(path);
    let owned = path.to_path_buf();
    let new_thread = std::thread::spawn(move || here(&owned))
        .join()
        .unwrap_or_else(|_| Err("the probe thread panicked".into()));
    let python = python.unwrap_or(SYSTEM_PYTHON);
    let child = (python != SYSTEM_PYTHON || Path::new(SYSTEM_PYTHON).exists()).then(|| {
        let out = std::process::Command::new(python)
            .args(["-c", CHILD_CONNECT])
            .arg(path)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {python}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(stderr
                .lines()
                .last()
                .unwrap_or("no message")
                .trim()
                .to_string())
        }
    });
    ConnectProbe {
        path: path.to_path_buf(),
        main_thread,
        new_thread,
        child,
    }
}
