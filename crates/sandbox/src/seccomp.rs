//! A seccomp-BPF filter for the worker and everything it starts (the
//! Triton helper, compilers, linkers): it is inherited by every thread and
//! child and cannot be removed.
//!
//! Landlock governs neither connecting to a pathname Unix socket nor the
//! path lookup that finds it, and the network namespace covers network
//! interfaces only, so native code in the worker (a kernel on a CPU OpenCL
//! device, a compiler bug, the Triton helper's Python) could otherwise
//! reach a Docker socket, a database or a session bus. The filter refuses,
//! with EPERM so that a driver that probes fails gracefully:
//!
//! - `socket(2)` for every address family but those in
//!   [`SOCKET_FAMILIES`] (none: no driver measured so far opens a socket);
//! - `socketpair(2)` for every family but `AF_UNIX` (a connected pair
//!   reaches nothing outside the process; Rust's and Python's process
//!   spawning and asyncio use it);
//! - io_uring (its SOCKET and CONNECT operations would bypass the socket
//!   rule), `bpf`, `userfaultfd`, the key-management calls (`keyctl`,
//!   `add_key`, `request_key`: the session keyring is inherited) and
//!   `perf_event_open`: no driver or compiler needs them.
//!
//! A system call of another architecture (x86_64's 32-bit `int 0x80` and
//! x32 entry points, which have their own numbers and a `socketcall`
//! multiplexer) kills the process.

/// Address families `socket(2)` may still open. Empty: PoCL (compiling,
/// linking, running the whole worker suite) and the worker itself open no
/// socket (docs/SANDBOX.md has how this was measured).
pub(crate) const SOCKET_FAMILIES: &[i32] = &[];

/// Calls refused outright.
const REFUSED: &[(&str, libc::c_long)] = &[
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("bpf", libc::SYS_bpf),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("perf_event_open", libc::SYS_perf_event_open),
];

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
#[cfg(target_arch = "x86_64")]
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

// Offsets in struct seccomp_data: nr, arch, instruction_pointer, args[6].
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of args[0] (both architectures are little-endian); the
/// kernel reads the family as an int, so the high half does not matter.
const ARG0: u32 = 16;

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const REFUSE: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter program. Every test is "if equal, return this", so no jump
/// goes further than the next block.
pub(crate) fn program() -> Vec<libc::sock_filter> {
    let mut p = vec![
        stmt(LD_W_ABS, ARCH),
        jump(JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(RET_K, KILL),
        stmt(LD_W_ABS, NR),
    ];
    // x32 system calls carry this bit and the x86_64 audit arch.
    #[cfg(target_arch = "x86_64")]
    p.extend([jump(JGE_K, 0x4000_0000, 0, 1), stmt(RET_K, KILL)]);
    for &(_, nr) in REFUSED {
        p.extend([jump(JEQ_K, nr as u32, 0, 1), stmt(RET_K, REFUSE)]);
    }
    // socket: the allowed families, then refuse.
    let block = 1 + 2 * SOCKET_FAMILIES.len() + 1;
    p.push(jump(JEQ_K, libc::SYS_socket as u32, 0, block as u8));
    p.push(stmt(LD_W_ABS, ARG0));
    for &family in SOCKET_FAMILIES {
        p.extend([jump(JEQ_K, family as u32, 0, 1), stmt(RET_K, ALLOW)]);
    }
    p.push(stmt(RET_K, REFUSE));
    // socketpair: AF_UNIX only.
    p.extend([
        jump(JEQ_K, libc::SYS_socketpair as u32, 0, 4),
        stmt(LD_W_ABS, ARG0),
        jump(JEQ_K, libc::AF_UNIX as u32, 0, 1),
        stmt(RET_K, ALLOW),
        stmt(RET_K, REFUSE),
    ]);
    p.push(stmt(RET_K, ALLOW));
    p
}

/// What the filter refuses, for the sandbox line.
pub(crate) fn description() -> String {
    let names: Vec<&str> = REFUSED
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !n.starts_with("io_uring_") || *n == "io_uring_setup")
        .map(|n| if n == "io_uring_setup" { "io_uring" } else { n })
        .collect();
    let sockets = if SOCKET_FAMILIES.is_empty() {
        "no sockets (socketpair AF_UNIX only)".to_string()
    } else {
        format!(
            "sockets of families {:?} only (socketpair AF_UNIX only)",
            SOCKET_FAMILIES
        )
    };
    format!("seccomp: {sockets}; {} refused", names.join(", "))
}

/// Install `program` on the calling process and all its threads. Sets
/// no_new_privs first (the kernel requires it of an unprivileged caller).
/// Async-signal-safe once the program is built, so a forked child of a
/// threaded process may call it.
///
/// With SPEC_ALLOW: by default the kernel turns on Speculative Store
/// Bypass mitigation for a filtered process (where the CPU needs it and
/// the mitigation mode is `seccomp`, the usual default), which slows the
/// worker's host code, CPU kernels and their timings; it would protect the
/// worker's memory from code inside the worker, which on a CPU device
/// reads that memory directly anyway.
pub(crate) fn install(program: &[libc::sock_filter]) -> Result<(), std::io::Error> {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with integer arguments; the filter program outlives
    // the call, which copies it into the kernel.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut err = std::io::Error::from_raw_os_error(libc::ENOSYS);
        // SPEC_ALLOW is Linux 4.17+: older kernels refuse it with EINVAL.
        for flags in [
            libc::SECCOMP_FILTER_FLAG_TSYNC | libc::SECCOMP_FILTER_FLAG_SPEC_ALLOW,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
        ] {
            let r = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &prog as *const libc::sock_fprog,
            );
            if r == 0 {
                return Ok(());
            }
            err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINVAL) {
                break;
            }
        }
        // Before Linux 3.17 there is no seccomp(2): the prctl form binds
        // the calling thread and those it starts later.
        if err.raw_os_error() == Some(libc::ENOSYS)
            && libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
                0,
                0,
            ) == 0
        {
            return Ok(());
        }
        Err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixListener, UnixStream};

    /// Runs `f` in a forked child and returns its exit code.
    fn in_child(f: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the test child runs `f` and exits without returning.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = f();
            // SAFETY: ends the child.
            unsafe { libc::_exit(code) };
        }
        let mut code = 0;
        // SAFETY: waits for the child just forked.
        unsafe { libc::waitpid(pid, &mut code, 0) };
        if libc::WIFEXITED(code) {
            libc::WEXITSTATUS(code)
        } else {
            -1
        }
    }

    fn errno_of(r: libc::c_long) -> Option<i32> {
        (r < 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    #[test]
    fn the_filter_refuses_sockets_and_keeps_socketpairs_and_threads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("outside.sock");
        let listener = UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let program = program();
        let speculation = || {
            std::fs::read_to_string("/proc/self/status")
                .unwrap_or_default()
                .lines()
                .find(|l| l.starts_with("Speculation_Store_Bypass"))
                .map(str::to_string)
        };
        let before = speculation();
        let code = in_child(|| {
            if install(&program).is_err() {
                return 10;
            }
            // SPEC_ALLOW: the filter leaves the speculation mitigations
            // as they were.
            if speculation() != before {
                return 19;
            }
            if UnixStream::connect(&path).is_ok() {
                return 11;
            }
            for family in [
                libc::AF_UNIX,
                libc::AF_INET,
                libc::AF_INET6,
                libc::AF_NETLINK,
                libc::AF_PACKET,
                libc::AF_VSOCK,
                libc::AF_ALG,
            ] {
                // SAFETY: socket takes integers; a descriptor it returned
                // would be leaked in a child that exits at once.
                let r = unsafe { libc::socket(family, libc::SOCK_STREAM, 0) } as libc::c_long;
                if errno_of(r) != Some(libc::EPERM) {
                    return 12;
                }
            }
            let mut fds = [0; 2];
            // SAFETY: out-parameter of two descriptors.
            if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) }
                != 0
            {
                return 13;
            }
            // SAFETY: as above; AF_INET pairs do not exist, but the filter
            // answers first.
            let r =
                unsafe { libc::socketpair(libc::AF_TIPC, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) }
                    as libc::c_long;
            if errno_of(r) != Some(libc::EPERM) {
                return 14;
            }
            // SAFETY: io_uring_setup with a null params pointer: refused
            // before the kernel would read it.
            let r = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, 0usize) };
            if errno_of(r) != Some(libc::EPERM) {
                return 15;
            }
            // SAFETY: keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0).
            let r = unsafe { libc::syscall(libc::SYS_keyctl, 0, -3i32, 0) };
            if errno_of(r) != Some(libc::EPERM) {
                return 16;
            }
            // A thread started afterwards is bound too.
            let p = path.clone();
            let from_thread = std::thread::spawn(move || UnixStream::connect(&p).is_ok())
                .join()
                .unwrap();
            if from_thread {
                return 17;
            }
            // Ordinary calls still work.
            if std::fs::read("/proc/self/status").is_err() {
                return 18;
            }
            0
        });
        assert_eq!(code, 0, "see the return codes in the child");
        assert!(
            listener.accept().is_err(),
            "the listener accepted a connection"
        );
    }

    #[test]
    fn the_description_names_what_is_refused() {
        let d = description();
        assert!(d.contains("no sockets"), "{d}");
        assert!(d.contains("io_uring, bpf"), "{d}");
        assert!(!d.contains("io_uring_enter"), "{d}");
    }
}
