//! What a new user runs into first: a pipe closed early, an empty folder,
//! run ids typed short, and diagnostics kept off standard output.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

fn kevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn completions_into_a_pipe_closed_early_exit_without_a_panic() {
    let whole = kevo().args(["completions", "bash"]).output().unwrap();
    assert!(whole.status.success(), "{}", text(&whole.stderr));
    // More than a pipe holds: `head` exits while kevo still writes.
    assert!(
        whole.stdout.len() > 64 << 10,
        "{} bytes",
        whole.stdout.len()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#""$KEVO" completions bash | head -1 >/dev/null; echo "${PIPESTATUS[0]}""#)
        .env("KEVO", env!("CARGO_BIN_EXE_kevo"))
        .output()
        .unwrap();
    let status = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        ["0", "141"].contains(&status.trim()),
        "exit {status}: {stderr}"
    );
}

#[test]
fn listing_an_empty_folder_creates_nothing_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let out = kevo()
        .args(["runs", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no runs"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "", "no header for nothing");
    let json = kevo()
        .args(["runs", "--json", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert_eq!(text(&json.stdout).trim(), "[]");
    // Reading a run there is an error that names the folder.
    let show = kevo()
        .args(["show", "latest", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert_eq!(show.status.code(), Some(2));
    assert!(
        text(&show.stderr).contains(&ws.display().to_string()),
        "{}",
        text(&show.stderr)
    );
    assert!(!ws.exists(), "nothing was created");
}

/// Two runs of one task one second apart, stored as `kevo evolve` stores
/// them; their ids (`saxpy-DATE-TIME-RANDOM`), oldest first.
fn two_runs(ws: &Path) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = kevo_store::Store::open_workspace(ws).await.unwrap();
        let mut ids = Vec::new();
        for task in ["saxpy", "saxpy"] {
            let run = store
                .create_run(&kevo_store::NewRun {
                    task: task.into(),
                    backend: "opencl".into(),
                    device: "a test device".into(),
                    size_set: kevo_tasks::SizeSet::Smoke,
                    strategy: "one_plus_one".into(),
                    config: serde_json::json!({}),
                    rng_state: None,
                })
                .await
                .unwrap();
            ids.push(run.0);
            std::thread::sleep(std::time::Duration::from_millis(1100));
        }
        store.close().await;
        ids
    })
}

fn shown(ws: &Path, name: &str) -> Output {
    kevo()
        .args(["show", name, "--json", "--workspace"])
        .arg(ws)
        .output()
        .unwrap()
}

fn shown_id(out: &Output) -> String {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
    v["run"]["id"].as_str().unwrap().to_string()
}

#[test]
fn latest_and_a_unique_prefix_name_a_run_and_an_ambiguous_one_lists_the_matches() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let ids = two_runs(&ws);
    assert_eq!(shown_id(&shown(&ws, "latest")), ids[1]);
    assert_eq!(shown_id(&shown(&ws, &ids[0])), ids[0]);
    // The shortest prefix of the older id that the newer one lacks.
    let unique = (1..=ids[0].len())
        .map(|n| &ids[0][..n])
        .find(|p| !ids[1].starts_with(p))
        .unwrap();
    assert_eq!(shown_id(&shown(&ws, unique)), ids[0]);
    let common_prefix = "saxpy-";
    let out = shown(&ws, common_prefix);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("names 2 runs") && stderr.contains(&ids[0]) && stderr.contains(&ids[1]),
        "{stderr}"
    );
    let out = shown(&ws, "no-such-run");
    assert!(
        text(&out.stderr).contains("no run `no-such-run`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_sandbox_line_goes_to_standard_error() {
    if !common::opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = kevo()
        .env("KEVO_CACHE_DIR", dir.path())
        .args([
            "eval",
            "--task",
            "saxpy",
            "--backend",
            "opencl",
            "--sizes",
            "smoke",
        ])
        .args(["--ceilings", "20,100"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains("sandbox:"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("sandbox:"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("result: correct"),
        "{}",
        text(&out.stdout)
    );
}

/// `GET path` from a local server: the status line and the body.
fn get(port: u16, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

/// `kevo serve` started before the first run: it creates nothing, lists
/// no runs, and shows the runs once a search made the store.
#[test]
fn serving_an_empty_folder_creates_nothing_and_lists_its_first_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let port = crate::browser::free_port();
    let mut server = kevo()
        .args([
            "serve",
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--workspace",
        ])
        .arg(&ws)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed().as_secs() < 60,
            "kevo serve never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (status, page) = get(port, "/");
    assert!(status.contains("200"), "{status}\n{page}");
    assert!(page.contains("No runs here yet"), "{page}");
    let (status, _) = get(port, "/runs/saxpy-none");
    assert!(status.contains("404"), "{status}");
    assert!(!ws.exists(), "serving created nothing");
    let ids = two_runs(&ws);
    let (_, listed) = get(port, "/api/runs");
    let listed: serde_json::Value = serde_json::from_str(
        listed
            .lines()
            .find(|l| l.starts_with('['))
            .unwrap_or_else(|| panic!("{listed}")),
    )
    .unwrap();
    let mut shown: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    shown.sort();
    assert_eq!(shown, ids);
    server.kill().unwrap();
    let out = server.wait_with_output().unwrap();
    assert!(
        text(&out.stderr).contains("no runs in"),
        "{}",
        text(&out.stderr)
    );
}
