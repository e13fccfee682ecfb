//! The run's side: publish an evaluation as a job and wait for its result.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::message::PublishMessage;
use futures::StreamExt;
use kevo_backend::BackendName;
use kevo_eval::{Evaluation, Outcome, WallTimes};
use kevo_tasks::Size;

use crate::names::{Namespace, Opened};
use crate::{DispatchError, Job, JobResult, WORKER_STALE_S, WorkerInfo, jetstream_error, now_s};

/// One evaluation a run asks for.
pub struct Request<'a> {
    pub task: &'a str,
    /// The task's definition hash (a worker with another refuses).
    pub task_hash: &'a str,
    pub candidate: &'a kevo_eval::Candidate,
    pub sizes: &'a [Size],
    pub timeout: Duration,
    /// The run's evaluation settings (see [`Job::settings`]).
    pub settings: &'a serde_json::Value,
}

/// Evaluates through the workers of one backend and device model.
pub struct RemoteEvaluator {
    opened: Opened,
    namespace: Namespace,
    subject: String,
    /// The worker whose device and ceilings the run scores against (every
    /// worker of the subject has the same device model).
    worker: WorkerInfo,
    /// Distinguishes this coordinator's job ids.
    origin: String,
    next: AtomicU64,
}

impl RemoteEvaluator {
    /// Connect and find the workers serving `backend` (and a device whose
    /// name contains `device`, when given). Workers of several device
    /// models are refused without `device`: their scores would not compare.
    pub async fn connect(
        url: &str,
        namespace: &Namespace,
        backend: Option<BackendName>,
        device: Option<&str>,
    ) -> Result<RemoteEvaluator, DispatchError> {
        let opened = namespace.open(url).await?;
        let workers = live_workers(&opened).await?;
        let serving: Vec<&WorkerInfo> = workers
            .iter()
            .filter(|w| backend.is_none_or(|b| w.backend == b))
            .filter(|w| device.is_none_or(|d| w.device.name.contains(d)))
            .collect();
        let mut models: Vec<String> = serving
            .iter()
            .map(|w| format!("{} {}", w.backend, w.device.name))
            .collect();
        models.sort();
        models.dedup();
        let wanted = backend.map_or("any backend", BackendName::name);
        let wanted = match device {
            Some(d) => format!("{wanted} on a device named like `{d}`"),
            None => wanted.to_string(),
        };
        let worker = match models.as_slice() {
            [] => {
                return Err(DispatchError::NoWorker {
                    wanted,
                    namespace: namespace.name().to_string(),
                    seen: if workers.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (serving now: {})",
                            workers
                                .iter()
                                .map(|w| format!("{} {}", w.backend, w.device.name))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    },
                });
            }
            [_] => (*serving[0]).clone(),
            many => {
                return Err(DispatchError::MixedDevices {
                    backend,
                    models: many.join(", "),
                });
            }
        };
        let subject = namespace.job_subject(worker.backend, &worker.device.name);
        Ok(RemoteEvaluator {
            opened,
            namespace: namespace.clone(),
            subject,
            worker,
            origin: format!("{}-{}", std::process::id(), now_s()),
            next: AtomicU64::new(0),
        })
    }

    pub fn worker(&self) -> &WorkerInfo {
        &self.worker
    }

    /// The worker's evaluation, named for the candidate sent; an answer
    /// for another source is a failure, never a score.
    fn claimed(&self, request: &Request<'_>, evaluation: Evaluation) -> Evaluation {
        request
            .candidate
            .claim(evaluation)
            .unwrap_or_else(|message| {
                let failed = Evaluation::without_sizes(
                    request.task,
                    &self.worker.device.name,
                    self.worker.backend,
                    Outcome::RuntimeError {
                        size: None,
                        fault: None,
                        message,
                    },
                    WallTimes::default(),
                );
                request
                    .candidate
                    .claim(failed)
                    .expect("a failure made here names no source")
            })
    }

    /// Evaluate one candidate on whichever worker takes the job. Waits as
    /// long as it takes: a queue without workers holds the job (said once a
    /// minute) until one joins or the run is interrupted.
    pub async fn evaluate(
        &self,
        request: &Request<'_>,
        notice: &mut (dyn FnMut(String) + Send),
    ) -> Result<Evaluation, DispatchError> {
        let id = format!(
            "{}-{}",
            self.origin,
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let job = Job {
            id: id.clone(),
            task: request.task.to_string(),
            task_hash: request.task_hash.to_string(),
            candidate: request.candidate.clone(),
            sizes: request.sizes.to_vec(),
            timeout_s: request.timeout.as_secs_f64(),
            settings: request.settings.clone(),
            kevo: self.worker.kevo.clone(),
        };
        // Subscribed before the job leaves, so the result is heard the
        // moment a worker stores it.
        let mut stored = self
            .opened
            .js
            .client()
            .subscribe(self.opened.results.subject(&id))
            .await
            .map_err(|e| jetstream_error("subscribe to a result", e))?;
        self.opened
            .js
            .send_publish(
                self.subject.clone(),
                PublishMessage::build()
                    .payload(serde_json::to_vec(&job)?.into())
                    .message_id(&id),
            )
            .await
            .map_err(|e| jetstream_error("publish a job", e))?
            .await
            .map_err(|e| jetstream_error("publish a job", e))?;
        // The stored result is also read every second, in case the
        // subscription missed it (a reconnection).
        let mut last_check = Instant::now();
        loop {
            if let Some(value) = self.opened.results.get(&id).await? {
                let result: JobResult = serde_json::from_slice(&value)?;
                return Ok(self.claimed(request, result.evaluation));
            }
            match tokio::time::timeout(Duration::from_secs(1), stored.next()).await {
                Ok(Some(message)) => {
                    if let Ok(result) = serde_json::from_slice::<JobResult>(&message.payload) {
                        return Ok(self.claimed(request, result.evaluation));
                    }
                }
                // The subscription ended: reading the store every second
                // is what is left.
                Ok(None) => tokio::time::sleep(Duration::from_secs(1)).await,
                Err(_) => {}
            }
            if last_check.elapsed() >= Duration::from_secs(60) {
                last_check = Instant::now();
                let alive = live_workers(&self.opened)
                    .await?
                    .iter()
                    .filter(|w| {
                        self.namespace.job_subject(w.backend, &w.device.name) == self.subject
                    })
                    .count();
                if alive == 0 {
                    notice(format!(
                        "job {id} waits: no worker serves {} now (start one with `kevo worker --nats URL`)",
                        self.subject
                    ));
                }
            }
        }
    }
}

/// The workers that refreshed their entry lately.
async fn live_workers(opened: &Opened) -> Result<Vec<WorkerInfo>, DispatchError> {
    let mut out = Vec::new();
    for key in opened.workers.keys().await? {
        if let Some(value) = opened.workers.get(&key).await?
            && let Ok(info) = serde_json::from_slice::<WorkerInfo>(&value)
            && now_s() - info.seen_at <= WORKER_STALE_S
        {
            out.push(info);
        }
    }
    Ok(out)
}
