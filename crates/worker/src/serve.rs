//! The worker side: open the device once, then evaluate requests until
//! stdin closes. A panic while evaluating becomes a runtime-error outcome;
//! a crash of the process is handled by the coordinator.

use std::io::{BufRead, Write};
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use kevo_eval::{Evaluation, Evaluator, Outcome, Stage, VendorBaseline, WallTimes};

use crate::limits;
use crate::protocol::{Reply, Request, WorkerConfig};

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
    // Before any device is opened: user namespaces need a single-threaded
    // process, and Landlock rules bind threads created after them.
    let sandbox = match kevo_sandbox::enter(&config.sandbox) {
        Ok(status) => status,
        Err(e) => {
            return send(
                &mut output,
                &Reply::Fatal {
                    message: e.to_string(),
                },
            );
        }
    };
    let open_options = kevo_runtimes::OpenOptions {
        triton_python: config.triton_python.clone(),
        scratch: config.sandbox.scratch.clone(),
        ..config.timing.open_options()
    };
    let backend = match kevo_runtimes::open(config.backend, &config.selector, open_options) {
        Ok(b) => b,
        Err(e) => {
            return send(
                &mut output,
                &Reply::Fatal {
                    message: e.to_string(),
                },
            );
        }
    };
    let mut backend = backend;
    // The seccomp layer once the device is open: no candidate has run.
    // A helper the backend started while opening is restarted under it.
    let sandbox = match kevo_sandbox::filter_syscalls(&config.sandbox, sandbox) {
        Ok(status) => {
            backend.restart_helpers();
            status
        }
        Err(e) => {
            return send(
                &mut output,
                &Reply::Fatal {
                    message: e.to_string(),
                },
            );
        }
    };
    let found = match config.declared_ceilings {
        Some(declared) => Ok((declared.ceilings(), None)),
        None => {
            let key = kevo_roofline::cache_key(backend.info());
            let known = config.known_measurements.get(&key).cloned();
            kevo_roofline::ceilings_with(backend.as_mut(), known)
        }
    };
    let (ceilings, measured) = match found {
        Ok(found) => found,
        Err(e) => {
            return send(
                &mut output,
                &Reply::Fatal {
                    message: format!("cannot determine the device's roofline ceilings: {e}"),
                },
            );
        }
    };
    let probes = !config.self_test_reads.is_empty() || !config.self_test_connects.is_empty();
    let self_test = probes.then(|| crate::protocol::SelfTest {
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
    });
    let device = backend.info().clone();
    let limits = config.limits.clone();
    let mut evaluator = Evaluator::new(backend, ceilings.clone(), config.eval);
    limits::apply_worker_limit(&limits);
    send(
        &mut output,
        &Reply::Ready {
            device: Box::new(device.clone()),
            ceilings: Box::new(ceilings),
            startup_s: start.elapsed().as_secs_f64(),
            sandbox,
            measured: measured.map(Box::new),
            self_test,
        },
    )?;
    // Why a task folder sent to this worker was not defined, for the
    // evaluations that name it.
    let mut refused_definitions: Vec<String> = Vec::new();
    while let Some(read) = Request::read_from(&mut input)? {
        let request = match read {
            Ok(r) => r,
            Err(e) => {
                eprintln!("kevo worker: ignoring a malformed request: {e}");
                continue;
            }
        };
        match request {
            Request::Define { package } => {
                if let Err(message) = define(*package) {
                    eprintln!("kevo worker: {message}");
                    refused_definitions.push(message);
                }
            }
            Request::Baseline {
                id,
                nonce,
                task,
                task_hash,
                sizes,
            } => {
                let baseline = match task_for(&task, task_hash.as_deref()) {
                    Err(message) => VendorBaseline::Failed {
                        library: None,
                        message,
                    },
                    Ok(task_ref) => {
                        let mut progress = |size: &str| {
                            let reply = Reply::Progress {
                                id,
                                nonce: nonce.clone(),
                                size: size.to_string(),
                            };
                            let _ = send(&mut output, &reply);
                        };
                        std::panic::catch_unwind(AssertUnwindSafe(|| {
                            evaluator.vendor_baseline_observed(task_ref, &sizes, &mut progress)
                        }))
                        .unwrap_or_else(|panic| VendorBaseline::Failed {
                            library: None,
                            message: format!(
                                "internal error while running the vendor library: {}",
                                panic_text(&*panic)
                            ),
                        })
                    }
                };
                let restart = evaluator.backend().is_poisoned();
                let reply = Reply::Baseline {
                    id,
                    nonce,
                    baseline: Box::new(baseline),
                    restart,
                };
                if !answer(&mut output, &reply, restart)? {
                    return Ok(());
                }
            }
            Request::Evaluate {
                id,
                nonce,
                task,
                task_hash,
                source,
                sizes,
                verify_index,
            } => {
                let evaluation = match task_for(&task, task_hash.as_deref()) {
                    Err(mut message) => {
                        for refused in &refused_definitions {
                            message.push_str("; ");
                            message.push_str(refused);
                        }
                        failed(&task, &device, message)
                    }
                    Ok(task_ref) => {
                        let mut compiling = false;
                        let mut progress = |stage: Stage<'_>| {
                            let reply = match stage {
                                Stage::Compile => {
                                    compiling = limits::enter_compile(&limits);
                                    Reply::Compiling {
                                        id,
                                        nonce: nonce.clone(),
                                    }
                                }
                                Stage::Size(size) => {
                                    if std::mem::take(&mut compiling) {
                                        limits::leave_compile(&limits);
                                    }
                                    Reply::Progress {
                                        id,
                                        nonce: nonce.clone(),
                                        size: size.to_string(),
                                    }
                                }
                            };
                            let _ = send(&mut output, &reply);
                        };
                        if let Some(index) = verify_index {
                            evaluator.verify_next_on(index);
                        }
                        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                            evaluator.evaluate_observed(task_ref, &source, &sizes, &mut progress)
                        }));
                        limits::leave_compile(&limits);
                        result.unwrap_or_else(|panic| {
                            failed(
                                &task,
                                &device,
                                format!("internal error while evaluating: {}", panic_text(&*panic)),
                            )
                        })
                    }
                };
                let restart = evaluator.backend().is_poisoned();
                let reply = Reply::Result {
                    id,
                    nonce,
                    evaluation: Box::new(evaluation),
                    restart,
                };
                if !answer(&mut output, &reply, restart)? {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
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
        &device.backend,
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
