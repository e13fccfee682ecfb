//! A confined `cmd:` proposer (`cmd_sandbox = true` in the model
//! settings), the way a local coding agent runs: a script that tries to
//! read and write outside its directory, to open a TCP connection and to
//! leave a child running is stopped at each, and says so in its answer;
//! unconfined, the same script does all of it, so each probe can fail.

use std::path::Path;
use std::process::Command;

/// What the agent script reports, one `probe:yes|no` line each, then the
/// kevo stderr.
fn agent_run(dir: &Path, settings: &str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    std::fs::create_dir_all(dir).unwrap();
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "key").unwrap();
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let script = dir.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            r#"cat > /dev/null
probe() {{ if "$@" >/dev/null 2>&1; then echo "$1:yes"; else echo "$1:no"; fi; }}
read_outside() {{ cat {secret}; }}
write_outside() {{ echo x > {outside}/escaped.txt; }}
write_own() {{ echo x > written.txt && test -s written.txt; }}
network() {{ /usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1', {port}), 2)"; }}
probe read_outside
probe write_outside
probe write_own
probe network
setsid sleep 312 > /dev/null 2>&1 &
echo child:$!
# Let the child leave the group (setsid) before the script exits.
sleep 0.3
echo answer-done
"#,
            secret = secret.display(),
            outside = outside.display(),
        ),
    )
    .unwrap();
    let config = dir.join("llm.toml");
    std::fs::write(
        &config,
        format!(
            "{settings}\ncmd_readable = [{:?}]\n",
            script.display().to_string()
        ),
    )
    .unwrap();
    let bin = std::env::var("KEVO_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kevo").into());
    let out = Command::new(bin)
        .args(["llm", "test", "--llm"])
        .arg(format!("cmd:sh {}", script.display()))
        .arg("--llm-config")
        .arg(&config)
        .env("KEVO_CACHE_DIR", dir.join("cache"))
        // Unconfined, the script writes where kevo runs.
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .replace("\\n", "\n");
    assert!(out.status.success(), "{text}");
    assert!(text.contains("answer-done"), "{text}");
    text
}

/// The probes' answers (`files` outside its directory, `network`), its
/// own directory always writable, and the child it left killed.
fn expect(text: &str, files: &str, network: &str) {
    for probe in [
        format!("read_outside:{files}"),
        format!("write_outside:{files}"),
        "write_own:yes".to_string(),
        format!("network:{network}"),
    ] {
        assert!(text.contains(&probe), "{probe}: {text}");
    }
    assert!(
        text.contains("left 1 process(es) running after it exited; they were killed"),
        "{text}"
    );
    assert!(child_is_gone(text), "{text}");
}

/// The child the script left (`child:PID`) is gone once kevo is.
fn child_is_gone(text: &str) -> bool {
    let pid: u32 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("child:"))
        .and_then(|p| p.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
        .unwrap_or_else(|| panic!("no child pid in {text}"));
    match std::fs::read_to_string(format!("/proc/{pid}/cmdline")) {
        Err(_) => true,
        Ok(cmdline) => !cmdline.contains("312"),
    }
}

#[test]
fn a_confined_agent_cannot_read_write_or_connect_outside_and_leaves_no_child() {
    let dir = tempfile::tempdir().unwrap();
    // What `kevo sandbox-exec` needs without the network: Landlock files,
    // no new privileges, a network layer and the socket filter.
    let here = kevo_worker::kevo_sandbox::available();
    let can_confine = here.filesystem.is_some()
        && here.no_new_privileges
        && !here.network.is_empty()
        && here.syscalls.is_some();
    if !can_confine {
        // A call asked to be confined does not run at all.
        let script = dir.path().join("agent.sh");
        std::fs::write(&script, "cat > /dev/null; echo ran-anyway").unwrap();
        let config = dir.path().join("llm.toml");
        std::fs::write(&config, "cmd_sandbox = true").unwrap();
        let bin = std::env::var("KEVO_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kevo").into());
        let out = Command::new(bin)
            .args(["llm", "test", "--llm"])
            .arg(format!("cmd:sh {}", script.display()))
            .arg("--llm-config")
            .arg(&config)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!text.contains("ran-anyway"), "{text}");
        assert!(text.contains("cannot confine the command"), "{text}");
        return;
    }
    let free = agent_run(&dir.path().join("free"), "");
    expect(&free, "yes", "yes");
    let confined = agent_run(&dir.path().join("confined"), "cmd_sandbox = true");
    expect(&confined, "no", "no");
    assert!(!dir.path().join("confined/outside/escaped.txt").exists());
    // The network for its own model's API, when allowed; files stay
    // confined.
    let online = agent_run(
        &dir.path().join("online"),
        "cmd_sandbox = true\ncmd_network = true",
    );
    expect(&online, "no", "yes");
}
