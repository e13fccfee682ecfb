//! Landlock, namespaces and the seccomp filter on Linux.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use crate::{Layer, Policy, Status};

/// The newest rights kevo asks for; older kernels get what they support.
const WANTED: ABI = ABI::V7;

/// The kernel's Landlock ABI version, 0 where Landlock is off or missing.
pub(crate) fn landlock_abi() -> i64 {
    // SAFETY: the version query takes no ruleset and writes nothing.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    v.max(0)
}

/// A new user namespace (mapping this user to itself, so file ownership
/// checks are unchanged) with a new network namespace in it: the process
/// keeps only a loopback interface that is down.
fn isolate_network() -> std::io::Result<()> {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: unshare takes flags only; fails cleanly when not allowed or
    // when the process has more than one thread.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(())
}

fn restrict(
    policy: &Policy,
    skip: &[Layer],
) -> Result<(RulesetStatus, bool), landlock::RulesetError> {
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
    if !skip.contains(&Layer::Files) {
        ruleset = ruleset.handle_access(AccessFs::from_all(WANTED))?;
    }
    if !skip.contains(&Layer::Tcp) {
        ruleset = ruleset.handle_access(AccessNet::from_all(WANTED))?;
    }
    if !skip.contains(&Layer::Scopes) {
        ruleset = ruleset.scope(Scope::from_all(WANTED))?;
    }
    let mut created = ruleset.create()?;
    if !skip.contains(&Layer::Files) {
        created = created
            .add_rules(path_beneath_rules(
                &policy.readable,
                AccessFs::from_read(WANTED),
            ))?
            .add_rules(path_beneath_rules(
                &policy.writable,
                AccessFs::from_all(WANTED),
            ))?;
    }
    let status = created.restrict_self()?;
    Ok((status.ruleset, status.no_new_privs))
}

pub(crate) fn enter(policy: &Policy, skip: &[Layer]) -> Status {
    let mut status = Status::default();
    for layer in skip {
        status
            .missing
            .push(format!("{} skipped on request", layer.name()));
    }
    if !skip.contains(&Layer::Namespaces) {
        match isolate_network() {
            Ok(()) => status
                .network
                .push("own network namespace (no interfaces)".into()),
            Err(e) => status
                .missing
                .push(format!("network namespace: unshare refused ({e})")),
        }
    }
    let abi = landlock_abi();
    let landlock = !(skip.contains(&Layer::Files)
        && skip.contains(&Layer::Tcp)
        && skip.contains(&Layer::Scopes));
    if landlock {
        landlock_layers(policy, skip, abi, &mut status);
    }
    if landlock && !status.no_new_privileges {
        status.missing.push("no_new_privs not set".into());
    }
    status
}

/// The seccomp layer, installed on every thread of the process (TSYNC)
/// once the device is open: the CUDA driver's initialisation failed with
/// CUDA_ERROR_OPERATING_SYSTEM under the filter on an H200 machine, and
/// nothing a driver does while opening the device is a candidate's.
pub(crate) fn filter(status: &mut Status) {
    match filter_syscalls() {
        Ok(description) => {
            status.syscalls = Some(description);
            status.no_new_privileges = true;
            status.missing.retain(|m| m != "no_new_privs not set");
        }
        Err(e) => status.missing.push(format!("seccomp: {e}")),
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn filter_syscalls() -> Result<String, String> {
    crate::seccomp::install(&crate::seccomp::program())
        .map(|()| crate::seccomp::description())
        .map_err(|e| format!("the filter was refused ({e})"))
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn filter_syscalls() -> Result<String, String> {
    Err("no filter for this architecture".into())
}

fn landlock_layers(policy: &Policy, skip: &[Layer], abi: i64, status: &mut Status) {
    match restrict(policy, skip) {
        Ok((ruleset, no_new_privs)) => {
            status.no_new_privileges = no_new_privs;
            match ruleset {
                _ if skip.contains(&Layer::Files) => {}
                RulesetStatus::FullyEnforced => {
                    status.filesystem = Some(format!("landlock ABI {abi}, fully enforced"));
                }
                RulesetStatus::PartiallyEnforced => {
                    status.filesystem = Some(format!(
                        "landlock ABI {abi}, partially enforced (the kernel lacks some rights of ABI {})",
                        WANTED as i32
                    ));
                }
                RulesetStatus::NotEnforced => status
                    .missing
                    .push("landlock: not supported by this kernel".into()),
            }
            if abi >= 4 && ruleset != RulesetStatus::NotEnforced && !skip.contains(&Layer::Tcp) {
                status
                    .network
                    .push("landlock: TCP bind and connect refused".into());
            }
        }
        Err(e) => status.missing.push(format!("landlock: {e}")),
    }
}

/// What `enter` would find, without confining the caller: Landlock's ABI
/// by its version query; user namespaces by a forked child that only calls
/// unshare (async-signal-safe, so the fork is safe in a threaded caller).
pub(crate) fn probe() -> Status {
    let mut status = Status::default();
    let abi = landlock_abi();
    if abi > 0 {
        status.filesystem = Some(format!("landlock ABI {abi}"));
        if abi >= 4 {
            status.network.push("landlock: TCP refused".into());
        }
        status.no_new_privileges = true;
    } else {
        status
            .missing
            .push("landlock: not supported by this kernel".into());
    }
    // SAFETY: the child calls only unshare and _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above.
        unsafe {
            let ok = libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0;
            libc::_exit(if ok { 0 } else { 1 });
        }
    }
    if wait_ok(pid) {
        status.network.insert(0, "own network namespace".into());
    } else {
        status
            .missing
            .push("network namespace: unprivileged user namespaces are not allowed".into());
    }
    match probe_filter() {
        Ok(description) => status.syscalls = Some(description),
        Err(e) => status.missing.push(format!("seccomp: {e}")),
    }
    status
}

/// Whether the child `pid` (as fork returned it) exited with 0.
fn wait_ok(pid: libc::pid_t) -> bool {
    let mut code = -1;
    if pid > 0 {
        // SAFETY: waits for the child just forked.
        unsafe { libc::waitpid(pid, &mut code, 0) };
    }
    pid > 0 && libc::WIFEXITED(code) && libc::WEXITSTATUS(code) == 0
}

/// Whether the kernel takes the filter and it refuses a Unix socket, tried
/// in a forked child (the program is built before the fork; the child only
/// makes system calls).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn probe_filter() -> Result<String, String> {
    let program = crate::seccomp::program();
    // SAFETY: the child calls only prctl, seccomp, socket and _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above.
        unsafe {
            let ok = crate::seccomp::install(&program).is_ok()
                && libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) < 0;
            libc::_exit(if ok { 0 } else { 1 });
        }
    }
    if wait_ok(pid) {
        Ok(crate::seccomp::description())
    } else {
        Err("the kernel refused the filter".into())
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn probe_filter() -> Result<String, String> {
    Err("no filter for this architecture".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` in a forked child and returns its exit code: confinement
    /// is one-way, so it is tried in a process of its own.
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
        libc::WEXITSTATUS(code)
    }

    #[test]
    fn a_confined_process_reads_system_files_and_its_scratch_only() {
        if landlock_abi() == 0 {
            eprintln!("skipping: no Landlock here");
            return;
        }
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "token").unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let scratch_path = scratch.path().to_path_buf();
        let code = in_child(|| {
            let mut policy = Policy::system();
            policy.writable.push(scratch_path.clone());
            let status = enter(&policy, &[]);
            if status.filesystem.is_none() {
                return 10;
            }
            if std::fs::read(&secret).is_ok() {
                return 11;
            }
            if std::fs::read("/usr/bin/env").is_err()
                && std::path::Path::new("/usr/bin/env").exists()
            {
                return 12;
            }
            if std::fs::write(scratch_path.join("x"), "ok").is_err() {
                return 13;
            }
            if std::fs::write("/tmp/kevo-sandbox-escape", "x").is_ok() {
                return 14;
            }
            if std::net::TcpStream::connect("127.0.0.1:5432").is_ok() {
                return 15;
            }
            // Its own threads' names, as the CUDA driver sets them: yes;
            // another process's: no.
            if std::fs::write("/proc/thread-self/comm", "kevo-test").is_err() {
                return 16;
            }
            if std::fs::write("/proc/1/comm", "kevo-test").is_ok() {
                return 17;
            }
            0
        });
        assert_eq!(code, 0, "see the return codes in the child");
    }
}
