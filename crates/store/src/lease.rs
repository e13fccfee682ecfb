//! Who holds a running run. The heartbeat says a run's process lived a few
//! seconds ago ([`crate::HEARTBEAT_STALE_S`]); the holder names that process
//! (machine boot, pid, start time) so that on the same machine a run whose
//! process is gone (kill -9, a crash) is known dead at once, and resuming
//! it need not wait out the heartbeat. On another machine only the
//! heartbeat's age can tell.

/// This process as a heartbeat holder: `<boot id>/<pid>/<start ticks>`.
/// The boot id tells machines (and boots) apart; the start time tells a
/// reused pid from the original.
pub fn this_process() -> String {
    let pid = std::process::id();
    format!(
        "{}/{pid}/{}",
        boot_id().unwrap_or_default(),
        start_ticks(pid).unwrap_or_default()
    )
}

/// Whether `holder` (from [`this_process`]) is known to have ended: it ran
/// on this machine since its last boot, and its pid is gone, reused by
/// another process, or a zombie. False when that cannot be told (another
/// machine, an unreadable /proc, a holder in another format).
pub fn holder_is_gone(holder: &str) -> bool {
    let mut parts = holder.split('/');
    let (Some(boot), Some(pid), Some(start), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Some(ours), Ok(pid)) = (boot_id(), pid.parse::<u32>()) else {
        return false;
    };
    if boot.is_empty() || boot != ours || start.is_empty() {
        return false;
    }
    match stat(pid) {
        None => true,
        Some((state, ticks)) => state == 'Z' || ticks != start,
    }
}

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && !s.contains('/'))
}

fn start_ticks(pid: u32) -> Option<String> {
    stat(pid).map(|(_, ticks)| ticks)
}

/// The state letter and start time (field 22) of `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(char, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // `rest` starts at field 3; field 22 is 19 further on.
    let ticks = fields.nth(18)?.to_string();
    Some((state, ticks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_finished_child_is_gone() {
        let me = this_process();
        assert!(!holder_is_gone(&me), "{me}");
        assert_eq!(me.split('/').count(), 3);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let holder = format!(
            "{}/{pid}/{}",
            boot_id().unwrap(),
            start_ticks(pid).unwrap_or_else(|| "0".into())
        );
        child.wait().unwrap();
        assert!(holder_is_gone(&holder), "{holder}");
    }

    #[test]
    fn a_reused_pid_or_a_zombie_is_gone_and_another_machine_is_unknown() {
        let boot = boot_id().unwrap();
        let pid = std::process::id();
        // Our pid with another start time: a reused pid.
        assert!(holder_is_gone(&format!("{boot}/{pid}/1")));
        // Another boot (or machine): cannot tell.
        assert!(!holder_is_gone(&format!("other-boot/{pid}/1")));
        assert!(!holder_is_gone("not a holder"));
        assert!(!holder_is_gone(""));
        // A child that exited and is not reaped yet is a zombie.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = start_ticks(pid);
        std::thread::sleep(std::time::Duration::from_millis(200));
        if let Some(start) = start {
            assert!(holder_is_gone(&format!("{boot}/{pid}/{start}")));
        }
        child.wait().unwrap();
    }
}
