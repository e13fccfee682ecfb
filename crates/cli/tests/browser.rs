//! The report and the dashboard in a real browser (Debian's Chromium,
//! headless, driven through ChromeDriver's WebDriver protocol): the report
//! file opens with no console error and its charts are drawn with their
//! points; the dashboard, watching a live search, shows a new point appear
//! without a reload. Screenshots go to target/tmp/screenshots (or
//! $KEVO_SCREENSHOTS). Skipped where Chromium or ChromeDriver is missing,
//! except under CI, whose setup installs both.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use common::opencl_available;
use serde_json::{Value, json};

fn kevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn browser_available() -> bool {
    let found = ["chromium", "chromedriver"].iter().all(|tool| {
        Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if !found && std::env::var_os("CI").is_some() {
        panic!("Chromium and ChromeDriver must be installed in CI (scripts/setup does)");
    }
    found
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 exchange with a local server; the body as JSON.
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Value {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Headers, then the body by its length (servers may keep the
    // connection open) or by chunks.
    let mut raw = Vec::new();
    let mut byte = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut byte).unwrap();
        assert!(n > 0, "connection closed before the headers");
        raw.extend_from_slice(&byte[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let mut body_bytes = raw[head_end + 4..].to_vec();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = head.contains("transfer-encoding: chunked");
    loop {
        let complete = match length {
            Some(n) => body_bytes.len() >= n,
            None if chunked => body_bytes.windows(5).any(|w| w == b"0\r\n\r\n"),
            None => false,
        };
        if complete {
            break;
        }
        let n = stream.read(&mut byte).unwrap_or(0);
        if n == 0 {
            break;
        }
        body_bytes.extend_from_slice(&byte[..n]);
    }
    let text = String::from_utf8_lossy(&body_bytes).to_string();
    let mut rest = text.as_str();
    let mut decoded = String::new();
    if chunked {
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            decoded.push_str(&tail[..n]);
            rest = &tail[n + 2..];
        }
    } else {
        decoded = text.clone();
    }
    serde_json::from_str(&decoded).unwrap_or(Value::String(decoded))
}

/// A ChromeDriver with one headless Chromium session; both end on drop.
pub(crate) struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

impl Browser {
    pub(crate) fn start() -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let ready = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                ready.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let created = http(
            port,
            "POST",
            "/session",
            Some(&json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": "/usr/bin/chromium",
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                             "--disable-dev-shm-usage", "--window-size=1200,2400"]
                },
                "goog:loggingPrefs": {"browser": "ALL"}
            }}})),
        );
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_string();
        Browser {
            driver,
            port,
            session,
        }
    }

    fn command(&self, method: &str, what: &str, body: Option<&Value>) -> Value {
        http(
            self.port,
            method,
            &format!("/session/{}/{what}", self.session),
            body,
        )["value"]
            .clone()
    }

    pub(crate) fn open(&self, url: &str) {
        self.command("POST", "url", Some(&json!({ "url": url })));
    }

    pub(crate) fn run(&self, script: &str) -> Value {
        self.command(
            "POST",
            "execute/sync",
            Some(&json!({ "script": script, "args": [] })),
        )
    }

    /// Console entries at level SEVERE (errors) since the last call.
    pub(crate) fn console_errors(&self) -> Vec<String> {
        let log = self.command("POST", "se/log", Some(&json!({ "type": "browser" })));
        // An answer that is not a list of entries (an unsupported endpoint)
        // fails here rather than reading as "no errors".
        log.as_array()
            .unwrap_or_else(|| panic!("no browser log: {log}"))
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].to_string())
            .collect()
    }

    fn screenshot(&self, name: &str) -> PathBuf {
        let png = base64::engine::general_purpose::STANDARD
            .decode(self.command("GET", "screenshot", None).as_str().unwrap())
            .unwrap();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "{} bytes",
            png.len()
        );
        let dir = std::env::var_os("KEVO_SCREENSHOTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots"));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, png).unwrap();
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = http(
            self.port,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn points_drawn(browser: &Browser) -> (u64, bool) {
    let v = browser.run(
        "var chart = document.getElementById('progress-iteration');\
         if (!chart) { return [0, false]; }\
         var box = chart.getBoundingClientRect();\
         var circles = chart.querySelectorAll('circle.point');\
         var drawn = circles.length > 0 && circles[0].getBBox().width > 0 && box.width > 300;\
         return [circles.length, drawn];",
    );
    (v[0].as_u64().unwrap_or(0), v[1].as_bool().unwrap_or(false))
}

#[test]
fn the_report_and_the_live_dashboard_render_in_chromium() {
    if !opencl_available() || !browser_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let ws_s = ws.display().to_string();
    let search = |iterations: &str| {
        let mut c = kevo();
        c.env("KEVO_CACHE_DIR", dir.path().join("cache"))
            .args(common::EVOLVE_SAXPY_SMOKE)
            .args(["--ceilings", "20,100", "--promotion", "strict"])
            .args([
                "--llm",
                &common::saxpy_agent(dir.path(), 1.5).0,
                "--iterations",
                iterations,
            ])
            .arg("--seed-kernel")
            .arg(root().join("examples/replay/opencl/start_slow.cl"))
            .args(["--quiet", "--workspace", &ws_s]);
        c
    };

    // A finished run's report file.
    let done = search("2").output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let runs = kevo()
        .args(["runs", "--json", "--workspace", &ws_s])
        .output()
        .unwrap();
    let runs: Value = serde_json::from_slice(&runs.stdout).unwrap();
    let finished = runs[0]["id"].as_str().unwrap().to_string();
    let file = dir.path().join("report.html");
    let wrote = kevo()
        .args(["report", &finished, "--workspace", &ws_s, "--out"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        wrote.status.success(),
        "{}",
        String::from_utf8_lossy(&wrote.stderr)
    );
    let browser = Browser::start();
    browser.open(&format!("file://{}", file.display()));
    assert_eq!(
        points_drawn(&browser),
        (3, true),
        "the seed and two proposals"
    );
    let bars = browser.run("return document.querySelectorAll('#roofline-bars rect.bar').length;");
    assert_eq!(
        bars, 8,
        "seed and winner at three sizes and the held-out one"
    );
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "{errors:?}");
    eprintln!(
        "report screenshot: {}",
        browser.screenshot("report.png").display()
    );

    // The dashboard watching a live search.
    let port = free_port();
    let mut server = kevo()
        .args([
            "serve",
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--workspace",
            &ws_s,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let live = search("8")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the new run's seed.
    let started = Instant::now();
    let run = loop {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the live run never appeared"
        );
        let runs = kevo()
            .args(["runs", "--json", "--workspace", &ws_s])
            .output()
            .unwrap();
        let runs: Value = serde_json::from_slice(&runs.stdout).unwrap_or_default();
        if let Some(r) = runs.as_array().and_then(|a| {
            a.iter()
                .find(|r| r["id"] != finished.as_str() && r["last_iteration"].as_u64().is_some())
        }) {
            break r["id"].as_str().unwrap().to_string();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    browser.open(&format!("http://127.0.0.1:{port}/"));
    let listed = browser.run("return Array.from(document.querySelectorAll('tr.run')).map(function (r) { return r.dataset.run; });");
    assert!(
        listed.as_array().unwrap().iter().any(|r| r == run.as_str()),
        "{listed}"
    );
    browser.open(&format!("http://127.0.0.1:{port}/runs/{run}"));
    let (first, _) = points_drawn(&browser);
    let watching = Instant::now();
    let (now, drawn) = loop {
        let (n, drawn) = points_drawn(&browser);
        if n > first {
            break (n, drawn);
        }
        assert!(
            watching.elapsed() < Duration::from_secs(90),
            "no new point appeared (still {n})"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(drawn);
    let updates = browser.run("return document.body.dataset.updates;");
    assert!(
        updates.as_str().unwrap().parse::<u32>().unwrap() >= 1,
        "{updates}"
    );
    eprintln!("dashboard: {first} points when opened, {now} without a reload");
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "{errors:?}");
    eprintln!(
        "dashboard screenshot: {}",
        browser.screenshot("dashboard.png").display()
    );
    let end = live.wait_with_output().unwrap();
    assert!(
        end.status.success(),
        "{}",
        String::from_utf8_lossy(&end.stderr)
    );
    let _ = server.kill();
    let _ = server.wait();
}
