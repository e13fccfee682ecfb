//! `kevo worker --nats URL`: serve evaluation jobs from NATS JetStream on
//! this host's device, with the same isolated worker a local run uses.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use kevo_backend::BackendName;
use kevo_dispatch::{Job, JobWorker, Namespace, WorkerInfo, WorkerOptions};
use kevo_eval::{Evaluation, Outcome, WallTimes};
use kevo_runtimes::BackendKind;
use kevo_worker::{Worker, WorkerCommand, WorkerConfig};

/// `kevo worker --nats URL ...`.
#[derive(Debug, clap::Args)]
pub struct QueueWorkerArgs {
    /// Serve evaluation jobs from this NATS server (JetStream enabled),
    /// e.g. nats://127.0.0.1:4222.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// Queues and buckets are named under this (runs use the same
    /// `--nats-namespace`).
    #[arg(long, default_value = "kevo")]
    pub nats_namespace: String,
    /// Which GPU runtime to serve: auto (default), opencl or cuda.
    #[arg(long)]
    pub backend: Option<BackendKind>,
    /// OpenCL platform, by index or name substring.
    #[arg(long)]
    pub platform: Option<String>,
    /// Device, by index or name substring.
    #[arg(long, conflicts_with = "devices")]
    pub device: Option<String>,
    /// Serve several devices of this host: `all` (with --backend), or
    /// indices or name substrings (`0,1`). Each device is a worker of its
    /// own, with its own isolated process, in the queue of its model.
    #[arg(long, value_name = "DEVICES", value_delimiter = ',')]
    pub devices: Option<Vec<String>>,
    /// Evaluations a job may end its worker in (killed, crashed, lost)
    /// before it is stored as failed instead of run again.
    #[arg(long, default_value_t = kevo_dispatch::DEFAULT_ATTEMPTS)]
    pub attempts: u32,
    /// Seconds a job may go without a sign of life from its worker before
    /// another worker gets it (a live worker signals every third of it).
    #[arg(long, default_value_t = kevo_dispatch::DEFAULT_ACK_WAIT_S)]
    pub ack_wait_s: f64,
}

/// The local isolated worker, restarted when a job's settings differ from
/// those it was started with.
struct Local {
    command: WorkerCommand,
    /// The worker's own device choice, kept over every job's settings.
    base: WorkerConfig,
    /// The device it opened first, named by the evaluations of jobs it
    /// could not run (as `JobWorker`'s own failures name it).
    backend: BackendName,
    device: String,
    running: Option<(String, Worker)>,
}

impl Local {
    /// The job's settings with this host's backend and device.
    fn config_for(&self, job: &Job) -> Result<WorkerConfig, String> {
        let mut config: WorkerConfig = serde_json::from_value(job.settings.clone())
            .map_err(|e| format!("the job's evaluation settings are unreadable: {e}"))?;
        config.backend = self.base.backend;
        config.selector = self.base.selector.clone();
        config.known_measurements = Default::default();
        // The host's confinement is the host's: a job could otherwise turn
        // the sandbox off, or (the test hook) make the worker read files.
        config.sandbox = self.base.sandbox.clone();
        config.self_test_reads = Vec::new();
        config.self_test_connects = Vec::new();
        Ok(config)
    }

    fn evaluate(&mut self, job: &Job) -> Evaluation {
        let config = match self.config_for(job) {
            Ok(c) => c,
            Err(message) => return self.failure(job, message),
        };
        let key = serde_json::to_string(&config).unwrap_or_default();
        if self.running.as_ref().is_none_or(|(k, _)| *k != key) {
            if let Some((_, old)) = self.running.take() {
                old.shutdown(Duration::from_secs(2));
            }
            match Worker::start(self.command.clone(), config) {
                Ok(w) => self.running = Some((key, w)),
                Err(e) => return self.failure(job, format!("the worker cannot start: {e}")),
            }
        }
        // A job names its task (it crossed the queue); the dispatch side
        // has already refused a job whose task version differs from ours.
        let task = match kevo_tasks::by_name(&job.task) {
            Ok(task) => task,
            Err(e) => return self.failure(job, e.to_string()),
        };
        let (_, worker) = self.running.as_mut().expect("started above");
        worker.evaluate_candidate(
            task,
            &job.candidate,
            &job.sizes,
            Duration::from_secs_f64(job.timeout_s.max(1.0)),
        )
    }

    fn failure(&self, job: &Job, message: String) -> Evaluation {
        Evaluation::without_sizes(
            &job.task,
            &self.device,
            self.backend,
            Outcome::RuntimeError {
                size: None,
                fault: None,
                message,
            },
            WallTimes::default(),
        )
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

pub fn serve(args: QueueWorkerArgs) -> Result<ExitCode> {
    let url = args.nats.clone().context("--nats URL is required")?;
    let namespace = Namespace::new(&args.nats_namespace).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        args.ack_wait_s.is_finite() && args.ack_wait_s >= 1.0,
        "--ack-wait-s must be at least 1 second, not {}",
        args.ack_wait_s
    );
    anyhow::ensure!(args.attempts >= 1, "--attempts must be at least 1");
    let backend = args.backend.unwrap_or(BackendKind::Auto);
    let selectors = kevo_evolve::device_selectors(
        backend,
        &kevo_backend::DeviceSelector {
            platform: args.platform.clone(),
            device: args.device.clone(),
        },
        args.devices.as_deref().unwrap_or_default(),
    )
    .map_err(|e| anyhow::anyhow!("--devices: {e}"))?;
    let locals = start_locals(backend, selectors)?;
    let options = WorkerOptions {
        attempts: args.attempts,
        ack_wait: Duration::from_secs_f64(args.ack_wait_s),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve_all(&url, &namespace, locals, options))?;
    Ok(ExitCode::SUCCESS)
}

/// One isolated worker per device, each opened now (a device that cannot
/// open fails the command before anything joins), with the description it
/// joins the queue of its device model with.
fn start_locals(
    backend: BackendKind,
    selectors: Vec<kevo_backend::DeviceSelector>,
) -> Result<Vec<(WorkerInfo, Local)>> {
    let several = selectors.len() > 1;
    let command = WorkerCommand::current_exe()?;
    let host = host_name();
    let mut locals = Vec::with_capacity(selectors.len());
    for (k, selector) in selectors.into_iter().enumerate() {
        let base = WorkerConfig::new(backend, selector.clone());
        let first = Worker::start(command.clone(), base.clone()).with_context(|| {
            format!(
                "cannot open this host's device {}",
                selector.device.as_deref().unwrap_or("(the default)")
            )
        })?;
        let id = if several {
            format!("{host}-{}-{k}", std::process::id())
        } else {
            format!("{host}-{}", std::process::id())
        };
        let info = WorkerInfo {
            id: kevo_dispatch::device_key(&id),
            host: host.clone(),
            kevo: kevo_evolve::VERSION.to_string(),
            backend: first.device().backend,
            device: first.device().clone(),
            ceilings: first.ceilings().clone(),
            sandbox: first.sandbox().clone(),
            seen_at: 0,
        };
        let key = serde_json::to_string(&base).unwrap_or_default();
        let local = Local {
            command: command.clone(),
            base,
            backend: info.backend,
            device: info.device.name.clone(),
            running: Some((key, first)),
        };
        locals.push((info, local));
    }
    Ok(locals)
}

/// Every device joins the queue and serves jobs until Ctrl-C, or until
/// one device's failure (its server gone) stops them all; the first
/// error, if any.
async fn serve_all(
    url: &str,
    namespace: &Namespace,
    locals: Vec<(WorkerInfo, Local)>,
    options: WorkerOptions,
) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.store(true, Ordering::Relaxed);
        });
    }
    let several = locals.len() > 1;
    let mut serving = Vec::new();
    for (k, (info, local)) in locals.into_iter().enumerate() {
        let worker = match JobWorker::join(url, namespace, info, options.clone()).await {
            Ok(w) => w,
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                return Err(e.into());
            }
        };
        // With several devices, each line says which one it is about.
        let prefix = if several {
            format!("[device {k}] ")
        } else {
            String::new()
        };
        let i = worker.info();
        println!(
            "{prefix}worker {} serves {} {} (ceilings {:.1} GB/s, {:.0} GFLOPS) on {url}, namespace {}",
            i.id,
            i.backend,
            i.device.name,
            i.ceilings.bandwidth_gbs,
            i.ceilings.fp32_gflops,
            namespace.name()
        );
        serving.push(tokio::spawn(serve_device(
            worker,
            local,
            stop.clone(),
            prefix,
        )));
    }
    let mut first_error = None;
    for s in serving {
        match s.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(anyhow::Error::from(e));
            }
            Err(e) => {
                first_error.get_or_insert(anyhow::anyhow!("a device's worker failed: {e}"));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// One device's jobs, its log lines prefixed with which device it is.
async fn serve_device(
    worker: JobWorker,
    mut local: Local,
    stop: Arc<AtomicBool>,
    prefix: String,
) -> Result<(), kevo_dispatch::DispatchError> {
    let mut evaluate = |job: &Job| local.evaluate(job);
    let mut log = |line: String| println!("{prefix}{line}");
    let served = worker.serve(&mut evaluate, stop.clone(), &mut log).await;
    // One device's failure (its server gone) stops the others.
    stop.store(true, Ordering::Relaxed);
    println!("{prefix}worker {} stopped", worker.info().id);
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job brings the run's evaluation settings; the host keeps its own
    /// device choice and confinement whatever the job says.
    #[test]
    fn a_job_cannot_change_the_hosts_device_or_sandbox() {
        let mut base = WorkerConfig::new(
            BackendKind::Opencl,
            kevo_backend::DeviceSelector {
                platform: None,
                device: Some("1".into()),
            },
        );
        base.sandbox.required = true;
        let local = Local {
            command: WorkerCommand::current_exe().unwrap(),
            base: base.clone(),
            backend: BackendName::Opencl,
            device: "test".into(),
            running: None,
        };
        let mut asked = WorkerConfig::new(BackendKind::Cuda, Default::default());
        asked.sandbox.enabled = false;
        asked.sandbox.required = false;
        asked.self_test_reads = vec!["/etc/shadow".into()];
        asked.timing.flush_l2 = true;
        let job = Job {
            id: "j".into(),
            task: "saxpy".into(),
            task_hash: String::new(),
            candidate: kevo_eval::Candidate::new(String::new(), kevo_backend::Dialect::OpenCl),
            sizes: Vec::new(),
            timeout_s: 1.0,
            settings: serde_json::to_value(&asked).unwrap(),
            kevo: String::new(),
        };
        let config = local.config_for(&job).unwrap();
        assert_eq!(config.backend, BackendKind::Opencl);
        assert_eq!(config.selector.device.as_deref(), Some("1"));
        assert_eq!(
            serde_json::to_value(&config.sandbox).unwrap(),
            serde_json::to_value(&base.sandbox).unwrap()
        );
        assert!(config.self_test_reads.is_empty());
        assert!(config.timing.flush_l2, "the run's timing settings apply");
        let broken = Job {
            settings: serde_json::json!({"backend": 7}),
            ..job
        };
        assert!(local.config_for(&broken).is_err());
    }
}
