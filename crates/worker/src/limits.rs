//! Resource limits of a worker process. A candidate can make the compiler
//! grow without bound (a macro expansion bomb reached many gigabytes before
//! a 60 s timeout), so compilation runs under a tighter data-segment limit
//! than evaluation, and the whole worker under a configurable one.
//!
//! The limit is RLIMIT_DATA (heap and private writable mappings, Linux 4.7
//! and later), not RLIMIT_AS: GPU drivers reserve terabytes of address
//! space they never touch, which an address-space limit would refuse. Only
//! the soft limit moves, so it can be raised again after a compile.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Limits of one worker; `Default` is what kevo uses unless told otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Memory a compile may add to the worker, in bytes. An honest kernel's
    /// compile needs well under 1 GiB (NVRTC, PoCL's clang).
    pub compile_memory_bytes: u64,
    /// Memory the worker may add after it opened its device, in bytes
    /// (inputs, references, downloads); 0 means half the machine's memory.
    pub worker_memory_bytes: u64,
    /// Seconds a compile may take before the worker is killed; the rest of
    /// the evaluation has the candidate's own timeout.
    pub compile_timeout_s: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            compile_memory_bytes: 4 << 30,
            worker_memory_bytes: 0,
            compile_timeout_s: 30.0,
        }
    }
}

/// The soft limit in force outside compiles (u64::MAX: none set).
static NORMAL: AtomicU64 = AtomicU64::new(u64::MAX);

/// Bytes of the process's data segment now (VmData), if readable.
pub fn data_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmData:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn physical_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && size > 0 {
        pages as u64 * size as u64
    } else {
        0
    }
}

fn set_soft(bytes: u64) -> bool {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: out-parameter of the right type.
    if unsafe { libc::getrlimit(libc::RLIMIT_DATA, &mut lim) } != 0 {
        return false;
    }
    lim.rlim_cur = bytes.min(lim.rlim_max);
    // SAFETY: lowering or raising the soft limit up to the hard one.
    unsafe { libc::setrlimit(libc::RLIMIT_DATA, &lim) == 0 }
}

/// Apply the worker-wide limit, relative to what the process holds now
/// (call once the device is open). Returns the limit set, if any.
pub fn apply_worker_limit(limits: &Limits) -> Option<u64> {
    let budget = if limits.worker_memory_bytes > 0 {
        limits.worker_memory_bytes
    } else {
        physical_memory() / 2
    };
    if budget == 0 {
        return None;
    }
    let limit = data_bytes()?.saturating_add(budget);
    set_soft(limit).then(|| {
        NORMAL.store(limit, Ordering::Relaxed);
        limit
    })
}

/// Tighten the limit for a compile: what the process holds now plus the
/// compile budget. Returns whether a limit was set.
pub fn enter_compile(limits: &Limits) -> bool {
    match data_bytes() {
        Some(now) => set_soft(
            now.saturating_add(limits.compile_memory_bytes)
                .min(NORMAL.load(Ordering::Relaxed)),
        ),
        None => false,
    }
}

/// Back to the worker-wide limit after a compile.
pub fn leave_compile(_limits: &Limits) {
    set_soft(NORMAL.load(Ordering::Relaxed));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_segment_is_readable_on_linux() {
        let now = data_bytes().expect("VmData in /proc/self/status");
        assert!(now > 0);
    }
}
