//! A model endpoint that answers with hostile strings, through the real
//! OpenAI-compatible provider against a loopback server: a served model
//! name that would break out of the report's data block (`<!--<script>`)
//! and terminal escapes that would retitle the window and clear the
//! screen. Nothing of it is stored raw, `kevo llm test` and `kevo show`
//! print no control character (also for a store written before replies
//! were cleaned), the report's data block parses with no extra script,
//! and under `kevo serve` in Chromium the name is shown as text while the
//! live-refresh script keeps working.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::browser::{Browser, browser_available, free_port};
use common::opencl_available;
use serde_json::{Value, json};

/// The served model name.
const EVIL: &str = "x<!--<script>alert(1)</script>\u{1b}]0;pwned\u{7}\u{1b}[2J";

/// More of the same: an 8-bit CSI, a bidi override, a script end tag.
const EVIL_TOO: &str = "\u{9b}31m</script><script>alert(2)</script>\u{202e}\r";

/// The part of the name markup would read, which must be shown as text.
const MARKUP: &str = "x<!--<script>alert(1)</script>";

fn kevo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A loopback OpenAI-compatible server whose every answer is a correct
/// saxpy (each one different, so none is a duplicate) served as `model`,
/// with hostile reasoning and finish reason, after `delay`.
fn hostile_server(model: &'static str, delay: Duration) -> String {
    let calls = Arc::new(AtomicU64::new(0));
    common::serve_http(move |_| {
        std::thread::sleep(delay);
        let n = calls.fetch_add(1, Ordering::SeqCst);
        let kernel = format!(
            "```opencl\n__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {{\n    uint i = get_global_id(0);\n    if (i >= N) return;\n    y[i] = fma(a, x[i], y[i]) + 0.0f * (float)({n}u & 1u);\n}}\n```\n"
        );
        let body = json!({
            "model": model,
            "choices": [{
                "message": {"content": kernel, "reasoning_content": format!("thinking {EVIL}")},
                "finish_reason": format!("stop{EVIL_TOO}"),
            }],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10},
        });
        Some(("200 OK".into(), String::new(), body.to_string()))
    })
}

/// What a terminal would act on: C0 controls but newline and tab, DEL,
/// C1 controls and bidi overrides and isolates.
fn controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            c != '\n'
                && c != '\t'
                && matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect()
}

fn assert_printable(what: &str, out: &Output) {
    for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            !bytes.contains(&0x1b) && !bytes.contains(&0x07),
            "ESC or BEL on {what}'s {name}: {}",
            String::from_utf8_lossy(bytes)
        );
        let text = String::from_utf8_lossy(bytes);
        assert_eq!(
            controls(&text),
            Vec::<char>::new(),
            "{what}'s {name}: {text}"
        );
    }
}

fn evolve(ws: &Path, cache: &Path, url: &str, iterations: u32) -> Command {
    let mut c = kevo();
    c.env("KEVO_CACHE_DIR", cache)
        .args(common::EVOLVE_SAXPY_SMOKE)
        .args(["--ceilings", "20,100", "--promotion", "strict"])
        .args(["--llm", &format!("openai@{url}:m"), "--iterations"])
        .arg(iterations.to_string())
        .arg("--seed-kernel")
        .arg(root().join("examples/replay/opencl/start_slow.cl"))
        .arg("--quiet")
        .arg("--workspace")
        .arg(ws);
    c
}

/// `kevo runs --json` of a workspace.
fn runs(ws: &Path) -> Value {
    let out = kevo()
        .args(["runs", "--json", "--workspace"])
        .arg(ws)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

fn show(ws: &Path, run: &str, json: bool) -> Output {
    let mut c = kevo();
    c.args(["show", run, "--workspace"]).arg(ws);
    if json {
        c.arg("--json");
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The report of `run` as HTML.
fn report(ws: &Path, run: &str, dir: &Path) -> String {
    let file = dir.join(format!("{run}.html"));
    let out = kevo()
        .args(["report", run, "--workspace"])
        .arg(ws)
        .arg("--out")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&file).unwrap()
}

/// The report's data block, parsed; the page must hold no other script.
fn data_block(html: &str) -> Value {
    assert_eq!(html.matches("<script").count(), 1, "one script element");
    let open = r#"<script type="application/json" id="kevo-report-data">"#;
    let start = html.find(open).expect("a data block") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    let block = &html[start..end];
    assert!(
        !block.contains('<') && !block.contains('>'),
        "markup in the data block: {block}"
    );
    assert!(html[end..].starts_with("</script></body></html>"));
    serde_json::from_str(block).unwrap_or_else(|e| panic!("{e}: {block}"))
}

/// The workspace's SQLite file.
fn database(ws: &Path) -> PathBuf {
    let mut stack = vec![ws.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p)
                .unwrap_or_default()
                .starts_with(b"SQLite format 3\0")
            {
                return p;
            }
        }
    }
    panic!("no SQLite store under {}", ws.display())
}

/// Write `model` raw into every stored call and candidate, as a store
/// written before the provider layer cleaned replies could hold it.
fn plant_raw(ws: &Path, model: &str) {
    let script = "import sqlite3, sys\n\
        db = sqlite3.connect(sys.argv[1])\n\
        db.execute('UPDATE llm_calls SET model = ?, error = ?', (sys.argv[2], sys.argv[2]))\n\
        db.execute('UPDATE candidates SET model = ? WHERE model IS NOT NULL', (sys.argv[2],))\n\
        db.commit()\n";
    let status = Command::new("python3")
        .args(["-c", script])
        .arg(database(ws))
        .arg(model)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn llm_test_prints_no_control_character_an_endpoint_sent() {
    let url = hostile_server(EVIL, Duration::ZERO);
    let out = kevo()
        .args(["llm", "test", "--llm", &format!("openai@{url}:m")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_printable("kevo llm test", &out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("as {MARKUP}")), "{text}");
}

#[test]
fn a_hostile_model_name_is_stored_clean_and_shown_inert() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let url = hostile_server(EVIL, Duration::ZERO);
    let out = evolve(&ws, &dir.path().join("cache"), &url, 2)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_printable("kevo evolve", &out);
    let run = runs(&ws)[0]["id"].as_str().unwrap().to_string();

    // Stored cleaned: the name keeps its text, its controls are U+FFFD.
    let calls = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = kevo_store::Store::open_workspace(&ws).await.unwrap();
            let calls = store
                .llm_calls(&kevo_store::RunId(run.clone()))
                .await
                .unwrap();
            store.close().await;
            calls
        });
    assert_eq!(calls.len(), 2);
    for c in &calls {
        assert!(c.call.model.starts_with(MARKUP), "{:?}", c.call.model);
        assert_eq!(controls(&c.call.model), Vec::<char>::new());
        let reasoning = c.call.reasoning.as_deref().unwrap_or_default();
        assert_eq!(controls(reasoning), Vec::<char>::new(), "{reasoning:?}");
    }

    // On the terminal.
    let shown = show(&ws, &run, false);
    assert_printable("kevo show", &shown);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains(MARKUP), "the winner's model is shown: {text}");
    assert_printable("kevo show --json", &show(&ws, &run, true));

    // In the report: the data block parses and holds the name.
    let html = report(&ws, &run, dir.path());
    let data = data_block(&html);
    assert!(
        data["models"][0]["model"]
            .as_str()
            .unwrap()
            .contains(MARKUP),
        "{data}"
    );

    // A store written before replies were cleaned: printed escaped, and
    // `--json` still means the stored value.
    for raw in [EVIL, EVIL_TOO] {
        plant_raw(&ws, raw);
        let shown = show(&ws, &run, false);
        assert_printable("kevo show of a raw store", &shown);
        let text = String::from_utf8_lossy(&shown.stdout);
        assert!(
            text.contains("\\u001b") || text.contains("\\u009b"),
            "{text}"
        );
        let json = show(&ws, &run, true);
        assert_printable("kevo show --json of a raw store", &json);
        let v: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(v["best"]["candidate"]["model"], raw, "{v}");
        let html = report(&ws, &run, dir.path());
        let data = data_block(&html);
        assert!(
            data["models"][0]["model"].as_str().unwrap().ends_with(raw),
            "the data block holds the stored value: {data}"
        );
        // (A CR is whitespace to HTML.)
        let left: Vec<char> = controls(&html).into_iter().filter(|&c| c != '\r').collect();
        assert_eq!(left, Vec::<char>::new(), "the page holds none");
    }
}

// ---------------------------------------------------------------------
/// What the page shows of the hostile name and whether it is intact: the
/// script elements, the data block's model, the models table's text, the
/// live script's update count, whether an injected script ran.
const INSPECT: &str = "var data = JSON.parse(document.getElementById('kevo-report-data').textContent);\
    return {\
      scripts: document.scripts.length,\
      data_model: data.models.length ? data.models[0].model : null,\
      table: document.getElementById('models').textContent,\
      updates: document.body.dataset.updates === undefined ? null : Number(document.body.dataset.updates),\
      injected: window.__pwned === true,\
      points: document.querySelectorAll('#progress-iteration circle.point').length\
    };";

#[test]
fn under_kevo_serve_a_hostile_model_name_is_text_and_the_page_stays_live() {
    if !opencl_available() || !browser_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    // A name that, unescaped, would swallow the live script and run one
    // of its own.
    const LIVE_EVIL: &str =
        "x<!--<script>alert(1)</script>\u{1b}]0;pwned\u{7}<script>window.__pwned=true</script>";
    let url = hostile_server(LIVE_EVIL, Duration::from_millis(1500));
    let port = free_port();
    let mut server = kevo()
        .args([
            "serve",
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--workspace",
        ])
        .arg(&ws)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let live = evolve(&ws, &dir.path().join("cache"), &url, 8)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first proposal (served under the hostile name).
    let started = Instant::now();
    let run = loop {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the run never stored a proposal"
        );
        let listed = runs(&ws);
        if let Some(r) = listed
            .as_array()
            .and_then(|a| a.iter().find(|r| r["last_iteration"].as_u64() >= Some(1)))
        {
            break r["id"].as_str().unwrap().to_string();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let browser = Browser::start();
    browser.open(&format!("http://127.0.0.1:{port}/runs/{run}"));
    let first = browser.run(INSPECT);
    assert_eq!(
        first["scripts"], 2,
        "the data block and the live script: {first}"
    );
    assert!(
        first["data_model"].as_str().unwrap().contains(MARKUP),
        "{first}"
    );
    assert!(first["table"].as_str().unwrap().contains(MARKUP), "{first}");
    assert_eq!(first["injected"], false, "{first}");
    assert!(first["updates"].is_number(), "the live script ran: {first}");
    // The page refreshes itself as the search goes on.
    let watching = Instant::now();
    let now = loop {
        let v = browser.run(INSPECT);
        if v["updates"].as_u64().unwrap_or(0) >= 1
            && v["points"].as_u64() > first["points"].as_u64()
        {
            break v;
        }
        assert!(
            watching.elapsed() < Duration::from_secs(90),
            "the page never refreshed: {v}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(now["scripts"], 2, "{now}");
    assert_eq!(now["injected"], false, "{now}");
    assert!(now["table"].as_str().unwrap().contains(MARKUP), "{now}");
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "{errors:?}");
    let end = live.wait_with_output().unwrap();
    assert!(
        end.status.success(),
        "{}",
        String::from_utf8_lossy(&end.stderr)
    );

    // The finished run's report file, opened from disk.
    let file = dir.path().join("report.html");
    std::fs::write(&file, report(&ws, &run, dir.path())).unwrap();
    browser.open(&format!("file://{}", file.display()));
    let offline = browser.run(INSPECT);
    assert_eq!(offline["scripts"], 1, "{offline}");
    assert_eq!(offline["injected"], false, "{offline}");
    assert!(
        offline["data_model"].as_str().unwrap().contains(MARKUP),
        "{offline}"
    );
    let _ = server.kill();
    let _ = server.wait();
}
