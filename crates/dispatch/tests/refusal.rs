//! Against the real NATS server (127.0.0.1:4222, JetStream, in CI): a
//! worker refuses, with a clear failure, a job made for another definition
//! of its task or for a task it does not know, and never runs it; a job's
//! result is stored once when two deliveries race.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use kevo_dispatch::{JobWorker, Namespace, RemoteEvaluator, Request, WorkerInfo, WorkerOptions};
use kevo_eval::{Evaluation, Outcome, WallTimes};

fn nats_available() -> bool {
    let up = std::net::TcpStream::connect_timeout(
        &"127.0.0.1:4222".parse().unwrap(),
        Duration::from_secs(2),
    )
    .is_ok();
    if !up && std::env::var_os("CI").is_some() {
        panic!("NATS (4222) must be running in CI");
    }
    up
}

/// A worker as a GPU host would announce it (a made-up device model, so
/// that no other test's worker shares its queue).
fn info(model: &str) -> WorkerInfo {
    serde_json::from_value(serde_json::json!({
        "id": format!("refusal-{}", std::process::id()),
        "host": "test",
        "kevo": "0",
        "backend": "opencl",
        "device": {
            "backend": "opencl", "dialect": "opencl", "platform": "test", "name": model,
            "vendor": "test", "compute_units": 1, "global_mem_bytes": 1u64 << 30,
            "max_work_group_size": 256, "local_mem_bytes": 65536, "clock_mhz": 1000,
            "arch": "test", "driver_version": "0", "is_cpu": true
        },
        "ceilings": {
            "bandwidth_gbs": 10.0, "fp32_gflops": 100.0,
            "source": {"kind": "declared"}
        },
        "sandbox": {"filesystem": null, "network": [], "no_new_privileges": false, "environment_scrubbed": false, "missing": []},
        "seen_at": 0
    }))
    .expect("a worker's announcement")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_for_another_task_definition_or_an_unknown_task_are_refused_unrun() {
    if !nats_available() {
        return;
    }
    let url = "nats://127.0.0.1:4222";
    let namespace = Namespace::new(&format!("refusal{}", std::process::id())).unwrap();
    let model = format!("Refusal Device {}", std::process::id());
    let worker = JobWorker::join(url, &namespace, info(&model), WorkerOptions::default())
        .await
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let serving = {
        let (ran, stop) = (ran.clone(), stop.clone());
        tokio::spawn(async move {
            let mut evaluate = |job: &kevo_dispatch::Job| {
                ran.fetch_add(1, Ordering::Relaxed);
                let mut e = Evaluation::without_sizes(
                    &job.task,
                    "",
                    kevo_backend::BackendName::Opencl,
                    Outcome::RuntimeError {
                        size: None,
                        fault: None,
                        message: "ran".into(),
                    },
                    WallTimes::default(),
                );
                // A worker that answers for a kernel other than the job's.
                if job.candidate.source.contains("lie") {
                    e.source_sha = Some(kevo_eval::source_sha256("another kernel"));
                }
                e
            };
            let mut log = |_line: String| {};
            worker.serve(&mut evaluate, stop, &mut log).await
        })
    };
    let remote = RemoteEvaluator::connect(
        url,
        &namespace,
        Some(kevo_backend::BackendName::Opencl),
        Some(&model),
    )
    .await
    .unwrap();
    let settings = serde_json::json!({});
    let sizes: Vec<kevo_tasks::Size> = Vec::new();
    let ask_with = |task: &'static str, task_hash: &'static str, comment: &'static str| {
        let (remote, settings, sizes) = (&remote, &settings, &sizes);
        let source = format!("__kernel void saxpy() {{}} // {comment}");
        let candidate = kevo_eval::Candidate::new(source, kevo_backend::Dialect::OpenCl);
        async move {
            remote
                .evaluate(
                    &Request {
                        task,
                        task_hash,
                        candidate: &candidate,
                        sizes,
                        timeout: Duration::from_secs(10),
                        settings,
                    },
                    &mut |_| {},
                )
                .await
                .unwrap()
        }
    };
    let ask = |task: &'static str, task_hash: &'static str| ask_with(task, task_hash, "");
    let message = |e: &Evaluation| match &e.outcome {
        Outcome::RuntimeError { message, .. } => message.clone(),
        other => panic!("refused as a runtime error, not {other:?}"),
    };
    let other_definition = ask("saxpy", "0123456789abcdef").await;
    let m = message(&other_definition);
    assert!(m.contains("the job was made for 0123456789abcdef"), "{m}");
    assert!(m.contains("same kevo build"), "{m}");
    let unknown = ask("no_such_task", "0123").await;
    let m = message(&unknown);
    assert!(m.contains("does not know task no_such_task"), "{m}");
    assert_eq!(ran.load(Ordering::Relaxed), 0, "a refused job is not run");
    // The same worker runs a job made for its definition.
    let hash = kevo_dispatch::task_hash("saxpy").unwrap();
    let hash: &'static str = Box::leak(hash.into_boxed_str());
    let accepted = ask("saxpy", hash).await;
    assert_eq!(message(&accepted), "ran");
    assert_eq!(ran.load(Ordering::Relaxed), 1);
    let sent = kevo_eval::source_sha256("__kernel void saxpy() {} // ");
    assert_eq!(accepted.source_sha.as_deref(), Some(sent.as_str()));
    // An answer for another kernel is a failure, never that kernel's score.
    let lied = ask_with("saxpy", hash, "lie").await;
    let m = message(&lied);
    assert!(m.contains("not the candidate sent"), "{m}");
    stop.store(true, Ordering::Relaxed);
    serving.await.unwrap().unwrap();
    namespace.remove(url).await.unwrap();
    // Removing twice is not an error.
    namespace.remove(url).await.unwrap();
}

/// Two deliveries of one job race to store its result: the server keeps
/// exactly one, and the loser is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_is_stored_once_when_two_deliveries_race() {
    if !nats_available() {
        return;
    }
    let namespace = Namespace::new(&format!("race{}", std::process::id())).unwrap();
    let opened = namespace.open("nats://127.0.0.1:4222").await.unwrap();
    let key = "job-race-1";
    let (a, b) = tokio::join!(
        opened.results.put_once(key, b"first".to_vec()),
        opened.results.put_once(key, b"second".to_vec()),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a ^ b, "exactly one writer stores: {a} {b}");
    let kept = opened.results.get(key).await.unwrap().unwrap();
    assert_eq!(
        kept,
        if a {
            b"first".to_vec()
        } else {
            b"second".to_vec()
        }
    );
    assert!(
        !opened
            .results
            .put_once(key, b"third".to_vec())
            .await
            .unwrap()
    );
    assert_eq!(opened.results.get(key).await.unwrap().unwrap(), kept);
    namespace.remove("nats://127.0.0.1:4222").await.unwrap();
}
