//! `kevo evolve --llm batch:openai@URL:MODEL` on PoCL against a fake
//! OpenAI Batch API: prompts go out `--concurrency` at a time as batches,
//! each answer is recorded once its batch ended, and a kevo killed with
//! SIGKILL while a batch runs resumes by polling that batch: no prompt is
//! sent twice, no answer lost, every proposal answered once.

use crate::common;

use common::{EVOLVE_SAXPY_SMOKE, opencl_available};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Server {
    /// Uploaded files: id -> the custom ids of their JSONL lines.
    files: HashMap<String, Vec<String>>,
    /// Batches in order of creation: their custom ids.
    batches: Vec<Vec<String>>,
    polls: usize,
}

/// A fake OpenAI Batch API. While `hold` is set, batches stay in
/// progress. Every request's custom id gets a distinct correct saxpy,
/// except the fourth request overall, which fails with HTTP 500.
fn serve(hold: Arc<AtomicBool>) -> (String, Arc<Mutex<Server>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let state = Arc::new(Mutex::new(Server::default()));
    let s = state.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = answer(stream, &s, &hold);
        }
    });
    (url, state)
}

fn answer(mut stream: TcpStream, state: &Mutex<Server>, hold: &AtomicBool) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let (head, body) = loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = stream.read(&mut chunk)?;
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            break (head, String::from_utf8_lossy(&buf[end + 4..]).to_string());
        }
    };
    let request_line = head.lines().next().unwrap_or_default().to_string();
    let mut parts = request_line.split(' ');
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let mut s = state.lock().unwrap();
    let reply = match (method, path) {
        ("POST", "/v1/files") => {
            let ids: Vec<String> = body
                .lines()
                .filter(|l| l.starts_with('{'))
                .map(|l| {
                    serde_json::from_str::<serde_json::Value>(l).unwrap()["custom_id"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect();
            let id = format!("file-{}", s.files.len() + 1);
            s.files.insert(id.clone(), ids);
            serde_json::json!({"id": id}).to_string()
        }
        ("POST", "/v1/batches") => {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            let ids = s.files[v["input_file_id"].as_str().unwrap()].clone();
            s.batches.push(ids);
            serde_json::json!({"id": format!("batch_{}", s.batches.len()), "status": "validating"})
                .to_string()
        }
        ("GET", p) if p.starts_with("/v1/batches/batch_") => {
            s.polls += 1;
            let n: usize = p["/v1/batches/batch_".len()..].parse().unwrap();
            let total = s.batches[n - 1].len();
            if hold.load(Ordering::SeqCst) {
                serde_json::json!({"status": "in_progress", "request_counts": {"total": total, "completed": 0, "failed": 0}}).to_string()
            } else {
                serde_json::json!({"status": "completed", "output_file_id": format!("out-{n}"),
                    "request_counts": {"total": total, "completed": total, "failed": 0}})
                .to_string()
            }
        }
        ("GET", p) if p.starts_with("/v1/files/out-") => {
            let n: usize = p["/v1/files/out-".len()..]
                .trim_end_matches("/content")
                .parse()
                .unwrap();
            let before: usize = s.batches[..n - 1].iter().map(Vec::len).sum();
            s.batches[n - 1]
                .iter()
                .enumerate()
                .map(|(j, id)| {
                    let k = before + j + 1;
                    let response = if k == 4 {
                        serde_json::json!({"status_code": 500, "body": {"error": {"message": "server overloaded"}}})
                    } else {
                        let text = format!(
                            "Variant {k}.\n```opencl\n__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {{\n    uint i = get_global_id(0);\n    if (i >= N) return;\n    y[i] = fma(a, x[i], y[i]) + 0.0f * (float){k};\n}}\n```\n"
                        );
                        serde_json::json!({"status_code": 200, "body": {
                            "id": format!("chatcmpl-{k}"), "object": "chat.completion", "model": "gpt-5",
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 2000, "completion_tokens": 1000, "total_tokens": 3000}}})
                    };
                    serde_json::json!({"custom_id": id, "response": response}).to_string()
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        _ => {
            let body = "{\"error\": {\"message\": \"not found\"}}";
            write!(
                stream,
                "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )?;
            return Ok(());
        }
    };
    drop(s);
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        reply.len()
    )
}

fn kevo(ws: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .env("OPENAI_API_KEY", "sk-test-batch-0123456789")
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .output()
        .unwrap()
}

#[test]
fn batches_survive_a_kill_and_answer_each_prompt_once() {
    if !opencl_available() {
        eprintln!("skipped: no OpenCL device");
        return;
    }
    let hold = Arc::new(AtomicBool::new(true));
    let (url, server) = serve(hold.clone());
    let ws = tempfile::tempdir().unwrap();
    let llm = format!("batch:openai@{url}/v1:gpt-5");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .env("OPENAI_API_KEY", "sk-test-batch-0123456789")
        .args(EVOLVE_SAXPY_SMOKE)
        .args([
            "--llm",
            &llm,
            "--iterations",
            "4",
            "--concurrency",
            "2",
            "--batch-poll-s",
            "0.1",
            "--promotion",
            "strict",
            "--final-remeasure",
            "0",
            "--json",
            "--workspace",
        ])
        .arg(ws.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once its first batch is out and polled.
    let deadline = Instant::now() + Duration::from_secs(300);
    while server.lock().unwrap().polls < 2 {
        assert!(Instant::now() < deadline, "no batch was polled");
        assert!(child.try_wait().unwrap().is_none(), "kevo ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let run = std::fs::read_dir(ws.path().join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .into_string()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = rt
        .block_on(kevo_store::Store::open_workspace(ws.path()))
        .unwrap();
    let run_id = kevo_store::RunId(run.clone());
    let proposals = rt.block_on(store.proposals(&run_id)).unwrap();
    assert_eq!(proposals.len(), 2);
    assert!(
        proposals
            .iter()
            .all(|p| p.status == kevo_store::ProposalStatus::Pending
                && p.batch.as_deref() == Some("batch_1"))
    );

    hold.store(false, Ordering::SeqCst);
    let out = kevo(ws.path(), &["evolve", "--resume", &run, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = String::from_utf8_lossy(&out.stdout);
    assert!(events.contains("\"event\":\"batch\""), "{events}");

    let s = server.lock().unwrap();
    assert_eq!(
        s.batches.len(),
        2,
        "the killed run's batch was not sent again"
    );
    assert_eq!(s.files.len(), 2);
    let mut ids: Vec<&String> = s.batches.iter().flatten().collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4, "four distinct prompts");

    let proposals = rt.block_on(store.proposals(&run_id)).unwrap();
    let batches: Vec<_> = proposals.iter().map(|p| p.batch.clone().unwrap()).collect();
    assert_eq!(batches, ["batch_1", "batch_1", "batch_2", "batch_2"]);
    let mut answered: Vec<u32> = proposals
        .iter()
        .map(|p| {
            assert_eq!(p.status, kevo_store::ProposalStatus::Answered);
            p.iteration.unwrap()
        })
        .collect();
    answered.sort();
    assert_eq!(
        answered,
        [1, 2, 3, 4],
        "each iteration answers one proposal"
    );
    let history = rt.block_on(store.history(&run_id)).unwrap();
    let iterations: Vec<u32> = history.iter().map(|h| h.iteration).collect();
    assert_eq!(iterations, [0, 1, 2, 3, 4]);
    let calls = rt.block_on(store.llm_calls(&run_id)).unwrap();
    assert_eq!(calls.len(), 4);
    let failed: Vec<_> = calls.iter().filter(|c| c.call.error.is_some()).collect();
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0]
            .call
            .error
            .as_deref()
            .unwrap()
            .contains("server overloaded")
    );
    // Answered calls are priced at the batch price: half of gpt-5's
    // $1.25 / $10 per million tokens for 2000 in, 1000 out.
    for c in calls.iter().filter(|c| c.call.error.is_none()) {
        let usd = c.call.cost_usd.unwrap();
        assert!(
            (usd - 0.5 * (2000.0 * 1.25 + 1000.0 * 10.0) / 1e6).abs() < 1e-9,
            "{usd}"
        );
    }
    let info = rt.block_on(store.run(&run_id)).unwrap();
    assert_eq!(info.status, kevo_store::RunStatus::Finished);
}
