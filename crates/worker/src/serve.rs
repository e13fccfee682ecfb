//! The worker side: open the device once, then evaluate requests until
//! stdin closes. A panic while evaluating becomes a runtime-error outcome;
//! a crash of the process is handled by the coordinator.

use std::io::{BufRead, Write};
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use kevo_backend::{Backend, DeviceInfo};
use kevo_eval::{Evaluation, Evaluator, Outcome, Stage, VendorBaseline, WallTimes};
use kevo_roofline::{Ceilings, Measurement};
use kevo_tasks::{Size, Task};

use crate::limits::{self, Limits};
use crate::protocol::{Reply, Request, SelfTest, TaskPackage, WorkerConfig};

/// Write `reply` as one line of JSON and flush it.
fn send(out: &mut impl Write, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_string(reply).map_err(std::io::Error::other)?;
    line.push('\n');
    out.write_all(line.as_bytes())?;
    out.flush()
}

/// Run a worker on `input`/`output` (stdin/stdout in the real process).
/// Returns when the input closes.
pub fn serve(
    config: WorkerConfig,
    mut input: impl BufRead,
    mut output: impl Write,
) -> std::io::Result<()> {
    let start = Instant::now();
    // As the coordinator set it: drivers add their own once opened.
    let environment: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    let opened = match open_device(&config) {
        Ok(opened) => opened,
        Err(message) => return send(&mut output, &Reply::Fatal { message }),
    };
    let self_test = self_test(&config, environment);
    let device = opened.backend.info().clone();
    let limits = config.limits.clone();
    let evaluator = Evaluator::new(opened.backend, opened.ceilings.clone(), config.eval);
    limits::apply_worker_limit(&limits);
    send(
        &mut output,
        &Reply::Ready {
            device: Box::new(device.clone()),
            ceilings: Box::new(opened.ceilings),
            startup_s: start.elapsed().as_secs_f64(),
            sandbox: opened.sandbox,
            measured: opened.measured.map(Box::new),
            self_test,
        },
    )?;
    let mut session = Session {
        evaluator,
        device,
        limits,
        refused_definitions: Vec::new(),
    };
    while let Some(read) = Request::read_from(&mut input)? {
        let request = match read {
            Ok(r) => r,
            Err(e) => {
                eprintln!("kevo worker: ignoring a malformed request: {e}");
                continue;
            }
        };
        if !session.handle(request, &mut output)? {
            return Ok(());
        }
    }
    Ok(())
}

/// The device as a worker evaluates on it, opened inside the sandbox.
struct OpenedDevice {
    backend: Box<dyn Backend>,
    /// The layers of confinement in force.
    sandbox: kevo_sandbox::Status,
    ceilings: Ceilings,
    /// Ceilings measured now, for the coordinator to cache.
    measured: Option<Measurement>,
}

/// Enter the sandbox, open the device, add the seccomp layer and find the
/// roofline ceilings; an error is the message of the `Fatal` reply.
fn open_device(config: &WorkerConfig) -> Result<OpenedDevice, String> {
    // Before any device is opened: user namespaces need a single-threaded
    // process, and Landlock rules bind threads created after them.
    let sandbox = kevo_sandbox::enter(&config.sandbox).map_err(|e| e.to_string())?;
    let open_options = kevo_runtimes::OpenOptions {
        triton_python: config.triton_python.clone(),
        scratch: config.sandbox.scratch.clone(),
        ..config.timing.open_options()
    };
    let mut backend = kevo_runtimes::open(config.backend, &config.selector, open_options)
        .map_err(|e| e.to_string())?;
    // The seccomp layer once the device is open: no candidate has run.
    // A helper the backend started while opening is restarted under it.
    let sandbox = match kevo_sandbox::filter_syscalls(&config.sandbox, sandbox) {
        Ok(status) => {
            backend.restart_helpers();
            status
        }
        Err(e) => return Err(e.to_string()),
    };
    let found = match &config.declared_ceilings {
        Some(declared) => Ok((declared.ceilings(), None)),
        None => {
            let key = kevo_roofline::cache_key(backend.info());
            let known = config.known_measurements.get(&key).cloned();
            kevo_roofline::ceilings_with(backend.as_mut(), known)
        }
    };
    let (ceilings, measured) =
        found.map_err(|e| format!("cannot determine the device's roofline ceilings: {e}"))?;
    Ok(OpenedDevice {
        backend,
        sandbox,
        ceilings,
        measured,
    })
}

/// What the worker finds from inside its confinement, for tests that ask
/// (files to read, sockets to connect to); `environment` is the variables
/// as the coordinator set them. None when nothing was asked.
fn self_test(config: &WorkerConfig, environment: Vec<String>) -> Option<SelfTest> {
    let probes = !config.self_test_reads.is_empty() || !config.self_test_connects.is_empty();
    probes.then(|| SelfTest {
        reads: config
            .self_test_reads
            .iter()
            .map(|p| {
                (
                    p.clone(),
                    std::fs::read(p).map(|b| b.len()).map_err(|e| e.to_string()),
                )
            })
            .collect(),
        environment,
        connects: {
            // A Triton worker's child is the helper's interpreter.
            let python = (config.backend == kevo_runtimes::BackendKind::Triton)
                .then_some(config.triton_python.as_deref())
                .flatten();
            config
                .self_test_connects
                .iter()
                .map(|p| crate::self_test::connect(p, python))
                .collect()
        },
    })
}

/// What answering requests needs once the device is open.
struct Session {
    evaluator: Evaluator<Box<dyn Backend>>,
    device: DeviceInfo,
    limits: Limits,
    /// Why a task folder sent to this worker was not defined, for the
    /// evaluations that name it.
    refused_definitions: Vec<String>,
}

impl Session {
    /// Answer one request; false when the worker must exit after it.
    fn handle(&mut self, request: Request, output: &mut impl Write) -> std::io::Result<bool> {
        match request {
            Request::Define { package } => {
                self.define_task(*package);
                Ok(true)
            }
            Request::Baseline {
                id,
                nonce,
                task,
                task_hash,
                sizes,
            } => {
                let baseline =
                    self.baseline(id, &nonce, &task, task_hash.as_deref(), &sizes, output);
                let restart = self.evaluator.backend().is_poisoned();
                let reply = Reply::Baseline {
                    id,
                    nonce,
                    baseline: Box::new(baseline),
                    restart,
                };
                answer(output, &reply, restart)
            }
            Request::Evaluate {
                id,
                nonce,
                task,
                task_hash,
                candidate,
                sizes,
                verify_index,
            } => {
                let refused = candidate.refusal(self.device.dialect);
                let mut evaluation = match (task_for(&task, task_hash.as_deref()), refused) {
                    (Err(message), _) => failed(&task, &self.device, self.with_refusals(message)),
                    (Ok(_), Some(message)) => failed(&task, &self.device, message),
                    (Ok(task_ref), None) => {
                        if let Some(index) = verify_index {
                            self.evaluator.verify_next_on(index);
                        }
                        self.evaluate(id, &nonce, task_ref, &candidate.source, &sizes, output)
                            .unwrap_or_else(|panic| {
                                failed(
                                    &task,
                                    &self.device,
                                    format!("internal error while evaluating: {panic}"),
                                )
                            })
                    }
                };
                evaluation.source_sha = Some(candidate.sha);
                let restart = self.evaluator.backend().is_poisoned();
                let reply = Reply::Result {
                    id,
                    nonce,
                    evaluation: Box::new(evaluation),
                    restart,
                };
                answer(output, &reply, restart)
            }
        }
    }

    /// Define the task folder the coordinator sent; why it was refused is
    /// logged and kept for the evaluations that name it.
    fn define_task(&mut self, package: TaskPackage) {
        if let Err(message) = define(package) {
            eprintln!("kevo worker: {message}");
            self.refused_definitions.push(message);
        }
    }

    /// The vendor library's baseline of `task` at `sizes`, a `Progress`
    /// reply per size; a task this worker cannot run, or a panic, is a
    /// failed baseline.
    fn baseline(
        &mut self,
        id: u64,
        nonce: &str,
        task: &str,
        task_hash: Option<&str>,
        sizes: &[Size],
        output: &mut impl Write,
    ) -> VendorBaseline {
        let task_ref = match task_for(task, task_hash) {
            Err(message) => {
                return VendorBaseline::Failed {
                    library: None,
                    message,
                };
            }
            Ok(task_ref) => task_ref,
        };
        let mut progress = |size: &str| {
            let reply = Reply::Progress {
                id,
                nonce: nonce.to_string(),
                size: size.to_string(),
            };
            let _ = send(output, &reply);
        };
        std::panic::catch_unwind(AssertUnwindSafe(|| {
            self.evaluator
                .vendor_baseline_observed(task_ref, sizes, &mut progress)
        }))
        .unwrap_or_else(|panic| VendorBaseline::Failed {
            library: None,
            message: format!(
                "internal error while running the vendor library: {}",
                panic_text(&*panic)
            ),
        })
    }

    /// Evaluate `source` as `task` at `sizes`, replying `Compiling` and a
    /// `Progress` per size as it goes, the compile-time limits held only
    /// while compiling. A panic comes back as its message.
    fn evaluate(
        &mut self,
        id: u64,
        nonce: &str,
        task: &Task,
        source: &str,
        sizes: &[Size],
        output: &mut impl Write,
    ) -> Result<Evaluation, String> {
        let limits = &self.limits;
        let mut compiling = false;
        let mut progress = |stage: Stage<'_>| {
            let reply = match stage {
                Stage::Compile => {
                    compiling = limits::enter_compile(limits);
                    Reply::Compiling {
                        id,
                        nonce: nonce.to_string(),
                    }
                }
                Stage::Size(size) => {
                    if std::mem::take(&mut compiling) {
                        limits::leave_compile(limits);
                    }
                    Reply::Progress {
                        id,
                        nonce: nonce.to_string(),
                        size: size.to_string(),
                    }
                }
            };
            let _ = send(output, &reply);
        };
        let evaluator = &mut self.evaluator;
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            evaluator.evaluate_observed(task, source, sizes, &mut progress)
        }));
        limits::leave_compile(limits);
        result.map_err(|panic| panic_text(&*panic))
    }

    /// `message` followed by why each task folder sent was not defined.
    fn with_refusals(&self, mut message: String) -> String {
        for refused in &self.refused_definitions {
            message.push_str("; ");
            message.push_str(refused);
        }
        message
    }
}

/// Send the answer to a request; false when the worker must exit after it
/// (`restart`: the device is unusable in this process).
fn answer(out: &mut impl Write, reply: &Reply, restart: bool) -> std::io::Result<bool> {
    send(out, reply)?;
    if restart {
        eprintln!(
            "kevo worker: the device is unusable after a fault; exiting so a fresh worker takes over"
        );
    }
    Ok(!restart)
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

/// Register a task folder the coordinator sent (built from its files,
/// never from the disk), and add the expected outputs it carries.
fn define(package: crate::protocol::TaskPackage) -> Result<(), String> {
    if let Some(files) = &package.files {
        let files: kevo_tasks::folder::FolderFiles = files
            .iter()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect();
        let folder = kevo_tasks::folder::FolderTask::from_files(
            std::path::Path::new(&package.root),
            std::sync::Arc::new(files),
        )
        .map_err(|e| e.to_string())?;
        let task = folder.into_shipped_task();
        if task.content_hash() != package.hash {
            return Err(format!(
                "the task folder {} hashes to {} here, {} on the coordinator",
                package.root,
                task.content_hash(),
                package.hash
            ));
        }
        kevo_tasks::register(task).map_err(|e| e.to_string())?;
    }
    let task = task_for(&package.name, Some(&package.hash))?;
    let folder = task
        .folder()
        .ok_or_else(|| format!("`{}` is a built-in task, not a folder", package.name))?;
    for entry in package.expected {
        folder.add_expected(
            &entry.size,
            &entry.fingerprint,
            entry.outputs.into_iter().map(|b| b.0).collect(),
        );
    }
    Ok(())
}

/// The task a request names, if this worker's version of it is the
/// coordinator's (`hash`, when given).
fn task_for(name: &str, hash: Option<&str>) -> Result<&'static kevo_tasks::Task, String> {
    let task = kevo_tasks::by_name(name).map_err(|e| e.to_string())?;
    match hash {
        Some(h) if h != task.content_hash() => Err(format!(
            "this worker's task `{name}` is version {}, the coordinator's is {h}: they are \
             different problems; run a worker built from the same kevo",
            task.content_hash()
        )),
        _ => Ok(task),
    }
}

fn failed(task: &str, device: &kevo_backend::DeviceInfo, message: String) -> Evaluation {
    Evaluation::without_sizes(
        task,
        &device.name,
        device.backend,
        Outcome::RuntimeError {
            size: None,
            fault: None,
            message,
        },
        WallTimes::default(),
    )
}

#[cfg(test)]
mod tests {
    use super::task_for;

    #[test]
    fn a_task_of_another_version_is_refused_with_both_versions() {
        let saxpy = kevo_tasks::by_name("saxpy").unwrap();
        assert!(task_for("saxpy", Some(saxpy.content_hash())).is_ok());
        assert!(task_for("saxpy", None).is_ok());
        let err = task_for("saxpy", Some("0123456789abcdef")).unwrap_err();
        assert!(
            err.contains("0123456789abcdef") && err.contains(saxpy.content_hash()),
            "{err}"
        );
        let err = task_for("nope", None).unwrap_err();
        assert!(err.contains("unknown task `nope`"), "{err}");
    }
}
