//! Evaluation over NATS JetStream with a PostgreSQL store, end to end
//! through the `kevo` binary against the real servers (NATS with JetStream
//! on 127.0.0.1:4222, PostgreSQL on 127.0.0.1:5432, database `test`; both
//! run in CI) and PoCL workers:
//! - two workers serve one run; one is killed with SIGKILL in the middle
//!   of a job, which the other finishes; each candidate has exactly one
//!   stored evaluation;
//! - a run killed with SIGKILL while its job is out resumes and finishes;
//! - a candidate whose evaluation keeps killing workers ends as failed
//!   after the workers' `--attempts`;
//! - one worker process serving two devices is shared by two coordinators.
//!
//! Each test uses its own queue namespace and database schema.

use crate::common;

use common::opencl_available;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const NATS: &str = "nats://127.0.0.1:4222";

/// Whether the NATS and PostgreSQL servers answer; CI must have both.
fn servers_available() -> bool {
    let up = |addr: &str| {
        std::net::TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(2)).is_ok()
    };
    let ok = up("127.0.0.1:4222") && up("127.0.0.1:5432");
    if !ok && std::env::var_os("CI").is_some() {
        panic!("NATS (4222) and PostgreSQL (5432) must be running in CI");
    }
    ok && opencl_available()
}

/// A queue namespace for one test, its streams removed from the server
/// when the test ends (pass or fail).
struct TestNamespace(String);

impl TestNamespace {
    fn new() -> TestNamespace {
        TestNamespace(unique("t"))
    }
}

impl std::ops::Deref for TestNamespace {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        if let Ok(ns) = kevo_dispatch::Namespace::new(&self.0) {
            let _ = rt.block_on(ns.remove(NATS));
        }
    }
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}{}x{nanos}", std::process::id())
}

/// A PostgreSQL store in a schema of its own: its URL for `--store`.
fn postgres_store() -> String {
    let schema = unique("kevo_dist_");
    let url = "postgres://postgres@127.0.0.1:5432/test";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut options =
            kevo_store::StoreOptions::new(kevo_store::Target::Postgres(url.to_string()));
        options.pg_schema = Some(schema.clone());
        kevo_store::Store::open_with(options).await.unwrap();
    });
    format!("{url}?options=-c%20search_path%3D{schema}")
}

fn store(url: &str) -> kevo_store::Store {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(kevo_store::Store::open(url)).unwrap()
}

/// A `kevo worker --nats` process and its output lines.
struct WorkerProcess {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl WorkerProcess {
    fn start(namespace: &str, extra: &[&str], dir: &Path) -> WorkerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kevo"))
            .args(["worker", "--nats", NATS, "--nats-namespace", namespace])
            .args(["--backend", "opencl", "--ack-wait-s", "3"])
            .args(extra)
            .env("KEVO_CACHE_DIR", dir.join("cache"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, lines) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut w = WorkerProcess {
            child,
            lines,
            seen: Vec::new(),
        };
        w.wait_for(|l| l.contains(" serves opencl "), Duration::from_secs(120))
            .expect("the worker joined");
        w
    }

    /// The first line (from now, or already seen) that `matches`.
    fn wait_for(&mut self, matches: impl Fn(&str) -> bool, within: Duration) -> Option<String> {
        if let Some(l) = self.seen.iter().find(|l| matches(l)) {
            return Some(l.clone());
        }
        let deadline = Instant::now() + within;
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push(line.clone());
            if matches(&line) {
                return Some(line);
            }
        }
        None
    }

    fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
    }

    fn kill(&mut self) {
        // SAFETY: signalling our own child process.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A saxpy that spends `loops` dependent FMAs per element (an evaluation
/// long enough to be caught in the middle).
fn slow_saxpy(dir: &Path, loops: u32) -> std::path::PathBuf {
    let path = dir.join(format!("slow_{loops}.cl"));
    std::fs::write(
        &path,
        format!(
            "__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {{
    uint i = get_global_id(0);
    if (i >= N) return;
    float busy = x[i];
    for (int k = 0; k < {loops}; ++k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f;
}}
"
        ),
    )
    .unwrap();
    path
}

fn evolve(dir: &Path, namespace: &str, store: &str, llm: &str, iterations: u32) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kevo"));
    c.args(common::EVOLVE_SAXPY_SMOKE)
        .args(["--llm", llm, "--iterations", &iterations.to_string()])
        .arg("--seed-kernel")
        .arg(slow_saxpy(dir, 512))
        .args(["--nats", NATS, "--nats-namespace", namespace])
        .args(["--store", store, "--json", "--final-remeasure", "0"])
        .args(["--promotion", "strict"])
        .arg("--workspace")
        .arg(dir.join("ws"))
        .env("KEVO_CACHE_DIR", dir.join("cache"));
    c
}

/// Each candidate's in-distribution evaluations in the store, by id.
fn evaluations_per_candidate(store_url: &str) -> Vec<(i64, usize)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = store(store_url);
    rt.block_on(async {
        let runs = s.list_runs().await.unwrap();
        assert_eq!(runs.len(), 1);
        let mut out = Vec::new();
        for h in s.history(&runs[0].id).await.unwrap() {
            if let Some(c) = h.candidate_id {
                let n = s
                    .evaluations_of(c)
                    .await
                    .unwrap()
                    .iter()
                    .filter(|e| e.kind == kevo_store::EvaluationKind::InDistribution)
                    .count();
                out.push((c.0, n));
            }
        }
        out
    })
}

/// Every candidate of the run has exactly one in-distribution
/// evaluation (and there are `candidates` of them, when given).
fn assert_one_evaluation_each(store_url: &str, candidates: Option<usize>) {
    let per = evaluations_per_candidate(store_url);
    if let Some(n) = candidates {
        assert_eq!(per.len(), n, "{per:?}");
    }
    assert!(per.iter().all(|(_, n)| *n == 1), "{per:?}");
}

fn replay() -> String {
    format!(
        "replay:{}/../../examples/replay/saxpy-opencl.jsonl",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn two_workers_serve_a_run_and_a_killed_workers_job_is_finished_by_the_other() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = TestNamespace::new();
    let pg = postgres_store();
    let mut workers = [
        WorkerProcess::start(&ns, &[], dir.path()),
        WorkerProcess::start(&ns, &[], dir.path()),
    ];
    let run = evolve(dir.path(), &ns, &pg, &replay(), 4)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The seed's job goes to one of them: kill that worker as soon as it
    // starts it.
    let started = |l: &str| l.contains("(delivery 1): saxpy started");
    let deadline = Instant::now() + Duration::from_secs(120);
    let (victim, job) = 'found: loop {
        assert!(Instant::now() < deadline, "no worker started a job");
        for (i, w) in workers.iter_mut().enumerate() {
            if let Some(l) = w.wait_for(started, Duration::from_millis(100)) {
                break 'found (i, l);
            }
        }
    };
    workers[victim].kill();
    let survivor = &mut workers[1 - victim];
    let job_id = job.split_whitespace().nth(1).unwrap().to_string();
    // The other worker gets it again after the ack wait (3 s) and finishes.
    let redelivered = survivor
        .wait_for(
            |l| l.contains(&format!("job {job_id} (delivery 2)")),
            Duration::from_secs(60),
        )
        .expect("the killed worker's job is redelivered to the other");
    assert!(redelivered.contains("saxpy started"));
    let out = run.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    survivor.drain();
    assert!(
        survivor
            .seen
            .iter()
            .any(|l| l.starts_with(&format!("job {job_id}: correct"))),
        "{:?}",
        survivor.seen
    );
    // Exactly one stored evaluation per candidate, the seed's included.
    assert_one_evaluation_each(&pg, Some(5));
}

#[test]
fn a_run_killed_with_a_job_out_resumes_and_finishes() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = TestNamespace::new();
    let pg = postgres_store();
    let _w = WorkerProcess::start(&ns, &[], dir.path());
    let mut cmd = evolve(dir.path(), &ns, &pg, &replay(), 4);
    let run = common::kill_after_iteration(&mut cmd, 2);
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["evolve", "--resume", &run, "--store", &pg, "--json"])
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_one_evaluation_each(&pg, Some(5));
}

#[test]
fn a_candidate_that_keeps_killing_workers_ends_as_failed() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = TestNamespace::new();
    let pg = postgres_store();
    // The proposer answers one kernel, marked so this test can tell its
    // job: every worker that starts it is killed, as a kernel that takes
    // its host down would.
    let poison = "```opencl\n// POISON\n__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) { uint i = get_global_id(0); if (i < N) y[i] = a * x[i] + y[i]; }\n```\n";
    let script = dir.path().join("poison.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncat >/dev/null\ncat <<'K'\n{poison}K\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let extra = ["--attempts", "2"];
    let mut worker = WorkerProcess::start(&ns, &extra, dir.path());
    let run = evolve(
        dir.path(),
        &ns,
        &pg,
        &format!("cmd:{}", script.display()),
        1,
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // The seed is job 0 and finishes; the poison candidate is the next
    // job. Each of its first two deliveries takes a worker down.
    worker
        .wait_for(|l| l.contains("-0: correct"), Duration::from_secs(120))
        .expect("the seed is evaluated");
    for delivery in 1..=2 {
        worker
            .wait_for(
                |l| l.contains(&format!("-1 (delivery {delivery}): saxpy started")),
                Duration::from_secs(60),
            )
            .unwrap_or_else(|| panic!("delivery {delivery} of the poison job: {:?}", worker.seen));
        worker.kill();
        worker = WorkerProcess::start(&ns, &extra, dir.path());
    }
    // The third delivery is failed without being run.
    let failed = worker
        .wait_for(|l| l.contains("-1: runtime error"), Duration::from_secs(60))
        .unwrap_or_else(|| panic!("{:?}", worker.seen));
    assert!(failed.contains("ended its worker 2 times"), "{failed}");
    let out = run.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let history = {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let s = store(&pg);
        rt.block_on(async {
            let runs = s.list_runs().await.unwrap();
            s.history(&runs[0].id).await.unwrap()
        })
    };
    let poisoned = history.iter().find(|h| h.iteration == 1).unwrap();
    assert_eq!(poisoned.outcome_kind.as_deref(), Some("runtime_error"));
    assert_one_evaluation_each(&pg, None);
}

/// An iteration's answers (`--candidates-per-iteration 4`) are published
/// at once, and both workers take some of them.
#[test]
fn an_iterations_answers_are_spread_over_the_workers() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = TestNamespace::new();
    let pg = postgres_store();
    let mut workers = [
        WorkerProcess::start(&ns, &[], dir.path()),
        WorkerProcess::start(&ns, &[], dir.path()),
    ];
    let (agent, _) = common::saxpy_agent(dir.path(), 0.0);
    let out = evolve(dir.path(), &ns, &pg, &agent, 2)
        .args(["--candidates-per-iteration", "4"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for w in &mut workers {
        w.drain();
        let jobs = w.seen.iter().filter(|l| l.contains("started")).count();
        assert!(jobs >= 1, "each worker took jobs: {:?}", w.seen);
    }
    assert_one_evaluation_each(&pg, Some(9));
}

/// One `kevo worker --devices 0,0` (two workers in one process, PoCL's
/// one device twice) serves two runs of two coordinators at once, each
/// with its own store; every candidate of both is evaluated once.
#[test]
fn two_coordinators_share_the_workers_of_one_host() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = TestNamespace::new();
    let mut worker = WorkerProcess::start(&ns, &["--devices", "0,0"], dir.path());
    let runs: Vec<(String, std::path::PathBuf)> = (0..2)
        .map(|k| {
            let d = dir.path().join(format!("run{k}"));
            std::fs::create_dir_all(&d).unwrap();
            (postgres_store(), d)
        })
        .collect();
    let children: Vec<Child> = runs
        .iter()
        .map(|(pg, d)| {
            let (agent, _) = common::saxpy_agent(d, 0.0);
            evolve(d, &ns, pg, &agent, 2)
                .args(["--candidates-per-iteration", "4"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (pg, _) in &runs {
        assert_one_evaluation_each(pg, Some(9));
    }
    worker.drain();
    assert!(
        worker
            .seen
            .iter()
            .any(|l| l.starts_with("[device 1] worker ")),
        "each device joined as a worker of its own: {:?}",
        worker.seen
    );
    for device in 0..2 {
        let jobs = worker
            .seen
            .iter()
            .filter(|l| l.starts_with(&format!("[device {device}] job ")) && l.contains("started"))
            .count();
        assert!(jobs >= 1, "device {device} took jobs: {:?}", worker.seen);
    }
}
