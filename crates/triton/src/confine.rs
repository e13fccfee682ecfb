//! The helper's own file confinement: a Landlock domain, stacked on the
//! worker's, that lets the helper read and execute only the interpreter's
//! installation (the venv and the Python it was made from), the system's
//! shared libraries and shells, and the dynamic linker's files, and write
//! only its scratch directory (and /dev/null). The worker's sandbox also
//! lets it read the system's binaries, /etc/OpenCL, /etc/nvidia, /proc,
//! /sys, device nodes, directories the user opened up and the rest of the
//! worker's scratch directory, none of which compiling a Triton kernel
//! needs. Built in the parent (which may allocate) and put in force
//! between fork and exec with two system calls.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

// Landlock's filesystem rights (linux/landlock.h).
const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
/// ABI 1: every right up to MAKE_SYM (bit 12).
const ABI1_ALL: u64 = (1 << 13) - 1;
const REFER: u64 = 1 << 13;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
/// The rights a rule on a file (not a directory) may carry.
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
const RULE_PATH_BENEATH: libc::c_int = 1;
const CREATE_RULESET_VERSION: libc::c_uint = 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Directories and files of the system the helper reads: shared
/// libraries (Python's, the C++ runtime Triton's extension links, zlib),
/// the dynamic linker's cache and configuration, shells (a `python` that
/// is a script), time zones.
const SYSTEM_READABLE: &[&str] = &[
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
    "/bin",
    "/usr/bin",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/usr/share/zoneinfo",
];

/// The kernel's Landlock ABI version, 0 where Landlock is off or missing.
fn abi() -> i64 {
    // SAFETY: the version query takes no ruleset and writes nothing.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    v.max(0)
}

/// What the helper started with `python` may read, besides its scratch
/// directory.
pub(crate) fn readable(python: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = SYSTEM_READABLE.iter().map(PathBuf::from).collect();
    if let Ok(installation) = crate::interpreter_paths(python) {
        paths.extend(installation);
    }
    // The interpreter as it was named, whatever it is (a venv's link, a
    // wrapper script).
    if let Ok(named) = std::fs::canonicalize(python) {
        paths.push(named);
    }
    // Libraries the user pointed the dynamic linker at; never a search
    // path entry that holds the home or working directory.
    let guarded: Vec<PathBuf> = [
        std::env::var_os("HOME").map(PathBuf::from),
        std::env::current_dir().ok(),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Some(value) = std::env::var_os("LD_LIBRARY_PATH") {
        paths.extend(std::env::split_paths(&value).filter(|p| {
            p.is_absolute() && p.parent().is_some() && !guarded.iter().any(|g| g.starts_with(p))
        }));
    }
    paths
}

/// A Landlock ruleset for the helper: `readable` read and executed,
/// `scratch` written, /dev/null read and written. None where Landlock is
/// missing or the ruleset cannot be made.
fn ruleset(readable: &[PathBuf], scratch: &Path) -> Option<(OwnedFd, i64)> {
    let abi = abi();
    if abi < 1 {
        return None;
    }
    let mut handled = ABI1_ALL;
    if abi >= 2 {
        handled |= REFER;
    }
    if abi >= 3 {
        handled |= TRUNCATE;
    }
    if abi >= 5 {
        handled |= IOCTL_DEV;
    }
    let attr = RulesetAttr {
        handled_access_fs: handled,
    };
    // SAFETY: attr is a valid landlock_ruleset_attr prefix of the size
    // given; the result is a new descriptor (close-on-exec) or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: a descriptor the kernel just gave this process.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let read = EXECUTE | READ_FILE | READ_DIR;
    for path in readable {
        allow(&ruleset, path, read & handled);
    }
    allow(
        &ruleset,
        Path::new("/dev/null"),
        (READ_FILE | WRITE_FILE | TRUNCATE) & handled,
    );
    if !allow(&ruleset, scratch, handled) {
        return None;
    }
    Some((ruleset, abi))
}

/// Add a rule granting `access` beneath `path` (a file gets the file
/// rights of it). False where the path cannot be opened or the rule is
/// refused.
fn allow(ruleset: &OwnedFd, path: &Path, access: u64) -> bool {
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path; O_PATH opens nothing's contents.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    // SAFETY: a descriptor just opened here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
    let access = if is_dir { access } else { access & FILE_RIGHTS };
    if access == 0 {
        return false;
    }
    let rule = PathBeneathAttr {
        allowed_access: access,
        parent_fd: fd.as_raw_fd(),
    };
    // SAFETY: a valid landlock_path_beneath_attr for a ruleset descriptor.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &rule as *const PathBeneathAttr,
            0u32,
        )
    };
    r == 0
}

/// Confine the helper `command` starts to what compiling needs: a
/// Landlock domain made here and put in force in the child before it
/// runs the interpreter. Returns what is in force, or None where Landlock
/// is not available (the worker's own sandbox still applies).
pub(crate) fn files(command: &mut Command, python: &str, scratch: &Path) -> Option<String> {
    let readable = readable(python);
    let (ruleset, abi) = ruleset(&readable, scratch)?;
    {
        use std::os::unix::process::CommandExt;
        let fd = ruleset.as_raw_fd();
        // SAFETY: prctl and landlock_restrict_self are plain system calls
        // (async-signal-safe); the closure owns the ruleset descriptor,
        // which stays open until the command is dropped after the spawn.
        unsafe {
            command.pre_exec(move || {
                let _keep = &ruleset;
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    Some(format!(
        "landlock ABI {abi}: reads only the interpreter's installation and system libraries, writes only {}",
        scratch.display()
    ))
}
