//! The GPU host's side: take jobs for this device from the work queue,
//! evaluate them with the local isolated worker, store each result, then
//! acknowledge.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, pull};
use async_nats::jetstream::{AckKind, Message};
use futures::StreamExt;
use kevo_eval::{Evaluation, Outcome, WallTimes};

use crate::names::{Namespace, Opened};
use crate::{
    DEFAULT_ACK_WAIT_S, DEFAULT_ATTEMPTS, DispatchError, Job, JobResult, WorkerInfo,
    jetstream_error, now_s, task_hash,
};

/// How a worker serves.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Evaluations a job may kill workers in before it is failed.
    pub attempts: u32,
    /// See [`DEFAULT_ACK_WAIT_S`].
    pub ack_wait: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            attempts: DEFAULT_ATTEMPTS,
            ack_wait: Duration::from_secs_f64(DEFAULT_ACK_WAIT_S),
        }
    }
}

/// A worker joined to a namespace.
pub struct JobWorker {
    opened: Opened,
    consumer: async_nats::jetstream::consumer::Consumer<pull::Config>,
    info: WorkerInfo,
    options: WorkerOptions,
}

impl JobWorker {
    /// Connect, announce `info` and join the queue of its backend and
    /// device model.
    pub async fn join(
        url: &str,
        namespace: &Namespace,
        info: WorkerInfo,
        options: WorkerOptions,
    ) -> Result<JobWorker, DispatchError> {
        let opened = namespace.open(url).await?;
        let name = namespace.consumer(info.backend, &info.device.name);
        let consumer = opened
            .jobs
            .get_or_create_consumer(
                &name,
                pull::Config {
                    durable_name: Some(name.clone()),
                    filter_subject: namespace.job_subject(info.backend, &info.device.name),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: options.ack_wait,
                    // The delivery after the last attempt stores a failure.
                    max_deliver: i64::from(options.attempts) + 1,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| jetstream_error(&format!("consumer {name}"), e))?;
        let worker = JobWorker {
            opened,
            consumer,
            info,
            options,
        };
        worker.announce().await?;
        Ok(worker)
    }

    pub fn info(&self) -> &WorkerInfo {
        &self.info
    }

    async fn announce(&self) -> Result<(), DispatchError> {
        let mut info = self.info.clone();
        info.seen_at = now_s();
        self.opened
            .workers
            .put(&info.id, serde_json::to_vec(&info)?)
            .await
    }

    /// Serve jobs until `stop` is set: each one evaluated by `evaluate`
    /// (blocking; the local isolated worker), its result stored, then the
    /// job acknowledged. `log` gets one line per job start and end.
    pub async fn serve(
        &self,
        evaluate: &mut (dyn FnMut(&Job) -> Evaluation + Send),
        stop: Arc<AtomicBool>,
        log: &mut (dyn FnMut(String) + Send),
    ) -> Result<(), DispatchError> {
        // The registry entry is refreshed while serving; a worker that
        // stops refreshing is stale and offered to no new run.
        let registry = {
            let workers = self.opened.workers.clone();
            let info = self.info.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    let mut info = info.clone();
                    info.seen_at = now_s();
                    if let Ok(bytes) = serde_json::to_vec(&info) {
                        let _ = workers.put(&info.id, bytes).await;
                    }
                }
            })
        };
        let result = self.serve_jobs(evaluate, &stop, log).await;
        registry.abort();
        let _ = self.opened.workers.delete(&self.info.id).await;
        result
    }

    /// The loop of [`JobWorker::serve`]: one message at a time until
    /// `stop` is set.
    async fn serve_jobs(
        &self,
        evaluate: &mut (dyn FnMut(&Job) -> Evaluation + Send),
        stop: &AtomicBool,
        log: &mut (dyn FnMut(String) + Send),
    ) -> Result<(), DispatchError> {
        while !stop.load(Ordering::Relaxed) {
            let Some(message) = self.next_message().await? else {
                continue;
            };
            self.serve_message(message, evaluate, log).await?;
        }
        Ok(())
    }

    /// The next job message of this worker's queue, waiting at most 1 s
    /// (None then), so that `stop` is looked at every second.
    async fn next_message(&self) -> Result<Option<Message>, DispatchError> {
        let mut batch = self
            .consumer
            .fetch()
            .max_messages(1)
            .expires(Duration::from_secs(1))
            .messages()
            .await
            .map_err(|e| jetstream_error("fetch", e))?;
        let Some(message) = batch.next().await else {
            return Ok(None);
        };
        message.map(Some).map_err(|e| jetstream_error("fetch", e))
    }

    /// One delivered message: a payload that is no job is terminated, a
    /// job whose result is already stored acknowledged again, any other
    /// evaluated, its result stored, then acknowledged.
    async fn serve_message(
        &self,
        message: Message,
        evaluate: &mut (dyn FnMut(&Job) -> Evaluation + Send),
        log: &mut (dyn FnMut(String) + Send),
    ) -> Result<(), DispatchError> {
        let delivery = message.info().map(|i| i.delivered as u64).unwrap_or(1);
        let job: Job = match serde_json::from_slice(&message.payload) {
            Ok(job) => job,
            Err(e) => {
                log(format!("dropped a job that is not one: {e}"));
                let _ = message.ack_with(AckKind::Term).await;
                return Ok(());
            }
        };
        // Stored and not acknowledged (the worker died in between):
        // nothing to do again.
        if matches!(self.opened.results.get(&job.id).await, Ok(Some(_))) {
            let _ = message.double_ack().await;
            return Ok(());
        }
        log(format!(
            "job {} (delivery {delivery}): {} started",
            job.id, job.task
        ));
        let evaluation = self.evaluate_job(&job, delivery, &message, evaluate);
        log(format!("job {}: {}", job.id, evaluation.outcome.summary()));
        if !self.store_result(&job, delivery, evaluation, log).await? {
            return Ok(());
        }
        message
            .double_ack()
            .await
            .map_err(|e| jetstream_error("acknowledge", e))
    }

    /// The job's evaluation: a failure once it has ended its worker in
    /// every allowed attempt, or when this worker's task definition is
    /// another than the job's or unknown; else `evaluate`'s.
    fn evaluate_job(
        &self,
        job: &Job,
        delivery: u64,
        message: &Message,
        evaluate: &mut (dyn FnMut(&Job) -> Evaluation + Send),
    ) -> Evaluation {
        if delivery > u64::from(self.options.attempts) {
            return self.failure(
                job,
                format!(
                    "the candidate's evaluation ended its worker {} times in a row (killed, crashed or lost); it is not run again",
                    delivery - 1
                ),
            );
        }
        match task_hash(&job.task) {
            Some(h) if h == job.task_hash => {
                // Alive while evaluating: the server waits for a
                // silent worker one ack wait, not the whole job.
                let alive = {
                    let message = message.clone();
                    let every = self.options.ack_wait / 3;
                    tokio::spawn(async move {
                        loop {
                            tokio::time::sleep(every).await;
                            let _ = message.ack_with(AckKind::Progress).await;
                        }
                    })
                };
                let e = tokio::task::block_in_place(|| evaluate(job));
                alive.abort();
                e
            }
            Some(h) => self.failure(
                job,
                format!(
                    "worker {} has task {} at definition {h}, the job was made for {}: run the same kevo build on the workers and the coordinator",
                    self.info.id, job.task, job.task_hash
                ),
            ),
            None => self.failure(
                job,
                format!(
                    "worker {} does not know task {} (task folders are not sent with jobs)",
                    self.info.id, job.task
                ),
            ),
        }
    }

    /// Store the job's result; whether to acknowledge the job (false when
    /// it was not stored: left unacknowledged, to be redelivered).
    async fn store_result(
        &self,
        job: &Job,
        delivery: u64,
        evaluation: Evaluation,
        log: &mut (dyn FnMut(String) + Send),
    ) -> Result<bool, DispatchError> {
        let result = JobResult {
            job: job.id.clone(),
            worker: self.info.id.clone(),
            delivery,
            evaluation,
        };
        // Written once, checked by the server: a result stored
        // meanwhile (a redelivery raced this one) is kept, and that is
        // the one the coordinator takes.
        match self
            .opened
            .results
            .put_once(&job.id, serde_json::to_vec(&result)?)
            .await
        {
            Ok(true) => {}
            Ok(false) => log(format!(
                "job {}: another delivery stored its result first; this one is dropped",
                job.id
            )),
            Err(e) => {
                // Not stored: left unacknowledged, to be redelivered.
                log(format!("job {}: result not stored ({e})", job.id));
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn failure(&self, job: &Job, message: String) -> Evaluation {
        Evaluation::without_sizes(
            &job.task,
            &self.info.device.name,
            self.info.backend,
            Outcome::RuntimeError {
                size: None,
                fault: None,
                message,
            },
            WallTimes::default(),
        )
    }
}
