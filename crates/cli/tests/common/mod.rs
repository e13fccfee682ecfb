//! Helpers shared by the CLI's integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `kevo devices` finds an OpenCL device; CI must have one (PoCL).
pub fn opencl_available() -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["devices", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let ok = v.as_array().is_some_and(|a| {
        a.iter()
            .any(|d| d["backend"] == "opencl" && d["available"] == true)
    });
    if !ok && std::env::var_os("CI").is_some() {
        panic!("OpenCL must be available in CI");
    }
    ok
}

/// The standard output of a command that must succeed; both streams in
/// the failure message otherwise.
pub fn succeeded(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every file under `dir`, recursively, that holds `needle` as bytes.
/// (Not every test binary that includes this module uses it.)
#[allow(dead_code)]
pub fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .unwrap_or_default()
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
            {
                found.push(path);
            }
        }
    }
    found
}

/// Start `kevo evolve ... --json`, and SIGKILL it once iteration `at` is
/// stored (while later ones are in flight); the run's id.
#[allow(dead_code)]
pub fn kill_after_iteration(cmd: &mut Command, at: u64) -> String {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut run = String::new();
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("progress");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["event"] == "created" {
            run = v["run"].as_str().unwrap().to_string();
        }
        if v["event"] == "iteration" && v["iteration"] == at {
            break;
        }
    }
    // SAFETY: signalling our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
    run
}

/// Resume `run` of workspace `ws` to its end (`KEVO_CACHE_DIR` under
/// `dir`, as the run started), and fail with its stderr if it does not.
#[allow(dead_code)]
pub fn resume_to_end(ws: &str, run: &str, dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["evolve", "--resume", run, "--workspace", ws, "--json"])
        .env("KEVO_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kevo evolve` of saxpy at the smoke sizes on OpenCL: the start of most
/// runs these tests make. Ten timed runs per size: PoCL's timings rarely
/// reach the 1% spread that stops timing early, so the default of up to 50
/// runs (2 s per size) made every evaluation of a slow kernel cost seconds
/// that no assertion here depends on.
#[allow(dead_code)]
pub const EVOLVE_SAXPY_SMOKE: [&str; 9] = join(&["evolve", "--task", "saxpy"], &OPENCL_SMOKE);

/// `head` then `tail` as one array of `N` (checked when compiled).
const fn join<const N: usize>(head: &[&'static str], tail: &[&'static str]) -> [&'static str; N] {
    assert!(head.len() + tail.len() == N);
    let mut out = [""; N];
    let mut i = 0;
    while i < head.len() {
        out[i] = head[i];
        i += 1;
    }
    let mut j = 0;
    while j < tail.len() {
        out[i + j] = tail[j];
        j += 1;
    }
    out
}

/// The device and timing part of [`EVOLVE_SAXPY_SMOKE`], for another
/// task or command.
#[allow(dead_code)]
pub const OPENCL_SMOKE: [&str; 6] = [
    "--backend",
    "opencl",
    "--sizes",
    "smoke",
    "--max-timed-runs",
    "10",
];

/// What a loopback HTTP server answers: status line text (e.g. "200 OK"),
/// extra header lines (each ending in CRLF) and a JSON body; `None`
/// accepts the request and never answers.
#[allow(dead_code)]
pub type HttpAnswer = Option<(String, String, String)>;

/// A loopback HTTP server on its own thread that answers every request
/// with `answer(body)`; its base URL (`http://127.0.0.1:PORT/v1`).
#[allow(dead_code)]
pub fn serve_http(answer: impl Fn(&str) -> HttpAnswer + Send + Sync + 'static) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                let Some((status, headers, reply)) = answer(&String::from_utf8_lossy(&body)) else {
                    std::thread::sleep(Duration::from_secs(120));
                    return;
                };
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            });
        }
    });
    url
}

/// A replay file (`dir/replay.jsonl`, by scripts/make-replay) serving
/// these kernel files in order; the `--llm` spec that replays it.
#[allow(dead_code)]
pub fn replay_of<P: AsRef<Path>>(dir: &Path, kernels: &[P]) -> String {
    let out = dir.join("replay.jsonl");
    let status = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/make-replay"))
        .arg(&out)
        .args(kernels.iter().map(AsRef::as_ref))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    format!("replay:{}", out.display())
}

/// A proposer that appends a line to `log` per call, sleeps `sleep_s`,
/// and answers with a saxpy that differs from every other answer (so no
/// answer is a duplicate that skips its evaluation).
#[allow(dead_code)]
pub fn saxpy_agent(dir: &Path, sleep_s: f64) -> (String, std::path::PathBuf) {
    let log = dir.join("calls.log");
    let script = dir.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
cat >/dev/null
echo call >> '{log}'
sleep {sleep_s}
n=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
cat <<K
Variant $n.
\`\`\`opencl
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {{
    uint i = get_global_id(0);
    if (i >= N) return;
    y[i] = fma(a, x[i], y[i]) + 0.0f * (float)(${{n}}u & 1u);
}}
\`\`\`
K
"#,
            log = log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (format!("cmd:{}", script.display()), log)
}
