//! Where candidates are evaluated: the run's local workers, one per device,
//! the remote workers of a NATS queue, or nowhere (the device as the run
//! recorded it, for commands that only write prompts).

use std::time::Duration;

use kevo_eval::{Candidate, Evaluation};
use kevo_tasks::Task;
use kevo_worker::Worker;

use super::base::Environment;
use super::error::EvolveError;
use crate::EvolveOptions;

/// Where a run's candidates are evaluated: its own isolated worker, or the
/// workers serving a NATS JetStream queue (`--nats`), which evaluate with
/// the run's settings on their device.
pub(super) enum EvaluationPool {
    /// One worker per local device (`--devices`), all of one device model.
    Local(Vec<Worker>),
    Remote(Box<RemoteRun>),
    /// No device: what the run recorded of its device when it was created.
    /// `kevo ask` and `kevo tell --defer` write prompts and keep answers on
    /// a host without the GPU; evaluating here is an error.
    Recorded(Box<RecordedDevice>),
}

/// A run's device, ceilings and sandbox as its provenance recorded them.
pub(super) struct RecordedDevice {
    pub(super) run: String,
    pub(super) device: kevo_backend::DeviceInfo,
    pub(super) ceilings: kevo_roofline::Ceilings,
    pub(super) sandbox: kevo_worker::kevo_sandbox::Status,
}

pub(super) struct RemoteRun {
    pub(super) remote: kevo_dispatch::RemoteEvaluator,
    /// What the run scores against: its declared ceilings, else the
    /// workers' own.
    pub(super) ceilings: kevo_roofline::Ceilings,
    pub(super) settings: serde_json::Value,
}

/// The devices of `--devices` (`all`, or indices or name substrings) as
/// selectors on `base`'s platform; empty `devices` is `base` itself.
/// `all` lists the devices of `backend`, which must be named.
pub fn device_selectors(
    backend: kevo_runtimes::BackendKind,
    base: &kevo_backend::DeviceSelector,
    devices: &[String],
) -> Result<Vec<kevo_backend::DeviceSelector>, String> {
    let selectors: Vec<kevo_backend::DeviceSelector> = match devices {
        [] => vec![base.clone()],
        [all] if all == "all" => {
            let kind = match backend {
                kevo_runtimes::BackendKind::Auto => {
                    return Err("`all` needs --backend cuda or --backend opencl".into());
                }
                k => k,
            };
            let listed = kevo_runtimes::list()
                .into_iter()
                .find(|(k, _)| *k == kind)
                .map(|(_, l)| l)
                .unwrap_or_else(|| Err(format!("{kind} is not built in")))
                .map_err(|e| format!("all: {e}"))?;
            listed
                .into_iter()
                .map(|(selector, _)| selector)
                .filter(|s| base.platform.is_none() || s.platform == base.platform)
                .collect()
        }
        some => some
            .iter()
            .map(|d| kevo_backend::DeviceSelector {
                platform: base.platform.clone(),
                device: Some(d.clone()),
            })
            .collect(),
    };
    if selectors.is_empty() {
        return Err("`all` found no device".into());
    }
    Ok(selectors)
}

/// Whether workers on devices of these `models` may serve one run: an
/// error when they differ and `mixed` was not asked for (times and scores
/// of different models do not compare), else a note to print when they
/// differ.
pub fn one_model(models: &[&str], mixed: bool) -> Result<Option<String>, String> {
    let mut distinct: Vec<&str> = Vec::new();
    for m in models {
        if !distinct.contains(m) {
            distinct.push(m);
        }
    }
    match (distinct.len(), mixed) {
        (0 | 1, _) => Ok(None),
        (_, false) => Err(format!(
            "they are devices of different models ({}); scores of different devices do not compare, so a run uses one model (--mixed-devices allows it)",
            distinct.join(", ")
        )),
        (_, true) => Ok(Some(format!(
            "--mixed-devices: this run evaluates on {}; each evaluation is scored against its own device's ceilings, so its fractions compare and its times do not",
            distinct.join(", ")
        ))),
    }
}

impl EvaluationPool {
    /// The run's local workers: one, or one per device of `--devices`, all
    /// of one device model (scores of different models do not compare)
    /// unless `--mixed-devices`.
    pub(super) fn local(
        options: &EvolveOptions,
        env: &Environment,
    ) -> Result<EvaluationPool, EvolveError> {
        let selectors = device_selectors(options.backend, &options.selector, &options.devices)
            .map_err(EvolveError::Devices)?;
        let mut workers: Vec<Worker> = Vec::with_capacity(selectors.len());
        for selector in selectors {
            let mut config = options.worker_config();
            config.selector = selector;
            let command = env.worker.clone();
            let worker = tokio::task::block_in_place(|| Worker::start(command, config))?;
            workers.push(worker);
        }
        let models: Vec<&str> = workers.iter().map(|w| w.device().name.as_str()).collect();
        if let Some(mixed) =
            one_model(&models, options.mixed_devices).map_err(EvolveError::Devices)?
        {
            eprintln!("kevo: {mixed}");
        }
        Ok(EvaluationPool::Local(workers))
    }

    pub(super) async fn remote(
        options: &EvolveOptions,
        nats: &crate::NatsOptions,
    ) -> Result<EvaluationPool, EvolveError> {
        if options.profile || options.profile_every || !options.sanitize_winner.is_empty() {
            return Err(EvolveError::Dispatch(
                "--profile, --profile-every and --sanitize-winner need the device on this host; a run with --nats evaluates on remote workers".into(),
            ));
        }
        let namespace =
            kevo_dispatch::Namespace::new(&nats.namespace).map_err(EvolveError::Dispatch)?;
        let remote = kevo_dispatch::RemoteEvaluator::connect(
            &nats.url,
            &namespace,
            options.backend.concrete(),
            options.selector.device.as_deref(),
        )
        .await
        .map_err(|e| EvolveError::Dispatch(e.to_string()))?;
        let ceilings = match options.declared_ceilings {
            Some(d) => d.ceilings(),
            None => remote.worker().ceilings.clone(),
        };
        let settings = serde_json::to_value(options.worker_config()).map_err(|source| {
            EvolveError::Serialize {
                what: "the evaluation settings",
                source,
            }
        })?;
        Ok(EvaluationPool::Remote(Box::new(RemoteRun {
            remote,
            ceilings,
            settings,
        })))
    }

    /// The device `run` recorded in its stored settings (`config`), without
    /// starting it.
    pub(super) fn recorded(
        run: &str,
        config: &serde_json::Value,
    ) -> Result<EvaluationPool, EvolveError> {
        fn read<T: serde::de::DeserializeOwned>(
            run: &str,
            config: &serde_json::Value,
            path: &str,
        ) -> Result<Option<T>, EvolveError> {
            let Some(value) = config.pointer(path) else {
                return Ok(None);
            };
            serde_json::from_value(value.clone())
                .map(Some)
                .map_err(|e| EvolveError::RecordedDevice {
                    run: run.to_string(),
                    reason: format!("`{path}`: {e}"),
                })
        }
        let missing = |path: &str| EvolveError::RecordedDevice {
            run: run.to_string(),
            reason: format!("its settings have no `{path}`"),
        };
        let device = read(run, config, "/provenance/device")?
            .ok_or_else(|| missing("/provenance/device"))?;
        let ceilings = read(run, config, "/provenance/ceilings")?
            .ok_or_else(|| missing("/provenance/ceilings"))?;
        let sandbox = read(run, config, "/sandbox_in_force")?.unwrap_or_default();
        Ok(EvaluationPool::Recorded(Box::new(RecordedDevice {
            run: run.to_string(),
            device,
            ceilings,
            sandbox,
        })))
    }

    /// Each local worker's device name and ceilings; the remote worker's
    /// for a run over NATS.
    pub(super) fn devices(&self) -> Vec<serde_json::Value> {
        let entry = |d: &kevo_backend::DeviceInfo, c: &kevo_roofline::Ceilings| serde_json::json!({"name": d.name, "ceilings": c});
        match self {
            EvaluationPool::Local(w) => w.iter().map(|w| entry(w.device(), w.ceilings())).collect(),
            EvaluationPool::Remote(r) => vec![entry(&r.remote.worker().device, &r.ceilings)],
            EvaluationPool::Recorded(r) => vec![entry(&r.device, &r.ceilings)],
        }
    }

    pub(super) fn device(&self) -> &kevo_backend::DeviceInfo {
        match self {
            EvaluationPool::Local(w) => w[0].device(),
            EvaluationPool::Remote(r) => &r.remote.worker().device,
            EvaluationPool::Recorded(r) => &r.device,
        }
    }

    pub(super) fn ceilings(&self) -> &kevo_roofline::Ceilings {
        match self {
            EvaluationPool::Local(w) => w[0].ceilings(),
            EvaluationPool::Remote(r) => &r.ceilings,
            EvaluationPool::Recorded(r) => &r.ceilings,
        }
    }

    pub(super) fn sandbox(&self) -> &kevo_worker::kevo_sandbox::Status {
        match self {
            EvaluationPool::Local(w) => w[0].sandbox(),
            EvaluationPool::Remote(r) => &r.remote.worker().sandbox,
            EvaluationPool::Recorded(r) => &r.sandbox,
        }
    }

    /// Evaluations that can run at once: the local workers, or (remote)
    /// as many as the queue's workers take.
    pub(super) fn parallel(&self) -> usize {
        match self {
            EvaluationPool::Local(w) => w.len(),
            EvaluationPool::Remote(_) => usize::MAX,
            EvaluationPool::Recorded(_) => 1,
        }
    }

    /// Several candidates evaluated at once, each on the next free worker;
    /// the results in `candidates` order.
    pub(super) fn evaluate_many(
        &mut self,
        task: &Task,
        candidates: &[&Candidate],
        sizes: &[kevo_tasks::Size],
        timeout: Duration,
    ) -> Result<Vec<Evaluation>, EvolveError> {
        match self {
            EvaluationPool::Local(workers) => Ok(tokio::task::block_in_place(|| {
                let next = std::sync::atomic::AtomicUsize::new(0);
                let results: Vec<std::sync::Mutex<Option<Evaluation>>> = candidates
                    .iter()
                    .map(|_| std::sync::Mutex::new(None))
                    .collect();
                std::thread::scope(|scope| {
                    for w in workers.iter_mut() {
                        let (next, results) = (&next, &results);
                        scope.spawn(move || {
                            loop {
                                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let Some(candidate) = candidates.get(i) else {
                                    break;
                                };
                                let e = w.evaluate_candidate(task, candidate, sizes, timeout);
                                *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                            }
                        });
                    }
                });
                results
                    .into_iter()
                    .map(|r| {
                        r.into_inner()
                            .unwrap_or_else(|p| p.into_inner())
                            .expect("every source was taken by a worker")
                    })
                    .collect()
            })),
            EvaluationPool::Remote(r) => tokio::task::block_in_place(|| {
                let (remote, settings) = (&r.remote, &r.settings);
                tokio::runtime::Handle::current().block_on(async {
                    let jobs = candidates.iter().map(|candidate| async move {
                        remote
                            .evaluate(
                                &kevo_dispatch::Request {
                                    task: task.name(),
                                    task_hash: task.content_hash(),
                                    candidate,
                                    sizes,
                                    timeout,
                                    settings,
                                },
                                &mut |line| eprintln!("kevo: {line}"),
                            )
                            .await
                    });
                    futures::future::join_all(jobs)
                        .await
                        .into_iter()
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .map_err(|e| EvolveError::Dispatch(e.to_string())),
            EvaluationPool::Recorded(r) => Err(r.refusal()),
        }
    }

    /// One evaluation; an error only when the queue cannot be reached
    /// (a failing candidate is an outcome, never an error).
    pub(super) fn evaluate(
        &mut self,
        task: &Task,
        candidate: &Candidate,
        sizes: &[kevo_tasks::Size],
        timeout: Duration,
    ) -> Result<Evaluation, EvolveError> {
        match self {
            EvaluationPool::Local(w) => Ok(tokio::task::block_in_place(|| {
                w[0].evaluate_candidate(task, candidate, sizes, timeout)
            })),
            EvaluationPool::Remote(_) => {
                let mut one = self.evaluate_many(task, &[candidate], sizes, timeout)?;
                Ok(one.pop().expect("one candidate, one evaluation"))
            }
            EvaluationPool::Recorded(r) => Err(r.refusal()),
        }
    }
}

impl RecordedDevice {
    fn refusal(&self) -> EvolveError {
        EvolveError::NoDeviceHere {
            run: self.run.clone(),
            device: self.device.name.clone(),
        }
    }
}

#[cfg(test)]
mod device_tests {
    use super::*;

    #[test]
    fn devices_of_one_model_serve_a_run_and_of_several_only_when_asked() {
        assert_eq!(one_model(&["H100", "H100"], false), Ok(None));
        let refused = one_model(&["H100", "A100", "H100"], false).unwrap_err();
        assert!(refused.contains("H100, A100"), "{refused}");
        assert!(refused.contains("--mixed-devices"), "{refused}");
        let note = one_model(&["H100", "A100"], true).unwrap().unwrap();
        assert!(note.contains("own device's ceilings"), "{note}");
    }

    #[test]
    fn a_run_without_a_recorded_device_says_what_is_missing() {
        let err = match EvaluationPool::recorded("r1", &serde_json::json!({})) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a device was read from empty settings"),
        };
        assert!(
            err.contains("r1") && err.contains("/provenance/device"),
            "{err}"
        );
        let config = serde_json::json!({"provenance": {"device": {"name": 7}}});
        let err = match EvaluationPool::recorded("r1", &config) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a malformed device was read"),
        };
        assert!(err.contains("unreadable"), "{err}");
    }

    #[test]
    fn devices_name_selectors_on_the_runs_platform() {
        let base = kevo_backend::DeviceSelector {
            platform: Some("Portable".into()),
            device: Some("7".into()),
        };
        let none = device_selectors(kevo_runtimes::BackendKind::Opencl, &base, &[]).unwrap();
        assert_eq!(none, vec![base.clone()]);
        let two = device_selectors(
            kevo_runtimes::BackendKind::Opencl,
            &base,
            &["0".into(), "1".into()],
        )
        .unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(two[1].device.as_deref(), Some("1"));
        assert_eq!(two[1].platform.as_deref(), Some("Portable"));
        let auto = device_selectors(kevo_runtimes::BackendKind::Auto, &base, &["all".into()]);
        assert!(auto.unwrap_err().contains("--backend"));
    }
}
