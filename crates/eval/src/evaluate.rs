//! One evaluation: the source checked and compiled, the module's state and
//! kernels checked, then every size run in order by the per-size protocol
//! (`size_run`) until one is wrong; then the score, and any size faster
//! than the hardware allows judged again against its ceiling measured anew.

use std::time::Instant;

use kevo_backend::{Backend, BackendError, KernelId, ModuleId};
use kevo_tasks::{BlockDeclarations, Size, Task};

use crate::size_run::Candidate;
use crate::{
    Evaluation, Evaluator, KernelResources, Outcome, SizeResult, WallTimes, geometric_mean,
    placement, source_rules,
};

impl<B: Backend> Evaluator<B> {
    /// Evaluate `source` for `task` at `sizes`, in order.
    pub fn evaluate(&mut self, task: &Task, source: &str, sizes: &[Size]) -> Evaluation {
        self.evaluate_observed(task, source, sizes, &mut |_| {})
    }

    /// Like [`Evaluator::evaluate`], calling `on_stage` before compilation
    /// and before each size, so a supervisor can bound the compile on its
    /// own and knows where a hung candidate stopped.
    pub fn evaluate_observed(
        &mut self,
        task: &Task,
        source: &str,
        sizes: &[Size],
        on_stage: &mut dyn FnMut(Stage<'_>),
    ) -> Evaluation {
        let start = Instant::now();
        let mut wall = WallTimes::default();
        self.settle_ahead(&mut wall);
        let mut results = Vec::new();
        let mut kernels = Vec::new();
        let outcome = self.evaluate_inner(
            task,
            source,
            sizes,
            &mut wall,
            (&mut results, &mut kernels),
            on_stage,
        );
        wall.total_s = start.elapsed().as_secs_f64();
        self.evaluations += 1;
        // Chosen for this evaluation only, also where it failed before
        // verifying anything.
        self.next_verify_index = None;
        let info = self.backend.info();
        Evaluation {
            task: task.name().to_string(),
            device: info.name.clone(),
            backend: info.backend,
            outcome,
            sizes: results,
            wall,
            kernels,
            source_sha: None,
        }
    }

    /// The evaluation's steps in order, each of which may end it with its
    /// outcome: the source's checks, the compile, the module's kernels,
    /// then every size. The module is released whatever happened.
    fn evaluate_inner(
        &mut self,
        task: &Task,
        source: &str,
        sizes: &[Size],
        wall: &mut WallTimes,
        (results, resources): (&mut Vec<SizeResult>, &mut Vec<KernelResources>),
        on_stage: &mut dyn FnMut(Stage<'_>),
    ) -> Outcome {
        let (prepared, declared) = match self.check_source(task, source) {
            Ok(checked) => checked,
            Err(outcome) => return outcome,
        };
        let module = match self.compile_candidate(task, &prepared, wall, on_stage) {
            Ok(module) => module,
            Err(outcome) => return outcome,
        };
        let outcome = match self.load_kernels(task, module, resources) {
            Ok((kernels, scrub)) => {
                let candidate = Candidate {
                    task,
                    module,
                    kernels: &kernels,
                    declared: &declared,
                    seed_index: self.next_verify_index.unwrap_or(self.evaluations)
                        % self.config.verify_seed_pool.max(1) as u64,
                    scrub,
                };
                // The device is about to work: the next evaluation's inputs
                // are prepared meanwhile.
                self.prepare_next(task, sizes);
                self.run_sizes(&candidate, sizes, wall, (results, resources), on_stage)
            }
            Err(outcome) => outcome,
        };
        self.backend.release_module(module);
        outcome
    }

    /// The source as the compiler gets it and the blocks it declares, or
    /// the outcome that refuses it before any compile: empty, not plain
    /// text, a directive that names a file, a bad block declaration.
    fn check_source(
        &self,
        task: &Task,
        source: &str,
    ) -> Result<(String, BlockDeclarations), Outcome> {
        if source.trim().is_empty() {
            return Err(Outcome::NoCode {
                reason: "the kernel source is empty".into(),
            });
        }
        let extension = self.backend.dialect().extension();
        if let Some(outcome) = source_rejection(source, extension) {
            return Err(outcome);
        }
        let prepared = match source_rules::prepare(source, self.backend.dialect()) {
            Ok(p) => p,
            Err(r) => {
                return Err(Outcome::CompileError {
                    message: format!("line {}: {}", r.line, r.reason),
                    diagnostics: kevo_backend::CompileDiagnostics::from_log(format!(
                        "candidate.{extension}:{}:1: error: {}",
                        r.line, r.reason
                    )),
                });
            }
        };
        let declared = match BlockDeclarations::parse(source, task.kernel_names()) {
            Ok(d) => d,
            Err(e) => {
                let log = format!("candidate.{extension}:{}:1: error: {e}", e.line);
                return Err(Outcome::CompileError {
                    message: e.to_string(),
                    diagnostics: kevo_backend::CompileDiagnostics::from_log(log),
                });
            }
        };
        Ok((prepared, declared))
    }

    /// Compile the checked source, once the utility kernels are ready, its
    /// wall time added to `wall`; a compile error is reported against the
    /// candidate's own file only.
    fn compile_candidate(
        &mut self,
        task: &Task,
        prepared: &str,
        wall: &mut WallTimes,
        on_stage: &mut dyn FnMut(Stage<'_>),
    ) -> Result<ModuleId, Outcome> {
        let extension = self.backend.dialect().extension();
        if let Err(e) = self.utility() {
            return Err(runtime_error(None, e));
        }
        // A compiler that specializes per signature (Triton) gets the
        // task's typed entry points; the others need none.
        let entry_points = if self.backend.dialect() == kevo_backend::Dialect::Triton {
            match task.entry_points() {
                Ok(e) => e,
                Err(e) => {
                    return Err(runtime_error(
                        None,
                        BackendError::Runtime(format!("the task's entry points: {e}")),
                    ));
                }
            }
        } else {
            Vec::new()
        };
        on_stage(Stage::Compile);
        let t = Instant::now();
        let compiled =
            self.backend
                .compile_entry_points(prepared, &self.config.compile, &entry_points);
        wall.compile_s += t.elapsed().as_secs_f64();
        match compiled {
            Ok(m) => Ok(m),
            Err(BackendError::Compile(diagnostics)) => {
                let diagnostics = diagnostics.confined_to(&format!("candidate.{extension}"));
                Err(Outcome::CompileError {
                    message: diagnostics.summary(),
                    diagnostics,
                })
            }
            Err(e) => Err(runtime_error(None, e)),
        }
    }

    /// The module's kernels, once its module-scope state is allowed: each
    /// entry point looked up and its resources recorded in `resources`;
    /// also whether shared or local memory is to be scrubbed after every
    /// run.
    fn load_kernels(
        &mut self,
        task: &Task,
        module: ModuleId,
        resources: &mut Vec<KernelResources>,
    ) -> Result<(Vec<KernelId>, bool), Outcome> {
        self.refuse_module_state(module)?;
        let kernels = self.lookup_kernels(task, module)?;
        let scrub = self.record_resources(task, &kernels, resources)?;
        Ok((kernels, scrub))
    }

    /// Writable module-scope state that kevo cannot restore between runs
    /// is a compile error: state that survives from one run to the next
    /// could carry an answer over.
    fn refuse_module_state(&self, module: ModuleId) -> Result<(), Outcome> {
        let extension = self.backend.dialect().extension();
        match self.backend.module_info(module) {
            Ok(info) => {
                if let Some(bytes) = info.writable_global_bytes.filter(|&b| b > 0) {
                    let names = if info.unresettable_names.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", info.unresettable_names.join(", "))
                    };
                    let message = format!(
                        "the module declares {bytes} bytes of writable module-scope state ({}{names}) \
                             that kevo cannot restore between runs; state that survives from one \
                             run to the next is not allowed: keep everything in the buffers the \
                             task passes",
                        match self.backend.dialect() {
                            kevo_backend::Dialect::Cuda => "`__device__`/`__managed__` variables",
                            kevo_backend::Dialect::Triton => "global variables in the cubin",
                            _ => "program-scope `global` variables",
                        }
                    );
                    return Err(Outcome::CompileError {
                        diagnostics: kevo_backend::CompileDiagnostics::from_log(format!(
                            "candidate.{extension}:1:1: error: {message}"
                        )),
                        message,
                    });
                }
            }
            Err(e) => return Err(runtime_error(None, e)),
        }
        Ok(())
    }

    /// Each of the task's entry points in the module; one the source does
    /// not define is a compile error naming it.
    fn lookup_kernels(&mut self, task: &Task, module: ModuleId) -> Result<Vec<KernelId>, Outcome> {
        let mut kernels = Vec::new();
        for name in task.kernel_names() {
            match self.backend.kernel(module, name) {
                Ok(k) => kernels.push(k),
                Err(BackendError::MissingKernel { name }) => {
                    let message = format!("the source does not define the entry point `{name}`");
                    return Err(Outcome::CompileError {
                        diagnostics: kevo_backend::CompileDiagnostics::from_log(message.clone()),
                        message,
                    });
                }
                Err(e) => return Err(runtime_error(None, e)),
            }
        }
        Ok(kernels)
    }

    /// Each kernel's resources, pushed to `resources`; whether any kernel
    /// uses shared or local memory.
    fn record_resources(
        &self,
        task: &Task,
        kernels: &[KernelId],
        resources: &mut Vec<KernelResources>,
    ) -> Result<bool, Outcome> {
        // Shared/local memory is undefined at a launch's start but may
        // still hold a previous launch's values: overwrite it after every
        // run when the candidate uses any.
        let mut scrub = false;
        for (&k, name) in kernels.iter().zip(task.kernel_names()) {
            match self.backend.kernel_info(k) {
                Ok(info) => {
                    scrub |= info.static_shared_bytes.unwrap_or(0) > 0
                        || info.local_bytes_per_thread.unwrap_or(0) > 0;
                    resources.push(KernelResources {
                        name: name.clone(),
                        info,
                        occupancy: None,
                    });
                }
                Err(e) => return Err(runtime_error(None, e)),
            }
        }
        Ok(scrub)
    }

    /// Every size in order, the first wrong one (or one that fails to run)
    /// ending the evaluation; then the score, and whether a size ran faster
    /// than the hardware allows, its ceiling measured again first.
    fn run_sizes(
        &mut self,
        c: &Candidate<'_>,
        sizes: &[Size],
        wall: &mut WallTimes,
        (results, resources): (&mut Vec<SizeResult>, &mut Vec<KernelResources>),
        on_stage: &mut dyn FnMut(Stage<'_>),
    ) -> Outcome {
        for size in sizes {
            on_stage(Stage::Size(&size.label));
            match self.run_size(c, size, wall, resources) {
                Ok(result) => {
                    let ok = result.correct;
                    let failure = (!ok).then(|| Outcome::WrongResult {
                        size: size.label.clone(),
                        metric: result.metric.clone(),
                        value: result.error,
                        tolerance: result.tolerance,
                    });
                    results.push(result);
                    if let Some(f) = failure {
                        return f;
                    }
                }
                Err(e) => return runtime_error(Some(size.label.clone()), e),
            }
        }
        let score = geometric_mean(results.iter().map(|r| r.fraction));
        self.recheck_implausible(c.task, sizes, results);
        match results.iter().find_map(|r| {
            r.suspicious
                .as_ref()
                .map(|why| (r.label.clone(), why.clone()))
        }) {
            Some((size, reason)) => Outcome::Suspicious {
                size,
                reason,
                score,
            },
            None => Outcome::Correct { score },
        }
    }

    /// What the placement rules know of the device.
    pub(crate) fn device_facts(&self) -> placement::DeviceFacts {
        let info = self.backend.info();
        placement::DeviceFacts {
            driver_cache_bytes: info.cache_bytes,
            is_cpu: info.is_cpu,
        }
    }

    /// Before a size is called faster than the hardware, the ceiling it
    /// beat is measured again now, in this process, and the bound raised
    /// to it: a ceiling cached while the machine was busy (12.2 GB/s
    /// against 19.3 quiet on a 2-core VM) never condemns an honest kernel.
    /// A size that still beats the raised bound stays suspicious.
    fn recheck_implausible(&mut self, task: &Task, sizes: &[Size], results: &mut [SizeResult]) {
        let kind = task.ceiling();
        for r in results.iter_mut().filter(|r| r.suspicious.is_some()) {
            let Some(size) = sizes.iter().find(|s| s.label == r.label) else {
                continue;
            };
            let figure = task.plausibility_work(size) / r.time.median_s / 1e9;
            let facts = self.device_facts();
            let ws = r.working_set_bytes;
            let Some(first) = placement::suspicion(figure, kind, &self.bounds, ws, facts) else {
                r.suspicious = None;
                continue;
            };
            // A re-measurement that fails leaves the envelope's verdict.
            if let Ok(now) = kevo_roofline::remeasure(&mut self.backend, first.bound) {
                placement::raise(&mut self.bounds, first.bound, now);
            }
            r.suspicious = placement::suspicion(figure, kind, &self.bounds, ws, facts)
                .map(|s| format!("{} (its ceiling re-measured just now)", s.why));
        }
    }
}

/// The outcome of a failure to run (at `size`, once one was running),
/// with the fault's kind where it was a fault.
fn runtime_error(size: Option<String>, e: BackendError) -> Outcome {
    let fault = match &e {
        BackendError::Fault { kind, .. } => Some(*kind),
        _ => None,
    };
    Outcome::RuntimeError {
        size,
        fault,
        message: e.to_string(),
    }
}

/// Where an evaluation is, for a supervisor that bounds each stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage<'a> {
    Compile,
    Size(&'a str),
}

/// A candidate the compiler would see differently from kevo: a NUL byte
/// ends the source for NVRTC (kevo would still parse the declarations after
/// it), and a carriage return not followed by a line feed ends a line for
/// the compiler but not for kevo's line-based parsing. Either is rejected as
/// a compile error naming the line.
fn source_rejection(source: &str, extension: &str) -> Option<Outcome> {
    let bytes = source.as_bytes();
    let (at, what) = bytes.iter().enumerate().find_map(|(i, &b)| match b {
        0 => Some((i, "a NUL byte")),
        b'\r' if bytes.get(i + 1) != Some(&b'\n') => {
            Some((i, "a carriage return without a line feed"))
        }
        _ => None,
    })?;
    let line = source[..at].matches('\n').count() + 1;
    let message =
        format!("line {line}: the source contains {what}; kernel source must be plain text lines");
    Some(Outcome::CompileError {
        diagnostics: kevo_backend::CompileDiagnostics::from_log(format!(
            "candidate.{extension}:{line}:1: error: the source contains {what}"
        )),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_byte_is_a_compile_error_naming_its_line() {
        let o = source_rejection("__kernel void f() {}\n// x\0 kevo: block 1024\n", "cl").unwrap();
        assert!(
            o.summary().contains("line 2") && o.summary().contains("NUL"),
            "{}",
            o.summary()
        );
        assert!(source_rejection("__kernel void f() {}\r\n// ok\r\n", "cl").is_none());
        let o = source_rejection("// a\r// kevo: block 64\n", "cl").unwrap();
        assert!(
            o.summary().contains("line 1") && o.summary().contains("carriage return"),
            "{}",
            o.summary()
        );
    }
}
