//! What confines a worker, the process that compiles and runs candidate
//! kernels. A candidate is untrusted code: through the compiler it can name
//! files (`#include "/home/u/.env"`, `__has_include` probes), and on CPU
//! OpenCL devices it runs as native code inside the worker. So the worker,
//! before it opens a device, gives up everything it does not need:
//!
//! - its environment is an allow-list ([`env`]), set by the parent;
//! - a new user and network namespace: no network interface but loopback
//!   (unprivileged, where the kernel allows user namespaces);
//! - Landlock rules: files can be read only under the system directories
//!   drivers and compilers need ([`Policy::system`]), written only in a
//!   private scratch directory; TCP bind and connect are refused; no new
//!   privileges. Landlock also stops the worker from ptrace-reading other
//!   processes (`/proc/<pid>/environ` of the coordinator);
//! - a seccomp filter (x86_64 and aarch64): no sockets (Landlock does not
//!   govern connecting to a pathname Unix socket), no io_uring, bpf,
//!   userfaultfd, keyrings or perf_event_open.
//!
//! Every layer is best effort and reported in a [`Status`]; a caller that
//! must not run without one asks for it ([`Options::required`]).

pub mod env;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod seccomp;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the parent asks of the worker's confinement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Off only for measuring the sandbox's cost or debugging a driver.
    pub enabled: bool,
    /// Refuse to run when any layer is missing.
    pub required: bool,
    /// The worker's private directory: the only place it may write.
    pub scratch: Option<PathBuf>,
    /// More directories or files the worker may write (a sanitizer's log).
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// More directories or files the worker may read: a driver or toolkit
    /// installed outside the system directories (/opt/cuda, say).
    #[serde(default)]
    pub readable: Vec<PathBuf>,
    /// Layers to leave out, to find which one a driver cannot live with;
    /// each is reported as missing.
    #[serde(default)]
    pub skip: Vec<Layer>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            enabled: true,
            required: false,
            scratch: None,
            writable: Vec::new(),
            readable: Vec::new(),
            skip: Vec::new(),
        }
    }
}

/// One layer of the confinement, as `--sandbox-skip` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The user and network namespace.
    Namespaces,
    /// Landlock's filesystem rules.
    Files,
    /// Landlock's TCP bind/connect rules.
    Tcp,
    /// Landlock's scopes: abstract Unix sockets and signals.
    Scopes,
    /// The seccomp filter: sockets, io_uring, bpf, userfaultfd, keyrings,
    /// perf_event_open.
    Syscalls,
}

impl Layer {
    pub const ALL: [Layer; 5] = [
        Layer::Namespaces,
        Layer::Files,
        Layer::Tcp,
        Layer::Scopes,
        Layer::Syscalls,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Layer::Namespaces => "namespaces",
            Layer::Files => "files",
            Layer::Tcp => "tcp",
            Layer::Scopes => "scopes",
            Layer::Syscalls => "syscalls",
        }
    }
}

impl std::str::FromStr for Layer {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Layer::ALL
            .into_iter()
            .find(|l| l.name() == s.trim())
            .ok_or_else(|| {
                format!(
                    "unknown sandbox layer {s:?}; the layers are {}",
                    Layer::ALL.map(Layer::name).join(", ")
                )
            })
    }
}

/// Which layers are in force, as the worker found them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// "landlock ABI 7: fully enforced", or None.
    pub filesystem: Option<String>,
    /// "network namespace (loopback only)" and/or "landlock: TCP refused".
    pub network: Vec<String>,
    pub no_new_privileges: bool,
    /// "seccomp: no sockets (socketpair AF_UNIX only); io_uring, ...
    /// refused", or None. Absent in statuses stored before the layer.
    #[serde(default)]
    pub syscalls: Option<String>,
    /// Set by the coordinator, which builds the environment.
    pub environment_scrubbed: bool,
    /// Layers that could not be put in place, each with the reason.
    pub missing: Vec<String>,
}

impl Status {
    /// Every layer is in force.
    pub fn complete(&self) -> bool {
        self.complete_but_the_filter() && self.syscalls.is_some()
    }

    /// Every layer but the seccomp filter, which goes on once the device
    /// is open ([`filter_syscalls`]).
    fn complete_but_the_filter(&self) -> bool {
        self.missing.is_empty()
            && self.filesystem.is_some()
            && !self.network.is_empty()
            && self.no_new_privileges
    }

    /// One line for `kevo devices`, run summaries and provenance.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        parts.push(match &self.filesystem {
            Some(f) => format!("files: {f}"),
            None => "files: unconfined".to_string(),
        });
        parts.push(if self.network.is_empty() {
            "network: unconfined".to_string()
        } else {
            format!("network: {}", self.network.join(", "))
        });
        parts.push(match &self.syscalls {
            Some(s) => format!("syscalls: {s}"),
            None => "syscalls: unfiltered".to_string(),
        });
        if self.no_new_privileges {
            parts.push("no new privileges".into());
        }
        if self.environment_scrubbed {
            parts.push("environment allow-listed".into());
        }
        if !self.missing.is_empty() {
            parts.push(format!("missing: {}", self.missing.join("; ")));
        }
        parts.join("; ")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox is required but incomplete: {0}")]
    Incomplete(String),
}

/// The filesystem a worker may see.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Read and execute (libraries, compilers, driver files).
    pub readable: Vec<PathBuf>,
    /// Read, write, create, remove.
    pub writable: Vec<PathBuf>,
}

impl Policy {
    /// What GPU drivers, the OpenCL ICD loader, PoCL and NVRTC were found
    /// to need (docs/SANDBOX.md has how): system libraries and binaries,
    /// the loader's vendor files, the dynamic linker's cache, device nodes,
    /// and the kernel's process and device tables. Not /etc as a whole,
    /// /home, /root, /tmp, /opt, /srv, /mnt or /media. Directories on
    /// LD_LIBRARY_PATH are added: the user put libraries there.
    pub fn system() -> Policy {
        let mut readable: Vec<PathBuf> = [
            "/usr",
            "/lib",
            "/lib32",
            "/lib64",
            "/bin",
            "/sbin",
            "/etc/OpenCL",
            "/etc/ld.so.cache",
            "/etc/ld.so.conf",
            "/etc/ld.so.conf.d",
            "/etc/nvidia",
            "/etc/localtime",
            "/proc",
            "/sys",
            "/run/nvidia-persistenced",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        // A search-path entry that is `/` or holds the home or working
        // directory would open them all: such entries are left out.
        let guarded: Vec<PathBuf> = [
            std::env::var_os("HOME").map(PathBuf::from),
            std::env::current_dir().ok(),
        ]
        .into_iter()
        .flatten()
        .collect();
        for var in ["LD_LIBRARY_PATH", "OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH"] {
            if let Some(value) = std::env::var_os(var) {
                readable.extend(std::env::split_paths(&value).filter(|p| {
                    p.is_absolute()
                        && p.parent().is_some()
                        && !guarded.iter().any(|g| g.starts_with(p))
                }));
            }
        }
        Policy {
            readable,
            // /proc/self/task: the CUDA driver names its threads there
            // (cuInit fails with CUDA_ERROR_OPERATING_SYSTEM without it, on
            // the H100 machine with driver 580). The rule resolves
            // /proc/self when it is made, so it opens the worker's own
            // threads only, never another process's.
            writable: vec![PathBuf::from("/dev"), PathBuf::from("/proc/self/task")],
        }
    }
}

/// Confine the calling process as `options` ask. Call it while the process
/// has one thread (user namespaces need that, and Landlock rules bind only
/// threads created after them on kernels before ABI 8), before any device
/// is opened. Returns what is in force; with `required`, an incomplete
/// sandbox is an error and the caller must not go on.
pub fn enter(options: &Options) -> Result<Status, SandboxError> {
    if !options.enabled {
        let status = Status {
            missing: vec!["disabled by --no-sandbox".into()],
            ..Status::default()
        };
        return check(options, status);
    }
    let mut policy = Policy::system();
    policy.writable.extend(options.scratch.iter().cloned());
    policy.writable.extend(options.writable.iter().cloned());
    policy.readable.extend(options.readable.iter().cloned());
    #[cfg(target_os = "linux")]
    let mut status = linux::enter(&policy, &options.skip);
    #[cfg(target_os = "linux")]
    if let Some(files) = &mut status.filesystem {
        // What the user opened up is part of what was in force.
        let list = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !options.readable.is_empty() {
            files.push_str(&format!(" (also readable: {})", list(&options.readable)));
        }
        if !options.writable.is_empty() {
            files.push_str(&format!(" (also writable: {})", list(&options.writable)));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let status = Status {
        missing: vec!["no sandbox on this platform".into()],
        ..Status::default()
    };
    if options.required && !status.complete_but_the_filter() {
        return Err(SandboxError::Incomplete(status.summary()));
    }
    Ok(status)
}

/// Install the seccomp layer (unless skipped) on top of what [`enter`]
/// put in force, once the device is open, and check the whole: the
/// filter binds every thread of the process, the drivers' included, and
/// every process it starts later (compilers, the Triton helper), so a
/// candidate never runs without it; a driver's own start-up does.
pub fn filter_syscalls(options: &Options, mut status: Status) -> Result<Status, SandboxError> {
    #[cfg(target_os = "linux")]
    if options.enabled && !options.skip.contains(&Layer::Syscalls) {
        linux::filter(&mut status);
    }
    check(options, status)
}

fn check(options: &Options, status: Status) -> Result<Status, SandboxError> {
    if options.required && !status.complete() {
        return Err(SandboxError::Incomplete(status.summary()));
    }
    Ok(status)
}

/// What this machine offers, found by confining a short-lived child
/// process: for `kevo devices`, without touching the caller.
pub fn available() -> Status {
    #[cfg(target_os = "linux")]
    {
        linux::probe()
    }
    #[cfg(not(target_os = "linux"))]
    Status {
        missing: vec!["no sandbox on this platform".into()],
        ..Status::default()
    }
}
